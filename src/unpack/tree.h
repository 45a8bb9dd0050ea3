/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What apply.c and tree.c share: the applier's state and the image tree's operations (tree.c). Every call
 * returns 0 or -errno with the reason in a->err. Private to space-unpack.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unpack/unpack.h"

/* A set of strings with a value: FNV-1a, open addressing, grown at 3/4; deleted keys leave a tombstone. */
struct smap {
	char **keys;
	uint32_t *vals;
	size_t cap, n;
};

struct applier {
	ext2_filsys fs;
	unsigned layer;
	struct apply_counts counts;
	struct smap touched; /* "<parent ino>/<name>" of what this layer made or declared */
	struct smap dirs;    /* a directory's path -> its inode (parents of entries) */
	struct smap names;   /* "<dir ino>/<name>" -> inode, of every directory in loaded */
	struct smap loaded;  /* "<dir ino>" of the directories whose entries names holds */
	uint8_t *buf;
	char path[TAR_PATH_MAX + 1];
	char link[TAR_PATH_MAX + 1];
	char err[512];
	/* add mode (applier_set_options) */
	char into[TAR_PATH_MAX + 1]; /* entries land under this directory ("" the root) */
	bool chown;
	uint32_t uid, gid;           /* with chown: every entry's owner */
	bool plain;                  /* .wh. names are files (ADD of an archive), not whiteouts */
};

/* a->err gets the formatted reason; returns r. */
int tree_fail(struct applier *a, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A libext2fs failure: its message; -ENOSPC when the image is full, else -EIO. */
int tree_e2fail(struct applier *a, errcode_t e, const char *what);

/* "This layer made or declared name in parent" (opaque directories keep those), and the question. */
int tree_touch(struct applier *a, ext2_ino_t parent, const char *name);
bool tree_touched(const struct applier *a, ext2_ino_t parent, const char *name);

int tree_read_inode(struct applier *a, ext2_ino_t ino, struct ext2_inode *inode);
int tree_write_inode(struct applier *a, ext2_ino_t ino, struct ext2_inode *inode);

/* The inode of name in dir; -ENOENT when there is none. */
int tree_lookup(struct applier *a, ext2_ino_t dir, const char *name, ext2_ino_t *ret);
/* Links ino into dir as name (file type ft), growing the directory when it is full. */
int tree_link(struct applier *a, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft);
/* A new directory name in parent (0755, root), known to the index. */
int tree_mkdir(struct applier *a, ext2_ino_t parent, const char *name, ext2_ino_t *ret);
/* A directory made outside tree_mkdir (none yet): empty, known. */
int tree_dir_new(struct applier *a, ext2_ino_t dir);
/* Removes name (inode ino) from parent, and everything below it when it is a directory. */
int tree_remove(struct applier *a, ext2_ino_t parent, const char *name, ext2_ino_t ino, int depth);
/* Removes what dir holds (only lower layers' content, when keep_touched: an opaque directory). */
int tree_empty_dir(struct applier *a, ext2_ino_t dir, bool keep_touched, int depth);
/* The directory path names, symlinks followed inside the image; missing ones made when create. */
int tree_walk(struct applier *a, const char *path, bool create, ext2_ino_t *ret);

/* Frees the maps (applier_free); clears what "this layer" means (applier_begin_layer). */
void tree_state_free(struct applier *a);
void tree_layer_begin(struct applier *a);
