/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Template streams (space_template_send / space_template_receive, template_stream.c) and the digest both
 * ends take of a template's files (template_digest.c). Private.
 */
#pragma once

#include <stdint.h>
#include <stddef.h>

struct template_digest {
	char digest[72]; /* "sha256:" and 64 hex digits */
	uint64_t entries, files, bytes;
};

/*
 * The digest of the tree under dir: every entry in name order with its path, type, permission bits and
 * owner; a file's size and content (its blocks that are not all zeros, with their offsets: holes and
 * written zeros alike); a symlink's target. Times and extended attributes are left out. Never follows a
 * symlink; a device node or socket is an error. 0, or -errno with err.
 */
int template_digest_tree(const char *dir, struct template_digest *ret, char *err, size_t errlen);

/* The identity of the template whose subvolume is path, as a uuid string (out: 37 bytes; "" on failure). */
int template_stream_identity(const char *path, char out[37]);

/* What a stream's header says (template_stream.c). */
#define TEMPLATE_STREAM_MAGIC "space-template-stream 1 "
#define TEMPLATE_STREAM_HEADER_MAX (1u << 20)
