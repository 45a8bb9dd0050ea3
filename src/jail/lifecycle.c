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
#include "util/uidalloc.h"
#include "util/util.h"

const char *jail_describe_boundary(void)
{
	return "jail mode: namespaces + seccomp on the shared host kernel; a kernel bug is a way out, so this "
	       "is a weaker boundary than a microVM";
}

/* Field 22 of /proc/PID/stat, and the state letter (field 3). */
int jail_proc_stat(pid_t pid, uint64_t *ret_start, char *ret_state)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	/* comm may contain spaces and parentheses: fields restart after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EIO;
	p += 2;
	if (ret_state)
		*ret_state = *p;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EIO;
	*ret_start = v;
	return 0;
}

int jail_alive(const struct jail_info *info)
{
	uint64_t start;
	char state;
	if (!info || info->pid <= 0)
		return 0;
	if (jail_proc_stat(info->pid, &start, &state) < 0)
		return 0;
	return start == info->start_time && state != 'Z' && state != 'X';
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
		uint64_t start;
		char state;
		if (pidfd >= 0 && jail_proc_stat(info->pid, &start, &state) == 0 && start == info->start_time) {
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
