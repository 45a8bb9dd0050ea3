/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting a jail (lifecycle.c has alive/kill/freeze).
 *
 * Process chain:
 *   caller --clone(VM|VFORK)--> stager --clone(VM|NEWUSER|NEWPID|NEWIPC|NEWUTS)--> PID 1 --execveat--> agent
 * Both children share the caller's memory until they exit or exec (as posix_spawn does), so the cost does
 * not grow with the caller's size; they run only syscalls and snprintf on their own stacks, never malloc,
 * with the caller's signal handlers dropped, so callers may be multithreaded.
 * The stager is root in the initial user namespace, inside its own private mount namespace and the jail's
 * network namespace, which it makes before PID 1 so that the host's user namespace owns it: root inside then
 * holds no capability over its network (no link, route, traffic-control or nf_tables changes, no raw or
 * packet sockets), only what an unprivileged user may do, which the stager widens to binding low ports and
 * ping sockets. It brings lo up, loop-mounts the image (mounting ext4 is not possible from a user namespace), idmaps it to PID 1's user namespace,
 * sets rlimits, writes PID 1's uid/gid maps, builds /dev, mounts the jail's locked /proc and /sys, and puts
 * PID 1 in the cgroup(s). PID 1 then makes its own mount and cgroup namespaces (a copy of the staged tree,
 * owned by its user namespace), pivots into the rootfs, drops the host tree, mounts /dev/pts, /dev/shm, /tmp
 * and /run (after the filter nothing can be mounted), drops CAP_SYS_PTRACE for good (bounding set: no
 * process of the jail can reach another's memory or descriptors past a non-dumpable PID 1), sets
 * no_new_privs and seccomp, and execs the agent. The stager reports PID 1's pid
 * and start time, waits for the exec (close-on-exec pipe) and exits, so PID 1 is reparented away from the
 * caller. The loop device auto-clears and the mounts vanish when the jail's last process dies.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "jail/jail.h"
#include "jail/jail_internal.h"
#include "util/cleanup.h"
#include "util/clone3.h"
#include "util/loop.h"
#include "util/procstat.h"
#include "util/uidalloc.h"
#include "util/util.h"

#define UID_RANGE UIDALLOC_RANGE_SIZE
#define DEFAULT_PIDS 4096u
#define DEFAULT_NOFILE 65536u



void jail_set_err(char *buf, size_t len, const char *fmt, ...)
{
	if (!buf || len == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* strerror() may allocate or take locale locks: in the children use the untranslated table. */
static const char *errdesc(int err)
{
	const char *s = strerrordesc_np(err < 0 ? -err : err);
	return s ? s : "unknown error";
}

/* Sends the final message with a ready text; child-safe. */
static int send_text(int fd, int err, const char *text)
{
	struct jail_msg m = { .type = JAIL_MSG_DONE, .err = err };
	snprintf(m.text, sizeof(m.text), "%s", text);
	util_write_all(fd, &m, sizeof(m));
	return err;
}

/*
 * Sends the final message and returns err; for a failure (err < 0) the text is "<what>: <errno text>".
 * Child-safe.
 */
int jail_send_done(int fd, int err, const char *fmt, ...)
{
	char text[sizeof(((struct jail_msg *)0)->text)] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(text, sizeof(text), fmt, ap);
		va_end(ap);
		if (err < 0 && n >= 0 && (size_t)n < sizeof(text))
			snprintf(text + n, sizeof(text) - (size_t)n, ": %s", errdesc(err));
	}
	return send_text(fd, err, text);
}

static int write_proc(pid_t pid, const char *file, const char *val)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return util_write_all(fd, val, strlen(val));
}

static int write_id_maps(pid_t pid, uint32_t base)
{
	char map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", base, UID_RANGE);
	int r = write_proc(pid, "uid_map", map);
	return r < 0 ? r : write_proc(pid, "gid_map", map);
}

/* ---- PID 1, between clone and the agent's exec ---- */

/*
 * Sets resource to want (soft = hard). Raising a hard limit needs CAP_SYS_RESOURCE on the host, which a
 * containerized caller may lack: then the current hard limit is used.
 */
static int set_rlimit(int resource, uint64_t want)
{
	struct rlimit cur, rl = { want, want };
	if (setrlimit(resource, &rl) == 0)
		return 0;
	if (errno != EPERM || getrlimit(resource, &cur) < 0 || cur.rlim_max >= want)
		return -errno;
	rl.rlim_cur = rl.rlim_max = cur.rlim_max;
	return setrlimit(resource, &rl) < 0 ? -errno : 0;
}

/* Set in the stager, before PID 1 exists, so they hold from the first instruction of the jail. */
static int set_rlimits(const struct jail_plan *p)
{
	int r = set_rlimit(RLIMIT_NOFILE, p->nofile);
	if (r >= 0)
		r = set_rlimit(RLIMIT_CORE, 0);
	if (r >= 0)
		r = set_rlimit(RLIMIT_NPROC, p->nproc);
	return r;
}

/* ---- the stager ---- */

struct pid1_args {
	const struct jail_plan *p;
	int go, err;
	int go_w, err_r; /* the stager's ends, which PID 1 got copies of: closed first thing */
};

static int pid1_entry(void *arg)
{
	const struct pid1_args *a = arg;
	/* Without its own copy of the go pipe's write end, PID 1 reads EOF (and exits) if the stager dies
	 * before saying go (its creator was killed): it never waits on a pipe only it can write. */
	close(a->go_w);
	close(a->err_r);
	jail_pid1_main(a->p, a->go, a->err);
	return 1;
}

/* Stack for a CLONE_VM child; it runs only our syscall-making code, snprintf included. */
#define CHILD_STACK (256 * 1024)

static void *child_stack(void)
{
	void *st = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	return st == MAP_FAILED ? NULL : st;
}

/* PID 1 born in the jail's cgroup (v2: CLONE_INTO_CGROUP), so nothing is ever migrated into it: a migration
 * waits for an RCU grace period (10-16 ms measured on a 2-core host) on the creation's critical path.
 * -ENOSYS, -E2BIG or -EINVAL: the kernel lacks clone3 or CLONE_INTO_CGROUP (then PID 1 is moved). */
static pid_t clone_into_cgroup(int cgroup_fd, void *stack, struct pid1_args *a)
{
	struct clone_args ca = {
		.flags = JAIL_CLONE_VM | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_INTO_CGROUP,
		.exit_signal = SIGCHLD,
		.stack = JAIL_CLONE_VM ? (uint64_t)(uintptr_t)stack : 0,
		.stack_size = JAIL_CLONE_VM ? CHILD_STACK : 0,
		.cgroup = (uint64_t)cgroup_fd,
	};
	return util_clone3(&ca, pid1_entry, a);
}

/*
 * Creates PID 1 in new user, pid, ipc and uts namespaces (in the stager's network namespace). It shares our memory (CLONE_VM) until its
 * exec, so no page tables of a possibly large caller are copied; its stack is *ret_stack (unmap it once
 * PID 1 has exec'd or died) and *a must stay valid as long. It waits for a byte on *ret_go and reports
 * failures on *ret_err.
 */
static pid_t spawn_pid1(const struct jail_plan *p, struct pid1_args *a, int *ret_go, int *ret_err, void **ret_stack,
			bool *ret_in_cgroup)
{
	*ret_in_cgroup = false;
	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		int r = -errno;
		close(go[0]);
		close(go[1]);
		return r;
	}
	*a = (struct pid1_args){ .p = p, .go = go[0], .err = err[1], .go_w = go[1], .err_r = err[0] };
	void *stack = child_stack();
	pid_t pid = -ENOMEM;
	if (stack && p->cgroup_fd >= 0) {
		pid = clone_into_cgroup(p->cgroup_fd, stack, a);
		*ret_in_cgroup = pid > 0;
	}
	if (stack && (p->cgroup_fd < 0 || util_clone3_unsupported(pid))) {
		pid = clone(pid1_entry, (char *)stack + CHILD_STACK,
		            JAIL_CLONE_VM | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD,
		            a);
		if (pid < 0)
			pid = -errno;
	}
	if (stack && pid < 0)
		munmap(stack, CHILD_STACK);
	close(go[0]);
	close(err[1]);
	if (pid < 0) {
		close(go[1]);
		close(err[0]);
		return pid;
	}
	*ret_go = go[1];
	*ret_err = err[0];
	*ret_stack = stack;
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static void log_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		util_write_all(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/*
 * The directory of the IPv4 sysctls of the stager's network namespace (the jail's), from a procfs instance of
 * the stager's own: detached, it goes with the descriptor. In the host's /proc every network namespace that
 * was looked up has its own "sys/net" entry under that one name, and each lookup compares them one by one
 * (1.5 ms of a start at 1,000 live sandboxes); a new instance holds this namespace's alone. Where the kernel
 * has no fsopen(), the host's /proc: the same files, found more slowly.
 */
static int net_ipv4_sysctl_dir(void)
{
	int fs = fsopen("proc", FSOPEN_CLOEXEC);
	if (fs >= 0) {
		int mnt = fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0
				  ? -1
				  : fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
		close(fs);
		if (mnt >= 0) {
			int dir = openat(mnt, "sys/net/ipv4", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			close(mnt);
			if (dir >= 0)
				return dir;
		}
	}
	return open("/proc/sys/net/ipv4", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* In the jail's network namespace (its sysctls are the writer's), what an owner of the namespace would
 * allow anyway: binding ports below 1024, and ping sockets for every group (raw sockets are refused). */
static void stager_net_sysctls(const struct jail_plan *p)
{
	static const struct {
		const char *name, *value;
	} v[] = {
		{ "ip_unprivileged_port_start", "0" },
		{ "ping_group_range", "0 2147483647" },
	};
	int dir = net_ipv4_sysctl_dir();
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		int fd = dir < 0 ? -1 : openat(dir, v[i].name, O_WRONLY | O_CLOEXEC);
		int r = fd < 0 ? -errno : util_write_all(fd, v[i].value, strlen(v[i].value));
		if (fd >= 0)
			close(fd);
		if (r < 0)
			log_line(p->log_fd, "space-jail: net.ipv4.%s: %s (left as it was)\n", v[i].name, errdesc(r));
	}
	if (dir >= 0)
		close(dir);
}

/* PID 1 above the caller's priority (jail_config.agent_priority_boost): only host root can raise it, and
 * only before PID 1 is in its user namespace is there a host root to do it. Best effort: a host without
 * CAP_SYS_NICE runs the jail at one level. */
static void boost_pid1(const struct jail_plan *p, pid_t pid)
{
	if (!p->cfg->agent_priority_boost)
		return;
	errno = 0;
	int base = getpriority(PRIO_PROCESS, 0);
	if (base == -1 && errno)
		return;
	int want = base - (int)(p->cfg->agent_priority_boost > 39 ? 39 : p->cfg->agent_priority_boost);
	if (setpriority(PRIO_PROCESS, (id_t)pid, want < -20 ? -20 : want) < 0)
		log_line(p->log_fd, "space-jail: cannot raise PID 1's priority: %s\n", strerror(errno));
}

/*
 * cgroup v1 (no CLONE_INTO_CGROUP): the stager joins the jail's cgroups itself, through a short-lived child
 * that writes its pid while it goes on with its namespaces and the rootfs mount, so that PID 1, cloned
 * after the join, is born in them. A migration waits for an RCU grace period (5-20 ms measured on a 2-core
 * host); here it overlaps the mounts instead of following them. The child shares our memory and runs on a
 * stack of its own, but also our thread's errno (no TLS of its own): it makes raw write() syscalls only,
 * which never set errno, on cgroup.procs files the stager opened for it, so that nothing it does can change
 * an errno the stager is about to read. Architectures without a raw syscall below move PID 1 the usual way.
 */
#define JOIN_STACK (64 * 1024)
#define JOIN_MAX_FDS 8

#if defined(__x86_64__) && JAIL_CLONE_VM
#define JOIN_RAW 1
static long raw_write(int fd, const void *buf, size_t n)
{
	long ret;
	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "0"((long)SYS_write), "D"((long)fd), "S"(buf), "d"(n)
	                 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__) && JAIL_CLONE_VM
#define JOIN_RAW 1
static long raw_write(int fd, const void *buf, size_t n)
{
	register long x8 __asm__("x8") = SYS_write;
	register long x0 __asm__("x0") = fd;
	register long x1 __asm__("x1") = (long)buf;
	register long x2 __asm__("x2") = (long)n;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
}
#elif !JAIL_CLONE_VM
#define JOIN_RAW 1 /* the child has a memory (and errno) of its own */
static long raw_write(int fd, const void *buf, size_t n)
{
	ssize_t w = write(fd, buf, n);
	return w < 0 ? -errno : w;
}
#else
#define JOIN_RAW 0
#endif

struct joiner {
	int fds[JOIN_MAX_FDS];
	size_t nfds, len;
	char pid[16];
	pid_t child;
	void *stack;
};

static int join_entry(void *arg)
{
#if JOIN_RAW
	const struct joiner *j = arg;
	for (size_t i = 0; i < j->nfds; i++) {
		long w;
		int tries = 0;
		/* v1 cgroup files fail with EINTR whenever a signal is pending; one value is one write. */
		while ((w = raw_write(j->fds[i], j->pid, j->len)) == -EINTR && ++tries < 100)
			;
		if (w != (long)j->len)
			return 1;
	}
	return 0;
#else
	(void)arg;
	return 1;
#endif
}

static void join_start(const struct jail_plan *p, struct joiner *j)
{
	*j = (struct joiner){ .child = -1 };
	if (p->cgroup_fd >= 0 || !JOIN_RAW)
		return; /* v2: PID 1 is created in the cgroup */
	int n = snprintf(j->pid, sizeof(j->pid), "%d", (int)syscall(SYS_getpid));
	if (n <= 0 || (size_t)n >= sizeof(j->pid) || util_cgroup_procs_open(p->cgroup, j->fds, JOIN_MAX_FDS, &j->nfds) < 0)
		return;
	j->len = (size_t)n;
	void *st = mmap(NULL, JOIN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (st == MAP_FAILED)
		return;
	j->child = clone(join_entry, (char *)st + JOIN_STACK, JAIL_CLONE_VM | SIGCHLD, j);
	if (j->child < 0)
		munmap(st, JOIN_STACK);
	else
		j->stack = st;
}

/* True when the stager is in the jail's cgroups now (else PID 1 is moved into them the usual way). */
static bool join_wait(struct joiner *j)
{
	int st = 0;
	pid_t w = -1;
	if (j->child > 0) {
		while ((w = waitpid(j->child, &st, 0)) < 0 && errno == EINTR)
			;
		munmap(j->stack, JOIN_STACK);
	}
	while (j->nfds)
		close(j->fds[--j->nfds]);
	bool joined = j->child > 0 && w > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	j->child = -1;
	return joined;
}

static int stager_prepare(struct jail_plan *p, int out, char *loop, size_t looplen, int *ret_mfd);

static int stager_main(struct jail_plan *p, pid_t caller, int out)
{
	char loop[64], path[64];
	const char *step = "";
	int mfd = -1, go = -1, errfd = -1, r;
	struct pid1_args pa;
	void *stack = NULL;

	/* If the caller dies mid-way, the half-made jail goes with us (PID 1 sees EOF on its go pipe). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return jail_send_done(out, -errno, "prctl");
	if (getppid() != caller)
		_exit(1); /* the caller died before the death signal was armed */

	struct joiner jn;
	join_start(p, &jn);
	r = stager_prepare(p, out, loop, sizeof(loop), &mfd);
	bool joined = join_wait(&jn);
	if (r != 0)
		return r;
	bool in_cgroup;
	pid_t pid = spawn_pid1(p, &pa, &go, &errfd, &stack, &in_cgroup);
	if (pid < 0) {
		close(mfd);
		return jail_send_done(out, pid, "clone namespaces");
	}
	in_cgroup = in_cgroup || joined;
	boost_pid1(p, pid);

	if (p->uid_base) {
		/* Private uid range; the rootfs is idmapped so its root-owned files are root's inside. */
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		const char *what = "writing the uid/gid maps";
		r = write_id_maps(pid, p->uid_base);
		int nsfd = r < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
		if (r >= 0) {
			what = "idmapped mount of the rootfs";
			r = nsfd < 0 ? -errno : p->test_no_idmap ? -EINVAL : jail_rootfs_idmap(mfd, nsfd);
		}
		if (nsfd >= 0)
			close(nsfd);
		if (r < 0 && !p->allow_identity) {
			/* Fail closed: the identity map makes root inside host uid 0 (no capabilities, but owner
			 * of every root-owned host object a kernel bug or a leaked descriptor exposes). */
			jail_send_done(out, -EOPNOTSUPP, "%s failed (%s): refusing the identity uid map, under which root "
			          "inside would be host uid 0", what, errdesc(r));
			goto fail;
		}
		if (r < 0) {
			log_line(p->log_fd, "space-jail: WARNING: %s failed (%s); identity uid mapping, allowed by the "
			         "operator\n", what, errdesc(r));
			reap(pid);
			munmap(stack, CHILD_STACK);
			close(go);
			close(errfd);
			p->uid_base = 0;
			pid = spawn_pid1(p, &pa, &go, &errfd, &stack, &in_cgroup);
			if (pid < 0)
				return jail_send_done(out, pid, "clone namespaces");
			boost_pid1(p, pid);
		}
	}
	if (!p->uid_base && (r = write_id_maps(pid, 0)) < 0) {
		jail_send_done(out, r, "write uid/gid maps");
		goto fail;
	}
	log_line(p->log_fd, "space-jail: %s\n", jail_describe_boundary());
	if (p->uid_base)
		log_line(p->log_fd, "space-jail: idmapped rootfs, root inside is host uid %u\n", p->uid_base);
	else
		log_line(p->log_fd, "space-jail: identity uid mapping 0-65535 (weaker: root inside is host root "
		                    "without host capabilities)\n");

	r = jail_rootfs_attach(mfd, p->stage, p->uid_base, &step);
	close(mfd);
	mfd = -1;
	if (r < 0) {
		jail_send_done(out, r, "%s", step);
		goto fail;
	}
	r = jail_rootfs_pseudo(p->stage, pid);
	if (r < 0) {
		jail_send_done(out, r, "mount /proc and /sys");
		goto fail;
	}
	r = in_cgroup ? 0 : util_cgroup_attach(p->cgroup, pid);
	if (r < 0) {
		jail_send_done(out, r, "join cgroup %s", p->cgroup);
		goto fail;
	}

	struct jail_msg m = { .type = JAIL_MSG_PID, .pid = pid, .uid_base = p->uid_base };
	snprintf(m.loop, sizeof(m.loop), "%s", loop);
	struct util_proc_stat ps = { 0 };
	r = util_proc_stat(pid, &ps);
	m.start = ps.start_time;
	if (r < 0) {
		jail_send_done(out, r, "read /proc/%d/stat", (int)pid);
		goto fail;
	}
	if ((r = util_write_all(out, &m, sizeof(m))) < 0)
		goto fail;

	/* Go; then the error pipe either carries PID 1's failure or reaches EOF when its exec succeeds. */
	if (util_write_all(go, "g", 1) < 0) {
		send_text(out, -EPIPE, "PID 1 died before it started");
		goto fail;
	}
	struct jail_msg em;
	r = util_read_exact(errfd, &em, sizeof(em));
	/* Exec'd (EOF) or failed: either way PID 1 no longer runs on the stack it shared with us. */
	if (r == 0) {
		em.text[sizeof(em.text) - 1] = 0;
		send_text(out, em.err < 0 ? em.err : -EIO, em.text);
		goto fail;
	}
	munmap(stack, CHILD_STACK);
	if (waitpid(pid, NULL, WNOHANG) == pid) {
		send_text(out, -ECHILD, "the agent exited right after it started");
		return -ECHILD;
	}
	return jail_send_done(out, 0, NULL);
fail:
	if (mfd >= 0)
		close(mfd);
	reap(pid);
	munmap(stack, CHILD_STACK);
	return -1;
}

/* The stager's namespaces and the rootfs's detached mount (*ret_mfd), its limits. 0, or what
 * jail_send_done() returned after it reported the failure. */
static int stager_prepare(struct jail_plan *p, int out, char *loop, size_t looplen, int *ret_mfd)
{
	const char *step = "";
	int r;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return jail_send_done(out, -errno, "private mount namespace");
	/* The jail's network namespace, owned by the host's user namespace (see the top of this file). */
	if (unshare(CLONE_NEWNET) < 0)
		return jail_send_done(out, -errno, "network namespace");
	if ((r = jail_net_lo_up()) < 0)
		return jail_send_done(out, r, "bring up lo");
	stager_net_sysctls(p);

	int mfd = -1;
	if (p->cfg->rootfs_tree) {
		loop[0] = 0;
		if ((r = jail_rootfs_open_tree(p->cfg->rootfs_tree, &mfd, &step)) < 0)
			return jail_send_done(out, r, "%s %s", step, p->cfg->rootfs_tree);
	} else {
		int lfd = util_loop_attach(p->cfg->rootfs_image, false, loop, looplen);
		if (lfd < 0)
			return jail_send_done(out, lfd, "attach loop device to %s", p->cfg->rootfs_image);
		r = jail_rootfs_open(loop, &mfd, &step);
		close(lfd); /* the mount (if any) keeps the device; otherwise it auto-clears now */
		if (r < 0)
			return jail_send_done(out, r, "%s %s", step, p->cfg->rootfs_image);
	}

	if ((r = set_rlimits(p)) < 0) {
		close(mfd);
		return jail_send_done(out, r, "rlimits");
	}
	/* Under host memory pressure the kernel kills in a sandbox first; PID 1 and all below inherit it. */
	if ((r = util_oom_prefer_self()) < 0) {
		close(mfd);
		return jail_send_done(out, r, "oom_score_adj");
	}
	*ret_mfd = mfd;
	return 0;
}

struct stager_args {
	struct jail_plan *p;
	pid_t caller;
	int out;
};

/*
 * The stager starts with a copy of the caller's descriptor table, which in a large caller (an agent runtime
 * with hundreds of sandboxes, each with its sockets and pipes) holds thousands of descriptors. The joiner
 * and PID 1 would each copy it again, and every copy costs the kernel a reference per descriptor when it is
 * made and a flush per descriptor when it is closed (at exit or exec): measured on a 2-core host with 2,000
 * descriptors, the largest cost of a create that grew with the caller's size. So the stager first keeps only
 * what the jail needs, renumbered from 3 up in its plan (its own copy), and closes the rest once. A kernel
 * without close_range (before 5.9) keeps them all, as before.
 */
static void stager_compact_fds(struct jail_plan *p, int *out)
{
	int *need[] = { out, &p->agent_fd, &p->null_fd, &p->log_fd, &p->cgroup_fd, &p->listen_fd };
	const int k = (int)ARRAY_SIZE(need);
	int tmp[ARRAY_SIZE(need)];
	/* Copies above the target numbers first: a descriptor to keep may sit on one of them. */
	for (int i = 0; i < k; i++)
		if (*need[i] >= 0 && (tmp[i] = fcntl(*need[i], F_DUPFD_CLOEXEC, 3 + k)) < 0)
			return;
	for (int i = 0; i < k; i++)
		if (*need[i] >= 0 && dup3(tmp[i], 3 + i, O_CLOEXEC) < 0)
			return; /* the originals are all still open: nothing changed that the plan names */
	if (syscall(SYS_close_range, 3u + (unsigned)k, ~0U, 0) < 0)
		return;
	for (int i = 0; i < k; i++)
		if (*need[i] >= 0)
			*need[i] = 3 + i;
}

static int stager_entry(void *arg)
{
	const struct stager_args *a = arg;
	/* Our own handler table (no CLONE_SIGHAND): drop the caller's handlers, keep what it ignores. */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
			signal(sig, SIG_DFL);
	}
	/* The caller's plan is shared memory: the stager (and PID 1, on its stack) work on a copy. */
	struct jail_plan p = *a->p;
	int out = a->out;
	stager_compact_fds(&p, &out);
	_exit(stager_main(&p, a->caller, out) == 0 ? 0 : 1);
}

/* ---- caller side ---- */

/* Test builds only (meson -Dtest_switches=true): SPACE_TEST_JAIL_NO_IDMAP=1 acts as if the kernel could
 * not idmap the rootfs, to test the refusal and the operator's fallback on hosts that can. */
static bool test_no_idmap(void)
{
#if HAVE_TEST_SWITCHES
	const char *v = getenv("SPACE_TEST_JAIL_NO_IDMAP");
	return v && !strcmp(v, "1");
#else
	return false;
#endif
}

static uint64_t nofile_limit(uint64_t want)
{
	char buf[32];
	_cleanup_close_ int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		uint64_t max = strtoull(buf, NULL, 10);
		if (max > 0 && want > max)
			return max;
	}
	return want;
}

static void kill_pid1(pid_t pid, uint64_t start, const char *cgroup)
{
	struct jail_info info = { .pid = pid, .start_time = start };
	snprintf(info.cgroup, sizeof(info.cgroup), "%s", cgroup);
	jail_kill(&info, 2000);
}

int jail_start(const struct jail_config *cfg, struct jail_info *ret, char *errbuf, size_t errlen)
{
	if (!cfg || !ret || !cfg->id || !util_name_valid(cfg->id) || !cfg->rootfs_image == !cfg->rootfs_tree ||
	    !cfg->agent_path) {
		jail_set_err(errbuf, errlen, "invalid jail configuration");
		return -EINVAL;
	}
	const char *hostname = cfg->hostname ? cfg->hostname : cfg->id;
	if (strlen(hostname) > 64) {
		jail_set_err(errbuf, errlen, "hostname too long");
		return -EINVAL;
	}

	struct jail_plan p = {
		.cfg = cfg,
		.hostname = hostname,
		.nofile = nofile_limit(cfg->nofile ? cfg->nofile : DEFAULT_NOFILE),
		.nproc = cfg->pids_max ? cfg->pids_max : DEFAULT_PIDS,
		.uid_base = cfg->identity_map ? 0 : cfg->uid_base,
		.allow_identity = cfg->allow_identity_fallback,
		.test_no_idmap = test_no_idmap(),
		.stage = jail_stage_dir(),
		.cgroup_fd = -1,
	};
	if (!p.stage) {
		jail_set_err(errbuf, errlen, "no staging directory (/tmp, /run, /mnt) on the host");
		return -ENOENT;
	}
	enum uidalloc_kind kind;
	uint32_t first;
	if (p.uid_base && (!uidalloc_slot_of(p.uid_base, &kind, &first) || kind != UIDALLOC_RANGE || first != p.uid_base)) {
		jail_set_err(errbuf, errlen, "uid base %u is not the start of a uid range slot", p.uid_base);
		return -EINVAL;
	}
	char listen_arg[] = "3";
	const char *argv[] = { "space-agent", "--jail", "--listen-fd", listen_arg, "--hostname", hostname, NULL };
	p.argv = cfg->argv_override ? cfg->argv_override : argv;

	/* Opened here only for a clear early message; the stager attaches the image to a loop device (or binds
	 * the tree) by path. */
	const char *rootfs = cfg->rootfs_tree ? cfg->rootfs_tree : cfg->rootfs_image;
	_cleanup_close_ int image_fd = open(rootfs, cfg->rootfs_tree ? O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
								   : O_RDWR | O_CLOEXEC);
	if (image_fd < 0) {
		int r = -errno;
		jail_set_err(errbuf, errlen, "open rootfs %s: %s", rootfs, strerror(-r));
		return r;
	}
	_cleanup_close_ int agent_fd = open(cfg->agent_path, O_PATH | O_CLOEXEC);
	if (agent_fd < 0) {
		int r = -errno;
		jail_set_err(errbuf, errlen, "open agent %s: %s", cfg->agent_path, strerror(-r));
		return r;
	}
	_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return -errno;
	p.agent_fd = agent_fd;
	p.null_fd = null_fd;
	p.log_fd = cfg->log_fd >= 0 ? cfg->log_fd : null_fd;
	p.listen_fd = cfg->listen_fd;

	const void *bpf = NULL;
	int r = jail_seccomp_program(&bpf, &p.bpf_len);
	if (r < 0) {
		jail_set_err(errbuf, errlen, "build seccomp filter: %s", strerror(-r));
		return r;
	}
	p.bpf = bpf;

	/* No range given: the jail takes its own machine-wide slot, held in the caller's name until PID 1
	 * exists, then in PID 1's (jail_kill frees it; a slot whose PID 1 died is reclaimable). */
	char owner[64];
	bool own_slot = !cfg->identity_map && !cfg->uid_base;
	uint32_t own_uid = 0; /* kept apart from p: the stager shares p's memory and may change it */
	if (own_slot) {
		jail_slot_owner(getpid(), util_proc_self_start_time(), owner, sizeof(owner));
		if ((r = uidalloc_acquire(UIDALLOC_RANGE, owner, &own_uid)) < 0) {
			jail_set_err(errbuf, errlen, "allocate a host uid range (%s): %s", UIDALLOC_DIR, strerror(-r));
			return r;
		}
		p.uid_base = own_uid;
	}

	_cleanup_close_ int cgroup_fd = -1;
	const struct util_cgroup_limits lim = {
		.cpus = cfg->cpus, .memory_bytes = cfg->memory_bytes, .pids_max = p.nproc,
	};
	r = util_cgroup_create(cfg->id, &lim, p.cgroup, sizeof(p.cgroup), errbuf, errlen);
	if (r < 0)
		goto fail_slot;
	/* v2: PID 1 is created in it (no migration); v1 has no such thing. */
	cgroup_fd = util_cgroup_dir_fd(p.cgroup);
	p.cgroup_fd = cgroup_fd;

	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail_cgroup;
	}
	/*
	 * The stager shares our memory and this thread sleeps until it exits (CLONE_VM|CLONE_VFORK, as
	 * posix_spawn does): nothing of a large caller is copied. Signals stay blocked meanwhile, so none of
	 * the caller's handlers ever runs on the stager's stack.
	 */
	struct stager_args sa = { .p = &p, .caller = getpid(), .out = pfd[1] };
	void *stack = child_stack();
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t stager = stack ? clone(stager_entry, (char *)stack + CHILD_STACK, JAIL_CLONE_VM | CLONE_VFORK | SIGCHLD, &sa)
	                     : -1;
	int clone_errno = stack ? errno : ENOMEM;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (stack)
		munmap(stack, CHILD_STACK);
	close(pfd[1]);
	if (stager < 0) {
		r = -clone_errno;
		close(pfd[0]);
		goto fail_cgroup;
	}

	/* The stager wrote at most two messages (far below the pipe's capacity) before it exited. */
	struct jail_msg m, pidmsg = { 0 };
	bool have_pid = false, done = false;
	r = -EIO;
	jail_set_err(errbuf, errlen, "jail stager died");
	while (!done && util_read_exact(pfd[0], &m, sizeof(m)) == 0) {
		if (m.type == JAIL_MSG_PID) {
			pidmsg = m;
			have_pid = true;
		} else if (m.type == JAIL_MSG_DONE) {
			done = true;
			r = m.err;
			if (r < 0) {
				m.text[sizeof(m.text) - 1] = 0;
				jail_set_err(errbuf, errlen, "%s", m.text);
			}
		}
	}
	close(pfd[0]);
	while (waitpid(stager, NULL, 0) < 0 && errno == EINTR)
		;
	if (r == 0 && !have_pid)
		r = -EIO;
	if (r < 0) {
		if (have_pid)
			kill_pid1(pidmsg.pid, pidmsg.start, p.cgroup);
		goto fail_cgroup;
	}

	uint32_t slot = 0;
	if (own_slot && pidmsg.uid_base == own_uid) {
		/* The range now belongs to PID 1; a range nobody holds could be handed to another jail. */
		char pid1_owner[64];
		jail_slot_owner(pidmsg.pid, pidmsg.start, pid1_owner, sizeof(pid1_owner));
		if ((r = uidalloc_set_owner(UIDALLOC_RANGE, own_uid, owner, pid1_owner)) < 0) {
			jail_set_err(errbuf, errlen, "hand the uid range over to PID 1: %s", strerror(-r));
			kill_pid1(pidmsg.pid, pidmsg.start, p.cgroup);
			goto fail_cgroup;
		}
		slot = own_uid;
	} else if (own_slot) {
		(void)uidalloc_release(UIDALLOC_RANGE, own_uid, owner); /* the identity fallback did not use it */
	}
	memset(ret, 0, sizeof(*ret));
	ret->pid = pidmsg.pid;
	ret->start_time = pidmsg.start;
	ret->uid_base = pidmsg.uid_base;
	ret->uid_slot = slot;
	snprintf(ret->cgroup, sizeof(ret->cgroup), "%s", p.cgroup);
	pidmsg.loop[sizeof(pidmsg.loop) - 1] = 0;
	snprintf(ret->loop, sizeof(ret->loop), "%s", pidmsg.loop);
	if (errbuf && errlen)
		errbuf[0] = 0;
	return 0;

fail_cgroup:
	util_cgroup_remove(p.cgroup, 2000);
fail_slot:
	if (own_slot)
		(void)uidalloc_release(UIDALLOC_RANGE, own_uid, owner);
	return r;
}
