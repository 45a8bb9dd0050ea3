/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Periodic file snapshots: a sandbox's policy ("snapshots" in its row's metadata JSON: every, keep; the
 * space-snapd helper that takes them in the row's helper columns) and the work the helper does each
 * period. Private.
 */
#pragma once

#include <stdint.h>

#include "core/internal.h"

#define AUTOSNAP_EVERY_MAX (7u * 24 * 3600) /* a week */
#define AUTOSNAP_KEEP_MAX 100u
#define AUTOSNAP_KEEP_DEFAULT 5u

/* 0 when every (seconds, 0 = no policy) and keep (0 = the default) are acceptable; -EINVAL with a
 * message otherwise. */
int autosnap_validate(space_ctx *ctx, uint32_t every_s, uint32_t keep);

/*
 * The lifecycle calls this once a sandbox runs. o: the options it was created with (their policy, or
 * else its template's default, is recorded in the row); NULL after a restart on another disk (the policy
 * already in the row stays). Stops a helper of the sandbox that is still there and starts a new one when
 * there is a policy. Fails (with a message) only when the helper does not start.
 */
int autosnap_started(space_ctx *ctx, const char *id, const char *template_name,
		     const struct space_sandbox_options *o);

/*
 * The lifecycle calls this before it restarts a sandbox on disk_src (rollback): ends its helper, so that
 * it does not prune disk_src while the restart copies it (autosnap_started starts a new one afterwards).
 * -ENOENT with a message, and the helper started again, when disk_src was pruned already.
 */
int autosnap_before_restart(space_ctx *ctx, const char *id, const char *metadata, const char *disk_src);

/* The lifecycle calls this before it stops a sandbox for good: ends its helper (letting a snapshot in
 * progress finish) and removes its automatic checkpoints. Never fails; problems are logged. */
void autosnap_destroying(space_ctx *ctx, const char *id, const char *metadata);

/* The helper's work each period: takes an automatic checkpoint of the sandbox (disk only) and removes
 * its oldest automatic checkpoints beyond keep. */
int autosnap_take(space_ctx *ctx, const char *id, uint32_t keep, char ret_id[SPACE_CHECKPOINT_ID_MAX]);

/*
 * Asks the agent at addr (the sandbox's) to flush its filesystems, as agent_sync() does. With
 * ctx->sync_confined (space-snapd sets it) this process never reads the agent's bytes: it connects, and a
 * forked child that holds a uid slot of its own, no capabilities, no_new_privs and a seccomp allowlist
 * talks over the connection and reports only an errno (autosnap_sync.c). err (may be NULL) gets a local
 * description, never the agent's text, in that mode. Needs a single-threaded caller in that mode.
 */
struct agent_error;
int autosnap_sync(space_ctx *ctx, const char *sandbox_id, const char *addr, struct agent_error *err);

/* The number of seccomp rules of the confined sync process, or -errno if libseccomp cannot build them. */
int autosnap_sync_rule_count(void);

/* The policy recorded in a row's metadata (every, keep; zeros when none). pid is left 0: the helper is
 * recorded in the row's own columns (autosnap_policy_load). */
void autosnap_policy_parse(const char *metadata, struct space_snapshot_policy *ret);

/* A sandbox's policy and its helper (pid, with its start time into ret_pid_start, may be NULL) as recorded
 * in its row, whether or not the helper still runs. -ENOENT (with a message) when there is no such row. */
int autosnap_policy_load(space_ctx *ctx, const char *id, struct space_snapshot_policy *ret, uint64_t *ret_pid_start);

/* How long the helper waits for its sandbox's lock (store/lock.h) before it skips a period: the holder
 * (a rollback, a destroy) may be waiting for the helper itself to exit. */
#define AUTOSNAP_LOCK_WAIT_MS 2000u

/* --- core/checkpoint.c, for the helper: the same as the public calls, with the sandbox's lock already
 * held by the caller (store/lock.h's rule). --- */
int checkpoint_create_held(space_sandbox *sb, const char *name, char ret_id[SPACE_CHECKPOINT_ID_MAX]);
int checkpoint_remove_held(space_ctx *ctx, const struct checkpoint_info *c);
/* Removes every checkpoint of sandbox_id (space_sandbox_remove_v2's SPACE_REMOVE_WITH_CHECKPOINTS), taking
 * its lock. Returns how many, or -errno. */
int checkpoint_remove_all(space_ctx *ctx, const char *sandbox_id);
/* Finishes or removes what a checkpoint of sandbox_id made before its creator died (a subvolume at its
 * partial name: renamed into place when its row was written, deleted otherwise). The caller holds the
 * sandbox's lock (create and destroy do). Returns how many it found, or -errno. */
int checkpoint_partials_recover(space_ctx *ctx, const char *sandbox_id);
