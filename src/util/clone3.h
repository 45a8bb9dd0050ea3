/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clone3(2), which glibc does not wrap, for a child that runs a function: what clone(2) does for fn(arg), with
 * clone3's extra fields (CLONE_INTO_CGROUP above all: a child born in a cgroup is never migrated into it, and
 * a migration waits for an RCU grace period, 5-20 ms measured on a 2-core host, while it holds the lock every
 * fork and exit of the machine takes).
 */
#pragma once

#include <errno.h>
#include <linux/sched.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * Starts a child with args (flags, exit_signal, stack and stack_size, cgroup...) that runs fn(arg) and exits
 * with its return value. With args->stack set the child starts on that stack, where no C frame of ours
 * exists; without it (no CLONE_VM) it runs on its copy of ours, as after fork(). Returns the pid in the
 * parent, or -errno (-ENOSYS, -E2BIG or -EINVAL: the kernel lacks clone3 or a flag asked for).
 */
pid_t util_clone3(struct clone_args *args, int (*fn)(void *), void *arg);

/* Whether util_clone3's result r says the kernel lacks clone3 or a flag asked for (the caller then falls back
 * to clone(2)), as opposed to a failure clone(2) would meet too. */
static inline bool util_clone3_unsupported(pid_t r)
{
	return r == -ENOSYS || r == -E2BIG || r == -EINVAL;
}
