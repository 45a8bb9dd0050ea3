/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space template send NAME [--parent P] -o FILE|-` and `space template receive [NAME] [-i FILE|-]`: a
 * template moved to another host by any channel the operator has (a file, ssh, a pipe), as a btrfs send
 * stream behind a header of ours; with --parent only what differs from a template the receiver has.
 * What the receiver takes is checked there before it becomes a template (space_template_receive).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "util/util.h"

int cli_out_open(const struct cli_command *cmd, const char *out, const char *what, struct cli_out *ret)
{
	ret->to_stdout = !strcmp(out, "-");
	ret->fd = STDOUT_FILENO;
	ret->tmp[0] = '\0';
	if (ret->to_stdout)
		return isatty(STDOUT_FILENO) ?
			       cli_usage_error(cmd, "will not write %s to a terminal (-o FILE, or a pipe)", what) : 0;
	if ((size_t)snprintf(ret->tmp, sizeof(ret->tmp), "%s.partial", out) >= sizeof(ret->tmp))
		return cli_usage_error(cmd, "-o: a path too long");
	ret->fd = open(ret->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (ret->fd < 0)
		return cli_error(-errno, "create %s", ret->tmp);
	return 0;
}

int cli_out_close(struct cli_out *o, const char *out, int r)
{
	if (o->to_stdout)
		return r;
	if (r == 0 && (fsync(o->fd) < 0 || close(o->fd) < 0 || rename(o->tmp, out) < 0))
		r = -errno;
	else if (r < 0)
		close(o->fd);
	if (r < 0)
		unlink(o->tmp);
	return r;
}

cJSON *cli_received_json(const struct space_template_receive_info *info)
{
	cJSON *j = cJSON_CreateObject();
	if (info->parent[0])
		cJSON_AddStringToObject(j, "parent", info->parent);
	else
		cJSON_AddNullToObject(j, "parent");
	cJSON_AddStringToObject(j, "digest", info->digest);
	cJSON_AddNumberToObject(j, "stream_bytes", (double)info->stream_bytes);
	cJSON_AddNumberToObject(j, "data_bytes", (double)info->data_bytes);
	cJSON_AddNumberToObject(j, "entries", (double)info->entries);
	return j;
}

int cli_template_send(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "parent", required_argument, NULL, 'p' },
		{ 0 },
	};
	const char *out = NULL, *parent = NULL;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'p': parent = optarg; break;
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind + 1 != argc || !out)
		return cli_usage_error(cmd, "template send needs one NAME and -o FILE (- for stdout)");
	const char *name = argv[optind];
	struct cli_out co;
	int rc = cli_out_open(cmd, out, "a stream", &co);
	if (rc)
		return rc;
	struct space_template_send_options o = SPACE_TEMPLATE_SEND_OPTIONS_INIT;
	o.fd = co.fd;
	o.parent = parent;
	o.progress = cli->json ? NULL : cli_progress_bytes;
	struct space_template_send_info info;
	int r = space_template_send(cli_ctx(cli), name, &o, &info);
	cli_progress_end();
	r = cli_out_close(&co, out, r);
	if (r < 0)
		return cli_fail(cli, r, "send template %s", name);
	if (co.to_stdout)
		return EXIT_OK;
	struct stat st;
	uint64_t size = stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		cJSON_AddStringToObject(j, "output", out);
		if (parent)
			cJSON_AddStringToObject(j, "parent", parent);
		else
			cJSON_AddNullToObject(j, "parent");
		cJSON_AddNumberToObject(j, "bytes", (double)size);
		return cli_print_json(j);
	}
	char sz[32];
	printf("template %s sent to %s (%s%s%s): on the other host, `space template receive -i %s`\n", name, out,
	       util_format_size(size, sz, sizeof(sz)), parent ? ", against " : ", whole", parent ? parent : "", out);
	return EXIT_OK;
}

int cli_template_receive(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "max-bytes", required_argument, NULL, 'm' },
		{ 0 },
	};
	const char *in = NULL;
	uint64_t max_bytes = 0;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "i:", opts, NULL)) != -1) {
		switch (c) {
		case 'i': in = optarg; break;
		case 'm':
			if (util_parse_size(optarg, &max_bytes) < 0 || !max_bytes)
				return cli_usage_error(cmd, "--max-bytes takes a size (512M, 20G), not '%s'", optarg);
			break;
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind + 1 < argc)
		return cli_usage_error(cmd, "template receive takes at most one NAME (default: the name it was sent as)");
	const char *name = optind < argc ? argv[optind] : NULL;
	int fd = STDIN_FILENO;
	if (in && strcmp(in, "-")) {
		fd = open(in, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return cli_fail(cli, -errno, "open %s", in);
	} else if (isatty(STDIN_FILENO)) {
		return cli_usage_error(cmd, "will not read a stream from a terminal (-i FILE, or a pipe)");
	}
	struct space_template_receive_options o = SPACE_TEMPLATE_RECEIVE_OPTIONS_INIT;
	o.fd = fd;
	o.name = name;
	o.max_bytes = max_bytes;
	o.progress = cli->json ? NULL : cli_progress_bytes;
	struct space_template_receive_info info;
	int r = space_template_receive(cli_ctx(cli), &o, &info);
	cli_progress_end();
	if (fd != STDIN_FILENO)
		close(fd);
	if (r < 0)
		return cli_fail(cli, r, "receive template%s%s", name ? " " : "", name ? name : "");
	if (cli->json) {
		cJSON *j = cli_received_json(&info);
		cJSON_AddStringToObject(j, "name", info.name);
		return cli_print_json(j);
	}
	char sz[32];
	printf("template %s received (%s of data%s%s; its files' digest matches the sender's)\n", info.name,
	       util_format_size(info.data_bytes, sz, sizeof(sz)), info.parent[0] ? ", onto " : ", whole",
	       info.parent);
	return EXIT_OK;
}
