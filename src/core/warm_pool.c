/* SPDX-License-Identifier: Apache-2.0 */
/* The warm pool (warm_pool.h): paused sandboxes made ahead of time, handed out by space_sandbox_create. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/info.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "core/backend.h"
#include "core/trace.h"
#include "core/warm_pool.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/util.h"

#define POOL_SIZE_MAX 64u
#define POOL_IDS_MAX 128
#define TAKE_ATTEMPTS 3

static void pool_key(const char *template_name, char *buf, size_t len)
{
	snprintf(buf, len, "pool_size/%s", template_name);
}

uint32_t warm_pool_size(space_ctx *ctx, const char *template_name)
{
	struct store *s;
	char key[128];
	_cleanup_free_ char *v = NULL;
	uint64_t n;
	pool_key(template_name, key, sizeof(key));
	if (ctx_store(ctx, &s) < 0 || store_meta_get(s, key, &v) < 0 || util_parse_uint(v, 0, POOL_SIZE_MAX, &n) < 0)
		return 0;
	return (uint32_t)n;
}

int warm_pool_forget(space_ctx *ctx, const char *template_name)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	char key[128];
	pool_key(template_name, key, sizeof(key));
	r = store_meta_delete(s, key);
	return r < 0 ? ctx_error(ctx, r, "store: %s", store_errmsg(s)) : 0;
}

/* Ids of the pooled rows of a template (NULL: of all), oldest first; at most max. */
static int pooled_ids(space_ctx *ctx, const char *template_name, char (*ids)[32], int max)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	struct store_sandbox_filter f = { .statuses = STORE_ST_ANY & ~STORE_ST(STORE_DESTROYED), .pooled = true,
					  .pool = template_name, .max = (size_t)max };
	struct store_sandbox *rows = NULL;
	size_t n = 0;
	r = store_sandbox_list(s, &f, &rows, &n);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	for (size_t i = 0; i < n; i++)
		snprintf(ids[i], sizeof(ids[0]), "%s", rows[i].id);
	store_sandbox_list_free(rows, n);
	return (int)n;
}

uint32_t warm_pool_count(space_ctx *ctx, const char *template_name)
{
	char ids[POOL_IDS_MAX][32];
	int n = pooled_ids(ctx, template_name, ids, POOL_IDS_MAX);
	return n > 0 ? (uint32_t)n : 0;
}

int warm_pool_drain(space_ctx *ctx, const char *template_name)
{
	char ids[POOL_IDS_MAX][32];
	int n = pooled_ids(ctx, template_name, ids, POOL_IDS_MAX);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		int r = space_sandbox_remove(ctx, ids[i]);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	return n;
}

/* ---- handing out ----------------------------------------------------------------------------------- */

static bool takes_defaults(const struct space_sandbox_options *o)
{
	return !o->cpus && !o->memory_mib && !o->hostname && !(o->env && o->env[0]) && !o->network_policy;
}

/* Claims the oldest pooled sandbox of (template, isolation): one UPDATE that also clears its pool column.
 * Returns 1 with id filled, 0 if there is none. */
static int claim(space_ctx *ctx, const char *tname, const char *iso, char id[32])
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	int found = store_sandbox_pool_take(s, tname, iso, id, 32);
	if (found <= 0) {
		store_rollback(s);
		return found < 0 ? ctx_error(ctx, found, "store: %s", store_errmsg(s)) : 0;
	}
	r = ctx_store_finish(ctx, s, 0, id, "pool.take", tname);
	return r < 0 ? r : 1;
}

/* The fresh-identity step of a handed-out sandbox: it was paused for a while and may share its RNG state
 * with siblings restored from one snapshot. Its hostname is already its own id. */
static int refresh(space_sandbox *sb)
{
	space_ctx *ctx = sandbox_ctx(sb);
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, space_sandbox_id(sb), &row);
	if (r < 0)
		return r;
	const struct backend_ops *ops;
	if ((r = backend_for_row(ctx, &row, &ops)) == 0)
		r = ops->refresh_identity(ctx, &row, row.info.id, 0); /* a jail: fresh entropy alone */
	sandbox_row_clear(&row);
	return r;
}

int warm_pool_take(space_ctx *ctx, const struct space_sandbox_options *o, space_sandbox **ret)
{
	if (!takes_defaults(o))
		return 0;
	const char *tname = o->template_name ? o->template_name : "base";
	struct store *s;
	if (ctx_store(ctx, &s) < 0)
		return 0;
	/* An isolation we do not know takes nothing: the create that follows refuses it, saying why. */
	const struct backend_ops *ops;
	if ((o->isolation ? backend_by_name(ctx, o->isolation, &ops) : backend_default(ctx, s, &ops)) < 0)
		return 0;
	for (int attempt = 0; attempt < TAKE_ATTEMPTS; attempt++) {
		char id[32];
		struct op_trace trace;
		trace_start(&trace);
		if (claim(ctx, tname, ops->name, id) <= 0)
			return 0;
		trace_mark(&trace, "claim");
		/* Claimed, it is no longer in the pool: nobody else takes it; its lock keeps a destroy by id (or any
		 * other operation) from cutting into its readying. Released before a remove, which takes it. */
		space_sandbox *sb = NULL;
		int lock = -1, r = core_sandbox_lock(ctx, id, &lock);
		trace_mark(&trace, "lock");
		if (r == 0)
			r = space_sandbox_open(ctx, id, &sb);
		trace_mark(&trace, "open");
		if (r == 0)
			r = space_sandbox_resume(sb);
		trace_mark(&trace, "resume");
		if (r == 0)
			r = refresh(sb);
		trace_mark(&trace, "refresh");
		if (r == 0 && o->timeout_s)
			r = space_sandbox_set_timeout(sb, o->timeout_s);
		store_lock_release(lock);
		if (r == 0) {
			char steps[256];
			trace_mark(&trace, "lifetime");
			trace_format(&trace, steps, sizeof(steps));
			ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s handed out from the warm pool of %s", id, tname);
			ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s taken: %s", id, steps);
			sandbox_handle_set_steps(sb, &trace);
			*ret = sb;
			return 1;
		}
		ctx_log(ctx, SPACE_LOG_WARNING, "pooled sandbox %s unusable (%s): removing it", id, ctx->last_error);
		space_sandbox_free(sb);
		(void)space_sandbox_remove(ctx, id);
	}
	return 0;
}

/* ---- sizing and filling ---------------------------------------------------------------------------- */

SPACE_API int space_template_set_warm_pool(space_ctx *ctx, const char *template_name, uint32_t pool_size)
{
	CTX_ENTER(ctx);
	if (!ctx || !template_name)
		return -EINVAL;
	if (pool_size > POOL_SIZE_MAX)
		return ctx_error_msg(ctx, -EINVAL, "pool size %u is above the limit of %u", pool_size, POOL_SIZE_MAX);
	struct template_info t;
	int r = core_template_get(ctx, template_name, &t);
	if (r < 0)
		return r;
	struct store *s = ctx->store;
	char key[128], val[16], detail[96];
	pool_key(template_name, key, sizeof(key));
	snprintf(val, sizeof(val), "%u", pool_size);
	snprintf(detail, sizeof(detail), "%s %u", template_name, pool_size);
	r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	r = pool_size ? store_meta_set(s, key, val) : 0;
	r = ctx_store_finish(ctx, s, r, NULL, "pool.size", detail);
	if (r < 0 || pool_size)
		return r;
	r = warm_pool_forget(ctx, template_name);
	if (r == 0 && (r = warm_pool_drain(ctx, template_name)) > 0)
		r = 0;
	return r;
}

/* Removes a template's dead or surplus pooled sandboxes; returns how many live ones remain. */
static int prune(space_ctx *ctx, const char *tname, uint32_t keep)
{
	char ids[POOL_IDS_MAX][32];
	int n = pooled_ids(ctx, tname, ids, POOL_IDS_MAX);
	if (n < 0)
		return n;
	int live = 0;
	for (int i = 0; i < n; i++) {
		struct sandbox_row row;
		if (sandbox_row_load(ctx, ids[i], &row) < 0)
			continue;
		bool ok = row.info.status == SPACE_SANDBOX_PAUSED && core_process_alive(row.info.pid, row.pid_start);
		sandbox_row_clear(&row);
		if (ok && (uint32_t)live < keep) {
			live++;
			continue;
		}
		int r = space_sandbox_remove(ctx, ids[i]);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	return live;
}

/* Marks a freshly made, paused sandbox as the template's. */
static int mark_pooled(space_ctx *ctx, const char *id, const char *tname)
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	r = store_sandbox_set_pool(s, id, tname);
	return ctx_store_finish(ctx, s, r, id, "pool.fill", tname);
}

/*
 * A pooled sandbox runs one process before it is paused: `sh -c :`, found through PATH as any command is.
 * That reads from its fresh clone what nearly every first command needs (the directories of PATH, the shell,
 * the C library and the dynamic loader), which a clone's page cache never shares with its template's or its
 * siblings': the first command of a sandbox handed out then finds them in memory (7 ms of a 9 ms time to
 * interactive from the pool, measured on a 2-core host, went to these reads). Best effort: a template
 * without a shell is pooled all the same.
 */
static void warm_up(space_sandbox *sb)
{
	static const char *const argv[] = { "sh", "-c", ":", NULL };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	eo.argv = argv;
	eo.timeout_ms = 10000;
	if (space_sandbox_exec(sb, &eo, &res) < 0 || !res.exited || res.exit_code != 0)
		ctx_log(sandbox_ctx(sb), SPACE_LOG_DEBUG, "sandbox %s: warm-up `sh -c :` did not run cleanly (%s)",
			space_sandbox_id(sb), sandbox_ctx(sb)->last_error);
}

static int fill_one_template(space_ctx *ctx, const char *tname, uint32_t size)
{
	int live = prune(ctx, tname, size);
	if (live < 0)
		return live;
	int made = 0;
	for (uint32_t have = (uint32_t)live; have < size; have++) {
		struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
		o.template_name = tname;
		space_sandbox *sb;
		int r = sandbox_create_from(ctx, &o, NULL, &sb);
		if (r == 0)
			r = template_start_or_destroy(ctx, &sb, tname);
		if (r < 0)
			return r;
		warm_up(sb);
		r = space_sandbox_pause(sb);
		if (r == 0)
			r = mark_pooled(ctx, space_sandbox_id(sb), tname);
		if (r < 0) {
			char msg[sizeof(ctx->last_error)];
			snprintf(msg, sizeof(msg), "%s", ctx->last_error);
			(void)space_sandbox_destroy(sb);
			space_sandbox_free(sb);
			snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
			return r;
		}
		space_sandbox_free(sb);
		made++;
	}
	return made;
}

int warm_pool_lock(space_ctx *ctx)
{
	char path[PATH_MAX];
	int r = ctx_state_path(ctx, "pool-fill.lock", path, sizeof(path));
	if (r < 0)
		return r;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return ctx_error(ctx, -errno, "open %s", path);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			r = ctx_error(ctx, -errno, "lock %s", path);
			close(fd);
			return r;
		}
	}
	return fd;
}

SPACE_API int space_warm_pool_fill(space_ctx *ctx, const char *template_name)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	if (template_name) {
		struct template_info t;
		if ((r = core_template_get(ctx, template_name, &t)) < 0)
			return r;
	}
	_cleanup_close_ int lock = warm_pool_lock(ctx);
	if (lock < 0)
		return lock;
	/* Templates with a pool size, and those with pooled sandboxes left over from an older size. */
	_cleanup_free_ struct store_template *names = NULL;
	size_t n = 0;
	if (template_name) {
		if (!(names = calloc(1, sizeof(*names))))
			return -ENOMEM;
		r = store_template_get(ctx->store, template_name, names);
		n = r == 0;
		r = r == -ENOENT ? 0 : r;
	} else {
		r = store_template_list(ctx->store, &names, &n);
	}
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	int made = 0;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		uint32_t size = warm_pool_size(ctx, names[i].name);
		if (!size && !warm_pool_count(ctx, names[i].name))
			continue;
		int k = fill_one_template(ctx, names[i].name, size);
		if (k < 0)
			r = k;
		else
			made += k;
	}
	return r < 0 ? r : made;
}
