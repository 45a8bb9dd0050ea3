/* SPDX-License-Identifier: Apache-2.0 */
/* space template import|build|export|ls|rm|snapshot|set-pool|set-start, space pool fill */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_net.h"
#include "util/util.h"

/* The image fields of t, when this library has them and t was made from an image. */
static bool image_fields(const struct space_template_info *t)
{
	return t->size >= offsetof(struct space_template_info, image_config) + sizeof(t->image_config) &&
	       t->image_digest[0];
}

/* "image": {"digest", and the config's defaults} or null, of `template ls --json` and import --json. */
static void add_image_json(cJSON *j, const struct space_template_info *t)
{
	if (!image_fields(t)) {
		cJSON_AddNullToObject(j, "image");
		return;
	}
	cJSON *cfg = cJSON_Parse(t->image_config);
	if (!cfg)
		cfg = cJSON_CreateObject();
	cJSON_AddStringToObject(cfg, "digest", t->image_digest);
	cJSON_AddItemToObject(j, "image", cfg);
}

static int template_import(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rootfs", required_argument, NULL, 'r' },
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "size", required_argument, NULL, 's' },
		{ "modules", required_argument, NULL, 'm' },
		{ "image", required_argument, NULL, 'g' },
		{ "force", no_argument, NULL, 'f' },
		{ 0 },
	};
	struct space_template_import_options o = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	o.progress = cli->json ? NULL : cli_progress_bytes;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': o.rootfs = optarg; break;
		case 'k': o.kernel = optarg; break;
		case 'i': o.initrd = optarg; break;
		case 'm': o.modules_dir = optarg; break;
		case 'g': o.image = optarg; break;
		case 'f': o.force = true; break;
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
	if (!o.rootfs == !o.image)
		return cli_usage_error(cmd, "template import needs --rootfs DIR|FILE.tar|FILE.ext4 or --image PATH (one)");
	uint64_t t0 = util_now_ns();
	int r = space_template_import(cli_ctx(cli), &o);
	cli_progress_end();
	if (r < 0)
		return cli_fail(cli, r, "import template %s", o.name);
	uint64_t took_ms = (util_now_ns() - t0) / 1000000;
	struct space_template_info *t;
	if (space_template_get(cli->ctx, o.name, &t) < 0)
		return cli_fail(cli, r, "import template %s", o.name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", t->name);
		cJSON_AddStringToObject(j, "path", t->path);
		cJSON_AddNumberToObject(j, "rootfs_bytes", (double)t->rootfs_bytes);
		add_image_json(j, t);
		cJSON_AddNumberToObject(j, "import_ms", (double)took_ms);
		space_template_info_free(t);
		return cli_print_json(j);
	}
	char sz[32];
	printf("template %s imported: %s (rootfs %s)\n", t->name, t->path,
	       util_format_size(t->rootfs_bytes, sz, sizeof(sz)));
	if (image_fields(t))
		printf("image %s\n", t->image_digest);
	space_template_info_free(t);
	return EXIT_OK;
}

static int build_output(int stream, const void *data, size_t len, void *userdata)
{
	(void)userdata;
	cli_progress_end();
	/* RUN's output to our stderr (stdout stays for --json): as the command wrote it, as `space run` does */
	ssize_t w = write(STDERR_FILENO, data, len);
	(void)w;
	(void)stream;
	return 0;
}

/* space template build NAME [-f Dockerfile] [CONTEXT] [--no-cache] [--build-arg K=V]... */
static int template_build(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "no-cache", no_argument, NULL, 'n' },
		{ "build-arg", required_argument, NULL, 'a' },
		{ "isolation", required_argument, NULL, 'I' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		CLI_NET_OPTIONS,
		{ 0 },
	};
	struct space_template_build_options o = SPACE_TEMPLATE_BUILD_OPTIONS_INIT;
	const char *args[257] = { 0 };
	size_t nargs = 0;
	struct cli_net net = { 0 };
	uint64_t cpus = 0;
	uint32_t mem = 0;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "f:", opts, NULL)) != -1) {
		switch (c) {
		case 'f': o.dockerfile = optarg; break;
		case 'n': o.no_cache = true; break;
		case 'a':
			if (!strchr(optarg, '=') || optarg[0] == '=' || nargs == 256)
				return cli_usage_error(cmd, "--build-arg needs NAME=VALUE (at most 256), not '%s'", optarg);
			args[nargs++] = optarg;
			break;
		case 'I':
			if (strcmp(optarg, "vm") && strcmp(optarg, "jail"))
				return cli_usage_error(cmd, "--isolation must be vm or jail, not '%s'", optarg);
			o.isolation = optarg;
			break;
		case 'c':
			if (util_parse_uint(optarg, 1, 256, &cpus) < 0)
				return cli_usage_error(cmd, "invalid --cpus '%s' (1..256)", optarg);
			break;
		case 'm':
			if (cli_parse_mib(cmd, "--memory", optarg, 16, 1u << 22, &mem) < 0)
				return EXIT_USAGE;
			break;
		case 0x4e0 ... 0x4e5: {
			char why[256];
			if (cli_net_flag(&net, c, optarg, why, sizeof(why)) < 0)
				return cli_usage_error(cmd, "%s: %s", argv[optind - 1], why);
			break;
		}
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc || optind + 2 < argc)
		return cli_usage_error(cmd, "template build needs NAME [CONTEXT]");
	o.name = argv[optind];
	o.context = optind + 1 < argc ? argv[optind + 1] : ".";
	struct stat cst;
	if (stat(o.context, &cst) == 0 && S_ISREG(cst.st_mode)) {
		/* a tar of the context (as `docker build - < ctx.tar`): -f names a file inside it */
		o.context_archive = o.context;
		o.context = NULL;
	}
	char df[4200];
	if (!o.dockerfile && o.context) {
		snprintf(df, sizeof(df), "%s/Dockerfile", o.context);
		o.dockerfile = df;
	}
	o.build_args = nargs ? args : NULL;
	o.cpus = (uint32_t)cpus;
	o.memory_mib = mem;
	char why[512], *policy = NULL;
	if (cli_net_policy(&net, &policy, why, sizeof(why)) < 0)
		return cli_usage_error(cmd, "%s", why);
	o.network_policy = policy;
	o.network_policy_trusted = true; /* the operator's own flags */
	o.progress = cli->json ? NULL : cli_progress_bytes;
	o.output = build_output;
	uint64_t t0 = util_now_ns();
	int r = space_template_build(cli_ctx(cli), &o);
	cli_progress_end();
	free(policy);
	if (r < 0)
		return cli_fail(cli, r, "build template %s", o.name);
	uint64_t took_ms = (util_now_ns() - t0) / 1000000;
	struct space_template_info *t;
	if (space_template_get(cli->ctx, o.name, &t) < 0)
		return cli_fail(cli, -EIO, "build template %s", o.name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", t->name);
		cJSON_AddNumberToObject(j, "rootfs_bytes", (double)t->rootfs_bytes);
		add_image_json(j, t);
		cJSON_AddNumberToObject(j, "build_ms", (double)took_ms);
		space_template_info_free(t);
		return cli_print_json(j);
	}
	printf("template %s built (%s) in %llu ms\n", t->name, image_fields(t) ? t->image_digest : "",
	       (unsigned long long)took_ms);
	space_template_info_free(t);
	return EXIT_OK;
}

/* space template export NAME -o FILE|- [--format rootfs|oci] */
static int template_export(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ 0 },
	};
	const char *out = NULL, *format = "rootfs";
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'f':
			if (strcmp(optarg, "rootfs") && strcmp(optarg, "oci"))
				return cli_usage_error(cmd, "--format must be rootfs or oci, not '%s'", optarg);
			format = optarg;
			break;
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind + 1 != argc || !out)
		return cli_usage_error(cmd, "template export needs one NAME and -o FILE (- for stdout)");
	const char *name = argv[optind];
	struct cli_out co;
	int rc = cli_out_open(cmd, out, "an archive", &co);
	if (rc)
		return rc;
	struct space_template_export_options o = SPACE_TEMPLATE_EXPORT_OPTIONS_INIT;
	o.fd = co.fd;
	o.format = format;
	o.progress = cli->json ? NULL : cli_progress_bytes;
	int r = space_template_export(cli_ctx(cli), name, &o);
	cli_progress_end();
	r = cli_out_close(&co, out, r);
	if (r < 0)
		return cli_fail(cli, r, "export template %s", name);
	if (co.to_stdout)
		return EXIT_OK;
	struct stat st;
	uint64_t size = stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		cJSON_AddStringToObject(j, "output", out);
		cJSON_AddStringToObject(j, "format", format);
		cJSON_AddNumberToObject(j, "bytes", (double)size);
		return cli_print_json(j);
	}
	char sz[32];
	printf("template %s exported to %s (%s, %s): import it with `space template import NAME --%s %s`\n", name,
	       out, format, util_format_size(size, sz, sizeof(sz)), strcmp(format, "oci") ? "rootfs" : "image", out);
	return EXIT_OK;
}

/* "snapshot": {cpus, memory_mib, created_ms} or null, "pool_size", "pooled" of `template ls --json`. */
static void add_warm_json(struct cli *cli, cJSON *j, const char *name)
{
	struct space_template_warm_info w = SPACE_TEMPLATE_WARM_INFO_INIT;
	if (space_template_get_warm_info(cli->ctx, name, &w) < 0)
		return;
	if (w.has_snapshot) {
		cJSON *s = cJSON_AddObjectToObject(j, "snapshot");
		cJSON_AddNumberToObject(s, "cpus", w.snapshot_cpus);
		cJSON_AddNumberToObject(s, "memory_mib", w.snapshot_memory_mib);
		cJSON_AddNumberToObject(s, "created_ms", (double)w.snapshot_created_ms);
	} else {
		cJSON_AddNullToObject(j, "snapshot");
	}
	cJSON_AddNumberToObject(j, "pool_size", w.warm_pool_size);
	cJSON_AddNumberToObject(j, "pooled", w.warm_pool_ready);
}

/* "start": the template's start command ({"argv", "wait_port"}), or null. */
static void add_start_json(struct cli *cli, cJSON *j, const char *name)
{
	char *start = NULL;
	cJSON *v = space_template_get_start(cli_ctx(cli), name, &start) == 0 && start ? cJSON_Parse(start) : NULL;
	free(start);
	cJSON_AddItemToObject(j, "start", v ? v : cJSON_CreateNull());
}

static int template_ls(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[1]);
	struct space_template_info **list;
	size_t n;
	int r = space_template_list(cli_ctx(cli), &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "list templates");
	if (cli->json) {
		cJSON *a = cJSON_CreateArray();
		for (size_t i = 0; i < n; i++) {
			const struct space_template_info *t = list[i];
			cJSON *j = cJSON_CreateObject();
			cJSON_AddStringToObject(j, "name", t->name);
			cJSON_AddStringToObject(j, "path", t->path);
			char p[4200];
			snprintf(p, sizeof(p), "%s/rootfs.ext4", t->path);
			cJSON_AddStringToObject(j, "rootfs", p);
			cJSON_AddNumberToObject(j, "rootfs_bytes", (double)t->rootfs_bytes);
			cJSON_AddBoolToObject(j, "kernel", t->has_kernel);
			cJSON_AddBoolToObject(j, "initrd", t->has_initrd);
			cJSON_AddNumberToObject(j, "created_ms", (double)t->created_ms);
			cJSON_AddNumberToObject(j, "sandboxes", t->sandboxes);
			cJSON_AddNumberToObject(j, "checkpoints", t->checkpoints);
			if (t->size >= offsetof(struct space_template_info, id) + sizeof(t->id) && t->id[0])
				cJSON_AddStringToObject(j, "id", t->id);
			add_image_json(j, t);
			cli_template_snapshots_json(cli, j, t->name);
			add_warm_json(cli, j, t->name);
			add_start_json(cli, j, t->name);
			cJSON_AddItemToArray(a, j);
		}
		space_template_info_list_free(list);
		return cli_print_json(a);
	}
	printf("%-20s %10s %-6s %-6s %-14s %-5s %9s  %s\n", "NAME", "ROOTFS", "KERNEL", "INITRD", "SNAPSHOT", "POOL",
	       "SANDBOXES", "CREATED");
	for (size_t i = 0; i < n; i++) {
		char sz[32], tm[32], snap[32] = "-", pool[24] = "-";
		struct space_template_warm_info w = SPACE_TEMPLATE_WARM_INFO_INIT;
		const struct space_template_info *t = list[i];
		if (space_template_get_warm_info(cli->ctx, t->name, &w) == 0) {
			if (w.has_snapshot)
				snprintf(snap, sizeof(snap), "%ucpu/%uMiB", w.snapshot_cpus, w.snapshot_memory_mib);
			if (w.warm_pool_size || w.warm_pool_ready)
				snprintf(pool, sizeof(pool), "%u/%u", w.warm_pool_ready, w.warm_pool_size);
		}
		printf("%-20s %10s %-6s %-6s %-14s %-5s %9u  %s\n", t->name,
		       util_format_size(t->rootfs_bytes, sz, sizeof(sz)), t->has_kernel ? "yes" : "-",
		       t->has_initrd ? "yes" : "-", snap, pool, t->sandboxes, cli_time(t->created_ms, tm, sizeof(tm)));
	}
	space_template_info_list_free(list);
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

/* space template snapshot NAME [--cpus N] [--memory MIB] | --drop */
static int template_snapshot(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "drop", no_argument, NULL, 'd' },
		{ 0 },
	};
	uint64_t cpus = 0;
	uint32_t mem = 0;
	bool drop = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (util_parse_uint(optarg, 1, 256, &cpus) < 0)
				return cli_usage_error(cmd, "invalid --cpus '%s' (1..256)", optarg);
			break;
		case 'm':
			if (cli_parse_mib(cmd, "--memory", optarg, 16, 1u << 22, &mem) < 0)
				return EXIT_USAGE;
			break;
		case 'd': drop = true; break;
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error(cmd, "template snapshot needs one NAME");
	if (drop && (cpus || mem))
		return cli_usage_error(cmd, "--drop takes no --cpus or --memory");
	const char *name = argv[optind];
	struct space_template_snapshot_options so = SPACE_TEMPLATE_SNAPSHOT_OPTIONS_INIT;
	so.cpus = (uint32_t)cpus;
	so.memory_mib = (uint32_t)mem;
	int r = drop ? space_template_snapshot_drop(cli_ctx(cli), name)
		     : space_template_snapshot(cli_ctx(cli), name, &so);
	if (r < 0)
		return cli_fail(cli, r, "%s of template %s", drop ? "drop the snapshot" : "snapshot", name);
	struct space_template_warm_info w = SPACE_TEMPLATE_WARM_INFO_INIT;
	if (space_template_get_warm_info(cli->ctx, name, &w) < 0)
		return cli_fail(cli, -EIO, "template %s", name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		add_warm_json(cli, j, name);
		return cli_print_json(j);
	}
	if (drop)
		printf("template %s: snapshot dropped (VM sandboxes of it boot)\n", name);
	else
		printf("template %s: snapshot taken (%u vCPUs, %u MiB): VM sandboxes of it are restored from it\n",
		       name, w.snapshot_cpus, w.snapshot_memory_mib);
	return EXIT_OK;
}

/* space template set-pool NAME N */
static int template_set_pool(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	uint64_t n;
	if (argc != 3)
		return cli_usage_error(cmd, "template set-pool needs NAME and a size");
	if (util_parse_uint(argv[2], 0, 64, &n) < 0)
		return cli_usage_error(cmd, "invalid pool size '%s' (0..64)", argv[2]);
	int r = space_template_set_warm_pool(cli_ctx(cli), argv[1], (uint32_t)n);
	if (r < 0)
		return cli_fail(cli, r, "set the pool size of template %s", argv[1]);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", argv[1]);
		add_warm_json(cli, j, argv[1]);
		return cli_print_json(j);
	}
	return EXIT_OK;
}

/* space template set-start NAME [--wait-port P] -- CMD... | --none */
static int template_set_start(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	const char *name = NULL;
	uint64_t port = 0;
	bool none = false;
	int i = 1;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (!strcmp(argv[i], "--none"))
			none = true;
		else if (!strcmp(argv[i], "--wait-port") && i + 1 < argc) {
			if (util_parse_uint(argv[++i], 1, 65535, &port) < 0)
				return cli_usage_error(cmd, "invalid port '%s' (1..65535)", argv[i]);
		} else if (argv[i][0] == '-')
			return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
		else if (!name)
			name = argv[i];
		else
			return cli_usage_error(cmd, "the start command follows '--'");
	}
	if (!name)
		return cli_usage_error(cmd, "template set-start needs NAME");
	if (none == (i < argc))
		return cli_usage_error(cmd, "template set-start needs either -- CMD... or --none");
	if (none && port)
		return cli_usage_error(cmd, "--wait-port goes with a start command");
	int r = space_template_set_start(cli_ctx(cli), name, none ? NULL : (const char *const *)argv + i, (uint16_t)port);
	if (r < 0)
		return cli_fail(cli, r, "set the start command of template %s", name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		add_start_json(cli, j, name);
		return cli_print_json(j);
	}
	if (none)
		printf("template %s: no start command\n", name);
	else if (port)
		printf("template %s: sandboxes start %s and are ready once port %u listens\n", name, argv[i],
		       (unsigned)port);
	else
		printf("template %s: sandboxes start %s\n", name, argv[i]);
	return EXIT_OK;
}

/* space pool fill [TEMPLATE] (dispatched from cmd_pool) */
int cli_pool_fill(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	if (argc > 2)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[2]);
	const char *name = argc == 2 ? argv[1] : NULL;
	int r = space_warm_pool_fill(cli_ctx(cli), name);
	if (r < 0)
		return cli_fail(cli, r, "fill the warm pool%s%s", name ? " of " : "", name ? name : "");
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "created", r);
		return cli_print_json(j);
	}
	printf("%d sandbox%s created and pooled\n", r, r == 1 ? "" : "es");
	return EXIT_OK;
}

int cmd_template(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("template");
	if (argc < 2)
		return cli_usage_error(cmd, "template needs a command: import, build, export, ls, rm, snapshot, set-pool, set-snapshots, set-start, send, receive, push or pull");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *sub = argv[1];
	if (!strcmp(sub, "import"))
		return template_import(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "export"))
		return template_export(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "build"))
		return template_build(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
		return template_ls(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "rm") || !strcmp(sub, "remove"))
		return template_rm(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "snapshot"))
		return template_snapshot(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "set-pool"))
		return template_set_pool(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "set-snapshots"))
		return cli_template_set_snapshots(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "set-start"))
		return template_set_start(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "send"))
		return cli_template_send(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "receive"))
		return cli_template_receive(cli, cmd, argc - 1, argv + 1);
	if (!strcmp(sub, "push") || !strcmp(sub, "pull"))
		return cli_template_move(cli, cmd, argc - 1, argv + 1, !strcmp(sub, "push"));
	return cli_usage_error(cmd, "unknown template command '%s'", sub);
}
