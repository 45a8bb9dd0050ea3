/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-sandbox locks, held across the steps of one operation (create, restart/rollback, checkpoint, fork,
 * destroy) by whichever process runs it: the CLI, `space serve`, a program linking libspace, the snapshot
 * helper. Private.
 *
 * A lock is flock(LOCK_EX) on <state_dir>/locks/<id>.lock, so it works across processes and across the
 * threads of one process (each take opens its own file description), and the kernel drops it when its
 * holder dies (kill -9 included): no stale lock to clean up. The descriptor is O_CLOEXEC: a helper the
 * holder spawns (every helper execs, or closes every descriptor above its stdio first) never inherits it,
 * so no process of a sandbox can hold its lock. Not re-entrant: a holder that takes the same lock again
 * waits for itself and gets -EBUSY after the wait.
 *
 * Who takes it (the rule every caller in src/core follows, so no thread ever takes a lock it holds):
 * - The public entry point (space_*) that starts a multi-step operation takes its sandbox's lock (through
 *   core_sandbox_lock) after its argument checks and releases it before it returns: checkpoint create,
 *   remove, rollback and fork (core/checkpoint.c), create and destroy (the lifecycle), the hand-out of a
 *   warm-pool sandbox (core/warm_pool.c, after its claim, released before a remove of a broken one).
 * - Everything such an entry point calls assumes the lock is held and never takes it: the *_held
 *   functions (checkpoint_create_held, checkpoint_remove_held), sandbox_restart_from (rollback holds it),
 *   autosnap_started and autosnap_before_restart. A public function never calls a public function that
 *   takes the same sandbox's lock while it holds it; it calls the _held variant. autosnap_destroying is
 *   called by destroy before it takes the lock (it ends the helper, which may be waiting for the lock)
 *   and takes none either.
 * - At most two locks at once, only in a fork: the source sandbox's (its checkpoints stay while they are
 *   copied), then each new sandbox's, taken by its creation. A new id is known to no other thread, so no
 *   wait cycle can form.
 * - The periodic snapshot helper (space-snapd: autosnap_take) waits only AUTOSNAP_LOCK_WAIT_MS and skips a
 *   period when the lock is held: the holder (a rollback, a destroy) may be waiting for the helper to exit.
 * Single-row changes (pause/resume, set_timeout, status compare-and-set) need no lock: each is one
 * transaction, and the state machine refuses a change from a status that moved meanwhile.
 */
#pragma once

#include <stddef.h>

/* How long a take waits for the holder before giving up. */
#define STORE_LOCK_WAIT_MS_DEFAULT 60000u

/*
 * Takes the lock of sandbox id, waiting up to wait_ms. Returns the descriptor holding it (>= 0: pass it to
 * store_lock_release), -EBUSY when another holder kept it for the whole wait, -EINVAL for an id that is
 * not a plain name ([a-z0-9-], at most 63 bytes: it becomes a file name), or -errno.
 */
int store_lock_take(const char *state_dir, const char *id, unsigned wait_ms);

/* Releases a lock (closes fd); a negative fd is ignored. */
void store_lock_release(int fd);

/* Removes id's lock file while holding its lock (fd): for destroy, so locks/ does not grow with every
 * sandbox ever made. A process waiting on the removed file notices and retries on a fresh one. */
void store_lock_remove(const char *state_dir, const char *id, int fd);

/* The lock file's path ("<state_dir>/locks/<id>.lock") into buf; -ENAMETOOLONG or -EINVAL. */
int store_lock_path(const char *state_dir, const char *id, char *buf, size_t len);
