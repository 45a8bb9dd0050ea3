/* SPDX-License-Identifier: Apache-2.0 */
/* Running space-unpack (core/unpack.h). */
#include "core/unpack.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/uids.h"
#include "core/unpack_int.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/loop.h"
#include "util/uidalloc.h"
#include "util/util.h"

#define IDLE_TIMEOUT_MS 120000 /* the helper reports at least every 8 MiB of a layer */
#define FIRST_FD 5
#define MIN_SIZE (64ull << 20)
#define HEADROOM (128ull << 20) /* the agent's writes, package installs: as for a directory's import */


static int take_uid(struct helper *h)
{
	pid_t me = getpid();
	snprintf(h->owner, sizeof(h->owner), "pid %d %llu unpack", (int)me,
		 (unsigned long long)core_process_start_time(me));
	int r = uidalloc_acquire(UIDALLOC_SINGLE, h->owner, &h->uid);
	if (r == -ENOSPC && uids_reap_stale(h->ctx) > 0)
		r = uidalloc_acquire(UIDALLOC_SINGLE, h->owner, &h->uid);
	return r < 0 ? ctx_error(h->ctx, r, "allocate a host uid for space-unpack (%s)", UIDALLOC_DIR) : 0;
}

/* In a child between fork and exec (async-signal-safe only): dies with its parent (which must still be
 * parent), with no signal blocked. false: it cannot. */
bool helper_tie_to(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		return false;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	return true;
}

/* In a child: want[i] becomes fd i for i < n (through copies above n first: a source may itself be one of
 * 0..n-1), everything from n on is closed. At most FIRST_FD + OCI_LAYERS_MAX. */
bool helper_place_fds(const int *want, size_t n)
{
	int tmp[FIRST_FD + OCI_LAYERS_MAX];
	if (n > ARRAY_SIZE(tmp))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((tmp[i] = fcntl(want[i], F_DUPFD_CLOEXEC, (int)n)) < 0)
			return false;
	for (size_t i = 0; i < n; i++)
		if (dup2(tmp[i], (int)i) < 0)
			return false;
	syscall(SYS_close_range, (unsigned)n, ~0U, 0);
	return true;
}

/*
 * Starts the helper: fd 3 image, fd 4 the control socket, fds 5.. srcs, stdio /dev/null, RLIMIT_FSIZE soft
 * fsize_soft under hard fsize_max, killed when this thread's process dies. Only async-signal-safe calls in the child.
 */
static int spawn(struct helper *h, const char *path, const char *const *argv, int image_fd, const int *srcs,
		 size_t n_srcs, uint64_t fsize_soft, uint64_t fsize_max)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return ctx_error(h->ctx, -errno, "socketpair");
	_cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0) {
		close(sp[0]);
		close(sp[1]);
		return ctx_error(h->ctx, -errno, "open /dev/null");
	}
	int want[FIRST_FD + OCI_LAYERS_MAX];
	size_t n = FIRST_FD + n_srcs;
	want[0] = want[1] = want[2] = null;
	want[3] = image_fd;
	want[4] = sp[1];
	for (size_t i = 0; i < n_srcs; i++)
		want[FIRST_FD + i] = srcs[i];
	struct rlimit fsize = { fsize_soft, fsize_max };
	pid_t parent = getpid();
	/* A fork of its own, not util_spawn (util/spawn.h): space-unpack is no sandbox's helper, it works for
	 * its caller, which waits for it (rlimits and a parent-death signal set between fork and exec). */
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sp[0]);
		close(sp[1]);
		return ctx_error(h->ctx, -e, "fork");
	}
	if (pid == 0) {
		if (!helper_tie_to(parent) || !helper_place_fds(want, n))
			_exit(127);
		if (setrlimit(RLIMIT_FSIZE, &fsize) < 0)
			_exit(127);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(sp[1]);
	h->ctl = sp[0];
	h->pid = pid;
	return 0;
}

/* Ends the helper (killed unless it already exited) and reaps it. Returns its wait status. */
int helper_reap(struct helper *h, bool kill_it)
{
	int st = 0;
	if (h->pid <= 0)
		return 0;
	if (kill_it)
		kill(h->pid, SIGKILL);
	while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
		;
	h->pid = 0;
	return st;
}

static void helper_end(struct helper *h)
{
	(void)helper_reap(h, true);
	if (h->ctl >= 0)
		close(h->ctl);
	h->ctl = -1;
	if (h->uid)
		(void)uidalloc_release(UIDALLOC_SINGLE, h->uid, h->owner);
	h->uid = 0;
}

/* The next status line (escaped for messages later), within the idle timeout. -EPIPE at EOF. */
int helper_next_line(struct helper *h, char *line, size_t len)
{
	for (;;) {
		char *nl = memchr(h->buf, '\n', h->len);
		if (nl) {
			size_t n = (size_t)(nl - h->buf);
			snprintf(line, len, "%.*s", (int)n, h->buf);
			memmove(h->buf, nl + 1, h->len - n - 1);
			h->len -= n + 1;
			return 0;
		}
		if (h->len == LINE_MAX_BYTES)
			return ctx_error_msg(h->ctx, -EPROTO, "space-unpack sent a line longer than %d bytes", LINE_MAX_BYTES);
		struct pollfd p = { .fd = h->ctl, .events = POLLIN };
		int r = poll(&p, 1, IDLE_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return ctx_error_msg(h->ctx, -ETIMEDOUT, "space-unpack reported nothing for %d s", IDLE_TIMEOUT_MS / 1000);
		ssize_t k = read(h->ctl, h->buf + h->len, LINE_MAX_BYTES - h->len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return ctx_error(h->ctx, -errno, "read from space-unpack");
		if (k == 0)
			return -EPIPE;
		h->len += (size_t)k;
	}
}

/* The helper's end: "error ..." as the message, or how it died. */
int helper_failed(struct helper *h, const char *what, int r)
{
	if (h->error[0]) {
		/* "ERRNO TEXT": the helper's own code for it (EPERM: a layer tried to leave the root, EBADMSG: a
		 * digest or format, ENOSPC/EFBIG: no room), any other number or none as -EINVAL. */
		char *end;
		const char *msg = h->error;
		long code = strtol(h->error, &end, 10);
		if (end != h->error && *end == ' ')
			msg = end + 1;
		if (!(code == EPERM || code == EBADMSG || code == ENOSPC || code == EFBIG || code == ENOENT ||
		      code == E2BIG || code == EMLINK || code == EIO))
			code = EINVAL;
		_cleanup_free_ char *why = util_escape_dup(msg, 0);
		return ctx_error_msg(h->ctx, (int)-code, "%s: %s", what, why ? why : "failed");
	}
	if (r == -EPIPE) {
		int st = helper_reap(h, false);
		if (WIFSIGNALED(st))
			return ctx_error_msg(h->ctx, -EIO, "%s: space-unpack was killed by signal %d", what, WTERMSIG(st));
		return ctx_error_msg(h->ctx, -EIO, "%s: space-unpack ended (status %d) without a result", what,
				     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	return r;
}

bool helper_word(const char *line, const char *w, const char **rest)
{
	size_t n = strlen(w);
	if (strncmp(line, w, n) || (line[n] != ' ' && line[n] != '\0'))
		return false;
	*rest = line[n] ? line + n + 1 : line + n;
	return true;
}

static int run_tool(space_ctx *ctx, const char *const argv[], const char *what)
{
	_cleanup_free_ char *out = NULL;
	int r = util_run(argv, &out);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "%s: %s not found (install e2fsprogs)", what, argv[0]);
	if (r < 0)
		return ctx_error_msg(ctx, r, "%s failed: %s", what, out && *out ? out : "(no output)");
	return 0;
}

/* The file system for what the first pass measured: bytes of data blocks and entries, plus headroom. */
static int make_fs(space_ctx *ctx, const struct unpack_request *req, const char *image, uint64_t bytes,
		   uint64_t entries, uint64_t avail, uint64_t *ret_size)
{
	uint64_t size = req->size_bytes;
	if (!size) {
		if (bytes > UINT64_MAX / 2 || entries > (1ull << 32))
			return ctx_error_msg(ctx, -EFBIG, "the %ss need more than this host can give them", req->what);
		size = bytes + bytes / 3 + entries * 512 + HEADROOM;
		if (size < MIN_SIZE)
			size = MIN_SIZE;
	}
	size = (size + (1 << 20) - 1) & ~((uint64_t)(1 << 20) - 1);
	if (size > avail)
		return ctx_error_msg(ctx, -ENOSPC,
				     "the %ss need a %" PRIu64 " MiB file system and the pool has %" PRIu64 " MiB free",
				     req->what, size >> 20, avail >> 20);
	char sz[32], inodes[32];
	snprintf(sz, sizeof(sz), "%lluk", (unsigned long long)(size >> 10));
	/* One inode per 8 KiB as for a directory's import, or more when the layers have more entries. */
	uint64_t want = entries + entries / 4 + 4096;
	bool by_count = want > size / 8192;
	snprintf(inodes, sizeof(inodes), "%llu", (unsigned long long)(by_count ? want : 8192));
	if (req->progress)
		req->progress("mkfs.ext4", 0, 0, req->progress_userdata);
	const char *argv[] = { "mkfs.ext4", "-q", "-F", "-L", "rootfs", "-b", "4096", by_count ? "-N" : "-i", inodes,
			       "-E", "lazy_itable_init=0,lazy_journal_init=0", image, sz, NULL };
	int r = run_tool(ctx, argv, "mkfs.ext4");
	if (r < 0)
		return r;
	/* mkfs leaves the file short of the size when its last blocks are all holes: make it the size. */
	if (truncate(image, (off_t)size) < 0)
		return ctx_error(ctx, -errno, "truncate %s", image);
	*ret_size = size;
	return 0;
}

/* Forwards "progress verify|apply N DONE TOTAL" as "layer N/M: verify" with its byte counts. */
static void forward_progress(const struct unpack_request *req, const char *rest)
{
	char pass[16];
	unsigned idx;
	unsigned long long done, total;
	if (!req->progress || sscanf(rest, "%15s %u %llu %llu", pass, &idx, &done, &total) != 4 || !idx ||
	    idx > req->n_layers)
		return;
	char stage[128];
	const struct image_layer *l = &req->layers[idx - 1];
	if (req->n_layers == 1 && !l->digest[0])
		snprintf(stage, sizeof(stage), "%s: %s", req->what, !strcmp(pass, "apply") ? "apply" : "verify");
	else
		snprintf(stage, sizeof(stage), "%s %u/%zu %.19s: %s", req->what, idx, req->n_layers,
			 l->digest[0] ? l->digest : l->diff_id, !strcmp(pass, "apply") ? "apply" : "verify");
	req->progress(stage, done, total, req->progress_userdata);
}

static int free_bytes(space_ctx *ctx, const char *image, uint64_t *ret)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", image);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	struct statvfs sv;
	if (statvfs(slash ? dir : ".", &sv) < 0)
		return ctx_error(ctx, -errno, "statvfs %s", dir);
	*ret = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

/* The helper's "user UID GID HOME" line: the resolved user of the request (its home escaped to one line;
 * a line that does not parse leaves ret as it was). */
static void user_line(const char *rest, struct unpack_result *ret)
{
	unsigned uid, gid;
	char home[256];
	if (sscanf(rest, "%u %u %255s", &uid, &gid, home) != 3)
		return;
	ret->has_user = true;
	ret->uid = uid;
	ret->gid = gid;
	util_text_one_line(home, ret->home, sizeof(ret->home));
}

int unpack_apply(space_ctx *ctx, const struct unpack_request *req, const char *image, struct unpack_result *ret)
{
	if (!req->n_layers || req->n_layers > OCI_LAYERS_MAX || req->n_fds > OCI_LAYERS_MAX)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	char path[PATH_MAX];
	int r = ctx_helper_path(ctx, "space-unpack", path, sizeof(path));
	if (r < 0)
		return r;
	uint64_t avail = 0;
	if ((r = free_bytes(ctx, image, &avail)) < 0)
		return r;
	if (avail < MIN_SIZE)
		return ctx_error_msg(ctx, -ENOSPC, "the pool has %" PRIu64 " MiB free: too little for a template",
				     avail >> 20);
	_cleanup_close_ int img = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (img < 0)
		return ctx_error(ctx, -errno, "create %s", image);

	/* argv: the layers by the numbers they get in the helper */
	char uid_arg[16], max_arg[24], specs[OCI_LAYERS_MAX][320];
	const char *argv[10 + 2 * OCI_LAYERS_MAX + 1];
	size_t a = 0;
	struct helper h = { .ctx = ctx, .ctl = -1 };
	if ((r = take_uid(&h)) < 0)
		return r;
	snprintf(uid_arg, sizeof(uid_arg), "%u", h.uid);
	snprintf(max_arg, sizeof(max_arg), "%llu", (unsigned long long)avail);
	argv[a++] = "space-unpack";
	argv[a++] = "apply";
	argv[a++] = "--uid";
	argv[a++] = uid_arg;
	argv[a++] = "--max-bytes";
	argv[a++] = max_arg;
	if (req->user) {
		argv[a++] = "--user";
		argv[a++] = req->user;
	}
	if (req->workdir) {
		argv[a++] = "--workdir";
		argv[a++] = req->workdir;
	}
	for (size_t i = 0; i < req->n_layers; i++) {
		const struct image_layer *l = &req->layers[i];
		size_t k;
		for (k = 0; k < req->n_fds && req->fds[k] != l->fd; k++)
			;
		if (k == req->n_fds) {
			helper_end(&h);
			return -EINVAL;
		}
		snprintf(specs[i], sizeof(specs[i]), "%zu,%llu,%llu,%s,%s,%s", FIRST_FD + k, (unsigned long long)l->offset,
			 (unsigned long long)l->length, l->comp, l->digest[0] ? l->digest : "-",
			 l->diff_id[0] ? l->diff_id : "-");
		argv[a++] = "--layer";
		argv[a++] = specs[i];
	}
	argv[a] = NULL;
	/* Nothing can be written before the file system is made: the helper lowers the hard limit to its size
	 * and raises the soft one to it then (it can go no higher than avail). */
	if ((r = spawn(&h, path, argv, img, req->fds, req->n_fds, 0, avail)) < 0) {
		helper_end(&h);
		return r;
	}
	char line[LINE_MAX_BYTES + 1];
	bool done = false;
	const char *what = req->what[0] == 'l' ? "image" : req->what[0] == 'c' ? "build context" : "tarball";
	while (!done) {
		const char *rest;
		if ((r = helper_next_line(&h, line, sizeof(line))) < 0)
			break;
		if (helper_word(line, "ready", &rest))
			continue;
		if (helper_word(line, "progress", &rest)) {
			forward_progress(req, rest);
		} else if (helper_word(line, "measure", &rest)) {
			unsigned long long bytes, entries;
			char go[48];
			if (sscanf(rest, "%llu %llu", &bytes, &entries) != 2) {
				r = ctx_error_msg(ctx, -EPROTO, "space-unpack: a malformed measure line");
				break;
			}
			if (ret->looks_like_image) {
				r = 0;
				break; /* the caller refuses it, with the reason */
			}
			if ((r = make_fs(ctx, req, image, bytes, entries, avail, &ret->size)) < 0)
				break;
			snprintf(go, sizeof(go), "go %llu\n", (unsigned long long)ret->size);
			if ((r = util_write_all(h.ctl, go, strlen(go))) < 0) {
				r = ctx_error(ctx, r, "space-unpack");
				break;
			}
		} else if (helper_word(line, "image-like", &rest)) {
			ret->looks_like_image = !req->any_tree;
		} else if (helper_word(line, "warn", &rest)) {
			_cleanup_free_ char *safe = util_escape_dup(rest, 0);
			ctx_log(ctx, SPACE_LOG_WARNING, "%s: %s", what, safe ? safe : "?");
		} else if (helper_word(line, "user", &rest)) {
			user_line(rest, ret);
		} else if (helper_word(line, "shell", &rest)) {
			ret->shell = !strcmp(rest, "1");
		} else if (helper_word(line, "counts", &rest)) {
			_cleanup_free_ char *safe = util_escape_dup(rest, 0);
			ctx_log(ctx, SPACE_LOG_DEBUG, "%s applied: %s", what, safe ? safe : "?");
		} else if (helper_word(line, "error", &rest)) {
			snprintf(h.error, sizeof(h.error), "%s", rest);
			r = -EPIPE;
			break;
		} else if (helper_word(line, "done", &rest)) {
			done = true;
		}
	}
	if (r == 0 && ret->looks_like_image) {
		helper_end(&h);
		return 0;
	}
	if (!done) {
		r = helper_failed(&h, what, r);
		helper_end(&h);
		return r;
	}
	int st = helper_reap(&h, false);
	helper_end(&h);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return ctx_error_msg(ctx, -EIO, "%s: space-unpack said done, then failed (status %d)", what, st);
	/* The helper wrote only inside the file it was given, at most its size (RLIMIT_FSIZE); check. */
	struct stat sb;
	if (fstat(img, &sb) < 0 || (uint64_t)sb.st_size != ret->size)
		return ctx_error_msg(ctx, -EBADMSG, "%s: the image file is not the size it was made (%lld, not %llu)", what,
				     (long long)sb.st_size, (unsigned long long)ret->size);
	if (req->progress)
		req->progress("check ext4 image", 0, 0, req->progress_userdata);
	const char *fsck[] = { "e2fsck", "-n", "-f", image, NULL };
	return run_tool(ctx, fsck, "e2fsck of the new rootfs image");
}

/*
 * A helper run over an existing image: check and export (read-only), add (read-write, bounded by the
 * image's size). extra: more arguments (NULL-terminated), srcs: descriptors from 5 on. ret (may be NULL)
 * gets "shell" and "user" lines.
 */
static int run_over(space_ctx *ctx, const char *mode, const char *image, const char *const *extra, const int *srcs,
		    size_t n_srcs, bool out, struct unpack_result *ret)
{
	char path[PATH_MAX], uid_arg[16];
	int r = ctx_helper_path(ctx, "space-unpack", path, sizeof(path));
	if (r < 0)
		return r;
	bool rw = !strcmp(mode, "add");
	_cleanup_close_ int img = open(image, (rw ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (img < 0 || fstat(img, &st) < 0)
		return ctx_error(ctx, -errno, "open %s", image);
	struct helper h = { .ctx = ctx, .ctl = -1 };
	if ((r = take_uid(&h)) < 0)
		return r;
	snprintf(uid_arg, sizeof(uid_arg), "%u", h.uid);
	const char *argv[40 + 2 * OCI_LAYERS_MAX] = { "space-unpack", mode, "--uid", uid_arg };
	size_t a = 4;
	for (const char *const *e = extra; e && *e && a < ARRAY_SIZE(argv) - 1; e++)
		argv[a++] = *e;
	argv[a] = NULL;
	/* An export's output is the caller's, as large as it is; an added-to image stays its size. */
	uint64_t fsize = out ? RLIM_INFINITY : rw ? (uint64_t)st.st_size : 0;
	if ((r = spawn(&h, path, argv, img, srcs, n_srcs, fsize, fsize)) < 0) {
		helper_end(&h);
		return r;
	}
	char line[LINE_MAX_BYTES + 1];
	bool done = false;
	while (!done) {
		const char *rest;
		if ((r = helper_next_line(&h, line, sizeof(line))) < 0)
			break;
		if (helper_word(line, "shell", &rest) && ret) {
			ret->shell = !strcmp(rest, "1");
		} else if (helper_word(line, "isdir", &rest) && ret) {
			ret->isdir = !strcmp(rest, "1");
		} else if (helper_word(line, "user", &rest) && ret) {
			user_line(rest, ret);
		} else if (helper_word(line, "warn", &rest)) {
			_cleanup_free_ char *safe = util_escape_dup(rest, 0);
			ctx_log(ctx, SPACE_LOG_WARNING, "space-unpack %s: %s", mode, safe ? safe : "?");
		} else if (helper_word(line, "error", &rest)) {
			snprintf(h.error, sizeof(h.error), "%s", rest);
			r = -EPIPE;
			break;
		} else if (helper_word(line, "done", &rest)) {
			done = true;
		}
	}
	if (!done) {
		r = helper_failed(&h, mode, r);
		helper_end(&h);
		return r;
	}
	int status = helper_reap(&h, false);
	helper_end(&h);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return ctx_error_msg(ctx, -EIO, "space-unpack %s failed", mode);
	if (rw && (fstat(img, &st) < 0 || (uint64_t)st.st_size != (uint64_t)fsize))
		return ctx_error_msg(ctx, -EBADMSG, "space-unpack %s changed the image's size", mode);
	return 0;
}

int unpack_check_shell(space_ctx *ctx, const char *image, bool *ret_shell)
{
	struct unpack_result res = { 0 };
	int r = run_over(ctx, "check", image, NULL, NULL, 0, false, &res);
	*ret_shell = res.shell;
	return r;
}

int unpack_check_user(space_ctx *ctx, const char *image, const char *user, struct unpack_result *ret)
{
	memset(ret, 0, sizeof(*ret));
	const char *extra[] = { "--user", user, NULL };
	return run_over(ctx, "check", image, extra, NULL, 0, false, ret);
}

int unpack_check_isdir(space_ctx *ctx, const char *image, const char *path, bool *ret)
{
	struct unpack_result res = { 0 };
	const char *extra[] = { "--isdir", path, NULL };
	int r = run_over(ctx, "check", image, extra, NULL, 0, false, &res);
	*ret = res.isdir;
	return r;
}

int unpack_export(space_ctx *ctx, const char *image, int out_fd)
{
	int outs[1] = { out_fd };
	return run_over(ctx, "export", image, NULL, outs, 1, true, NULL);
}

int unpack_export_path(space_ctx *ctx, const char *image, const char *path, const char *as, int out_fd)
{
	int outs[1] = { out_fd };
	const char *extra[] = { "--path", path, as ? "--as" : NULL, as, NULL };
	return run_over(ctx, "export", image, extra, outs, 1, true, NULL);
}

int unpack_add(space_ctx *ctx, const char *image, const struct unpack_add *req, struct unpack_result *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (req->n_layers > 8)
		return -EINVAL;
	const char *extra[32];
	char specs[8][320], owner[40];
	size_t n = 0;
	int fds[8];
	for (size_t i = 0; i < req->n_layers; i++) {
		const struct image_layer *l = &req->layers[i];
		fds[i] = l->fd;
		snprintf(specs[i], sizeof(specs[i]), "%zu,%llu,%llu,%s,%s,%s", FIRST_FD + i, (unsigned long long)l->offset,
			 (unsigned long long)l->length, l->comp, l->digest[0] ? l->digest : "-",
			 l->diff_id[0] ? l->diff_id : "-");
		extra[n++] = "--layer";
		extra[n++] = specs[i];
	}
	if (req->into) {
		extra[n++] = "--into";
		extra[n++] = req->into;
	}
	if (req->chown) {
		snprintf(owner, sizeof(owner), "%u:%u", req->uid, req->gid);
		extra[n++] = "--chown";
		extra[n++] = owner;
	}
	if (req->plain) {
		extra[n++] = "--plain";
		extra[n++] = "1";
	}
	if (req->workdir) {
		extra[n++] = "--workdir";
		extra[n++] = req->workdir;
	}
	if (req->user) {
		extra[n++] = "--user";
		extra[n++] = req->user;
	}
	extra[n] = NULL;
	return run_over(ctx, "add", image, extra, fds, req->n_layers, false, ret);
}

