/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stopping a sandbox's processes through its cgroup, and one helper through a pidfd (stop.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/cgroup.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/stop.h"
#include "util/util.h"

/* "v<ver>:<parent>/<id>" with the parent of this host's cgroup version. */
static int spec_of(const char *id, const char *v2_parent, const char *v1_parent, char *buf, size_t len)
{
	int ver = util_cgroup_version();
	if (ver < 0)
		return ver;
	if (!id || !util_name_valid(id))
		return -EINVAL;
	int n = snprintf(buf, len, "v%d:%s/%s", ver, ver == 2 ? v2_parent : v1_parent, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int util_stop_cgroup_spec(const char *id, char *buf, size_t len)
{
	return spec_of(id, "space.slice", "space", buf, len);
}

int util_stop_helpers_spec(const char *id, char *buf, size_t len)
{
	return spec_of(id, "space-helpers.slice", "space-helpers", buf, len);
}

int util_stop_helpers(const char *id, int timeout_ms)
{
	char spec[UTIL_CGROUP_SPEC_MAX];
	int r = util_stop_helpers_spec(id, spec, sizeof(spec));
	return r < 0 ? r : util_stop_cgroup(spec, timeout_ms);
}

int util_stop_cgroup(const char *spec, int timeout_ms)
{
	uint64_t start = util_now_ns(), deadline = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
	uint64_t next_kill = 0, pause_us = 100;
	for (;;) {
		bool empty;
		uint64_t now = util_now_ns();
		/* Killing again every 100 ms reaches what was forked while the last list was read. */
		int r = now >= next_kill ? util_cgroup_kill(spec, &empty) : util_cgroup_empty(spec, &empty);
		if (r < 0)
			return r;
		if (empty)
			break;
		if (now >= next_kill)
			next_kill = now + 100000000ULL;
		if (util_now_ns() >= deadline)
			return -ETIMEDOUT;
		/* Killed processes are usually gone within a millisecond: look again soon, then less often. */
		usleep((useconds_t)pause_us);
		pause_us = pause_us < 5000 ? pause_us * 2 : 5000;
	}
	uint64_t now = util_now_ns();
	return util_cgroup_remove(spec, now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL) + 1);
}

int util_stop_pid(int pid, uint64_t start_time, int sig, int wait_ms)
{
	if (pid <= 0)
		return 0;
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return errno == ESRCH ? 0 : -errno;
	/* The pidfd pins the process it was opened on: a start time read now is that process's. */
	struct util_proc_stat st;
	if (util_proc_stat(pid, &st) < 0 || (start_time && st.start_time != start_time) || st.state == 'Z' ||
	    st.state == 'X')
		return 0;
	if (syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0)
		return errno == ESRCH ? 0 : -errno;
	if (wait_ms <= 0)
		return 0;
	uint64_t deadline = util_now_ns() + (uint64_t)wait_ms * 1000000ULL;
	for (;;) {
		uint64_t now = util_now_ns();
		int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL) + 1;
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int n = poll(&p, 1, left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}
