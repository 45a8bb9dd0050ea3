/* SPDX-License-Identifier: Apache-2.0 */
/* space vm-boot: the microVMM runs in its own process (space-vmm); this hands the command line to it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"

int cli_helper_path(const char *name, char *buf, size_t len)
{
	/* Operator settings (docs/configuration.md), ignored in setuid contexts like the library's. */
	const char *env = !strcmp(name, "space-vmm") ? secure_getenv("SPACE_VMM_PATH") : secure_getenv("SPACE_AGENT_PATH");
	const char *dir = secure_getenv("SPACE_LIBEXEC_DIR");
	int n;
	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else
		n = snprintf(buf, len, "%s/%s", dir && *dir ? dir : SPACE_LIBEXEC_DIR, name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return access(buf, X_OK) < 0 ? -errno : 0;
}

int cmd_vm_boot(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("vm-boot");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (cli->json) /* it streams the guest's console; space-vmm's own errors are text */
		return cli_usage_error(cmd, "vm-boot streams a serial console: it has no --json output");
	char vmm[4096];
	int r = cli_helper_path("space-vmm", vmm, sizeof(vmm));
	if (r < 0)
		return cli_error(r, "vm-boot: helper %s: %s (set SPACE_VMM_PATH or reinstall libspace)", vmm,
				 strerror(-r));
	char **args = calloc((size_t)argc + 2, sizeof(char *));
	if (!args)
		return cli_error(-ENOMEM, "vm-boot: out of memory");
	args[0] = vmm;
	args[1] = (char *)"boot";
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	execv(vmm, args);
	r = -errno;
	free(args);
	return cli_error(r, "vm-boot: run %s: %s", vmm, strerror(-r));
}
