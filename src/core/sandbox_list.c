/* SPDX-License-Identifier: Apache-2.0 */
/* Listing sandboxes, with the liveness check that keeps the listing true after a crash. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "core/warm_pool.h"
#include "util/cleanup.h"
#include "util/util.h"

SPACE_API const char *space_sandbox_status_name(enum space_sandbox_status status)
{
	static const char *const names[] = {
		[SPACE_SANDBOX_CREATING] = "creating", [SPACE_SANDBOX_RUNNING] = "running",
		[SPACE_SANDBOX_PAUSED] = "paused",     [SPACE_SANDBOX_STOPPED] = "stopped",
		[SPACE_SANDBOX_FAILED] = "failed",     [SPACE_SANDBOX_DESTROYED] = "destroyed",
	};
	if ((unsigned)status >= ARRAY_SIZE(names))
		return "unknown";
	return names[status];
}

int core_status_parse(const char *name)
{
	for (int i = SPACE_SANDBOX_CREATING; i <= SPACE_SANDBOX_DESTROYED; i++)
		if (!strcmp(space_sandbox_status_name(i), name))
			return i;
	return -EINVAL;
}

/* Start time (field 22 of /proc/PID/stat) and state (field 3) of pid; 0 when it does not exist. */
static uint64_t process_stat(int pid, char *ret_state)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_free_ char *buf = NULL;
	*ret_state = '?';
	if (pid <= 0 || util_read_file(path, 4096, &buf, NULL) < 0)
		return 0;
	/* comm (field 2) may hold spaces and parentheses: fields after it start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	*ret_state = p[2];
	p++;
	/* Start time is field 22, i.e. the 20th after the ')'. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	return strtoull(p + 1, NULL, 10);
}

uint64_t core_process_start_time(int pid)
{
	char state;
	return process_stat(pid, &state);
}

bool core_process_alive(int pid, uint64_t start_time)
{
	/* A zombie has ended: only its parent has not collected it yet (a VMM's jail waiter may be a few
	 * milliseconds behind). */
	char state;
	uint64_t now = process_stat(pid, &state);
	return now != 0 && (start_time == 0 || now == start_time) && state != 'Z' && state != 'X';
}

int core_sandbox_set_status(space_ctx *ctx, const char *id, enum space_sandbox_status status,
			    const char *reason)
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return r;
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s),
					   "UPDATE sandboxes SET status = ?, reason = ?, updated_ms = ? WHERE id = ?",
					   -1, &st, NULL));
	if (r == 0) {
		sqlite3_bind_text(st, 1, space_sandbox_status_name(status), -1, SQLITE_STATIC);
		if (reason)
			sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, util_wall_ms());
		sqlite3_bind_text(st, 4, id, -1, SQLITE_STATIC);
		r = store_errno(sqlite3_step(st));
		sqlite3_finalize(st);
	}
	if (r == 0)
		r = store_event(s, id, space_sandbox_status_name(status), reason);
	if (r == 0)
		r = store_commit(s);
	if (r < 0)
		store_rollback(s);
	return r;
}

static const char SANDBOX_SELECT[] =
	"SELECT id, template, isolation, status, coalesce(reason, ''), coalesce(pid, 0), coalesce(pid_start, 0),"
	" cpus, memory_mib, created_ms, updated_ms, expires_ms, path, runtime_dir, coalesce(cgroup, ''), metadata,"
	" host_uid FROM sandboxes";

void core_sandbox_row(sqlite3_stmt *st, struct space_sandbox_info *b, uint64_t *ret_pid_start)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->id, sizeof(b->id), "%s", (const char *)sqlite3_column_text(st, 0));
	snprintf(b->template_name, sizeof(b->template_name), "%s", (const char *)sqlite3_column_text(st, 1));
	snprintf(b->isolation, sizeof(b->isolation), "%s", (const char *)sqlite3_column_text(st, 2));
	int status = core_status_parse((const char *)sqlite3_column_text(st, 3));
	b->status = status < 0 ? SPACE_SANDBOX_FAILED : (enum space_sandbox_status)status;
	snprintf(b->reason, sizeof(b->reason), "%s", (const char *)sqlite3_column_text(st, 4));
	b->pid = sqlite3_column_int(st, 5);
	if (ret_pid_start)
		*ret_pid_start = (uint64_t)sqlite3_column_int64(st, 6);
	b->cpus = (uint32_t)sqlite3_column_int(st, 7);
	b->memory_mib = (uint32_t)sqlite3_column_int(st, 8);
	b->created_ms = sqlite3_column_int64(st, 9);
	b->updated_ms = sqlite3_column_int64(st, 10);
	b->expires_ms = sqlite3_column_int64(st, 11);
	snprintf(b->path, sizeof(b->path), "%s", (const char *)sqlite3_column_text(st, 12));
}

const char *core_sandbox_select(void)
{
	return SANDBOX_SELECT;
}

SPACE_API int space_sandbox_list(space_ctx *ctx, struct space_sandbox_info **ret_list, size_t *ret_count)
{
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	/* Sandboxes past their lifetime go first, so the listing never shows them. */
	(void)space_sandbox_reap(ctx);
	/* Pooled sandboxes (core/warm_pool.h) are not user sandboxes: left out. */
	char sql[sizeof(SANDBOX_SELECT) + sizeof(WARM_POOL_NOT_POOLED) + 64];
	snprintf(sql, sizeof(sql), "%s WHERE status != 'destroyed' AND %s ORDER BY created_ms, id", SANDBOX_SELECT,
		 WARM_POOL_NOT_POOLED);
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	struct space_sandbox_info *list = NULL;
	uint64_t *starts = NULL;
	size_t n = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct space_sandbox_info *nl = realloc(list, (n + 1) * sizeof(*list));
		uint64_t *ns = nl ? realloc(starts, (n + 1) * sizeof(*starts)) : NULL;
		if (nl)
			list = nl;
		if (ns)
			starts = ns;
		if (!nl || !ns) {
			r = -ENOMEM;
			break;
		}
		core_sandbox_row(st, &list[n], &starts[n]);
		n++;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = ctx_error(ctx, store_errno(rc), "store: %s", store_errmsg(s));
	sqlite3_finalize(st);
	if (r < 0) {
		free(list);
		free(starts);
		return r;
	}
	/* A sandbox whose process is gone is no longer running, whatever the row says. */
	for (size_t i = 0; i < n; i++) {
		struct space_sandbox_info *b = &list[i];
		if (b->status != SPACE_SANDBOX_RUNNING && b->status != SPACE_SANDBOX_PAUSED &&
		    b->status != SPACE_SANDBOX_CREATING)
			continue;
		if (core_process_alive(b->pid, starts[i]))
			continue;
		/* A creating row names its creator's process: gone means the creation was interrupted. */
		char why[sizeof(b->reason)];
		if (b->status == SPACE_SANDBOX_CREATING)
			snprintf(why, sizeof(why), "creation interrupted: its process died");
		else
			sandbox_death_reason(ctx, b, why, sizeof(why));
		if (core_sandbox_set_status(ctx, b->id, SPACE_SANDBOX_FAILED, why) == 0) {
			b->status = SPACE_SANDBOX_FAILED;
			snprintf(b->reason, sizeof(b->reason), "%s", why);
		}
	}
	free(starts);
	*ret_list = list;
	*ret_count = n;
	return 0;
}
