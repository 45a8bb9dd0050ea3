/* SPDX-License-Identifier: Apache-2.0 */
/* Periodic file snapshots in the CLI: space template set-snapshots, and the policy in listings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/util.h"

static void add_policy(cJSON *j, const struct space_snapshot_policy *p, bool with_pid)
{
	if (!p->every_s) {
		cJSON_AddNullToObject(j, "snapshots");
		return;
	}
	cJSON *s = cJSON_AddObjectToObject(j, "snapshots");
	cJSON_AddNumberToObject(s, "every", p->every_s);
	cJSON_AddNumberToObject(s, "keep", p->keep);
	if (with_pid) {
		if (p->pid > 0)
			cJSON_AddNumberToObject(s, "pid", p->pid);
		else
			cJSON_AddNullToObject(s, "pid");
	}
}

void cli_sandbox_snapshots_json(struct cli *cli, cJSON *j, const char *id)
{
	struct space_snapshot_policy p = SPACE_SNAPSHOT_POLICY_INIT;
	if (space_sandbox_get_snapshot_policy(cli_ctx(cli), id, &p) == 0)
		add_policy(j, &p, true);
}

void cli_template_snapshots_json(struct cli *cli, cJSON *j, const char *name)
{
	struct space_snapshot_policy p = SPACE_SNAPSHOT_POLICY_INIT;
	if (space_template_get_snapshot_policy(cli_ctx(cli), name, &p) == 0)
		add_policy(j, &p, false);
}

/* space template set-snapshots NAME --every S [--keep K] | --off */
int cli_template_set_snapshots(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	const char *name = NULL;
	uint64_t every = 0, keep = 0;
	bool off = false, have_every = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--off")) {
			off = true;
		} else if (!strcmp(a, "--every") || !strcmp(a, "--keep")) {
			bool is_every = a[2] == 'e';
			if (i + 1 >= argc)
				return cli_usage_error(cmd, "%s needs a number", a);
			uint32_t d;
			if (is_every && cli_parse_duration(cmd, a, argv[++i], 1, 7u * 24 * 3600, &d) < 0)
				return EXIT_USAGE;
			if (is_every)
				every = d;
			else if (util_parse_uint(argv[++i], 1, 100, &keep) < 0)
				return cli_usage_error(cmd, "%s needs a number from 1 to 100, not '%s'", a, argv[i]);
			have_every |= is_every;
		} else if (a[0] == '-') {
			return cli_usage_error(cmd, "unknown option '%s'", a);
		} else if (!name) {
			name = a;
		} else {
			return cli_usage_error(cmd, "unexpected argument '%s'", a);
		}
	}
	if (!name)
		return cli_usage_error(cmd, "template set-snapshots needs a NAME");
	if (off == have_every || (off && keep))
		return cli_usage_error(cmd, "template set-snapshots needs either --every SECONDS [--keep K] or --off");
	int r = space_template_set_snapshot_policy(cli_ctx(cli), name, (uint32_t)every, (uint32_t)keep);
	if (r < 0)
		return cli_fail(cli, r, "set the snapshot policy of template %s", name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		cli_template_snapshots_json(cli, j, name);
		return cli_print_json(j);
	}
	return EXIT_OK;
}
