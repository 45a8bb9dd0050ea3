/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container image on the host, as the library finds its parts: an OCI image layout (a directory, or a tar
 * of one: `skopeo copy ... oci-archive:`, `docker save` since Docker 25) or a `docker save` archive (its
 * manifest.json and the legacy layout). The library reads only the small JSON documents (index, manifests,
 * config; at most OCI_DOC_MAX bytes each, every one checked against its digest before it is parsed, as far as
 * the format gives one) and the archive's tar headers (image/tar.c, bounded); the layers it only opens and
 * hands to space-unpack, which reads, verifies and applies them confined. Private.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "image/oci.h"

/* One layer as space-unpack takes it. */
struct image_layer {
	int fd;                   /* the image plan's; -1 once handed out */
	uint64_t offset, length;
	const char *comp;         /* "gzip", "zstd", "none", "auto" */
	char digest[OCI_DIGEST_LEN + 1];  /* of the blob; "" when the format names it by path only */
	char diff_id[OCI_DIGEST_LEN + 1]; /* of the uncompressed tar, from the config */
};

struct image_plan {
	char format[24];          /* "oci-layout", "oci-archive", "docker-archive" */
	char digest[OCI_DIGEST_LEN + 1]; /* the config's: the image's identity */
	char ref[256];            /* its name in the layout or archive, "" if none */
	struct oci_config config;
	char *defaults;           /* oci_config_defaults_json() plus format and ref */
	struct image_layer layers[OCI_LAYERS_MAX];
	size_t n_layers;
	uint64_t layer_bytes;     /* their compressed sizes, summed */
	int fds[OCI_LAYERS_MAX];  /* the descriptors the layers use (each once), -1 past n_fds */
	size_t n_fds;
};

/*
 * What path is: 1 when it is a container image (a directory or plain tar holding oci-layout, index.json
 * or manifest.json at its top), 0 when it is not, -errno when it cannot be read. *ret_why (may be NULL)
 * names what made it one ("manifest.json"), for messages.
 */
int image_source_detect(space_ctx *ctx, const char *path, const char **ret_why);

/*
 * Reads the image at path down to its layers into *ret (the caller's; image_plan_clear): the index and the
 * manifest for linux/amd64, the config, and an open descriptor (with offset and length) per layer. Fails
 * with a message naming the document and why: a digest that does not match, a platform other than
 * linux/amd64, a layer missing or of another size than its descriptor says.
 */
int image_plan_load(space_ctx *ctx, const char *path, struct image_plan *ret);
void image_plan_clear(struct image_plan *p);

/* "sha256:<hex>" of len bytes of buf into out (OCI_DIGEST_LEN + 1 bytes). */
void image_sha256(const void *buf, size_t len, char *out);
