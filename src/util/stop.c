/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stopping a sandbox's processes through its cgroup, and one helper through a pidfd (stop.h).
 */
#include <dirent.h>
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

#define CG_ROOT "/sys/fs/cgroup"

int util_stop_cgroup_spec(const char *id, char *buf, size_t len)
{
	int ver = util_cgroup_version();
	if (ver < 0)
		return ver;
	if (!id || !util_name_valid(id))
		return -EINVAL;
	int n = snprintf(buf, len, "v%d:%s/%s", ver, ver == 2 ? "space.slice" : "space", id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The directory holding the member lists of spec: the unified tree (v2) or the freezer hierarchy (v1),
 * which every sandbox process joins (util_cgroup_attach). */
static int members_dir(const char *spec, char *buf, size_t len, int *ret_ver)
{
	if (!spec || (strncmp(spec, "v1:", 3) && strncmp(spec, "v2:", 3)) || strstr(spec, ".."))
		return -EINVAL;
	*ret_ver = spec[1] - '0';
	int n = snprintf(buf, len, CG_ROOT "%s/%s", *ret_ver == 2 ? "" : "/freezer", spec + 3);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Counts the processes of dir and its sub-cgroups; sends each SIGKILL when kill_them. */
static int members(const char *dir, bool kill_them, int depth)
{
	char path[1024];
	int n = 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	long pid;
	while (f && fscanf(f, "%ld", &pid) == 1) {
		n++;
		/* Only while the cgroup is frozen (v1): a listed process cannot exit, so its pid is not reused. */
		if (kill_them && pid > 1)
			(void)kill((pid_t)pid, SIGKILL);
	}
	_cleanup_closedir_ DIR *d = depth < 8 ? opendir(dir) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < sizeof(path))
			n += members(path, kill_them, depth + 1);
	}
	return n;
}

int util_stop_cgroup(const char *spec, int timeout_ms)
{
	char dir[512], path[600];
	int ver, r = members_dir(spec, dir, sizeof(dir), &ver);
	if (r < 0)
		return r;
	uint64_t deadline = util_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
	for (int round = 0; access(dir, F_OK) == 0 && members(dir, false, 0) > 0; round++) {
		if (util_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (round % 20 == 0) {
			bool killed = false;
			if (ver == 2) {
				snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
				_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
				killed = fd >= 0 && write(fd, "1", 1) == 1;
			}
			if (!killed) {
				/* cgroup v1, or v2 without cgroup.kill (before 5.14). Frozen, nothing in it forks or
				 * exits: the list is exact and no pid is reused. */
				if (util_cgroup_freeze(spec, true) == 0)
					(void)members(dir, true, 0);
				(void)util_cgroup_freeze(spec, false);
			}
		}
		util_sleep_ms(5);
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
