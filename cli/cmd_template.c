/* SPDX-License-Identifier: Apache-2.0 */
/* space template import|ls|rm */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/util.h"

static int template_import(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rootfs", required_argument, NULL, 'r' },
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "size", required_argument, NULL, 's' },
		{ "modules", required_argument, NULL, 'm' },
		{ 0 },
	};
	struct space_template_import_options o = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	o.progress = cli->json ? NULL : cli_progress;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': o.rootfs = optarg; break;
		case 'k': o.kernel = optarg; break;
		case 'i': o.initrd = optarg; break;
		case 'm': o.modules_dir = optarg; break;
		case 's':
			if (util_parse_size(optarg, &o.size_bytes) < 0 || o.size_bytes < (16u << 20))
				return cli_usage_error(cmd, "invalid --size '%s' (at least 16M, e.g. 2G)", optarg);
			break;
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_error(cmd, "template import needs a NAME");
	if (optind + 1 < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind + 1]);
	o.name = argv[optind];
	if (!o.rootfs)
		return cli_usage_error(cmd, "template import needs --rootfs DIR|FILE.tar|FILE.ext4");
	int r = space_template_import(cli_ctx(cli), &o);
	if (r < 0)
		return cli_fail(cli, r, "import template %s", o.name);
	struct space_template_info t;
	if (space_template_get(cli->ctx, o.name, &t) < 0)
		return cli_fail(cli, r, "import template %s", o.name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", t.name);
		cJSON_AddStringToObject(j, "path", t.path);
		cJSON_AddNumberToObject(j, "rootfs_bytes", (double)t.rootfs_bytes);
		return cli_print_json(j);
	}
	char sz[32];
	printf("template %s imported: %s (rootfs %s)\n", t.name, t.path,
	       util_format_size(t.rootfs_bytes, sz, sizeof(sz)));
	return EXIT_OK;
}

static int template_ls(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[1]);
	struct space_template_info *list;
	size_t n;
	int r = space_template_list(cli_ctx(cli), &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "list templates");
	if (cli->json) {
		cJSON *a = cJSON_CreateArray();
		for (size_t i = 0; i < n; i++) {
			cJSON *j = cJSON_CreateObject();
			cJSON_AddStringToObject(j, "name", list[i].name);
			cJSON_AddStringToObject(j, "path", list[i].path);
			char p[4200];
			snprintf(p, sizeof(p), "%s/rootfs.ext4", list[i].path);
			cJSON_AddStringToObject(j, "rootfs", p);
			cJSON_AddNumberToObject(j, "rootfs_bytes", (double)list[i].rootfs_bytes);
			cJSON_AddBoolToObject(j, "kernel", list[i].has_kernel);
			cJSON_AddBoolToObject(j, "initrd", list[i].has_initrd);
			cJSON_AddNumberToObject(j, "created_ms", (double)list[i].created_ms);
			cJSON_AddNumberToObject(j, "sandboxes", list[i].sandboxes);
			cJSON_AddNumberToObject(j, "checkpoints", list[i].checkpoints);
			cJSON_AddItemToArray(a, j);
		}
		free(list);
		return cli_print_json(a);
	}
	printf("%-20s %10s %-6s %-6s %9s  %s\n", "NAME", "ROOTFS", "KERNEL", "INITRD", "SANDBOXES", "CREATED");
	for (size_t i = 0; i < n; i++) {
		char sz[32], tm[32];
		printf("%-20s %10s %-6s %-6s %9u  %s\n", list[i].name,
		       util_format_size(list[i].rootfs_bytes, sz, sizeof(sz)), list[i].has_kernel ? "yes" : "-",
		       list[i].has_initrd ? "yes" : "-", list[i].sandboxes,
		       cli_time(list[i].created_ms, tm, sizeof(tm)));
	}
	free(list);
	return EXIT_OK;
}

static int template_rm(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	bool force = false;
	const char *name = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
			force = true;
		else if (argv[i][0] == '-')
			return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
		else if (!name)
			name = argv[i];
		else
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	if (!name)
		return cli_usage_error(cmd, "template rm needs a NAME");
	int r = space_template_remove(cli_ctx(cli), name, force);
	if (r < 0)
		return cli_fail(cli, r, "remove template %s", name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "removed", name);
		return cli_print_json(j);
	}
	return EXIT_OK;
}

int cmd_template(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("template");
	if (argc < 2)
		return cli_usage_error(cmd, "template needs a command: import, ls or rm");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *sub = argv[1];
	if (!strcmp(sub, "import"))
		return template_import(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
		return template_ls(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "rm") || !strcmp(sub, "remove"))
		return template_rm(cli, cmd, argc - 1, argv + 1);
	return cli_usage_error(cmd, "unknown template command '%s'", sub);
}
