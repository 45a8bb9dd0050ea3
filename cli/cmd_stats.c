/* SPDX-License-Identifier: Apache-2.0 */
/* `space stats ID`: what a sandbox uses now (space_sandbox_get_usage), its CPU share over half a second. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util/util.h"

#define STATS_WINDOW_MS 500

int cmd_stats(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("stats");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc != 2 || argv[1][0] == '-')
		return cli_usage_error(cmd, "stats needs one sandbox ID");
	space_sandbox *sb;
	int r = space_sandbox_open(cli_ctx(cli), argv[1], &sb);
	if (r < 0)
		return cli_fail(cli, r, "open sandbox %s", argv[1]);
	struct space_sandbox_usage a = SPACE_SANDBOX_USAGE_INIT, b = SPACE_SANDBOX_USAGE_INIT;
	r = space_sandbox_get_usage(sb, &a);
	if (r == 0) {
		usleep(STATS_WINDOW_MS * 1000);
		r = space_sandbox_get_usage(sb, &b);
	}
	space_sandbox_free(sb);
	if (r < 0)
		return cli_fail(cli, r, "stats of %s", argv[1]);
	int64_t dt = b.time_ms - a.time_ms;
	double pct = dt > 0 && b.cpu_ns >= a.cpu_ns ? (double)(b.cpu_ns - a.cpu_ns) / ((double)dt * 1e6 * (b.cpus ? b.cpus : 1)) * 100 : 0;
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "id", argv[1]);
		cJSON_AddNumberToObject(j, "time_ms", (double)b.time_ms);
		cJSON_AddNumberToObject(j, "cpus", b.cpus);
		cJSON_AddNumberToObject(j, "cpu_pct", (double)(int)(pct * 100) / 100);
		cJSON_AddNumberToObject(j, "cpu_ns", (double)b.cpu_ns);
		cJSON_AddNumberToObject(j, "memory_bytes", (double)b.memory_bytes);
		cJSON_AddNumberToObject(j, "memory_cache_bytes", (double)b.memory_cache_bytes);
		cJSON_AddNumberToObject(j, "memory_limit_bytes", (double)b.memory_limit_bytes);
		cJSON_AddNumberToObject(j, "disk_used_bytes", (double)b.disk_used_bytes);
		cJSON_AddNumberToObject(j, "disk_total_bytes", (double)b.disk_total_bytes);
		return cli_print_json(j);
	}
	char s1[32], s2[32], s3[32];
	printf("CPU     %.1f%% of %u CPU%s (%.1f s in all)\n", pct, b.cpus, b.cpus == 1 ? "" : "s", (double)b.cpu_ns / 1e9);
	printf("MEMORY  %s of %s (and %s of page cache)\n", util_format_size(b.memory_bytes, s1, sizeof(s1)),
	       util_format_size(b.memory_limit_bytes, s2, sizeof(s2)), util_format_size(b.memory_cache_bytes, s3, sizeof(s3)));
	printf("DISK    %s of %s\n", util_format_size(b.disk_used_bytes, s1, sizeof(s1)),
	       util_format_size(b.disk_total_bytes, s2, sizeof(s2)));
	return EXIT_OK;
}
