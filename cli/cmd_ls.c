/* SPDX-License-Identifier: Apache-2.0 */
/* space ls */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

cJSON *cli_sandbox_json(const struct space_sandbox_info *b)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", b->id);
	cJSON_AddStringToObject(j, "template", b->template_name);
	cJSON_AddStringToObject(j, "isolation", b->isolation);
	cJSON_AddStringToObject(j, "status", space_sandbox_status_name(b->status));
	if (b->reason[0])
		cJSON_AddStringToObject(j, "reason", b->reason);
	cJSON_AddNumberToObject(j, "pid", b->pid);
	cJSON_AddNumberToObject(j, "cpus", b->cpus);
	cJSON_AddNumberToObject(j, "memory_mib", b->memory_mib);
	cJSON_AddNumberToObject(j, "created_ms", (double)b->created_ms);
	cJSON_AddNumberToObject(j, "updated_ms", (double)b->updated_ms);
	if (b->expires_ms)
		cJSON_AddNumberToObject(j, "expires_ms", (double)b->expires_ms);
	cJSON_AddStringToObject(j, "path", b->path);
	return j;
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("ls");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc > 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[1]);
	struct space_sandbox_info *list;
	size_t n;
	int r = space_sandbox_list(cli_ctx(cli), &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "list sandboxes");
	if (cli->json) {
		cJSON *a = cJSON_CreateArray();
		for (size_t i = 0; i < n; i++) {
			cJSON *j = cli_sandbox_json(&list[i]);
			cli_sandbox_snapshots_json(cli, j, list[i].id);
			cJSON_AddItemToArray(a, j);
		}
		free(list);
		return cli_print_json(a);
	}
	printf("%-20s %-12s %-5s %-9s %7s %5s %6s  %s\n", "ID", "TEMPLATE", "ISO", "STATUS", "PID", "CPUS", "MEM", "CREATED");
	for (size_t i = 0; i < n; i++) {
		char tm[32];
		printf("%-20s %-12s %-5s %-9s %7d %5u %5uM  %s%s%s\n", list[i].id, list[i].template_name,
		       list[i].isolation, space_sandbox_status_name(list[i].status), list[i].pid, list[i].cpus,
		       list[i].memory_mib, cli_time(list[i].created_ms, tm, sizeof(tm)), list[i].reason[0] ? "  " : "",
		       list[i].reason);
	}
	free(list);
	return EXIT_OK;
}
