/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox lifecycle: creating -> running -> stopped/failed -> destroyed, each change one transaction.
 * Everything here is shared by the isolation modes, which it reaches only through the back-end ops table
 * (core/backend.h). This file owns rows (load, update, mark), handles, open, info, destroy and reaping;
 * sandbox_create.c owns creation, sandbox_restart.c the restart on another disk (rollback).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/backend.h"
#include "core/internal.h"
#include "core/logcap.h"
#include "core/sandbox.h"
#include "core/uids.h"
#include "net/net.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/loop.h"
#include "util/util.h"

void sandbox_death_reason(space_ctx *ctx, const struct space_sandbox_info *b, char *buf, size_t len)
{
	const struct backend_ops *ops = backend_for_info(b);
	if (!ops) {
		snprintf(buf, len, "sandbox process exited unexpectedly");
		return;
	}
	ops->death_reason(ctx, b, buf, len);
}

/* ---- rows ------------------------------------------------------------------------------------------ */

int sandbox_row_load(space_ctx *ctx, const char *id, struct sandbox_row *row)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	char sql[1024];
	snprintf(sql, sizeof(sql), "%s WHERE id = ?", core_sandbox_select());
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memset(row, 0, sizeof(*row));
		core_sandbox_row(st, &row->info, &row->pid_start);
		snprintf(row->runtime_dir, sizeof(row->runtime_dir), "%s", (const char *)sqlite3_column_text(st, 13));
		const char *cg = (const char *)sqlite3_column_text(st, 14);
		snprintf(row->cgroup, sizeof(row->cgroup), "%s", cg ? cg : "");
		const char *meta = (const char *)sqlite3_column_text(st, 15);
		row->metadata = meta ? strdup(meta) : NULL;
		row->host_uid = (uint32_t)sqlite3_column_int64(st, 16); /* uid slot (core/uids.h) */
		if (row->metadata) {
			cJSON *j = cJSON_Parse(row->metadata);
			cJSON *ub = cJSON_GetObjectItemCaseSensitive(j, "uid_base");
			if (cJSON_IsNumber(ub))
				row->uid_base = (uint32_t)ub->valuedouble;
			cJSON_Delete(j);
		}
		/* A row of an isolation this build does not know is refused, never taken for one it knows. */
		const struct backend_ops *ops;
		if ((r = backend_for_row(ctx, row, &ops)) < 0)
			sandbox_row_clear(row);
	} else if (rc == SQLITE_DONE) {
		r = ctx_error_msg(ctx, -ENOENT, "no sandbox %s (see `space ls`)", id);
	} else {
		r = ctx_error(ctx, store_errno(rc), "store: %s", store_errmsg(s));
	}
	sqlite3_finalize(st);
	return r;
}

void sandbox_row_clear(struct sandbox_row *row)
{
	free(row->metadata);
	row->metadata = NULL;
}

int sandbox_row_update(space_ctx *ctx, const char *id, const char *sql_set, const char *event, const char *detail,
		      int (*bind)(sqlite3_stmt *st, void *ud), void *ud)
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	char sql[512];
	snprintf(sql, sizeof(sql), "UPDATE sandboxes SET %s, updated_ms = ?1 WHERE id = ?2", sql_set);
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r == 0) {
		sqlite3_bind_int64(st, 1, util_wall_ms());
		sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
		if (bind)
			r = bind(st, ud);
		if (r == 0)
			r = store_errno(sqlite3_step(st));
		sqlite3_finalize(st);
	}
	return ctx_store_finish(ctx, s, r, id, event, detail);
}

struct mark_bind {
	const char *status;
	const char *reason;
};

static int bind_mark(sqlite3_stmt *st, void *ud)
{
	const struct mark_bind *m = ud;
	if (m->reason && *m->reason)
		sqlite3_bind_text(st, 3, m->reason, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, m->status, -1, SQLITE_STATIC);
	return 0;
}

int sandbox_mark(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason)
{
	struct mark_bind m = { space_sandbox_status_name(status), reason };
	return sandbox_row_update(ctx, id, "status = ?4, reason = ?3", m.status, reason, bind_mark, &m);
}

/* ---- handles --------------------------------------------------------------------------------------- */

struct space_sandbox {
	space_ctx *ctx;
	struct sandbox_row row;
	char addr[PATH_MAX + 16];    /* agent address for the client */
	char log_path[PATH_MAX];
	char **env;                  /* sandbox-wide environment, NULL-terminated */
};

void sandbox_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

char **sandbox_env_parse(const char *meta)
{
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	cJSON *env = cJSON_GetObjectItemCaseSensitive(j, "env");
	int n = cJSON_IsArray(env) ? cJSON_GetArraySize(env) : 0;
	char **v = calloc((size_t)n + 1, sizeof(char *));
	int k = 0;
	cJSON *e;
	if (v) {
		cJSON_ArrayForEach(e, env) {
			if (cJSON_IsString(e) && k < n && (v[k] = strdup(e->valuestring)))
				k++;
		}
	}
	cJSON_Delete(j);
	return v;
}

int sandbox_handle_new(space_ctx *ctx, struct sandbox_row *row, space_sandbox **ret)
{
	const struct backend_ops *ops;
	int r = backend_for_row(ctx, row, &ops);
	if (r < 0)
		return r;
	space_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	sb->ctx = ctx;
	sb->row = *row;
	row->metadata = NULL; /* moved */
	ops->agent_addr(sb->row.runtime_dir, sb->addr, sizeof(sb->addr));
	snprintf(sb->log_path, sizeof(sb->log_path), "%s/sandbox.log", sb->row.runtime_dir);
	sb->env = sandbox_env_parse(sb->row.metadata);
	if (!sb->env) {
		sandbox_row_clear(&sb->row);
		free(sb);
		return -ENOMEM;
	}
	*ret = sb;
	return 0;
}

void sandbox_handle_set_row(space_sandbox *sb, struct sandbox_row *row)
{
	sandbox_row_clear(&sb->row);
	sb->row = *row;
	row->metadata = NULL; /* moved */
}

SPACE_API void space_sandbox_free(space_sandbox *sb)
{
	if (!sb)
		return;
	sandbox_row_clear(&sb->row);
	sandbox_strv_free(sb->env);
	free(sb);
}

SPACE_API const char *space_sandbox_id(const space_sandbox *sb)
{
	return sb->row.info.id;
}

SPACE_API const char *space_sandbox_log_path(const space_sandbox *sb)
{
	return sb->log_path;
}

const char *sandbox_addr(const space_sandbox *sb)
{
	return sb->addr;
}

space_ctx *sandbox_ctx(const space_sandbox *sb)
{
	return sb->ctx;
}

char *const *sandbox_env(const space_sandbox *sb)
{
	return sb->env;
}

int sandbox_release_disk(space_ctx *ctx, const struct sandbox_row *row)
{
	/* The jail's loop device goes only after the kernel tears down its mount namespace: wait for it,
	 * so a pool unmount or template removal right after a destroy does not find the image busy. */
	char image[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", row->info.path);
	if (util_loop_wait_released(image, SANDBOX_KILL_TIMEOUT_MS) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "loop device of %s still attached", image);
	int r = store_btrfs_subvolume_delete(row->info.path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", row->info.path);
	if (row->runtime_dir[0]) {
		r = util_rm_rf(row->runtime_dir);
		if (r < 0)
			return ctx_error(ctx, r, "remove %s", row->runtime_dir);
	}
	return 0;
}


/* ---- open, info, destroy ------------------------------------------------------------------------ */

/* Loaded rows have a known isolation (sandbox_row_load); a row without one is taken for dead. */
static bool row_alive(space_ctx *ctx, const struct sandbox_row *row)
{
	const struct backend_ops *ops;
	return backend_for_row(ctx, row, &ops) == 0 && ops->alive(row);
}

SPACE_API int space_sandbox_open(space_ctx *ctx, const char *id, space_sandbox **ret)
{
	if (!ctx || !id || !ret)
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	if (row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED) {
		r = ctx_error_msg(ctx, -ESRCH, "sandbox %s is %s%s%s", id, space_sandbox_status_name(row.info.status),
				  row.info.reason[0] ? ": " : "", row.info.reason);
		sandbox_row_clear(&row);
		return r;
	}
	if (!row_alive(ctx, &row)) {
		char why[sizeof(row.info.reason)];
		sandbox_death_reason(ctx, &row.info, why, sizeof(why));
		(void)sandbox_mark(ctx, id, SPACE_SANDBOX_FAILED, why);
		sandbox_row_clear(&row);
		return ctx_error_msg(ctx, -ESRCH, "sandbox %s has died (%s); `space rm %s` cleans up", id, why, id);
	}
	r = sandbox_handle_new(ctx, &row, ret);
	if (r < 0)
		sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_get_info(space_sandbox *sb, struct space_sandbox_info *ret)
{
	struct sandbox_row row;
	int r = sandbox_row_load(sb->ctx, sb->row.info.id, &row);
	if (r < 0)
		return r;
	if ((row.info.status == SPACE_SANDBOX_RUNNING || row.info.status == SPACE_SANDBOX_PAUSED) &&
	    !row_alive(sb->ctx, &row)) {
		char why[sizeof(row.info.reason)];
		sandbox_death_reason(sb->ctx, &row.info, why, sizeof(why));
		if (sandbox_mark(sb->ctx, row.info.id, SPACE_SANDBOX_FAILED, why) == 0) {
			row.info.status = SPACE_SANDBOX_FAILED;
			snprintf(row.info.reason, sizeof(row.info.reason), "%s", why);
		}
	}
	*ret = row.info;
	sandbox_row_clear(&row);
	return 0;
}

/* keep_events: its rows in the event log stay (space_sandbox_remove_v2), else they go with it. */
static int destroy_row(space_ctx *ctx, struct sandbox_row *row, const char *reason, bool keep_events)
{
	if (row->info.status == SPACE_SANDBOX_DESTROYED)
		return 0;
	const struct backend_ops *ops;
	int r = backend_for_row(ctx, row, &ops);
	if (r < 0)
		return r;
	/* A creation still in progress in a live process is not ours to tear down. */
	if (row->info.status == SPACE_SANDBOX_CREATING && row->info.pid != getpid() && ops->alive(row))
		return ctx_error_msg(ctx, -EBUSY, "sandbox %s is being created by process %d", row->info.id,
				     row->info.pid);
	/* Its snapshot helper first: a snapshot in progress finishes before the sandbox stops. */
	autosnap_destroying(ctx, row->info.id, row->metadata);
	/* A creation whose creator died may have left its back-end's process running (a VMM): stop asks it
	 * to stop. */
	if (row->info.status != SPACE_SANDBOX_CREATING || ops->stop_while_creating) {
		r = ops->stop(ctx, row);
		if (r < 0)
			return r;
	}
	(void)net_sandbox_detach(ctx, row->info.id); /* egress gateway */
	r = sandbox_release_disk(ctx, row);
	if (r < 0) {
		(void)sandbox_mark(ctx, row->info.id, SPACE_SANDBOX_FAILED, ctx->last_error);
		return r;
	}
	r = sandbox_mark(ctx, row->info.id, SPACE_SANDBOX_DESTROYED, reason);
	if (r == 0) {
		uids_release(ctx, row); /* nothing of it runs any more */
		logcap_release(ctx, row->info.id);
	}
	/* Nothing kept unless asked: its event log rows go too (the gateway's were collected on detach). */
	if (r == 0 && !keep_events) {
		int e = store_events_remove(ctx->store, row->info.id);
		if (e < 0)
			return ctx_error(ctx, e, "remove the events of %s: %s", row->info.id, store_errmsg(ctx->store));
	}
	return r;
}

SPACE_API int space_sandbox_destroy(space_sandbox *sb)
{
	if (!sb)
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(sb->ctx, sb->row.info.id, &row);
	if (r < 0)
		return r;
	r = destroy_row(sb->ctx, &row, NULL, false);
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_remove(space_ctx *ctx, const char *id)
{
	return space_sandbox_remove_v2(ctx, id, 0);
}

SPACE_API int space_sandbox_remove_v2(space_ctx *ctx, const char *id, unsigned flags)
{
	if (!ctx || !id || (flags & ~SPACE_REMOVE_KEEP_EVENTS))
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	if (row.info.status == SPACE_SANDBOX_DESTROYED) {
		sandbox_row_clear(&row);
		return ctx_error_msg(ctx, -ENOENT, "sandbox %s is already destroyed", id);
	}
	r = destroy_row(ctx, &row, NULL, flags & SPACE_REMOVE_KEEP_EVENTS);
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_reap(space_ctx *ctx)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s),
					   "SELECT id FROM sandboxes WHERE status != 'destroyed' AND expires_ms > 0"
					   " AND expires_ms <= ?",
					   -1, &st, NULL));
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	sqlite3_bind_int64(st, 1, util_wall_ms());
	char ids[64][32];
	int n = 0;
	while (n < 64 && sqlite3_step(st) == SQLITE_ROW)
		snprintf(ids[n++], sizeof(ids[0]), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	/* The gateways' spooled events join the event log (net.h): listings and `space serve` reap. */
	net_events_ingest_all(ctx);
	/* Sandboxes whose process is gone are recorded failed here, not by a listing (which writes nothing). */
	(void)core_sandbox_reap_dead(ctx);
	int done = 0;
	for (int i = 0; i < n; i++) {
		struct sandbox_row row;
		if (sandbox_row_load(ctx, ids[i], &row) < 0)
			continue;
		if (destroy_row(ctx, &row, "lifetime expired", false) == 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s destroyed: lifetime expired", ids[i]);
			done++;
		}
		sandbox_row_clear(&row);
	}
	return done;
}

SPACE_API int space_sandbox_read_log(space_ctx *ctx, const char *id, int dst_fd)
{
	if (!ctx || !id || dst_fd < 0)
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	/* sandbox.log.1 (the older half, once the log has been rotated) then sandbox.log. */
	r = logcap_read(ctx, row.runtime_dir, dst_fd);
	sandbox_row_clear(&row);
	return r;
}
