/* SPDX-License-Identifier: Apache-2.0 */
/* space kernel ls|fetch|prepare: the kernels VM sandboxes boot, fetched and prepared ahead of use. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static int print_kernel(struct cli *cli, cJSON *arr, const char *kind, const char *kernel, const char *moddir,
			const char *kver)
{
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "kind", kind);
		cJSON_AddStringToObject(j, "kernel", kernel);
		cJSON_AddStringToObject(j, "modules", moddir);
		cJSON_AddStringToObject(j, "release", kver);
		if (arr) {
			cJSON_AddItemToArray(arr, j);
			return EXIT_OK;
		}
		return cli_print_json(j);
	}
	printf("%-8s %-24s %s%s%s\n", kind, *kver ? kver : "-", kernel, *moddir ? "  modules " : "", moddir);
	return EXIT_OK;
}

struct ls_state {
	struct cli *cli;
	cJSON *arr;
};

static int ls_one(const struct space_kernel_info *k, void *userdata)
{
	struct ls_state *s = userdata;
	print_kernel(s->cli, s->arr, k->kind, k->kernel, k->modules, k->release);
	return 0;
}

static int kernel_ls(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[1]);
	struct ls_state s = { cli, cli->json ? cJSON_CreateArray() : NULL };
	if (!cli->json)
		printf("%-8s %-24s %s\n", "KIND", "RELEASE", "KERNEL");
	int r = space_kernel_list(cli_ctx(cli), ls_one, &s);
	if (r < 0) {
		cJSON_Delete(s.arr);
		return cli_fail(cli, r, "list kernels");
	}
	return cli->json ? cli_print_json(s.arr) : EXIT_OK;
}

static int kernel_fetch(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[1]);
	struct space_kernel_info *k;
	int r = space_kernel_fetch(cli_ctx(cli), &k);
	if (r < 0)
		return cli_fail(cli, r, "fetch a kernel");
	r = print_kernel(cli, NULL, k->kind, k->kernel, k->modules, k->release);
	space_kernel_info_free(k);
	return r;
}

static int kernel_prepare(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	const char *tpl = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--template") && i + 1 < argc)
			tpl = argv[++i];
		else
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	/* --template takes a template directory as well as a name: the library reads any argument holding a
	 * '/' as a directory, so a directory named like a template gets one. */
	char path[PATH_MAX] = "";
	struct stat st;
	if (tpl && !strchr(tpl, '/') && stat(tpl, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(path, sizeof(path), "./%s", tpl);
		tpl = path;
	}
	struct space_boot_assets *a;
	int r = space_kernel_prepare(cli_ctx(cli), tpl, &a);
	if (r < 0)
		return cli_fail(cli, r, "prepare the VM boot assets%s%s", tpl ? " of " : "", tpl ? tpl : "");
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "kernel", a->kernel);
		cJSON_AddStringToObject(j, "initrd", a->initrd);
		cJSON_AddStringToObject(j, "cmdline", a->cmdline);
		cJSON_AddStringToObject(j, "release", a->release);
		space_boot_assets_free(a);
		return cli_print_json(j);
	}
	printf("kernel   %s\ninitrd   %s\ncmdline  %s\nrelease  %s\n", a->kernel, a->initrd, a->cmdline,
	       *a->release ? a->release : "-");
	space_boot_assets_free(a);
	return EXIT_OK;
}

int cmd_kernel(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("kernel");
	if (argc < 2)
		return cli_usage_error(cmd, "kernel needs a command: ls, fetch or prepare");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *sub = argv[1];
	if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
		return kernel_ls(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "fetch"))
		return kernel_fetch(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "prepare"))
		return kernel_prepare(cli, cmd, argc - 1, argv + 1);
	return cli_usage_error(cmd, "unknown kernel command '%s'", sub);
}
