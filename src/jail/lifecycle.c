/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running jail, seen from outside: alive, kill, freeze. These work from any process (the jail outlives
 * its creator) with only the plain data of jail_info; a pid is trusted only together with its start time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"
#include "jail/jail_internal.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/uidalloc.h"
#include "util/util.h"

const char *jail_describe_boundary(void)
{
	return "jail mode: namespaces + seccomp on the shared host kernel; a kernel bug is a way out, so this "
	       "is a weaker boundary than a microVM";
}

int jail_alive(const struct jail_info *info)
{
	struct util_proc_stat ps;
	if (!info || info->pid <= 0)
		return 0;
	if (util_proc_stat(info->pid, &ps) < 0)
		return 0;
	return ps.start_time == info->start_time && ps.state != 'Z' && ps.state != 'X';
}

void jail_slot_owner(pid_t pid, uint64_t start_time, char *buf, size_t len)
{
	snprintf(buf, len, "pid %d %llu jail", (int)pid, (unsigned long long)start_time);
}

int jail_kill(const struct jail_info *info, int timeout_ms)
{
	if (!info)
		return -EINVAL;
	uint64_t deadline = util_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
	int r = 0;

	if (info->pid > 0) {
		/* Open the pidfd first, then check the start time: the pidfd pins that very process. */
		_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, info->pid, 0);
		struct util_proc_stat ps;
		if (pidfd >= 0 && util_proc_stat(info->pid, &ps) == 0 && ps.start_time == info->start_time) {
			if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
				return -errno;
			/* A frozen jail cannot act on SIGKILL: thaw it, with the kill already pending. */
			if (info->cgroup[0])
				util_cgroup_freeze(info->cgroup, false);
			for (;;) {
				uint64_t now = util_now_ns();
				int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL) + 1;
				struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
				int n = poll(&pfd, 1, left);
				if (n > 0)
					break;
				if (n == 0)
					return -ETIMEDOUT;
				if (errno != EINTR)
					return -errno;
			}
			/* Reap it if it happens to be our child (caller is its subreaper); ignore otherwise. */
			siginfo_t si;
			waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG);
		}
	}
	if (info->cgroup[0]) {
		uint64_t now = util_now_ns();
		int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL);
		r = util_cgroup_remove(info->cgroup, left);
	}
	if (r == 0 && info->uid_slot) {
		/* PID 1 is gone: the range it held (in its name, so no other jail's) is free again. */
		char owner[64];
		jail_slot_owner(info->pid, info->start_time, owner, sizeof(owner));
		(void)uidalloc_release(UIDALLOC_RANGE, info->uid_slot, owner);
	}
	return r;
}

int jail_freeze(const struct jail_info *info, bool frozen)
{
	if (!info || !info->cgroup[0])
		return -EINVAL;
	if (!jail_alive(info))
		return -ESRCH;
	return util_cgroup_freeze(info->cgroup, frozen);
}
