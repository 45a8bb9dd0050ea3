/* SPDX-License-Identifier: Apache-2.0 */
/* `space bench`: the fleet benchmark (bench/fleet.c, linked in) on this host: a client of space.h like the rest. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "../bench/fleet.h"

#include "cli.h"

int cmd_bench(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("bench");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (cli->json) /* a report for people, with figures and ratios: no document to print */
		return cli_usage_error(cmd, "bench prints a text report: it has no --json output");
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	if (!args)
		return cli_error(-ENOMEM, "bench: out of memory");
	args[0] = "space bench";
	for (int i = 1; i < argc; i++)
		args[i] = argv[i];
	/* --state before the command names the state directory to use; else the bench makes a throwaway one */
	/* the HTTP burst runs this very binary as `space serve` */
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0)
		self[n] = '\0';
	int r = fleet_main(argc, args, cli->state_dir, n > 0 ? self : NULL);
	free(args);
	return r;
}
