/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util_spawn (util/spawn.h): the child gets exactly the descriptors asked for, a pidfd and the start time
 * of the process that runs; an exec failure is its -errno and leaves no child; a detached child is nobody's
 * child of ours, in a session of its own. With root and cgroups: a helper started in a sandbox's helpers'
 * cgroup is a member before it runs, and util_stop_helpers ends it and removes the cgroup.
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

#include "../../check.h"
#include "util/cgroup.h"
#include "util/procstat.h"
#include "util/spawn.h"
#include "util/stop.h"
#include "util/util.h"

static bool gone_within(int pidfd, int ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

static bool line_of(int fd, char *buf, size_t len)
{
	return util_read_line_timeout(fd, buf, len, 5000) == 0;
}

int main(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), p[2];
	CHECK(null >= 0 && pipe2(p, O_CLOEXEC) == 0);
	char line[4096];

	/* The caller's child: descriptor 3 as asked, stdout elsewhere; pidfd and start time of it. */
	const char *a1[] = { "sh", "-c", "echo three $$ >&3", NULL };
	const int f1[4] = { null, null, null, p[1] };
	struct util_spawn_opts o = { .path = "/bin/sh", .argv = a1, .fds = f1, .n_fds = 4 };
	struct util_child c = { .pidfd = -1 };
	CHECK(util_spawn(&o, &c) == 0);
	CHECK(c.pid > 0 && c.pidfd >= 0 && c.start_time > 0);
	CHECK(line_of(p[0], line, sizeof(line)) && !strncmp(line, "three ", 6) && atoi(line + 6) == c.pid);
	int st = 0;
	CHECK(waitpid(c.pid, &st, 0) == c.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(c.pidfd);

	/* An exec that fails: its errno, and no child left behind. */
	const char *a2[] = { "nope", NULL };
	struct util_spawn_opts o2 = { .path = "/nonexistent/nope", .argv = a2 };
	CHECK(util_spawn(&o2, &c) == -ENOENT);
	CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
	o2.detach = true;
	CHECK(util_spawn(&o2, &c) == -ENOENT);
	CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);

	/* Detached: not our child, a session of its own, the pid that runs and a pidfd on it. */
	const char *a3[] = { "sh", "-c", "echo $$ >&1; exec sleep 30", NULL };
	const int f3[3] = { null, p[1], null };
	struct util_spawn_opts o3 = { .path = "/bin/sh", .argv = a3, .fds = f3, .n_fds = 3, .detach = true };
	CHECK(util_spawn(&o3, &c) == 0);
	CHECK(c.pid > 0 && c.pidfd >= 0);
	CHECK(line_of(p[0], line, sizeof(line)) && atoi(line) == c.pid);
	CHECK(c.start_time == util_proc_start_time(c.pid));
	CHECK(waitpid(c.pid, NULL, WNOHANG) < 0 && errno == ECHILD);
	CHECK(getsid(c.pid) != getsid(0));
	CHECK(syscall(SYS_pidfd_send_signal, c.pidfd, SIGKILL, NULL, 0) == 0 && gone_within(c.pidfd, 5000));
	close(c.pidfd);

	if (geteuid() == 0 && util_cgroup_version() > 0) {
		/* In the helpers' cgroup before it runs: the first thing it does is read its own cgroup. */
		char id[64], spec[UTIL_CGROUP_SPEC_MAX], want[128];
		snprintf(id, sizeof(id), "sb-unit-spawn-%d", (int)getpid());
		CHECK(util_spawn_helpers_cgroup(id, spec, sizeof(spec)) == 0);
		const char *a4[] = { "sh", "-c", "echo $(cat /proc/self/cgroup) ''; exec sleep 30", NULL };
		struct util_spawn_opts o4 = { .path = "/bin/sh", .argv = a4, .fds = f3, .n_fds = 3, .detach = true,
					      .cgroup = spec };
		CHECK(util_spawn(&o4, &c) == 0);
		/* Its cgroup lines, joined by spaces: one of them ends in :/<the helpers' cgroup>. */
		snprintf(want, sizeof(want), ":/%s ", strchr(spec, ':') + 1);
		CHECK(line_of(p[0], line, sizeof(line)) && strstr(line, want));
		CHECK(util_stop_helpers(id, 10000) == 0);
		CHECK(gone_within(c.pidfd, 5000));
		char buf[64];
		CHECK(util_cgroup_read(spec, "freezer", "cgroup.procs", buf, sizeof(buf)) == -ENOENT);
		close(c.pidfd);
	} else
		printf("cgroup part skipped: needs root and cgroups\n");
	close(p[0]);
	close(p[1]);
	close(null);
	return check_summary("util_spawn");
}
