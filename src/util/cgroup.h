/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroups of sandboxes, for both isolation back-ends (a jail's PID 1 and its processes; a space-vmm and its
 * threads). Two kernel back-ends are chosen at run time: v2 (the unified hierarchy, "v2:space.slice/<id>")
 * or v1 (one hierarchy per controller, "v1:space/<id>", with pids and freezer required). A cgroup is named
 * by that spec string, which can be stored (SQLite) and used by another process later to freeze or remove
 * it. All functions return 0 (or a documented >= 0 value) or -errno and need root. Private to libspace.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Room for a spec string, NUL included. */
#define UTIL_CGROUP_SPEC_MAX 256

struct util_cgroup_limits {
	unsigned cpus;         /* 0 = no limit; CPU quota = cpus * period */
	uint64_t memory_bytes; /* 0 = no limit */
	uint32_t pids_max;     /* > 0 */
};

/* Which cgroup back-end this host gives sandboxes: 2 (unified), 1 (v1 with pids and freezer), or
 * -EOPNOTSUPP. */
int util_cgroup_version(void);

/*
 * Creates the sandbox's cgroup(s) for id with the limits and writes a spec ("v1:space/<id>" or
 * "v2:space.slice/<id>") into ret_spec. On failure nothing is left and errbuf says why.
 */
int util_cgroup_create(const char *id, const struct util_cgroup_limits *lim, char *ret_spec, size_t speclen,
		       char *errbuf, size_t errlen);

/*
 * Creates (when missing) the cgroup of a sandbox's helpers named by spec (util_stop_helpers_spec): on v1 in
 * the freezer hierarchy only (it lists every member, and the helpers get no limits), on v2 a leaf of its
 * own. 0 or -errno.
 */
int util_cgroup_helpers_create(const char *spec);

/* Moves pid into the cgroup(s) of spec. Child-safe (no allocation: usable between fork and exec). */
int util_cgroup_attach(const char *spec, pid_t pid);

/* Opens for writing the cgroup.procs file of each cgroup of spec (v1: of each controller the sandbox
 * uses) into fds (at most max, *ret_n of them), so that a pid can be moved in by a write alone. 0 or -errno
 * (nothing left open). */
int util_cgroup_procs_open(const char *spec, int *fds, size_t max, size_t *ret_n);

/* v2: an O_PATH descriptor of the cgroup's directory, for clone3(CLONE_INTO_CGROUP), which creates a
 * process in it without the migration (and its RCU grace period) that util_cgroup_attach costs. v1:
 * -EOPNOTSUPP. */
int util_cgroup_dir_fd(const char *spec);

/* Freezes or thaws the cgroup(s) of spec and waits (up to 5 s) until the state is reached. */
int util_cgroup_freeze(const char *spec, bool frozen);

/*
 * Sends SIGKILL to every process in the cgroup of spec and its sub-cgroups (v2: cgroup.kill; v1, or v2
 * without it: each listed member through a pidfd, after checking while the pidfd holds it that it is still
 * a member, so a reused pid is never hit), and thaws the cgroup so the kills land. *ret_empty says there was
 * nothing to kill (or no cgroup). Call again until empty: a process forked after the list was read is
 * listed by the next call.
 */
int util_cgroup_kill(const char *spec, bool *ret_empty);

/* *ret_empty: no process is left in the cgroup of spec or below it (or there is no such cgroup). */
int util_cgroup_empty(const char *spec, bool *ret_empty);

/*
 * Removes the cgroup(s) of spec and any sub-cgroups, killing what is left in them and retrying while they
 * are still busy until timeout_ms. Missing cgroups are fine. -ETIMEDOUT if something stays; -EINVAL for
 * a spec that is not one of ours.
 */
int util_cgroup_remove(const char *spec, int timeout_ms);

/* How many processes of the cgroup(s) of spec the OOM killer has killed so far (the memory controller's
 * oom_kill counter, its subtree's on v2). -EOPNOTSUPP when the kernel keeps no such counter. */
int util_cgroup_oom_kills(const char *spec, uint64_t *ret_count);

/* What the processes of a sandbox's cgroup use now. */
struct util_cgroup_usage {
	uint64_t cpu_ns;             /* CPU time so far (v2 cpu.stat usage_usec; v1 cpuacct.usage where it shares
	                                the cpu hierarchy, else the members' times from /proc) */
	uint64_t memory_bytes;       /* charged to it (memory.current, memory.usage_in_bytes), page cache included */
	uint64_t memory_file_bytes;  /* of which page cache (shared memory and tmpfs included) */
	uint64_t memory_shmem_bytes; /* of which shared memory and tmpfs (not reclaimable like the rest) */
};

/* The usage of the cgroup(s) of spec into *ret. -ENOENT when the cgroup is gone. */
int util_cgroup_usage(const char *spec, struct util_cgroup_usage *ret);

/* Reads the first line of <hierarchy>/<rel>/<file> for the given spec ("memory.max" etc.). For tests. */
int util_cgroup_read(const char *spec, const char *ctrl, const char *file, char *buf, size_t len);
