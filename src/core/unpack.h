/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running space-unpack (src/unpack), the confined helper that builds a template's rootfs.ext4 from tar
 * streams (image layers, a rootfs tarball) and reads one back (its shell, an export). The library holds
 * its uid slot ("pid <pid> <start time> unpack", freed when it returns; a crash leaves it to the stale-slot
 * reaper), opens every descriptor it gets, makes the file system between its two passes (mkfs.ext4, at
 * the size the first one measured), checks the result (e2fsck -fn) and escapes every word it reports.
 * Private.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/image_source.h"
#include "core/internal.h"

struct unpack_result {
	bool shell;               /* /bin/sh resolves to an executable file in the image */
	bool has_user;            /* the user spec was resolved: */
	uint32_t uid, gid;
	char home[256];
	bool looks_like_image;    /* a single tarball whose top holds an image's files (manifest.json, ...) */
	bool isdir;               /* check --isdir: the path is a directory in the image */
	uint64_t size;            /* of the file system made */
};

struct unpack_request {
	const struct image_layer *layers;
	size_t n_layers;
	const int *fds;           /* the descriptors the layers use, each once */
	size_t n_fds;
	const char *user;         /* the image's User to resolve, or NULL */
	const char *workdir;      /* the image's WorkingDir, made if missing, or NULL */
	uint64_t size_bytes;      /* the file system's size; 0: what the layers need plus headroom */
	const char *what;         /* "layer", "tarball" or "context", for progress and messages */
	bool any_tree;            /* a tarball that looks like an image is applied all the same (a context) */
	space_progress_fn progress;
	void *progress_userdata;
};

/* Builds image (a new, empty file) from the request's layers. 0 with *ret, or -errno with a message. */
int unpack_apply(space_ctx *ctx, const struct unpack_request *req, const char *image, struct unpack_result *ret);

/* Whether /bin/sh is in the ext4 image at path (read by the helper: the image may be a sandbox's work). */
int unpack_check_shell(space_ctx *ctx, const char *image, bool *ret_shell);
/* user (USER's spec) through the image's /etc/passwd and /etc/group: ret's uid, gid, home. */
int unpack_check_user(space_ctx *ctx, const char *image, const char *user, struct unpack_result *ret);
/* Whether path (absolute, symlinks followed inside the image) is a directory of the image. */
int unpack_check_isdir(space_ctx *ctx, const char *image, const char *path, bool *ret);

/* Writes the tree of the ext4 image at path to out_fd as a tar stream; _path: only path (a file or a
 * directory, symlinks followed inside the image), named as ("." a directory's contents, or a file under
 * its own name; NULL its name). */
int unpack_export(space_ctx *ctx, const char *image, int out_fd);
int unpack_export_path(space_ctx *ctx, const char *image, const char *path, const char *as, int out_fd);

/* Applies tar streams onto an existing image (a build step), which keeps its size (ENOSPC when full). */
struct unpack_add {
	const struct image_layer *layers; /* at most 8; fd each, no digests needed */
	size_t n_layers;
	const char *into;         /* the entries land under this directory (NULL: the root) */
	bool chown;               /* every entry owned by uid:gid */
	uint32_t uid, gid;
	bool plain;               /* .wh. names are files (ADD of an archive) */
	const char *workdir;      /* made if missing */
	const char *user;         /* resolved (ret's uid, gid, home) */
};
int unpack_add(space_ctx *ctx, const char *image, const struct unpack_add *req, struct unpack_result *ret);

/*
 * Copies the tree of the ext4 image at path into tree_dir (an empty directory): the image is mounted
 * read-only, both sides are idmapped to a user namespace of a fresh host uid range, and space-unpack copies
 * as root of that namespace (a process that holds no host privilege, under its seccomp filter, chrooted into
 * tree_dir). Owners stay those of the image (root's files uid 0 on disk).
 */
int unpack_tree_from_image(space_ctx *ctx, const char *image, const char *tree_dir, space_progress_fn progress,
			   void *progress_userdata);

/*
 * Applies the btrfs send stream read from in_fd (version 1; positioned at its header) to dst, a quarantine
 * subvolume: empty for a full stream, a writable snapshot of parent for an incremental one (parent: the
 * template it was made against, whose extents clones read; NULL for a full stream). space-unpack receive
 * does it (a process that holds no host privilege: root of a user namespace of a fresh host uid range,
 * idmapped views of dst and the read-only parent, chrooted into dst, its seccomp filter), checking every
 * command before it is done. Data over max_bytes or entries over max_entries end it. The caller checks
 * the result before using it (its digest) and removes dst on failure.
 */
struct unpack_receive_request {
	const char *dst;
	const char *parent;
	int in_fd;
	uint64_t max_bytes, max_entries;
	uint64_t expected_bytes; /* for progress */
	space_progress_fn progress;
	void *progress_userdata;
};
struct unpack_receive_counts {
	uint64_t commands, entries, bytes;
};
int unpack_receive(space_ctx *ctx, const struct unpack_receive_request *req, struct unpack_receive_counts *ret);
