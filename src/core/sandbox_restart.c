/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Restarting a sandbox on another disk (rollback to a checkpoint): stop it through its back-end, replace
 * its subvolume by a clone of the checkpoint's, start it again with the same id, hostname, limits,
 * environment, host uid and egress policy (and the checkpoint's memory, when its back-end restores one).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/backend.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "core/uids.h"
#include "net/net.h"
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/util.h"

/*
 * After a restart (rollback) the sandbox has a new network namespace: a new gateway with the policy it
 * was created with, and the trust it was given then. When that policy cannot be applied again (a secret
 * from an environment variable this process does not have, a registered secret since removed), the
 * sandbox gets a gateway with an empty policy: no egress, attempts recorded.
 */
int sandbox_net_reattach(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row, pid_t pid)
{
	(void)net_sandbox_detach(ctx, row->info.id);
	cJSON *j = row->metadata ? cJSON_Parse(row->metadata) : NULL;
	const char *policy = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "network_policy"));
	bool trusted = false;
	char **allow = NULL;
	int r = sandbox_policy_from_meta(j, &trusted, &allow);
	if (r == 0)
		r = sandbox_net_attach(ctx, ops, row, pid, policy, trusted, (const char *const *)allow);
	sandbox_strv_free(allow);
	if (r < 0 && policy) {
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: its egress policy cannot be applied again (%s); it has no "
						"egress now", row->info.id, ctx->last_error);
		r = sandbox_net_attach(ctx, ops, row, pid, "{}", false, NULL);
	}
	cJSON_Delete(j);
	return r;
}

/* The row's metadata (without the uid_base key rows before schema 7 kept there: it is a column now) and
 * its hostname; NULL on allocation failure. */
static char *metadata_restarted(const char *meta, char *hostname, size_t hlen)
{
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	if (!j)
		j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hostname");
	if (cJSON_IsString(h) && util_name_valid(h->valuestring))
		snprintf(hostname, hlen, "%s", h->valuestring);
	cJSON_DeleteItemFromObjectCaseSensitive(j, "uid_base");
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

int sandbox_restart_from(space_sandbox *sb, const char *disk_src, const char *why)
{
	space_ctx *ctx = sandbox_ctx(sb);
	const char *id = space_sandbox_id(sb);
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	const struct backend_ops *ops;
	if ((r = backend_for_row(ctx, &row, &ops)) < 0) {
		sandbox_row_clear(&row);
		return r;
	}
	struct backend_proc proc = { 0 };
	struct agent_info ai;
	char hostname[64];
	char *meta = NULL;
	uint32_t lifetime = 0;
	if (row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED) {
		r = ctx_error_msg(ctx, -ESRCH, "sandbox %s is %s", id, space_sandbox_status_name(row.info.status));
		goto out;
	}
	/* periodic snapshots (core/autosnap.c): no pruning of disk_src while it is copied */
	if ((r = autosnap_before_restart(ctx, id, row.metadata, disk_src)) < 0)
		goto out;
	if (ops->resume_before_restart && row.info.status == SPACE_SANDBOX_PAUSED)
		(void)ops->pause(ctx, &row, false);
	r = ops->stop(ctx, &row);
	if (r < 0)
		goto out;
	util_fault_point("rollback", 1);
	r = store_btrfs_subvolume_delete(row.info.path); /* the stop waited for a jail's loop device */
	if (r < 0) {
		ctx_error(ctx, r, "delete subvolume %s", row.info.path);
		goto failed;
	}
	util_fault_point("rollback", 2);
	/* A VM checkpoint restores memory too; a disk-only one boots the VM afresh on it (backend.h). */
	char snap[PATH_MAX];
	uint32_t snap_cpus, snap_mem;
	struct space_sandbox_options same = { .cpus = row.info.cpus, .memory_mib = row.info.memory_mib };
	bool restore = sandbox_restore_source(ctx, ops, disk_src, &same, snap, sizeof(snap), &snap_cpus, &snap_mem);
	r = store_btrfs_snapshot(disk_src, row.info.path, false);
	if (r < 0) {
		ctx_error(ctx, r, "snapshot %s", disk_src);
		goto failed;
	}
	backend_snapshot_files_drop(row.info.path); /* restores map the source's file */
	util_fault_point("rollback", 3);
	if (row.info.expires_ms) {
		int64_t left = (row.info.expires_ms - util_wall_ms() + 999) / 1000;
		lifetime = left > 0 ? (uint32_t)left : 1;
	}
	snprintf(hostname, sizeof(hostname), "%s", id);
	free(metadata_restarted(row.metadata, hostname, sizeof(hostname))); /* only for the hostname */
	if ((r = uids_reclaim(ctx, &row)) < 0) /* the same host uid(s) again, normally */
		goto failed;
	r = ops->start(ctx, &row, hostname, lifetime, restore ? snap : NULL, &proc, &ai);
	if (r < 0)
		goto failed;
	util_fault_point("rollback", 4);
	if ((r = sandbox_net_reattach(ctx, ops, &row, proc.pid)) < 0) {
		backend_stop_started(ctx, ops, &row, &proc);
		goto failed;
	}
	meta = metadata_restarted(row.metadata, hostname, sizeof(hostname));
	if (!meta) {
		r = -ENOMEM;
		backend_stop_started(ctx, ops, &row, &proc);
		goto failed;
	}
	r = sandbox_row_set_running(ctx, &row, &proc, meta, "restarted", why);
	if (r < 0) {
		free(meta);
		backend_stop_started(ctx, ops, &row, &proc);
		goto failed;
	}
	util_fault_point("rollback", 5);
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s restarted on %s (%s pid %d%s)", id, disk_src, ops->proc_name, proc.pid,
		restore ? ", memory restored" : "");
	if (autosnap_started(ctx, id, NULL, NULL) < 0) /* periodic snapshots go on */
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: periodic snapshots: %s", id, ctx->last_error);
	sandbox_handle_set_row(sb, &row); /* id stays valid: it is the handle's own copy */
	return 0;

failed: {
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	(void)sandbox_mark(ctx, id, SPACE_SANDBOX_FAILED, msg);
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
}
out:
	sandbox_row_clear(&row);
	return r;
}

