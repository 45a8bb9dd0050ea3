/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail space-vmm enters before any guest code runs (the process-level half of its sandbox; the
 * seccomp allowlist of sandbox.h is the other half, installed after it):
 *
 *   1. new mount, PID, IPC, UTS and (optionally) network namespaces; a fork makes the caller PID 1 of
 *      the new PID namespace, while the original process stays outside as a waiter that forwards
 *      termination signals (as SIGKILL: PID 1 ignores default-action signals) and exits with the
 *      child's status;
 *   2. cfg->setup runs in the child, still root, inside the new namespaces (a TAP created there
 *      belongs to the new network namespace) and with the host's files visible: every resource the
 *      VM needs is acquired here (KVM, guest RAM, disks, TAP, sockets, the kernel);
 *   3. the binds are mounted at the same paths under root_dir (nosuid, nodev), root_dir becomes / by
 *      pivot_root, the old root is detached and / is remounted read-only (binds keep their mode);
 *   4. rlimits (RLIMIT_NOFILE, RLIMIT_MEMLOCK, no core dumps), the capability bounding set emptied,
 *      supplementary groups dropped, gid then uid switched for good (no capability survives), not
 *      dumpable, no_new_privs. These are per-thread for the bounding set and no_new_privs: threads
 *      started in setup (device threads) keep their bounding set, hold no capability after the uid
 *      switch, and get no_new_privs from the seccomp filter's TSYNC.
 *
 * cgroup placement is the library's job, not this one's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct vmm_jail_cfg {
	const char *root_dir;     /* per-sandbox directory to pivot_root into (absolute; created if missing) */
	const char *const *binds; /* NULL-terminated host paths (files or directories) bind-mounted at the same
				     path under root_dir; NULL = none */
	uid_t uid;                /* unprivileged ids unique to the sandbox (the caller picks them; not 0) */
	gid_t gid;
	bool new_netns;           /* enter a new network namespace (create the TAP in setup) */
	uint64_t max_files;       /* RLIMIT_NOFILE; 0 leaves it as it is */
	uint64_t memlock_bytes;   /* RLIMIT_MEMLOCK */
	/*
	 * Called once in the jailed child after the namespaces exist and before pivot_root and the
	 * privilege drop. Returns 0 or -errno with a reason in err. May be NULL.
	 */
	int (*setup)(void *userdata, char *err, size_t errlen);
	void *userdata;
};

/*
 * Enters the jail (see above). Returns 0 in the jailed child, which continues as PID 1 of the new PID
 * namespace, or -errno with the reason in err (in the child when it failed after the fork: exit with
 * an error status then, and the waiter forwards it). The original process never returns: it waits
 * for the child and exits with its status (128 + signal if the child was killed, or dies of the
 * signal it forwarded). Call it while the process has a single thread.
 */
int vmm_jail_enter(const struct vmm_jail_cfg *cfg, char *err, size_t errlen);
