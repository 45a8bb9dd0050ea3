/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Template snapshots: a template whose subvolume holds a VM snapshot (vmstate.snap + vmstate.json, as a
 * VM checkpoint does) makes VM sandboxes that are restored instead of booted (core/sandbox.c). Taking one
 * = boot a sandbox of the template, checkpoint it, and swap the checkpoint in as the template's subvolume.
 */
#include <btrfsutil.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/disk_tree.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "core/vm_backend.h"
#include "core/warm_pool.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/util.h"

int core_template_get_warm_info(space_ctx *ctx, const char *name, struct space_template_warm_info *ret)
{
	CTX_ENTER(ctx);
	if (!ctx || !name || !ret)
		return -EINVAL;
	struct template_info t;
	int r = core_template_get(ctx, name, &t);
	if (r < 0)
		return r;
	struct space_template_warm_info w = { 0 };
	char snap[PATH_MAX];
	struct stat st;
	/* Template snapshots are the vm back-end's (the only one that restores memory). */
	if (backend_of(BACKEND_VM)->snapshot_find(t.path, snap, sizeof(snap), &w.snapshot_cpus,
						 &w.snapshot_memory_mib) == 0 &&
	    stat(snap, &st) == 0) {
		w.has_snapshot = true;
		w.snapshot_created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	}
	w.warm_pool_size = warm_pool_size(ctx, name);
	w.warm_pool_ready = warm_pool_count(ctx, name);
	*ret = w;
	return 0;
}

/*
 * The template, refused while user sandboxes or checkpoints depend on it; its pooled sandboxes are drained.
 * Returns the warm pool lock (no filler runs until the caller closes it) or -errno.
 */
static int template_unused(space_ctx *ctx, const char *name, const char *what, struct template_info *t)
{
	int r = core_template_get(ctx, name, t);
	if (r < 0)
		return r;
	_cleanup_close_ int lock = warm_pool_lock(ctx);
	if (lock < 0)
		return lock;
	if (t->sandboxes || t->checkpoints)
		return ctx_error_msg(ctx, -EBUSY,
				     "cannot %s of template %s: %u sandbox(es) and %u checkpoint(s) use it; remove them "
				     "first",
				     what, name, t->sandboxes, t->checkpoints);
	r = warm_pool_drain(ctx, name);
	return r < 0 ? r : TAKE_FD(lock);
}

static int drop_state_files(const char *dir)
{
	const char *files[] = { VM_SNAPSHOT_FILE, VM_SNAPSHOT_META };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		if (unlink(p) < 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}

/*
 * Makes a writable snapshot of src, lets the caller adjust it (drop: remove the state files) and exchanges
 * it with the template's subvolume in one rename; the old subvolume is deleted.
 * Until the exchange the template is untouched; after it, only a leftover in .tmp can remain.
 */
static int template_swap(space_ctx *ctx, const struct template_info *t, const char *src, bool drop,
			 const char *event)
{
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	char tmp[PATH_MAX];
	(void)core_pool_tmp_sweep(ctx, root);
	if ((r = core_pool_tmp_path(ctx, root, tmp, sizeof(tmp))) < 0)
		return r;
	r = store_btrfs_snapshot(src, tmp, false);
	if (r < 0)
		return ctx_error(ctx, r, "snapshot %s", src);
	/* Jails keep the template's tree (core/disk_tree.h). */
	if ((r = disk_tree_reinstate(tmp)) < 0) {
		ctx_error(ctx, r, "keep the jail tree of template %s", t->name);
		goto fail;
	}
	if (drop && (r = drop_state_files(tmp)) < 0) {
		ctx_error(ctx, r, "remove the snapshot files of %s", tmp);
		goto fail;
	}
	/* btrfs moves only writable subvolumes between directories: both are writable for the exchange, and
	 * the new one becomes read-only after it if the old one was. */
	bool ro = false;
	if (btrfs_util_get_subvolume_read_only(t->path, &ro) != BTRFS_UTIL_OK)
		ro = false;
	if (ro && (r = store_btrfs_set_read_only(t->path, false)) < 0) {
		ctx_error(ctx, r, "make %s writable", t->path);
		goto fail;
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, t->path, RENAME_EXCHANGE) < 0) {
		r = ctx_error(ctx, -errno, "swap %s into %s", tmp, t->path);
		if (ro)
			(void)store_btrfs_set_read_only(t->path, true);
		goto fail;
	}
	/* tmp now names the old subvolume. */
	if (ro && store_btrfs_set_read_only(t->path, true) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "template %s left writable", t->name);
	if (store_btrfs_subvolume_delete(tmp) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "old subvolume of template %s left at %s", t->name, tmp);
	struct store *s = ctx->store;
	r = store_begin(s);
	return ctx_store_finish(ctx, s, r, NULL, event, t->name);

fail:
	(void)store_btrfs_subvolume_delete(tmp);
	return r;
}

/* Keeps the first error's message across the cleanup calls that follow it. */
static void cleanup_keep_error(space_ctx *ctx, space_sandbox *sb, const char *cp_id)
{
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	if (cp_id && cp_id[0])
		(void)space_checkpoint_remove(ctx, cp_id);
	if (sb)
		(void)space_sandbox_destroy(sb);
	space_sandbox_free(sb);
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
}

int core_template_snapshot(space_ctx *ctx, const char *name, uint32_t cpus, uint32_t memory_mib)
{
	CTX_ENTER(ctx);
	if (!ctx || !name)
		return -EINVAL;
	/* A template snapshot is a booted VM's memory: always the vm back-end. */
	const struct backend_ops *vm = backend_of(BACKEND_VM);
	int r = vm->available(ctx);
	if (r < 0)
		return ctx_error_msg(ctx, r, "template snapshots need vm isolation: %s", ctx->last_error);
	struct template_info t;
	struct space_template_warm_info w;
	r = core_template_get_warm_info(ctx, name, &w);
	if (r < 0)
		return r;
	if (w.has_snapshot)
		return ctx_error_msg(ctx, -EEXIST,
				     "template %s already has a snapshot (%u vCPUs, %u MiB): `space template snapshot %s "
				     "--drop` first",
				     name, w.snapshot_cpus, w.snapshot_memory_mib, name);
	_cleanup_close_ int lock = template_unused(ctx, name, "snapshot", &t);
	if (lock < 0)
		return lock;

	struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
	o.template_name = name;
	o.isolation = vm->name;
	o.cpus = cpus;
	o.memory_mib = memory_mib;
	space_sandbox *sb = NULL;
	char cp_id[SPACE_CHECKPOINT_ID_MAX] = "";
	uint64_t t0 = util_now_ns();
	r = sandbox_create_from(ctx, &o, NULL, &sb);
	if (r < 0)
		return r;
	uint64_t t1 = util_now_ns();
	struct checkpoint_info c;
	r = space_checkpoint_create(sb, "template-snapshot", cp_id);
	if (r == 0)
		r = core_checkpoint_get(ctx, cp_id, &c);
	if (r == 0)
		r = template_swap(ctx, &t, c.path, false, "template.snapshot");
	cleanup_keep_error(ctx, sb, cp_id);
	if (r == 0)
		ctx_log(ctx, SPACE_LOG_INFO, "template %s: snapshot taken (boot %llu ms, snapshot %llu ms)", name,
			(unsigned long long)((t1 - t0) / 1000000), (unsigned long long)((util_now_ns() - t1) / 1000000));
	return r;
}

SPACE_API int space_template_snapshot_drop(space_ctx *ctx, const char *name)
{
	CTX_ENTER(ctx);
	if (!ctx || !name)
		return -EINVAL;
	struct template_info t;
	struct space_template_warm_info w;
	int r = core_template_get_warm_info(ctx, name, &w);
	if (r < 0)
		return r;
	if (!w.has_snapshot)
		return ctx_error_msg(ctx, -ENOENT, "template %s has no snapshot", name);
	_cleanup_close_ int lock = template_unused(ctx, name, "drop the snapshot", &t);
	if (lock < 0)
		return lock;
	return template_swap(ctx, &t, t.path, true, "template.snapshot.drop");
}
