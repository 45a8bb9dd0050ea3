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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "core/backend.h"
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "store/checkpoints.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/freeze_guard.h"
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
	/* A VM stalled on a full pool (core/sandbox_revive.c) goes on by itself once there is room; until
	 * then its VMM can be neither paused nor resumed. */
	if (row.info.status == SPACE_SANDBOX_PAUSED && sandbox_reason_pool_full(row.info.reason) &&
	    (pause || !ops->disk_full || ops->disk_full(row.runtime_dir) != 0)) {
		r = ctx_error_msg(ctx, -ENOSPC, "cannot %s sandbox %s: %s", pause ? "pause" : "resume", row.info.id,
				  row.info.reason);
		sandbox_row_clear(&row);
		return r;
	}
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
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	return sb ? set_paused(sb, true) : -EINVAL;
}

SPACE_API int space_sandbox_resume(space_sandbox *sb)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	return sb ? set_paused(sb, false) : -EINVAL;
}

int sandbox_usable(space_sandbox *sb)
{
	struct sandbox_info info;
	int r = core_sandbox_get_info(sb, &info);
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

static void cp_info(const struct store_checkpoint *c, struct checkpoint_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->id, sizeof(ret->id), "%s", c->id);
	snprintf(ret->sandbox_id, sizeof(ret->sandbox_id), "%s", c->sandbox_id);
	snprintf(ret->template_name, sizeof(ret->template_name), "%s", c->template_name);
	snprintf(ret->name, sizeof(ret->name), "%s", c->name);
	snprintf(ret->kind, sizeof(ret->kind), "%s", c->kind);
	snprintf(ret->path, sizeof(ret->path), "%s", c->path);
	ret->created_ms = c->created_ms;
}

int core_checkpoint_list(space_ctx *ctx, const char *sandbox_id, struct checkpoint_info **ret_list,
			 size_t *ret_count)
{
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	_cleanup_free_ struct store_checkpoint *rows = NULL;
	size_t n = 0;
	r = store_checkpoint_list(s, sandbox_id, &rows, &n);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	struct checkpoint_info *list = n ? calloc(n, sizeof(*list)) : NULL;
	if (n && !list)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		cp_info(&rows[i], &list[i]);
	*ret_list = list;
	*ret_count = n;
	return 0;
}

int core_checkpoint_get(space_ctx *ctx, const char *id, struct checkpoint_info *ret_info)
{
	if (!ctx || !id || !ret_info)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	struct store_checkpoint c;
	r = store_checkpoint_get(s, id, &c);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "no checkpoint %s (see `space checkpoints`)", id);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	cp_info(&c, ret_info);
	return 0;
}

int core_checkpoint_find(space_ctx *ctx, const char *sandbox_id, const char *id_or_name,
			 struct checkpoint_info *ret_info)
{
	if (!ctx || !id_or_name || !*id_or_name || !ret_info)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	struct store_checkpoint c;
	r = store_checkpoint_get(s, id_or_name, &c); /* an id first: a name never hides one */
	if (r == 0) {
		cp_info(&c, ret_info);
		return 0;
	}
	if (r != -ENOENT)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	_cleanup_free_ struct store_checkpoint *rows = NULL;
	size_t n = 0, hits = 0, hit = 0;
	r = store_checkpoint_list(s, sandbox_id, &rows, &n);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	char ids[512] = "";
	for (size_t i = 0; i < n; i++) {
		if (strcmp(rows[i].name, id_or_name))
			continue;
		size_t used = strlen(ids);
		snprintf(ids + used, sizeof(ids) - used, "%s%s%s%s%s", hits ? ", " : "", rows[i].id,
			 sandbox_id ? "" : " (sandbox ", sandbox_id ? "" : rows[i].sandbox_id, sandbox_id ? "" : ")");
		hit = i;
		hits++;
	}
	const char *where = sandbox_id ? sandbox_id : "any sandbox";
	if (hits == 0)
		return ctx_error_msg(ctx, -ENOENT, "no checkpoint with the id or name '%s' in %s (see `space checkpoints%s%s`)",
				     id_or_name, where, sandbox_id ? " " : "", sandbox_id ? sandbox_id : "");
	if (hits > 1)
		return ctx_error_msg(ctx, -EINVAL, "%zu checkpoints of %s are named '%s': %s; give the id", hits, where,
				     id_or_name, ids);
	cp_info(&rows[hit], ret_info);
	return 0;
}

/* Inserts (insert) or deletes the row of c, with its event, in one transaction. */
static int cp_write(space_ctx *ctx, const struct checkpoint_info *c, bool insert)
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	if (insert) {
		struct store_checkpoint row = { .created_ms = c->created_ms };
		snprintf(row.id, sizeof(row.id), "%s", c->id);
		snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", c->sandbox_id);
		snprintf(row.template_name, sizeof(row.template_name), "%s", c->template_name);
		snprintf(row.name, sizeof(row.name), "%s", c->name);
		snprintf(row.kind, sizeof(row.kind), "%s", c->kind);
		snprintf(row.path, sizeof(row.path), "%s", c->path);
		r = store_checkpoint_insert(s, &row);
	} else {
		r = store_checkpoint_delete(s, c->id);
	}
	return ctx_store_finish(ctx, s, r, c->sandbox_id, insert ? "checkpoint" : "checkpoint-removed", c->id);
}

/* Releases the lock of sandbox id (from core_sandbox_lock); the lock file goes too when the sandbox is gone, as its
 * destroy would have removed it (a checkpoint outlives its sandbox). */
static void cp_unlock(space_ctx *ctx, const char *id, int fd)
{
	enum store_status st;
	int r = store_sandbox_status(ctx->store, id, &st);
	if (r == -ENOENT || (r == 0 && st == STORE_DESTROYED))
		store_lock_remove(ctx->state_dir, id, fd);
	store_lock_release(fd);
}

/* ---- create / remove ------------------------------------------------------------------------------- */

#define CP_PARTIAL_PREFIX ".partial-"

/* "<dir>/.partial-<sandbox id>-<checkpoint id>": where a checkpoint is made before its row exists. */
static void cp_partial_path(const char *dir, const char *sandbox_id, const char *cp_id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" CP_PARTIAL_PREFIX "%s-%s", dir, sandbox_id, cp_id);
}

int checkpoint_partials_recover(space_ctx *ctx, const char *sandbox_id)
{
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	char dir[PATH_MAX], prefix[128];
	snprintf(dir, sizeof(dir), "%s/checkpoints", root);
	snprintf(prefix, sizeof(prefix), CP_PARTIAL_PREFIX "%s-", sandbox_id);
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		const char *cp_id = e->d_name + strlen(prefix);
		if (!util_name_valid(cp_id))
			continue;
		char partial[PATH_MAX], final[PATH_MAX];
		cp_partial_path(dir, sandbox_id, cp_id, partial, sizeof(partial));
		snprintf(final, sizeof(final), "%s/%s", dir, cp_id);
		struct store_checkpoint row;
		/* Its row was written: only the rename was left. Else it never was a checkpoint. */
		if (store_checkpoint_get(ctx->store, cp_id, &row) == 0 && !strcmp(row.path, final) &&
		    rename(partial, final) == 0)
			ctx_log(ctx, SPACE_LOG_INFO, "checkpoint %s of sandbox %s completed", cp_id, sandbox_id);
		else if (store_btrfs_subvolume_delete(partial) == 0)
			ctx_log(ctx, SPACE_LOG_INFO, "partial checkpoint %s of sandbox %s removed", cp_id, sandbox_id);
		n++;
	}
	closedir(d);
	return n;
}

/*
 * Snapshots the sandbox's subvolume with its jail's root filesystem (fd: its /proc/PID/root, -1 if it
 * cannot be reached) frozen.
 */
static int snapshot_frozen_fs(space_ctx *ctx, const struct sandbox_row *row, int fd, const char *dst)
{
	bool fs_frozen = false;
	if (fd >= 0) {
		if (ioctl(fd, FIFREEZE, 0) == 0)
			fs_frozen = true;
		else if (syncfs(fd) < 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "sync of sandbox %s: %s", row->info.id, strerror(errno));
	}
	int r = store_btrfs_snapshot(row->info.path, dst, true);
	util_fault_point("checkpoint", 3); /* frozen: the guard's case */
	if (fs_frozen && ioctl(fd, FITHAW, 0) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "thaw filesystem of sandbox %s: %s", row->info.id, strerror(errno));
	return r < 0 ? ctx_error(ctx, r, "snapshot %s", row->info.path) : 0;
}

/*
 * The disk alone (a jail), taken frozen, under a guard that thaws the processes and the file system should
 * we be killed meanwhile (util/freeze_guard.h says what a freeze left behind does).
 */
static int checkpoint_disk(space_ctx *ctx, space_sandbox *sb, const struct backend_ops *ops,
			   const struct sandbox_row *row, struct checkpoint_info *c, const char *partial)
{
	int r;
	bool running = row->info.status == SPACE_SANDBOX_RUNNING;
	char proot[64];
	snprintf(proot, sizeof(proot), "/proc/%d/root", row->info.pid);
	_cleanup_close_ int rootfd = row->info.pid > 0 ? open(proot, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	/* A jail on a directory tree is on the pool's btrfs itself: a freeze would stop every sandbox of the
	 * pool, and the snapshot alone is consistent (btrfs writes the subvolume's pending data into it). */
	struct statfs sf;
	if (rootfd >= 0 && fstatfs(rootfd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC)
		close(TAKE_FD(rootfd));
	if (running) {
		/* Flush what the processes wrote before they stop; the freeze below makes it consistent. */
		struct agent_error aerr = { 0 };
		r = autosnap_sync(ctx, row->info.id, sandbox_addr(sb), &aerr);
		if (r < 0) {
			ctx_error_msg(ctx, r, "sync sandbox %s: %s", row->info.id, aerr.msg[0] ? aerr.msg : space_strerror(r));
			return r;
		}
	}
	/* The guard from here: nothing is frozen before it runs. */
	struct util_freeze_guard guard;
	r = util_freeze_guard_start(&guard, rootfd, running ? row->cgroup : NULL);
	if (r < 0)
		return ctx_error(ctx, r, "start the freeze guard of sandbox %s", row->info.id);
	util_fault_point("checkpoint", 1);
	if (running) {
		r = ops->pause(ctx, row, true);
		if (r < 0) {
			ctx_error(ctx, r, "freeze sandbox %s", row->info.id);
			util_freeze_guard_end(&guard);
			return r;
		}
	}
	util_fault_point("checkpoint", 2);
	c->created_ms = util_wall_ms();
	r = snapshot_frozen_fs(ctx, row, rootfd, partial);
	if (running) {
		int t = ops->pause(ctx, row, false);
		if (t < 0 && r == 0)
			r = ctx_error(ctx, t, "thaw sandbox %s", row->info.id);
	}
	util_freeze_guard_end(&guard);
	return r;
}

/*
 * A checkpoint with memory (a back-end with snapshot: the vm): pause, save the state into the sandbox's
 * subvolume, snapshot the subvolume read-only at c->path, take the state files out of the live subvolume
 * again, resume. Whatever fails, the sandbox runs on as before (paused if it was).
 */
static int checkpoint_full(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row,
			   struct checkpoint_info *c, const char *at)
{
	snprintf(c->kind, sizeof(c->kind), "%s", ops->checkpoint_kind);
	bool running = row->info.status == SPACE_SANDBOX_RUNNING;
	/* A restore resets every connection the snapshot recorded: its tethers are held first, or a rollback
	 * or fork of it would end at once (core/tether.c); a paused agent cannot be asked. */
	bool tethered = tether_recorded(row->metadata);
	char addr[PATH_MAX + 32];
	ops->agent_addr(row->runtime_dir, addr, sizeof(addr));
	if (tethered && !running)
		return ctx_error_msg(ctx, -EBUSY, "sandbox %s is tethered and paused: resume it before a checkpoint",
				     row->info.id);
	int r = tethered ? tether_hold(addr, true) : 0;
	if (r < 0)
		return ctx_error(ctx, r, "hold the tether of sandbox %s for its checkpoint", row->info.id);
	r = running ? ops->pause(ctx, row, true) : 0;
	if (r < 0) {
		if (tethered)
			(void)tether_hold(addr, false);
		return r;
	}
	c->created_ms = util_wall_ms();
	uint64_t t0 = util_now_ns();
	r = ops->snapshot(ctx, row);
	uint64_t t1 = util_now_ns();
	if (r == 0 && (r = store_btrfs_snapshot(row->info.path, at, true)) < 0)
		ctx_error(ctx, r, "snapshot %s", row->info.path);
	backend_snapshot_files_drop(row->info.path);
	if (running) {
		int t = ops->pause(ctx, row, false);
		if (t < 0 && r == 0)
			r = t;
	}
	if (tethered) {
		/* Should this fail, the next reap still ends the sandbox once its holder is gone. */
		int t = tether_hold(addr, false);
		if (t < 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: release its tether after the checkpoint: %s",
				row->info.id, strerror(-t));
	}
	if (r == 0)
		ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: vm state saved in %llu ms, disk snapshot in %llu ms", row->info.id,
			(unsigned long long)((t1 - t0) / 1000000ull),
			(unsigned long long)((util_now_ns() - t1) / 1000000ull));
	return r;
}

static int checkpoint_name_check(space_ctx *ctx, const char *name)
{
	if (name && (!*name || strlen(name) >= sizeof(((struct checkpoint_info *)0)->name) ||
		     !util_name_valid(name)))
		return ctx_error_msg(ctx, -EINVAL, "invalid checkpoint name '%s'", name);
	return 0;
}

SPACE_API int space_checkpoint_create(space_sandbox *sb, const char *name, char ret_id[SPACE_CHECKPOINT_ID_MAX])
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !ret_id)
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	int lock, r = checkpoint_name_check(ctx, name);
	if (r < 0 || (r = core_sandbox_lock(ctx, space_sandbox_id(sb), &lock)) < 0)
		return r;
	r = checkpoint_create_held(sb, name, ret_id);
	store_lock_release(lock);
	return r;
}

int checkpoint_create_held(space_sandbox *sb, const char *name, char ret_id[SPACE_CHECKPOINT_ID_MAX])
{
	space_ctx *ctx = sandbox_ctx(sb);
	const char *root;
	int r = checkpoint_name_check(ctx, name);
	if (r < 0 || (r = ctx_pool(ctx, &root)) < 0)
		return r;
	struct checkpoint_info c = { .created_ms = 0 };
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
	/* Made at its partial name, then its row, then renamed: a crash anywhere leaves what
	 * checkpoint_partials_recover finishes or removes under this lock. */
	char partial[PATH_MAX];
	cp_partial_path(dir, row.info.id, c.id, partial, sizeof(partial));
	(void)checkpoint_partials_recover(ctx, row.info.id);
	if (ops->snapshot) {
		r = checkpoint_full(ctx, ops, &row, &c, partial);
		goto done;
	}

	/* The disk alone (a jail). */
	r = checkpoint_disk(ctx, sb, ops, &row, &c, partial);
done:
	util_fault_point("checkpoint", 4);
	if (r == 0)
		r = cp_write(ctx, &c, true);
	util_fault_point("checkpoint", 5);
	if (r == 0 && rename(partial, c.path) < 0) {
		r = ctx_error(ctx, -errno, "rename %s to %s", partial, c.path);
		(void)cp_write(ctx, &c, false);
	}
	if (r < 0)
		(void)store_btrfs_subvolume_delete(partial);
	else {
		memcpy(ret_id, c.id, sizeof(c.id));
		ctx_log(ctx, SPACE_LOG_INFO, "checkpoint %s of sandbox %s at %s", c.id, c.sandbox_id, c.path);
	}
	sandbox_row_clear(&row);
	return r;
}

int checkpoint_remove_held(space_ctx *ctx, const struct checkpoint_info *c)
{
	int r = store_btrfs_subvolume_delete(c->path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", c->path);
	return cp_write(ctx, c, false);
}

SPACE_API int space_checkpoint_remove(space_ctx *ctx, const char *id)
{
	CTX_ENTER(ctx);
	struct checkpoint_info c;
	int lock, r = core_checkpoint_get(ctx, id, &c);
	/* Under its sandbox's lock: not while a rollback or fork copies it. */
	if (r < 0 || (r = core_sandbox_lock(ctx, c.sandbox_id, &lock)) < 0)
		return r;
	r = core_checkpoint_get(ctx, id, &c); /* still there */
	if (r == 0)
		r = checkpoint_remove_held(ctx, &c);
	cp_unlock(ctx, c.sandbox_id, lock);
	return r;
}

int checkpoint_remove_all(space_ctx *ctx, const char *sandbox_id)
{
	int lock, r = core_sandbox_lock(ctx, sandbox_id, &lock);
	if (r < 0)
		return r;
	struct checkpoint_info *list = NULL;
	size_t n = 0;
	r = core_checkpoint_list(ctx, sandbox_id, &list, &n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = checkpoint_remove_held(ctx, &list[i]);
	free(list);
	cp_unlock(ctx, sandbox_id, lock);
	return r < 0 ? r : (int)n;
}

/* ---- rollback / fork ------------------------------------------------------------------------------- */

/* Rollback's checks and restart, with the sandbox's lock held. */
static int rollback_held(space_sandbox *sb, const char *checkpoint_id)
{
	space_ctx *ctx = sandbox_ctx(sb);
	struct checkpoint_info c;
	int r = core_checkpoint_find(ctx, space_sandbox_id(sb), checkpoint_id, &c);
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
	r = sandbox_restart_from(sb, c.path, c.id);
	/* The new agent knows no tether: a tethered handle gives it one (core/tether.c). */
	return r < 0 ? r : tether_retether(sb);
}

SPACE_API int space_sandbox_rollback(space_sandbox *sb, const char *checkpoint_id)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !checkpoint_id)
		return -EINVAL;
	int lock, r = core_sandbox_lock(sandbox_ctx(sb), space_sandbox_id(sb), &lock);
	if (r < 0)
		return r;
	r = rollback_held(sb, checkpoint_id);
	store_lock_release(lock);
	return r;
}

/* The fork, with the lock of the checkpoint's sandbox held (its checkpoints, periodic ones included, stay
 * while they are copied; its row is read once). Each new sandbox is locked by its own creation. */
static int fork_held(space_ctx *ctx, const char *checkpoint_id, uint32_t count, uint32_t timeout_s,
		     space_sandbox **ret_sandboxes)
{
	struct checkpoint_info c;
	int r = core_checkpoint_get(ctx, checkpoint_id, &c);
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
	o.timeout_s = timeout_s;
	if (sandbox_row_load(ctx, c.sandbox_id, &row) == 0) {
		/* A fork goes on with its parent's task, within what is left of its lifetime. */
		int64_t left = row.info.expires_ms ? row.info.expires_ms - util_wall_ms() : 0;
		if (timeout_s == 0 && row.info.expires_ms && left < 1000) {
			sandbox_row_clear(&row);
			return ctx_error_msg(ctx, -ETIME,
					     "the lifetime of sandbox %s, which forks of %s inherit, has ended: give them "
					     "one of their own (`space fork --timeout`)",
					     c.sandbox_id, c.id);
		}
		if (timeout_s == 0)
			o.timeout_s = (uint32_t)(left / 1000 < PROTO_MAX_LIFETIME ? left / 1000 : PROTO_MAX_LIFETIME);
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

int core_checkpoint_fork(space_ctx *ctx, const char *checkpoint_id, uint32_t count, uint32_t timeout_s,
			 space_sandbox **ret_sandboxes)
{
	if (!ctx || !checkpoint_id || !ret_sandboxes)
		return -EINVAL;
	if (count < 1 || count > FORK_MAX)
		return ctx_error_msg(ctx, -EINVAL, "fork count %u out of range (1..%d)", count, FORK_MAX);
	if (timeout_s > SPACE_TIMEOUT_MAX_S)
		return ctx_error_msg(ctx, -EINVAL, "a lifetime of %u s is over the limit of %u s (366 days)", timeout_s,
				     SPACE_TIMEOUT_MAX_S);
	struct checkpoint_info c;
	int lock, r = core_checkpoint_get(ctx, checkpoint_id, &c);
	if (r < 0 || (r = core_sandbox_lock(ctx, c.sandbox_id, &lock)) < 0)
		return r;
	r = fork_held(ctx, checkpoint_id, count, timeout_s, ret_sandboxes);
	cp_unlock(ctx, c.sandbox_id, lock);
	return r;
}
