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
 * fd, stdin, stdout, stderr, ptmx symlinks; its own devpts on pts, tmpfs on shm; an empty mqueue mount
 * point), tmpfs on /tmp and /run, its own /proc (with /proc/sys, sysrq-trigger, irq, bus, fs read-only) and
 * a read-only /sys already mounted and locked, only lo (up), fds 0 (/dev/null), 1 and 2 (log), 3 (listening
 * socket), uid/gid 0 with every capability but CAP_SYS_PTRACE (gone from the bounding set too), a fresh
 * signal state. After its exec nothing can be mounted or unmounted and no namespace can be made
 * (seccomp.c); the network namespace belongs to the host's user namespace, so root inside cannot change
 * it (links, routes, traffic control, nf_tables) nor open raw or packet sockets. docs/jail.md lists what
 * root inside may and may not do.
 *
 * Uids: root inside is the first uid of a private range of 65536 host uids, unique on the machine
 * (src/util/uidalloc.h), and the rootfs is an idmapped mount, so files keep uids 0..65535 on disk whatever
 * the range (a restart may use another). Where the kernel cannot idmap the rootfs, jail_start refuses
 * (-EOPNOTSUPP) unless the caller allows the identity mapping (root inside = host uid 0 without host
 * capabilities), a weaker boundary.
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
	const char *rootfs_tree;  /* or (instead of the image): a directory tree, bind-mounted read-write
	                             (nodev, nosuid) as /; its owners are those inside (root's files uid 0) */
	const char *agent_path;   /* host path of the static space-agent; opened before pivot_root and run with
	                             execveat(AT_EMPTY_PATH), so no host mount is needed inside */
	const char *hostname;     /* NULL = id */
	int listen_fd;            /* becomes fd 3 of the agent (borrowed; -1 = none) */
	/* Agent stdout+stderr, and the jail's own start lines (borrowed; -1 = /dev/null). The library passes
	 * the write end of a pipe to a size-capping reader (space-logcap), never a host file: whatever PID 1
	 * holds is kept from the jail's other processes, but a pipe bounds what even PID 1 can store. */
	int log_fd;
	unsigned cpus;            /* 0 = no limit; CPU quota = cpus * period */
	uint64_t memory_bytes;    /* 0 = no limit */
	uint32_t pids_max;        /* 0 = 4096 */
	uint64_t nofile;          /* RLIMIT_NOFILE; 0 = 65536 (clamped to fs.nr_open) */
	/*
	 * Replaces the agent's argv (default: space-agent --jail --listen-fd 3 --hostname <h>); argv[0] is only
	 * the name shown in /proc, agent_path is what runs. For tests and for running other PID 1 programs.
	 */
	const char *const *argv_override;
	/*
	 * The host uid range: the first uid of a UIDALLOC_RANGE slot the caller holds (the library keeps one per
	 * sandbox). 0: jail_start takes a free slot itself, returned in jail_info.uid_slot and freed by
	 * jail_kill.
	 */
	uint32_t uid_base;
	/* Where idmapped mounts fail, run with the identity mapping instead of refusing (-EOPNOTSUPP). Only for
	 * an operator who chose that weaker boundary; the sandbox log then says so. */
	bool allow_identity_fallback;
	/* Forces the identity uid/gid mapping (0..65535) instead of a private range + idmapped rootfs. */
	bool identity_map;
	/*
	 * PID 1 runs this many nice levels above the caller (0 = as the caller; clamped at -20). The agent then
	 * keeps answering the host when the jail's own processes saturate its CPUs (a fork bomb: thousands of
	 * runnable tasks in its cgroup); it starts its children at the caller's level (--child-nice).
	 */
	unsigned agent_priority_boost;
};

#define JAIL_CGROUP_MAX 256 /* = UTIL_CGROUP_SPEC_MAX (src/util/cgroup.h) */

struct jail_info {
	pid_t pid;                     /* PID 1 of the jail, in the caller's pid namespace */
	uint64_t start_time;           /* /proc/PID/stat field 22: guards against pid reuse */
	uint32_t uid_base;             /* host uid/gid of root inside (0 with the identity mapping) */
	char cgroup[JAIL_CGROUP_MAX];  /* "v1:<rel>" or "v2:<rel>" (relative to the hierarchy roots) */
	uint32_t uid_slot;             /* a uid range slot jail_start took itself (cfg uid_base 0), which
	                                  jail_kill frees; 0 = none */
	char loop[32];                 /* the loop device its rootfs is mounted from ("/dev/loopN"; "" for a
	                                  tree); it is released once the jail's last process is gone */
};

/*
 * Starts a jail. Returns once PID 1 has exec'd the agent (execveat succeeded), with *ret filled in.
 * On failure nothing is left behind (no process, mount, loop device, cgroup or uid slot) and, when errbuf is
 * not NULL, a one-line reason such as "mount rootfs /x.ext4: Invalid argument" is written to it.
 * -EOPNOTSUPP: the rootfs could not be idmapped and the identity mapping was not allowed.
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
 * after the processes; the loop device detaches at the last unmount). Frees info->uid_slot once PID 1 is
 * gone. Idempotent: fine on a dead jail.
 * Returns -ETIMEDOUT if PID 1 or the cgroups did not go away in time (call again).
 */
int jail_kill(const struct jail_info *info, int timeout_ms);

/* Freezes (true) or thaws (false) every process of the jail through the cgroup freezer; waits until done. */
int jail_freeze(const struct jail_info *info, bool frozen);

/* One line for users: jail mode shares the host kernel, a weaker boundary than a microVM. */
const char *jail_describe_boundary(void);

/* For tests. */

/* Builds the seccomp deny-list filter as a classic BPF program (malloc'ed sock_filter array, caller frees). */
int jail_seccomp_build(void **ret_prog, size_t *ret_len);
