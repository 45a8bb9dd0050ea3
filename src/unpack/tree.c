/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's directory tree for apply.c (tree.h): names looked up, linked and unlinked through an index
 * kept beside libext2fs's linear directories, whole subtrees removed (whiteouts, replaced entries),
 * directories made, and paths walked inside the image as a chroot would walk them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unpack/tree.h"
#include "util/util.h"

#define DIR_DEPTH_MAX 2048 /* a path of TAR_PATH_MAX bytes has at most this many components */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static char smap_tomb[1];

static void smap_clear(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i] != smap_tomb)
			free(m->keys[i]);
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

static ssize_t smap_slot(const struct smap *m, const char *key)
{
	if (!m->cap)
		return -1;
	for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->keys[i])
			return -(ssize_t)i - 2;
		if (m->keys[i] != smap_tomb && !strcmp(m->keys[i], key))
			return (ssize_t)i;
	}
}

static bool smap_get(const struct smap *m, const char *key, uint32_t *ret)
{
	ssize_t i = smap_slot(m, key);
	if (i < 0)
		return false;
	if (ret)
		*ret = m->vals[i];
	return true;
}

static int smap_put(struct smap *m, const char *key, uint32_t val)
{
	if ((m->n + 1) * 4 >= m->cap * 3) {
		struct smap g = { .cap = m->cap ? m->cap * 2 : 1024 };
		g.keys = calloc(g.cap, sizeof(char *));
		g.vals = calloc(g.cap, sizeof(uint32_t));
		if (!g.keys || !g.vals) {
			free(g.keys);
			free(g.vals);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->keys[i] || m->keys[i] == smap_tomb)
				continue;
			size_t j = hash_str(m->keys[i]) & (g.cap - 1);
			while (g.keys[j])
				j = (j + 1) & (g.cap - 1);
			g.keys[j] = m->keys[i];
			g.vals[j] = m->vals[i];
		}
		for (size_t i = 0; i < g.cap; i++)
			g.n += g.keys[i] != NULL;
		free(m->keys);
		free(m->vals);
		*m = g;
	}
	ssize_t i = smap_slot(m, key);
	if (i >= 0) {
		m->vals[i] = val;
		return 0;
	}
	size_t at = (size_t)(-i - 2);
	if (!(m->keys[at] = strdup(key)))
		return -ENOMEM;
	m->vals[at] = val;
	m->n++;
	return 0;
}

static void smap_del(struct smap *m, const char *key)
{
	ssize_t i = smap_slot(m, key);
	if (i >= 0) {
		free(m->keys[i]);
		m->keys[i] = smap_tomb; /* still counted in n: the table grows past tombstones */
	}
}

int tree_fail(struct applier *a, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->err, sizeof(a->err), fmt, ap);
	va_end(ap);
	return r;
}

/* A libext2fs failure: its message, and -EIO (or -ENOSPC when the image is full). */
int tree_e2fail(struct applier *a, errcode_t e, const char *what)
{
	int r = e == EXT2_ET_BLOCK_ALLOC_FAIL || e == EXT2_ET_INODE_ALLOC_FAIL || e == EXT2_ET_DIR_NO_SPACE_FOR_CSUM
			? -ENOSPC
			: -EIO;
	return tree_fail(a, r, "%s: %s", what, unpack_e2err(e));
}

int tree_touch(struct applier *a, ext2_ino_t parent, const char *name)
{
	char key[300];
	snprintf(key, sizeof(key), "%u/%s", parent, name);
	return smap_put(&a->touched, key, 1) < 0 ? tree_fail(a, -ENOMEM, "out of memory") : 0;
}

bool tree_touched(const struct applier *a, ext2_ino_t parent, const char *name)
{
	char key[300];
	snprintf(key, sizeof(key), "%u/%s", parent, name);
	return smap_get(&a->touched, key, NULL);
}

int tree_read_inode(struct applier *a, ext2_ino_t ino, struct ext2_inode *inode)
{
	errcode_t e = ext2fs_read_inode(a->fs, ino, inode);
	return e ? tree_e2fail(a, e, "read inode") : 0;
}

int tree_write_inode(struct applier *a, ext2_ino_t ino, struct ext2_inode *inode)
{
	errcode_t e = ext2fs_write_inode(a->fs, ino, inode);
	return e ? tree_e2fail(a, e, "write inode") : 0;
}

/* ---- directories ---- */

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
	if ((len == 1 && d->name[0] == '.') || (len == 2 && d->name[0] == '.' && d->name[1] == '.'))
		return 0;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 16;
		char **v = realloc(ns->v, cap * sizeof(char *));
		if (v)
			ns->v = v;
		ext2_ino_t *ino = v ? realloc(ns->ino, cap * sizeof(ext2_ino_t)) : NULL;
		if (!ino) {
			ns->err = -ENOMEM;
			return DIRENT_ABORT;
		}
		ns->ino = ino;
		ns->cap = cap;
	}
	if (!(ns->v[ns->n] = strndup(d->name, (size_t)len))) {
		ns->err = -ENOMEM;
		return DIRENT_ABORT;
	}
	ns->ino[ns->n++] = d->inode;
	return 0;
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	free(ns->ino);
}

static int list_dir(struct applier *a, ext2_ino_t dir, struct names *ns)
{
	memset(ns, 0, sizeof(*ns));
	errcode_t e = ext2fs_dir_iterate(a->fs, dir, 0, NULL, collect, ns);
	if (ns->err) {
		names_free(ns);
		return tree_fail(a, ns->err, "out of memory");
	}
	if (e) {
		names_free(ns);
		return tree_e2fail(a, e, "read directory");
	}
	return 0;
}

/*
 * The name index. ext2fs_lookup and ext2fs_link scan a directory linearly; an entry of a layer needs to know
 * whether its name exists (and its parents'), so every directory is read once into names and kept up to
 * date by the calls below, the only ones that link or unlink. Only ext2fs_link's own search for room is
 * left per entry.
 */
static void name_key(char *key, size_t len, ext2_ino_t dir, const char *name)
{
	snprintf(key, len, "%u/%s", dir, name);
}

static int dir_load(struct applier *a, ext2_ino_t dir)
{
	char key[300];
	snprintf(key, sizeof(key), "%u", dir);
	if (smap_get(&a->loaded, key, NULL))
		return 0;
	struct names ns;
	int r = list_dir(a, dir, &ns);
	for (size_t i = 0; r == 0 && i < ns.n; i++) {
		char nk[300];
		name_key(nk, sizeof(nk), dir, ns.v[i]);
		if (smap_put(&a->names, nk, ns.ino[i]) < 0)
			r = tree_fail(a, -ENOMEM, "out of memory");
	}
	names_free(&ns);
	if (r == 0 && smap_put(&a->loaded, key, 1) < 0)
		r = tree_fail(a, -ENOMEM, "out of memory");
	return r;
}

/* A directory made here: empty, known. */
int tree_dir_new(struct applier *a, ext2_ino_t dir)
{
	char key[32];
	snprintf(key, sizeof(key), "%u", dir);
	return smap_put(&a->loaded, key, 1) < 0 ? tree_fail(a, -ENOMEM, "out of memory") : 0;
}

/* A directory freed: its inode number may come back as another one. */
static void dir_gone(struct applier *a, ext2_ino_t dir)
{
	char key[32];
	snprintf(key, sizeof(key), "%u", dir);
	smap_del(&a->loaded, key);
}

/* -ENOENT when dir has no name; errors otherwise. */
int tree_lookup(struct applier *a, ext2_ino_t dir, const char *name, ext2_ino_t *ret)
{
	int r = dir_load(a, dir);
	if (r < 0)
		return r;
	char key[300];
	uint32_t v;
	name_key(key, sizeof(key), dir, name);
	if (!smap_get(&a->names, key, &v))
		return -ENOENT;
	*ret = v;
	return 0;
}

int tree_link(struct applier *a, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft)
{
	int r = dir_load(a, dir);
	if (r < 0)
		return r;
	errcode_t e = ext2fs_link(a->fs, dir, name, ino, ft);
	if (e == EXT2_ET_DIR_NO_SPACE) {
		if ((e = ext2fs_expand_dir(a->fs, dir)) == 0)
			e = ext2fs_link(a->fs, dir, name, ino, ft);
	}
	if (e)
		return tree_e2fail(a, e, name);
	char key[300];
	name_key(key, sizeof(key), dir, name);
	return smap_put(&a->names, key, ino) < 0 ? tree_fail(a, -ENOMEM, "out of memory") : 0;
}

static int unlink_name(struct applier *a, ext2_ino_t dir, const char *name, ext2_ino_t ino)
{
	errcode_t e = ext2fs_unlink(a->fs, dir, name, ino, 0);
	if (e)
		return tree_e2fail(a, e, name);
	char key[300];
	name_key(key, sizeof(key), dir, name);
	smap_del(&a->names, key);
	return 0;
}

/* Drops one name's link to ino; frees it when none is left. */
static int drop_link(struct applier *a, ext2_ino_t ino, bool is_dir)
{
	struct ext2_inode_large big;
	errcode_t e = ext2fs_read_inode_full(a->fs, ino, (struct ext2_inode *)&big, sizeof(big));
	if (e)
		return tree_e2fail(a, e, "read inode");
	struct ext2_inode *inode = (struct ext2_inode *)&big;
	if (!is_dir && inode->i_links_count > 1) {
		inode->i_links_count--;
		return tree_write_inode(a, ino, inode);
	}
	if ((e = ext2fs_free_ext_attr(a->fs, ino, &big)))
		return tree_e2fail(a, e, "free extended attributes");
	if ((e = ext2fs_read_inode(a->fs, ino, inode)))
		return tree_e2fail(a, e, "read inode");
	if (ext2fs_inode_has_valid_blocks2(a->fs, inode) && (e = ext2fs_punch(a->fs, ino, inode, NULL, 0, ~0ULL)))
		return tree_e2fail(a, e, "free blocks");
	if ((e = ext2fs_read_inode(a->fs, ino, inode)))
		return tree_e2fail(a, e, "read inode");
	inode->i_links_count = 0;
	inode->i_dtime = a->fs->now ? (uint32_t)a->fs->now : 1;
	int r = tree_write_inode(a, ino, inode);
	if (r == 0)
		ext2fs_inode_alloc_stats2(a->fs, ino, -1, is_dir);
	return r;
}

/* Everything in directory dir (lower-layer content only, when keep_touched). */
int tree_empty_dir(struct applier *a, ext2_ino_t dir, bool keep_touched, int depth)
{
	if (depth > DIR_DEPTH_MAX)
		return tree_fail(a, -ELOOP, "directories nested deeper than %d", DIR_DEPTH_MAX);
	struct names ns;
	int r = list_dir(a, dir, &ns);
	for (size_t i = 0; r == 0 && i < ns.n; i++) {
		ext2_ino_t child = ns.ino[i];
		if (keep_touched && tree_touched(a, dir, ns.v[i])) {
			/* Declared again by this layer: its own lower content still goes. */
			struct ext2_inode inode;
			if ((r = tree_read_inode(a, child, &inode)) == 0 && LINUX_S_ISDIR(inode.i_mode))
				r = tree_empty_dir(a, child, true, depth + 1);
			continue;
		}
		r = tree_remove(a, dir, ns.v[i], child, depth + 1);
	}
	names_free(&ns);
	return r;
}

int tree_remove(struct applier *a, ext2_ino_t parent, const char *name, ext2_ino_t ino, int depth)
{
	struct ext2_inode inode;
	int r = tree_read_inode(a, ino, &inode);
	if (r < 0)
		return r;
	bool is_dir = LINUX_S_ISDIR(inode.i_mode);
	if (is_dir && (r = tree_empty_dir(a, ino, false, depth)) < 0)
		return r;
	if ((r = unlink_name(a, parent, name, ino)) < 0)
		return r;
	if (is_dir)
		dir_gone(a, ino);
	if (is_dir || LINUX_S_ISLNK(inode.i_mode))
		smap_clear(&a->dirs); /* a cached path may go through it */
	if ((r = drop_link(a, ino, is_dir)) < 0)
		return r;
	if (is_dir) {
		struct ext2_inode p;
		if ((r = tree_read_inode(a, parent, &p)) < 0)
			return r;
		if (p.i_links_count > 2)
			p.i_links_count--;
		r = tree_write_inode(a, parent, &p);
	}
	return r;
}

/* ---- creation ---- */

int tree_mkdir(struct applier *a, ext2_ino_t parent, const char *name, ext2_ino_t *ret)
{
	/* Made unnamed, then linked here: ext2fs_mkdir's own lookup and link would scan the parent twice. */
	ext2_ino_t ino;
	errcode_t e = ext2fs_new_inode(a->fs, parent, LINUX_S_IFDIR | 0755, NULL, &ino);
	if (!e)
		e = ext2fs_mkdir(a->fs, parent, ino, NULL);
	if (e)
		return tree_e2fail(a, e, name);
	int r = tree_link(a, parent, name, ino, EXT2_FT_DIR);
	if (r == 0)
		r = tree_dir_new(a, ino);
	if (r < 0)
		return r;
	a->counts.dirs++;
	*ret = ino;
	return 0;
}

#define SYMLINKS_MAX 40 /* as the kernel's path walk */

/* A symlink's target text into buf (len > 0). */
static int read_symlink(struct applier *a, ext2_ino_t ino, struct ext2_inode *inode, char *buf, size_t len)
{
	uint64_t size = EXT2_I_SIZE(inode);
	if (!size || size >= len)
		return tree_fail(a, -ENAMETOOLONG, "a symlink of %llu bytes", (unsigned long long)size);
	if (ext2fs_is_fast_symlink(inode)) {
		memcpy(buf, (const char *)inode->i_block, (size_t)size);
	} else {
		ext2_file_t f;
		unsigned int got = 0;
		errcode_t e = ext2fs_file_open(a->fs, ino, 0, &f);
		if (!e) {
			e = ext2fs_file_read(f, buf, (unsigned)size, &got);
			ext2fs_file_close(f);
		}
		if (e || got != size)
			return e ? tree_e2fail(a, e, "read symlink") : tree_fail(a, -EIO, "a short symlink");
	}
	buf[size] = '\0';
	return 0;
}

/* dir/rest as a path from the root, "." and ".." resolved, ".." stopping at the root: a symlink's
 * target means that inside the image, whatever it names. */
static int join_clamped(const char *dir, const char *target, const char *rest, char *out, size_t len)
{
	char joined[3 * (TAR_PATH_MAX + 1)];
	if ((size_t)snprintf(joined, sizeof(joined), "%s/%s/%s", target[0] == '/' ? "" : dir, target, rest) >=
	    sizeof(joined))
		return -ENAMETOOLONG;
	return tar_path_resolve(joined, out, len, true);
}

/*
 * The directory that path's components (all of them) name, from the root, symlinks followed inside the
 * image as a chroot would (an absolute target from the image's root, ".." stopping there); missing
 * directories, a symlink's missing target included, are made when create (as container runtimes apply
 * layers). -ENOTDIR (message) through a non-directory.
 */
int tree_walk(struct applier *a, const char *path, bool create, ext2_ino_t *ret)
{
	if (!*path) {
		*ret = EXT2_ROOT_INO;
		return 0;
	}
	uint32_t cached;
	if (smap_get(&a->dirs, path, &cached)) {
		*ret = cached;
		return 0;
	}
	char cur[TAR_PATH_MAX + 1], done[TAR_PATH_MAX + 1], link[TAR_PATH_MAX + 1];
	snprintf(cur, sizeof(cur), "%s", path);
	int links = 0;
restart:;
	ext2_ino_t dir = EXT2_ROOT_INO;
	size_t dn = 0;
	done[0] = '\0';
	char comp[EXT2_NAME_LEN + 1];
	for (const char *p = cur; *p;) {
		const char *c = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - c);
		if (*p)
			p++;
		if (n > EXT2_NAME_LEN)
			return tree_fail(a, -ENAMETOOLONG, "a name longer than %d bytes", EXT2_NAME_LEN);
		memcpy(comp, c, n);
		comp[n] = '\0';
		ext2_ino_t ino;
		int r = tree_lookup(a, dir, comp, &ino);
		if (r == -ENOENT) {
			if (!create)
				return -ENOENT;
			if ((r = tree_mkdir(a, dir, comp, &ino)) < 0 || (r = tree_touch(a, dir, comp)) < 0)
				return r;
		} else if (r < 0) {
			return r;
		} else {
			struct ext2_inode inode;
			if ((r = tree_read_inode(a, ino, &inode)) < 0)
				return r;
			if (LINUX_S_ISLNK(inode.i_mode)) {
				if (++links > SYMLINKS_MAX)
					return tree_fail(a, -ELOOP, "%s: more than %d symlinks", path, SYMLINKS_MAX);
				char next[TAR_PATH_MAX + 1];
				if ((r = read_symlink(a, ino, &inode, link, sizeof(link))) < 0)
					return r;
				if (join_clamped(done, link, p, next, sizeof(next)) < 0)
					return tree_fail(a, -ENAMETOOLONG, "%s: a path through symlinks too long", path);
				snprintf(cur, sizeof(cur), "%s", next);
				goto restart;
			}
			if (!LINUX_S_ISDIR(inode.i_mode))
				return tree_fail(a, -ENOTDIR, "%s%s%s is not a directory", done, dn ? "/" : "", comp);
		}
		dn += (size_t)snprintf(done + dn, sizeof(done) - dn, "%s%s", dn ? "/" : "", comp);
		if (dn >= sizeof(done))
			return tree_fail(a, -ENAMETOOLONG, "%s: too long", path);
		dir = ino;
	}
	if (smap_put(&a->dirs, path, dir) < 0)
		return tree_fail(a, -ENOMEM, "out of memory");
	*ret = dir;
	return 0;
}

int image_resolve(ext2_filsys fs, const char *path, bool follow, ext2_ino_t *ret_ino)
{
	errcode_t e = follow ? ext2fs_namei_follow(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, path, ret_ino)
			     : ext2fs_namei(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, path, ret_ino);
	return e == EXT2_ET_FILE_NOT_FOUND || e == EXT2_ET_NO_DIRECTORY ? -ENOENT : e ? -EIO : 0;
}

void tree_state_free(struct applier *a)
{
	smap_clear(&a->touched);
	smap_clear(&a->dirs);
	smap_clear(&a->names);
	smap_clear(&a->loaded);
}

void tree_layer_begin(struct applier *a)
{
	smap_clear(&a->touched);
}
