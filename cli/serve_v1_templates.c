/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: templates from container images over the native API. An API caller never names a host
 * path: the image comes as the request's body (an OCI image archive or a `docker save` archive, a plain
 * tar), up to --max-image-upload, spooled into an unnamed file in the pool's work directory, and handed to
 * space_template_import() by descriptor. The file goes when the request ends, however it ends.
 *
 *   POST /v1/templates/{name}/image[?force=1]     body: the archive            201 {template}
 *
 * A template stream (space template send, or a cluster host's push) comes the same way, spooled and capped
 * alike, and is received by space_template_receive (the btrfs stream applied by the confined space-unpack
 * into a quarantine subvolume, kept only when its digest is the sender's):
 *
 *   POST /v1/templates/{name}/stream              body: the stream             201 {template, parent, ...}
 *
 * A build's context comes the same way (a tar of the context directory, as `docker build -` takes it),
 * capped alike; space-unpack makes it a file system of its own, so nothing of it is extracted on the host.
 * RUN steps get no egress over the API. Their output comes back in the answer (its last
 * SERVE_BUILD_OUTPUT_MAX bytes), also when a step failed (422, with the step's line and exit status).
 *
 *   POST /v1/templates/{name}/build[?dockerfile=PATH&no_cache=1&isolation=jail|vm&build_arg=K=V...]
 *                                                 body: the context tar          201 {template, output}
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"
#include "util/util.h"

#define SERVE_BUILD_OUTPUT_MAX (1u << 20)
#define SERVE_BUILD_ARGS_MAX 64

struct image_upload {
	int fd;
	char *out;                /* a build's RUN output, its last SERVE_BUILD_OUTPUT_MAX bytes */
	size_t out_len;
	bool out_cut;
	const char *args[SERVE_BUILD_ARGS_MAX + 1];
	size_t n_args;
	bool args_over;
};

static void image_upload_free(struct serve_req *r)
{
	struct image_upload *u = r->state;
	if (u && u->fd >= 0)
		close(u->fd);
	if (u)
		free(u->out);
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

/* The answer to a route that made template name: its name, size, time and, from an image, its digest and
 * config. 0, or -errno from reading it back. */
static int template_made(space_ctx *ctx, const char *name, cJSON **ret)
{
	struct space_template_info *t;
	int e = space_template_get(ctx, name, &t);
	if (e < 0)
		return e;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", t->name);
	cJSON_AddNumberToObject(j, "rootfs_bytes", (double)t->rootfs_bytes);
	cJSON_AddNumberToObject(j, "created_ms", (double)t->created_ms);
	if (t->size >= offsetof(struct space_template_info, id) + sizeof(t->id) && t->id[0])
		cJSON_AddStringToObject(j, "id", t->id);
	if (t->size >= offsetof(struct space_template_info, image_config) + sizeof(t->image_config) &&
	    t->image_digest[0]) {
		cJSON *img = cJSON_Parse(t->image_config);
		if (!img)
			img = cJSON_CreateObject();
		cJSON_AddStringToObject(img, "digest", t->image_digest);
		cJSON_AddItemToObject(j, "image", img);
	}
	space_template_info_free(t);
	*ret = j;
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
	cJSON *j;
	if ((e = template_made(ctx, o.name, &j)) < 0)
		return serve_reply_space_error(r, e, "import template");
	return serve_reply_json(r, 201, j);
}

enum MHD_Result serve_v1_template_stream(struct serve_req *r)
{
	struct image_upload *u = r->state;
	if (r->sink_error < 0)
		return serve_reply_error(r, 507, "no_space", "store the stream: %s", strerror(-r->sink_error));
	if (!r->body_seen)
		return serve_reply_error(r, 400, "invalid", "the body must be a template stream (space template send)");
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	if (lseek(u->fd, 0, SEEK_SET) < 0)
		return serve_reply_error(r, 500, "internal", "rewind the stream: %s", strerror(errno));
	struct space_template_receive_options o = SPACE_TEMPLATE_RECEIVE_OPTIONS_INIT;
	o.fd = u->fd;
	o.name = r->params[0];
	struct space_template_receive_info info;
	int e = space_template_receive(ctx, &o, &info);
	if (e < 0)
		return serve_reply_space_error(r, e, "receive template");
	cJSON *t;
	if ((e = template_made(ctx, info.name, &t)) < 0)
		return serve_reply_space_error(r, e, "receive template");
	cJSON *j = cli_received_json(&info);
	cJSON_AddItemToObject(j, "template", t);
	return serve_reply_json(r, 201, j);
}

/* ---- POST /v1/templates/{name}/build ---- */

static int build_output(int stream, const void *data, size_t len, void *userdata)
{
	(void)stream;
	struct image_upload *u = userdata;
	if (len >= SERVE_BUILD_OUTPUT_MAX) {
		data = (const char *)data + (len - SERVE_BUILD_OUTPUT_MAX / 2);
		len = SERVE_BUILD_OUTPUT_MAX / 2;
		u->out_len = 0;
		u->out_cut = true;
	}
	if (u->out_len + len > SERVE_BUILD_OUTPUT_MAX) {
		/* keep the newer half */
		size_t keep = SERVE_BUILD_OUTPUT_MAX / 2 < u->out_len ? SERVE_BUILD_OUTPUT_MAX / 2 : u->out_len;
		memmove(u->out, u->out + u->out_len - keep, keep);
		u->out_len = keep;
		u->out_cut = true;
	}
	if (!u->out && !(u->out = malloc(SERVE_BUILD_OUTPUT_MAX)))
		return 0; /* the output is dropped; the build goes on */
	memcpy(u->out + u->out_len, data, len);
	u->out_len += len;
	return 0;
}

static enum MHD_Result build_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	struct image_upload *u = cls;
	if (!key || strcmp(key, "build_arg"))
		return MHD_YES;
	if (!value || !strchr(value, '=') || value[0] == '=' || u->n_args == SERVE_BUILD_ARGS_MAX) {
		u->args_over = true;
		return MHD_NO;
	}
	u->args[u->n_args++] = value;
	return MHD_YES;
}

static void add_output(struct image_upload *u, cJSON *j)
{
	_cleanup_free_ char *clean = u->out ? serve_utf8_clean(u->out, u->out_len, NULL, NULL) : NULL;
	cJSON_AddStringToObject(j, "output", clean ? clean : "");
	cJSON_AddBoolToObject(j, "output_truncated", u->out_cut);
}

enum MHD_Result serve_v1_template_build(struct serve_req *r)
{
	struct image_upload *u = r->state;
	if (r->sink_error < 0)
		return serve_reply_error(r, 507, "no_space", "store the build context: %s", strerror(-r->sink_error));
	if (!r->body_seen)
		return serve_reply_error(r, 400, "invalid", "the body must be the build context: a tar (plain, gzip or zstd)");
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, build_arg, u);
	if (u->args_over)
		return serve_reply_error(r, 400, "invalid", "build_arg takes NAME=VALUE, at most %d of them",
					 SERVE_BUILD_ARGS_MAX);
	const char *iso = serve_query(r, "isolation");
	if (iso && strcmp(iso, "jail") && strcmp(iso, "vm"))
		return serve_reply_error(r, 400, "invalid", "isolation must be jail or vm");
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", u->fd);
	struct space_template_build_options o = SPACE_TEMPLATE_BUILD_OPTIONS_INIT;
	o.name = r->params[0];
	o.context_archive = path;
	o.dockerfile = serve_query(r, "dockerfile");
	o.no_cache = serve_query_bool(r, "no_cache", false);
	o.isolation = iso;
	o.build_args = u->n_args ? u->args : NULL;
	o.output = build_output;
	o.output_userdata = u;
	int e = space_template_build(ctx, &o);
	if (e == -ECANCELED) {
		/* a step failed: what it said, with its output */
		_cleanup_free_ char *msg = serve_utf8_clean(space_ctx_last_error(ctx), strlen(space_ctx_last_error(ctx)),
							   NULL, NULL);
		cJSON *j = cJSON_CreateObject();
		cJSON *err = cJSON_AddObjectToObject(j, "error");
		cJSON_AddStringToObject(err, "code", "step_failed");
		cJSON_AddStringToObject(err, "message", msg ? msg : "");
		add_output(u, j);
		return serve_reply_json(r, 422, j);
	}
	if (e < 0)
		return serve_reply_space_error(r, e, "build template");
	cJSON *j;
	if ((e = template_made(ctx, o.name, &j)) < 0)
		return serve_reply_space_error(r, e, "build template");
	add_output(u, j);
	return serve_reply_json(r, 201, j);
}
