/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attacks at the system-call level, run inside a jail sandbox by tests/escape/escape.sh (static: the
 * busybox image has no libc). Each prints one line, "BLOCKED <attack>: <how>" or "ESCAPED <attack>:
 * <how>", and exits 0 when blocked, 1 when the attack got through, 2 on bad usage.
 *
 * "Blocked" means the kernel refused the call at the boundary (seccomp's EPERM/ENOSYS, the user or pid
 * namespace's EPERM/ESRCH, a read-only or absent path), not that it failed later for a harmless reason:
 * a module load that reaches the loader (ENOEXEC on junk) would count as an escape.
 *
 * usage: escape-probe ATTACK [ARGS]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

static int verdict(const char *attack, long r, int err, const int *refused, size_t nrefused)
{
	if (r >= 0) {
		printf("ESCAPED %s: the call succeeded\n", attack);
		return 1;
	}
	for (size_t i = 0; i < nrefused; i++)
		if (err == refused[i]) {
			printf("BLOCKED %s: %s\n", attack, strerror(err));
			return 0;
		}
	printf("ESCAPED %s: reached the kernel past the boundary (%s)\n", attack, strerror(err));
	return 1;
}

#define REFUSED(...) ((const int[]){ __VA_ARGS__ }), sizeof((const int[]){ __VA_ARGS__ }) / sizeof(int)
#define CALL(attack, expr, ...)                                                                     \
	do {                                                                                        \
		errno = 0;                                                                          \
		long r_ = (long)(expr);                                                             \
		fails += verdict(attack, r_, errno, REFUSED(__VA_ARGS__));                          \
	} while (0)

static int attack_modules(void)
{
	int fails = 0;
	static const char junk[] = "not a module";
	CALL("init_module", syscall(SYS_init_module, junk, sizeof(junk), ""), EPERM, ENOSYS);
	int fd = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
	CALL("finit_module", syscall(SYS_finit_module, fd, "", 0), EPERM, ENOSYS);
	CALL("delete_module", syscall(SYS_delete_module, "loop", O_NONBLOCK), EPERM, ENOSYS);
	return fails;
}

/* Sets the clock to what it already is: an escape would be proven without moving the host's time. */
static int attack_time(void)
{
	int fails = 0;
	struct timespec ts;
	struct timeval tv;
	clock_gettime(CLOCK_REALTIME, &ts);
	CALL("clock_settime", clock_settime(CLOCK_REALTIME, &ts), EPERM, ENOSYS);
	gettimeofday(&tv, NULL);
	CALL("settimeofday", settimeofday(&tv, NULL), EPERM, ENOSYS);
	struct timex { unsigned modes; char rest[204]; } tx;
	memset(&tx, 0, sizeof(tx));
	tx.modes = 0x0001; /* ADJ_OFFSET of 0 */
	CALL("adjtimex", syscall(SYS_adjtimex, &tx), EPERM, ENOSYS);
	return fails;
}

static int attack_kernel_objects(void)
{
	int fails = 0;
	CALL("keyctl", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "escape"), EPERM, ENOSYS);
	CALL("add_key", syscall(SYS_add_key, "user", "escape", "x", 1, KEY_SPEC_SESSION_KEYRING), EPERM, ENOSYS);
	CALL("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC), EPERM, ENOSYS);
	struct perf_event_attr pa;
	memset(&pa, 0, sizeof(pa));
	pa.size = sizeof(pa);
	pa.type = PERF_TYPE_SOFTWARE;
	pa.config = PERF_COUNT_SW_CPU_CLOCK;
	CALL("perf_event_open", syscall(SYS_perf_event_open, &pa, -1, 0, -1, 0), EPERM, ENOSYS, EACCES);
	union bpf_attr ba;
	memset(&ba, 0, sizeof(ba));
	ba.map_type = BPF_MAP_TYPE_ARRAY;
	ba.key_size = 4;
	ba.value_size = 4;
	ba.max_entries = 1;
	CALL("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, &ba, sizeof(ba)), EPERM, ENOSYS);
	CALL("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM, ENOSYS);
	CALL("reboot", syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL), EPERM, ENOSYS);
	CALL("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM, ENOSYS, EINVAL);
	CALL("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, "\x08\0\0\0\x01\0\0\0\x02\0\0\0\0\0\0\0", O_RDONLY),
	     EPERM, ENOSYS);
	CALL("iopl", syscall(SYS_iopl, 3), EPERM, ENOSYS);
	CALL("swapon", syscall(SYS_swapon, "/bin/busybox", 0), EPERM, ENOSYS);
	CALL("syslog", syscall(SYS_syslog, 3, NULL, 0), EPERM, ENOSYS);
	return fails;
}

/* Device nodes: host disks, memory and loop devices. */
static int attack_devices(void)
{
	int fails = 0;
	static const struct {
		const char *what;
		unsigned maj, min;
		mode_t type;
	} nodes[] = {
		{ "mknod /dev/sda (block 8:0)", 8, 0, S_IFBLK },
		{ "mknod /dev/vda (block 253:0)", 253, 0, S_IFBLK },
		{ "mknod /dev/loop0 (block 7:0)", 7, 0, S_IFBLK },
		{ "mknod /dev/mem (char 1:1)", 1, 1, S_IFCHR },
		{ "mknod /dev/kmsg (char 1:11)", 1, 11, S_IFCHR },
	};
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		char path[64];
		snprintf(path, sizeof(path), "/tmp/escape-node-%zu", i);
		unlink(path);
		int r = mknod(path, nodes[i].type | 0600, makedev(nodes[i].maj, nodes[i].min));
		if (r == 0) {
			/* Creating the node may be allowed somewhere; opening it must not be. */
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			char what[96];
			snprintf(what, sizeof(what), "open of %s", nodes[i].what);
			fails += verdict(what, fd, errno, REFUSED(EPERM, EACCES, ENXIO, ENODEV));
			if (fd >= 0)
				close(fd);
			unlink(path);
		} else {
			fails += verdict(nodes[i].what, r, errno, REFUSED(EPERM));
		}
	}
	static const char *const raw[] = { "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/mem", "/dev/kmem",
					   "/dev/port", "/dev/kmsg", "/dev/loop0", "/dev/loop-control",
					   "/dev/kvm", "/dev/btrfs-control" };
	for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "open %s", raw[i]);
		int fd = open(raw[i], O_RDWR | O_CLOEXEC);
		fails += verdict(what, fd, errno, REFUSED(ENOENT, EPERM, EACCES));
		if (fd >= 0)
			close(fd);
	}
	return fails;
}

static int attack_mount(void)
{
	int fails = 0;
	mkdir("/tmp/escape-mnt", 0700);
	CALL("mount proc", mount("proc", "/tmp/escape-mnt", "proc", 0, NULL), EPERM, EBUSY);
	CALL("mount sysfs", mount("sysfs", "/tmp/escape-mnt", "sysfs", 0, NULL), EPERM, EBUSY);
	CALL("mount ext4 from a block device", mount("/dev/sda", "/tmp/escape-mnt", "ext4", 0, NULL),
	     EPERM, ENOENT, ENODEV, ENOTBLK);
	CALL("mount btrfs", mount("/dev/loop0", "/tmp/escape-mnt", "btrfs", 0, NULL), EPERM, ENOENT, ENODEV);
	CALL("remount /proc/sys read-write", mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);
	CALL("umount /proc/sys", umount2("/proc/sys", MNT_DETACH), EPERM, EINVAL);
	CALL("remount /sys read-write", mount(NULL, "/sys", NULL, MS_REMOUNT, NULL), EPERM, EINVAL);
	return fails;
}

/* Writes to kernel knobs that act on the whole host. */
static int attack_knobs(void)
{
	int fails = 0;
	static const struct {
		const char *path, *value;
	} knobs[] = {
		{ "/proc/sysrq-trigger", "h" }, /* only prints help, were it to get through */
		{ "/proc/sys/kernel/core_pattern", "|/tmp/escape-core" },
		{ "/proc/sys/kernel/sysrq", "1" },
		{ "/proc/sys/vm/drop_caches", "1" },
		{ "/sys/kernel/uevent_helper", "/tmp/escape-helper" },
		{ "/sys/power/state", "" },
	};
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		char what[80];
		snprintf(what, sizeof(what), "write %s", knobs[i].path);
		int fd = open(knobs[i].path, O_WRONLY | O_CLOEXEC);
		long r = fd;
		if (fd >= 0) {
			r = write(fd, knobs[i].value, strlen(knobs[i].value));
			if (!knobs[i].value[0] && r == 0)
				r = -1, errno = EROFS; /* an empty write to an open knob proves nothing either way */
			close(fd);
		}
		fails += verdict(what, r, errno, REFUSED(EROFS, EACCES, EPERM, ENOENT));
	}
	return fails;
}

static int attack_pid(const char *attack, pid_t pid)
{
	int fails = 0;
	char what[64];
	snprintf(what, sizeof(what), "%s %d", attack, (int)pid);
	if (!strcmp(attack, "kill")) {
		/* Our pid namespace has its own numbers: a match must be a process of ours. */
		char path[64], comm[64] = "";
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
			printf("BLOCKED %s: that number is our own %s, not the host's process\n", what, comm);
			return 0;
		}
		CALL(what, kill(pid, SIGKILL), ESRCH);
	} else {
		CALL(what, ptrace(PTRACE_ATTACH, pid, NULL, NULL), EPERM, ESRCH);
		CALL("ptrace(PTRACE_TRACEME)", ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM);
		CALL("process_vm_readv", syscall(SYS_process_vm_readv, pid, NULL, 0, NULL, 0, 0), EPERM, ESRCH);
	}
	return fails;
}

static int attack_connect(const char *addr, int port)
{
	int fails = 0;
	char what[96];
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	memset(&s6, 0, sizeof(s6));
	memset(&s4, 0, sizeof(s4));
	int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	snprintf(what, sizeof(what), "tcp connect %s port %d", addr, port);
	int s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		printf("BLOCKED %s: no socket (%s)\n", what, strerror(errno));
		return 0;
	}
	struct timeval tv = { 3, 0 };
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	long r;
	if (fam == AF_INET6) {
		s6.sin6_family = AF_INET6;
		s6.sin6_port = htons((uint16_t)port);
		r = inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1 ? connect(s, (struct sockaddr *)&s6, sizeof(s6)) : -1;
	} else {
		s4.sin_family = AF_INET;
		s4.sin_port = htons((uint16_t)port);
		r = inet_pton(AF_INET, addr, &s4.sin_addr) == 1 ? connect(s, (struct sockaddr *)&s4, sizeof(s4)) : -1;
	}
	fails += verdict(what, r, errno, REFUSED(ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EINPROGRESS, ETIMEDOUT,
						 EADDRNOTAVAIL, EAGAIN));
	close(s);
	return fails;
}

/* An abstract unix socket of the host (abstract names are per network namespace). */
static int attack_abstract(const char *name)
{
	int fails = 0;
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	size_t n = strlen(name);
	if (n + 1 > sizeof(sa.sun_path))
		return 2;
	memcpy(sa.sun_path + 1, name, n);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char what[140];
	snprintf(what, sizeof(what), "connect abstract unix socket @%s", name);
	CALL(what, connect(s, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)),
	     ECONNREFUSED, ENOENT);
	close(s);
	return fails;
}

static int attack_vsock(void)
{
	int fails = 0;
	CALL("socket(AF_VSOCK)", socket(40 /* AF_VSOCK */, SOCK_STREAM, 0), EAFNOSUPPORT, EPERM);
	return fails;
}

/* Allocates and touches memory until something stops it; prints how far it got. */
static int memory_bomb(long max_mib)
{
	long mib = 0;
	while (mib < max_mib) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			break;
		memset(p, 0x5a, 1 << 20);
		mib++;
		if (mib % 64 == 0) {
			printf("allocated %ld MiB\n", mib);
			fflush(stdout);
		}
	}
	printf("ESCAPED memory bomb: %ld MiB allocated and touched\n", mib);
	return 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return 2;
	static const struct {
		const char *name;
		int (*fn)(void);
	} groups[] = {
		{ "modules", attack_modules }, { "time", attack_time },   { "kernel-objects", attack_kernel_objects },
		{ "devices", attack_devices }, { "mount", attack_mount }, { "knobs", attack_knobs },
		{ "vsock", attack_vsock },
	};
	const char *a = argv[1];
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (!strcmp(a, groups[i].name))
			return groups[i].fn() ? 1 : 0;
	if ((!strcmp(a, "kill") || !strcmp(a, "ptrace")) && argc == 3)
		return attack_pid(a, (pid_t)atoi(argv[2])) ? 1 : 0;
	if (!strcmp(a, "connect") && argc == 4)
		return attack_connect(argv[2], atoi(argv[3])) ? 1 : 0;
	if (!strcmp(a, "abstract") && argc == 3)
		return attack_abstract(argv[2]) ? 1 : 0;
	if (!strcmp(a, "membomb") && argc == 3)
		return memory_bomb(atol(argv[2]));
	return 2;
}
