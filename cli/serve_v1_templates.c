/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: templates from container images over the native API. An API caller never names a host
 * path: the image comes as the request's body (an OCI image archive or a `docker save` archive, a plain
 * tar), up to --max-image-upload, spooled into an unnamed file in the pool's work directory, and handed to
 * space_template_import() by descriptor. The file goes when the request ends, however it ends.
 *
 *   POST /v1/templates/{name}/image[?force=1]     body: the archive            201 {template}
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"
#include "util/util.h"

struct image_upload {
	int fd;
};

static void image_upload_free(struct serve_req *r)
{
	struct image_upload *u = r->state;
	if (u && u->fd >= 0)
		close(u->fd);
	free(u);
	r->state = NULL;
}

static int image_sink(struct serve_req *r, const char *data, size_t len)
{
	struct image_upload *u = r->state;
	return util_write_all(u->fd, data, len);
}

/* The pool's work directory, where the archive waits: on the pool, so its size counts against it. */
static int spool_open(struct serve_req *r, int *ret_fd)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return -ENOMEM;
	struct space_pool_info *pi = NULL;
	int e = space_pool_get_info(ctx, &pi);
	if (e < 0)
		return e;
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/.tmp", pi->path);
	space_pool_info_free(pi);
	(void)mkdir(dir, 0700);
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

enum MHD_Result serve_v1_template_image_start(struct serve_req *r)
{
	if (!util_name_valid(r->params[0]))
		return serve_reply_error(r, 400, "invalid",
					 "invalid template name: use 1-63 letters, digits, '.', '_' or '-', not starting "
					 "with '.' or '-'");
	struct image_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return serve_reply_error(r, 500, "internal", "out of memory");
	u->fd = -1;
	r->state = u;
	r->state_free = image_upload_free;
	int e = spool_open(r, &u->fd);
	if (e < 0)
		return serve_reply_space_error(r, e, "store the image");
	r->sink = image_sink;
	return MHD_YES;
}

enum MHD_Result serve_v1_template_image(struct serve_req *r)
{
	struct image_upload *u = r->state;
	if (r->sink_error < 0)
		return serve_reply_error(r, 507, "no_space", "store the image: %s", strerror(-r->sink_error));
	if (!r->body_seen)
		return serve_reply_error(r, 400, "invalid",
					 "the body must be the image: an OCI image archive or a `docker save` archive");
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", u->fd);
	struct space_template_import_options o = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	o.name = r->params[0];
	o.image = path;
	o.force = serve_query_bool(r, "force", false);
	int e = space_template_import(ctx, &o);
	if (e < 0)
		return serve_reply_space_error(r, e, "import template");
	struct space_template_info *t;
	if ((e = space_template_get(ctx, o.name, &t)) < 0)
		return serve_reply_space_error(r, e, "import template");
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", t->name);
	cJSON_AddNumberToObject(j, "rootfs_bytes", (double)t->rootfs_bytes);
	cJSON_AddNumberToObject(j, "created_ms", (double)t->created_ms);
	if (t->size >= offsetof(struct space_template_info, image_config) + sizeof(t->image_config) &&
	    t->image_digest[0]) {
		cJSON *img = cJSON_Parse(t->image_config);
		if (!img)
			img = cJSON_CreateObject();
		cJSON_AddStringToObject(img, "digest", t->image_digest);
		cJSON_AddItemToObject(j, "image", img);
	}
	space_template_info_free(t);
	return serve_reply_json(r, 201, j);
}
