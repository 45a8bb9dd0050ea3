/* SPDX-License-Identifier: Apache-2.0 */
#include "util/freeze_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Under the address sanitizer a child sharing our memory would run on shadow memory it did not set up:
 * a plain fork-like clone there (the guard only makes system calls either way). */
#if defined(__SANITIZE_ADDRESS__)
#define GUARD_CLONE_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_CLONE_VM 0
#endif
#endif
#ifndef GUARD_CLONE_VM
#define GUARD_CLONE_VM CLONE_VM
#endif

#define GUARD_MEM (64 * 1024)

/* What the guard reads lives at the bottom of its own mapping: valid whatever becomes of our stack. */
struct guard_args {
	int done_r, done_w, fs_fd;
	char cgroup[UTIL_CGROUP_SPEC_MAX];
};

/* Shares our memory: system calls only, no allocation (we may have died holding the allocator's lock). */
static int guard_main(void *arg)
{
	const struct guard_args *a = arg;
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL); /* only SIGKILL and SIGSTOP reach it */
	/* Out of the caller's process group and terminal: a ^C or a kill of the group leaves the guard. */
	setsid();
	close(a->done_w);
	char c;
	ssize_t n;
	do
		n = read(a->done_r, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1) {
		/* The caller died with the freeze (maybe) on: undo it. Thawing what is not frozen is EINVAL. */
		if (a->fs_fd >= 0)
			(void)ioctl(a->fs_fd, FITHAW, 0);
		if (a->cgroup[0])
			(void)util_cgroup_freeze(a->cgroup, false);
	}
	_exit(0);
}

int util_freeze_guard_start(struct util_freeze_guard *g, int fs_fd, const char *cgroup)
{
	*g = (struct util_freeze_guard){ .pid = -1, .done_w = -1, .mem = NULL };
	if (cgroup && strlen(cgroup) >= UTIL_CGROUP_SPEC_MAX)
		return -ENAMETOOLONG;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	char *mem = mmap(NULL, GUARD_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (mem == MAP_FAILED) {
		int r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	struct guard_args *a = (struct guard_args *)mem;
	a->done_r = p[0];
	a->done_w = p[1];
	a->fs_fd = fs_fd;
	snprintf(a->cgroup, sizeof(a->cgroup), "%s", cgroup ? cgroup : "");
	pid_t pid = clone(guard_main, mem + GUARD_MEM, GUARD_CLONE_VM | SIGCHLD, a);
	int r = pid < 0 ? -errno : 0;
	close(p[0]);
	if (r < 0) {
		close(p[1]);
		munmap(mem, GUARD_MEM);
		return r;
	}
	g->pid = pid;
	g->done_w = p[1];
	g->mem = mem;
	return 0;
}

void util_freeze_guard_end(struct util_freeze_guard *g)
{
	if (g->pid <= 0)
		return;
	/* One byte: we undid everything ourselves. The guard then exits; it no longer uses its memory once
	 * it has been reaped. */
	(void)!write(g->done_w, "d", 1);
	close(g->done_w);
	while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
		;
	munmap(g->mem, GUARD_MEM);
	*g = (struct util_freeze_guard){ .pid = -1, .done_w = -1, .mem = NULL };
}
