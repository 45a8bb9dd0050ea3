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
 *   ATTACK: modules time kernel-objects devices mount knobs vsock agent-fds agent-proc netfam namespaces,
 *   kill PID, ptrace PID, connect ADDR PORT, abstract NAME, logfill MIB, membomb MIB
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/btrfs.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <dirent.h>

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
	/* File systems a user namespace may mount: overlayfs (several escapes), ramfs, tmpfs, and the new mount
	 * API that takes the type as a string too. */
	mkdir("/tmp/escape-ovl", 0700);
	mkdir("/tmp/escape-ovl/l", 0700);
	mkdir("/tmp/escape-ovl/u", 0700);
	mkdir("/tmp/escape-ovl/w", 0700);
	CALL("mount overlay", mount("overlay", "/tmp/escape-mnt", "overlay", 0,
				    "lowerdir=/tmp/escape-ovl/l,upperdir=/tmp/escape-ovl/u,workdir=/tmp/escape-ovl/w"),
	     EPERM);
	CALL("mount ramfs", mount("ramfs", "/tmp/escape-mnt", "ramfs", 0, NULL), EPERM);
	CALL("mount tmpfs", mount("tmpfs", "/tmp/escape-mnt", "tmpfs", 0, NULL), EPERM);
	CALL("bind mount", mount("/tmp/escape-ovl", "/tmp/escape-mnt", NULL, MS_BIND, NULL), EPERM);
	CALL("fsopen(overlay)", syscall(SYS_fsopen, "overlay", 0), EPERM, ENOSYS);
	CALL("open_tree(OPEN_TREE_CLONE)", syscall(SYS_open_tree, AT_FDCWD, "/tmp", 1 /* OPEN_TREE_CLONE */),
	     EPERM, ENOSYS);
	umount2("/tmp/escape-mnt", MNT_DETACH);
	CALL("mount proc", mount("proc", "/tmp/escape-mnt", "proc", 0, NULL), EPERM, EBUSY);
	CALL("mount sysfs", mount("sysfs", "/tmp/escape-mnt", "sysfs", 0, NULL), EPERM, EBUSY);
	CALL("mount ext4 from a block device", mount("/dev/sda", "/tmp/escape-mnt", "ext4", 0, NULL),
	     EPERM, ENOENT, ENODEV, ENOTBLK);
	CALL("mount btrfs", mount("/dev/loop0", "/tmp/escape-mnt", "btrfs", 0, NULL), EPERM, ENOENT, ENODEV);
	CALL("remount /proc/sys read-write", mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);
	/* A jail's disk is a tree on the pool's btrfs: a subvolume made in it would escape the disk's quota. */
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct btrfs_ioctl_vol_args va;
	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "escape-subvol");
	CALL("btrfs subvolume create", ioctl(root, BTRFS_IOC_SUBVOL_CREATE, &va), EPERM, ENOTTY);
	struct btrfs_ioctl_vol_args_v2 v2;
	memset(&v2, 0, sizeof(v2));
	snprintf(v2.name, sizeof(v2.name), "escape-subvol2");
	CALL("btrfs subvolume create (v2)", ioctl(root, BTRFS_IOC_SUBVOL_CREATE_V2, &v2), EPERM, ENOTTY);
	v2.fd = root;
	CALL("btrfs snapshot of /", ioctl(root, BTRFS_IOC_SNAP_CREATE_V2, &v2), EPERM, ENOTTY);
	CALL("btrfs subvolume delete", ioctl(root, BTRFS_IOC_SNAP_DESTROY, &va), EPERM, ENOTTY);
	if (root >= 0)
		close(root);
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

/* PID 1 (the agent) holds host-opened descriptors: its log (1, 2) and the host's listening socket (3). */
static int attack_agent_fds(void)
{
	int fails = 0;
	int pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
	if (pidfd < 0) {
		printf("BLOCKED pidfd_open(1): %s\n", strerror(errno));
		return 0;
	}
	for (int fd = 1; fd <= 3; fd++) {
		char what[64];
		snprintf(what, sizeof(what), "pidfd_getfd of PID 1's fd %d", fd);
		errno = 0;
		long r = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		fails += verdict(what, r, errno, REFUSED(EPERM, EACCES, ENOSYS));
		if (r >= 0)
			close((int)r);
	}
	close(pidfd);
	return fails;
}

/* PID 1's memory and its /proc files: a way to its descriptors and to rewriting it past its checks. */
static int attack_agent_proc(void)
{
	int fails = 0;
	static const struct {
		const char *path;
		int flags;
	} files[] = {
		{ "/proc/1/mem", O_RDWR }, { "/proc/1/fd/1", O_WRONLY }, { "/proc/1/fd/2", O_WRONLY | O_APPEND },
		{ "/proc/1/environ", O_RDONLY }, { "/proc/1/fdinfo/1", O_RDONLY }, { "/proc/1/maps", O_RDONLY },
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "open %s for %s", files[i].path, (files[i].flags & 3) ? "writing" : "reading");
		errno = 0;
		int fd = open(files[i].path, files[i].flags | O_CLOEXEC);
		fails += verdict(what, fd, errno, REFUSED(EACCES, EPERM));
		if (fd >= 0)
			close(fd);
	}
	char buf[256];
	errno = 0;
	long n = readlink("/proc/1/fd/1", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		printf("ESCAPED readlink /proc/1/fd/1: %s\n", buf);
		fails++;
	} else {
		fails += verdict("readlink /proc/1/fd/1", n, errno, REFUSED(EACCES, EPERM));
	}
	return fails;
}

/*
 * Whatever way to the agent's stdout remains: the stolen descriptor (pidfd_getfd) or /proc/1/fd/1, then
 * MiB of writes. The host checks that the sandbox's log stayed under its cap.
 */
static int attack_log_fill(long mib)
{
	int fd = -1;
	const char *how = NULL;
	int pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
	if (pidfd >= 0) {
		fd = (int)syscall(SYS_pidfd_getfd, pidfd, 1, 0);
		close(pidfd);
		how = "pidfd_getfd";
	}
	if (fd < 0) {
		fd = open("/proc/1/fd/1", O_WRONLY | O_APPEND | O_CLOEXEC);
		how = "/proc/1/fd/1";
	}
	if (fd < 0) {
		printf("BLOCKED log fill: no way to the agent's stdout (%s)\n", strerror(errno));
		return 0;
	}
	static char chunk[1 << 16];
	memset(chunk, 'L', sizeof(chunk));
	chunk[sizeof(chunk) - 1] = '\n';
	long written = 0;
	for (long i = 0; i < mib * 16; i++) {
		ssize_t k = write(fd, chunk, sizeof(chunk));
		if (k <= 0)
			break;
		written += k;
	}
	close(fd);
	/* The host decides: its log files must have stayed under the cap whatever got written. */
	printf("wrote %ld bytes to the agent's stdout through %s\n", written, how);
	return 0;
}

/* Kernel networking code that needs CAP_NET_ADMIN / CAP_NET_RAW in the network namespace. */
static int attack_netfam(void)
{
	int fails = 0;
	static const struct {
		const char *what;
		int family, type, proto;
	} socks[] = {
		{ "socket(AF_NETLINK, NETLINK_NETFILTER) (nf_tables)", AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER },
		{ "socket(AF_NETLINK, NETLINK_XFRM)", AF_NETLINK, SOCK_RAW, NETLINK_XFRM },
		{ "socket(AF_NETLINK, NETLINK_GENERIC)", AF_NETLINK, SOCK_RAW, NETLINK_GENERIC },
		{ "socket(AF_NETLINK, NETLINK_AUDIT)", AF_NETLINK, SOCK_RAW, NETLINK_AUDIT },
		{ "socket(AF_PACKET, SOCK_RAW)", AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */ },
		{ "socket(AF_PACKET, SOCK_DGRAM)", AF_PACKET, SOCK_DGRAM, 0x0300 },
		{ "socket(AF_INET, SOCK_PACKET) (obsolete packet socket)", AF_INET, 10 /* SOCK_PACKET */, 0x0300 },
		{ "socket(AF_INET, SOCK_RAW, IPPROTO_RAW)", AF_INET, SOCK_RAW, IPPROTO_RAW },
		{ "socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)", AF_INET, SOCK_RAW, IPPROTO_ICMP },
		{ "socket(AF_INET6, SOCK_RAW, IPPROTO_RAW)", AF_INET6, SOCK_RAW, IPPROTO_RAW },
		{ "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)", AF_INET, SOCK_STREAM, 132 },
		{ "socket(AF_KEY) (IPsec keys)", 15 /* AF_KEY */, SOCK_RAW, 2 /* PF_KEY_V2 */ },
		{ "socket(AF_ALG)", 38 /* AF_ALG */, SOCK_SEQPACKET, 0 },
	};
	for (size_t i = 0; i < sizeof(socks) / sizeof(socks[0]); i++) {
		errno = 0;
		int s = socket(socks[i].family, socks[i].type | SOCK_CLOEXEC, socks[i].proto);
		fails += verdict(socks[i].what, s, errno,
				 REFUSED(EPERM, EACCES, EAFNOSUPPORT, EPROTONOSUPPORT, ESOCKTNOSUPPORT));
		if (s >= 0)
			close(s);
	}
	/* rtnetlink stays (ip addr, getaddrinfo), but changing the namespace's links and traffic control needs
	 * CAP_NET_ADMIN over it: a dummy link (module autoload, link ops) and a qdisc on lo (tc). */
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0) {
		printf("BLOCKED rtnetlink: no socket (%s)\n", strerror(errno));
		return fails;
	}
	struct {
		struct nlmsghdr h;
		union {
			struct ifinfomsg ifi;
			struct tcmsg tc;
		} u;
		char attrs[64];
	} req;
	for (int kind = 0; kind < 2; kind++) {
		memset(&req, 0, sizeof(req));
		size_t at;
		if (kind == 0) {
			req.h.nlmsg_type = RTM_NEWLINK;
			req.u.ifi.ifi_family = AF_UNSPEC;
			at = NLMSG_LENGTH(sizeof(struct ifinfomsg));
			/* IFLA_IFNAME "escdummy", IFLA_LINKINFO { IFLA_INFO_KIND "dummy" } */
			struct rtattr *ra = (struct rtattr *)((char *)&req + at);
			ra->rta_type = IFLA_IFNAME;
			ra->rta_len = RTA_LENGTH(9);
			memcpy(RTA_DATA(ra), "escdummy", 9);
			at += RTA_ALIGN(ra->rta_len);
			struct rtattr *li = (struct rtattr *)((char *)&req + at);
			li->rta_type = IFLA_LINKINFO;
			struct rtattr *k = RTA_DATA(li);
			k->rta_type = IFLA_INFO_KIND;
			k->rta_len = RTA_LENGTH(6);
			memcpy(RTA_DATA(k), "dummy", 6);
			li->rta_len = RTA_LENGTH(RTA_ALIGN(k->rta_len));
			at += RTA_ALIGN(li->rta_len);
		} else {
			req.h.nlmsg_type = RTM_NEWQDISC;
			req.u.tc.tcm_family = AF_UNSPEC;
			req.u.tc.tcm_ifindex = (int)if_nametoindex("lo");
			req.u.tc.tcm_parent = 0xffffffffu; /* TC_H_ROOT */
			at = NLMSG_LENGTH(sizeof(struct tcmsg));
			struct rtattr *ra = (struct rtattr *)((char *)&req + at);
			ra->rta_type = 1; /* TCA_KIND */
			ra->rta_len = RTA_LENGTH(6);
			memcpy(RTA_DATA(ra), "pfifo", 6);
			at += RTA_ALIGN(ra->rta_len);
		}
		req.h.nlmsg_len = (uint32_t)at;
		req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
		req.h.nlmsg_seq = (uint32_t)kind + 1;
		const char *what = kind == 0 ? "rtnetlink: create a dummy link" : "rtnetlink: add a qdisc on lo (tc)";
		struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
		if (sendto(nl, &req, at, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
			fails += verdict(what, -1, errno, REFUSED(EPERM));
			continue;
		}
		char ack[512];
		struct timeval tv = { 5, 0 };
		setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ssize_t k = recv(nl, ack, sizeof(ack), 0);
		const struct nlmsghdr *h = (const struct nlmsghdr *)ack;
		if (k < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR) {
			printf("ESCAPED %s: no answer from the kernel\n", what);
			fails++;
			continue;
		}
		int err = -((const struct nlmsgerr *)NLMSG_DATA(h))->error;
		fails += verdict(what, err ? -1 : 0, err, REFUSED(EPERM));
	}
	close(nl);
	return fails;
}

/* New namespaces: each is fresh kernel state the jail's root would configure with full capabilities. */
static int attack_namespaces(void)
{
	int fails = 0;
	CALL("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET), EPERM);
	CALL("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS), EPERM);
	errno = 0;
	long pid = syscall(SYS_clone, CLONE_NEWNET | CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	fails += verdict("clone(CLONE_NEWNET|CLONE_NEWNS)", pid, errno, REFUSED(EPERM));
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
		{ "vsock", attack_vsock }, { "agent-fds", attack_agent_fds }, { "agent-proc", attack_agent_proc },
		{ "netfam", attack_netfam }, { "namespaces", attack_namespaces },
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
	if (!strcmp(a, "logfill") && argc == 3)
		return attack_log_fill(atol(argv[2]));
	if (!strcmp(a, "membomb") && argc == 3)
		return memory_bomb(atol(argv[2]));
	return 2;
}
