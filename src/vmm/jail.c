/* SPDX-License-Identifier: Apache-2.0 */
/* space-vmm's jail: namespaces, pivot_root, rlimits and the privilege drop (see jail.h). */
#include "vmm/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

/* Signals the waiter passes on to the jailed child. */
static void forwarded_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
	sigaddset(set, SIGCHLD);
}

/* The original process: waits for the child, passes termination signals on, exits with its status. */
static _Noreturn void wait_child(pid_t pid)
{
	sigset_t set;
	forwarded_set(&set);
	int forwarded = 0;
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0 && errno == EINTR)
			continue;
		if (sig != SIGCHLD) {
			/* PID 1 of a namespace ignores signals it has no handler for, except SIGKILL. */
			forwarded = sig > 0 ? sig : SIGKILL;
			kill(pid, SIGKILL);
			continue;
		}
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == 0 || (w < 0 && errno == EINTR))
			continue;
		if (w < 0)
			_exit(1);
		if (WIFEXITED(st))
			_exit(WEXITSTATUS(st));
		if (forwarded) {
			signal(forwarded, SIG_DFL);
			sigset_t one;
			sigemptyset(&one);
			sigaddset(&one, forwarded);
			sigprocmask(SIG_UNBLOCK, &one, NULL);
			raise(forwarded);
		}
		_exit(128 + WTERMSIG(st));
	}
}

/* Creates the mount point for source at target: an empty file or directory like it. */
static int make_mountpoint(const char *target, bool dir)
{
	_cleanup_free_ char *parent = strdup(target);
	if (!parent)
		return -ENOMEM;
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		int r = util_mkdir_p(parent, 0755);
		if (r < 0)
			return r;
	}
	if (dir)
		return mkdir(target, 0755) < 0 && errno != EEXIST ? -errno : 0;
	int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static int bind_one(const char *root, const char *src, char *err, size_t errlen)
{
	if (src[0] != '/')
		return util_errf(err, errlen, -EINVAL, "bind %s: not an absolute path", src);
	struct stat st;
	if (stat(src, &st) < 0)
		return util_errf(err, errlen, -errno, "bind %s: %s", src, strerror(errno));
	char target[4096];
	if ((size_t)snprintf(target, sizeof(target), "%s%s", root, src) >= sizeof(target))
		return util_errf(err, errlen, -ENAMETOOLONG, "bind %s: path too long", src);
	int r = make_mountpoint(target, S_ISDIR(st.st_mode));
	if (r < 0)
		return util_errf(err, errlen, r, "cannot create %s: %s", target, strerror(-r));
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		return util_errf(err, errlen, -errno, "bind mount of %s: %s", src, strerror(errno));
	struct statvfs vfs;
	unsigned long ro = statvfs(target, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) ? MS_RDONLY : 0;
	if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | ro, NULL) < 0)
		return util_errf(err, errlen, -errno, "remount of %s: %s", target, strerror(errno));
	return 0;
}

/* Binds, then root_dir becomes / and the old root goes away. */
static int enter_root(const struct vmm_jail_cfg *cfg, char *err, size_t errlen)
{
	const char *root = cfg->root_dir;
	/* pivot_root needs the new root to be a mount point. */
	if (mount(root, root, NULL, MS_BIND, NULL) < 0)
		return util_errf(err, errlen, -errno, "bind mount of %s onto itself: %s", root, strerror(errno));
	for (const char *const *b = cfg->binds; b && *b; b++) {
		int r = bind_one(root, *b, err, errlen);
		if (r < 0)
			return r;
	}
	if (chdir(root) < 0)
		return util_errf(err, errlen, -errno, "chdir %s: %s", root, strerror(errno));
	/* pivot_root(".", "."): the old root ends up stacked on the new one, then is detached. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return util_errf(err, errlen, -errno, "pivot_root into %s: %s", root, strerror(errno));
	if (umount2(".", MNT_DETACH) < 0)
		return util_errf(err, errlen, -errno, "detaching the old root: %s", strerror(errno));
	if (chdir("/") < 0)
		return util_errf(err, errlen, -errno, "chdir /: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return util_errf(err, errlen, -errno, "remounting / read-only: %s", strerror(errno));
	return 0;
}

static int set_limit(int res, uint64_t v)
{
	struct rlimit rl = { .rlim_cur = v, .rlim_max = v };
	return setrlimit(res, &rl) < 0 ? -errno : 0;
}

static int drop_privileges(const struct vmm_jail_cfg *cfg, char *err, size_t errlen)
{
	int r;
	if ((cfg->max_files && (r = set_limit(RLIMIT_NOFILE, cfg->max_files)) < 0) ||
	    (r = set_limit(RLIMIT_MEMLOCK, cfg->memlock_bytes)) < 0 || (r = set_limit(RLIMIT_CORE, 0)) < 0)
		return util_errf(err, errlen, r, "setrlimit: %s", strerror(-r));
	/* Empty the bounding set (until the kernel says the capability does not exist). */
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return util_errf(err, errlen, -errno, "clearing ambient capabilities: %s", strerror(errno));
	if (setgroups(0, NULL) < 0 || setresgid(cfg->gid, cfg->gid, cfg->gid) < 0 ||
	    setresuid(cfg->uid, cfg->uid, cfg->uid) < 0)
		return util_errf(err, errlen, -errno, "switching to uid %u gid %u: %s", (unsigned)cfg->uid,
				 (unsigned)cfg->gid, strerror(errno));
	/* Leaving uid 0 for good clears the permitted and effective sets; check rather than trust. */
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return util_errf(err, errlen, -errno, "capget: %s", strerror(errno));
	if (d[0].effective | d[1].effective | d[0].permitted | d[1].permitted)
		return util_errf(err, errlen, -EPERM, "capabilities survived the uid switch");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return util_errf(err, errlen, -errno, "prctl: %s", strerror(errno));
	return 0;
}

int vmm_jail_enter(const struct vmm_jail_cfg *cfg, char *err, size_t errlen)
{
	if (!cfg || !cfg->root_dir || cfg->root_dir[0] != '/' || cfg->uid == 0 || cfg->gid == 0)
		return util_errf(err, errlen, -EINVAL, "the jail needs an absolute root directory and non-zero ids");
	int r = util_mkdir_p(cfg->root_dir, 0755);
	if (r < 0)
		return util_errf(err, errlen, r, "cannot create %s: %s", cfg->root_dir, strerror(-r));
	/* Under host memory pressure the kernel kills a VM (the guest's memory is ours) before host processes.
	 * The guest cannot reach the value; this process, once jailed, can only lower it to 0. */
	if ((r = util_oom_prefer_self()) < 0)
		return util_errf(err, errlen, r, "oom_score_adj: %s", strerror(-r));
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (cfg->new_netns ? CLONE_NEWNET : 0);
	if (unshare(flags) < 0)
		return util_errf(err, errlen, -errno, "unshare: %s", strerror(errno));
	/* The waiter takes its signals synchronously; SIGCHLD must not be ignored or the child is reaped. */
	sigset_t set, old;
	forwarded_set(&set);
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_BLOCK, &set, &old);
	pid_t pid = fork();
	if (pid < 0) {
		r = -errno;
		sigprocmask(SIG_SETMASK, &old, NULL);
		return util_errf(err, errlen, r, "fork: %s", strerror(-r));
	}
	if (pid > 0)
		wait_child(pid);
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* The child (PID 1 of the new namespace) dies with its waiter. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return util_errf(err, errlen, -errno, "prctl: %s", strerror(errno));
	/* Nothing mounted from here on propagates back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return util_errf(err, errlen, -errno, "making mounts private: %s", strerror(errno));
	static const char hostname[] = "space-vmm";
	if (sethostname(hostname, sizeof(hostname) - 1) < 0)
		return util_errf(err, errlen, -errno, "sethostname: %s", strerror(errno));
	if (cfg->setup && (r = cfg->setup(cfg->userdata, err, errlen)) < 0)
		return r;
	if ((r = enter_root(cfg, err, errlen)) < 0)
		return r;
	umask(077);
	return drop_privileges(cfg, err, errlen);
}
