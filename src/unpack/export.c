/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's tree as a tar stream (unpack.h): pax format, entries in name order within each directory
 * (so two exports of one image are the same bytes but for the times mkfs gave lost+found), every inode's
 * type, permission bits with set-id and sticky, owner, mtime, device numbers, symlink target and extended
 * attributes (SCHILY.xattr.*, as space-unpack reads them back); a second name of an inode is a hard link
 * to the first. The root's own lost+found (mkfs's) is left out: an import makes its own.
 *
 * The image may be a sandbox's work (a template snapshot's disk): it is read as hostile, bounded in depth,
 * a directory reached twice (a loop in a corrupt file system) refused, every length checked.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unpack/unpack.h"
#include "util/util.h"

#define DEPTH_MAX 1024
#define OUT_BUF (1u << 20)
#define XATTR_BYTES_MAX (1u << 20) /* of one entry's pax records */

struct hl {
	ext2_ino_t ino;
	char *path;
};

struct exporter {
	ext2_filsys fs;
	int fd;
	uint8_t *out;
	size_t used;
	uint64_t written;
	struct hl *links; /* inodes with more than one name, by the path they were first written at */
	size_t n_links, cap_links;
	ext2_ino_t *dirs; /* directories written, against loops */
	size_t n_dirs, cap_dirs;
	char err[512];
};

static int fail(struct exporter *x, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct exporter *x, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return r;
}

static int flush_out(struct exporter *x)
{
	int r = util_write_all(x->fd, x->out, x->used);
	if (r < 0)
		return fail(x, r, "write the tar stream: %s", strerror(-r));
	x->written += x->used;
	x->used = 0;
	return 0;
}

static int put(struct exporter *x, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		size_t k = OUT_BUF - x->used < n ? OUT_BUF - x->used : n;
		memcpy(x->out + x->used, b, k);
		x->used += k;
		b += k;
		n -= k;
		if (x->used == OUT_BUF) {
			int r = flush_out(x);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int pad(struct exporter *x, uint64_t n)
{
	static const uint8_t zero[TAR_BLOCK];
	size_t p = (size_t)((TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK);
	return p ? put(x, zero, p) : 0;
}

/* One ustar header block; name and link already fit (pax carries the long ones). */
static int header(struct exporter *x, const char *name, const char *link, char type, uint32_t mode, uint32_t uid,
		  uint32_t gid, uint64_t size, int64_t mtime, uint32_t maj, uint32_t min)
{
	uint8_t h[TAR_BLOCK];
	char shortname[100], shortlink[100];
	/* A long name or link is in the pax header before: the ustar fields get a prefix of it. */
	snprintf(shortname, sizeof(shortname), "%.99s", name);
	if (link)
		snprintf(shortlink, sizeof(shortlink), "%.99s", link);
	tar_header(h, shortname, link ? shortlink : NULL, type, mode, uid, gid, size, mtime, maj, min);
	return put(x, h, sizeof(h));
}

static int record(struct exporter *x, char **buf, size_t *len, const char *key, const void *value, size_t vlen)
{
	int r = tar_pax_record(buf, len, XATTR_BYTES_MAX, key, value, vlen);
	if (r == -E2BIG)
		return fail(x, r, "an entry's extended header passes %u bytes", XATTR_BYTES_MAX);
	return r < 0 ? fail(x, r, "out of memory") : 0;
}

struct xattr_collect {
	struct exporter *x;
	char **buf;
	size_t *len;
	int r;
};

static int collect_xattr(char *name, char *value, size_t value_len, void *data)
{
	struct xattr_collect *c = data;
	char key[300];
	if (strlen(name) > TAR_XATTR_NAME_MAX || value_len > TAR_XATTR_VALUE_MAX) {
		c->r = fail(c->x, -E2BIG, "an extended attribute past the format's bounds");
		return XATTR_ABORT;
	}
	snprintf(key, sizeof(key), "SCHILY.xattr.%s", name);
	if ((c->r = record(c->x, c->buf, c->len, key, value, value_len)) < 0)
		return XATTR_ABORT;
	return 0;
}

/* The entry at path (relative, no trailing '/'): its pax header when it needs one, then its own. */
static int entry(struct exporter *x, const char *path, ext2_ino_t ino, const struct ext2_inode *inode, char type,
		 const char *link, uint64_t size)
{
	char *pax = NULL;
	size_t plen = 0;
	int r = 0;
	uint32_t uid = inode_uid(*inode), gid = inode_gid(*inode);
	char num[32];
	bool dir = type == '5';
	char name[TAR_PATH_MAX + 2];
	snprintf(name, sizeof(name), "%s%s", path, dir && *path ? "/" : "");
	if (!*path)
		snprintf(name, sizeof(name), "./");
	if (strlen(name) > 99)
		r = record(x, &pax, &plen, "path", name, strlen(name));
	if (!r && link && strlen(link) > 99)
		r = record(x, &pax, &plen, "linkpath", link, strlen(link));
	if (!r && uid > 07777777)
		r = record(x, &pax, &plen, "uid", num, (size_t)snprintf(num, sizeof(num), "%u", uid));
	if (!r && gid > 07777777)
		r = record(x, &pax, &plen, "gid", num, (size_t)snprintf(num, sizeof(num), "%u", gid));
	if (!r && size > 077777777777ull)
		r = record(x, &pax, &plen, "size", num, (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)size));
	if (!r && type != '1') { /* a hard link's attributes are its target's */
		struct ext2_xattr_handle *h;
		errcode_t e = ext2fs_xattrs_open(x->fs, ino, &h);
		if (!e) {
			struct xattr_collect c = { x, &pax, &plen, 0 };
			if (!(e = ext2fs_xattrs_read(h)))
				e = ext2fs_xattrs_iterate(h, collect_xattr, &c);
			ext2fs_xattrs_close(&h);
			r = c.r;
		}
		if (!r && e)
			r = fail(x, -EIO, "%s: extended attributes: %s", path, unpack_e2err(e));
	}
	if (!r && pax) {
		char pn[100];
		snprintf(pn, sizeof(pn), "PaxHeaders/%u", ino);
		r = header(x, pn, NULL, 'x', 0644, 0, 0, plen, 0, 0, 0);
		if (!r)
			r = put(x, pax, plen);
		if (!r)
			r = pad(x, plen);
	}
	free(pax);
	if (r < 0)
		return r;
	uint32_t maj = 0, min = 0;
	if (type == '3' || type == '4') {
		if (inode->i_block[0]) {
			maj = (inode->i_block[0] >> 8) & 0xff;
			min = inode->i_block[0] & 0xff;
		} else {
			uint32_t d = inode->i_block[1];
			maj = (d & 0xfff00) >> 8;
			min = (d & 0xff) | ((d >> 12) & 0xfff00);
		}
	}
	return header(x, name, link, type, inode->i_mode, uid, gid, size, inode->i_mtime, maj, min);
}

static int file_data(struct exporter *x, const char *path, ext2_ino_t ino, uint64_t size)
{
	ext2_file_t f;
	errcode_t e = ext2fs_file_open(x->fs, ino, 0, &f);
	if (e)
		return fail(x, -EIO, "%s: %s", path, unpack_e2err(e));
	static uint8_t buf[1 << 16];
	uint64_t done = 0;
	int r = 0;
	while (!r && done < size) {
		unsigned want = size - done < sizeof(buf) ? (unsigned)(size - done) : sizeof(buf), got = 0;
		if ((e = ext2fs_file_read(f, buf, want, &got)) || !got)
			r = fail(x, -EIO, "%s: %s", path, e ? unpack_e2err(e) : "shorter than its size");
		else
			r = put(x, buf, got);
		done += got;
	}
	ext2fs_file_close(f);
	return r ? r : pad(x, size);
}

static int read_link(struct exporter *x, const char *path, ext2_ino_t ino, struct ext2_inode *inode, char *buf,
		     size_t len)
{
	uint64_t size = EXT2_I_SIZE(inode);
	if (!size || size >= len)
		return fail(x, -EINVAL, "%s: a symlink of %llu bytes", path, (unsigned long long)size);
	if (ext2fs_is_fast_symlink(inode)) {
		memcpy(buf, inode->i_block, (size_t)size);
	} else {
		ext2_file_t f;
		unsigned got = 0;
		errcode_t e = ext2fs_file_open(x->fs, ino, 0, &f);
		if (!e) {
			e = ext2fs_file_read(f, buf, (unsigned)size, &got);
			ext2fs_file_close(f);
		}
		if (e || got != size)
			return fail(x, -EIO, "%s: its symlink target cannot be read", path);
	}
	buf[size] = '\0';
	if (memchr(buf, '\0', (size_t)size))
		return fail(x, -EINVAL, "%s: a symlink target holding a NUL", path);
	return 0;
}

struct names {
	char **v;
	ext2_ino_t *ino;
	size_t n, cap;
	int err;
};

static int collect(struct ext2_dir_entry *d, int offset, int blocksize, char *buf, void *priv)
{
	struct names *ns = priv;
	int len = ext2fs_dirent_name_len(d);
	if (!d->inode || (len == 1 && d->name[0] == '.') || (len == 2 && d->name[0] == '.' && d->name[1] == '.'))
		return 0;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 32;
		char **v = realloc(ns->v, cap * sizeof(*v));
		if (v)
			ns->v = v;
		ext2_ino_t *i = v ? realloc(ns->ino, cap * sizeof(*i)) : NULL;
		if (!i) {
			ns->err = -ENOMEM;
			return DIRENT_ABORT;
		}
		ns->ino = i;
		ns->cap = cap;
	}
	if (!(ns->v[ns->n] = strndup(d->name, (size_t)len)) || memchr(d->name, '/', (size_t)len)) {
		ns->err = ns->v[ns->n] ? -EINVAL : -ENOMEM;
		free(ns->v[ns->n]);
		return DIRENT_ABORT;
	}
	ns->ino[ns->n++] = d->inode;
	return 0;
}

static int cmp_idx(const void *a, const void *b, void *arg)
{
	char **v = arg;
	return strcmp(v[*(const size_t *)a], v[*(const size_t *)b]);
}

static int walk(struct exporter *x, const char *path, ext2_ino_t dir, int depth);

static int one(struct exporter *x, const char *path, ext2_ino_t ino, int depth)
{
	struct ext2_inode inode;
	errcode_t e = ext2fs_read_inode(x->fs, ino, &inode);
	if (e)
		return fail(x, -EIO, "%s: %s", path, unpack_e2err(e));
	uint16_t fmt = inode.i_mode & LINUX_S_IFMT;
	if (fmt != LINUX_S_IFDIR && inode.i_links_count > 1) {
		for (size_t i = 0; i < x->n_links; i++)
			if (x->links[i].ino == ino)
				return entry(x, path, ino, &inode, '1', x->links[i].path, 0);
		if (x->n_links == x->cap_links) {
			size_t cap = x->cap_links ? 2 * x->cap_links : 64;
			struct hl *l = realloc(x->links, cap * sizeof(*l));
			if (!l)
				return fail(x, -ENOMEM, "out of memory");
			x->links = l;
			x->cap_links = cap;
		}
		if (!(x->links[x->n_links].path = strdup(path)))
			return fail(x, -ENOMEM, "out of memory");
		x->links[x->n_links++].ino = ino;
	}
	char link[TAR_PATH_MAX + 1];
	int r;
	switch (fmt) {
	case LINUX_S_IFDIR:
		if ((r = entry(x, path, ino, &inode, '5', NULL, 0)) < 0)
			return r;
		return walk(x, path, ino, depth + 1);
	case LINUX_S_IFREG: {
		uint64_t size = EXT2_I_SIZE(&inode);
		if (size > TAR_FILE_MAX)
			return fail(x, -EFBIG, "%s: a file larger than %llu bytes", path, (unsigned long long)TAR_FILE_MAX);
		if ((r = entry(x, path, ino, &inode, '0', NULL, size)) < 0)
			return r;
		return file_data(x, path, ino, size);
	}
	case LINUX_S_IFLNK:
		if ((r = read_link(x, path, ino, &inode, link, sizeof(link))) < 0)
			return r;
		return entry(x, path, ino, &inode, '2', link, 0);
	case LINUX_S_IFCHR: return entry(x, path, ino, &inode, '3', NULL, 0);
	case LINUX_S_IFBLK: return entry(x, path, ino, &inode, '4', NULL, 0);
	case LINUX_S_IFIFO: return entry(x, path, ino, &inode, '6', NULL, 0);
	default: return 0; /* sockets are not kept in tar */
	}
}

static int walk(struct exporter *x, const char *path, ext2_ino_t dir, int depth)
{
	if (depth > DEPTH_MAX)
		return fail(x, -ELOOP, "directories nested deeper than %d", DEPTH_MAX);
	for (size_t i = 0; i < x->n_dirs; i++)
		if (x->dirs[i] == dir)
			return fail(x, -ELOOP, "%s: a directory reached twice (a corrupt file system)", path);
	if (x->n_dirs == x->cap_dirs) {
		size_t cap = x->cap_dirs ? 2 * x->cap_dirs : 256;
		ext2_ino_t *d = realloc(x->dirs, cap * sizeof(*d));
		if (!d)
			return fail(x, -ENOMEM, "out of memory");
		x->dirs = d;
		x->cap_dirs = cap;
	}
	x->dirs[x->n_dirs++] = dir;
	struct names ns = { 0 };
	errcode_t e = ext2fs_dir_iterate(x->fs, dir, 0, NULL, collect, &ns);
	int r = ns.err ? fail(x, ns.err, "%s: a directory that cannot be listed", path)
		: e	? fail(x, -EIO, "%s: %s", path, unpack_e2err(e))
			: 0;
	size_t *order = r ? NULL : calloc(ns.n + 1, sizeof(size_t));
	if (!r && !order)
		r = fail(x, -ENOMEM, "out of memory");
	for (size_t i = 0; order && i < ns.n; i++)
		order[i] = i;
	if (order)
		qsort_r(order, ns.n, sizeof(size_t), cmp_idx, ns.v);
	for (size_t k = 0; !r && k < ns.n; k++) {
		size_t i = order[k];
		if (!*path && !strcmp(ns.v[i], "lost+found"))
			continue;
		char child[TAR_PATH_MAX + 1];
		if ((size_t)snprintf(child, sizeof(child), "%s%s%s", path, *path ? "/" : "", ns.v[i]) >= sizeof(child))
			r = fail(x, -ENAMETOOLONG, "%s/%s: a path longer than %u bytes", path, ns.v[i], TAR_PATH_MAX);
		else
			r = one(x, child, ns.ino[i], depth);
	}
	free(order);
	for (size_t i = 0; i < ns.n; i++)
		free(ns.v[i]);
	free(ns.v);
	free(ns.ino);
	return r;
}

int export_tar(ext2_filsys fs, int out_fd, const char *path, const char *as, char *err, size_t errlen)
{
	struct exporter x = { .fs = fs, .fd = out_fd };
	if (!(x.out = malloc(OUT_BUF)))
		return util_errf(err, errlen, -ENOMEM, "out of memory");
	int r = 0;
	if (!path) {
		struct ext2_inode root;
		r = ext2fs_read_inode(fs, EXT2_ROOT_INO, &root) ? fail(&x, -EIO, "the root inode cannot be read") : 0;
		if (!r)
			r = entry(&x, "", EXT2_ROOT_INO, &root, '5', NULL, 0);
		if (!r)
			r = walk(&x, "", EXT2_ROOT_INO, 0);
	} else {
		/* One file or directory (COPY --from): found through the image's own symlinks. */
		ext2_ino_t ino;
		char name[TAR_PATH_MAX + 1];
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		if (image_resolve(fs, path, true, &ino) < 0)
			r = fail(&x, -ENOENT, "%s is not in the image", path);
		else if (tar_path_normalize(as ? as : base, name, sizeof(name)) < 0)
			r = fail(&x, -EINVAL, "'%s' is not a name", as ? as : base);
		else if (!name[0]) {
			/* "." : a directory's contents, named from the top; anything else keeps its own name */
			struct ext2_inode inode;
			if (ext2fs_read_inode(fs, ino, &inode))
				r = fail(&x, -EIO, "the inode of %s cannot be read", path);
			else if (LINUX_S_ISDIR(inode.i_mode))
				r = walk(&x, "", ino, 0);
			else if (tar_path_normalize(base, name, sizeof(name)) < 0 || !name[0])
				r = fail(&x, -ENOTDIR, "%s is not a directory", path);
			else
				r = one(&x, name, ino, 0);
		} else {
			r = one(&x, name, ino, 0);
		}
	}
	static const uint8_t end[2 * TAR_BLOCK];
	if (!r)
		r = put(&x, end, sizeof(end));
	if (!r)
		r = flush_out(&x);
	for (size_t i = 0; i < x.n_links; i++)
		free(x.links[i].path);
	free(x.links);
	free(x.dirs);
	free(x.out);
	if (r < 0)
		return util_errf(err, errlen, r, "%s", x.err);
	unpack_status("exported %llu", (unsigned long long)x.written);
	return 0;
}
