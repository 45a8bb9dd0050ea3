/* SPDX-License-Identifier: Apache-2.0 */
#include "util/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

/* No allocation: the jail's stager calls it in a child that shares its parent's memory. */
static int stat_parse(const char *path, struct util_proc_stat *ret)
{
	char buf[2048]; /* 52 fields of at most 20 digits, and a comm of at most 64 bytes */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EPROTO;
	char state = p[2];
	p++;
	/* Fields 14 to 17 are utime, stime, cutime, cstime; 22 is the start time: counted from the ')'. */
	unsigned long long times[4] = { 0 }, v = 0;
	for (int field = 4; field <= 22; field++) {
		p = strchr(p + 1, ' '); /* p + 1: the field */
		if (!p)
			return -EPROTO;
		if ((field < 14 || field > 17) && field != 22)
			continue;
		char *end;
		errno = 0;
		unsigned long long x = strtoull(p + 1, &end, 10);
		/* cutime and cstime are signed in the kernel's format; never negative in practice. */
		if (errno || end == p + 1)
			return -EPROTO;
		if (field == 22)
			v = x;
		else
			times[field - 14] = x;
	}
	ret->state = state;
	ret->start_time = v;
	ret->utime = times[0], ret->stime = times[1], ret->cutime = times[2], ret->cstime = times[3];
	return 0;
}

int util_proc_stat(int pid, struct util_proc_stat *ret)
{
	if (pid <= 0)
		return -ESRCH;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return stat_parse(path, ret);
}

uint64_t util_proc_self_start_time(void)
{
	struct util_proc_stat s;
	return stat_parse("/proc/self/stat", &s) == 0 ? s.start_time : 0;
}

uint64_t util_proc_start_time(int pid)
{
	struct util_proc_stat s;
	return util_proc_stat(pid, &s) == 0 ? s.start_time : 0;
}

uint64_t util_pidns_self(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

enum util_proc_liveness util_proc_liveness(int pid, uint64_t start_time, uint64_t pidns)
{
	if (pid <= 0)
		return UTIL_PROC_DEAD;
	if (pidns) {
		uint64_t self = util_pidns_self();
		if (!self || self != pidns)
			return UTIL_PROC_UNKNOWN;
	}
	/* The pidfd pins the process while its start time is read: if it still runs afterwards, the stat line
	 * was its own. Without pidfds (ENOSYS before Linux 5.3, or a filter refusing them) the start time
	 * alone decides, as it did before. */
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0 && (errno == ESRCH || errno == EINVAL)) /* EINVAL: a thread's id now, not a process's */
		return UTIL_PROC_DEAD;
	struct util_proc_stat s;
	if (util_proc_stat(pid, &s) < 0)
		return UTIL_PROC_DEAD;
	/* A zombie has ended: only its parent has not collected it yet (a VMM's jail waiter may be a few
	 * milliseconds behind). */
	if (s.state == 'Z' || s.state == 'X' || (start_time && s.start_time != start_time))
		return UTIL_PROC_DEAD;
	if (pfd >= 0 && syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) < 0)
		return errno == ESRCH ? UTIL_PROC_DEAD : UTIL_PROC_ALIVE; /* EPERM: it runs, as another user */
	return UTIL_PROC_ALIVE;
}

bool util_proc_alive(int pid, uint64_t start_time)
{
	return util_proc_liveness(pid, start_time, 0) == UTIL_PROC_ALIVE;
}
