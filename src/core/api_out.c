/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public side of the library's outputs (space.h, "Conventions"): the core fills its own fixed views
 * (core/info.h) and this file turns them into size-versioned objects, each one allocation holding the
 * struct and its strings, lists as NULL-terminated arrays of them. Records the caller owns are written
 * only up to the size the caller set. Nothing here knows how a value is found: adding a field to an
 * output is one line in its converter.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "core/template_stream.h"
#include "net/secrets.h"
#include "util/cleanup.h"

/* ---- objects --------------------------------------------------------------------------------------- */

/* One allocation of fixed bytes (the struct, zeroed) followed by room for strings of total length
 * strings; out_str copies them after it. */
struct out_obj {
	char *tail;
};

static void *out_alloc(size_t fixed, size_t strings, struct out_obj *o)
{
	char *p = calloc(1, fixed + strings);
	o->tail = p ? p + fixed : NULL;
	return p;
}

static const char *out_str(struct out_obj *o, const char *s)
{
	size_t n = strlen(s) + 1;
	const char *r = memcpy(o->tail, s, n);
	o->tail += n;
	return r;
}

#define LEN(s) (strlen(s) + 1)

static struct space_sandbox_info *out_sandbox(const struct sandbox_info *b)
{
	struct out_obj o;
	struct space_sandbox_info *v = out_alloc(sizeof(*v),
						 LEN(b->id) + LEN(b->template_name) + LEN(b->isolation) +
							 LEN(b->reason) + LEN(b->path),
						 &o);
	if (!v)
		return NULL;
	v->size = sizeof(*v);
	v->id = out_str(&o, b->id);
	v->template_name = out_str(&o, b->template_name);
	v->isolation = out_str(&o, b->isolation);
	v->status = b->status;
	v->reason = out_str(&o, b->reason);
	v->pid = b->pid;
	v->cpus = b->cpus;
	v->memory_mib = b->memory_mib;
	v->created_ms = b->created_ms;
	v->updated_ms = b->updated_ms;
	v->expires_ms = b->expires_ms;
	v->path = out_str(&o, b->path);
	return v;
}

static struct space_template_info *out_template(const struct template_info *t, const char *config)
{
	struct out_obj o;
	if (!config)
		config = "";
	char id[37];
	(void)template_stream_identity(t->path, id);
	struct space_template_info *v = out_alloc(sizeof(*v), LEN(t->name) + LEN(t->path) + LEN(t->image_digest) +
								     LEN(config) + LEN(id), &o);
	if (!v)
		return NULL;
	v->size = sizeof(*v);
	v->name = out_str(&o, t->name);
	v->path = out_str(&o, t->path);
	v->rootfs_bytes = t->rootfs_bytes;
	v->has_kernel = t->has_kernel;
	v->has_initrd = t->has_initrd;
	v->created_ms = t->created_ms;
	v->sandboxes = t->sandboxes;
	v->checkpoints = t->checkpoints;
	v->image_digest = out_str(&o, t->image_digest);
	v->image_config = out_str(&o, config);
	v->id = out_str(&o, id);
	return v;
}

static struct space_checkpoint_info *out_checkpoint(const struct checkpoint_info *c)
{
	struct out_obj o;
	struct space_checkpoint_info *v = out_alloc(sizeof(*v),
						    LEN(c->id) + LEN(c->sandbox_id) + LEN(c->template_name) +
							    LEN(c->name) + LEN(c->kind) + LEN(c->path),
						    &o);
	if (!v)
		return NULL;
	v->size = sizeof(*v);
	v->id = out_str(&o, c->id);
	v->sandbox_id = out_str(&o, c->sandbox_id);
	v->template_name = out_str(&o, c->template_name);
	v->name = out_str(&o, c->name);
	v->kind = out_str(&o, c->kind);
	v->path = out_str(&o, c->path);
	v->created_ms = c->created_ms;
	return v;
}

static struct space_secret_info *out_secret(const struct net_secret_info *s)
{
	struct out_obj o;
	struct space_secret_info *v = out_alloc(sizeof(*v), LEN(s->name), &o);
	if (!v)
		return NULL;
	v->size = sizeof(*v);
	v->name = out_str(&o, s->name);
	v->created_ms = s->created_ms;
	return v;
}

static struct space_pool_info *out_pool(const struct pool_info *p)
{
	struct out_obj o;
	struct space_pool_info *v = out_alloc(sizeof(*v), LEN(p->path) + LEN(p->loop_image) + LEN(p->isolation), &o);
	if (!v)
		return NULL;
	v->size = sizeof(*v);
	v->path = out_str(&o, p->path);
	v->loop_image = out_str(&o, p->loop_image);
	v->isolation = out_str(&o, p->isolation);
	v->total_bytes = p->total_bytes;
	v->free_bytes = p->free_bytes;
	v->mounted = p->mounted;
	v->used_bytes = p->used_bytes;
	v->promised_bytes = p->promised_bytes;
	v->sandbox_disks = p->sandbox_disks;
	return v;
}

/*
 * out_<what>_list: the objects conv makes of rows[0..n) as a NULL-terminated array into *ret (all or
 * nothing), their count into *ret_count (may be NULL), when r (the core call's result) is 0; rows are freed
 * either way. A macro making one function per type, so that the array is written with the element type the
 * caller reads it as (not through void *).
 */
#define OUT_LIST_FN(name, pub, row, conv)                                                                  \
	static int name(int r, struct row *rows, size_t n, struct pub ***ret, size_t *ret_count)            \
	{                                                                                                  \
		struct pub **list = r < 0 ? NULL : calloc(n + 1, sizeof(*list));                           \
		size_t i = 0;                                                                              \
		while (list && i < n && (list[i] = conv(&rows[i])))                                        \
			i++;                                                                               \
		free(rows);                                                                                \
		if (r < 0)                                                                                 \
			return r;                                                                          \
		if (!list || i < n) {                                                                      \
			while (list && i > 0)                                                              \
				free(list[--i]);                                                           \
			free(list);                                                                        \
			return -ENOMEM;                                                                    \
		}                                                                                          \
		*ret = list;                                                                               \
		if (ret_count)                                                                             \
			*ret_count = n;                                                                    \
		return 0;                                                                                  \
	}

OUT_LIST_FN(out_sandbox_list, space_sandbox_info, sandbox_info, out_sandbox)
OUT_LIST_FN(out_checkpoint_list, space_checkpoint_info, checkpoint_info, out_checkpoint)
OUT_LIST_FN(out_secret_list, space_secret_info, net_secret_info, out_secret)

/* One object of a core view, when r is 0. */
#define OUT_ONE(r, ret, conv, view) ((r) < 0 ? (r) : (*(ret) = conv(view)) ? 0 : -ENOMEM)

#define OUT_LIST_FREE(list)                                                                                \
	do {                                                                                               \
		for (size_t i_ = 0; (list) && (list)[i_]; i_++)                                            \
			free((list)[i_]);                                                                  \
		free(list);                                                                                \
	} while (0)

SPACE_API int space_sandbox_list(space_ctx *ctx, struct space_sandbox_info ***ret_list, size_t *ret_count)
{
	CTX_ENTER(ctx);
	struct sandbox_info *rows = NULL;
	size_t n = 0;
	int r = ret_list ? core_sandbox_list(ctx, &rows, &n) : -EINVAL;
	return out_sandbox_list(r, rows, n, ret_list, ret_count);
}

SPACE_API void space_sandbox_info_list_free(struct space_sandbox_info **list)
{
	OUT_LIST_FREE(list);
}

SPACE_API int space_sandbox_get_info(space_sandbox *sb, struct space_sandbox_info **ret_info)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	struct sandbox_info b;
	int r = sb && ret_info ? core_sandbox_get_info(sb, &b) : -EINVAL;
	return OUT_ONE(r, ret_info, out_sandbox, &b);
}

SPACE_API void space_sandbox_info_free(struct space_sandbox_info *info)
{
	free(info);
}

/* A template's object with its image config (read only for templates made from an image). */
static struct space_template_info *out_template_of(space_ctx *ctx, const struct template_info *t, int *r)
{
	_cleanup_free_ char *config = NULL;
	if (t->image_digest[0] && (*r = core_template_image_config(ctx, t->name, &config)) < 0)
		return NULL;
	struct space_template_info *v = out_template(t, config);
	if (!v)
		*r = -ENOMEM;
	return v;
}

SPACE_API int space_template_list(space_ctx *ctx, struct space_template_info ***ret_list, size_t *ret_count)
{
	CTX_ENTER(ctx);
	_cleanup_free_ struct template_info *rows = NULL;
	size_t n = 0;
	int r = ret_list ? core_template_list(ctx, &rows, &n) : -EINVAL;
	if (r < 0)
		return r;
	struct space_template_info **list = calloc(n + 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(list[i] = out_template_of(ctx, &rows[i], &r))) {
			OUT_LIST_FREE(list);
			return r;
		}
	*ret_list = list;
	if (ret_count)
		*ret_count = n;
	return 0;
}

SPACE_API void space_template_info_list_free(struct space_template_info **list)
{
	OUT_LIST_FREE(list);
}

SPACE_API int space_template_get(space_ctx *ctx, const char *name, struct space_template_info **ret_info)
{
	CTX_ENTER(ctx);
	struct template_info t;
	int r = ret_info ? core_template_get(ctx, name, &t) : -EINVAL;
	if (r < 0)
		return r;
	struct space_template_info *v = out_template_of(ctx, &t, &r);
	if (!v)
		return r;
	*ret_info = v;
	return 0;
}

SPACE_API void space_template_info_free(struct space_template_info *info)
{
	free(info);
}

SPACE_API int space_checkpoint_list(space_ctx *ctx, const char *sandbox_id, struct space_checkpoint_info ***ret_list,
				    size_t *ret_count)
{
	CTX_ENTER(ctx);
	struct checkpoint_info *rows = NULL;
	size_t n = 0;
	int r = ret_list ? core_checkpoint_list(ctx, sandbox_id, &rows, &n) : -EINVAL;
	return out_checkpoint_list(r, rows, n, ret_list, ret_count);
}

SPACE_API void space_checkpoint_info_list_free(struct space_checkpoint_info **list)
{
	OUT_LIST_FREE(list);
}

SPACE_API int space_checkpoint_get(space_ctx *ctx, const char *id, struct space_checkpoint_info **ret_info)
{
	CTX_ENTER(ctx);
	struct checkpoint_info c;
	int r = ret_info ? core_checkpoint_get(ctx, id, &c) : -EINVAL;
	return OUT_ONE(r, ret_info, out_checkpoint, &c);
}

SPACE_API int space_checkpoint_find(space_ctx *ctx, const char *sandbox_id, const char *id_or_name,
				    struct space_checkpoint_info **ret_info)
{
	CTX_ENTER(ctx);
	struct checkpoint_info c;
	int r = ret_info ? core_checkpoint_find(ctx, sandbox_id, id_or_name, &c) : -EINVAL;
	return OUT_ONE(r, ret_info, out_checkpoint, &c);
}

SPACE_API void space_checkpoint_info_free(struct space_checkpoint_info *info)
{
	free(info);
}

SPACE_API bool space_checkpoint_is_automatic(const struct space_checkpoint_info *c)
{
	return c && core_checkpoint_name_automatic(c->name);
}

SPACE_API int space_secret_list(space_ctx *ctx, struct space_secret_info ***ret_list, size_t *ret_count)
{
	CTX_ENTER(ctx);
	struct net_secret_info *rows = NULL;
	size_t n = 0;
	int r = ret_list ? core_secret_list(ctx, &rows, &n) : -EINVAL;
	return out_secret_list(r, rows, n, ret_list, ret_count);
}

SPACE_API void space_secret_info_list_free(struct space_secret_info **list)
{
	OUT_LIST_FREE(list);
}

SPACE_API int space_pool_get_info(space_ctx *ctx, struct space_pool_info **ret_info)
{
	CTX_ENTER(ctx);
	struct pool_info p;
	int r = ret_info ? core_pool_get_info(ctx, &p) : -EINVAL;
	return OUT_ONE(r, ret_info, out_pool, &p);
}

SPACE_API void space_pool_info_free(struct space_pool_info *info)
{
	free(info);
}

/* ---- records --------------------------------------------------------------------------------------- */

/* The end of a record's last field in its first version: the least size a caller's record may have. */
#define RECORD_V1_END(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* 0 when the caller's record (whose first field is its uint32_t size) reaches v1_end. */
static int record_check(space_ctx *ctx, const void *rec, size_t v1_end, const char *type, const char *init)
{
	uint32_t size;
	memcpy(&size, rec, sizeof(size));
	if (size >= v1_end)
		return 0;
	if (!ctx)
		return -EINVAL;
	return ctx_error_msg(ctx, -EINVAL, "struct %s.size is %u: set it to sizeof(struct %s) before the call (%s)",
			     type, size, type, init);
}

/* Writes the library's full record src (full bytes) into the caller's dst, at most dst's size bytes, and
 * sets dst's size to what was written: a caller built against an older header has a smaller struct. */
static void record_put(void *dst, const void *src, size_t full)
{
	uint32_t size;
	memcpy(&size, dst, sizeof(size));
	uint32_t n = size < full ? size : (uint32_t)full;
	memcpy(dst, src, n);
	memcpy(dst, &n, sizeof(n));
}

#define EXEC_RESULT_CHECK(ctx, rec)                                                                        \
	record_check(ctx, rec, RECORD_V1_END(struct space_exec_result, oom_killed), "space_exec_result",    \
		     "SPACE_EXEC_RESULT_INIT")
#define FILE_STAT_CHECK(ctx, rec)                                                                          \
	record_check(ctx, rec, RECORD_V1_END(struct space_file_stat, mtime_ns), "space_file_stat",          \
		     "SPACE_FILE_STAT_INIT")
#define POLICY_CHECK(ctx, rec)                                                                             \
	record_check(ctx, rec, RECORD_V1_END(struct space_snapshot_policy, pid), "space_snapshot_policy",   \
		     "SPACE_SNAPSHOT_POLICY_INIT")

SPACE_API int space_sandbox_exec(space_sandbox *sb, const struct space_exec_options *opts,
				 struct space_exec_result *ret_result)
{
	space_ctx *ctx = sb ? sandbox_ctx(sb) : NULL;
	CTX_ENTER(ctx);
	if (!sb)
		return -EINVAL;
	/* Refused before the process runs: a result that cannot be returned must not cost a run. */
	int r = ret_result ? EXEC_RESULT_CHECK(ctx, ret_result) : 0;
	struct space_exec_result res = { 0 };
	if (r == 0 && (r = core_sandbox_exec(sb, opts, &res)) == 0 && ret_result)
		record_put(ret_result, &res, sizeof(res));
	return r;
}

SPACE_API int space_process_pump(space_process *p, struct space_exec_result *ret_result)
{
	space_ctx *ctx = p ? process_ctx(p) : NULL;
	CTX_ENTER(ctx);
	if (!p)
		return -EINVAL;
	struct space_exec_result res = { 0 };
	int r = ret_result ? EXEC_RESULT_CHECK(ctx, ret_result) : 0;
	if (r == 0 && (r = core_process_pump(p, &res)) == 1 && ret_result)
		record_put(ret_result, &res, sizeof(res));
	return r;
}

SPACE_API int space_sandbox_exec_step(space_sandbox *sb, const struct space_exec_options *opts, unsigned flags,
				      struct space_exec_result *ret_result,
				      char ret_rolled_back[SPACE_CHECKPOINT_ID_MAX])
{
	space_ctx *ctx = sb ? sandbox_ctx(sb) : NULL;
	CTX_ENTER(ctx);
	if (!sb || !ret_result)
		return -EINVAL;
	struct space_exec_result res = { 0 };
	int r = EXEC_RESULT_CHECK(ctx, ret_result);
	if (r == 0 && (r = core_sandbox_exec_step(sb, opts, flags, &res, ret_rolled_back)) == 0)
		record_put(ret_result, &res, sizeof(res));
	return r;
}

SPACE_API int space_sandbox_stat(space_sandbox *sb, const char *path, struct space_file_stat *ret_stat)
{
	space_ctx *ctx = sb ? sandbox_ctx(sb) : NULL;
	CTX_ENTER(ctx);
	if (!sb || !ret_stat)
		return -EINVAL;
	struct space_file_stat st = { 0 };
	int r = FILE_STAT_CHECK(ctx, ret_stat);
	if (r == 0 && (r = core_sandbox_stat(sb, path, &st)) == 0)
		record_put(ret_stat, &st, sizeof(st));
	return r;
}

SPACE_API int space_sandbox_get_usage(space_sandbox *sb, struct space_sandbox_usage *ret_usage)
{
	space_ctx *ctx = sb ? sandbox_ctx(sb) : NULL;
	CTX_ENTER(ctx);
	if (!sb || !ret_usage)
		return -EINVAL;
	struct space_sandbox_usage u = { 0 };
	int r = record_check(ctx, ret_usage, RECORD_V1_END(struct space_sandbox_usage, time_ms), "space_sandbox_usage",
			     "SPACE_SANDBOX_USAGE_INIT");
	if (r == 0 && (r = core_sandbox_get_usage(sb, &u)) == 0)
		record_put(ret_usage, &u, sizeof(u));
	return r;
}

SPACE_API int space_sandbox_read_file_v2(space_sandbox *sb, const char *path, int dst_fd,
					 const struct space_read_options *opts, struct space_file_stat *ret_stat)
{
	space_ctx *ctx = sb ? sandbox_ctx(sb) : NULL;
	CTX_ENTER(ctx);
	if (!sb)
		return -EINVAL;
	/* Checked first: the read writes into dst_fd, which a refusal afterwards could not take back. */
	int r = ret_stat ? FILE_STAT_CHECK(ctx, ret_stat) : 0;
	struct space_file_stat st = { 0 };
	if (r == 0 && (r = core_sandbox_read_file(sb, path, dst_fd, opts, &st)) == 0 && ret_stat)
		record_put(ret_stat, &st, sizeof(st));
	return r;
}

SPACE_API int space_template_get_warm_info(space_ctx *ctx, const char *name, struct space_template_warm_info *ret_info)
{
	CTX_ENTER(ctx);
	if (!ret_info)
		return -EINVAL;
	struct space_template_warm_info w = { 0 };
	int r = record_check(ctx, ret_info, RECORD_V1_END(struct space_template_warm_info, warm_pool_ready),
			     "space_template_warm_info", "SPACE_TEMPLATE_WARM_INFO_INIT");
	if (r == 0 && (r = core_template_get_warm_info(ctx, name, &w)) == 0)
		record_put(ret_info, &w, sizeof(w));
	return r;
}

SPACE_API int space_sandbox_get_snapshot_policy(space_ctx *ctx, const char *id, struct space_snapshot_policy *ret)
{
	CTX_ENTER(ctx);
	if (!ret)
		return -EINVAL;
	struct space_snapshot_policy p = { 0 };
	int r = POLICY_CHECK(ctx, ret);
	if (r == 0 && (r = core_sandbox_get_snapshot_policy(ctx, id, &p)) == 0)
		record_put(ret, &p, sizeof(p));
	return r;
}

SPACE_API int space_template_get_snapshot_policy(space_ctx *ctx, const char *name, struct space_snapshot_policy *ret)
{
	CTX_ENTER(ctx);
	if (!ret)
		return -EINVAL;
	struct space_snapshot_policy p = { 0 };
	int r = POLICY_CHECK(ctx, ret);
	if (r == 0 && (r = core_template_get_snapshot_policy(ctx, name, &p)) == 0)
		record_put(ret, &p, sizeof(p));
	return r;
}
