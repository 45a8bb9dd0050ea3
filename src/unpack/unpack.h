/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-unpack: the confined helper that turns hostile tar streams (image layers, rootfs tarballs) into a
 * template's rootfs.ext4, a template's image back into a tar stream, and copies a root tree between two
 * directories (a jail's root disk as a plain tree). Its parts: layer.c (a layer's bytes: decompression and
 * digests), apply.c (tar entries into the ext4 image through libext2fs, with whiteouts, opaque
 * directories, links, xattrs, ownership), users.c (the image's own /etc/passwd, /etc/group and /bin/sh),
 * export.c (the image as a tar stream), copy.c (one directory tree into another), copy_main.c (the copy
 * mode's own confinement, then its run), main.c (arguments, confinement, the seccomp rules of every mode,
 * the protocol with the library). Private.
 */
#pragma once

#include <ext2fs/ext2fs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "image/tar.h"

/* The descriptors the library hands over. */
#define UNPACK_IMAGE_FD 3   /* rootfs.ext4: read-write for apply, read-only for check and export */
#define UNPACK_CTL_FD 4     /* the control socket: status lines out, commands in */
#define UNPACK_FIRST_FD 5   /* layer sources (apply), the output (export) */
#define UNPACK_LAYERS_MAX 128

enum unpack_comp { COMP_AUTO, COMP_NONE, COMP_GZIP, COMP_ZSTD, COMP_XZ, COMP_BZIP2 };

struct layer_spec {
	int fd;
	uint64_t offset, length; /* the blob's bytes in fd */
	enum unpack_comp comp;   /* what the image says it is; AUTO: by its magic (rootfs tarballs) */
	char digest[72];         /* "sha256:<64 hex>" of the blob, "" when none is known */
	char diff_id[72];        /* of the uncompressed tar, "" when none is known */
};

/* ---- main.c ---- */
enum unpack_mode { MODE_APPLY, MODE_CHECK, MODE_EXPORT, MODE_ADD, MODE_COPY, MODE_RECEIVE };

/* Status lines to the library ("progress ...", "warn ..."): printf-like, one line, newline added. */
void unpack_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "error ERRNO TEXT" (ERRNO: the positive code the library answers with; err may be either sign, 0 is
 * EINVAL), then the end of the process. */
_Noreturn void unpack_die_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets resource res's soft and hard limits both to v. 0 or -errno. */
int unpack_set_limit(int res, rlim_t v);
/* RLIMIT_AS at the helper's ceiling (nothing in a sanitized test build). 0 or -errno. */
int unpack_limit_memory(void);
/* Installs the SIGSYS reporter (a trapped call is named on the control socket), then loads mode m's seccomp
 * allowlist; nothing in a sanitized test build. Last step of a mode's confinement: every descriptor open,
 * privileges dropped. 0, or -errno with a message in err. */
int unpack_load_filter(enum unpack_mode m, char *err, size_t errlen);

/* ---- layer.c ---- */
struct layer_stream;

/* Opens spec's bytes for reading its tar stream (decompressed). max_out: the most decompressed bytes all
 * layers of this run may produce (counted across streams through *total_out). */
int layer_open(const struct layer_spec *spec, uint64_t max_out, uint64_t *total_out, struct layer_stream **ret,
	       char *err, size_t errlen);
/* tar_read_fn over the decompressed stream. */
int64_t layer_read(void *stream, void *buf, size_t len);
/* After the tar's end: reads what is left of the stream (padding) and checks both digests. */
int layer_finish(struct layer_stream *s, char *err, size_t errlen);
/* The blob's bytes consumed so far (for progress). */
uint64_t layer_consumed(const struct layer_stream *s);
void layer_close(struct layer_stream *s);
/* Why the stream's last read failed: its own message ("" if none). */
const char *layer_error(const struct layer_stream *s);
/* The compression a stream's first bytes show. */
enum unpack_comp layer_sniff(const uint8_t *head, size_t n);
const char *layer_comp_name(enum unpack_comp c);

/* ---- apply.c ---- */
struct applier;

struct apply_counts {
	uint64_t entries, files, dirs, symlinks, hardlinks, devices, whiteouts, opaque, xattrs_skipped;
};

int applier_new(ext2_filsys fs, struct applier **ret);
void applier_free(struct applier *a);
/* For add mode: entries under into (normalized, "" the root) owned by uid:gid when chown, whiteouts
 * taken as plain names when plain. 0, or -EINVAL for an into that is not a path. */
int applier_set_options(struct applier *a, const char *into, bool chown, uint32_t uid, uint32_t gid, bool plain);
/* Starts layer index (for the opaque directories' "this layer" and messages). */
void applier_begin_layer(struct applier *a, unsigned index);
/* Applies one entry, reading its data from t. 0 or -errno with a message in err. */
int applier_entry(struct applier *a, const struct tar_entry *e, struct tar_reader *t, char *err, size_t errlen);
const struct apply_counts *applier_counts(const struct applier *a);
/* Makes directory path (and its parents: 0755, root) unless it is there, symlinks followed inside. */
int applier_ensure_dir(struct applier *a, const char *path, char *err, size_t errlen);

/* Resolves path (absolute or relative to the root) inside the image, symlinks followed inside it, final
 * one too when follow. 0 with *ret_ino, -ENOENT, or -errno. */
int image_resolve(ext2_filsys fs, const char *path, bool follow, ext2_ino_t *ret_ino);

/* ---- users.c ---- */
struct image_user {
	uint32_t uid, gid;
	char home[256];
};
/* The image's user spec ("name", "uid", "name:group", "uid:gid", ...) through its /etc/passwd and
 * /etc/group, as a container runtime reads them. -ENOENT (message in err) for a name it does not have. */
int users_resolve(ext2_filsys fs, const char *spec, struct image_user *ret, char *err, size_t errlen);
/* Whether /bin/sh resolves in the image to an executable regular file. */
bool users_has_shell(ext2_filsys fs);

/* ---- export.c ---- */
/* Writes the image's tree as a tar stream (pax, with xattrs) to out_fd; with path (symlinks followed inside
 * the image), only that file or directory, named as (NULL: its own name; "." a directory's contents). */
int export_tar(ext2_filsys fs, int out_fd, const char *path, const char *as, char *err, size_t errlen);

/* ---- copy.c ---- */
#define COPY_SRC_FD 3 /* copy mode: the source tree's root directory */
#define COPY_DST_FD 5 /* copy mode: the destination's root directory, empty */
#define COPY_DEPTH_MAX 256

struct copy_counts {
	uint64_t entries;   /* everything below the root, skipped ones too */
	uint64_t files;     /* regular files copied (hard links not counted again) */
	uint64_t dirs, symlinks, fifos;
	uint64_t hardlinks; /* names linked to a file copied before */
	uint64_t bytes;     /* st_blocks * 512 of the files copied, each inode once */
	uint64_t devices, sockets; /* skipped */
	uint64_t xattrs_failed;    /* extended attributes the destination refused */
	char xattr_first[300];     /* the first of them: "NAME: strerror, at PATH", "" when none */
};

/*
 * Copies the tree under the directory src_fd into the empty directory dst_fd: directories, regular files
 * (holes kept, hard links kept within the tree), symlinks (never followed) and FIFOs, each with its owner,
 * mode (set-id bits too), extended attributes (files and directories) and atime/mtime; device nodes and
 * sockets are skipped and counted. The root of dst_fd gets the metadata of src_fd's root. Names come only
 * from src_fd's directories and are opened only relative to their directory's descriptor; hard links are
 * made by the path of their first copy, absolute: call it chrooted into the destination (copy_main.c). The
 * source is hostile: an object that changes type or inode between its stat and its open is an error. A
 * directory the destination has already (lost+found) is kept and gets the source's metadata.
 *
 * Limits: more than max_entries entries, -E2BIG; files needing more than max_bytes (st_blocks), -ENOSPC;
 * directories deeper than COPY_DEPTH_MAX, -ELOOP. Errors of the destination keep their errno (ENOSPC,
 * EDQUOT): the library tells a full pool from a broken tree by it. Writes "progress copy ENTRIES BYTES"
 * status lines as it goes. Returns 0 with *ret filled, or -errno with a message (naming the path relative
 * to the root) in err; a failed copy leaves a partial tree for the caller to remove.
 */
int copy_tree(int src_fd, int dst_fd, uint64_t max_bytes, uint64_t max_entries, struct copy_counts *ret,
	      char *err, size_t errlen);

/* ---- copy_main.c ---- */
/* Confines copy mode: checks it is uid 0:0 of a user namespace other than the initial one and that fd 3 and
 * fd 5 are directories, closes every descriptor past fd 5, then a mount namespace of its own chrooted into
 * the destination (fd 5), the capabilities of a file's owner only, no_new_privs, not dumpable, the
 * MODE_COPY filter; "ready". Any failure ends the process with "error ...". */
void copy_main_confine(enum unpack_mode m);
/* After copy_main_confine(): copies fd 3's tree into fd 5 within the limits, reports "warn" and "counts"
 * lines, then "done"; a failure ends the process with "error ...". */
void copy_main_run(uint64_t max_bytes, uint64_t max_entries);

/* ---- bstream_apply.c ---- */
#define RECEIVE_STREAM_FD 0 /* receive mode: the btrfs send stream */
#define RECEIVE_PARENT_FD 3 /* receive mode: the parent template's root (read-only), or an empty directory */
/* receive: applies the version 1 btrfs send stream on fd 0 to the tree it is chrooted into (confined by
 * copy_main_confine(MODE_RECEIVE)); incremental: the stream must start with SNAPSHOT (its parent's extents
 * are read from fd 3), else with SUBVOL. Writes over max_bytes, -ENOSPC; entries over max_entries, -E2BIG.
 * Reports "warn" and "counts" lines; 0, or -errno with err. */
int bstream_receive(uint64_t max_bytes, uint64_t max_entries, bool incremental, char *err, size_t errlen);

/* ---- e2fd.c ---- */
/* libext2fs I/O over a descriptor named by its number ("3"), with a large write-through read cache. */
extern io_manager e2fd_io_manager;

/* libext2fs's message for an error code. */
const char *unpack_e2err(long code);
