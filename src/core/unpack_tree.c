/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-unpack's tree modes (core/unpack.h): copy (an ext4 image's tree into a directory, for jails) and
 * receive (a btrfs send stream into a quarantine subvolume). Both run the helper as root of a user
 * namespace of its own, over detached mounts idmapped to it, chrooted into the destination.
 */
#include "core/unpack.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

/* ---- copy: an image's tree into a directory ---- */

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

/* A detached read-only mount of the ext4 image (its loop device auto-clears with the mount). */
static int mount_image_ro(space_ctx *ctx, const char *image, int *ret)
{
	char loop[64];
	_cleanup_close_ int lfd = util_loop_attach(image, true, loop, sizeof(loop));
	if (lfd < 0)
		return ctx_error(ctx, lfd, "attach a loop device to %s", image);
	_cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", loop, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return ctx_error(ctx, -errno, "mount %s", image);
	int m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	if (m < 0)
		return ctx_error(ctx, -errno, "mount %s", image);
	*ret = m;
	return 0;
}

static int write_file_at(const char *path, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return util_write_all(fd, text, strlen(text)) < 0 ? -errno : 0;
}

/* Maps the child's user namespace onto the range at base and idmaps both mounts to it. */
static int map_child(pid_t pid, uint32_t base, const int *mounts, size_t n)
{
	char p[64], map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", base, (unsigned)UIDALLOC_RANGE_SIZE);
	snprintf(p, sizeof(p), "/proc/%d/uid_map", (int)pid);
	int r = write_file_at(p, map);
	snprintf(p, sizeof(p), "/proc/%d/gid_map", (int)pid);
	if (r == 0)
		r = write_file_at(p, map);
	if (r < 0)
		return r;
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)pid);
	_cleanup_close_ int ns = open(p, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)ns };
		if (mount_setattr(mounts[i], "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
			return -errno;
	}
	return 0;
}

/*
 * Starts `space-unpack copy` or `receive` as root of a new user namespace mapped onto the range at base:
 * fd 0 in_fd (-1: /dev/null), fd 3 src's root, fd 4 the control socket, fd 5 dst's root (src_m and dst_m: detached mounts, idmapped to it before it
 * runs). The program is opened here, as root, and run from that descriptor: its uid on the host may not
 * pass the directories on its path (a build or install tree under a private temporary directory). Only
 * async-signal-safe calls in the child.
 */
static int spawn_copy(struct helper *h, const char *path, const char *const *argv, int src_m, int dst_m, uint32_t base,
		      int in_fd)
{
	_cleanup_close_ int exe = open(path, O_PATH | O_CLOEXEC);
	if (exe < 0)
		return ctx_error(h->ctx, -errno, "open %s", path);
	int sp[2], up[2] = { -1, -1 }, go[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return ctx_error(h->ctx, -errno, "socketpair");
	_cleanup_close_ int ctl_child = sp[1];
	h->ctl = sp[0];
	_cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	_cleanup_close_ int src = openat(src_m, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int dst = openat(dst_m, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (null < 0 || src < 0 || dst < 0 || pipe2(up, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
		int e = errno;
		close_pair(up);
		close_pair(go);
		return ctx_error(h->ctx, -e, "prepare space-unpack copy");
	}
	int want[7] = { in_fd >= 0 ? in_fd : null, null, null, src, sp[1], dst, exe };
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		if (!helper_tie_to(parent))
			_exit(127);
		char c = 'u';
		if (unshare(CLONE_NEWUSER) < 0 || write(up[1], &c, 1) != 1 || read(go[0], &c, 1) != 1 || c != 'g')
			_exit(126);
		/* Root of the namespace: host uid base, nothing on the host. */
		if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
			_exit(126);
		/* fd 6, the program, is closed by its own exec */
		if (!helper_place_fds(want, ARRAY_SIZE(want)) || fcntl(6, F_SETFD, FD_CLOEXEC) < 0)
			_exit(127);
		syscall(SYS_execveat, 6, "", (char *const *)argv, environ, AT_EMPTY_PATH);
		_exit(127);
	}
	int e = errno;
	close(TAKE_FD(up[1]));
	close(TAKE_FD(go[0]));
	if (pid < 0) {
		close_pair(up);
		close_pair(go);
		return ctx_error(h->ctx, -e, "fork");
	}
	h->pid = pid;
	char c = 0;
	ssize_t n;
	do
		n = read(up[0], &c, 1);
	while (n < 0 && errno == EINTR);
	int r = n == 1 && c == 'u' ? 0 : -EPERM;
	if (r == 0) {
		const int mounts[] = { src_m, dst_m };
		r = map_child(pid, base, mounts, ARRAY_SIZE(mounts));
	}
	c = 'g';
	if (r == 0 && write(go[1], &c, 1) != 1)
		r = -errno;
	close_pair(up);
	close_pair(go);
	if (r < 0)
		return ctx_error(h->ctx, r, "a user namespace for space-unpack copy");
	return 0;
}

/* What run_tree reports and how. */
struct tree_run {
	const char *mode;  /* "copy" or "receive" */
	const char *what;  /* for messages: "copy the image's tree" */
	const char *stage; /* for progress */
	uint64_t total;    /* progress's whole */
	space_progress_fn progress;
	void *progress_userdata;
	struct unpack_receive_counts *counts; /* receive: its "counts" line */
};

/* Runs `space-unpack MODE ARGS...` over the two detached mounts (src_m at fd 3, dst_m at fd 5) and in_fd
 * (fd 0) as root of a user namespace on a host uid range of its own, until "done" or its failure. */
static int run_tree(space_ctx *ctx, const char *const *argv, int src_m, int dst_m, int in_fd, const struct tree_run *t)
{
	char path[PATH_MAX];
	int r = ctx_helper_path(ctx, "space-unpack", path, sizeof(path));
	if (r < 0)
		return r;
	struct helper h = { .ctx = ctx, .ctl = -1 };
	pid_t me = getpid();
	snprintf(h.owner, sizeof(h.owner), "pid %d %llu unpack-%s", (int)me,
		 (unsigned long long)core_process_start_time(me), t->mode);
	uint32_t base = 0;
	r = uidalloc_acquire(UIDALLOC_RANGE, h.owner, &base);
	if (r == -ENOSPC && uids_reap_stale(ctx) > 0)
		r = uidalloc_acquire(UIDALLOC_RANGE, h.owner, &base);
	if (r < 0)
		return ctx_error(ctx, r, "allocate a host uid range for space-unpack %s (%s)", t->mode, UIDALLOC_DIR);
	r = spawn_copy(&h, path, argv, src_m, dst_m, base, in_fd);
	char line[LINE_MAX_BYTES + 1];
	bool done = false;
	while (r == 0 && !done) {
		const char *rest;
		if ((r = helper_next_line(&h, line, sizeof(line))) < 0)
			break;
		unsigned long long a, b, c;
		if (helper_word(line, "warn", &rest)) {
			_cleanup_free_ char *safe = util_escape_dup(rest, 0);
			ctx_log(ctx, SPACE_LOG_WARNING, "space-unpack %s: %s", t->mode, safe ? safe : "?");
		} else if (helper_word(line, "progress", &rest)) {
			bool copy = sscanf(rest, "copy %llu %llu", &a, &b) == 2;
			if ((copy || sscanf(rest, "receive %llu %llu", &a, &b) == 2) && t->progress)
				t->progress(t->stage, b, t->total, t->progress_userdata);
		} else if (helper_word(line, "counts", &rest)) {
			if (t->counts && sscanf(rest, "commands=%llu entries=%llu bytes=%llu", &a, &b, &c) == 3) {
				t->counts->commands = a;
				t->counts->entries = b;
				t->counts->bytes = c;
			}
		} else if (helper_word(line, "error", &rest)) {
			snprintf(h.error, sizeof(h.error), "%s", rest);
			r = -EPIPE;
		} else if (helper_word(line, "done", &rest)) {
			done = true;
		}
	}
	if (!done) {
		r = helper_failed(&h, t->what, r);
	} else {
		int status = helper_reap(&h, false);
		r = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 :
								    ctx_error_msg(ctx, -EIO, "space-unpack %s failed", t->mode);
	}
	(void)helper_reap(&h, true);
	if (h.ctl >= 0)
		close(h.ctl);
	(void)uidalloc_release(UIDALLOC_RANGE, base, h.owner);
	return r;
}

int unpack_tree_from_image(space_ctx *ctx, const char *image, const char *tree_dir, space_progress_fn progress,
			   void *progress_userdata)
{
	char bytes_arg[24], entries_arg[24];
	struct stat st;
	if (stat(image, &st) < 0)
		return ctx_error(ctx, -errno, "stat %s", image);
	if (mkdir(tree_dir, 0700) < 0)
		return ctx_error(ctx, -errno, "create %s", tree_dir);
	_cleanup_close_ int src_m = -1;
	int r = mount_image_ro(ctx, image, &src_m);
	if (r < 0)
		return r;
	_cleanup_close_ int dst_m = open_tree(AT_FDCWD, tree_dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (dst_m < 0)
		return ctx_error(ctx, -errno, "bind %s", tree_dir);
	/* The tree cannot need more than the file system it comes from. */
	snprintf(bytes_arg, sizeof(bytes_arg), "%llu", (unsigned long long)st.st_size);
	snprintf(entries_arg, sizeof(entries_arg), "%u", 1u << 24);
	const char *argv[] = { "space-unpack", "copy", "--max-bytes", bytes_arg, "--max-entries", entries_arg, NULL };
	/* what it copied, against the image's size (more than the files can take) */
	const struct tree_run t = { .mode = "copy", .what = "copy the image's tree",
				    .stage = "copy the files for jails (confined)", .total = (uint64_t)st.st_size,
				    .progress = progress, .progress_userdata = progress_userdata };
	return run_tree(ctx, argv, src_m, dst_m, -1, &t);
}

int unpack_receive(space_ctx *ctx, const struct unpack_receive_request *req, struct unpack_receive_counts *ret)
{
	char bytes_arg[24], entries_arg[24];
	memset(ret, 0, sizeof(*ret));
	_cleanup_close_ int dst_m = open_tree(AT_FDCWD, req->dst, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (dst_m < 0)
		return ctx_error(ctx, -errno, "bind %s", req->dst);
	/* The parent, read-only, for its extents; a full stream gets a second view of the destination, which
	 * it cannot use (a clone from another subvolume than its own is refused there). */
	const char *src = req->parent ? req->parent : req->dst;
	_cleanup_close_ int src_m = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (src_m < 0)
		return ctx_error(ctx, -errno, "bind %s", src);
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
	if (mount_setattr(src_m, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return ctx_error(ctx, -errno, "make the view of %s read-only", src);
	snprintf(bytes_arg, sizeof(bytes_arg), "%llu", (unsigned long long)req->max_bytes);
	snprintf(entries_arg, sizeof(entries_arg), "%llu", (unsigned long long)req->max_entries);
	const char *argv[] = { "space-unpack", "receive", "--max-bytes", bytes_arg, "--max-entries", entries_arg,
			       req->parent ? "--incremental" : NULL, "1", NULL };
	const struct tree_run t = { .mode = "receive", .what = "the stream", .stage = "receive (confined)",
				    .total = req->expected_bytes, .progress = req->progress,
				    .progress_userdata = req->progress_userdata, .counts = ret };
	return run_tree(ctx, argv, src_m, dst_m, req->in_fd, &t);
}
