/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounded reader of tar streams: POSIX ustar, pax extended headers (path, linkpath, size, uid, gid, mtime,
 * SCHILY.xattr.* and LIBARCHIVE.xattr.*) and GNU long names ('L', 'K'). Every stream it reads is hostile: an
 * image layer, an image archive, a rootfs tarball. It resolves nothing and writes nothing; it hands out one
 * entry at a time with its data, every length checked against the limits below, and refuses (-EBADMSG with
 * a message) what it does not understand rather than guess: sparse files, multi-volume parts, a bad header
 * checksum, a number that does not parse, a name or a pax record past its bound.
 *
 * The stream comes through a read callback (a file, a decompressor); a skip callback (optional) lets a
 * caller with a seekable source pass over data without reading it. Used by space-unpack (layers, rootfs
 * tarballs) and by the library to find the members of an image archive (manifest.json, blobs). Private.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TAR_BLOCK 512u
#define TAR_PATH_MAX 4095u         /* bytes of a name or link target, as PATH_MAX - 1 */
#define TAR_PAX_MAX (1u << 20)     /* one pax extended header's records */
#define TAR_XATTRS_MAX 128u        /* extended attributes of one entry */
#define TAR_XATTR_NAME_MAX 255u
#define TAR_XATTR_VALUE_MAX 65536u /* ext4's limit for one value in an inode's block */
#define TAR_FILE_MAX (1ull << 40)  /* one file's size */

enum tar_type {
	TAR_REG,
	TAR_HARDLINK,
	TAR_SYMLINK,
	TAR_CHR,
	TAR_BLK,
	TAR_DIR,
	TAR_FIFO,
};

struct tar_xattr {
	char *name;           /* NUL-terminated, 1..TAR_XATTR_NAME_MAX bytes */
	uint8_t *value;
	size_t len;
};

struct tar_entry {
	enum tar_type type;
	const char *path;     /* as in the archive (not normalized), 1..TAR_PATH_MAX bytes, no NUL inside */
	const char *link;     /* hard link or symlink target, "" for other types */
	uint32_t mode;        /* permission bits and set-id/sticky bits (07777) */
	uint32_t uid, gid;
	uint64_t size;        /* of the data that follows (regular files only; 0 for the others) */
	int64_t mtime;        /* seconds */
	uint32_t mtime_ns;
	uint32_t devmajor, devminor;
	const struct tar_xattr *xattrs;
	size_t n_xattrs;
	uint64_t data_offset; /* where its data starts in the stream */
};

/* Reads up to len bytes into buf: the count, 0 at the end of the stream, or -errno. */
typedef int64_t (*tar_read_fn)(void *userdata, void *buf, size_t len);
/* Skips n bytes of the stream: 0 or -errno (-EPIPE past its end). */
typedef int (*tar_skip_fn)(void *userdata, uint64_t n);

struct tar_reader;

/* A reader over a stream (skip may be NULL: data is read and dropped). 0 or -ENOMEM. */
int tar_reader_new(tar_read_fn read, tar_skip_fn skip, void *userdata, struct tar_reader **ret);
void tar_reader_free(struct tar_reader *t);

/*
 * The next entry into *ret (the reader's, valid until the next call), skipping what is left of the current
 * entry's data. Returns 1 for an entry, 0 at the end of the archive (a zero block, or the stream's end
 * exactly at a block boundary before any entry), -EBADMSG for a malformed archive (tar_error says why),
 * -errno from the source.
 */
int tar_next(struct tar_reader *t, const struct tar_entry **ret);

/* Reads the current entry's data: up to len bytes, 0 when it is all read, -errno (-EBADMSG when the
 * stream ends inside it). */
int64_t tar_read(struct tar_reader *t, void *buf, size_t len);

/* Why the last call failed ("" if it did not). */
const char *tar_error(const struct tar_reader *t);

/* The bytes of the stream consumed so far. */
uint64_t tar_offset(const struct tar_reader *t);

/*
 * Fills h (TAR_BLOCK bytes) with a POSIX ustar header: name and link at most 99 bytes (longer ones go in a
 * pax header before it, whose records the caller writes), ids above 0o7777777 as 0 (pax again), a size
 * past 0o77777777777 in GNU base-256 (which tar_next reads), the checksum. -ENAMETOOLONG for a name or
 * link that does not fit.
 */
int tar_header(uint8_t h[TAR_BLOCK], const char *name, const char *link, char type, uint32_t mode, uint32_t uid,
	       uint32_t gid, uint64_t size, int64_t mtime, uint32_t devmajor, uint32_t devminor);

/* Appends the pax record "LEN key=value\n" (LEN counting the whole record; value vlen bytes, binary) to
 * *buf (*len bytes, realloc'd), keeping *len at most max. -E2BIG past it, -ENOMEM. */
int tar_pax_record(char **buf, size_t *len, size_t max, const char *key, const void *value, size_t vlen);

/*
 * A member name as a path in the tree: leading "/" and "./" dropped, empty and "." components dropped, a
 * trailing "/" dropped, into buf (len > 0). Returns 0 with "" for the root itself, -EINVAL for a name
 * with a ".." component (an entry that would climb out: refused, never clamped) or a NUL, -ENAMETOOLONG.
 */
int tar_path_normalize(const char *name, char *buf, size_t len);

/*
 * A path with its ".." components resolved inside it (for what may legitimately use them: a COPY source in
 * a build context, an archive's own symlink targets): "." and empty components dropped, each ".." taking
 * back the component before it, into out ("" for the root). scratch is the path and is consumed (split in
 * place). 0; -EPERM when a ".." would climb above the start (with clamp: it stays at the start, as a symlink
 * target inside an image root does); -ENAMETOOLONG when out (len) is too short.
 */
int tar_path_resolve(char *scratch, char *out, size_t len, bool clamp);
