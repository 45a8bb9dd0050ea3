/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-unpack copy: one directory tree into another (a jail's root disk between an ext4 image and a
 * directory on btrfs), the source hostile. Every name is read from its directory with getdents64 and used
 * only relative to that directory's descriptor, never followed (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), and
 * checked again after its open (same type, same inode). Nothing is allocated per entry but the hard-link
 * table, whose entries the entry limit bounds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "unpack/unpack.h"
#include "util/cleanup.h"
#include "util/util.h"

#define DENTS_BUF 8192
#define DATA_BUF (256u << 10)
#define PROGRESS_BYTES (8ull << 20)
#define PROGRESS_ENTRIES 2000
/* "/name" per level: directories to COPY_DEPTH_MAX, then the entries of the deepest one. */
#define PATH_BUF ((COPY_DEPTH_MAX + 1) * (NAME_MAX + 1) + 1)

/* A getdents64 record (struct linux_dirent64). */
struct dent64 {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* A file with more than one name, copied: where its first copy is (absolute in the destination). */
struct link_slot {
	dev_t dev;
	ino_t ino;
	char *path; /* NULL: a free slot */
};

struct copier {
	uint64_t max_bytes, max_entries;
	struct copy_counts n;
	uint64_t shown_bytes, shown_entries; /* at the last progress line */
	bool no_cfr;                         /* copy_file_range cannot copy between these two */
	struct link_slot *links;
	size_t links_cap, links_used;
	char *dents[COPY_DEPTH_MAX + 1]; /* one getdents64 buffer per level, made when first reached */
	char *err;
	size_t errlen;
	size_t path_len;
	char path[PATH_BUF];          /* the entry at hand, "/a/b" ("" the root) */
	char xlist[XATTR_LIST_MAX];   /* flistxattr's names; a symlink's target */
	char xval[XATTR_SIZE_MAX];    /* fgetxattr's value */
	char data[DATA_BUF];          /* read/write where copy_file_range cannot */
};

static const char *shown(const struct copier *c)
{
	return c->path_len ? c->path : "/";
}

static int fail(struct copier *c, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct copier *c, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	return r;
}

/* An error of the destination, with its errno (ENOSPC and EDQUOT mean a full pool to the library). */
static int fail_write(struct copier *c, const char *what)
{
	int e = errno;
	return fail(c, -e, "write %s: %s: %s", shown(c), what, strerror(e));
}

static int fail_read(struct copier *c, const char *what)
{
	int e = errno;
	return fail(c, -e, "read %s: %s: %s", shown(c), what, strerror(e));
}

static void progress(struct copier *c, bool force)
{
	if (!force && c->n.entries - c->shown_entries < PROGRESS_ENTRIES && c->n.bytes - c->shown_bytes < PROGRESS_BYTES)
		return;
	c->shown_entries = c->n.entries;
	c->shown_bytes = c->n.bytes;
	unpack_status("progress copy %llu %llu", (unsigned long long)c->n.entries, (unsigned long long)c->n.bytes);
}

/* Counts bytes against --max-bytes. */
static int charge(struct copier *c, uint64_t bytes)
{
	if (bytes > c->max_bytes || c->n.bytes > c->max_bytes - bytes)
		return fail(c, -ENOSPC, "the tree needs more than %llu bytes (at %s)", (unsigned long long)c->max_bytes,
			    shown(c));
	c->n.bytes += bytes;
	return 0;
}

/* ---- hard links ---- */

static size_t link_hash(dev_t dev, ino_t ino, size_t cap)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static const char *link_find(const struct copier *c, dev_t dev, ino_t ino)
{
	if (!c->links_cap)
		return NULL;
	for (size_t i = link_hash(dev, ino, c->links_cap);; i = (i + 1) & (c->links_cap - 1)) {
		const struct link_slot *s = &c->links[i];
		if (!s->path)
			return NULL;
		if (s->dev == dev && s->ino == ino)
			return s->path;
	}
}

static void link_put(struct link_slot *table, size_t cap, struct link_slot s)
{
	size_t i = link_hash(s.dev, s.ino, cap);
	while (table[i].path)
		i = (i + 1) & (cap - 1);
	table[i] = s;
}

/* Remembers the entry at hand as the first copy of (dev, ino). At most one slot per entry. */
static int link_add(struct copier *c, dev_t dev, ino_t ino)
{
	if ((c->links_used + 1) * 2 > c->links_cap) {
		size_t cap = c->links_cap ? c->links_cap * 2 : 64;
		struct link_slot *t = calloc(cap, sizeof(*t));
		if (!t)
			return fail(c, -ENOMEM, "out of memory for the hard links (at %s)", shown(c));
		for (size_t i = 0; i < c->links_cap; i++)
			if (c->links[i].path)
				link_put(t, cap, c->links[i]);
		free(c->links);
		c->links = t;
		c->links_cap = cap;
	}
	char *p = strdup(c->path);
	if (!p)
		return fail(c, -ENOMEM, "out of memory for the hard links (at %s)", shown(c));
	link_put(c->links, c->links_cap, (struct link_slot){ dev, ino, p });
	c->links_used++;
	return 0;
}

/* name in dst_dir: a new name of the first copy at target. The process is chrooted into the destination
 * and every directory on target was made by this copy, so the absolute path reaches only that copy;
 * one longer than PATH_MAX is walked a directory at a time. */
static int link_to(struct copier *c, const char *target, int dst_dir, const char *name)
{
	if (strlen(target) < PATH_MAX) {
		if (linkat(AT_FDCWD, target, dst_dir, name, 0) < 0)
			return fail_write(c, "link");
		return 0;
	}
	_cleanup_close_ int dir = open("/", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return fail_write(c, "link: open /");
	const char *p = target + 1;
	for (const char *slash; (slash = strchr(p, '/')); p = slash + 1) {
		char comp[NAME_MAX + 1];
		size_t len = (size_t)(slash - p);
		if (len > NAME_MAX)
			return fail(c, -ENAMETOOLONG, "write %s: link: a name on %s is too long", shown(c), target);
		memcpy(comp, p, len);
		comp[len] = '\0';
		int next = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return fail_write(c, "link: open its directory");
		close(dir);
		dir = next;
	}
	if (linkat(dir, p, dst_dir, name, 0) < 0)
		return fail_write(c, "link");
	return 0;
}

/* ---- metadata ---- */

/* Every extended attribute of src onto dst. One the destination refuses (EPERM for trusted.*, EOPNOTSUPP
 * for a namespace it has not, EINVAL for a value it does not take) is counted, the first one named. */
static int copy_xattrs(struct copier *c, int src, int dst)
{
	ssize_t len = flistxattr(src, c->xlist, sizeof(c->xlist));
	if (len < 0)
		return errno == EOPNOTSUPP ? 0 : fail_read(c, "list extended attributes");
	for (ssize_t at = 0; at < len;) {
		const char *name = c->xlist + at;
		size_t nl = strnlen(name, (size_t)(len - at));
		if (nl == (size_t)(len - at))
			return fail(c, -EIO, "read %s: the list of extended attributes is cut short", shown(c));
		at += (ssize_t)nl + 1;
		if (!nl)
			continue;
		ssize_t vl = fgetxattr(src, name, c->xval, sizeof(c->xval));
		if (vl < 0 && errno == ENODATA)
			continue; /* removed since the listing */
		int e = vl < 0 ? errno : 0;
		if (vl < 0 && e != ERANGE && e != E2BIG && e != EOPNOTSUPP)
			return fail(c, -e, "read %s: extended attribute %s: %s", shown(c), name, strerror(e));
		if (!e && fsetxattr(dst, name, c->xval, (size_t)vl, 0) < 0) {
			e = errno;
			/* btrfs says ENOSPC for a value larger than a tree leaf takes: a full pool shows on the
			 * data writes anyway. */
			bool refused = e == EPERM || e == EOPNOTSUPP || e == EINVAL || e == E2BIG || e == ERANGE ||
				       e == EACCES || (e == ENOSPC && vl > 4096);
			if (!refused)
				return fail(c, -e, "write %s: extended attribute %s: %s", shown(c), name, strerror(e));
		}
		if (e) {
			if (!c->n.xattrs_failed++)
				snprintf(c->n.xattr_first, sizeof(c->n.xattr_first), "%.100s: %s, at %.120s", name,
					 strerror(e), shown(c));
		}
	}
	return 0;
}

/* Owner, mode (after the owner: chown clears set-id bits), extended attributes (after the owner too: it
 * clears security.capability), then the times (every change above moved them). */
static int copy_meta(struct copier *c, int src, int dst, const struct stat *st)
{
	if (fchown(dst, st->st_uid, st->st_gid) < 0)
		return fail_write(c, "chown");
	if (fchmod(dst, st->st_mode & 07777) < 0)
		return fail_write(c, "chmod");
	int r = copy_xattrs(c, src, dst);
	if (r < 0)
		return r;
	const struct timespec ts[2] = { st->st_atim, st->st_mtim };
	if (futimens(dst, ts) < 0)
		return fail_write(c, "set times");
	return 0;
}

/* name in dir, opened without following it (flags besides O_NOFOLLOW | O_CLOEXEC), and still the object the
 * stat before the open saw (*after its stat now): a hostile source may have swapped the name since. The
 * descriptor, or a negative errno with the message set. */
static int open_same(struct copier *c, int dir, const char *name, int flags, const struct stat *before,
		     struct stat *after)
{
	int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail_read(c, "open");
	int r = 0;
	if (fstat(fd, after) < 0)
		r = fail_read(c, "stat");
	else if ((after->st_mode & S_IFMT) != (before->st_mode & S_IFMT) || after->st_ino != before->st_ino ||
		 after->st_dev != before->st_dev)
		r = fail(c, -ESTALE, "read %s: changed while it was copied", shown(c));
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* ---- data ---- */

static int copy_range(struct copier *c, int src, int dst, off_t at, off_t len)
{
	off_t end = at + len;
	while (at < end && !c->no_cfr) {
		off_t in = at, out = at;
		ssize_t k = copy_file_range(src, &in, dst, &out, (size_t)(end - at), 0);
		if (k > 0) {
			at += k;
			continue;
		}
		if (k == 0)
			return 0; /* the source got shorter: the ftruncate after fills with zeros */
		if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
			c->no_cfr = true;
			break;
		}
		if (errno == EINTR)
			continue;
		/* Either side: the destination's errors matter (ENOSPC, EDQUOT), the source's are reported too. */
		return fail_write(c, "copy");
	}
	while (at < end) {
		size_t want = (size_t)(end - at) < sizeof(c->data) ? (size_t)(end - at) : sizeof(c->data);
		ssize_t k = pread(src, c->data, want, at);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return fail_read(c, "data");
		if (k == 0)
			return 0;
		for (ssize_t done = 0; done < k;) {
			ssize_t w = pwrite(dst, c->data + done, (size_t)(k - done), at + done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? fail_write(c, "data") : fail(c, -EIO, "write %s: data: no progress", shown(c));
			done += w;
		}
		at += k;
	}
	return 0;
}

/* The data extents of src's first size bytes (holes stay holes). reserved: the bytes already charged for
 * this file; a source that fills its holes meanwhile is charged for what it adds. */
static int copy_data(struct copier *c, int src, int dst, off_t size, uint64_t reserved)
{
	uint64_t copied = 0;
	for (off_t at = 0; at < size;) {
		off_t data = lseek(src, at, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (data < 0)
			return fail_read(c, "seek data");
		if (data >= size)
			break;
		off_t hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			return fail_read(c, "seek hole");
		if (hole > size)
			hole = size;
		if (hole <= data)
			return fail(c, -EIO, "read %s: the file's extents move", shown(c));
		copied += (uint64_t)(hole - data + 4095) & ~4095ull;
		if (copied > reserved) {
			int r = charge(c, copied - reserved);
			if (r < 0)
				return r;
			reserved = copied;
		}
		int r = copy_range(c, src, dst, data, hole - data);
		if (r < 0)
			return r;
		at = hole;
	}
	if (ftruncate(dst, size) < 0)
		return fail_write(c, "truncate");
	return 0;
}

/* ---- entries ---- */

static int copy_file(struct copier *c, int src_dir, int dst_dir, const char *name, const struct stat *st)
{
	if (st->st_nlink > 1) {
		const char *first = link_find(c, st->st_dev, st->st_ino);
		if (first) {
			int r = link_to(c, first, dst_dir, name);
			if (r == 0)
				c->n.hardlinks++;
			return r;
		}
	}
	struct stat now;
	_cleanup_close_ int src = open_same(c, src_dir, name, O_RDONLY | O_NOCTTY | O_NONBLOCK, st, &now);
	if (src < 0)
		return src;
	int r;
	uint64_t blocks = (uint64_t)now.st_blocks * 512;
	if ((r = charge(c, blocks)) < 0)
		return r;
	_cleanup_close_ int dst = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0)
		return fail_write(c, "create");
	if ((r = copy_data(c, src, dst, now.st_size, blocks)) < 0 || (r = copy_meta(c, src, dst, &now)) < 0)
		return r;
	if (now.st_nlink > 1 && (r = link_add(c, now.st_dev, now.st_ino)) < 0)
		return r;
	c->n.files++;
	return 0;
}

static int copy_symlink(struct copier *c, int src_dir, int dst_dir, const char *name, const struct stat *st)
{
	struct stat now;
	_cleanup_close_ int src = open_same(c, src_dir, name, O_PATH, st, &now);
	if (src < 0)
		return src;
	ssize_t len = readlinkat(src, "", c->xlist, PATH_MAX);
	if (len < 0)
		return fail_read(c, "readlink");
	if (len >= PATH_MAX)
		return fail(c, -ENAMETOOLONG, "read %s: the symlink's target is longer than %d bytes", shown(c),
			    PATH_MAX - 1);
	c->xlist[len] = '\0';
	if (symlinkat(c->xlist, dst_dir, name) < 0)
		return fail_write(c, "symlink");
	if (fchownat(dst_dir, name, now.st_uid, now.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_write(c, "chown");
	const struct timespec ts[2] = { now.st_atim, now.st_mtim };
	if (utimensat(dst_dir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_write(c, "set times");
	c->n.symlinks++;
	return 0;
}

/* A FIFO is made, never opened. fchmodat follows a symlink, but the name is the FIFO just made, in a
 * directory only this copy writes to. No extended attributes: there is no descriptor to set them on. */
static int copy_fifo(struct copier *c, int dst_dir, const char *name, const struct stat *st)
{
	if (mknodat(dst_dir, name, S_IFIFO | 0600, 0) < 0)
		return fail_write(c, "mkfifo");
	if (fchownat(dst_dir, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_write(c, "chown");
	if (fchmodat(dst_dir, name, st->st_mode & 07777, 0) < 0)
		return fail_write(c, "chmod");
	const struct timespec ts[2] = { st->st_atim, st->st_mtim };
	if (utimensat(dst_dir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_write(c, "set times");
	c->n.fifos++;
	return 0;
}

static int copy_dir(struct copier *c, int src, int dst, unsigned depth);

/* A directory's metadata goes on after its entries: a mode without write or search would stop them, a
 * default ACL would be inherited, and every entry made would move its times. */
static int copy_subdir(struct copier *c, int src_dir, int dst_dir, const char *name, const struct stat *st,
		       unsigned depth)
{
	if (depth > COPY_DEPTH_MAX)
		return fail(c, -ELOOP, "tree deeper than %d directories at %s", COPY_DEPTH_MAX, shown(c));
	struct stat now;
	_cleanup_close_ int src = open_same(c, src_dir, name, O_RDONLY | O_DIRECTORY, st, &now);
	if (src < 0)
		return src;
	int r;
	/* One there already is taken as it is (a new ext4 destination's lost+found); anything but a directory
	 * fails the open below. */
	if (mkdirat(dst_dir, name, 0700) < 0 && errno != EEXIST)
		return fail_write(c, "mkdir");
	_cleanup_close_ int dst = openat(dst_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dst < 0)
		return fail_write(c, "open");
	if ((r = copy_dir(c, src, dst, depth)) < 0 || (r = copy_meta(c, src, dst, &now)) < 0)
		return r;
	c->n.dirs++;
	return 0;
}

/* One name of directory src (at depth: 0 the root's entries' directory), copied into dst. */
static int copy_entry(struct copier *c, int src, int dst, const char *name, unsigned depth)
{
	size_t len = strlen(name);
	if (len > NAME_MAX || c->path_len + 1 + len >= sizeof(c->path))
		return fail(c, -ENAMETOOLONG, "read %s: a name longer than %d bytes", shown(c), NAME_MAX);
	size_t parent = c->path_len;
	c->path[parent] = '/';
	memcpy(c->path + parent + 1, name, len + 1);
	c->path_len = parent + 1 + len;
	if (c->n.entries >= c->max_entries)
		return fail(c, -E2BIG, "more than %llu entries (at %s)", (unsigned long long)c->max_entries, shown(c));
	c->n.entries++;
	struct stat st;
	int r = 0;
	if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_read(c, "stat");
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR:
		r = copy_subdir(c, src, dst, name, &st, depth + 1);
		break;
	case S_IFREG:
		r = copy_file(c, src, dst, name, &st);
		break;
	case S_IFLNK:
		r = copy_symlink(c, src, dst, name, &st);
		break;
	case S_IFIFO:
		r = copy_fifo(c, dst, name, &st);
		break;
	case S_IFCHR:
	case S_IFBLK:
		c->n.devices++; /* a user namespace cannot make them, and a jail has its own /dev */
		break;
	case S_IFSOCK:
		c->n.sockets++; /* nothing listens on a copied one */
		break;
	default:
		r = fail(c, -EINVAL, "read %s: unknown file type %o", shown(c), st.st_mode & S_IFMT);
	}
	if (r < 0)
		return r;
	c->path_len = parent;
	c->path[parent] = '\0';
	progress(c, false);
	return 0;
}

static int copy_dir(struct copier *c, int src, int dst, unsigned depth)
{
	if (!c->dents[depth] && !(c->dents[depth] = malloc(DENTS_BUF)))
		return fail(c, -ENOMEM, "out of memory (at %s)", shown(c));
	char *buf = c->dents[depth];
	for (;;) {
		ssize_t n = getdents64(src, buf, DENTS_BUF);
		if (n < 0)
			return fail_read(c, "list");
		if (n == 0)
			return 0;
		for (ssize_t at = 0; at < n;) {
			struct dent64 *d = (struct dent64 *)(buf + at);
			size_t room = (size_t)(n - at);
			if (room < offsetof(struct dent64, name) + 1 || d->reclen > room ||
			    d->reclen < offsetof(struct dent64, name) + 1 ||
			    strnlen(d->name, d->reclen - offsetof(struct dent64, name)) ==
				    d->reclen - offsetof(struct dent64, name))
				return fail(c, -EIO, "read %s: a malformed directory entry", shown(c));
			at += d->reclen;
			if (!strcmp(d->name, ".") || !strcmp(d->name, ".."))
				continue;
			int r = copy_entry(c, src, dst, d->name, depth);
			if (r < 0)
				return r;
		}
	}
}

int copy_tree(int src_fd, int dst_fd, uint64_t max_bytes, uint64_t max_entries, struct copy_counts *ret,
	      char *err, size_t errlen)
{
	_cleanup_free_ struct copier *c = calloc(1, sizeof(*c));
	if (!c)
		return util_errf(err, errlen, -ENOMEM, "out of memory");
	c->max_bytes = max_bytes;
	c->max_entries = max_entries;
	c->err = err;
	c->errlen = errlen;
	struct stat st, dst_st;
	int r;
	if (fstat(src_fd, &st) < 0 || !S_ISDIR(st.st_mode))
		r = fail(c, -ENOTDIR, "the source is not a directory");
	else if (fstat(dst_fd, &dst_st) < 0 || !S_ISDIR(dst_st.st_mode))
		r = fail(c, -ENOTDIR, "the destination is not a directory");
	else if ((r = copy_dir(c, src_fd, dst_fd, 0)) == 0)
		r = copy_meta(c, src_fd, dst_fd, &st);
	if (r == 0) {
		progress(c, true);
		*ret = c->n;
	}
	for (size_t i = 0; i < c->links_cap; i++)
		free(c->links[i].path);
	free(c->links);
	for (size_t i = 0; i < ARRAY_SIZE(c->dents); i++)
		free(c->dents[i]);
	return r;
}
