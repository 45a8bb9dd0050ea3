/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one reader of /proc/PID/stat, and liveness that is correct from any pid namespace.
 *
 * A pid means something only in the pid namespace it was seen in. Whoever records a pid (in the store, in
 * a uid slot's owner text) records with it that namespace (util_pidns_self(): the inode of
 * /proc/self/ns/pid) and the process's start time (field 22 of /proc/PID/stat, against pid reuse). A
 * process in another namespace cannot judge that pid: util_proc_liveness() answers UTIL_PROC_UNKNOWN
 * there, and callers must then change nothing (never mark a sandbox failed on a guess).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct util_proc_stat {
	char state;          /* field 3: R, S, D, Z, X, ... */
	uint64_t start_time; /* field 22: clock ticks after boot */
	/* Fields 14 to 17, in clock ticks: CPU time in user and kernel mode of the process (all its threads),
	 * and of its children it has waited for. */
	uint64_t utime, stime, cutime, cstime;
};

/* Reads /proc/PID/stat: -ESRCH when there is no such process (or pid <= 0), -EPROTO for a line that does
 * not parse (comm, field 2, may hold spaces and parentheses: fields after it are counted from the last
 * ')'). Allocates nothing, so a child sharing its parent's memory may call it. */
int util_proc_stat(int pid, struct util_proc_stat *ret);

/* Start time of pid, 0 when it does not exist. self: of the calling process, through /proc/self (right
 * even where the pid numbers of /proc are another namespace's). */
uint64_t util_proc_start_time(int pid);
uint64_t util_proc_self_start_time(void);

/* The inode of this process's pid namespace (/proc/self/ns/pid), 0 when it cannot be read. */
uint64_t util_pidns_self(void);

enum util_proc_liveness {
	UTIL_PROC_DEAD = 0,    /* gone, a zombie, or another process now has the pid */
	UTIL_PROC_ALIVE = 1,   /* the very process that was recorded */
	UTIL_PROC_UNKNOWN = 2, /* recorded in another pid namespace (or ours cannot be read): not judged */
};

/*
 * Whether the process recorded as (pid, start_time, pidns) still runs, asked from this process's pid
 * namespace. start_time 0 skips the reuse check; pidns 0 means "not recorded" (rows written before
 * schema 7) and is judged in this namespace, as before. Within the namespace: a pidfd is opened first and
 * the start time read while it is held, then the pidfd is asked whether the process still runs, so the
 * start time read is the recorded process's and not a successor's.
 */
enum util_proc_liveness util_proc_liveness(int pid, uint64_t start_time, uint64_t pidns);

/* util_proc_liveness(pid, start_time, 0) == UTIL_PROC_ALIVE: for pids this process saw itself. */
bool util_proc_alive(int pid, uint64_t start_time);
