/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve` and `space apikey` in a build without libmicrohttpd. */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static int unavailable(const char *name)
{
	return cli_error(-EOPNOTSUPP, "%s: this space was built without libmicrohttpd (install libmicrohttpd-dev and "
			 "rebuild)", name);
}

int cmd_serve(struct cli *cli, int argc, char **argv)
{
	(void)cli, (void)argc, (void)argv;
	return unavailable("serve");
}

int cmd_apikey(struct cli *cli, int argc, char **argv)
{
	(void)cli, (void)argc, (void)argv;
	return unavailable("apikey");
}

int cmd_cluster(struct cli *cli, int argc, char **argv)
{
	(void)cli, (void)argc, (void)argv;
	return unavailable("cluster");
}
