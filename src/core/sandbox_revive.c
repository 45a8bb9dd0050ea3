/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running sandbox whose helper died (a kill -9, an OOM kill): the egress gateway or the snapshot helper.
 * Its sandbox goes on without it (egress fails closed: the veth pair went with the gateway's namespace;
 * snapshots stop), so the next reap starts a new one, under the sandbox's lock, and records it in the
 * event log ("helper"). The jail's PID 1 dying is not a helper's death: the reap records that sandbox
 * failed (sandbox_list.c). A jail's log writer (space-logcap) too: the jail writes to a FIFO in its
 * runtime directory, which a new writer opens (core/logcap.h); while there is none, the agent's writes fail
 * at once (it ignores SIGPIPE), so nothing blocks, and only those lines are lost.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "core/autosnap.h"
#include "core/backend.h"
#include "core/logcap.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "net/net.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "util/procstat.h"
#include "util/util.h"

static void note(space_ctx *ctx, const char *id, const char *what, int r)
{
	char detail[sizeof(ctx->last_error) + 96];
	if (r < 0)
		snprintf(detail, sizeof(detail), "%s died; a new one did not start: %s", what, ctx->last_error);
	else
		snprintf(detail, sizeof(detail), "%s died; a new one started", what);
	ctx_log(ctx, r < 0 ? SPACE_LOG_WARNING : SPACE_LOG_INFO, "sandbox %s: %s", id, detail);
	if (store_event(ctx->store, id, "helper", detail) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: event not recorded: %s", id, store_errmsg(ctx->store));
}

/* Under the sandbox's lock: seen again, and only while its own process is the one recorded, alive. */
static int revive_one(space_ctx *ctx, const char *id)
{
	struct store_sandbox now = { 0 };
	int done = 0;
	if (store_sandbox_get(ctx->store, id, &now) < 0)
		return 0;
	if (now.status != STORE_RUNNING ||
	    util_proc_liveness(now.proc.pid, now.proc.start_time, now.proc.pidns) != UTIL_PROC_ALIVE)
		goto out;
	if (net_gateway_dead(ctx, id) == 1) {
		struct sandbox_row row;
		const struct backend_ops *ops;
		int r = sandbox_row_load(ctx, id, &row);
		if (r == 0) {
			if ((r = backend_for_row(ctx, &row, &ops)) == 0)
				r = sandbox_net_reattach(ctx, ops, &row, row.info.pid);
			sandbox_row_clear(&row);
		}
		note(ctx, id, "its egress gateway", r);
		done += r == 0;
	}
	if (logcap_dead(now.runtime_dir) == 1) {
		int r = logcap_restart(ctx, id, now.runtime_dir);
		note(ctx, id, "its log writer (space-logcap)", r);
		done += r == 0;
	}
	if (now.helper.pid > 0 &&
	    util_proc_liveness(now.helper.pid, now.helper.start_time, now.helper.pidns) == UTIL_PROC_DEAD) {
		int r = autosnap_started(ctx, id, NULL, NULL);
		note(ctx, id, "its snapshot helper (space-snapd)", r);
		done += r == 0;
	}
out:
	store_sandbox_clear(&now);
	return done;
}

int sandbox_revive_helpers(space_ctx *ctx)
{
	struct store *s;
	if (ctx_store(ctx, &s) < 0)
		return 0;
	struct store_sandbox_filter f = { .statuses = STORE_ST(STORE_RUNNING) };
	struct store_sandbox *rows = NULL;
	size_t n = 0;
	if (store_sandbox_list(s, &f, &rows, &n) < 0)
		return 0;
	int done = 0;
	for (size_t i = 0; i < n; i++) {
		const struct store_sandbox *w = &rows[i];
		/* Judged from this pid namespace only, as every liveness check (util/procstat.h). */
		if (util_proc_liveness(w->proc.pid, w->proc.start_time, w->proc.pidns) != UTIL_PROC_ALIVE)
			continue;
		bool snapd_dead = w->helper.pid > 0 &&
				  util_proc_liveness(w->helper.pid, w->helper.start_time, w->helper.pidns) == UTIL_PROC_DEAD;
		if (!snapd_dead && logcap_dead(w->runtime_dir) != 1 && net_gateway_dead(ctx, w->id) != 1)
			continue;
		/* Not while an operation holds it: a rollback or destroy settles its helpers itself. */
		int lock = store_lock_take(ctx->state_dir, w->id, 0);
		if (lock < 0)
			continue;
		done += revive_one(ctx, w->id);
		store_lock_release(lock);
	}
	store_sandbox_list_free(rows, n);
	return done;
}

/*
 * Sandboxes whose disk writes wait for room in a full pool (backend_ops.disk_full: a VM's, docs/vmm.md, "A
 * full pool") are shown paused with the reason SANDBOX_POOL_FULL_REASON (a status change, so an event),
 * and running again once their VMM says the writes went through. Asked of every live one at each reap,
 * under its lock (busy ones: the next reap).
 */
bool sandbox_reason_pool_full(const char *reason)
{
	return !strncmp(reason, SANDBOX_POOL_FULL_REASON, sizeof(SANDBOX_POOL_FULL_REASON) - 1);
}

static void pool_full_one(space_ctx *ctx, const struct store_sandbox *w, int (*disk_full)(const char *))
{
	bool marked = w->status == STORE_PAUSED && sandbox_reason_pool_full(w->reason);
	if (w->status == STORE_PAUSED && !marked)
		return; /* paused by a caller: its VMM writes nothing */
	int full = disk_full(w->runtime_dir);
	if (full < 0 || (full == 1) == marked)
		return;
	int lock = store_lock_take(ctx->state_dir, w->id, 0);
	if (lock < 0)
		return;
	if (full) {
		char reason[256], fb[32] = "?";
		struct statvfs sv;
		if (statvfs(w->path, &sv) == 0)
			util_format_size((uint64_t)sv.f_bavail * sv.f_frsize, fb, sizeof(fb));
		snprintf(reason, sizeof(reason),
			 SANDBOX_POOL_FULL_REASON " (%s free): its disk writes wait for room; free space in the pool "
						  "(space rm, or a bigger pool) and it goes on by itself",
			 fb);
		if (core_sandbox_transition(ctx, w->id, STORE_ST(STORE_RUNNING), SPACE_SANDBOX_PAUSED, reason) == 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: %s", w->id, reason);
	} else if (core_sandbox_transition(ctx, w->id, STORE_ST(STORE_PAUSED), SPACE_SANDBOX_RUNNING,
					   "the pool has room again: its disk writes went through") == 0) {
		ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: running again, the pool has room", w->id);
	}
	store_lock_release(lock);
}

void sandbox_sync_pool_full(space_ctx *ctx)
{
	struct store *s;
	if (ctx_store(ctx, &s) < 0)
		return;
	struct store_sandbox_filter f = { .statuses = STORE_ST(STORE_RUNNING) | STORE_ST(STORE_PAUSED) };
	struct store_sandbox *rows = NULL;
	size_t n = 0;
	if (store_sandbox_list(s, &f, &rows, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct store_sandbox *w = &rows[i];
		enum backend_kind kind;
		if (backend_kind_parse(w->isolation, &kind) < 0)
			continue;
		const struct backend_ops *ops = backend_of(kind);
		if (!ops->disk_full ||
		    util_proc_liveness(w->proc.pid, w->proc.start_time, w->proc.pidns) != UTIL_PROC_ALIVE)
			continue;
		pool_full_one(ctx, w, ops->disk_full);
	}
	store_sandbox_list_free(rows, n);
}
