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
	if (cli_wants_help(argc, argv)) {
		cli_help(cmd);
		printf("\nBoots IMG (bzImage or vmlinux ELF) with the Linux 64-bit boot protocol and streams the serial\n"
		       "console to stdout. Exits 0 when the guest powers off; see `space-vmm --help` for the other\n"
		       "exit statuses.\n");
		return EXIT_OK;
	}
	char vmm[4096];
	int r = cli_helper_path("space-vmm", vmm, sizeof(vmm));
	if (r < 0) {
		fprintf(stderr, "space: vm-boot: helper %s: %s (set SPACE_VMM_PATH or reinstall libspace)\n", vmm,
			strerror(-r));
		return EXIT_FAIL;
	}
	char **args = calloc((size_t)argc + 2, sizeof(char *));
	if (!args)
		return EXIT_FAIL;
	args[0] = vmm;
	args[1] = (char *)"boot";
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	execv(vmm, args);
	fprintf(stderr, "space: vm-boot: run %s: %s\n", vmm, strerror(errno));
	free(args);
	return EXIT_FAIL;
}
