/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stopping a sandbox's processes through its cgroup (util/stop.h, util/cgroup.h), on whichever cgroup
 * back-end this host has: every member dies (a process forking as fast as it can included, and the members
 * of a frozen cgroup), a process outside the cgroup is never hit, the cgroup is gone afterwards, and a
 * second stop of what is already gone is no error, and 32 stopped at once all succeed within their usual
 * timeout. Needs root and cgroups; skips (77) without.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../check.h"
#include "util/cgroup.h"
#include "util/stop.h"
#include "util/util.h"

#define BURST 32

/* A child moved into spec before it runs mode: 0 sleeps, 1 forks children that fork (a small bomb bounded
 * by pids.max), 2 sleeps with a few sleeping children. */
static pid_t child_in(const char *spec, int mode)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (util_cgroup_attach(spec, getpid()) < 0)
			_exit(2);
		(void)!write(p[1], "x", 1);
		close(p[1]);
		if (mode == 1)
			for (;;)
				if (fork() < 0)
					usleep(1000);
		if (mode == 2)
			for (int i = 0; i < 4; i++)
				if (fork() == 0)
					break;
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

static bool reaped_dead(pid_t pid)
{
	int st;
	return waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static bool cgroup_gone(const char *spec)
{
	char buf[64];
	return util_cgroup_read(spec, "pids", "pids.max", buf, sizeof(buf)) == -ENOENT;
}

static int make(const char *id, char *spec)
{
	struct util_cgroup_limits lim = { .pids_max = 64 };
	char err[256];
	int r = util_cgroup_create(id, &lim, spec, UTIL_CGROUP_SPEC_MAX, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "create %s: %s\n", id, err);
	return r;
}

struct burst_one {
	char spec[UTIL_CGROUP_SPEC_MAX];
	pid_t pid;
	int r;
};

static void *stop_thread(void *arg)
{
	struct burst_one *b = arg;
	b->r = util_stop_cgroup(b->spec, 10000);
	return NULL;
}

int main(void)
{
	if (geteuid() != 0 || util_cgroup_version() < 0) {
		printf("SKIP: needs root and cgroups (v2, or v1 with pids and freezer)\n");
		return 77;
	}
	char id[64], spec[UTIL_CGROUP_SPEC_MAX];
	snprintf(id, sizeof(id), "sb-unit-stop-%d", (int)getpid());

	/* Members die, an outsider lives, the cgroup goes. */
	CHECK(make(id, spec) == 0);
	pid_t a = child_in(spec, 0), b = child_in(spec, 2), outsider = fork();
	if (outsider == 0)
		for (;;)
			pause();
	CHECK(a > 0 && b > 0 && outsider > 0);
	bool empty = true;
	CHECK(util_cgroup_empty(spec, &empty) == 0 && !empty);
	CHECK(util_stop_cgroup(spec, 10000) == 0);
	CHECK(reaped_dead(a));
	CHECK(reaped_dead(b));
	CHECK(cgroup_gone(spec));
	CHECK(util_cgroup_empty(spec, &empty) == 0 && empty);
	CHECK(waitpid(outsider, NULL, WNOHANG) == 0); /* still running */
	CHECK(util_stop_cgroup(spec, 1000) == 0);     /* already gone: fine */

	/* A forking loop is stopped too. */
	CHECK(make(id, spec) == 0);
	pid_t bomb = child_in(spec, 1);
	CHECK(bomb > 0);
	usleep(100 * 1000);
	CHECK(util_stop_cgroup(spec, 10000) == 0);
	CHECK(reaped_dead(bomb));
	CHECK(cgroup_gone(spec));

	/* Members of a frozen cgroup die (the kill thaws it). */
	CHECK(make(id, spec) == 0);
	pid_t frozen = child_in(spec, 2);
	CHECK(frozen > 0);
	CHECK(util_cgroup_freeze(spec, true) == 0);
	CHECK(util_stop_cgroup(spec, 10000) == 0);
	CHECK(reaped_dead(frozen));
	CHECK(cgroup_gone(spec));

	/* A burst: every stop succeeds. */
	static struct burst_one burst[BURST];
	pthread_t t[BURST];
	for (int i = 0; i < BURST; i++) {
		char bid[64];
		snprintf(bid, sizeof(bid), "%s-%d", id, i);
		burst[i].pid = -1;
		if (make(bid, burst[i].spec) == 0)
			burst[i].pid = child_in(burst[i].spec, 2);
		CHECK(burst[i].pid > 0);
	}
	for (int i = 0; i < BURST; i++)
		CHECK(pthread_create(&t[i], NULL, stop_thread, &burst[i]) == 0);
	int ok = 0;
	for (int i = 0; i < BURST; i++) {
		pthread_join(t[i], NULL);
		ok += burst[i].r == 0 && burst[i].pid > 0 && reaped_dead(burst[i].pid) && cgroup_gone(burst[i].spec);
	}
	printf("burst: %d of %d stopped at once\n", ok, BURST);
	CHECK(ok == BURST);

	kill(outsider, SIGKILL);
	waitpid(outsider, NULL, 0);
	return check_summary("util_cgroup_stop");
}
