/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space_template_export: a template's root file system as an archive for another host. The tree is read
 * out of rootfs.ext4 by space-unpack (confined: the disk may be a sandbox's work) as a tar stream; for an
 * OCI image archive that stream becomes the one layer (kept in an unnamed file of the pool while its digest
 * is taken), written with a config holding the template's image defaults, a manifest and an index.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/image_source.h"
#include "core/internal.h"
#include "core/unpack.h"
#include "image/tar.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete)

static void progress(const struct space_template_export_options *o, const char *stage, uint64_t done, uint64_t total)
{
	if (o->progress)
		o->progress(stage, done, total, o->progress_userdata);
}

/* The sha256 of the fd's whole content (read with pread from 0), and its size. */
static int digest_fd(int fd, char out[OCI_DIGEST_LEN + 1], uint64_t *ret_size)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return -ENOMEM;
	}
	static __thread uint8_t buf[1 << 16];
	uint64_t off = 0;
	ssize_t k;
	while ((k = pread(fd, buf, sizeof(buf), (off_t)off)) > 0) {
		EVP_DigestUpdate(md, buf, (size_t)k);
		off += (uint64_t)k;
	}
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_DigestFinal_ex(md, d, &n);
	EVP_MD_CTX_free(md);
	if (k < 0)
		return -errno;
	size_t at = (size_t)snprintf(out, OCI_DIGEST_LEN + 1, "sha256:");
	for (unsigned i = 0; i < n; i++)
		at += (size_t)snprintf(out + at, OCI_DIGEST_LEN + 1 - at, "%02x", d[i]);
	*ret_size = off;
	return 0;
}

static int put_member(space_ctx *ctx, int out, const char *name, const void *data, size_t len)
{
	uint8_t h[TAR_BLOCK], zero[TAR_BLOCK] = { 0 };
	int r = tar_header(h, name, NULL, '0', 0644, 0, 0, len, util_wall_ms() / 1000, 0, 0);
	if (r == 0)
		r = util_write_all(out, h, sizeof(h));
	if (r == 0)
		r = util_write_all(out, data, len);
	if (r == 0 && len % TAR_BLOCK)
		r = util_write_all(out, zero, TAR_BLOCK - len % TAR_BLOCK);
	return r < 0 ? ctx_error(ctx, r, "write the archive") : 0;
}

static int put_dir(space_ctx *ctx, int out, const char *name)
{
	uint8_t h[TAR_BLOCK];
	tar_header(h, name, NULL, '5', 0755, 0, 0, 0, util_wall_ms() / 1000, 0, 0);
	int r = util_write_all(out, h, sizeof(h));
	return r < 0 ? ctx_error(ctx, r, "write the archive") : 0;
}

/* The layer from src (size bytes) as a member. */
static int put_file(space_ctx *ctx, int out, const char *name, int src, uint64_t size,
		    const struct space_template_export_options *o)
{
	uint8_t h[TAR_BLOCK], zero[TAR_BLOCK] = { 0 };
	tar_header(h, name, NULL, '0', 0644, 0, 0, size, util_wall_ms() / 1000, 0, 0);
	int r = util_write_all(out, h, sizeof(h));
	static __thread uint8_t buf[1 << 16];
	for (uint64_t off = 0; r == 0 && off < size;) {
		ssize_t k = pread(src, buf, sizeof(buf), (off_t)off);
		if (k <= 0) {
			r = k < 0 ? -errno : -EIO;
			break;
		}
		r = util_write_all(out, buf, (size_t)k);
		off += (uint64_t)k;
		if ((off & ((64u << 20) - 1)) == 0 || off == size)
			progress(o, "write image archive", off, size);
	}
	if (r == 0 && size % TAR_BLOCK)
		r = util_write_all(out, zero, TAR_BLOCK - size % TAR_BLOCK);
	return r < 0 ? ctx_error(ctx, r, "write the archive") : 0;
}

/* The config of the exported image: the template's image defaults (none for a rootfs template). */
static char *make_config(const char *defaults, const char *diff_id)
{
	_cleanup_(cJSON_Deletep) cJSON *d = defaults ? cJSON_Parse(defaults) : NULL;
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "architecture", "amd64");
	cJSON_AddStringToObject(j, "os", "linux");
	cJSON *c = cJSON_AddObjectToObject(j, "config");
	static const struct {
		const char *ours, *oci;
	} fields[] = { { "env", "Env" }, { "working_dir", "WorkingDir" }, { "user", "User" },
		       { "entrypoint", "Entrypoint" }, { "cmd", "Cmd" }, { "labels", "Labels" } };
	for (size_t i = 0; d && i < ARRAY_SIZE(fields); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, fields[i].ours);
		if (v)
			cJSON_AddItemToObject(c, fields[i].oci, cJSON_Duplicate(v, true));
	}
	cJSON *rootfs = cJSON_AddObjectToObject(j, "rootfs");
	cJSON_AddStringToObject(rootfs, "type", "layers");
	cJSON *ids = cJSON_AddArrayToObject(rootfs, "diff_ids");
	cJSON_AddItemToArray(ids, cJSON_CreateString(diff_id));
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

static char *descriptor_doc(const char *kind, const char *name, const char *config_digest, size_t config_len,
			    const char *layer_digest, uint64_t layer_len, const char *manifest_digest, size_t manifest_len)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "schemaVersion", 2);
	if (!strcmp(kind, "manifest")) {
		cJSON_AddStringToObject(j, "mediaType", "application/vnd.oci.image.manifest.v1+json");
		cJSON *c = cJSON_AddObjectToObject(j, "config");
		cJSON_AddStringToObject(c, "mediaType", "application/vnd.oci.image.config.v1+json");
		cJSON_AddStringToObject(c, "digest", config_digest);
		cJSON_AddNumberToObject(c, "size", (double)config_len);
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l, "mediaType", "application/vnd.oci.image.layer.v1.tar");
		cJSON_AddStringToObject(l, "digest", layer_digest);
		cJSON_AddNumberToObject(l, "size", (double)layer_len);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "layers"), l);
	} else {
		cJSON_AddStringToObject(j, "mediaType", "application/vnd.oci.image.index.v1+json");
		cJSON *m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "mediaType", "application/vnd.oci.image.manifest.v1+json");
		cJSON_AddStringToObject(m, "digest", manifest_digest);
		cJSON_AddNumberToObject(m, "size", (double)manifest_len);
		cJSON *p = cJSON_AddObjectToObject(m, "platform");
		cJSON_AddStringToObject(p, "architecture", "amd64");
		cJSON_AddStringToObject(p, "os", "linux");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "annotations"), "org.opencontainers.image.ref.name",
					name);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "manifests"), m);
	}
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

static int export_oci(space_ctx *ctx, const char *name, const char *root, const char *image,
		      const struct space_template_export_options *o)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/.tmp", root);
	(void)mkdir(dir, 0700);
	_cleanup_close_ int layer = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (layer < 0)
		return ctx_error(ctx, -errno, "a work file in %s", dir);
	progress(o, "export tree (confined)", 0, 0);
	int r = unpack_export(ctx, image, layer);
	if (r < 0)
		return r;
	char ldg[OCI_DIGEST_LEN + 1], cdg[OCI_DIGEST_LEN + 1], mdg[OCI_DIGEST_LEN + 1];
	uint64_t lsize = 0;
	if ((r = digest_fd(layer, ldg, &lsize)) < 0)
		return ctx_error(ctx, r, "digest of the layer");
	_cleanup_free_ char *defaults = NULL;
	if ((r = store_template_get_image_config(ctx->store, name, &defaults)) < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	_cleanup_free_ char *config = make_config(defaults, ldg);
	if (!config)
		return -ENOMEM;
	image_sha256(config, strlen(config), cdg);
	_cleanup_free_ char *manifest = descriptor_doc("manifest", name, cdg, strlen(config), ldg, lsize, NULL, 0);
	if (!manifest)
		return -ENOMEM;
	image_sha256(manifest, strlen(manifest), mdg);
	_cleanup_free_ char *index = descriptor_doc("index", name, NULL, 0, NULL, 0, mdg, strlen(manifest));
	if (!index)
		return -ENOMEM;
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	char bl[100];
	int out = o->fd;
	if ((r = put_member(ctx, out, "oci-layout", layout, strlen(layout))) < 0 || (r = put_dir(ctx, out, "blobs/")) < 0 ||
	    (r = put_dir(ctx, out, "blobs/sha256/")) < 0)
		return r;
	snprintf(bl, sizeof(bl), "blobs/sha256/%s", ldg + 7);
	if ((r = put_file(ctx, out, bl, layer, lsize, o)) < 0)
		return r;
	snprintf(bl, sizeof(bl), "blobs/sha256/%s", cdg + 7);
	if ((r = put_member(ctx, out, bl, config, strlen(config))) < 0)
		return r;
	snprintf(bl, sizeof(bl), "blobs/sha256/%s", mdg + 7);
	if ((r = put_member(ctx, out, bl, manifest, strlen(manifest))) < 0 ||
	    (r = put_member(ctx, out, "index.json", index, strlen(index))) < 0)
		return r;
	static const uint8_t end[2 * TAR_BLOCK];
	r = util_write_all(out, end, sizeof(end));
	return r < 0 ? ctx_error(ctx, r, "write the archive") : 0;
}

SPACE_API int space_template_export(space_ctx *ctx, const char *name, const struct space_template_export_options *opts)
{
	CTX_ENTER(ctx);
	if (!ctx || !name || !opts)
		return -EINVAL;
	struct space_template_export_options o;
	int r = opts_template_export_load(ctx, opts, &o);
	if (r < 0)
		return r;
	bool oci = o.format && !strcmp(o.format, "oci");
	if (o.format && !oci && strcmp(o.format, "rootfs"))
		return ctx_error_msg(ctx, -EINVAL, "export format '%s': rootfs or oci", o.format);
	if (o.fd <= 0 || fcntl(o.fd, F_GETFL) < 0 || (fcntl(o.fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return ctx_error_msg(ctx, -EINVAL, "export: fd %d is not open for writing", o.fd);
	struct template_info t;
	if ((r = core_template_get(ctx, name, &t)) < 0)
		return r;
	const char *root;
	if ((r = ctx_pool(ctx, &root)) < 0)
		return r;
	char image[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", t.path);
	if (oci)
		return export_oci(ctx, name, root, image, &o);
	progress(&o, "export tree (confined)", 0, 0);
	return unpack_export(ctx, image, o.fd);
}
