/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tar entries into an ext4 image (unpack.h), through libext2fs: no path of a layer is ever resolved on the
 * host, so whatever a layer names (absolute paths, symlinks pointing anywhere, device nodes, set-id files)
 * is metadata of the image and nothing else.
 *
 * The rules are those of OCI image layers (image-spec layer.md), as container runtimes apply them:
 *  - names are relative to the image's root: a leading "/" or "./" is dropped; a ".." component is refused
 *    (an entry that tries to climb out is a hostile layer, not a path to clamp);
 *  - a symlink met in the middle of a path is followed inside the image, as in a chroot (an absolute target
 *    from the image's root, ".." stopping there); missing parent directories, a symlink's missing target
 *    included, are created (0755, root);
 *  - an entry replaces what is at its name, unless both are directories (the directory then takes the
 *    entry's attributes and keeps its content);
 *  - ".wh.NAME" removes NAME of the lower layers; ".wh..wh..opq" removes everything of the lower layers in
 *    its directory (what this layer put there stays, whichever order the entries come in); other ".wh..wh."
 *    names (aufs bookkeeping) are ignored; no whiteout is ever written;
 *  - a hard link names an existing non-directory (of this layer or a lower one);
 *  - ownership, permission bits including set-id and sticky, device numbers and extended attributes
 *    (user., security. including security.capability, system.posix_acl_*) are kept as given; trusted.*
 *    and unknown namespaces are skipped and counted.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unpack/tree.h"
#include "util/util.h"

#define DATA_CHUNK (1u << 20)

int applier_new(ext2_filsys fs, struct applier **ret)
{
	struct applier *a = calloc(1, sizeof(*a));
	if (!a || !(a->buf = malloc(DATA_CHUNK))) {
		free(a);
		return -ENOMEM;
	}
	a->fs = fs;
	*ret = a;
	return 0;
}

void applier_free(struct applier *a)
{
	if (!a)
		return;
	tree_state_free(a);
	free(a->buf);
	free(a);
}

void applier_begin_layer(struct applier *a, unsigned index)
{
	a->layer = index;
	tree_layer_begin(a);
}

const struct apply_counts *applier_counts(const struct applier *a)
{
	return &a->counts;
}

static void set_times(struct ext2_inode *inode, int64_t t)
{
	uint32_t v = t < 0 ? 0 : t > INT32_MAX ? INT32_MAX : (uint32_t)t;
	inode->i_atime = inode->i_ctime = inode->i_mtime = v;
}

static void set_owner(struct ext2_inode *inode, uint32_t uid, uint32_t gid)
{
	inode->i_uid = (uint16_t)uid;
	ext2fs_set_i_uid_high(*inode, uid >> 16);
	inode->i_gid = (uint16_t)gid;
	ext2fs_set_i_gid_high(*inode, gid >> 16);
}


static bool xattr_kept(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "security.", 9) ||
	       !strcmp(name, "system.posix_acl_access") || !strcmp(name, "system.posix_acl_default");
}

static int set_xattrs(struct applier *a, ext2_ino_t ino, const struct tar_entry *e)
{
	if (!e->n_xattrs)
		return 0;
	struct ext2_xattr_handle *h;
	errcode_t x = ext2fs_xattrs_open(a->fs, ino, &h);
	if (x)
		return tree_e2fail(a, x, "extended attributes");
	if (!(x = ext2fs_xattrs_read(h))) {
		for (size_t i = 0; i < e->n_xattrs && !x; i++) {
			if (!xattr_kept(e->xattrs[i].name)) {
				a->counts.xattrs_skipped++;
				continue;
			}
			x = ext2fs_xattr_set(h, e->xattrs[i].name, e->xattrs[i].value, e->xattrs[i].len);
		}
	}
	errcode_t c = ext2fs_xattrs_close(&h);
	if (x || c)
		return tree_e2fail(a, x ? x : c, "extended attribute");
	return 0;
}

/* Attributes of an entry on its inode: mode (type kept), owner, times. */
static int set_attrs(struct applier *a, ext2_ino_t ino, const struct tar_entry *e)
{
	struct ext2_inode inode;
	int r = tree_read_inode(a, ino, &inode);
	if (r < 0)
		return r;
	/* A symlink's permission bits mean nothing; they stay 0777, as Linux makes them. */
	uint32_t perm = LINUX_S_ISLNK(inode.i_mode) ? 0777 : e->mode & 07777;
	inode.i_mode = (uint16_t)((inode.i_mode & LINUX_S_IFMT) | perm);
	set_owner(&inode, e->uid, e->gid);
	set_times(&inode, e->mtime);
	if ((r = tree_write_inode(a, ino, &inode)) < 0)
		return r;
	return set_xattrs(a, ino, e);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* The file's data from the archive; full blocks of zeros become holes. */
static int write_data(struct applier *a, ext2_ino_t ino, const struct tar_entry *e, struct tar_reader *t)
{
	ext2_file_t f;
	errcode_t x = ext2fs_file_open(a->fs, ino, EXT2_FILE_WRITE, &f);
	if (x)
		return tree_e2fail(a, x, "open file");
	int r = 0;
	uint64_t pos = 0;
	size_t bs = a->fs->blocksize;
	while (pos < e->size) {
		int64_t k = tar_read(t, a->buf, DATA_CHUNK);
		if (k <= 0) {
			r = tree_fail(a, k < 0 ? (int)k : -EBADMSG, "%s", tar_error(t)[0] ? tar_error(t) : "read error");
			break;
		}
		for (size_t off = 0; off < (size_t)k && !r;) {
			/* A run of data blocks, or of zero blocks (only whole ones). */
			size_t n = (size_t)k - off < bs ? (size_t)k - off : bs;
			bool zero = n == bs && all_zero(a->buf + off, n);
			size_t end = off + n;
			while (end < (size_t)k) {
				size_t m = (size_t)k - end < bs ? (size_t)k - end : bs;
				if ((m == bs && all_zero(a->buf + end, m)) != zero)
					break;
				end += m;
			}
			if (zero) {
				x = ext2fs_file_llseek(f, pos + end, EXT2_SEEK_SET, NULL);
			} else {
				unsigned int wrote = 0;
				x = ext2fs_file_write(f, a->buf + off, (unsigned)(end - off), &wrote);
				if (!x && wrote != end - off)
					x = EXT2_ET_SHORT_WRITE;
			}
			if (x)
				r = tree_e2fail(a, x, "write file");
			off = end;
		}
		pos += (uint64_t)k;
	}
	if (!r && (x = ext2fs_file_set_size2(f, e->size)))
		r = tree_e2fail(a, x, "file size");
	errcode_t c = ext2fs_file_close(f);
	if (!r && c)
		r = tree_e2fail(a, c, "close file");
	return r;
}

/* A new inode of the entry's type (not a directory or symlink) linked as name in parent. */
static int make_node(struct applier *a, ext2_ino_t parent, const char *name, const struct tar_entry *e,
		     struct tar_reader *t, ext2_ino_t *ret)
{
	static const struct {
		uint16_t mode;
		int ft;
	} kinds[] = {
		[TAR_REG] = { LINUX_S_IFREG, EXT2_FT_REG_FILE },
		[TAR_CHR] = { LINUX_S_IFCHR, EXT2_FT_CHRDEV },
		[TAR_BLK] = { LINUX_S_IFBLK, EXT2_FT_BLKDEV },
		[TAR_FIFO] = { LINUX_S_IFIFO, EXT2_FT_FIFO },
	};
	ext2_filsys fs = a->fs;
	ext2_ino_t ino;
	errcode_t x = ext2fs_new_inode(fs, parent, kinds[e->type].mode, NULL, &ino);
	if (x)
		return tree_e2fail(a, x, name);
	int r = tree_link(a, parent, name, ino, kinds[e->type].ft);
	if (r < 0)
		return r;
	ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
	struct ext2_inode inode;
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = (uint16_t)(kinds[e->type].mode | (e->mode & 07777));
	set_owner(&inode, e->uid, e->gid);
	set_times(&inode, e->mtime);
	inode.i_links_count = 1;
	if (e->type == TAR_CHR || e->type == TAR_BLK) {
		/* The kernel's two encodings of a device number in i_block. */
		if (e->devmajor < 256 && e->devminor < 256) {
			inode.i_block[0] = e->devmajor * 256 + e->devminor;
		} else {
			inode.i_block[1] = (e->devminor & 0xff) | (e->devmajor << 8) | ((e->devminor & ~0xffu) << 12);
		}
		a->counts.devices++;
	} else if (e->type == TAR_REG && ext2fs_has_feature_extents(fs->super)) {
		ext2_extent_handle_t h;
		inode.i_flags |= EXT4_EXTENTS_FL;
		if ((x = ext2fs_extent_open2(fs, ino, &inode, &h)))
			return tree_e2fail(a, x, name);
		ext2fs_extent_free(h);
	}
	if ((x = ext2fs_write_new_inode(fs, ino, &inode)))
		return tree_e2fail(a, x, name);
	if (e->type == TAR_REG) {
		a->counts.files++;
		if ((r = write_data(a, ino, e, t)) < 0)
			return r;
	}
	*ret = ino;
	return 0;
}

static int make_symlink(struct applier *a, ext2_ino_t parent, const char *name, const char *target, ext2_ino_t *ret)
{
	ext2_ino_t ino;
	errcode_t e = ext2fs_new_inode(a->fs, parent, LINUX_S_IFLNK | 0777, NULL, &ino);
	if (!e)
		e = ext2fs_symlink(a->fs, parent, ino, NULL, target);
	if (e)
		return tree_e2fail(a, e, name);
	int r = tree_link(a, parent, name, ino, EXT2_FT_SYMLINK);
	if (r < 0)
		return r;
	a->counts.symlinks++;
	*ret = ino;
	return 0;
}

static int make_hardlink(struct applier *a, ext2_ino_t parent, const char *name, const char *target,
			 ext2_ino_t *ret)
{
	char norm[TAR_PATH_MAX + 1];
	int n = tar_path_normalize(target, norm, sizeof(norm));
	if (n == -EINVAL)
		return tree_fail(a, -EPERM, "hard link to '%s' climbs out of the root with '..': refused", target);
	if (n < 0 || !norm[0])
		return tree_fail(a, -EINVAL, "hard link to '%s': not a name in the image", target);
	char *slash = strrchr(norm, '/');
	const char *base = slash ? slash + 1 : norm;
	if (slash)
		*slash = '\0';
	ext2_ino_t dir = 0, ino = 0;
	int r = tree_walk(a, slash ? norm : "", false, &dir);
	if (r == 0)
		r = tree_lookup(a, dir, base, &ino);
	if (r == -ENOENT)
		return tree_fail(a, -ENOENT, "hard link to '%s', which the image does not have", target);
	if (r < 0)
		return r;
	struct ext2_inode inode;
	if ((r = tree_read_inode(a, ino, &inode)) < 0)
		return r;
	if (LINUX_S_ISDIR(inode.i_mode))
		return tree_fail(a, -EPERM, "hard link to the directory '%s'", target);
	if (inode.i_links_count >= 65000)
		return tree_fail(a, -EMLINK, "too many links to '%s'", target);
	static const int ft[] = { [LINUX_S_IFREG >> 12] = EXT2_FT_REG_FILE, [LINUX_S_IFLNK >> 12] = EXT2_FT_SYMLINK,
				  [LINUX_S_IFCHR >> 12] = EXT2_FT_CHRDEV, [LINUX_S_IFBLK >> 12] = EXT2_FT_BLKDEV,
				  [LINUX_S_IFIFO >> 12] = EXT2_FT_FIFO, [LINUX_S_IFSOCK >> 12] = EXT2_FT_SOCK };
	if ((r = tree_link(a, parent, name, ino, ft[(inode.i_mode & LINUX_S_IFMT) >> 12])) < 0)
		return r;
	if ((r = tree_read_inode(a, ino, &inode)) < 0)
		return r;
	inode.i_links_count++;
	if ((r = tree_write_inode(a, ino, &inode)) < 0)
		return r;
	a->counts.hardlinks++;
	*ret = ino;
	return 0;
}

static int whiteout(struct applier *a, const char *dirpath, const char *base)
{
	ext2_ino_t dir = 0, ino = 0;
	int r = tree_walk(a, dirpath, !strcmp(base, ".wh..wh..opq"), &dir);
	if (r == -ENOENT)
		return 0; /* nothing below to hide */
	if (r < 0)
		return r;
	if (!strcmp(base, ".wh..wh..opq")) {
		a->counts.opaque++;
		return tree_empty_dir(a, dir, true, 0);
	}
	if (!strncmp(base, ".wh..wh.", 8))
		return 0; /* aufs bookkeeping (.wh..wh.plnk, ...): not part of the tree */
	const char *name = base + 4;
	if (!*name || strlen(name) > EXT2_NAME_LEN)
		return 0;
	a->counts.whiteouts++;
	r = tree_lookup(a, dir, name, &ino);
	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : tree_remove(a, dir, name, ino, 0);
}

int applier_set_options(struct applier *a, const char *into, bool chown, uint32_t uid, uint32_t gid, bool plain)
{
	if (tar_path_normalize(into ? into : "", a->into, sizeof(a->into)) < 0)
		return -EINVAL;
	a->chown = chown;
	a->uid = uid;
	a->gid = gid;
	a->plain = plain;
	return 0;
}

/* name as a path of the image: normalized, under a->into. */
static int image_path(struct applier *a, const char *name, char *out, size_t len)
{
	char norm[TAR_PATH_MAX + 1];
	int r = tar_path_normalize(name, norm, sizeof(norm));
	if (r < 0)
		return r;
	if ((size_t)snprintf(out, len, "%s%s%s", a->into, a->into[0] && norm[0] ? "/" : "", norm) >= len)
		return -ENAMETOOLONG;
	return 0;
}

static int apply(struct applier *a, const struct tar_entry *in, struct tar_reader *t)
{
	struct tar_entry copy;
	const struct tar_entry *e = in;
	if (a->chown) {
		copy = *in;
		copy.uid = a->uid;
		copy.gid = a->gid;
		e = &copy;
	}
	char link[TAR_PATH_MAX + 1];
	if (e->type == TAR_HARDLINK && a->into[0]) {
		/* A hard link names a member of the same archive: under into too. */
		if (image_path(a, e->link, link, sizeof(link)) < 0)
			return tree_fail(a, -EPERM, "hard link to '%s' climbs out of the root with '..': refused", e->link);
		if (e != &copy) {
			copy = *in;
			e = &copy;
		}
		copy.link = link;
	}
	int r = image_path(a, e->path, a->path, sizeof(a->path));
	if (r == -EINVAL)
		return tree_fail(a, -EPERM, "'%s' climbs out of the root with '..': refused", e->path);
	if (r < 0)
		return tree_fail(a, r, "a name too long");
	if (!a->path[0]) {
		/* The root itself ("./"): its attributes only. */
		if (e->type != TAR_DIR)
			return tree_fail(a, -EINVAL, "'%s' names the root as a non-directory", e->path);
		return set_attrs(a, EXT2_ROOT_INO, e);
	}
	char *slash = strrchr(a->path, '/');
	const char *base = slash ? slash + 1 : a->path;
	const char *dirpath = slash ? a->path : "";
	if (slash)
		*slash = '\0';
	if (strlen(base) > EXT2_NAME_LEN)
		return tree_fail(a, -ENAMETOOLONG, "a name longer than %d bytes", EXT2_NAME_LEN);
	if (!a->plain && !strncmp(base, ".wh.", 4))
		return whiteout(a, dirpath, base);
	ext2_ino_t parent, existing = 0, ino = 0;
	if ((r = tree_walk(a, dirpath, true, &parent)) < 0)
		return r;
	r = tree_lookup(a, parent, base, &existing);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == -ENOENT)
		existing = 0;
	if (existing) {
		struct ext2_inode old;
		if ((r = tree_read_inode(a, existing, &old)) < 0)
			return r;
		if (e->type == TAR_DIR && LINUX_S_ISDIR(old.i_mode)) {
			if ((r = tree_touch(a, parent, base)) < 0)
				return r;
			return set_attrs(a, existing, e);
		}
		/* A hard link to what is already there leaves it as it is. */
		if (!(e->type == TAR_HARDLINK && !LINUX_S_ISDIR(old.i_mode))) {
			if ((r = tree_remove(a, parent, base, existing, 0)) < 0)
				return r;
			existing = 0;
		}
	}
	switch (e->type) {
	case TAR_DIR:
		r = tree_mkdir(a, parent, base, &ino);
		break;
	case TAR_SYMLINK:
		r = make_symlink(a, parent, base, e->link, &ino);
		break;
	case TAR_HARDLINK:
		if (existing) {
			/* Not the same file: the name goes first. */
			char norm[TAR_PATH_MAX + 1];
			ext2_ino_t target = 0;
			if (tar_path_normalize(e->link, norm, sizeof(norm)) == 0 &&
			    image_resolve(a->fs, norm, false, &target) == 0 && target == existing) {
				if ((r = tree_touch(a, parent, base)) < 0)
					return r;
				a->counts.hardlinks++;
				return 0;
			}
			if ((r = tree_remove(a, parent, base, existing, 0)) < 0)
				return r;
		}
		if ((r = make_hardlink(a, parent, base, e->link, &ino)) < 0)
			return r;
		return tree_touch(a, parent, base); /* the target's attributes are its own */
	default:
		r = make_node(a, parent, base, e, t, &ino);
		break;
	}
	if (r < 0 || (r = tree_touch(a, parent, base)) < 0)
		return r;
	return set_attrs(a, ino, e);
}

int applier_entry(struct applier *a, const struct tar_entry *e, struct tar_reader *t, char *err, size_t errlen)
{
	a->err[0] = '\0';
	a->counts.entries++;
	int r = apply(a, e, t);
	if (r < 0)
		return util_errf(err, errlen, r, "%s", a->err[0] ? a->err : strerror(-r));
	return 0;
}

int applier_ensure_dir(struct applier *a, const char *path, char *err, size_t errlen)
{
	char norm[TAR_PATH_MAX + 1];
	ext2_ino_t ino;
	a->err[0] = '\0';
	if (tar_path_normalize(path, norm, sizeof(norm)) < 0)
		return util_errf(err, errlen, -EINVAL, "'%s' is not a path in the image", path);
	int r = tree_walk(a, norm, true, &ino);
	return r < 0 ? util_errf(err, errlen, r, "%s", a->err[0] ? a->err : strerror(-r)) : 0;
}
