/* SPDX-License-Identifier: Apache-2.0 */
/* space pause, resume, checkpoint, checkpoints, rollback, fork */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

/* Opens the sandbox named by id, or prints why not. */
static int open_sandbox(struct cli *cli, const char *id, space_sandbox **ret)
{
	int r = space_sandbox_open(cli_ctx(cli), id, ret);
	return r < 0 ? cli_fail(cli, r, "open sandbox %s", id) : EXIT_OK;
}

cJSON *cli_checkpoint_json(const struct space_checkpoint_info *c, bool with_path)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "id", c->id);
	cJSON_AddStringToObject(j, "sandbox", c->sandbox_id);
	cJSON_AddStringToObject(j, "template", c->template_name);
	if (c->name[0])
		cJSON_AddStringToObject(j, "name", c->name);
	else
		cJSON_AddNullToObject(j, "name");
	cJSON_AddStringToObject(j, "kind", c->kind);
	cJSON_AddBoolToObject(j, "automatic", space_checkpoint_is_automatic(c));
	if (with_path)
		cJSON_AddStringToObject(j, "path", c->path);
	cJSON_AddNumberToObject(j, "created_ms", (double)c->created_ms);
	return j;
}

void cli_checkpoint_names(struct space_checkpoint_info *const *list, size_t n, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && used + 1 < len; i++) {
		const struct space_checkpoint_info *c = list[i];
		int w = c->name[0] ? snprintf(buf + used, len - used, "%s%s (%s)", i ? ", " : "", c->name, c->id)
				   : snprintf(buf + used, len - used, "%s%s", i ? ", " : "", c->id);
		if (w < 0 || (size_t)w >= len - used) {
			snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
			return;
		}
		used += (size_t)w;
	}
}

void cli_report_kept_checkpoints(struct cli *cli, const char *sandbox_id)
{
	struct space_checkpoint_info **list = NULL;
	size_t n = 0;
	if (space_checkpoint_list(cli_ctx(cli), sandbox_id, &list, &n) < 0 || n == 0) {
		space_checkpoint_info_list_free(list);
		return;
	}
	char names[512];
	cli_checkpoint_names(list, n, names, sizeof(names));
	_cleanup_free_ char *shown = util_escape_dup(names, 0); /* names are the API caller's text */
	fprintf(stderr,
		"space: %s: kept %zu checkpoint%s: %s (remove them with `space checkpoint rm ID...` or `space rm "
		"--with-checkpoints`)\n",
		sandbox_id, n, n == 1 ? "" : "s", shown ? shown : "?");
	space_checkpoint_info_list_free(list);
}

static int pause_resume(struct cli *cli, int argc, char **argv, bool pause)
{
	const struct cli_command *cmd = cli_find_command(pause ? "pause" : "resume");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc != 2)
		return cli_usage_error(cmd, "%s needs one sandbox ID", cmd->name);
	if (argv[1][0] == '-')
		return cli_usage_error(cmd, "unknown option '%s'", argv[1]);
	space_sandbox *sb;
	int rc = open_sandbox(cli, argv[1], &sb);
	if (rc)
		return rc;
	int r = pause ? space_sandbox_pause(sb) : space_sandbox_resume(sb);
	if (r < 0)
		rc = cli_fail(cli, r, "%s %s", cmd->name, argv[1]);
	else if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "id", argv[1]);
		cJSON_AddStringToObject(j, "status", pause ? "paused" : "running");
		rc = cli_print_json(j);
	}
	space_sandbox_free(sb);
	return rc;
}

int cmd_pause(struct cli *cli, int argc, char **argv)
{
	return pause_resume(cli, argc, argv, true);
}

int cmd_resume(struct cli *cli, int argc, char **argv)
{
	return pause_resume(cli, argc, argv, false);
}

static int checkpoint_rm(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	if (argc < 3)
		return cli_usage_error(cmd, "checkpoint rm needs at least one checkpoint ID");
	int rc = EXIT_OK;
	for (int i = 2; i < argc; i++) {
		int r = space_checkpoint_remove(cli_ctx(cli), argv[i]);
		if (r < 0)
			rc = cli_fail(cli, r, "remove checkpoint %s", argv[i]);
	}
	return rc;
}

int cmd_checkpoint(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("checkpoint");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc >= 2 && !strcmp(argv[1], "rm"))
		return checkpoint_rm(cli, cmd, argc, argv);
	const char *id = NULL, *name = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--name")) {
			if (++i >= argc)
				return cli_usage_error(cmd, "--name needs a value");
			name = argv[i];
		} else if (!strncmp(argv[i], "--name=", 7)) {
			name = argv[i] + 7;
		} else if (argv[i][0] == '-' || id) {
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
		} else {
			id = argv[i];
		}
	}
	if (!id)
		return cli_usage_error(cmd, "checkpoint needs a sandbox ID");
	struct space_checkpoint_info named = { .size = sizeof(named), .name = name ? name : "" };
	if (space_checkpoint_is_automatic(&named))
		return cli_usage_error(cmd, "names auto-<digits> are those of periodic snapshots, which are pruned");
	space_sandbox *sb;
	int rc = open_sandbox(cli, id, &sb);
	if (rc)
		return rc;
	char cp[SPACE_CHECKPOINT_ID_MAX];
	int r = space_checkpoint_create(sb, name, cp);
	space_sandbox_free(sb);
	if (r < 0)
		return cli_fail(cli, r, "checkpoint %s", id);
	struct space_checkpoint_info *c;
	if (cli->json && space_checkpoint_get(cli_ctx(cli), cp, &c) == 0) {
		cJSON *j = cli_checkpoint_json(c, true);
		space_checkpoint_info_free(c);
		return cli_print_json(j);
	}
	printf("%s\n", cp);
	return EXIT_OK;
}

int cmd_checkpoints(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("checkpoints");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc > 2)
		return cli_usage_error(cmd, "checkpoints takes at most one sandbox ID");
	if (argc == 2 && argv[1][0] == '-')
		return cli_usage_error(cmd, "unknown option '%s'", argv[1]);
	struct space_checkpoint_info **list;
	size_t n;
	int r = space_checkpoint_list(cli_ctx(cli), argc == 2 ? argv[1] : NULL, &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "list checkpoints");
	if (cli->json) {
		cJSON *a = cJSON_CreateArray();
		for (size_t i = 0; i < n; i++)
			cJSON_AddItemToArray(a, cli_checkpoint_json(list[i], true));
		space_checkpoint_info_list_free(list);
		return cli_print_json(a);
	}
	printf("%-22s %-22s %-12s %-5s %-19s %s\n", "ID", "SANDBOX", "TEMPLATE", "KIND", "CREATED", "NAME");
	for (size_t i = 0; i < n; i++) {
		char t[32];
		const struct space_checkpoint_info *c = list[i];
		printf("%-22s %-22s %-12s %-5s %-19s %s\n", c->id, c->sandbox_id, c->template_name, c->kind,
		       cli_time(c->created_ms, t, sizeof(t)), c->name);
	}
	space_checkpoint_info_list_free(list);
	return EXIT_OK;
}

int cmd_rollback(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("rollback");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc != 3)
		return cli_usage_error(cmd, "rollback needs a sandbox ID and a checkpoint ID");
	space_sandbox *sb;
	int rc = open_sandbox(cli, argv[1], &sb);
	if (rc)
		return rc;
	int r = space_sandbox_rollback(sb, argv[2]);
	if (r < 0)
		rc = cli_fail(cli, r, "roll %s back to %s", argv[1], argv[2]);
	else if (cli->json) {
		cJSON *j = cli_sandbox_handle_json(sb);
		if (j)
			rc = cli_print_json(j);
	}
	space_sandbox_free(sb);
	return rc;
}

int cmd_fork(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("fork");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *cp = NULL, *sandbox = NULL;
	uint64_t count = 1;
	uint32_t timeout_s = 0; /* 0: what is left of the sandbox's lifetime */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--count")) {
			if (++i >= argc || util_parse_uint(argv[i], 1, 64, &count) < 0)
				return cli_usage_error(cmd, "--count needs a number from 1 to 64");
		} else if (!strcmp(argv[i], "--timeout")) {
			if (++i >= argc)
				return cli_usage_error(cmd, "--timeout needs a duration (30s, 10m, 2h, 1d)");
			if (cli_parse_duration(cmd, "--timeout", argv[i], 1, SPACE_TIMEOUT_MAX_S, &timeout_s) < 0)
				return EXIT_USAGE;
		} else if (argv[i][0] == '-' || sandbox) {
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
		} else {
			sandbox = cp; /* fork [ID] CP: a second word makes the first the sandbox */
			cp = argv[i];
		}
	}
	if (!cp)
		return cli_usage_error(cmd, "fork needs a checkpoint ID or name");
	/* A name is looked up among the sandbox's checkpoints, or among all when no sandbox is given. */
	struct space_checkpoint_info *c = NULL;
	int r = space_checkpoint_find(cli_ctx(cli), sandbox, cp, &c);
	if (r < 0)
		return cli_fail(cli, r, "fork %s", cp);
	char id[SPACE_CHECKPOINT_ID_MAX];
	snprintf(id, sizeof(id), "%s", c->id);
	bool other = sandbox && strcmp(c->sandbox_id, sandbox);
	if (other)
		cli_error(-EINVAL, "fork %s: checkpoint %s is of sandbox %s, not %s", cp, c->id, c->sandbox_id, sandbox);
	space_checkpoint_info_free(c);
	if (other)
		return EXIT_FAIL;
	space_sandbox *sbs[64];
	struct space_checkpoint_fork_options fo = SPACE_CHECKPOINT_FORK_OPTIONS_INIT;
	fo.count = (uint32_t)count;
	fo.timeout_s = timeout_s;
	r = space_checkpoint_fork(cli_ctx(cli), id, &fo, sbs);
	if (r < 0)
		return cli_fail(cli, r, "fork %s", cp);
	cJSON *a = cli->json ? cJSON_CreateArray() : NULL;
	for (uint64_t i = 0; i < count; i++) {
		cJSON *j = a ? cli_sandbox_handle_json(sbs[i]) : NULL;
		if (j)
			cJSON_AddItemToArray(a, j);
		else if (!a)
			printf("%s\n", space_sandbox_id(sbs[i]));
		space_sandbox_free(sbs[i]);
	}
	return a ? cli_print_json(a) : EXIT_OK;
}
