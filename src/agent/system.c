/* SPDX-License-Identifier: Apache-2.0 */
/* PID 1 duties: the sandbox's mounts, and the SYNC / SET_TIME / RESEED / SHUTDOWN / SET_LIFETIME requests. */
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "util/util.h"

struct mnt {
	const char *src, *target, *type;
	unsigned long flags;
	const char *data;
	unsigned long magic; /* already mounted (statfs f_type): keep it */
};

static const struct mnt base_mounts[] = {
	/* A user namespace may mount proc and sysfs only while the old root still shows them, so the jail
	 * code mounts them before pivot_root; as a VM's /init we mount them ourselves. */
	{ "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, PROC_SUPER_MAGIC },
	/* Read-only: nothing in a sandbox has business tuning the (possibly shared) kernel. */
	{ "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL, SYSFS_MAGIC },
	/* A private pts instance: the sandbox sees only its own terminals. */
	{ "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620",
	  DEVPTS_SUPER_MAGIC },
	{ "shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", TMPFS_MAGIC },
	{ "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", TMPFS_MAGIC },
	{ "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", TMPFS_MAGIC },
};

/* target is a mount of a file system with magic (not merely a directory on one, like /dev/shm on a
 * tmpfs /dev). */
static bool mounted(const char *target, unsigned long magic)
{
	char parent[64];
	struct statfs sfs;
	struct stat a, b;
	snprintf(parent, sizeof(parent), "%s/..", target);
	return statfs(target, &sfs) == 0 && (unsigned long)sfs.f_type == magic && stat(target, &a) == 0 &&
	       stat(parent, &b) == 0 && (a.st_dev != b.st_dev || a.st_ino == b.st_ino);
}

/* Mounts what a process expects to find and is not there yet (a jail mounted all of it before its filter,
 * which refuses mounts). A failure is reported and the agent goes on: a sandbox without /sys is still
 * useful (sysfs cannot be mounted in some user namespaces). */
static int mount_base(void)
{
	int ret = 0;
	for (size_t i = 0; i < sizeof(base_mounts) / sizeof(base_mounts[0]); i++) {
		const struct mnt *m = &base_mounts[i];
		if (mounted(m->target, m->magic))
			continue;
		if (util_mkdir_p(m->target, 0755) < 0 ||
		    mount(m->src, m->target, m->type, m->flags, m->data) < 0) {
			agent_log("mount %s on %s: %m", m->type, m->target);
			ret = -errno;
		}
	}
	/* /dev/ptmx must reach the new devpts instance. */
	struct stat st;
	if (lstat("/dev/ptmx", &st) == 0 && !S_ISLNK(st.st_mode)) {
		if (mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL) < 0)
			agent_log("bind /dev/pts/ptmx: %m");
	} else {
		unlink("/dev/ptmx");
		if (symlink("pts/ptmx", "/dev/ptmx") < 0)
			agent_log("symlink /dev/ptmx: %m");
	}
	return ret;
}

int system_harden_jail(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_CAPBSET_READ, CAP_SYS_PTRACE, 0, 0, 0) == 1 && prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) < 0)
		return -errno;
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	uint32_t bit = 1u << (CAP_SYS_PTRACE % 32);
	struct __user_cap_data_struct *w = &d[CAP_SYS_PTRACE / 32];
	if ((w->effective | w->permitted | w->inheritable) & bit) {
		w->effective &= ~bit;
		w->permitted &= ~bit;
		w->inheritable &= ~bit;
		if (syscall(SYS_capset, &h, d) < 0)
			return -errno;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_PTRACE, 0, 0) == 1 &&
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_SYS_PTRACE, 0, 0) < 0)
		return -errno;
	return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 && prctl(PR_CAPBSET_READ, CAP_SYS_PTRACE, 0, 0, 0) == 0 ? 0 : -EPERM;
}

int system_setup_jail(const char *hostname)
{
	mount_base();
	if (hostname && sethostname(hostname, strlen(hostname)) < 0)
		agent_log("sethostname: %m");
	return 0;
}

/*
 * VM mode: we are /init of an initramfs (or the rootfs). The kernel gave us an empty /dev; loading
 * modules and switching to the real root would go between devtmpfs and the rest.
 */
int system_child_cpus(unsigned n, cpu_set_t *ret)
{
	cpu_set_t have, want;
	if (sched_getaffinity(0, sizeof(have), &have) < 0)
		return -errno;
	unsigned avail = (unsigned)CPU_COUNT(&have);
	if (n == 0 || n >= avail)
		return 0;
	uint32_t start = 0;
	(void)util_random_bytes(&start, sizeof(start)); /* spreading only: CPU 0 first is fine too */
	start %= avail;
	CPU_ZERO(&want);
	/* The allowed CPUs in order, taken circularly from the start-th: n of them. */
	for (unsigned cpu = 0, idx = 0, taken = 0; cpu < CPU_SETSIZE && taken < n; cpu++) {
		if (!CPU_ISSET(cpu, &have))
			continue;
		if ((idx++ + avail - start) % avail < n) {
			CPU_SET(cpu, &want);
			taken++;
		}
	}
	*ret = want;
	return 1;
}

int system_setup_vm(void)
{
	util_mkdir_p("/dev", 0755);
	if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") < 0 && errno != EBUSY)
		agent_log("mount devtmpfs: %m");
	mount_base();
	return 0;
}

static int reseed(const uint8_t *buf, size_t len)
{
	int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Credit the entropy when we may (CAP_SYS_ADMIN); mix it in by writing in any case. */
	struct rand_pool_info *info = malloc(sizeof(*info) + len);
	if (info) {
		info->entropy_count = (int)(len * 8);
		info->buf_size = (int)len;
		memcpy(info->buf, buf, len);
		ioctl(fd, RNDADDENTROPY, info);
		explicit_bzero(info->buf, len);
		free(info);
	}
	int r = util_write_all(fd, buf, len);
	/* Mixing alone does not change what the CRNG hands out until its next scheduled reseed (up to a
	 * minute): a restored snapshot would go on with the stream every other restore of it produces. */
#ifdef RNDRESEEDCRNG
	if (r == 0 && ioctl(fd, RNDRESEEDCRNG) < 0 && errno != EPERM && errno != ENOTTY && errno != EINVAL)
		r = -errno;
#endif
	close(fd);
	return r;
}

void system_request(struct conn *c, const struct proto_frame *f)
{
	int r = 0;
	int64_t ns;
	switch (f->type) {
	case PROTO_SYNC:
		if (proto_get_empty(f) < 0)
			goto bad;
		sync();
		break;
	case PROTO_SET_TIME: {
		if (proto_get_set_time(f, &ns) < 0 || ns < 0)
			goto bad;
		struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
		r = clock_settime(CLOCK_REALTIME, &ts) < 0 ? -errno : 0;
		break;
	}
	case PROTO_RESEED:
		if (f->len == 0 || f->len > PROTO_MAX_RESEED)
			goto bad;
		r = reseed(f->payload, f->len);
		break;
	case PROTO_SHUTDOWN:
		if (proto_get_empty(f) < 0)
			goto bad;
		c->shutdown_after = true;
		break;
	case PROTO_SET_LIFETIME: {
		uint32_t s;
		if (proto_get_u32(f, &s) < 0)
			goto bad;
		if (s > PROTO_MAX_LIFETIME) {
			r = -EINVAL;
			break;
		}
		/* The lifetime is the SIGALRM that --lifetime armed: re-arming replaces it, 0 disarms it. */
		alarm(s);
		break;
	}
	case PROTO_SET_HOSTNAME: {
		/* A sandbox forked or restored from a snapshot takes its own name. */
		if (f->len == 0 || f->len > PROTO_MAX_IDENT)
			goto bad;
		char name[PROTO_MAX_IDENT + 1];
		memcpy(name, f->payload, f->len);
		name[f->len] = '\0';
		for (size_t i = 0; i < f->len; i++)
			if (!isalnum((unsigned char)name[i]) && name[i] != '-' && name[i] != '.')
				goto bad;
		if (sethostname(name, f->len) < 0) {
			r = -errno;
			break;
		}
		memcpy(c->a->hostname, name, f->len + 1);
		break;
	}
	default:
		goto bad;
	}
	if (r < 0)
		proto_put_err(&c->out, -r, "%s: %s", proto_type_name(f->type), strerror(-r));
	else
		proto_put_empty(&c->out, PROTO_OK);
	c->state = C_CLOSING;
	return;
bad:
	conn_close(c);
}

void system_final(struct agent *a)
{
	proc_kill_all(a);
	/* Only the sandbox's PID 1 may power off: never the machine a test runs the agent on. */
	if (!a->vm || getpid() != 1)
		return;
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause(); /* PID 1 must not exit: that would panic the kernel */
}
