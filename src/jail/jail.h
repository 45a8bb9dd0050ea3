/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jail: the weaker isolation mode of libspace. A sandbox runs as PID 1 of fresh user, pid, mount, net, ipc,
 * uts and cgroup namespaces on the host kernel, rooted (pivot_root) in its own loop-mounted ext4 image, with
 * cgroup limits (v1 or v2, chosen at run time), rlimits, no_new_privs and a seccomp deny list.
 *
 * It shares the host kernel: a kernel bug reachable through any allowed syscall is a way out. It is therefore
 * a weaker boundary than the microVM and is never chosen silently (see jail_describe_boundary()).
 *
 * Inside, PID 1 finds: its rootfs as /, a tmpfs /dev (null zero full random urandom tty bound from the host;
 * fd, stdin, stdout, stderr, ptmx symlinks; empty pts, shm, mqueue mount points), its own /proc (with
 * /proc/sys, sysrq-trigger, irq, bus, fs read-only) and a read-only /sys already mounted and locked (no
 * other proc or sysfs instance can be mounted inside), only lo (up),
 * fds 0 (/dev/null), 1 and 2 (log), 3 (listening socket), uid/gid 0, a fresh signal state.
 *
 * Call order: jail_start() -> [jail_alive() / jail_freeze()]* -> jail_kill(). jail_info is plain data: it can
 * be stored (SQLite) and used by another process later, because the sandbox outlives its creator.
 * All functions return 0 (or a documented >= 0 value) or -errno. They need root (CAP_SYS_ADMIN in the initial
 * user namespace).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct jail_config {
	const char *id;           /* sandbox id, a util_name_valid() name; names the cgroup */
	const char *rootfs_image; /* ext4 image file; loop-mounted read-write (nodev, nosuid) as / */
	const char *agent_path;   /* host path of the static space-agent; opened before pivot_root and run with
	                             execveat(AT_EMPTY_PATH), so no host mount is needed inside */
	const char *hostname;     /* NULL = id */
	int listen_fd;            /* becomes fd 3 of the agent (borrowed; -1 = none) */
	int log_fd;               /* agent stdout+stderr (borrowed; -1 = /dev/null) */
	unsigned cpus;            /* 0 = no limit; CPU quota = cpus * period */
	uint64_t memory_bytes;    /* 0 = no limit */
	uint32_t pids_max;        /* 0 = 4096 */
	uint64_t nofile;          /* RLIMIT_NOFILE; 0 = 65536 (clamped to fs.nr_open) */
	/*
	 * Replaces the agent's argv (default: space-agent --jail --listen-fd 3 --hostname <h>); argv[0] is only
	 * the name shown in /proc, agent_path is what runs. For tests and for running other PID 1 programs.
	 */
	const char *const *argv_override;
	/* Forces the identity uid/gid mapping (0..65535) instead of a private range + idmapped rootfs. */
	bool identity_map;
};

#define JAIL_CGROUP_MAX 256

struct jail_info {
	pid_t pid;                     /* PID 1 of the jail, in the caller's pid namespace */
	uint64_t start_time;           /* /proc/PID/stat field 22: guards against pid reuse */
	uint32_t uid_base;             /* host uid/gid of root inside (0 with the identity mapping) */
	char cgroup[JAIL_CGROUP_MAX];  /* "v1:<rel>" or "v2:<rel>" (relative to the hierarchy roots) */
};

/*
 * Starts a jail. Returns once PID 1 has exec'd the agent (execveat succeeded), with *ret filled in.
 * On failure nothing is left behind (no process, mount, loop device or cgroup) and, when errbuf is not NULL,
 * a one-line reason such as "mount rootfs /x.ext4: Invalid argument" is written to it.
 * PID 1 is not a child of the caller: it is reparented to init (or the caller's subreaper) and survives the
 * caller's exit and SIGHUP. If the caller dies while jail_start runs, the half-made jail dies too.
 * Does not allocate in the forked children, so it is safe to call from a multithreaded process.
 */
int jail_start(const struct jail_config *cfg, struct jail_info *ret, char *errbuf, size_t errlen);

/* 1 if PID 1 is running (same start time, not a zombie), 0 if it is gone or the pid was reused. */
int jail_alive(const struct jail_info *info);

/*
 * SIGKILLs PID 1 (the kernel then kills everything in its pid namespace), waits up to timeout_ms for it to
 * be gone (pidfd; works when PID 1 is not our child) and removes the cgroup(s). The rootfs mount and the loop
 * device go with the last process of the jail, asynchronously (the kernel tears the mount namespace down
 * after the processes; the loop device detaches at the last unmount). Idempotent: fine on a dead jail.
 * Returns -ETIMEDOUT if PID 1 or the cgroups did not go away in time (call again).
 */
int jail_kill(const struct jail_info *info, int timeout_ms);

/* Freezes (true) or thaws (false) every process of the jail through the cgroup freezer; waits until done. */
int jail_freeze(const struct jail_info *info, bool frozen);

/* One line for users: jail mode shares the host kernel, a weaker boundary than a microVM. */
const char *jail_describe_boundary(void);

/* Which cgroup back-end this host gives the jail: 2 (unified), 1 (v1 with pids and freezer), or
 * -EOPNOTSUPP. */
int jail_cgroup_version(void);

/* For tests. */

/* Builds the seccomp deny-list filter as a classic BPF program (malloc'ed sock_filter array, caller frees). */
int jail_seccomp_build(void **ret_prog, size_t *ret_len);
