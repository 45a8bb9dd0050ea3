/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space cp: a file into or out of a sandbox.
 *
 * Out of a sandbox the bytes are the sandbox's to choose, so the copy is capped (--max-size, 1 GiB by
 * default), zero runs stay holes (the library's sparse writer), and the local file appears whole or not
 * at all: it is written as an unnamed O_TMPFILE in the target directory and linked in place only once
 * complete, so a failure, Ctrl-C, SIGTERM or even SIGKILL leaves no partial file and an existing
 * destination untouched. Where the filesystem has no O_TMPFILE, a named temporary file is used, removed
 * on failure and by a handler of SIGINT, SIGTERM and SIGHUP.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "util/cleanup.h"
#include "util/util.h"

/* "ID:/path" -> id and path; NULL for a local path. */
static char *split_remote(char *arg, char **ret_path)
{
	char *colon = strchr(arg, ':');
	if (!colon || colon == arg || strncmp(arg, "sb-", 3) != 0)
		return NULL;
	*colon = '\0';
	*ret_path = colon + 1;
	return arg;
}

/* ---- the named temporary file of the fallback, removed when a signal ends us ---------------------- */

static char cp_tmp_path[PATH_MAX];
static volatile sig_atomic_t cp_tmp_armed;
static const int cp_signals[] = { SIGINT, SIGTERM, SIGHUP };

static void cp_on_signal(int sig)
{
	if (cp_tmp_armed)
		unlink(cp_tmp_path);
	/* Die of the signal, as without the handler, so the caller sees how we ended. */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void cp_tmp_arm(const char *path)
{
	snprintf(cp_tmp_path, sizeof(cp_tmp_path), "%s", path);
	cp_tmp_armed = 1;
	struct sigaction sa = { .sa_handler = cp_on_signal };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(cp_signals); i++)
		sigaction(cp_signals[i], &sa, NULL);
}

static void cp_tmp_disarm(void)
{
	cp_tmp_armed = 0;
}

/* Blocks (or unblocks) the signals above around a step that must not be cut in half. */
static void cp_block_signals(bool block, sigset_t *saved)
{
	if (!block) {
		sigprocmask(SIG_SETMASK, saved, NULL);
		return;
	}
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < ARRAY_SIZE(cp_signals); i++)
		sigaddset(&set, cp_signals[i]);
	sigprocmask(SIG_BLOCK, &set, saved);
}

/* ---- progress on a terminal ------------------------------------------------------------------------ */

struct cp_progress {
	uint64_t start_ns, last_ns;
	bool shown;
};

static void cp_progress(const char *stage, uint64_t done, uint64_t total, void *userdata)
{
	struct cp_progress *p = userdata;
	uint64_t now = util_now_ns();
	/* Quiet for short copies; then five updates a second. */
	if (now - p->start_ns < 1000000000ull || now - p->last_ns < 200000000ull)
		return;
	p->last_ns = now;
	p->shown = true;
	char d[32], t[32];
	util_format_size(done, d, sizeof(d));
	if (total >= done && total > 0)
		fprintf(stderr, "\rspace: %s: %s of %s (%u%%)\033[K", stage, d, util_format_size(total, t, sizeof(t)),
			(unsigned)(done * 100 / total));
	else
		fprintf(stderr, "\rspace: %s: %s\033[K", stage, d);
}

static void cp_progress_end(struct cp_progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
}

/* ---- out of a sandbox ------------------------------------------------------------------------------ */

/* Where the copy of rpath goes: local itself, or local/<basename> when local is a directory. */
static int cp_destination(const char *local, const char *rpath, char *buf, size_t len)
{
	struct stat st;
	if (stat(local, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(buf, len, "%s", local);
		return 0;
	}
	const char *base = strrchr(rpath, '/');
	base = base ? base + 1 : rpath;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EISDIR;
	if ((size_t)snprintf(buf, len, "%s/%s", local, base) >= len)
		return -ENAMETOOLONG;
	return 0;
}

struct cp_target {
	char path[PATH_MAX];          /* the destination */
	char dir[PATH_MAX];           /* its directory */
	char name[NAME_MAX + 1];      /* its name in dir */
	int dirfd;
	int fd;                       /* where the bytes go */
	bool named;                   /* fallback: fd is the named file tmp, not an O_TMPFILE */
	char tmp[PATH_MAX];
};

static int cp_target_open(struct cp_target *t, const char *dest)
{
	_cleanup_free_ char *d1 = strdup(dest), *d2 = strdup(dest);
	if (!d1 || !d2)
		return -ENOMEM;
	snprintf(t->path, sizeof(t->path), "%s", dest);
	snprintf(t->dir, sizeof(t->dir), "%s", dirname(d1));
	const char *base = basename(d2);
	if (!*base || !strcmp(base, "/") || !strcmp(base, ".") || !strcmp(base, "..") || strlen(base) > NAME_MAX)
		return -EISDIR;
	snprintf(t->name, sizeof(t->name), "%s", base);
	t->dirfd = open(t->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0)
		return -errno;
	t->fd = openat(t->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (t->fd >= 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	/* No O_TMPFILE here: a named file, removed on every way out we can catch. */
	if ((size_t)snprintf(t->tmp, sizeof(t->tmp), "%s/.%.200s.space-cp-XXXXXX", t->dir, t->name) >= sizeof(t->tmp))
		return -ENAMETOOLONG;
	sigset_t saved;
	cp_block_signals(true, &saved);
	t->fd = mkostemp(t->tmp, O_CLOEXEC);
	int r = t->fd < 0 ? -errno : 0;
	if (r == 0) {
		t->named = true;
		cp_tmp_arm(t->tmp);
	}
	cp_block_signals(false, &saved);
	return r;
}

/* Drops what a failed copy wrote. */
static void cp_target_discard(struct cp_target *t)
{
	if (t->named) {
		unlink(t->tmp);
		cp_tmp_disarm();
		t->named = false;
	}
}

/* Puts the finished file at its destination in one rename, replacing what was there. */
static int cp_target_commit(struct cp_target *t, uint32_t mode)
{
	/* The sandbox chose mode: no more than the user's umask lets a new file have, as cp without -p. */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(t->fd, mode & 0777 & ~mask) < 0)
		return -errno;
	sigset_t saved;
	cp_block_signals(true, &saved);
	int r = 0;
	if (!t->named) {
		/* The unnamed file gets a random name first: linkat cannot replace an existing file. */
		unsigned char rnd[6];
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", t->fd);
		r = util_random_bytes(rnd, sizeof(rnd));
		if (r == 0) {
			snprintf(t->tmp, sizeof(t->tmp), ".%.200s.space-cp-%02x%02x%02x%02x%02x%02x", t->name, rnd[0],
				 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
			if (linkat(AT_FDCWD, proc, t->dirfd, t->tmp, AT_SYMLINK_FOLLOW) < 0 &&
			    linkat(t->fd, "", t->dirfd, t->tmp, AT_EMPTY_PATH) < 0)
				r = -errno;
		}
		if (r == 0 && renameat(t->dirfd, t->tmp, t->dirfd, t->name) < 0) {
			r = -errno;
			unlinkat(t->dirfd, t->tmp, 0);
		}
	} else if (rename(t->tmp, t->path) < 0) {
		r = -errno;
	} else {
		t->named = false;
		cp_tmp_disarm();
	}
	cp_block_signals(false, &saved);
	return r;
}

static int cp_out(struct cli *cli, space_sandbox *sb, const char *id, const char *rpath, const char *local,
		  uint64_t max)
{
	struct cp_progress prog = { .start_ns = util_now_ns() };
	struct space_read_options o = SPACE_READ_OPTIONS_INIT;
	o.max_bytes = max;
	bool to_stdout = !strcmp(local, "-");
	if (!cli->json && isatty(STDERR_FILENO) && !(to_stdout && isatty(STDOUT_FILENO))) {
		o.progress = cp_progress;
		o.progress_userdata = &prog;
	}
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	int r;
	char dest[PATH_MAX];
	struct cp_target t = { .dirfd = -1, .fd = -1 };
	if (to_stdout) {
		snprintf(dest, sizeof(dest), "-");
		r = space_sandbox_read_file_v2(sb, rpath, STDOUT_FILENO, &o, &st);
	} else {
		r = cp_destination(local, rpath, dest, sizeof(dest));
		if (r >= 0)
			r = cp_target_open(&t, dest);
		if (r < 0) {
			if (t.dirfd >= 0)
				close(t.dirfd);
			return cli_error(r, "create %s: %s", r == -EISDIR ? local : dest, strerror(-r));
		}
		r = space_sandbox_read_file_v2(sb, rpath, t.fd, &o, &st);
	}
	cp_progress_end(&prog);
	int rc = EXIT_OK;
	if (r == -EFBIG) {
		rc = cli_error(r, "copy %s:%s to %s: %s; use --max-size to raise the limit", id, rpath, dest,
			       space_ctx_last_error(cli_ctx(cli)));
	} else if (r < 0) {
		rc = cli_fail(cli, r, "copy %s:%s to %s", id, rpath, dest);
	} else if (!to_stdout && (r = cp_target_commit(&t, st.mode)) < 0) {
		rc = cli_fail(cli, r, "write %s", dest);
	}
	if (!to_stdout) {
		if (rc != EXIT_OK)
			cp_target_discard(&t);
		close(t.fd);
		close(t.dirfd);
	}
	if (rc == EXIT_OK && cli->json && !to_stdout) {
		cJSON *j = cJSON_CreateObject();
		char src[PATH_MAX + 40];
		snprintf(src, sizeof(src), "%s:%s", id, rpath);
		cJSON_AddStringToObject(j, "source", src);
		cJSON_AddStringToObject(j, "destination", dest);
		cJSON_AddNumberToObject(j, "bytes", (double)st.file_size);
		cJSON_AddNumberToObject(j, "mode", st.mode & 0777);
		rc = cli_print_json(j);
	}
	return rc;
}

/* ---- into a sandbox -------------------------------------------------------------------------------- */

static int cp_in(struct cli *cli, space_sandbox *sb, const char *id, const char *rpath, const char *local)
{
	int fd = strcmp(local, "-") ? open(local, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	struct stat st;
	int rc = EXIT_OK;
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = cli_fail(cli, -errno, "open %s", local);
	} else if (S_ISDIR(st.st_mode)) {
		rc = cli_fail(cli, -EISDIR, "copy %s", local);
	} else {
		uint32_t mode = S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0644;
		int r = space_sandbox_write_file(sb, rpath, fd, mode);
		if (r < 0)
			rc = cli_fail(cli, r, "copy %s to %s:%s", local, id, rpath);
	}
	if (fd > STDIN_FILENO)
		close(fd);
	if (rc == EXIT_OK && cli->json) {
		cJSON *j = cJSON_CreateObject();
		char dst[PATH_MAX + 40];
		snprintf(dst, sizeof(dst), "%s:%s", id, rpath);
		cJSON_AddStringToObject(j, "source", local);
		cJSON_AddStringToObject(j, "destination", dst);
		if (S_ISREG(st.st_mode))
			cJSON_AddNumberToObject(j, "bytes", (double)st.st_size);
		rc = cli_print_json(j);
	}
	return rc;
}

int cmd_cp(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("cp");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	uint64_t max = SPACE_READ_MAX_DEFAULT;
	char *pos[2];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		if (!strcmp(argv[i], "--max-size")) {
			if (i + 1 >= argc)
				return cli_usage_error(cmd, "--max-size needs a SIZE");
			v = argv[++i];
		} else if (!strncmp(argv[i], "--max-size=", 11)) {
			v = argv[i] + 11;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
		} else if (npos < 2) {
			pos[npos++] = argv[i];
			continue;
		} else {
			return cli_usage_error(cmd, "cp needs SRC and DST, not more");
		}
		if (util_parse_size(v, &max) < 0 || max == 0)
			return cli_usage_error(cmd, "--max-size needs a size such as 512M or 4G, not '%s'", v);
	}
	if (npos != 2)
		return cli_usage_error(cmd, "cp needs SRC and DST");
	char *src_path = NULL, *dst_path = NULL;
	char *src_id = split_remote(pos[0], &src_path);
	char *dst_id = split_remote(pos[1], &dst_path);
	if (!!src_id == !!dst_id)
		return cli_usage_error(cmd, "exactly one of SRC and DST must be ID:/path");
	const char *id = src_id ? src_id : dst_id;
	const char *rpath = src_id ? src_path : dst_path;
	if (rpath[0] != '/')
		return cli_usage_error(cmd, "the sandbox path must be absolute, not '%s'", rpath);
	space_sandbox *sb;
	int r = space_sandbox_open(cli_ctx(cli), id, &sb);
	if (r < 0)
		return cli_fail(cli, r, "open sandbox %s", id);
	int rc = dst_id ? cp_in(cli, sb, id, rpath, pos[0]) : cp_out(cli, sb, id, rpath, pos[1], max);
	space_sandbox_free(sb);
	return rc;
}
