/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-unpack receive: applies a btrfs send stream (version 1) read from fd 0 to the tree it is chrooted
 * into (the quarantine subvolume: empty for a full stream, a snapshot of the parent for an incremental
 * one), confined as copy is (copy_main_confine: root of a user namespace the library made, the MODE_RECEIVE
 * filter). Every command is decoded and checked (bstream.c) before it is done. A clone's source is this
 * tree or, for the parent's extents, fd 3: a read-only mount of the parent template, reached only by
 * names relative to it, never through a symlink. Writes past max_bytes or entries past max_entries end the
 * receive. Status lines: "progress receive COMMANDS BYTES", "warn ...", "counts ...", "done".
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "unpack/bstream.h"
#include "unpack/unpack.h"
#include "util/util.h"

struct receiver {
	uint64_t max_bytes, max_entries;
	uint64_t bytes, entries;
	uint64_t xattrs_skipped;
	int wfd; /* the file the last write went to */
	char wpath[PATH_MAX];
	char err[900];
	struct bstream_state st;
};

/* Sets rv's message; returns rc (its arguments are taken before anything can change errno). */
__attribute__((format(printf, 3, 4))) static int failf(struct receiver *rv, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rv->err, sizeof(rv->err), fmt, ap);
	va_end(ap);
	return rc;
}
#define fail(rc, ...) failf(rv, (rc), __VA_ARGS__)

static int open_beneath(int dirfd, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

static void close_write(struct receiver *rv)
{
	if (rv->wfd >= 0)
		close(rv->wfd);
	rv->wfd = -1;
	rv->wpath[0] = '\0';
}

/* The file at path, open for writing (kept for the next write to it). */
static int write_fd(struct receiver *rv, const char *path)
{
	if (rv->wfd >= 0 && !strcmp(rv->wpath, path))
		return rv->wfd;
	close_write(rv);
	int fd = open_beneath(AT_FDCWD, path, O_WRONLY);
	if (fd < 0)
		return fail(fd, "open %s to write: %s", path, strerror(-fd));
	rv->wfd = fd;
	snprintf(rv->wpath, sizeof(rv->wpath), "%s", path);
	return fd;
}

static int count_entry(struct receiver *rv)
{
	if (++rv->entries > rv->max_entries)
		return fail(-E2BIG, "more than %llu entries", (unsigned long long)rv->max_entries);
	return 0;
}

static int count_bytes(struct receiver *rv, uint64_t n)
{
	if (n > rv->max_bytes - rv->bytes)
		return fail(-ENOSPC, "more than %llu bytes of data", (unsigned long long)rv->max_bytes);
	rv->bytes += n;
	return 0;
}

static int do_clone(struct receiver *rv, const struct bstream_cmd *c, const char *path)
{
	char src_path[PATH_MAX];
	bstream_path(&c->a[BA_CLONE_PATH], src_path, sizeof(src_path));
	uint64_t off = bstream_u64(&c->a[BA_FILE_OFFSET]), len = bstream_u64(&c->a[BA_CLONE_LEN]);
	uint64_t src_off = bstream_u64(&c->a[BA_CLONE_OFFSET]);
	int r = count_bytes(rv, len);
	if (r < 0)
		return r;
	bool self = !memcmp(c->a[BA_CLONE_UUID].p, rv->st.uuid, 16);
	int dst = write_fd(rv, path);
	if (dst < 0)
		return dst;
	int src = open_beneath(self ? AT_FDCWD : RECEIVE_PARENT_FD, src_path, O_RDONLY);
	if (src < 0)
		return fail(src, "clone from %s%s: %s", self ? "" : "the parent's ", src_path, strerror(-src));
	/* In the kernel where it can: shared extents on one file system; else copied. */
	loff_t in = (loff_t)src_off, out = (loff_t)off;
	uint64_t left = len;
	while (left > 0) {
		ssize_t n = copy_file_range(src, &in, dst, &out, left > (1u << 30) ? (1u << 30) : left, 0);
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS))
			break;
		if (n < 0) {
			r = -errno;
			close(src);
			return fail(r, "clone into %s: %s", path, strerror(-r));
		}
		if (n == 0)
			break; /* the source ends early: what is left reads as zeros, as btrfs receive's copy */
		left -= (uint64_t)n;
	}
	static char buf[1 << 16];
	while (left > 0) {
		ssize_t n = pread(src, buf, left < sizeof(buf) ? left : sizeof(buf), in);
		if (n < 0) {
			r = -errno;
			close(src);
			return fail(r, "read %s: %s", src_path, strerror(-r));
		}
		if (n == 0) {
			memset(buf, 0, sizeof(buf));
			n = (ssize_t)(left < sizeof(buf) ? left : sizeof(buf));
		}
		if ((r = util_pwrite_all(dst, buf, (size_t)n, (uint64_t)out)) < 0) {
			close(src);
			return fail(r, "write %s: %s", path, strerror(-r));
		}
		in += n;
		out += n;
		left -= (uint64_t)n;
	}
	close(src);
	return 0;
}

static int do_xattr(struct receiver *rv, const struct bstream_cmd *c, const char *path)
{
	char name[256];
	bstream_path(&c->a[BA_XATTR_NAME], name, sizeof(name));
	/* The tree's own attributes only: user.* and file capabilities; the rest (security labels, ACLs of
	 * another host's ids) are not kept, and counted. */
	if (strncmp(name, "user.", 5) && strcmp(name, "security.capability")) {
		rv->xattrs_skipped++;
		return 0;
	}
	int fd = open_beneath(AT_FDCWD, path, O_RDONLY);
	if (fd == -ELOOP) { /* a symlink: its attributes are not kept */
		rv->xattrs_skipped++;
		return 0;
	}
	if (fd < 0)
		return fail(fd, "open %s: %s", path, strerror(-fd));
	int r = c->cmd == BS_SET_XATTR ? fsetxattr(fd, name, c->a[BA_XATTR_DATA].p, c->a[BA_XATTR_DATA].len, 0) :
					 fremovexattr(fd, name);
	close(fd);
	if (r < 0)
		rv->xattrs_skipped++;
	return 0;
}

static int apply_one(struct receiver *rv, const struct bstream_cmd *c)
{
	char path[PATH_MAX], to[PATH_MAX];
	bstream_path(&c->a[BA_PATH], path, sizeof(path));
	const char *p = path[0] ? path : ".";
	int r = 0;
	if (c->cmd != BS_WRITE && c->cmd != BS_CLONE && c->cmd != BS_TRUNCATE)
		close_write(rv);
	switch (c->cmd) {
	case BS_SUBVOL:
	case BS_SNAPSHOT:
	case BS_END:
		return 0;
	case BS_MKFILE: {
		if ((r = count_entry(rv)) < 0)
			return r;
		int fd = openat(AT_FDCWD, p, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return fail(-errno, "create %s: %s", p, strerror(errno));
		close(fd);
		return 0;
	}
	case BS_MKDIR:
		if ((r = count_entry(rv)) < 0)
			return r;
		return mkdirat(AT_FDCWD, p, 0700) < 0 ? fail(-errno, "mkdir %s: %s", p, strerror(errno)) : 0;
	case BS_MKFIFO:
		if ((r = count_entry(rv)) < 0)
			return r;
		return mknodat(AT_FDCWD, p, S_IFIFO | 0600, 0) < 0 ? fail(-errno, "mkfifo %s: %s", p, strerror(errno)) : 0;
	case BS_SYMLINK:
		if ((r = count_entry(rv)) < 0)
			return r;
		bstream_path(&c->a[BA_PATH_LINK], to, sizeof(to));
		return symlinkat(to, AT_FDCWD, p) < 0 ? fail(-errno, "symlink %s: %s", p, strerror(errno)) : 0;
	case BS_RENAME:
		bstream_path(&c->a[BA_PATH_TO], to, sizeof(to));
		return renameat(AT_FDCWD, p, AT_FDCWD, to) < 0 ? fail(-errno, "rename %s: %s", p, strerror(errno)) : 0;
	case BS_LINK:
		if ((r = count_entry(rv)) < 0)
			return r;
		bstream_path(&c->a[BA_PATH_LINK], to, sizeof(to));
		return linkat(AT_FDCWD, to, AT_FDCWD, p, 0) < 0 ? fail(-errno, "link %s: %s", p, strerror(errno)) : 0;
	case BS_UNLINK:
		return unlinkat(AT_FDCWD, p, 0) < 0 ? fail(-errno, "unlink %s: %s", p, strerror(errno)) : 0;
	case BS_RMDIR:
		return unlinkat(AT_FDCWD, p, AT_REMOVEDIR) < 0 ? fail(-errno, "rmdir %s: %s", p, strerror(errno)) : 0;
	case BS_SET_XATTR:
	case BS_REMOVE_XATTR:
		return do_xattr(rv, c, p);
	case BS_WRITE: {
		if ((r = count_bytes(rv, c->a[BA_DATA].len)) < 0)
			return r;
		int fd = write_fd(rv, p);
		if (fd < 0)
			return fd;
		if ((r = util_pwrite_all(fd, c->a[BA_DATA].p, c->a[BA_DATA].len, bstream_u64(&c->a[BA_FILE_OFFSET]))) < 0)
			return fail(r, "write %s: %s", p, strerror(-r));
		return 0;
	}
	case BS_CLONE:
		return do_clone(rv, c, p);
	case BS_TRUNCATE: {
		uint64_t size = bstream_u64(&c->a[BA_SIZE]);
		/* Growing a file takes no blocks (a hole), yet counts: a stream cannot make huge sparse files. */
		if ((r = count_bytes(rv, size > (1ull << 30) ? size >> 6 : 0)) < 0)
			return r;
		int fd = write_fd(rv, p);
		if (fd < 0)
			return fd;
		return ftruncate(fd, (off_t)size) < 0 ? fail(-errno, "truncate %s: %s", p, strerror(errno)) : 0;
	}
	case BS_CHMOD:
		return fchmodat(AT_FDCWD, p, (mode_t)(bstream_u64(&c->a[BA_MODE]) & 07777), 0) < 0 ?
			       fail(-errno, "chmod %s: %s", p, strerror(errno)) :
			       0;
	case BS_CHOWN: {
		uint64_t uid = bstream_u64(&c->a[BA_UID]), gid = bstream_u64(&c->a[BA_GID]);
		if (uid > 65535 || gid > 65535)
			return fail(-EINVAL, "chown %s to %llu:%llu: templates hold ids 0-65535 only", p,
				    (unsigned long long)uid, (unsigned long long)gid);
		/* chown clears set-id bits; the chmod that follows in the stream sets them again */
		return fchownat(AT_FDCWD, p, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0 ?
			       fail(-errno, "chown %s: %s", p, strerror(errno)) :
			       0;
	}
	case BS_UTIMES: {
		struct bstream_time a = bstream_time(&c->a[BA_ATIME]), m = bstream_time(&c->a[BA_MTIME]);
		struct timespec ts[2] = { { (time_t)a.sec, a.nsec < 1000000000u ? (long)a.nsec : 0 },
					  { (time_t)m.sec, m.nsec < 1000000000u ? (long)m.nsec : 0 } };
		return utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW) < 0 ?
			       fail(-errno, "utimes %s: %s", p, strerror(errno)) :
			       0;
	}
	default:
		return fail(-EOPNOTSUPP, "command %s is not received", bstream_cmd_name(c->cmd));
	}
}

/* Reads exactly n bytes from fd 0; 0, -EPIPE at a clean end before any byte, or -errno / -EIO. */
static int read_exact(uint8_t *buf, size_t n, bool *ret_eof)
{
	size_t got = 0;
	*ret_eof = false;
	while (got < n) {
		ssize_t k = read(RECEIVE_STREAM_FD, buf + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0) {
			*ret_eof = got == 0;
			return -EIO;
		}
		got += (size_t)k;
	}
	return 0;
}

int bstream_receive(uint64_t max_bytes, uint64_t max_entries, bool incremental, char *err, size_t errlen)
{
	struct receiver *rv = calloc(1, sizeof(*rv));
	uint8_t *buf = malloc(BSTREAM_CMD_HEADER + BSTREAM_MAX_PAYLOAD);
	if (!rv || !buf) {
		free(rv);
		free(buf);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rv->max_bytes = max_bytes;
	rv->max_entries = max_entries;
	rv->wfd = -1;
	bool eof = false;
	int r = read_exact(buf, BSTREAM_HEADER_SIZE, &eof);
	if (r < 0)
		r = fail(-EINVAL, "the stream ends before its header");
	else
		r = bstream_header(buf, BSTREAM_HEADER_SIZE, rv->err, sizeof(rv->err));
	uint64_t last_report = 0;
	while (r == 0 && !rv->st.ended) {
		if ((r = read_exact(buf, BSTREAM_CMD_HEADER, &eof)) < 0) {
			r = fail(-EINVAL, eof ? "the stream ends without its end command (cut short?)" :
						"a command header cut short");
			break;
		}
		long plen = bstream_cmd_length(buf);
		if (plen < 0) {
			r = fail(-EINVAL, "a command of more than %u bytes", BSTREAM_MAX_PAYLOAD);
			break;
		}
		if ((r = read_exact(buf + BSTREAM_CMD_HEADER, (size_t)plen, &eof)) < 0) {
			r = fail(-EINVAL, "command %llu cut short", (unsigned long long)rv->st.commands + 1);
			break;
		}
		struct bstream_cmd c;
		if ((r = bstream_decode(buf, BSTREAM_CMD_HEADER + (size_t)plen, &c, rv->err, sizeof(rv->err))) < 0 ||
		    (r = bstream_check(&c, &rv->st, rv->err, sizeof(rv->err))) < 0)
			break;
		if (rv->st.commands == 1 && rv->st.incremental != incremental) {
			r = fail(-EINVAL, incremental ? "a full stream where an incremental one was announced" :
							"an incremental stream where a full one was announced");
			break;
		}
		if ((r = apply_one(rv, &c)) < 0)
			break;
		if (rv->bytes - last_report >= (8u << 20)) {
			last_report = rv->bytes;
			unpack_status("progress receive %llu %llu", (unsigned long long)rv->st.commands,
				      (unsigned long long)rv->bytes);
		}
	}
	if (r == 0) {
		/* Nothing may follow the end. */
		uint8_t extra;
		ssize_t k;
		do
			k = read(RECEIVE_STREAM_FD, &extra, 1);
		while (k < 0 && errno == EINTR);
		if (k != 0)
			r = fail(-EINVAL, "bytes after the stream's end command");
	}
	close_write(rv);
	if (r == 0) {
		if (rv->xattrs_skipped)
			unpack_status("warn extended attributes not kept: %llu (only user.* and security.capability are)",
				      (unsigned long long)rv->xattrs_skipped);
		unpack_status("counts commands=%llu entries=%llu bytes=%llu", (unsigned long long)rv->st.commands,
			      (unsigned long long)rv->entries, (unsigned long long)rv->bytes);
	} else {
		snprintf(err, errlen, "%s", rv->err);
	}
	free(rv);
	free(buf);
	return r;
}
