/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting a sandbox's helper (spawn.h): into its cgroup, with exactly the descriptors asked for.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cgroup.h"
#include "util/clone3.h"
#include "util/procstat.h"
#include "util/spawn.h"
#include "util/stop.h"
#include "util/util.h"

/* As in src/jail: the spawning children share the caller's memory (no page tables of a large caller are
 * copied, and none of its pages becomes copy-on-write), except under sanitizers, whose per-thread state a
 * CLONE_VM child would corrupt: there they get a copy. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPAWN_CLONE_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SPAWN_CLONE_VM 0
#endif
#endif
#ifndef SPAWN_CLONE_VM
#define SPAWN_CLONE_VM CLONE_VM
#endif
#define SPAWN_STACK (64 * 1024)

struct spawn_args {
	const struct util_spawn_opts *o;
	int err_fd;     /* close-on-exec: EOF when the exec worked; an int -errno when not; the pid (> 0)
			 * from a detaching intermediate */
	int child_fd;   /* detach with CLONE_VM: the pidfd the intermediate opened (its table is ours) */
	pid_t child;    /* detach with CLONE_VM: the pid it started */
	int cgroup_fd;  /* v2: o->cgroup's directory, for CLONE_INTO_CGROUP; -1 otherwise */
	bool born_in;   /* the first child was born in o->cgroup (and so is any child of it): no join */
};

static void report(int fd, int v)
{
	if (fd >= 0)
		(void)!write(fd, &v, sizeof(v));
}

/* The helper's process: system calls only (with CLONE_VM it runs on its parent's stack until it execs). */
static void child_exec(const struct spawn_args *a)
{
	const struct util_spawn_opts *o = a->o;
	util_signals_default();
	int e;
	if (o->new_session && !o->detach)
		setsid();
	/* In the cgroup before anything of the helper runs: a stop through it never misses the helper. */
	if (o->cgroup && !a->born_in && (e = util_cgroup_attach(o->cgroup, (pid_t)syscall(SYS_getpid))) < 0) {
		report(a->err_fd, e);
		_exit(127);
	}
	/* Through copies above n first: a source may itself be one of 0..n-1 (a caller without stdin), and
	 * dup2 onto the same number would keep its close-on-exec flag. The error pipe goes above n too. */
	int tmp[UTIL_SPAWN_FDS_MAX], err = fcntl(a->err_fd, F_DUPFD_CLOEXEC, o->n_fds);
	for (int i = 0; i < o->n_fds; i++)
		if ((tmp[i] = fcntl(o->fds[i], F_DUPFD_CLOEXEC, o->n_fds)) < 0)
			goto fail;
	for (int i = 0; i < o->n_fds; i++)
		if (dup2(tmp[i], i) < 0)
			goto fail;
	/* Everything else closes at the exec, the error pipe with it: its reader then sees EOF. */
	syscall(SYS_close_range, (unsigned)o->n_fds, ~0U, CLOSE_RANGE_CLOEXEC);
	execv(o->path, (char *const *)o->argv);
fail:
	report(err, -(errno ? errno : EIO));
	_exit(127);
}

static int child_entry(void *arg)
{
	child_exec(arg);
	return 127;
}

/* The intermediate of a detached helper: a session of its own for the helper, which it leaves behind by
 * exiting. With CLONE_VM it shares our descriptor table too (CLONE_FILES), so the pidfd it opens on its own
 * child, whose pid no one can reuse while it is not reaped, is ours: no window for a reused pid. */
static int detach_entry(void *arg)
{
	struct spawn_args *a = arg;
	setsid();
	pid_t g = SPAWN_CLONE_VM ? vfork() : fork();
	if (g == 0)
		child_exec(a);
	if (g < 0)
		_exit(1);
	if (SPAWN_CLONE_VM) {
		a->child = g;
		a->child_fd = (int)syscall(SYS_pidfd_open, g, 0);
	}
	report(a->err_fd, g);
	_exit(0);
}

#if SPAWN_CLONE_VM
/* The first child born in the helpers' cgroup (v2): no migration, whose RCU grace period, taken under the
 * lock every fork and exit of the machine needs, was most of a sandbox's helper start (13 ms of a 30 ms
 * create on a 2-core host). -ENOSYS, -E2BIG, -EINVAL: the kernel cannot; the child then joins by itself. */
static pid_t start_in_cgroup(struct spawn_args *a, int (*fn)(void *), void *stack)
{
	struct clone_args ca = {
		.flags = CLONE_VM | CLONE_VFORK | (a->o->detach ? CLONE_FILES : 0) | CLONE_INTO_CGROUP,
		.exit_signal = SIGCHLD,
		.stack = (uint64_t)(uintptr_t)stack,
		.stack_size = SPAWN_STACK,
		.cgroup = (uint64_t)a->cgroup_fd,
	};
	a->born_in = true;
	pid_t pid = util_clone3(&ca, fn, a);
	if (pid < 0)
		a->born_in = false;
	return pid;
}
#endif

static pid_t start(struct spawn_args *a, int *ret_errno)
{
	int (*fn)(void *) = a->o->detach ? detach_entry : child_entry;
	pid_t pid = -ENOSYS;
#if SPAWN_CLONE_VM
	void *stack = mmap(NULL, SPAWN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		*ret_errno = ENOMEM;
		return -1;
	}
	/* Signals stay blocked in this thread meanwhile, so none of the caller's handlers runs on the
	 * children's stack; they unblock them only once their handlers are the defaults. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (a->cgroup_fd >= 0) {
		pid = start_in_cgroup(a, fn, stack);
		*ret_errno = pid < 0 ? -pid : 0;
	}
	if (a->cgroup_fd < 0 || util_clone3_unsupported(pid)) {
		pid = clone(fn, (char *)stack + SPAWN_STACK,
			    CLONE_VM | CLONE_VFORK | SIGCHLD | (a->o->detach ? CLONE_FILES : 0), a);
		*ret_errno = errno;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	munmap(stack, SPAWN_STACK);
#else
	/* Sanitizer builds: plain forks (instrumented code cannot run on a stack of our own, and a raw clone3
	 * would pass by the sanitizer's fork handling); the child joins the cgroup by itself. */
	pid = fork();
	*ret_errno = errno;
	if (pid == 0)
		_exit(fn(a));
#endif
	return pid;
}

int util_spawn(const struct util_spawn_opts *o, struct util_child *ret)
{
	if (!o || !o->path || !o->argv || o->n_fds < 0 || o->n_fds > UTIL_SPAWN_FDS_MAX || (o->n_fds && !o->fds))
		return -EINVAL;
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return -errno;
	struct spawn_args a = { .o = o, .err_fd = ep[1], .child_fd = -1, .child = 0, .cgroup_fd = -1 };
	if (o->cgroup && SPAWN_CLONE_VM)
		a.cgroup_fd = util_cgroup_dir_fd(o->cgroup); /* v1: the child joins by itself */
	int e = 0;
	pid_t pid = start(&a, &e);
	close(ep[1]);
	if (a.cgroup_fd >= 0)
		close(a.cgroup_fd);
	if (pid < 0) {
		close(ep[0]);
		return -e;
	}
	/* Until EOF: the intermediate's pid, the child's -errno, in either order (plain forks). */
	int v, exec_err = 0;
	pid_t child = o->detach ? 0 : pid;
	for (;;) {
		ssize_t k = read(ep[0], &v, sizeof(v));
		if (k < 0 && errno == EINTR)
			continue;
		if (k != (ssize_t)sizeof(v))
			break;
		if (v > 0 && o->detach)
			child = v;
		else if (v < 0)
			exec_err = v;
	}
	close(ep[0]);
	int pidfd = a.child_fd;
	if (o->detach) {
		int st = 0;
		pid_t w;
		while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
			;
		if (w != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || child <= 0) {
			if (pidfd >= 0)
				close(pidfd);
			return exec_err < 0 ? exec_err : -ECHILD;
		}
	} else if (exec_err < 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (exec_err < 0) {
		if (pidfd >= 0)
			close(pidfd);
		return exec_err;
	}
	/* A child of ours (or of our intermediate, sanitizer builds) is pinned by its pid until reaped. */
	if (pidfd < 0)
		pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	struct util_proc_stat ps = { 0 };
	if (pidfd >= 0 && util_proc_stat(child, &ps) < 0) {
		close(pidfd);
		pidfd = -1;
	}
	*ret = (struct util_child){ .pidfd = pidfd, .pid = child, .start_time = pidfd >= 0 ? ps.start_time : 0 };
	return 0;
}

int util_spawn_helpers_cgroup(const char *id, char *buf, size_t len)
{
	int r = util_stop_helpers_spec(id, buf, len);
	return r < 0 ? r : util_cgroup_helpers_create(buf);
}
