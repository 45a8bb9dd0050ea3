/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pause/resume, checkpoints, rollback and fork, through the sandbox's back-end (core/backend.h).
 *
 * A vm checkpoint (kind "full") is a read-only btrfs snapshot of the sandbox's subvolume taken while the VM
 * is paused, after space-vmm saved the VM's memory, vCPU and device state into vmstate.snap in that
 * subvolume (plus vmstate.json: its vCPUs and RAM). The disk image and the memory in the snapshot are
 * of the same instant. Rollback and fork restore it (src/core/vm_backend.c): the new space-vmm maps
 * guest RAM MAP_PRIVATE from the checkpoint's file, so forks share every page none of them wrote.
 *
 * A jail checkpoint is a read-only btrfs snapshot of the sandbox's subvolume (which holds rootfs.ext4),
 * taken with the jail's processes frozen (cgroup freezer) and its ext4 filesystem frozen (FIFREEZE on the
 * jail's root, reached through /proc/PID/root), so the image in the snapshot is clean. Memory is not
 * saved: rollback and fork start fresh processes on the snapshot's disk.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "core/backend.h"
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/util.h"

#define FORK_MAX 64

/* Loads the row of a handle and its back-end, and checks that it is a live sandbox (running or paused). */
static int load_live_row(space_sandbox *sb, const char *what, struct sandbox_row *row,
			 const struct backend_ops **ret_ops)
{
	space_ctx *ctx = sandbox_ctx(sb);
	int r = sandbox_row_load(ctx, space_sandbox_id(sb), row);
	if (r < 0)
		return r;
	r = backend_for_row(ctx, row, ret_ops);
	if (r == 0 && row->info.status != SPACE_SANDBOX_RUNNING && row->info.status != SPACE_SANDBOX_PAUSED)
		r = ctx_error_msg(ctx, -ESRCH, "cannot %s sandbox %s: it is %s", what, row->info.id,
				  space_sandbox_status_name(row->info.status));
	else if (r == 0 && !(*ret_ops)->alive(row))
		r = ctx_error_msg(ctx, -ESRCH, "cannot %s sandbox %s: it has died (its process %d is gone)", what,
				  row->info.id, row->info.pid);
	if (r < 0)
		sandbox_row_clear(row);
	return r;
}

/* ---- pause / resume -------------------------------------------------------------------------------- */

static int set_paused(space_sandbox *sb, bool pause)
{
	space_ctx *ctx = sandbox_ctx(sb);
	struct sandbox_row row;
	const struct backend_ops *ops;
	int r = load_live_row(sb, pause ? "pause" : "resume", &row, &ops);
	if (r < 0)
		return r;
	enum space_sandbox_status want = pause ? SPACE_SANDBOX_PAUSED : SPACE_SANDBOX_RUNNING;
	if (row.info.status != want) {
		r = ops->pause(ctx, &row, pause);
		if (r == 0 && (r = core_sandbox_set_status(ctx, row.info.id, want, NULL)) < 0)
			ctx_error(ctx, r, "store");
	}
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_pause(space_sandbox *sb)
{
	return sb ? set_paused(sb, true) : -EINVAL;
}

SPACE_API int space_sandbox_resume(space_sandbox *sb)
{
	return sb ? set_paused(sb, false) : -EINVAL;
}

int sandbox_usable(space_sandbox *sb)
{
	struct space_sandbox_info info;
	int r = space_sandbox_get_info(sb, &info);
	if (r < 0)
		return r;
	if (info.status == SPACE_SANDBOX_PAUSED)
		return ctx_error_msg(sandbox_ctx(sb), -EBUSY, "sandbox %s is paused: `space resume %s` first", info.id,
				     info.id);
	if (info.status != SPACE_SANDBOX_RUNNING)
		return ctx_error_msg(sandbox_ctx(sb), -ESRCH, "sandbox %s is %s%s%s", info.id,
				     space_sandbox_status_name(info.status), info.reason[0] ? ": " : "", info.reason);
	return 0;
}

/* ---- rows ------------------------------------------------------------------------------------------ */

#define CP_SELECT "SELECT id, sandbox_id, template, coalesce(name, ''), kind, path, created_ms FROM checkpoints"

static void cp_row(sqlite3_stmt *st, struct space_checkpoint_info *c)
{
	memset(c, 0, sizeof(*c));
	const char *f[6];
	for (int i = 0; i < 6; i++) {
		f[i] = (const char *)sqlite3_column_text(st, i);
		if (!f[i])
			f[i] = "";
	}
	snprintf(c->id, sizeof(c->id), "%s", f[0]);
	snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", f[1]);
	snprintf(c->template_name, sizeof(c->template_name), "%s", f[2]);
	snprintf(c->name, sizeof(c->name), "%s", f[3]);
	snprintf(c->kind, sizeof(c->kind), "%s", f[4]);
	snprintf(c->path, sizeof(c->path), "%s", f[5]);
	c->created_ms = sqlite3_column_int64(st, 6);
}

/* Checkpoints matching "WHERE <col> = arg" (all when col is NULL), oldest first. */
static int cp_query(space_ctx *ctx, const char *col, const char *arg, struct space_checkpoint_info **ret_list,
		    size_t *ret_count)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	char sql[256];
	snprintf(sql, sizeof(sql), CP_SELECT "%s%s%s ORDER BY created_ms, rowid", col ? " WHERE " : "",
		 col ? col : "", col ? " = ?" : "");
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	if (col)
		sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
	struct space_checkpoint_info *list = NULL;
	size_t n = 0, cap = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct space_checkpoint_info *nl = realloc(list, ncap * sizeof(*list));
			if (!nl) {
				r = -ENOMEM;
				break;
			}
			list = nl;
			cap = ncap;
		}
		cp_row(st, &list[n++]);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = ctx_error(ctx, store_errno(rc), "store: %s", store_errmsg(s));
	sqlite3_finalize(st);
	if (r < 0) {
		free(list);
		return r;
	}
	*ret_list = list;
	*ret_count = n;
	return 0;
}

SPACE_API int space_checkpoint_list(space_ctx *ctx, const char *sandbox_id, struct space_checkpoint_info **ret_list,
				    size_t *ret_count)
{
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	return cp_query(ctx, sandbox_id ? "sandbox_id" : NULL, sandbox_id, ret_list, ret_count);
}

SPACE_API int space_checkpoint_get(space_ctx *ctx, const char *id, struct space_checkpoint_info *ret_info)
{
	if (!ctx || !id || !ret_info)
		return -EINVAL;
	struct space_checkpoint_info *list;
	size_t n;
	int r = cp_query(ctx, "id", id, &list, &n);
	if (r < 0)
		return r;
	if (n == 0)
		r = ctx_error_msg(ctx, -ENOENT, "no checkpoint %s (see `space checkpoints`)", id);
	else
		*ret_info = list[0];
	free(list);
	return r;
}

/* Runs sql (binding id as ?1 and the rest of the columns when c is given) plus an event, in one transaction. */
static int cp_write(space_ctx *ctx, const char *sql, const struct space_checkpoint_info *c, const char *event)
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r == 0) {
		sqlite3_bind_text(st, 1, c->id, -1, SQLITE_STATIC);
		if (sqlite3_bind_parameter_count(st) > 1) {
			sqlite3_bind_text(st, 2, c->sandbox_id, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 3, c->template_name, -1, SQLITE_STATIC);
			if (c->name[0])
				sqlite3_bind_text(st, 4, c->name, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 5, c->kind, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 6, c->path, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 7, c->created_ms);
		}
		r = store_errno(sqlite3_step(st));
		sqlite3_finalize(st);
	}
	return ctx_store_finish(ctx, s, r, c->sandbox_id, event, c->id);
}

/* ---- create / remove ------------------------------------------------------------------------------- */

/* Snapshots the sandbox's subvolume with its jail's root filesystem frozen (if it can be reached). */
static int snapshot_frozen_fs(space_ctx *ctx, const struct sandbox_row *row, const char *dst)
{
	char proot[64];
	snprintf(proot, sizeof(proot), "/proc/%d/root", row->info.pid);
	_cleanup_close_ int fd = open(proot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool fs_frozen = false;
	if (fd >= 0) {
		if (ioctl(fd, FIFREEZE, 0) == 0)
			fs_frozen = true;
		else if (syncfs(fd) < 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "sync of sandbox %s: %s", row->info.id, strerror(errno));
	}
	int r = store_btrfs_snapshot(row->info.path, dst, true);
	if (fs_frozen && ioctl(fd, FITHAW, 0) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "thaw filesystem of sandbox %s: %s", row->info.id, strerror(errno));
	return r < 0 ? ctx_error(ctx, r, "snapshot %s", row->info.path) : 0;
}

/*
 * A checkpoint with memory (a back-end with snapshot: the vm): pause, save the state into the sandbox's
 * subvolume, snapshot the subvolume read-only at c->path, take the state files out of the live subvolume
 * again, resume. Whatever fails, the sandbox runs on as before (paused if it was).
 */
static int checkpoint_full(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row,
			   struct space_checkpoint_info *c)
{
	snprintf(c->kind, sizeof(c->kind), "%s", ops->checkpoint_kind);
	bool running = row->info.status == SPACE_SANDBOX_RUNNING;
	int r = running ? ops->pause(ctx, row, true) : 0;
	if (r < 0)
		return r;
	c->created_ms = util_wall_ms();
	uint64_t t0 = util_now_ns();
	r = ops->snapshot(ctx, row);
	uint64_t t1 = util_now_ns();
	if (r == 0 && (r = store_btrfs_snapshot(row->info.path, c->path, true)) < 0)
		ctx_error(ctx, r, "snapshot %s", row->info.path);
	backend_snapshot_files_drop(row->info.path);
	if (running) {
		int t = ops->pause(ctx, row, false);
		if (t < 0 && r == 0)
			r = t;
	}
	if (r == 0)
		ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: vm state saved in %llu ms, disk snapshot in %llu ms", row->info.id,
			(unsigned long long)((t1 - t0) / 1000000ull),
			(unsigned long long)((util_now_ns() - t1) / 1000000ull));
	return r;
}

SPACE_API int space_checkpoint_create(space_sandbox *sb, const char *name, char ret_id[SPACE_CHECKPOINT_ID_MAX])
{
	if (!sb || !ret_id)
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	if (name && (!*name || strlen(name) >= sizeof(((struct space_checkpoint_info *)0)->name) ||
		     !util_name_valid(name)))
		return ctx_error_msg(ctx, -EINVAL, "invalid checkpoint name '%s'", name);
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	struct space_checkpoint_info c = { .created_ms = 0 };
	r = core_new_id("cp-", c.id, sizeof(c.id));
	if (r < 0)
		return ctx_error(ctx, r, "random id");
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/checkpoints", root);
	r = util_mkdir_p(dir, 0700);
	if (r < 0)
		return ctx_error(ctx, r, "create %s", dir);

	struct sandbox_row row;
	const struct backend_ops *ops;
	r = load_live_row(sb, "checkpoint", &row, &ops);
	if (r < 0)
		return r;
	snprintf(c.sandbox_id, sizeof(c.sandbox_id), "%s", row.info.id);
	snprintf(c.template_name, sizeof(c.template_name), "%s", row.info.template_name);
	snprintf(c.name, sizeof(c.name), "%s", name ? name : "");
	snprintf(c.kind, sizeof(c.kind), "disk");
	snprintf(c.path, sizeof(c.path), "%s/%s", dir, c.id);
	if (ops->snapshot) {
		r = checkpoint_full(ctx, ops, &row, &c);
		goto done;
	}

	/* The disk alone (a jail), taken frozen. */
	bool running = row.info.status == SPACE_SANDBOX_RUNNING;
	if (running) {
		/* Flush what the processes wrote before they stop; the freeze below makes it consistent. */
		struct agent_error aerr = { 0 };
		r = autosnap_sync(ctx, row.info.id, sandbox_addr(sb), &aerr);
		if (r < 0) {
			ctx_error_msg(ctx, r, "sync sandbox %s: %s", row.info.id, aerr.msg[0] ? aerr.msg : space_strerror(r));
			goto out;
		}
		r = ops->pause(ctx, &row, true);
		if (r < 0) {
			ctx_error(ctx, r, "freeze sandbox %s", row.info.id);
			goto out;
		}
	}
	c.created_ms = util_wall_ms();
	r = snapshot_frozen_fs(ctx, &row, c.path);
	if (running) {
		int t = ops->pause(ctx, &row, false);
		if (t < 0 && r == 0)
			r = ctx_error(ctx, t, "thaw sandbox %s", row.info.id);
	}
done:
	if (r == 0)
		r = cp_write(ctx,
			     "INSERT INTO checkpoints(id, sandbox_id, template, name, kind, path, created_ms)"
			     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			     &c, "checkpoint");
	if (r < 0)
		(void)store_btrfs_subvolume_delete(c.path);
	else {
		memcpy(ret_id, c.id, sizeof(c.id));
		ctx_log(ctx, SPACE_LOG_INFO, "checkpoint %s of sandbox %s at %s", c.id, c.sandbox_id, c.path);
	}
out:
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_checkpoint_remove(space_ctx *ctx, const char *id)
{
	struct space_checkpoint_info c;
	int r = space_checkpoint_get(ctx, id, &c);
	if (r < 0)
		return r;
	r = store_btrfs_subvolume_delete(c.path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", c.path);
	return cp_write(ctx, "DELETE FROM checkpoints WHERE id = ?1", &c, "checkpoint-removed");
}

/* ---- rollback / fork ------------------------------------------------------------------------------- */

SPACE_API int space_sandbox_rollback(space_sandbox *sb, const char *checkpoint_id)
{
	if (!sb || !checkpoint_id)
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	struct space_checkpoint_info c;
	int r = space_checkpoint_get(ctx, checkpoint_id, &c);
	if (r < 0)
		return r;
	if (strcmp(c.sandbox_id, space_sandbox_id(sb)))
		return ctx_error_msg(ctx, -EINVAL,
				     "checkpoint %s belongs to sandbox %s, not %s: `space fork %s` starts a new sandbox "
				     "from it",
				     c.id, c.sandbox_id, space_sandbox_id(sb), c.id);
	if (strcmp(c.kind, "disk") && strcmp(c.kind, "full"))
		return ctx_error_msg(ctx, -EOPNOTSUPP, "checkpoint %s is of kind %s, which this build cannot restore",
				     c.id, c.kind);
	struct sandbox_row row;
	const struct backend_ops *ops;
	r = load_live_row(sb, "rollback", &row, &ops);
	if (r < 0)
		return r;
	sandbox_row_clear(&row);
	return sandbox_restart_from(sb, c.path, c.id);
}

SPACE_API int space_checkpoint_fork(space_ctx *ctx, const char *checkpoint_id, uint32_t count,
				    space_sandbox **ret_sandboxes)
{
	if (!ctx || !checkpoint_id || !ret_sandboxes)
		return -EINVAL;
	if (count < 1 || count > FORK_MAX)
		return ctx_error_msg(ctx, -EINVAL, "fork count %u out of range (1..%d)", count, FORK_MAX);
	struct space_checkpoint_info c;
	int r = space_checkpoint_get(ctx, checkpoint_id, &c);
	if (r < 0)
		return r;
	if (strcmp(c.kind, "disk") && strcmp(c.kind, "full"))
		return ctx_error_msg(ctx, -EOPNOTSUPP, "checkpoint %s is of kind %s, which this build cannot fork",
				     c.id, c.kind);
	struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
	o.template_name = c.template_name;
	/* A full checkpoint forks VMs restored from it (its vCPUs and RAM); a disk one the isolation of the
	 * sandbox it was taken of. */
	const struct backend_ops *by_kind = backend_for_checkpoint_kind(c.kind);
	o.isolation = by_kind ? by_kind->name : NULL;
	char **env = NULL, **allow = NULL;
	char iso[16] = "";
	_cleanup_free_ char *policy = NULL;
	struct sandbox_row row;
	if (sandbox_row_load(ctx, c.sandbox_id, &row) == 0) {
		snprintf(iso, sizeof(iso), "%s", row.info.isolation);
		o.isolation = iso;
		o.cpus = row.info.cpus;
		o.memory_mib = row.info.memory_mib;
		env = sandbox_env_parse(row.metadata);
		/* Forks continue the same task: the same egress policy with the same trust (its secrets resolved
		 * again here). */
		cJSON *j = row.metadata ? cJSON_Parse(row.metadata) : NULL;
		const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "network_policy"));
		policy = p ? strdup(p) : NULL;
		r = sandbox_policy_from_meta(j, &o.network_policy_trusted, &allow);
		cJSON_Delete(j);
		sandbox_row_clear(&row);
		if (!env || r < 0) {
			sandbox_strv_free(env);
			return -ENOMEM;
		}
		o.network_allow_resolve = (const char *const *)allow;
		o.env = (const char *const *)env;
		o.network_policy = policy;
	}
	uint32_t made = 0;
	for (; made < count; made++) {
		r = sandbox_create_from(ctx, &o, c.path, &ret_sandboxes[made]);
		if (r < 0)
			break;
		ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s forked from %s", space_sandbox_id(ret_sandboxes[made]), c.id);
	}
	sandbox_strv_free(env);
	sandbox_strv_free(allow);
	if (r < 0) {
		char msg[sizeof(ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", ctx->last_error);
		while (made > 0) {
			made--;
			(void)space_sandbox_destroy(ret_sandboxes[made]);
			space_sandbox_free(ret_sandboxes[made]);
			ret_sandboxes[made] = NULL;
		}
		snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
	}
	return r;
}
