/* SPDX-License-Identifier: Apache-2.0 */
/* space init, space pool */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util/util.h"

/* Whether the library filled the pool's accounting (used, promised). */
static bool pool_has_accounting(const struct space_pool_info *p)
{
	return p->size >= offsetof(struct space_pool_info, sandbox_disks) + sizeof(p->sandbox_disks);
}

void cli_pool_space(const struct space_pool_info *p, const char *prefix, FILE *warn)
{
	if (!pool_has_accounting(p))
		return;
	char a[32], b[32], c[32];
	printf("%s%s promised to %u sandbox disk%s; %s used, %s free (statvfs: approximate on btrfs)\n", prefix,
	       util_format_size(p->promised_bytes, a, sizeof(a)), p->sandbox_disks, p->sandbox_disks == 1 ? "" : "s",
	       util_format_size(p->used_bytes, b, sizeof(b)), util_format_size(p->free_bytes, c, sizeof(c)));
	if (p->promised_bytes > p->free_bytes)
		fprintf(warn, "%swarning: the sandboxes' disks are promised %s, more than the %s the pool has free: "
			      "their writes can fill it\n",
			warn == stderr ? "space: " : "", a, c);
}

static cJSON *pool_json(const struct space_pool_info *p, const char *state_dir)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "state_dir", state_dir);
	cJSON_AddStringToObject(j, "pool", p->path);
	if (p->loop_image[0])
		cJSON_AddStringToObject(j, "loop_image", p->loop_image);
	else
		cJSON_AddNullToObject(j, "loop_image");
	cJSON_AddStringToObject(j, "isolation", p->isolation);
	cJSON_AddNumberToObject(j, "total_bytes", (double)p->total_bytes);
	cJSON_AddNumberToObject(j, "free_bytes", (double)p->free_bytes);
	if (pool_has_accounting(p)) {
		/* used_bytes: statvfs's, an approximation on btrfs (shared extents, metadata) */
		cJSON_AddNumberToObject(j, "used_bytes", (double)p->used_bytes);
		cJSON_AddNumberToObject(j, "promised_bytes", (double)p->promised_bytes);
		cJSON_AddNumberToObject(j, "sandbox_disks", p->sandbox_disks);
		cJSON_AddBoolToObject(j, "overcommitted", p->promised_bytes > p->free_bytes);
	}
	return j;
}

static void pool_print(const struct space_pool_info *p, const char *state_dir)
{
	char a[32], b[32];
	printf("state dir:  %s\n", state_dir);
	if (p->loop_image[0])
		printf("pool:       %s (loop image %s)\n", p->path, p->loop_image);
	else
		printf("pool:       %s\n", p->path);
	printf("isolation:  %s%s\n", p->isolation,
	       !strcmp(p->isolation, "jail") ? " (weaker boundary: shares the host kernel)" : "");
	printf("space:      %s free of %s\n", util_format_size(p->free_bytes, a, sizeof(a)),
	       util_format_size(p->total_bytes, b, sizeof(b)));
	cli_pool_space(p, "disks:      ", stdout);
}

static int show_pool(struct cli *cli)
{
	struct space_pool_info *p;
	int r = space_pool_get_info(cli->ctx, &p);
	if (r < 0)
		return cli_fail(cli, r, "pool");
	int idmap = space_identity_map_allowed(cli->ctx);
	if (cli->json) {
		cJSON *j = pool_json(p, space_ctx_state_dir(cli->ctx));
		space_pool_info_free(p);
		cJSON_AddBoolToObject(j, "identity_map_allowed", idmap > 0);
		return cli_print_json(j);
	}
	pool_print(p, space_ctx_state_dir(cli->ctx));
	space_pool_info_free(p);
	if (idmap > 0)
		printf("uid map:    identity map ALLOWED where idmapped mounts fail (root in a jail may be host uid 0: "
		       "a weaker boundary; `space init --refuse-identity-map` turns it off)\n");
	return EXIT_OK;
}

int cmd_init(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("init");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	static const struct option opts[] = {
		{ "pool", required_argument, NULL, 'p' },
		{ "loop-pool", required_argument, NULL, 'l' },
		{ "isolation", required_argument, NULL, 'i' },
		{ "allow-identity-map", no_argument, NULL, 'A' },
		{ "refuse-identity-map", no_argument, NULL, 'R' },
		{ 0 },
	};
	struct space_init_options o = SPACE_INIT_OPTIONS_INIT;
	o.progress = cli->json ? NULL : cli_progress;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o.pool_path = optarg;
			break;
		case 'l':
			if (util_parse_size(optarg, &o.loop_pool_size) < 0 || !o.loop_pool_size)
				return cli_usage_error(cmd, "invalid --loop-pool size '%s' (e.g. 4G, 512M)", optarg);
			break;
		case 'i':
			if (strcmp(optarg, "vm") && strcmp(optarg, "jail"))
				return cli_usage_error(cmd, "--isolation must be vm or jail, not '%s'", optarg);
			o.isolation = optarg;
			break;
		case 'A':
		case 'R':
			o.identity_map = c == 'A' ? SPACE_IDENTITY_MAP_ALLOW : SPACE_IDENTITY_MAP_REFUSE;
			break;
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	if (o.pool_path && o.loop_pool_size)
		return cli_usage_error(cmd, "--pool and --loop-pool exclude each other");
	space_ctx *ctx = cli_ctx(cli);
	int r = space_init(ctx, &o);
	if (r < 0)
		return cli_fail(cli, r, "init %s", space_ctx_state_dir(ctx));
	if (o.isolation && !strcmp(o.isolation, "jail"))
		fprintf(stderr, "space: note: jail isolation shares the host kernel: it is a weaker boundary than a "
				"VM\n");
	return show_pool(cli);
}

int cmd_pool(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("pool");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *sub = argc > 1 ? argv[1] : "info";
	if (!strcmp(sub, "fill")) /* the warm pools of templates */
		return cli_pool_fill(cli, cmd, argc - 1, argv + 1);
	if (argc > 2)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[2]);
	cli_ctx(cli);
	if (!strcmp(sub, "info"))
		return show_pool(cli);
	if (!strcmp(sub, "unmount")) {
		int r = space_pool_unmount(cli->ctx);
		if (r < 0)
			return cli_fail(cli, r, "unmount pool");
		return EXIT_OK;
	}
	return cli_usage_error(cmd, "unknown pool command '%s'", sub);
}
