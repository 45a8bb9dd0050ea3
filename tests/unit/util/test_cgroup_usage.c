/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox's cgroup uses (util_cgroup_usage), on whichever cgroup back-end this host has: a member
 * that burns CPU and touches memory shows in the figures (v1 without cpuacct beside cpu: through the
 * members' /proc times, which util_proc_stat reads); a gone cgroup is -ENOENT. Needs root and cgroups;
 * skips (77) without.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../check.h"
#include "util/cgroup.h"
#include "util/procstat.h"
#include "util/stop.h"
#include "util/util.h"

#define TOUCH_BYTES (24u << 20)

static uint64_t cpu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ms of this thread's CPU time (not wall time: on a busy machine a wall-time loop gets less CPU). */
static void burn_ms(unsigned ms)
{
	uint64_t end = cpu_now_ns() + (uint64_t)ms * 1000000;
	volatile uint64_t x = 0;
	while (cpu_now_ns() < end)
		x++;
}

/* A child in spec that burns 300 ms of CPU, touches TOUCH_BYTES of anonymous memory, says so and waits. */
static pid_t busy_child(const char *spec)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (util_cgroup_attach(spec, getpid()) < 0)
			_exit(2);
		burn_ms(300);
		char *m = mmap(NULL, TOUCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			_exit(3);
		memset(m, 1, TOUCH_BYTES);
		(void)!write(p[1], "x", 1);
		for (;;)
			pause();
	}
	close(p[1]);
	char c;
	bool ok = pid > 0 && read(p[0], &c, 1) == 1;
	close(p[0]);
	if (!ok && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* Limits are set while signals keep arriving (a handler without SA_RESTART, as a host program's SIGCHLD
 * may be): every create succeeds. v1's memory.limit_in_bytes fails with EINTR whenever one is pending. */
static void creates_under_signals(void)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, &old) == 0);
	struct itimerval it = { .it_interval = { 0, 20 }, .it_value = { 0, 20 } }, off = { 0 };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	int failed = 0;
	char err[256] = "";
	for (int i = 0; i < 100; i++) {
		char id[64], spec[UTIL_CGROUP_SPEC_MAX];
		snprintf(id, sizeof(id), "sb-unit-sig-%d-%d", (int)getpid(), i);
		struct util_cgroup_limits lim = { .pids_max = 16, .memory_bytes = 64u << 20 };
		if (util_cgroup_create(id, &lim, spec, sizeof(spec), err, sizeof(err)) < 0) {
			failed++;
			continue;
		}
		CHECK(util_cgroup_remove(spec, 5000) == 0);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	if (failed)
		fprintf(stderr, "%d of 100 creates failed under signals: %s\n", failed, err);
	CHECK(failed == 0);
}

int main(void)
{
	/* The /proc reader first: CPU time this process spent shows in its own fields. */
	burn_ms(100);
	struct util_proc_stat ps;
	CHECK(util_proc_stat(getpid(), &ps) == 0 && ps.utime + ps.stime >= 5 && ps.start_time > 0);
	if (geteuid() != 0 || util_cgroup_version() < 0) {
		printf("SKIP: needs root and cgroups (v2, or v1 with pids and freezer)\n");
		return 77;
	}
	char id[64], spec[UTIL_CGROUP_SPEC_MAX], err[256];
	snprintf(id, sizeof(id), "sb-unit-usage-%d", (int)getpid());
	struct util_cgroup_limits lim = { .pids_max = 16, .memory_bytes = 256u << 20 };
	CHECK(util_cgroup_create(id, &lim, spec, sizeof(spec), err, sizeof(err)) == 0);
	struct util_cgroup_usage before, after;
	CHECK(util_cgroup_usage(spec, &before) == 0);
	pid_t c = busy_child(spec);
	CHECK(c > 0);
	CHECK(util_cgroup_usage(spec, &after) == 0);
	fprintf(stderr, "cpu %llu -> %llu ns, memory %llu -> %llu bytes (file %llu, shmem %llu)\n",
		(unsigned long long)before.cpu_ns, (unsigned long long)after.cpu_ns,
		(unsigned long long)before.memory_bytes, (unsigned long long)after.memory_bytes,
		(unsigned long long)after.memory_file_bytes, (unsigned long long)after.memory_shmem_bytes);
	CHECK(after.cpu_ns >= before.cpu_ns + 200000000ull);
	CHECK(after.memory_bytes >= before.memory_bytes + TOUCH_BYTES - (4u << 20));
	CHECK(after.memory_file_bytes <= after.memory_bytes);
	CHECK(util_stop_cgroup(spec, 10000) == 0);
	if (c > 0)
		waitpid(c, NULL, 0);
	CHECK(util_cgroup_usage(spec, &after) == -ENOENT);
	CHECK(util_cgroup_usage("v3:nothing", &after) == -EINVAL);
	creates_under_signals();
	return check_summary("util_cgroup_usage");
}
