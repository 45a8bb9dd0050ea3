/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space ls
 *
 * Who makes each field: id, isolation, status, numbers, times and path come from the library; template
 * from the operator or an API caller (a validated name); reason may quote the sandbox (its agent's or its
 * VMM's last words, a guest's boot failure), so it is escaped for the terminal and valid UTF-8 in JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define LS_REASON_MAX 256

cJSON *cli_sandbox_json(const struct space_sandbox_info *b)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", b->id);
	cJSON_AddStringToObject(j, "template", b->template_name);
	cJSON_AddStringToObject(j, "isolation", b->isolation);
	cJSON_AddStringToObject(j, "status", space_sandbox_status_name(b->status));
	if (b->reason[0]) {
		_cleanup_free_ char *reason = util_utf8_sanitize(b->reason, strlen(b->reason));
		cJSON_AddStringToObject(j, "reason", reason ? reason : "");
	}
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

cJSON *cli_sandbox_handle_json(space_sandbox *sb)
{
	struct space_sandbox_info *info;
	if (space_sandbox_get_info(sb, &info) < 0)
		return NULL;
	cJSON *j = cli_sandbox_json(info);
	space_sandbox_info_free(info);
	return j;
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("ls");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc > 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[1]);
	struct space_sandbox_info **list;
	size_t n;
	/* Listing writes nothing: expired sandboxes are destroyed and dead ones recorded failed first. */
	(void)space_sandbox_reap(cli_ctx(cli));
	int r = space_sandbox_list(cli_ctx(cli), &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "list sandboxes");
	if (cli->json) {
		cJSON *a = cJSON_CreateArray();
		for (size_t i = 0; i < n; i++) {
			cJSON *j = cli_sandbox_json(list[i]);
			cli_sandbox_snapshots_json(cli, j, list[i]->id);
			cJSON_AddItemToArray(a, j);
		}
		space_sandbox_info_list_free(list);
		return cli_print_json(a);
	}
	if (space_identity_map_allowed(cli_ctx(cli)) > 0)
		fprintf(stderr, "space: warning: this state directory allows the identity uid map (space init "
				"--allow-identity-map): a jail whose rootfs the kernel cannot idmap runs with root inside "
				"as host uid 0, a weaker boundary\n");
	printf("%-20s %-12s %-5s %-9s %7s %5s %6s %8s  %s\n", "ID", "TEMPLATE", "ISO", "STATUS", "PID", "CPUS", "MEM",
	       "EXPIRES", "CREATED");
	int64_t now = util_wall_ms();
	for (size_t i = 0; i < n; i++) {
		const struct space_sandbox_info *b = list[i];
		/* A reason may quote the sandbox: escaped, and cut at LS_REASON_MAX bytes. */
		char tm[32], left[32] = "-", reason[4 * LS_REASON_MAX + 1];
		util_escape_text(reason, sizeof(reason), b->reason, strnlen(b->reason, LS_REASON_MAX),
				 UTIL_ESC_KEEP_BACKSLASH);
		/* Time left of its lifetime, rounded up: "9m58s"; "-" when it has none. */
		if (b->expires_ms && b->expires_ms <= now)
			snprintf(left, sizeof(left), "expired");
		else if (b->expires_ms)
			cli_duration((uint64_t)(b->expires_ms - now + 999) / 1000, left, sizeof(left));
		printf("%-20s %-12s %-5s %-9s %7d %5u %5uM %8s  %s%s%s\n", b->id, b->template_name, b->isolation,
		       space_sandbox_status_name(b->status), b->pid, b->cpus, b->memory_mib, left,
		       cli_time(b->created_ms, tm, sizeof(tm)), reason[0] ? "  " : "", reason);
	}
	space_sandbox_info_list_free(list);
	struct space_pool_info *pool;
	if (space_pool_get_info(cli_ctx(cli), &pool) == 0) {
		cli_pool_space(pool, "pool: ", stderr);
		space_pool_info_free(pool);
	}
	return EXIT_OK;
}
