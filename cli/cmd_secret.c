/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space secret set|ls|rm`: the operator's registered secrets, which network policies name as
 * secret:NAME (docs/network.md). Values go in (from a file, an environment variable or stdin) and never
 * come out: ls shows names and times only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "cli_net.h"
#include "util/cleanup.h"
#include "util/util.h"

/* Reads at most max + 1 bytes of fd into buf (so a longer input is seen as such). */
static ssize_t read_upto(int fd, char *buf, size_t max)
{
	size_t n = 0;
	while (n <= max) {
		ssize_t k = read(fd, buf + n, max + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
		/* A terminal gives a line at a time: the value ends with the first line. */
		if (isatty(fd) && memchr(buf, '\n', n))
			break;
	}
	return (ssize_t)n;
}

/* stdin, with echo off on a terminal (the value is not shown while it is typed). */
static ssize_t read_stdin(const char *name, char *buf, size_t max)
{
	struct termios old, quiet;
	bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
	if (tty) {
		fprintf(stderr, "value of secret %s (not echoed; Enter ends it): ", name);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	ssize_t n = read_upto(STDIN_FILENO, buf, max);
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	return n;
}

static int secret_set(struct cli *cli, const struct cli_command *cmd, int argc, char **argv)
{
	const char *name = NULL, *file = NULL, *env = NULL;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--from-file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "--from-env") && i + 1 < argc)
			env = argv[++i];
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	if (!name)
		return cli_usage_error(cmd, "secret set needs a NAME");
	if (file && env)
		return cli_usage_error(cmd, "--from-file and --from-env exclude each other");
	size_t cap = SPACE_SECRET_VALUE_MAX + 2;
	char *buf = malloc(cap);
	if (!buf)
		return cli_fail(cli, -ENOMEM, "secret set");
	ssize_t n;
	if (env) {
		const char *v = getenv(env);
		if (!v) {
			free(buf);
			return cli_error(-ENOENT, "secret set %s: environment variable %s is not set", name, env);
		}
		n = (ssize_t)strnlen(v, SPACE_SECRET_VALUE_MAX + 1);
		memcpy(buf, v, (size_t)n);
	} else if (file) {
		_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -errno : read_upto(fd, buf, SPACE_SECRET_VALUE_MAX + 1);
	} else {
		n = read_stdin(name, buf, SPACE_SECRET_VALUE_MAX + 1);
	}
	if (n < 0) {
		free(buf);
		return cli_error((int)n, "secret set %s: read %s: %s", name, file ? file : "stdin", strerror((int)-n));
	}
	/* From a file or stdin, the line break that ends the text is not part of the value (env: is as is). */
	size_t len = (size_t)n;
	while (!env && len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	int r = len > SPACE_SECRET_VALUE_MAX ? -E2BIG : space_secret_set(cli_ctx(cli), name, buf, len);
	explicit_bzero(buf, cap);
	free(buf);
	if (r == -E2BIG) {
		return cli_error(-E2BIG, "secret set %s: longer than %d bytes", name, SPACE_SECRET_VALUE_MAX);
	}
	if (r < 0)
		return cli_fail(cli, r, "secret set %s", name);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", name);
		return cli_print_json(j);
	}
	return EXIT_OK;
}

static int secret_ls(struct cli *cli)
{
	struct space_secret_info **list = NULL;
	size_t n = 0;
	int r = space_secret_list(cli_ctx(cli), &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "secret ls");
	if (cli->json) {
		cJSON *a = cJSON_CreateArray();
		for (size_t i = 0; a && i < n; i++) {
			cJSON *j = cJSON_CreateObject();
			cJSON_AddStringToObject(j, "name", list[i]->name);
			cJSON_AddNumberToObject(j, "created_ms", (double)list[i]->created_ms);
			cJSON_AddItemToArray(a, j);
		}
		space_secret_info_list_free(list);
		return cli_print_json(a);
	}
	printf("%-40s %s\n", "NAME", "SET");
	for (size_t i = 0; i < n; i++) {
		char t[32];
		printf("%-40s %s\n", list[i]->name, cli_time(list[i]->created_ms, t, sizeof(t)));
	}
	space_secret_info_list_free(list);
	return EXIT_OK;
}

int cmd_secret(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("secret");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc < 2)
		return cli_usage_error(cmd, "secret needs a subcommand: set, ls or rm");
	const char *sub = argv[1];
	if (!strcmp(sub, "set"))
		return secret_set(cli, cmd, argc, argv);
	if (!strcmp(sub, "ls")) {
		if (argc != 2)
			return cli_usage_error(cmd, "secret ls takes no arguments");
		return secret_ls(cli);
	}
	if (strcmp(sub, "rm"))
		return cli_usage_error(cmd, "unknown subcommand '%s'", sub);
	if (argc < 3)
		return cli_usage_error(cmd, "secret rm needs a NAME");
	int rc = EXIT_OK;
	for (int i = 2; i < argc; i++) {
		int r = space_secret_remove(cli_ctx(cli), argv[i]);
		if (r < 0)
			rc = cli_fail(cli, r, "secret rm %s", argv[i]);
	}
	return rc;
}
