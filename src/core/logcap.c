/* SPDX-License-Identifier: Apache-2.0 */
/* A jail's log writer, space-logcap: started, its uid slot, and the log read back in order (logcap.h). */
#include "core/logcap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/uids.h"
#include "util/caplog.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/procstat.h"
#include "util/spawn.h"
#include "util/uidalloc.h"
#include "util/util.h"

/*
 * The cap of a sandbox's log, both parts together (util/caplog.h): $SPACE_SANDBOX_LOG_MAX, an operator
 * setting ("16M"; 8 KiB..1 TiB), else 8 MiB. A value that does not parse is refused, never ignored: the
 * guest writes the console, and its log must not go uncapped.
 */
int logcap_max_bytes(space_ctx *ctx, uint64_t *ret)
{
	const char *v = secure_getenv("SPACE_SANDBOX_LOG_MAX");
	*ret = CAPLOG_DEFAULT_MAX;
	if (!v)
		return 0;
	if (util_parse_size(v, ret) < 0 || *ret < CAPLOG_MIN_MAX || *ret > CAPLOG_MAX_MAX)
		return ctx_error_msg(ctx, -EINVAL, "SPACE_SANDBOX_LOG_MAX=%s: not a size from 8K to 1T", v);
	return 0;
}

#define READY_TIMEOUT_MS 5000
#define SLOTS_MAX 8 /* slots found under one owner text: one, normally */

static int owner_text(space_ctx *ctx, const char *sandbox_id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s %s logcap", ctx->state_dir, sandbox_id);
	if (n < 0 || (size_t)n >= len || n > UIDALLOC_OWNER_MAX)
		return ctx_error_msg(ctx, -ENAMETOOLONG, "state directory path too long for a uid slot owner (%s)",
				     ctx->state_dir);
	return 0;
}

struct find {
	const char *owner;
	uint32_t uids[SLOTS_MAX];
	size_t n;
};

static int find_one(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata)
{
	struct find *f = userdata;
	if (kind == UIDALLOC_SINGLE && !strcmp(owner, f->owner) && f->n < SLOTS_MAX)
		f->uids[f->n++] = uid;
	return 0;
}

/* The slot the sandbox's log writer already holds (a restart), else a new one. A fresh sandbox holds
 * none: the listing of every slot on the machine is skipped. */
static int take_uid(space_ctx *ctx, const char *owner, bool fresh, uint32_t *ret_uid)
{
	struct find f = { .owner = owner };
	int r = fresh ? 0 : uidalloc_foreach(find_one, &f);
	if (r < 0)
		return ctx_error(ctx, r, "read the uid slots under %s", UIDALLOC_DIR);
	if (f.n) {
		*ret_uid = f.uids[0];
		return 0;
	}
	r = uidalloc_acquire(UIDALLOC_SINGLE, owner, ret_uid);
	if (r == -ENOSPC && uids_reap_stale(ctx) > 0)
		r = uidalloc_acquire(UIDALLOC_SINGLE, owner, ret_uid);
	return r < 0 ? ctx_error(ctx, r, "allocate a host uid for the log writer (%s)", UIDALLOC_DIR) : 0;
}

/* What record_pid() wrote in runtime_dir: the number of fields read (0: none), pid and start time first, then
 * the uid (a record of an older version has no uid: 2). */
static int read_record(const char *runtime_dir, int *pid, unsigned long long *start, unsigned *uid)
{
	char path[PATH_MAX], line[80];
	if (!runtime_dir || !runtime_dir[0] ||
	    (size_t)snprintf(path, sizeof(path), "%s/" LOGCAP_PID, runtime_dir) >= sizeof(path))
		return 0;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, line, sizeof(line) - 1);
	if (n <= 0)
		return 0;
	line[n] = '\0';
	int k = sscanf(line, "%d %llu %u", pid, start, uid);
	return k < 0 ? 0 : k;
}

uint32_t logcap_recorded_uid(const char *runtime_dir)
{
	int pid;
	unsigned long long start;
	unsigned uid;
	if (read_record(runtime_dir, &pid, &start, &uid) != 3)
		return 0;
	enum uidalloc_kind kind;
	uint32_t first;
	return uidalloc_slot_of(uid, &kind, &first) && kind == UIDALLOC_SINGLE && first == uid ? uid : 0;
}

void logcap_release(space_ctx *ctx, const char *sandbox_id, uint32_t recorded_uid)
{
	char owner[UIDALLOC_OWNER_MAX + 1], cur[UIDALLOC_OWNER_MAX + 2];
	if (owner_text(ctx, sandbox_id, owner, sizeof(owner)) < 0)
		return;
	/* The recorded slot, when it is still this writer's (the owner text names the sandbox): one file. */
	if (recorded_uid && uidalloc_owner(UIDALLOC_SINGLE, recorded_uid, cur, sizeof(cur)) == 0 &&
	    !strcmp(cur, owner)) {
		int r = uidalloc_release(UIDALLOC_SINGLE, recorded_uid, owner);
		if (r < 0)
			ctx_log(ctx, SPACE_LOG_WARNING,
				"sandbox %s: free the log writer's host uid: %s (`space init` reclaims it)", sandbox_id,
				strerror(-r));
		return;
	}
	struct find f = { .owner = owner };
	/* Collected first: the directory is not changed under its own listing. */
	int r = uidalloc_foreach(find_one, &f);
	for (size_t i = 0; i < f.n && r >= 0; i++)
		r = uidalloc_release(UIDALLOC_SINGLE, f.uids[i], owner);
	if (r < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: free the log writer's host uid: %s (`space init` reclaims it)",
			sandbox_id, strerror(-r));
}

/* Records the writer's pid and start time in runtime_dir, for logcap_dead(), and its uid slot, for
 * logcap_release(). */
static void record_pid(space_ctx *ctx, const char *runtime_dir, const struct util_child *child, uint32_t uid)
{
	char path[PATH_MAX], line[80];
	snprintf(path, sizeof(path), "%s/" LOGCAP_PID, runtime_dir);
	int n = snprintf(line, sizeof(line), "%d %llu %u\n", (int)child->pid, (unsigned long long)child->start_time,
			 (unsigned)uid);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || util_write_all(fd, line, (size_t)n) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "record the log writer's pid in %s: %s", path, strerror(errno));
}

/* Opens one end of the log FIFO (flags: O_RDONLY or O_WRONLY) without blocking in the open (a reader is
 * never waited for; a writer needs one already there), then makes its reads or writes blocking. */
static int open_fifo_end(space_ctx *ctx, const char *fifo, int flags)
{
	int fd = open(fifo, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ctx_error(ctx, -errno, "open %s", fifo);
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		close(fd);
		return ctx_error(ctx, -EINVAL, "%s is not the log's FIFO", fifo);
	}
	return fd;
}

static void start_close(struct logcap_start *s)
{
	int *fds[] = { &s->logfd, &s->oldfd, &s->null, &s->sread, &s->swrite };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

int logcap_prepare(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir, bool fresh, int lread,
		   struct logcap_start *s)
{
	*s = (struct logcap_start){ .logfd = -1, .oldfd = -1, .null = -1, .sread = -1, .swrite = -1, .r = -ECANCELED };
	char owner[UIDALLOC_OWNER_MAX + 1], logp[PATH_MAX], oldp[PATH_MAX];
	int r = ctx_helper_path(ctx, "space-logcap", s->path, sizeof(s->path));
	if (r < 0)
		return r;
	if ((r = owner_text(ctx, sandbox_id, owner, sizeof(owner))) < 0)
		return r;
	if ((size_t)snprintf(logp, sizeof(logp), "%s/" LOGCAP_LOG, runtime_dir) >= sizeof(logp) ||
	    (size_t)snprintf(oldp, sizeof(oldp), "%s/" LOGCAP_LOG_OLD, runtime_dir) >= sizeof(oldp))
		return ctx_error(ctx, -ENAMETOOLONG, "log of %s", sandbox_id);
	uint64_t max;
	if ((r = logcap_max_bytes(ctx, &max)) < 0)
		return r;
	s->logfd = open(logp, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->logfd < 0)
		r = ctx_error(ctx, -errno, "open %s", logp);
	else if ((s->oldfd = open(oldp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		r = ctx_error(ctx, -errno, "open %s", oldp);
	else if ((s->null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		r = ctx_error(ctx, -errno, "open /dev/null");
	uint32_t uid;
	if (r >= 0)
		r = take_uid(ctx, owner, fresh, &uid);
	int sp[2];
	if (r >= 0 && pipe2(sp, O_CLOEXEC) < 0)
		r = ctx_error(ctx, -errno, "pipe");
	if (r >= 0) {
		s->sread = sp[0];
		s->swrite = sp[1];
		if ((r = util_spawn_helpers_cgroup(sandbox_id, s->cgroup, sizeof(s->cgroup))) < 0)
			ctx_error(ctx, r, "the helpers' cgroup of %s", sandbox_id);
	}
	if (r < 0) {
		start_close(s);
		return r;
	}
	s->uid = uid;
	snprintf(s->uid_arg, sizeof(s->uid_arg), "%u", uid);
	snprintf(s->max_arg, sizeof(s->max_arg), "%llu", (unsigned long long)max);
	const char *argv[] = { "space-logcap", "--uid", s->uid_arg, "--max-bytes", s->max_arg, NULL };
	memcpy(s->argv, argv, sizeof(argv));
	const int fds[] = { lread, s->swrite, s->null, s->logfd, s->oldfd };
	memcpy(s->fds, fds, sizeof(fds));
	return 0;
}

void logcap_start_run(struct logcap_start *s)
{
	const struct util_spawn_opts so = { .path = s->path, .argv = s->argv, .fds = s->fds, .n_fds = 5,
					    .detach = true, .cgroup = s->cgroup };
	s->r = util_spawn(&so, &s->child);
}

int logcap_start_finish(space_ctx *ctx, const char *runtime_dir, struct logcap_start *s, int *ret_status_fd)
{
	int r = s->r;
	if (r < 0) {
		start_close(s);
		return ctx_error(ctx, r, "start %s", s->path);
	}
	if (s->child.pidfd >= 0)
		close(s->child.pidfd);
	record_pid(ctx, runtime_dir, &s->child, s->uid);
	/* Ours goes now: its status pipe reaches EOF if it dies. */
	*ret_status_fd = TAKE_FD(s->sread);
	start_close(s);
	return 0;
}

int logcap_spawn(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir, bool fresh, int lread,
		 int *ret_status_fd)
{
	struct logcap_start s;
	int r = logcap_prepare(ctx, sandbox_id, runtime_dir, fresh, lread, &s);
	if (r < 0)
		return r;
	logcap_start_run(&s);
	return logcap_start_finish(ctx, runtime_dir, &s, ret_status_fd);
}

int logcap_open(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir, int *ret_fd, int *ret_read_fd)
{
	char fifo[PATH_MAX];
	if ((size_t)snprintf(fifo, sizeof(fifo), "%s/" LOGCAP_FIFO, runtime_dir) >= sizeof(fifo))
		return ctx_error(ctx, -ENAMETOOLONG, "log of %s", sandbox_id);
	/* A new FIFO for every start of the jail: nothing of an earlier one is left in it. */
	if (unlink(fifo) < 0 && errno != ENOENT)
		return ctx_error(ctx, -errno, "remove %s", fifo);
	if (mkfifo(fifo, 0600) < 0)
		return ctx_error(ctx, -errno, "mkfifo %s", fifo);
	/* The reader first (an open for writing needs one), then the writer, kept by the jail alone. */
	_cleanup_close_ int lread = open_fifo_end(ctx, fifo, O_RDONLY);
	if (lread < 0)
		return lread;
	int lwrite = open_fifo_end(ctx, fifo, O_WRONLY);
	if (lwrite < 0)
		return lwrite;
	*ret_fd = lwrite;
	*ret_read_fd = TAKE_FD(lread);
	return 0;
}

int logcap_restart(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir)
{
	char fifo[PATH_MAX];
	if ((size_t)snprintf(fifo, sizeof(fifo), "%s/" LOGCAP_FIFO, runtime_dir) >= sizeof(fifo))
		return ctx_error(ctx, -ENAMETOOLONG, "log of %s", sandbox_id);
	_cleanup_close_ int lread = open_fifo_end(ctx, fifo, O_RDONLY);
	if (lread < 0)
		return lread;
	_cleanup_close_ int status = -1;
	int r = logcap_spawn(ctx, sandbox_id, runtime_dir, false, lread, &status);
	if (r < 0)
		return r;
	close(TAKE_FD(lread));
	return logcap_wait_ready(ctx, status);
}

int logcap_dead(const char *runtime_dir)
{
	int pid;
	unsigned long long start;
	unsigned uid;
	/* No record: no log writer of ours (a VM, or a jail started before this version). */
	if (read_record(runtime_dir, &pid, &start, &uid) < 2 || pid <= 0)
		return 0;
	return util_proc_alive(pid, start) ? 0 : 1;
}

int logcap_wait_ready(space_ctx *ctx, int status_fd)
{
	char status[256];
	int r = util_read_line_timeout(status_fd, status, sizeof(status), READY_TIMEOUT_MS);
	if (r < 0)
		return ctx_error(ctx, r, "the log writer space-logcap did not start");
	if (strncmp(status, "ready ", 6) != 0) {
		_cleanup_free_ char *safe = util_escape_dup(status, 0);
		return ctx_error_msg(ctx, -EIO, "the log writer space-logcap did not start: %s", safe ? safe : "?");
	}
	return 0;
}

static int copy_file(int fd, int dst_fd)
{
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		int r = util_write_all(dst_fd, buf, (size_t)n);
		if (r < 0)
			return r;
	}
	return n < 0 ? -errno : 0;
}

int logcap_read(space_ctx *ctx, const char *runtime_dir, int dst_fd)
{
	char logp[PATH_MAX], oldp[PATH_MAX];
	if ((size_t)snprintf(logp, sizeof(logp), "%s/" LOGCAP_LOG, runtime_dir) >= sizeof(logp) ||
	    (size_t)snprintf(oldp, sizeof(oldp), "%s/" LOGCAP_LOG_OLD, runtime_dir) >= sizeof(oldp))
		return ctx_error(ctx, -ENAMETOOLONG, "log in %s", runtime_dir);
	/* Both opened before reading either: a rotation in between then loses lines, never repeats them. */
	_cleanup_close_ int fd = open(logp, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ctx_error(ctx, -errno, "open %s", logp);
	_cleanup_close_ int old = open(oldp, O_RDONLY | O_CLOEXEC);
	if (old < 0 && errno != ENOENT)
		return ctx_error(ctx, -errno, "open %s", oldp);
	int r = old >= 0 ? copy_file(old, dst_fd) : 0;
	if (r == 0)
		r = copy_file(fd, dst_fd);
	return r < 0 ? ctx_error(ctx, r, "copy the log of %s", runtime_dir) : 0;
}
