/* SPDX-License-Identifier: Apache-2.0 */
/* Machine-wide uid slots of sandboxes (see uids.h and src/util/uidalloc.h). */
#include "core/uids.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/sandbox.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/uidalloc.h"
#include "util/util.h"

/* The row's back-end, which says what slot its sandboxes hold (a VMM's single uid, a jail's range), and
 * the slot's owner text. */
static int row_owner(space_ctx *ctx, const struct sandbox_row *row, const struct backend_ops **ret_ops, char *buf,
		     size_t len)
{
	int r = backend_for_row(ctx, row, ret_ops);
	if (r < 0)
		return r;
	int n = snprintf(buf, len, "%s %s %s", ctx->state_dir, row->info.id, (*ret_ops)->uid_owner);
	if (n < 0 || (size_t)n >= len || n > UIDALLOC_OWNER_MAX)
		return ctx_error_msg(ctx, -ENAMETOOLONG, "state directory path too long for a uid slot owner (%s)",
				     ctx->state_dir);
	return 0;
}

static int record(space_ctx *ctx, const struct sandbox_row *row, uint32_t uid)
{
	struct store *s = ctx->store;
	int r = store_sandbox_set_host_uid(s, row->info.id, uid);
	return r < 0 ? ctx_error(ctx, r, "store: %s", store_errmsg(s)) : 0;
}

/* A new slot for the row, recorded; one pass of stale-slot reclaiming when all are taken. */
static int take_new(space_ctx *ctx, const struct backend_ops *ops, struct sandbox_row *row, const char *owner)
{
	uint32_t uid;
	int r = uidalloc_acquire(ops->uid_kind, owner, &uid);
	if (r == -ENOSPC && uids_reap_stale(ctx) > 0)
		r = uidalloc_acquire(ops->uid_kind, owner, &uid);
	if (r == -ENOSPC)
		return ctx_error_msg(ctx, r,
				     "no free host uid %s for sandbox %s: every slot under %s is in use (each live "
				     "sandbox of every state directory on this machine holds one)",
				     ops->uid_what, row->info.id, UIDALLOC_DIR);
	if (r < 0)
		return ctx_error(ctx, r, "allocate a host uid for sandbox %s (%s)", row->info.id, UIDALLOC_DIR);
	util_fault_point("create", 2); /* taken, not yet recorded: only its owner text names the sandbox */
	if ((r = record(ctx, row, uid)) < 0) {
		(void)uidalloc_release(ops->uid_kind, uid, owner);
		return r;
	}
	row->host_uid = uid;
	return 0;
}

int uids_acquire(space_ctx *ctx, struct sandbox_row *row)
{
	const struct backend_ops *ops;
	char owner[UIDALLOC_OWNER_MAX + 1];
	int r = row_owner(ctx, row, &ops, owner, sizeof(owner));
	return r < 0 ? r : take_new(ctx, ops, row, owner);
}

int uids_reclaim(space_ctx *ctx, struct sandbox_row *row)
{
	const struct backend_ops *ops;
	char owner[UIDALLOC_OWNER_MAX + 1];
	int r = row_owner(ctx, row, &ops, owner, sizeof(owner));
	if (r < 0)
		return r;
	if (row->host_uid) {
		r = uidalloc_claim(ops->uid_kind, row->host_uid, owner);
		if (r == 0)
			return 0;
		if (r != -EEXIST && r != -EINVAL)
			return ctx_error(ctx, r, "take host uid %u again for sandbox %s", row->host_uid, row->info.id);
		/* Another owner has it (the record is older than a reboot): the jail's rootfs is idmapped and
		 * the VMM opens its files as root, so nothing on disk depends on the old uid. */
		ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: host uid %u is no longer its own; taking another",
			row->info.id, row->host_uid);
	}
	return take_new(ctx, ops, row, owner);
}

struct owned {
	enum uidalloc_kind kind;
	const char *owner;
};

static int release_owned(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata)
{
	const struct owned *o = userdata;
	if (kind == o->kind && !strcmp(owner, o->owner))
		(void)uidalloc_release(kind, uid, owner);
	return 0;
}

void uids_release(space_ctx *ctx, const struct sandbox_row *row)
{
	const struct backend_ops *ops;
	char owner[UIDALLOC_OWNER_MAX + 1];
	if (row_owner(ctx, row, &ops, owner, sizeof(owner)) < 0)
		return;
	if (!row->host_uid) {
		/* None recorded: the create stopped before its uids step, or was killed between taking a slot
		 * and recording it. Such a slot names this sandbox: found by its owner text (a directory scan,
		 * on this path only). */
		struct owned o = { ops->uid_kind, owner };
		(void)uidalloc_foreach(release_owned, &o);
		return;
	}
	int r = uidalloc_release(ops->uid_kind, row->host_uid, owner);
	if (r < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: free host uid %u: %s (`space init` reclaims it)",
			row->info.id, row->host_uid, strerror(-r));
}

int uids_helper_acquire(space_ctx *ctx, const char *sandbox_id, const char *kind, uint32_t *ret_uid)
{
	char owner[UIDALLOC_OWNER_MAX + 1];
	int n = snprintf(owner, sizeof(owner), "%s %s %s", ctx->state_dir, sandbox_id, kind);
	if (n < 0 || (size_t)n >= sizeof(owner) || strchr(kind, ' ') || !util_name_valid(sandbox_id))
		return ctx_error_msg(ctx, -EINVAL, "no uid slot owner for %s of sandbox %s", kind, sandbox_id);
	int r = uidalloc_acquire(UIDALLOC_SINGLE, owner, ret_uid);
	if (r == -ENOSPC && uids_reap_stale(ctx) > 0)
		r = uidalloc_acquire(UIDALLOC_SINGLE, owner, ret_uid);
	return r < 0 ? ctx_error(ctx, r, "allocate a host uid for the %s of sandbox %s", kind, sandbox_id) : 0;
}

void uids_helper_release(space_ctx *ctx, const char *sandbox_id, const char *kind, uint32_t uid)
{
	char owner[UIDALLOC_OWNER_MAX + 1];
	snprintf(owner, sizeof(owner), "%s %s %s", ctx->state_dir, sandbox_id, kind);
	int r = uidalloc_release(UIDALLOC_SINGLE, uid, owner);
	if (r < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "free host uid %u of the %s of sandbox %s: %s", uid, kind, sandbox_id,
			strerror(-r));
}

/* ---- stale slots ---- */

enum { SLOT_IN_USE, SLOT_STALE };

/* A destroyed or missing row holds no slot; an error (a store we cannot read) keeps it. */
static int slot_of_status(int r, const enum store_status *st)
{
	if (r == -ENOENT)
		return SLOT_STALE;
	if (r < 0)
		return r;
	return *st == STORE_DESTROYED ? SLOT_STALE : SLOT_IN_USE;
}

static int sandbox_slot_state(space_ctx *ctx, const char *state_dir, const char *id)
{
	enum store_status st = STORE_FAILED;
	if (!strcmp(state_dir, ctx->state_dir) && ctx->store)
		return slot_of_status(store_sandbox_status(ctx->store, id, &st), &st);
	char db[PATH_MAX];
	if ((size_t)snprintf(db, sizeof(db), "%s/space.db", state_dir) >= sizeof(db))
		return -ENAMETOOLONG;
	/* A state directory removed, or never initialized: nothing there holds the slot. */
	if (access(db, F_OK) < 0)
		return errno == ENOENT ? SLOT_STALE : -errno;
	return slot_of_status(store_sandbox_status_peek(db, id, &st), &st);
}

static int slot_state(space_ctx *ctx, const char *owner)
{
	char text[UIDALLOC_OWNER_MAX + 1];
	snprintf(text, sizeof(text), "%s", owner);
	/* "pid <pid> <start time> <kind>": a process that holds its slot itself (jail_start without a uid). */
	unsigned long long pid, start;
	char kind[16];
	if (sscanf(text, "pid %llu %llu %15s", &pid, &start, kind) == 3)
		return pid > 0 && pid < (1u << 22) && core_process_alive((int)pid, start) ? SLOT_IN_USE : SLOT_STALE;
	/* "<state dir> <id> <kind>": the state dir may hold spaces, the id and kind do not. */
	char *k = strrchr(text, ' ');
	if (!k || text[0] != '/')
		return -EBADMSG;
	*k = '\0';
	char *id = strrchr(text, ' ');
	if (!id || !util_name_valid(id + 1))
		return -EBADMSG;
	*id++ = '\0';
	return sandbox_slot_state(ctx, text, id);
}

struct reap {
	space_ctx *ctx;
	int freed;
};

static int reap_one(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata)
{
	struct reap *rp = userdata;
	/* Unreadable stores and owner texts we do not know keep their slot: freeing a live one would let
	 * two sandboxes share uids. */
	if (slot_state(rp->ctx, owner) != SLOT_STALE)
		return 0;
	if (uidalloc_release(kind, uid, owner) == 0) {
		ctx_log(rp->ctx, SPACE_LOG_DEBUG, "freed stale host uid slot %u (%s)", uid, owner);
		rp->freed++;
	}
	return 0;
}

int uids_reap_stale(space_ctx *ctx)
{
	struct reap rp = { .ctx = ctx };
	int r = uidalloc_foreach(reap_one, &rp);
	if (r < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "reclaim stale host uid slots in %s: %s", UIDALLOC_DIR, strerror(-r));
	return rp.freed;
}

bool uids_identity_map_allowed(space_ctx *ctx)
{
	_cleanup_free_ char *v = NULL;
	return ctx->store && store_meta_get(ctx->store, UIDS_IDENTITY_MAP_KEY, &v) == 0 && !strcmp(v, "allow");
}
