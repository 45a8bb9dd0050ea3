/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox statuses (the state machine of store/sandboxes.h), locks, and the read-only listing with the
 * liveness check that keeps it true after a crash; reaping dead ones is core_sandbox_reap_dead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/util.h"

/* The names are the store's (store/sandboxes.h), which the statuses mirror (below). */
SPACE_API const char *space_sandbox_status_name(enum space_sandbox_status status)
{
	const char *name = store_status_name((enum store_status)status);
	return name ? name : "unknown";
}

int core_status_parse(const char *name)
{
	return name ? store_status_parse(name) : -EINVAL;
}

_Static_assert(SPACE_SANDBOX_CREATING == (int)STORE_CREATING && SPACE_SANDBOX_RUNNING == (int)STORE_RUNNING &&
		       SPACE_SANDBOX_PAUSED == (int)STORE_PAUSED && SPACE_SANDBOX_STOPPED == (int)STORE_STOPPED &&
		       SPACE_SANDBOX_FAILED == (int)STORE_FAILED && SPACE_SANDBOX_DESTROYED == (int)STORE_DESTROYED,
	       "store/sandboxes.h mirrors space.h's statuses");

uint64_t core_process_start_time(int pid)
{
	return util_proc_start_time(pid);
}

bool core_process_alive(int pid, uint64_t start_time)
{
	return util_proc_alive(pid, start_time);
}

int core_sandbox_set_status(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason)
{
	return core_sandbox_transition(ctx, id, 0, status, reason);
}

int core_sandbox_transition(space_ctx *ctx, const char *id, unsigned from, enum space_sandbox_status to,
			    const char *reason)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	if ((r = store_begin(s)) < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	enum store_status cur = STORE_FAILED;
	r = store_sandbox_transition(s, id, from, (enum store_status)to, reason, &cur);
	if (r == -ESTALE || r == -ENOENT) {
		store_rollback(s);
		if (r == -ENOENT)
			return ctx_error_msg(ctx, r, "no sandbox %s (see `space ls`)", id);
		return ctx_error_msg(ctx, r, "sandbox %s is %s: it cannot become %s", id, store_status_name(cur),
				     space_sandbox_status_name(to));
	}
	return ctx_store_finish(ctx, s, r, id, space_sandbox_status_name(to), reason);
}

int core_sandbox_lock(space_ctx *ctx, const char *id, int *ret_fd)
{
	int fd = store_lock_take(ctx->state_dir, id, STORE_LOCK_WAIT_MS_DEFAULT);
	if (fd == -EBUSY)
		return ctx_error_msg(ctx, -EBUSY,
				     "sandbox %s is busy: another operation on it (in this or another process) did not "
				     "finish within %u s; try again",
				     id, STORE_LOCK_WAIT_MS_DEFAULT / 1000);
	if (fd < 0)
		return ctx_error(ctx, fd, "lock sandbox %s", id);
	*ret_fd = fd;
	return 0;
}

void core_sandbox_info(const struct store_sandbox *row, struct sandbox_info *b)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->id, sizeof(b->id), "%s", row->id);
	snprintf(b->template_name, sizeof(b->template_name), "%s", row->template_name);
	snprintf(b->isolation, sizeof(b->isolation), "%s", row->isolation);
	b->status = (enum space_sandbox_status)row->status;
	snprintf(b->reason, sizeof(b->reason), "%s", row->reason);
	b->pid = row->proc.pid;
	b->cpus = row->cpus;
	b->memory_mib = row->memory_mib;
	b->created_ms = row->created_ms;
	b->updated_ms = row->updated_ms;
	b->expires_ms = row->expires_ms;
	snprintf(b->path, sizeof(b->path), "%s", row->path);
}

bool core_sandbox_observe(space_ctx *ctx, const struct store_sandbox *row, struct sandbox_info *b)
{
	core_sandbox_info(row, b);
	if (row->status != STORE_RUNNING && row->status != STORE_PAUSED && row->status != STORE_CREATING)
		return false;
	/* Another pid namespace cannot judge the pid (UNKNOWN): the row stays as it is. */
	if (util_proc_liveness(row->proc.pid, row->proc.start_time, row->proc.pidns) != UTIL_PROC_DEAD)
		return false;
	/* A creating row names its creator's process: gone means the creation was interrupted. */
	if (row->status == STORE_CREATING)
		snprintf(b->reason, sizeof(b->reason), "creation interrupted: its process died");
	else
		sandbox_death_reason(ctx, b, b->reason, sizeof(b->reason));
	b->status = SPACE_SANDBOX_FAILED;
	return true;
}

/* User sandboxes that are not destroyed (pooled ones are not user sandboxes: core/warm_pool.h). */
static int live_rows(space_ctx *ctx, struct store_sandbox **ret, size_t *ret_n)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	struct store_sandbox_filter f = { .statuses = STORE_ST_ANY & ~STORE_ST(STORE_DESTROYED) };
	r = store_sandbox_list(s, &f, ret, ret_n);
	return r < 0 ? ctx_error(ctx, r, "store: %s", store_errmsg(s)) : 0;
}

int core_sandbox_reap_dead(space_ctx *ctx)
{
	struct store_sandbox *rows = NULL;
	size_t n = 0;
	int r = live_rows(ctx, &rows, &n);
	if (r < 0)
		return r;
	int done = 0;
	struct sandbox_info *b = malloc(sizeof(*b));
	for (size_t i = 0; b && i < n; i++) {
		if (!core_sandbox_observe(ctx, &rows[i], b))
			continue;
		/* Not while an operation holds it: a restart stops the process with the row still running, and
		 * settles the status itself (or a crash of it leaves the lock free for the next reap). */
		int lock = store_lock_take(ctx->state_dir, rows[i].id, 0);
		if (lock < 0)
			continue;
		/* Seen again under the lock (a restart may have finished with a new process meanwhile), and
		 * changed from the status just seen only: whatever happened since (a destroy) is not undone. */
		struct store_sandbox now = { 0 };
		if (store_sandbox_get(ctx->store, rows[i].id, &now) == 0 && core_sandbox_observe(ctx, &now, b) &&
		    core_sandbox_transition(ctx, now.id, STORE_ST(now.status), SPACE_SANDBOX_FAILED, b->reason) == 0)
			done++;
		store_sandbox_clear(&now);
		store_lock_release(lock);
	}
	free(b);
	store_sandbox_list_free(rows, n);
	return done;
}

int core_sandbox_list(space_ctx *ctx, struct sandbox_info **ret_list, size_t *ret_count)
{
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	/* Read-only: what a reap (space_sandbox_reap) would make of each row is shown, nothing is written. */
	struct store_sandbox *rows = NULL;
	size_t n = 0;
	int r = live_rows(ctx, &rows, &n);
	if (r < 0)
		return r;
	struct sandbox_info *list = n ? calloc(n, sizeof(*list)) : NULL;
	if (n && !list) {
		store_sandbox_list_free(rows, n);
		return -ENOMEM;
	}
	int64_t now = util_wall_ms();
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		/* Past its lifetime it is as good as gone: the next reap destroys it. */
		if ((rows[i].expires_ms > 0 && rows[i].expires_ms <= now) || tether_holder_gone(rows[i].metadata))
			continue;
		(void)core_sandbox_observe(ctx, &rows[i], &list[k++]);
	}
	store_sandbox_list_free(rows, n);
	*ret_list = list;
	*ret_count = k;
	return 0;
}
