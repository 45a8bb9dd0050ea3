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
#include <sys/stat.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/backend.h"
#include "core/internal.h"
#include "core/logcap.h"
#include "core/sandbox.h"
#include "core/trace.h"
#include "core/uids.h"
#include "net/net.h"
#include "store/btrfs.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/loop.h"
#include "util/stop.h"
#include "util/fault.h"
#include "util/util.h"

/* How long the helpers of a destroyed sandbox may take to die (SIGKILL: they go at once unless in D). */
#define HELPERS_STOP_TIMEOUT_MS 10000

void sandbox_death_reason(space_ctx *ctx, const struct sandbox_info *b, char *buf, size_t len)
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
	struct store_sandbox sr = { 0 };
	r = store_sandbox_get(s, id, &sr);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "no sandbox %s (see `space ls`)", id);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	memset(row, 0, sizeof(*row));
	core_sandbox_info(&sr, &row->info);
	row->pid_start = sr.proc.start_time;
	row->uid_base = sr.uid_base; /* its own column (schema 7), no longer metadata */
	row->host_uid = sr.host_uid; /* uid slot (core/uids.h) */
	snprintf(row->runtime_dir, sizeof(row->runtime_dir), "%s", sr.runtime_dir);
	snprintf(row->cgroup, sizeof(row->cgroup), "%s", sr.cgroup);
	row->metadata = TAKE_PTR(sr.metadata);
	store_sandbox_clear(&sr);
	/* A row of an isolation this build does not know is refused, never taken for one it knows. */
	const struct backend_ops *ops;
	if ((r = backend_for_row(ctx, row, &ops)) < 0)
		sandbox_row_clear(row);
	return r;
}

void sandbox_row_clear(struct sandbox_row *row)
{
	free(row->metadata);
	row->metadata = NULL;
}

int sandbox_mark(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason)
{
	/* A compare-and-set along the state machine (store/sandboxes.h): a late "failed" never revives a
	 * destroyed row. */
	return core_sandbox_set_status(ctx, id, status, reason);
}

/* ---- handles --------------------------------------------------------------------------------------- */

struct space_sandbox {
	space_ctx *ctx;
	struct sandbox_row row;
	char addr[PATH_MAX + 16];    /* agent address for the client */
	char log_path[PATH_MAX];
	char **env;                  /* sandbox-wide environment, NULL-terminated */
	struct sandbox_defaults defaults; /* what its template's image gives processes */
	int tether_fd;               /* space_sandbox_tether's connection to the agent; -1: none */
	char steps[256];             /* how this handle's sandbox was made ("" when opened) */
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

void sandbox_defaults_parse(const char *meta, struct sandbox_defaults *ret)
{
	memset(ret, 0, sizeof(*ret));
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "defaults");
	const char *cwd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "cwd"));
	if (cwd && cwd[0] == '/' && strlen(cwd) < sizeof(ret->cwd))
		snprintf(ret->cwd, sizeof(ret->cwd), "%s", cwd);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(d, "uid"), *gid = cJSON_GetObjectItemCaseSensitive(d, "gid");
	if (cJSON_IsNumber(uid) && cJSON_IsNumber(gid) && uid->valuedouble >= 0 && uid->valuedouble < 4294967295.0 &&
	    gid->valuedouble >= 0 && gid->valuedouble < 4294967295.0) {
		ret->uid = (uint32_t)uid->valuedouble;
		ret->gid = (uint32_t)gid->valuedouble;
	}
	cJSON_Delete(j);
}

const struct sandbox_defaults *sandbox_defaults(const space_sandbox *sb)
{
	return &sb->defaults;
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
	sb->tether_fd = -1;
	sb->row = *row;
	row->metadata = NULL; /* moved */
	ops->agent_addr(sb->row.runtime_dir, sb->addr, sizeof(sb->addr));
	snprintf(sb->log_path, sizeof(sb->log_path), "%s/sandbox.log", sb->row.runtime_dir);
	sb->env = sandbox_env_parse(sb->row.metadata);
	sandbox_defaults_parse(sb->row.metadata, &sb->defaults);
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
	sandbox_set_tether_fd(sb, -1); /* a tethered sandbox ends here (core/tether.c) */
	sandbox_row_clear(&sb->row);
	sandbox_strv_free(sb->env);
	free(sb);
}

int sandbox_tether_fd(const space_sandbox *sb)
{
	return sb->tether_fd;
}

void sandbox_set_tether_fd(space_sandbox *sb, int fd)
{
	if (sb->tether_fd >= 0)
		close(sb->tether_fd);
	sb->tether_fd = fd;
}

SPACE_API const char *space_sandbox_id(const space_sandbox *sb)
{
	return sb->row.info.id;
}

void sandbox_handle_set_steps(space_sandbox *sb, const struct op_trace *t)
{
	trace_format(t, sb->steps, sizeof(sb->steps));
}

SPACE_API const char *space_sandbox_create_steps(const space_sandbox *sb)
{
	return sb && sb->steps[0] ? sb->steps : NULL;
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

const struct sandbox_row *sandbox_handle_row(const space_sandbox *sb)
{
	return &sb->row;
}

int sandbox_stop_helpers(space_ctx *ctx, const char *id)
{
	int r = util_stop_helpers(id, HELPERS_STOP_TIMEOUT_MS);
	if (r == -EOPNOTSUPP)
		return 0;
	return r < 0 ? ctx_error(ctx, r, "stop the helpers of sandbox %s", id) : 0;
}

/*
 * A sandbox's disk is the subvolume <pool>/sandboxes/<id>/disk, in a directory of its own: btrfs holds the
 * parent directory's lock while it makes a snapshot (through a transaction commit) and while it deletes
 * one, and opening a directory takes it too, so with one parent shared by all (<pool>/sandboxes/<id>, the
 * layout before) every create and destroy of the host waited for each other's commits. Rows keep their
 * path: a sandbox made before is destroyed where it is.
 */
#define SANDBOX_DISK "disk"

int sandbox_disk_path(const char *pool, const char *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sandboxes/%s/" SANDBOX_DISK, pool, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The directory of its own that holds the disk at path (into dir); false for a disk of the layout before,
 * directly in <pool>/sandboxes. */
static bool disk_own_dir(const char *disk, char *dir, size_t len)
{
	const char *slash = strrchr(disk, '/');
	if (!slash || strcmp(slash + 1, SANDBOX_DISK) || (size_t)(slash - disk) >= len)
		return false;
	memcpy(dir, disk, (size_t)(slash - disk));
	dir[slash - disk] = '\0';
	return true;
}

int sandbox_disk_dir_make(const char *disk)
{
	char dir[PATH_MAX];
	if (!disk_own_dir(disk, dir, sizeof(dir)))
		return -EINVAL;
	return mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

int sandbox_release_disk(space_ctx *ctx, const struct sandbox_row *row)
{
	/* Whatever ran on it is stopped (the back-end's stop waited for a jail's loop device too). */
	int r = store_btrfs_subvolume_delete(row->info.path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", row->info.path);
	char dir[PATH_MAX];
	if (disk_own_dir(row->info.path, dir, sizeof(dir)) && rmdir(dir) < 0 && errno != ENOENT)
		return ctx_error(ctx, -errno, "remove %s", dir);
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
	CTX_ENTER(ctx);
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
		/* Said, not written: recording it failed is space_sandbox_reap's job. */
		char why[sizeof(row.info.reason)];
		sandbox_death_reason(ctx, &row.info, why, sizeof(why));
		sandbox_row_clear(&row);
		return ctx_error_msg(ctx, -ESRCH, "sandbox %s has died (%s); `space rm %s` cleans up", id, why, id);
	}
	r = sandbox_handle_new(ctx, &row, ret);
	if (r < 0)
		sandbox_row_clear(&row);
	return r;
}

int core_sandbox_get_info(space_sandbox *sb, struct sandbox_info *ret)
{
	CTX_ENTER(sb ? sb->ctx : NULL);
	if (!sb || !ret)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(sb->ctx, &s);
	if (r < 0)
		return r;
	struct store_sandbox row = { 0 };
	r = store_sandbox_get(s, sb->row.info.id, &row);
	if (r == -ENOENT)
		return ctx_error_msg(sb->ctx, r, "no sandbox %s (see `space ls`)", sb->row.info.id);
	if (r < 0)
		return ctx_error(sb->ctx, r, "store: %s", store_errmsg(s));
	/* Read-only: a sandbox whose process died reads failed, as the next reap will record it. */
	struct sandbox_info info;
	(void)core_sandbox_observe(sb->ctx, &row, &info);
	store_sandbox_clear(&row);
	*ret = info;
	return 0;
}

/* keep_events: its rows in the event log stay (space_sandbox_remove_v2), else they go with it. keep_disk: a
 * read-only snapshot of its disk, taken there once nothing of it runs and its file system is unmounted. */
static int destroy_row(space_ctx *ctx, struct sandbox_row *row, const char *reason, bool keep_events,
		       const char *keep_disk)
{
	if (row->info.status == SPACE_SANDBOX_DESTROYED) {
		/* Slots a destroy killed right after marking it (before this order) left held, and helpers a
		 * failed creation could not stop. */
		(void)sandbox_stop_helpers(ctx, row->info.id);
		uids_release(ctx, row);
		logcap_release(ctx, row->info.id, logcap_recorded_uid(row->runtime_dir));
		return 0;
	}
	const struct backend_ops *ops;
	int r = backend_for_row(ctx, row, &ops);
	if (r < 0)
		return r;
	/* The caller holds the sandbox's lock (destroy_locked), which a creation holds to its end: a row
	 * still "creating" here is one whose creator died, and whatever it started runs on in the sandbox's
	 * cgroup. The stop ends all of it; nothing is marked destroyed unless it succeeded (a rerun finishes
	 * the job). */
	struct op_trace trace;
	trace_start(&trace);
	r = ops->stop(ctx, row);
	if (r < 0)
		return r;
	/* Its helpers too: when both cgroups are gone, nothing of the sandbox runs. */
	if ((r = sandbox_stop_helpers(ctx, row->info.id)) < 0)
		return r;
	trace_mark(&trace, "stop");
	util_fault_point("destroy", 1);
	(void)net_sandbox_detach(ctx, row->info.id); /* egress gateway */
	trace_mark(&trace, "network");
	util_fault_point("destroy", 2);
	if (keep_disk) {
		char image[PATH_MAX];
		snprintf(image, sizeof(image), "%s/rootfs.ext4", row->info.path);
		/* The jail's mount goes with its namespace, which the kernel tears down after its last process
		 * (the stop waited for it): only then is the file system clean (journal closed) and all of it
		 * written to the file. Checked again here, as a kept disk becomes a template. */
		if (util_loop_wait_released(image, 10000) < 0)
			return ctx_error_msg(ctx, -EBUSY, "the disk of %s is still in use", row->info.id);
		if ((r = store_btrfs_snapshot(row->info.path, keep_disk, true)) < 0)
			return ctx_error(ctx, r, "snapshot the disk of %s into %s", row->info.id, keep_disk);
	}
	/* Read before the runtime directory goes with the disk. */
	uint32_t logcap_uid = logcap_recorded_uid(row->runtime_dir);
	r = sandbox_release_disk(ctx, row);
	trace_mark(&trace, "disk");
	if (r < 0) {
		(void)sandbox_mark(ctx, row->info.id, SPACE_SANDBOX_FAILED, ctx->last_error);
		return r;
	}
	/* Nothing of it runs any more: its uid slots are free, before the row says destroyed (a destroy
	 * killed in between is rerun, and releasing a slot twice is a no-op). */
	util_fault_point("destroy", 3);
	uids_release(ctx, row);
	logcap_release(ctx, row->info.id, logcap_uid);
	trace_mark(&trace, "uids");
	util_fault_point("destroy", 4);
	r = sandbox_mark(ctx, row->info.id, SPACE_SANDBOX_DESTROYED, reason);
	trace_mark(&trace, "row");
	util_fault_point("destroy", 5);
	/* Nothing kept unless asked: its event log rows go too (the gateway's were collected on detach). */
	if (r == 0 && !keep_events) {
		int e = store_events_remove(ctx->store, row->info.id);
		if (e < 0)
			return ctx_error(ctx, e, "remove the events of %s: %s", row->info.id, store_errmsg(ctx->store));
		trace_mark(&trace, "events");
	}
	char steps[256];
	trace_format(&trace, steps, sizeof(steps));
	ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s destroyed: %s", row->info.id, steps);
	return r;
}

/*
 * Destroys sandbox id under its lock (store/lock.h), so no create, restart or checkpoint of it is half-way
 * meanwhile. enoent_if_destroyed: a row already destroyed answers -ENOENT (remove), else 0 (destroy).
 */
static int destroy_locked(space_ctx *ctx, const char *id, const char *reason, bool keep_events,
			  bool enoent_if_destroyed, const char *keep_disk)
{
	/* Its snapshot helper first, before the lock it may be waiting for: a snapshot in progress finishes
	 * before the sandbox stops. */
	struct sandbox_row row = { 0 };
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	if (row.info.status != SPACE_SANDBOX_DESTROYED)
		autosnap_destroying(ctx, id, row.metadata);
	sandbox_row_clear(&row);
	int lock = -1;
	if ((r = core_sandbox_lock(ctx, id, &lock)) < 0)
		return r;
	/* A checkpoint of it that a killed caller left half-made is finished or removed, under the lock. */
	(void)checkpoint_partials_recover(ctx, id);
	r = sandbox_row_load(ctx, id, &row); /* again: what it is now that nobody else acts on it */
	if (r == 0 && row.info.status == SPACE_SANDBOX_DESTROYED && enoent_if_destroyed)
		r = ctx_error_msg(ctx, -ENOENT, "sandbox %s is already destroyed", id);
	else if (r == 0) {
		/* And again under the lock: a helper started while this call waited for it (by the create that
		 * held it, or a reap's sandbox_revive_helpers) would otherwise outlive the sandbox. */
		autosnap_destroying(ctx, id, row.metadata);
		r = destroy_row(ctx, &row, reason, keep_events, keep_disk);
	}
	if (r == 0)
		store_lock_remove(ctx->state_dir, id, lock);
	store_lock_release(lock);
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_destroy(space_sandbox *sb)
{
	CTX_ENTER(sb ? sb->ctx : NULL);
	if (!sb)
		return -EINVAL;
	return destroy_locked(sb->ctx, sb->row.info.id, NULL, false, false, NULL);
}

int sandbox_destroy_keeping_disk(space_sandbox *sb, const char *dst)
{
	return destroy_locked(sb->ctx, sb->row.info.id, NULL, false, false, dst);
}

SPACE_API int space_sandbox_remove(space_ctx *ctx, const char *id)
{
	CTX_ENTER(ctx);
	return space_sandbox_remove_v2(ctx, id, 0);
}

SPACE_API int space_sandbox_remove_v2(space_ctx *ctx, const char *id, unsigned flags)
{
	CTX_ENTER(ctx);
	if (!ctx || !id || (flags & ~(SPACE_REMOVE_KEEP_EVENTS | SPACE_REMOVE_WITH_CHECKPOINTS)))
		return -EINVAL;
	int r = destroy_locked(ctx, id, NULL, flags & SPACE_REMOVE_KEEP_EVENTS, true, NULL);
	/* Its checkpoints after the sandbox (a failed destroy keeps them); a rerun after a failure half-way
	 * (the sandbox gone, some checkpoints left) finishes the job. */
	if ((r == 0 || r == -ENOENT) && (flags & SPACE_REMOVE_WITH_CHECKPOINTS)) {
		int n = checkpoint_remove_all(ctx, id);
		if (n < 0)
			return n;
		if (n > 0)
			r = 0;
	}
	return r;
}

SPACE_API int space_sandbox_reap(space_ctx *ctx)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	/* Past their lifetime (at most 64 a call; the next reap takes the rest). */
	struct store_sandbox_filter f = { .statuses = STORE_ST_ANY & ~STORE_ST(STORE_DESTROYED),
					  .expired_at = util_wall_ms(), .max = 64 };
	struct store_sandbox *rows = NULL;
	size_t nrows = 0;
	r = store_sandbox_list(s, &f, &rows, &nrows);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	char ids[64][32];
	int n = 0;
	for (size_t i = 0; i < nrows && n < 64; i++)
		snprintf(ids[n++], sizeof(ids[0]), "%s", rows[i].id);
	store_sandbox_list_free(rows, nrows);
	/* The gateways' spooled events join the event log (net.h): listings and `space serve` reap. */
	net_events_ingest_all(ctx);
	/* Sandboxes whose process is gone are recorded failed here, not by a listing (which writes nothing). */
	(void)core_sandbox_reap_dead(ctx);
	/* Running ones whose gateway or snapshot helper died get a new one (core/sandbox_revive.c). */
	(void)sandbox_revive_helpers(ctx);
	/* VMs stalled on a full pool are shown paused, "pool full", and running again once it has room. */
	sandbox_sync_pool_full(ctx);
	int done = 0;
	for (int i = 0; i < n; i++) {
		if (destroy_locked(ctx, ids[i], "lifetime expired", false, true, NULL) == 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s destroyed: lifetime expired", ids[i]);
			done++;
		}
	}
	/* Tethered ones whose holder is gone or let go (core/tether.c): their lifetime was the tether's. */
	n = tether_orphans(ctx, ids, 64);
	for (int i = 0; i < n; i++) {
		if (destroy_locked(ctx, ids[i], "its tether ended", false, true, NULL) == 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s destroyed: its tether ended", ids[i]);
			done++;
		}
	}
	return done;
}

SPACE_API int space_sandbox_read_log(space_ctx *ctx, const char *id, int dst_fd)
{
	CTX_ENTER(ctx);
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
