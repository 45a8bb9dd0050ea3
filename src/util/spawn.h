/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one way a sandbox's helpers are started (space-logcap, space-gateway, space-snapd, space-vmm).
 * Private to libspace.
 *
 * A helper starts in the cgroup it is given, before it runs anything of its own: the child writes itself
 * into the cgroup's cgroup.procs (every v1 hierarchy of it, or the unified one) between its fork and its
 * exec, so a stop through that cgroup (util/stop.h) can never miss it, not even one killed caller later.
 * Not through here: programs that are no sandbox's (util_run's tools, initramfs.c's cpio, doctor's probes)
 * and the confined children that never exec (autosnap_sync.c, unpack.c): they end with their caller.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/cgroup.h"

#define UTIL_SPAWN_FDS_MAX 16

struct util_spawn_opts {
	const char *path;         /* the binary, run as is (no PATH search) */
	const char *const *argv;  /* argv[0] its name; NULL-terminated */
	const int *fds;           /* fds[i] becomes the child's descriptor i, i < n_fds; no other is kept */
	int n_fds;                /* 0..UTIL_SPAWN_FDS_MAX */
	bool new_session;         /* setsid() before the exec */
	bool detach;              /* started by an intermediate child that exits at once: the caller reaps
	                           * nothing and the child is nobody's (implies a new session) */
	const char *cgroup;       /* a spec (util/cgroup.h) the child joins before its exec, or NULL */
};

struct util_child {
	int pidfd;           /* of the child (the caller closes it); -1 when it had already ended */
	pid_t pid;
	uint64_t start_time; /* /proc/PID/stat's, read while pidfd was held; 0 with pidfd -1 */
};

/*
 * Starts o->path with every signal default and unblocked. Both the child (and the intermediate) share the
 * caller's memory until the exec (clone(CLONE_VM|CLONE_VFORK), vfork), except in sanitizer builds, and make
 * only system calls, so the caller may have threads and a large one copies no page tables.
 * Returns 0 once the program runs, with *ret filled; the exec's -errno (-ENOENT, -EACCES, ...) or the
 * cgroup join's when it could not; -ECHILD when the intermediate failed. A child not detached is the
 * caller's to reap (waitpid or waitid(P_PIDFD)).
 */
int util_spawn(const struct util_spawn_opts *o, struct util_child *ret);

/* The cgroup of sandbox id's helpers (util_stop_helpers_spec, util/stop.h) into buf, created when missing:
 * what o->cgroup names for space-logcap, space-gateway and space-snapd. 0 or -errno. */
int util_spawn_helpers_cgroup(const char *id, char *buf, size_t len);
