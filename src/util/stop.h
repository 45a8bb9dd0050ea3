/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stopping what a sandbox runs, with no pid that could name another process. Private to libspace.
 *
 * A sandbox's processes (a jail's PID 1 and everything it forks, a space-vmm and its threads) live in its
 * cgroup, whose name follows from the sandbox id alone (util_stop_cgroup_spec): whoever destroys a sandbox
 * ends them all through the cgroup (util_stop_cgroup), even when its creator was killed before it could
 * record any pid. A single helper known by pid is ended through a pidfd taken before its start time is
 * checked (util_stop_pid): the signal reaches that very process or nothing.
 *
 * All functions return 0 or -errno and need root.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The cgroup spec (util/cgroup.h) util_cgroup_create gives sandbox id on this host, without creating it:
 * "v1:space/<id>" or "v2:space.slice/<id>". -EOPNOTSUPP without usable cgroups, -ENAMETOOLONG. */
int util_stop_cgroup_spec(const char *id, char *buf, size_t len);

/*
 * The cgroup of sandbox id's helpers (space-logcap, space-gateway, space-snapd: util/spawn.h), without
 * creating it: "v1:space-helpers/<id>" or "v2:space-helpers.slice/<id>". A sibling of the sandbox's, not
 * a child: a pause freezes the sandbox's cgroup whole, and a frozen space-snapd (which may hold the
 * sandbox's lock, and checkpoints paused sandboxes) would stall a checkpoint, rollback or destroy; and the
 * sandbox's memory and pids limits do not count its helpers. -EOPNOTSUPP, -EINVAL, -ENAMETOOLONG.
 */
int util_stop_helpers_spec(const char *id, char *buf, size_t len);

/*
 * Ends everything of sandbox id that runs outside its own cgroup: its helpers' cgroup (util_stop_helpers_spec)
 * through util_stop_cgroup. For a destroy, after the sandbox's own cgroup is stopped: once both are gone,
 * nothing of the sandbox runs. Idempotent.
 */
int util_stop_helpers(const char *id, int timeout_ms);

/*
 * Kills every process in the cgroup of spec and its sub-cgroups and waits until none is left, then removes
 * the cgroup(s), through util_cgroup_kill (cgroup.kill on v2; on v1 each member through a pidfd that checks
 * its membership), repeated until it is empty. Missing
 * cgroups are fine (idempotent). -ETIMEDOUT when something is still there after timeout_ms.
 */
int util_stop_cgroup(const char *spec, int timeout_ms);

/*
 * Sends sig to the process recorded as (pid, start_time) and, when wait_ms > 0, waits up to wait_ms for
 * it to be gone. A pidfd is opened first and the start time read while it is held, so a reused pid is never
 * signalled. 0 when it is gone (or was never there), -ETIMEDOUT when it still runs after the wait, -errno.
 * start_time 0 skips the reuse check (only for a child the caller has not reaped).
 */
int util_stop_pid(int pid, uint64_t start_time, int sig, int wait_ms);
