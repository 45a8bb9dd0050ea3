/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private pieces of the jail. Functions marked "child-safe" run in the processes jail_start() clones from a
 * possibly multithreaded caller: they do not allocate and use only syscalls and snprintf.
 */
#pragma once

#include <sched.h>

/*
 * The children share the caller's memory (CLONE_VM, as posix_spawn does), except in sanitizer builds:
 * instrumented code in a CLONE_VM child corrupts the sanitizer's per-thread state, so there they get a copy.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define JAIL_CLONE_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define JAIL_CLONE_VM 0
#endif
#endif
#ifndef JAIL_CLONE_VM
#define JAIL_CLONE_VM CLONE_VM
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/cgroup.h"

#define JAIL_CGROUP_SPEC_MAX UTIL_CGROUP_SPEC_MAX

/* Formats a one-line error into buf (NULL or len 0: nothing). */
void jail_set_err(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));


/* ---- jail.c and pid1.c: the plan the stager and PID 1 follow, and their report to the caller ---- */

enum { JAIL_MSG_PID = 1, JAIL_MSG_DONE = 2 };

struct jail_msg {
	int type;
	int err;         /* JAIL_MSG_DONE: 0 or -errno */
	pid_t pid;       /* JAIL_MSG_PID */
	uint64_t start;  /* JAIL_MSG_PID */
	uint32_t uid_base;
	char loop[32];   /* JAIL_MSG_PID: the rootfs's loop device */
	char text[200];  /* JAIL_MSG_DONE with err != 0 */
};

struct jail_config;

/* Everything the children need, prepared before the first clone. */
struct jail_plan {
	const struct jail_config *cfg;
	int agent_fd, log_fd, null_fd, listen_fd; /* listen_fd: cfg->listen_fd, renumbered by the stager */
	const char *stage;
	const char *hostname;
	const char *const *argv;
	const void *bpf;
	size_t bpf_len;
	uint64_t nofile;
	uint32_t nproc;
	uint32_t uid_base; /* 0 = identity mapping */
	bool allow_identity;   /* idmapped mounts failing may fall back to the identity mapping */
	bool test_no_idmap;    /* test builds: act as if idmapped mounts failed */
	char cgroup[JAIL_CGROUP_SPEC_MAX];
	int cgroup_fd; /* v2: the cgroup's directory, for CLONE_INTO_CGROUP; -1 otherwise */
};

/* Sends the final message (JAIL_MSG_DONE) on fd and returns err; for a failure (err < 0) the text is
 * "<what>: <errno text>". Child-safe. */
int jail_send_done(int fd, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- pid1.c ---- */

/* PID 1's life until the agent's exec: waits for the stager's go byte on go_fd, then sets up the jail from
 * inside and execs the agent; reports a failure on err_fd and exits. Never returns. Child-safe. */
void jail_pid1_main(const struct jail_plan *p, int go_fd, int err_fd) __attribute__((noreturn));

/* Owner text (src/util/uidalloc.h) of a uid range slot held by a jail's PID 1 (or its creator, until PID 1
 * exists): "pid <pid> <start time> jail", which a stale-slot reaper can check against /proc. */
void jail_slot_owner(pid_t pid, uint64_t start_time, char *buf, size_t len);

/* cgroups: src/util/cgroup.h (util_cgroup_*), shared with the vm back-end. */

/* ---- rootfs.c: rootfs mount (on a util_loop_attach() device), /dev, pivot_root (all child-safe) ---- */

/*
 * Mounts the ext4 on loop_path as a detached mount (nodev, nosuid), makes sure it has /dev, and idmaps it
 * to userns_fd when >= 0. Returns the mount fd. *ret_step names the failing step for messages.
 */
int jail_rootfs_open(const char *loop_path, int *ret_mfd, const char **ret_step);
/* The same for a directory tree: a detached bind mount of it (nodev, nosuid). */
int jail_rootfs_open_tree(const char *tree, int *ret_mfd, const char **ret_step);
int jail_rootfs_idmap(int mfd, int userns_fd);

/* Attaches mfd at stage and fills stage/dev (tmpfs owned by owner_uid, device binds, symlinks). */
int jail_rootfs_attach(int mfd, const char *stage, uid_t owner_uid, const char **ret_step);

/*
 * Mounts the jail's proc (with sys, sysrq-trigger, irq, bus, fs read-only) and a read-only sysfs on
 * stage/proc and stage/sys, from a helper that joins pid1's pid and net namespaces. Done from the initial
 * user namespace, these mounts are locked once copied into the jail: it cannot unmount or remount them, nor
 * mount other proc or sysfs instances (the kernel allows that only while a fully visible one exists).
 * Moves the caller's pid_ns_for_children into the jail: call it after the last other fork.
 */
int jail_rootfs_pseudo(const char *stage, pid_t pid1);

/* In the jail's own mount namespace: makes stage the root and drops the old root. */
int jail_rootfs_pivot(const char *stage);

/* Brings the loopback interface of the current network namespace up. */
int jail_net_lo_up(void);

/* Picks an existing directory to mount the rootfs on inside the private staging namespace. */
const char *jail_stage_dir(void);

/* ---- seccomp.c ---- */

/* The program jail_seccomp_build() makes, built once per process and never freed: *ret_prog stays valid
 * for the process's life. Thread-safe. */
int jail_seccomp_program(const void **ret_prog, size_t *ret_len);

/* Sets no_new_privs and installs the classic BPF program built by jail_seccomp_build(). Child-safe. */
int jail_seccomp_install(const void *prog, size_t len);
