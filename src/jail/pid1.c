/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A jail's PID 1 between its clone and the agent's exec (jail.c clones it): it becomes root of its user
 * namespace, pivots into the rootfs, mounts what programs expect writable, drops CAP_SYS_PTRACE for good,
 * places the agent's descriptors, installs the filter and execs the agent. Everything here is child-safe
 * (jail_internal.h): syscalls and snprintf only, on the clone's own stack.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/jail.h"
#include "jail/jail_internal.h"
#include "util/cleanup.h"
#include "util/util.h"

/*
 * Puts listen_fd at 3, log at 1 and 2, /dev/null at 0; everything else closes on exec. These are all the
 * host-opened descriptors the jail holds: the agent's (PID 1's) only, out of reach of the jail's other
 * processes (pidfd_getfd refused, PID 1 not dumpable and nobody holding CAP_SYS_PTRACE).
 */
static int pid1_set_fds(const struct jail_plan *p)
{
	int listen = -1, log = -1, null = -1;
	if (p->listen_fd >= 0 && (listen = fcntl(p->listen_fd, F_DUPFD_CLOEXEC, 10)) < 0)
		return -errno;
	if ((log = fcntl(p->log_fd, F_DUPFD_CLOEXEC, 10)) < 0 || (null = fcntl(p->null_fd, F_DUPFD_CLOEXEC, 10)) < 0)
		return -errno;
	if (dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
		return -errno;
	if (listen >= 0 ? dup2(listen, 3) < 0 : (close(3) < 0 && errno != EBADF))
		return -errno;
	if (syscall(SYS_close_range, 4, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/*
 * What programs expect writable and private, mounted before the filter refuses every mount: a devpts
 * instance of the jail's own and tmpfs on /dev/shm, /tmp and /run (memory: the jail's memory limit bounds
 * them). Child-safe.
 */
static int pid1_mounts(const char **ret_what)
{
	static const struct {
		const char *src, *target, *type;
		unsigned long flags;
		const char *data;
		mode_t mode;
	} m[] = {
		{ "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620", 0755 },
		{ "shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777 },
		{ "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777 },
		{ "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", 0755 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
		*ret_what = m[i].target;
		if ((mkdir(m[i].target, m[i].mode) < 0 && errno != EEXIST) ||
		    mount(m[i].src, m[i].target, m[i].type, m[i].flags, m[i].data) < 0)
			return -errno;
	}
	return 0;
}

/*
 * Takes CAP_SYS_PTRACE out of every set of PID 1, the bounding set included, so no process of the jail ever
 * holds it again (root's exec gives it the bounding set). A non-dumpable process (the agent makes itself
 * one) is still reachable through /proc/PID/mem, fd and environ by a holder of CAP_SYS_PTRACE in its user
 * namespace, which would be root inside. Child-safe.
 */
static int pid1_drop_ptrace(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 || syscall(SYS_capget, &h, d) < 0)
		return -errno;
	uint32_t bit = 1u << (CAP_SYS_PTRACE % 32);
	size_t word = CAP_SYS_PTRACE / 32;
	d[word].effective &= ~bit;
	d[word].permitted &= ~bit;
	d[word].inheritable &= ~bit;
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	return prctl(PR_CAPBSET_READ, CAP_SYS_PTRACE, 0, 0, 0) == 0 ? 0 : -EPERM;
}

void jail_pid1_main(const struct jail_plan *p, int go_fd, int err_fd)
{
	char c;
	const char *step = "wait for the stager";
	int r = 0;

	/* The stager writes one byte once maps, mounts and cgroups are ready; EOF means it gave up. */
	if (read(go_fd, &c, 1) != 1)
		_exit(1);
	close(go_fd);

	/* The agent must not inherit ignored signals (SIG_IGN survives exec) nor the mask jail_start set. */
	util_signals_default();

	/* Raw system calls: glibc's set*id wrappers act on every thread of the process they believe they are
	 * in, and PID 1 was cloned (not forked) from a caller that may be multithreaded: they would signal and
	 * wait for the caller's threads, and hang when one of them was just being created. */
	step = "become root in the user namespace";
	if (setsid() < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresuid, 0, 0, 0) < 0)
		goto fail_errno;
	step = "sethostname";
	if (sethostname(p->hostname, strlen(p->hostname)) < 0)
		goto fail_errno;
	step = "unshare mount+cgroup namespaces";
	if (unshare(CLONE_NEWNS | CLONE_NEWCGROUP) < 0)
		goto fail_errno;
	step = "pivot_root";
	if ((r = jail_rootfs_pivot(p->stage)) < 0)
		goto fail;
	const char *what = "";
	if ((r = pid1_mounts(&what)) < 0) {
		jail_send_done(err_fd, r, "mount %s", what);
		_exit(1);
	}
	step = "drop CAP_SYS_PTRACE";
	if ((r = pid1_drop_ptrace()) < 0)
		goto fail;
	step = "set up fds";
	if ((r = pid1_set_fds(p)) < 0)
		goto fail;
	step = "seccomp";
	if ((r = jail_seccomp_install(p->bpf, p->bpf_len)) < 0)
		goto fail;

	static char *const envp[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		                      "HOME=/root", "container=space-jail", NULL };
	step = "exec agent";
	syscall(SYS_execveat, p->agent_fd, "", (char *const *)p->argv, envp, AT_EMPTY_PATH);
fail_errno:
	r = -errno;
fail:
	jail_send_done(err_fd, r, "%s", step);
	_exit(1);
}
