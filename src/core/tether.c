/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tethers: a sandbox that ends with the process holding it, however that process ends (SIGKILL too).
 *
 * Two parties keep it, as for a lifetime (core/lifetime.c): the agent holds one connection open and shuts
 * the sandbox down the moment it closes (the kernel closes it whatever kills the holder), and the row's
 * metadata names the holder (pid, start time, pid namespace), so space_sandbox_reap destroys the sandbox
 * once the holder is gone, even when the agent could not act (a paused sandbox, a rollback that started a
 * new agent) and instead of recording it failed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "proto/agent_client.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/procstat.h"

#define TETHER_KEY "tether"

/* The row's metadata with (holder) or without (!holder) the tether key; NULL on allocation failure. */
static char *meta_with_tether(const char *meta, bool holder)
{
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	if (!j)
		j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(j, TETHER_KEY);
	cJSON *t = holder ? cJSON_AddObjectToObject(j, TETHER_KEY) : NULL;
	if (t) {
		/* Doubles hold these exactly: pids < 2^22, start times and inode numbers < 2^53 in practice. */
		cJSON_AddNumberToObject(t, "pid", (double)getpid());
		cJSON_AddNumberToObject(t, "start", (double)util_proc_self_start_time());
		cJSON_AddNumberToObject(t, "pidns", (double)util_pidns_self());
	}
	char *s = holder && !t ? NULL : cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* Records (holder) or clears the holder in the row, reading and writing the metadata in one transaction
 * so that no other change to it is lost. */
static int tether_store(space_ctx *ctx, const char *id, bool holder)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	struct store_sandbox row;
	_cleanup_free_ char *meta = NULL;
	r = store_sandbox_get(s, id, &row);
	if (r == 0) {
		r = row.status == STORE_RUNNING ? 0 : -ESTALE;
		meta = r == 0 ? meta_with_tether(row.metadata, holder) : NULL;
		store_sandbox_clear(&row);
		if (r == 0)
			r = meta ? store_sandbox_set_metadata(s, id, meta) : -ENOMEM;
	}
	if (r == -ESTALE || r == -ENOENT) {
		store_rollback(s);
		return ctx_error_msg(ctx, -ESRCH, "sandbox %s stopped while it was being tethered", id);
	}
	char detail[64];
	snprintf(detail, sizeof(detail), holder ? "to process %d" : "none", (int)getpid());
	return ctx_store_finish(ctx, s, r, id, "tether", detail);
}

SPACE_API int space_sandbox_tether(space_sandbox *sb)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb)
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	const char *id = space_sandbox_id(sb);
	if (sandbox_tether_fd(sb) >= 0)
		return 0;
	int r = sandbox_usable(sb);
	if (r < 0)
		return r;
	/* The row first: a holder that dies between the two steps is still found by the next reap. */
	r = tether_store(ctx, id, true);
	if (r < 0)
		return r;
	struct agent_error aerr;
	int fd = -1;
	r = agent_tether(sandbox_addr(sb), &fd, &aerr);
	if (r < 0) {
		int e = ctx_error_msg(ctx, r, "tether sandbox %s to this process: %s%s", id, aerr.msg,
				      r == -EOPNOTSUPP ? " (make a new template snapshot with this version's agent)"
						       : "");
		(void)tether_store(ctx, id, false);
		return e;
	}
	sandbox_set_tether_fd(sb, fd);
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: tethered to process %d", id, (int)getpid());
	return 0;
}

int tether_retether(space_sandbox *sb)
{
	if (sandbox_tether_fd(sb) < 0)
		return 0;
	/* The old connection went with the old agent; a new one to the new agent, from the same holder. */
	sandbox_set_tether_fd(sb, -1);
	struct agent_error aerr;
	int fd = -1;
	int r = agent_tether(sandbox_addr(sb), &fd, &aerr);
	if (r < 0)
		return ctx_error_msg(sandbox_ctx(sb), r, "tether sandbox %s again after its restart: %s",
				     space_sandbox_id(sb), aerr.msg);
	sandbox_set_tether_fd(sb, fd);
	return 0;
}

bool tether_recorded(const char *meta)
{
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	bool r = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, TETHER_KEY));
	cJSON_Delete(j);
	return r;
}

bool tether_holder_gone(const char *meta)
{
	if (!meta)
		return false;
	cJSON *j = cJSON_Parse(meta);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, TETHER_KEY);
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(t, "pid");
	const cJSON *start = cJSON_GetObjectItemCaseSensitive(t, "start");
	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(t, "pidns");
	bool gone = false;
	/* The metadata is the library's own writing, but a value out of range is never taken for a pid. */
	if (cJSON_IsNumber(pid) && cJSON_IsNumber(start) && cJSON_IsNumber(ns) && pid->valuedouble >= 1 &&
	    pid->valuedouble <= 4194304 && start->valuedouble >= 0 && ns->valuedouble >= 0 &&
	    start->valuedouble < 9007199254740992.0 && ns->valuedouble < 9007199254740992.0)
		gone = util_proc_liveness((int)pid->valuedouble, (uint64_t)start->valuedouble,
					  (uint64_t)ns->valuedouble) == UTIL_PROC_DEAD;
	cJSON_Delete(j);
	return gone;
}

int tether_hold(const char *addr, bool hold)
{
	int r = agent_tether_hold(addr, hold, NULL);
	/* An agent without tethers holds none: nothing to keep from ending a restored copy. */
	return r == -EOPNOTSUPP ? 0 : r;
}

int tether_orphans(space_ctx *ctx, char (*ids)[32], int max)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	struct store_sandbox_filter f = { .statuses = STORE_ST_ANY & ~STORE_ST(STORE_DESTROYED) };
	struct store_sandbox *rows = NULL;
	size_t n = 0;
	r = store_sandbox_list(s, &f, &rows, &n);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	int k = 0;
	for (size_t i = 0; i < n && k < max; i++) {
		/* Its lifetime was the tether's: gone with its holder, or ended by it while the holder lives on
		 * (the handle was freed, or its agent died: the reap before this one recorded it failed, under
		 * its lock, and a failed sandbox never runs again), it is destroyed rather than kept as failed. */
		bool ended = rows[i].status == STORE_FAILED && tether_recorded(rows[i].metadata);
		if (ended || tether_holder_gone(rows[i].metadata))
			snprintf(ids[k++], 32, "%s", rows[i].id);
	}
	store_sandbox_list_free(rows, n);
	return k;
}
