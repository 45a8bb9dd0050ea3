/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's seccomp filter: default allow, with a deny list of syscalls that reach kernel-global state or
 * large attack surface the sandboxed programs have no use for (docs/jail.md, "What root inside may and may
 * not do, and why", lists every entry with its reason). Denied calls fail with an errno (EPERM mostly;
 * ENOSYS where a C library should fall back as on an older kernel; the errno a kernel without that socket
 * family or protocol gives, so programs take their "not available" path). The filter is built once in the
 * caller (libseccomp allocates) and exported as classic BPF, which PID 1 installs right before exec.
 *
 * A default-allow filter only refuses what it names, and libseccomp may be older than the kernel: a
 * hand-written prefix (build_prefix()) therefore runs first and refuses, by number, every syscall newer than
 * JAIL_SECCOMP_NR_MAX (ENOSYS, as on an older kernel), the x32 ABI (nobody builds for it; it is one more
 * entry point to keep rules consistent across), and the denied calls numbered 424 and up, which have the
 * same number on x86_64 and i386 whether or not libseccomp knows their names.
 *
 * What the filter cannot see, and what covers it instead:
 *  - mount(2) and fsopen(2) take the file system type as a string, which seccomp cannot read: every way to
 *    make or change a mount is refused, tmpfs included. The jail mounts what programs expect (/dev/pts,
 *    /dev/shm, /tmp, /run) before the filter; after it the mount tree is fixed.
 *  - Netlink message types (rtnetlink's link, address, route and traffic-control requests) are out of
 *    reach too: the jail's network namespace belongs to the host's user namespace (jail.c), so root inside
 *    holds no CAP_NET_ADMIN or CAP_NET_RAW over it and the kernel refuses every change; queries work.
 *  - socketcall(2), the i386 socket multiplexer, passes its arguments in memory: libseccomp refuses its
 *    socket() outright, so 32-bit programs must use the direct socket syscall (glibc does on current
 *    kernels).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/btrfs.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/jail.h"
#include "jail/jail_internal.h"
#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)

/* The highest syscall number this filter was written for (file_setattr, Linux 6.17). Raise it only after
 * deciding about every call added in between. */
#define JAIL_SECCOMP_NR_MAX 469u

/* Each: why the jail has no business calling it. */
static const char *const denied[] = {
	"init_module", "finit_module", "delete_module", "create_module", /* kernel code */
	"kexec_load", "kexec_file_load", "reboot",                       /* replace or stop the host kernel */
	"keyctl", "add_key", "request_key",                              /* kernel keyrings are not namespaced */
	"bpf", "perf_event_open",                                        /* large, often-exploited surface */
	/* Another process's memory or descriptors (see the header comment of jail.h: PID 1 holds the host's
	 * listening socket): ptrace-like access, refused here whatever the ptrace rules would say. */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	"userfaultfd",                                                   /* turns kernel races into exploits */
	"open_by_handle_at", "name_to_handle_at",                        /* file handles bypass the mount tree */
	"swapon", "swapoff", "acct", "quotactl",                         /* host-wide resources */
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",    /* the host clock is shared */
	"lookup_dcookie", "iopl", "ioperm", "vm86", "vm86old",           /* hardware and legacy modes */
	"setns",                                                         /* joining other namespaces */
	"fanotify_init", "syslog",                                       /* host-wide event and log streams */
	"mount", "umount", "umount2", "pivot_root",                      /* the mount tree is fixed: header */
	"uselib", "nfsservctl", "get_kernel_syms", "query_module",       /* obsolete */
	"clock_settime64", "stime",                                      /* 32-bit clock setters */
};

/*
 * Refused by number (424 and up: one number on x86_64 and i386, +0x40000000 on x32, which is refused
 * whole), in the prefix, so they hold with any libseccomp.
 */
static const struct {
	uint32_t nr;
	int err;
	const char *name, *why;
} by_number[] = {
	{ 425, EPERM, "io_uring_setup", "large, often-exploited surface" },
	{ 426, EPERM, "io_uring_enter", "large, often-exploited surface" },
	{ 427, EPERM, "io_uring_register", "large, often-exploited surface" },
	{ 428, EPERM, "open_tree", "the mount tree is fixed" },
	{ 429, EPERM, "move_mount", "the mount tree is fixed" },
	{ 430, EPERM, "fsopen", "the mount tree is fixed (the type is a string seccomp cannot read)" },
	{ 431, EPERM, "fsconfig", "the mount tree is fixed" },
	{ 432, EPERM, "fsmount", "the mount tree is fixed" },
	{ 433, EPERM, "fspick", "the mount tree is fixed" },
	/* clone3 passes its flags in memory, out of seccomp's reach: ENOSYS makes libc fall back to clone. */
	{ 435, ENOSYS, "clone3", "flags unreadable" },
	{ 438, EPERM, "pidfd_getfd", "another process's descriptors (PID 1's are host-opened)" },
	{ 440, EPERM, "process_madvise", "another process's memory" },
	{ 442, EPERM, "mount_setattr", "the mount tree is fixed" },
	{ 443, EPERM, "quotactl_fd", "host-wide resources" },
	{ 467, EPERM, "open_tree_attr", "the mount tree is fixed" },
};

/*
 * Calls refused only for some argument values: (args[arg] & mask) == value (cmp MASKED_EQ) or
 * args[arg] > value (cmp GT, over all 64 bits: garbage in the upper half is refused too), and, when
 * arg2_mask is not 0, (args[arg2] & arg2_mask) == arg2_value as well. err is the errno returned.
 */
struct arg_rule {
	const char *name;
	int err;
	unsigned arg;
	enum scmp_compare cmp;
	scmp_datum_t mask, value;
	unsigned arg2;
	scmp_datum_t arg2_mask, arg2_value;
};

#define ALL32 0xffffffffULL
/* Personality flags that weaken address-space protections; no real persona sets bit 31, the query
 * value 0xffffffff does: "flag set and bit 31 clear" refuses the flags and keeps the query working. */
#define PERSONA(flag) { "personality", EPERM, 0, SCMP_CMP_MASKED_EQ, (flag) | 0x80000000ULL, (flag), 0, 0, 0 }
/* Any namespace of this kind, from unshare or clone (both take the flags in argument 0). */
#define NEW_NS(flag)                                                            \
	{ "unshare", EPERM, 0, SCMP_CMP_MASKED_EQ, (flag), (flag), 0, 0, 0 },   \
	{ "clone", EPERM, 0, SCMP_CMP_MASKED_EQ, (flag), (flag), 0, 0, 0 }
/* socket(): a family (argument 0) outright, by a block of values (mask), or with argument 1 or 2. */
#define FAMILY(mask, v, err) { "socket", err, 0, SCMP_CMP_MASKED_EQ, (mask), (v), 0, 0, 0 }
#define FAMILY_ARG(fam, a, mask, v, err) { "socket", err, 0, SCMP_CMP_MASKED_EQ, ALL32, (fam), a, (mask), (v) }
/* An inet protocol block [v, v + span) of a power-of-two span aligned to it. */
#define INET_PROTO(fam, v, span) FAMILY_ARG(fam, 2, ALL32 & ~((scmp_datum_t)(span) - 1), (v), EPROTONOSUPPORT)
#define INET_PROTOS(fam)                                                                                          \
	INET_PROTO(fam, 2, 2), INET_PROTO(fam, 4, 2), INET_PROTO(fam, 7, 1), INET_PROTO(fam, 8, 8),                \
	INET_PROTO(fam, 16, 1), INET_PROTO(fam, 18, 2), INET_PROTO(fam, 20, 4), INET_PROTO(fam, 24, 8),             \
	INET_PROTO(fam, 32, 16), INET_PROTO(fam, 48, 8), INET_PROTO(fam, 56, 2), INET_PROTO(fam, 59, 1),            \
	INET_PROTO(fam, 60, 4), INET_PROTO(fam, 64, 64), INET_PROTO(fam, 128, 128), INET_PROTO(fam, 256, 4),        \
	INET_PROTO(fam, 260, 2),                                                                                    \
	{ "socket", EPROTONOSUPPORT, 2, SCMP_CMP_GT, 0, IPPROTO_MPTCP, 0, ALL32, (fam) }
/* One ioctl request (argument 1). */
#define BTRFS_IOCTL(req) { "ioctl", EPERM, 1, SCMP_CMP_MASKED_EQ, ALL32, (req), 0, 0, 0 }
/* Socket types (argument 1, without SOCK_NONBLOCK/SOCK_CLOEXEC) other than stream and datagram. */
#define INET_TYPES(fam)                                                                   \
	FAMILY_ARG(fam, 1, 0xf, SOCK_RAW, EPERM), FAMILY_ARG(fam, 1, 0xc, 4, ESOCKTNOSUPPORT), \
	FAMILY_ARG(fam, 1, 0x8, 8, ESOCKTNOSUPPORT)

static const struct arg_rule arg_rules[] = {
	/* New namespaces: fresh kernel objects that root inside would own with every capability (a network
	 * namespace of its own is nf_tables, xfrm and raw sockets again; a mount namespace of its own is
	 * mounts again). The jail made every namespace its processes need. */
	NEW_NS(CLONE_NEWUSER), NEW_NS(CLONE_NEWNS), NEW_NS(CLONE_NEWNET), NEW_NS(CLONE_NEWPID),
	NEW_NS(CLONE_NEWIPC), NEW_NS(CLONE_NEWUTS), NEW_NS(CLONE_NEWCGROUP),
	/* For clone the same bit is part of the exit signal: only unshare has CLONE_NEWTIME. */
	{ "unshare", EPERM, 0, SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME, 0, 0, 0 },
	{ "ioctl", EPERM, 1, SCMP_CMP_MASKED_EQ, ALL32, TIOCSTI, 0, 0, 0 },   /* faking another session's input */
	{ "ioctl", EPERM, 1, SCMP_CMP_MASKED_EQ, ALL32, TIOCLINUX, 0, 0, 0 }, /* VT console control */
	/* btrfs subvolumes, where a jail's disk is a tree on the pool (core/disk_tree.h): a subvolume made inside
	 * would have a quota group of its own, outside the sandbox's disk cap, and a snapshot or checkpoint of
	 * the sandbox would not hold it. Creating, snapshotting, removing and flagging them is refused. */
	BTRFS_IOCTL(BTRFS_IOC_SUBVOL_CREATE), BTRFS_IOCTL(BTRFS_IOC_SUBVOL_CREATE_V2),
	BTRFS_IOCTL(BTRFS_IOC_SNAP_CREATE), BTRFS_IOCTL(BTRFS_IOC_SNAP_CREATE_V2),
	BTRFS_IOCTL(BTRFS_IOC_SNAP_DESTROY), BTRFS_IOCTL(BTRFS_IOC_SNAP_DESTROY_V2),
	BTRFS_IOCTL(BTRFS_IOC_SUBVOL_SETFLAGS), BTRFS_IOCTL(BTRFS_IOC_SET_RECEIVED_SUBVOL),
	/*
	 * Socket families: unix, inet, inet6 and netlink only. The others are dozens of rarely used protocol
	 * stacks (many load a module on first use) or reach beyond the namespace: packet sockets (raw frames),
	 * vsock (not network-namespaced: the host's hypervisor channel), AF_KEY and AF_ALG. Values 0..16 other
	 * than the four, by blocks, and anything above 16.
	 */
	{ "socket", EAFNOSUPPORT, 0, SCMP_CMP_GT, 0, AF_NETLINK, 0, 0, 0 },
	FAMILY(ALL32, 3, EAFNOSUPPORT), FAMILY(ALL32 & ~3ULL, 4, EAFNOSUPPORT), FAMILY(ALL32 & ~1ULL, 8, EAFNOSUPPORT),
	FAMILY(ALL32, 11, EAFNOSUPPORT), FAMILY(ALL32 & ~3ULL, 12, EAFNOSUPPORT),
	/* inet: stream and datagram sockets of TCP, UDP, ICMP echo ("ping" sockets), MPTCP. No raw IP sockets
	 * (forged packets, and their protocol handlers), no SOCK_PACKET (a packet socket under AF_INET), no
	 * SCTP, DCCP, L2TP, UDP-Lite and the rest (modules loaded on demand). */
	INET_TYPES(AF_INET), INET_TYPES(AF_INET6), INET_PROTOS(AF_INET), INET_PROTOS(AF_INET6),
	/* netlink: rtnetlink (ip addr, getaddrinfo) and sock_diag (ss) only. Not nf_tables (the most exploited
	 * path from a user namespace of recent years), xfrm, generic netlink (a gateway to dozens of families),
	 * audit, uevents, ... EPROTONOSUPPORT is what a kernel without the protocol says. */
	{ "socket", EPROTONOSUPPORT, 2, SCMP_CMP_GT, 0, NETLINK_SOCK_DIAG, 0, ALL32, AF_NETLINK },
	FAMILY_ARG(AF_NETLINK, 2, ALL32, 1, EPROTONOSUPPORT),
	FAMILY_ARG(AF_NETLINK, 2, ALL32 & ~1ULL, 2, EPROTONOSUPPORT),
	PERSONA(0x0400000), /* READ_IMPLIES_EXEC */
	PERSONA(0x0100000), /* MMAP_PAGE_ZERO */
	PERSONA(0x0200000), /* ADDR_COMPAT_LAYOUT */
	PERSONA(0x0040000), /* ADDR_NO_RANDOMIZE */
};

static int add_rules(scmp_filter_ctx ctx)
{
	int r;
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (r < 0 && r != -EDOM) /* EDOM: no such call on one of the ABIs */
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(arg_rules); i++) {
		const struct arg_rule *a = &arg_rules[i];
		int nr = seccomp_syscall_resolve_name(a->name);
		struct scmp_arg_cmp cmp[2] = {
			{ a->arg, a->cmp, a->cmp == SCMP_CMP_GT ? a->value : a->mask, a->value },
			{ a->arg2, SCMP_CMP_MASKED_EQ, a->arg2_mask, a->arg2_value },
		};
		r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO((uint32_t)a->err), nr, a->arg2_mask ? 2 : 1, cmp);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The prefix (see the header comment): per ABI, refuse the by_number calls and every number above
 * JAIL_SECCOMP_NR_MAX; x32 refused whole. Anything else falls through to libseccomp's program, which
 * starts right after.
 */
#define PREFIX_MAX (8 + 2 * 2 * ARRAY_SIZE(by_number) + 8)

static size_t build_prefix(struct sock_filter *f)
{
	size_t n = 0;
	const uint32_t enosys = SECCOMP_RET_ERRNO | ENOSYS;
	/* One block per ABI: load the number, compare each entry (match: return), then the range check. */
	for (int abi = 0; abi < 2; abi++) {
		uint32_t arch = abi == 0 ? AUDIT_ARCH_X86_64 : AUDIT_ARCH_I386;
		size_t body = 1 + (abi == 0 ? 2 : 0) + 2 * ARRAY_SIZE(by_number) + 3;
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
		/* Not this ABI: skip the block. */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, (uint8_t)body);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
		if (abi == 0) {
			/* x32 calls carry __X32_SYSCALL_BIT. */
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, enosys);
		}
		for (size_t i = 0; i < ARRAY_SIZE(by_number); i++) {
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, by_number[i].nr, 0, 1);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
							      SECCOMP_RET_ERRNO | (uint32_t)by_number[i].err);
		}
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, JAIL_SECCOMP_NR_MAX, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, enosys);
		/* Known and not refused here: on to libseccomp's program. Jump over the rest of the prefix. */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA | BPF_K, 0, 0, 0);
	}
	/* Patch the "on to libseccomp" jumps now that the prefix's length is known. */
	for (size_t i = 0; i < n; i++)
		if (f[i].code == (BPF_JMP | BPF_JA | BPF_K))
			f[i].k = (uint32_t)(n - i - 1);
	return n;
}

int jail_seccomp_build(void **ret_prog, size_t *ret_len)
{
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	int r;
	/* Cover the 32-bit and x32 entry points too, so they cannot be used to go around the rules. */
	if ((r = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 && r != -EEXIST)
		return r;
	if ((r = seccomp_arch_add(ctx, SCMP_ARCH_X32)) < 0 && r != -EEXIST)
		return r;
	/* PID 1 sets no_new_privs itself; the exported program must not depend on libseccomp doing it. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
		return r;
	r = add_rules(ctx);
	if (r < 0)
		return r;

	_cleanup_close_ int mfd = memfd_create("space-seccomp", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, mfd);
	if (r < 0)
		return r;
	struct stat st;
	if (fstat(mfd, &st) < 0)
		return -errno;
	struct sock_filter prefix[PREFIX_MAX];
	size_t np = build_prefix(prefix);
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) + (off_t)np > BPF_MAXINSNS)
		return -E2BIG;
	size_t len = np * sizeof(struct sock_filter) + (size_t)st.st_size;
	_cleanup_free_ struct sock_filter *prog = malloc(len);
	if (!prog)
		return -ENOMEM;
	memcpy(prog, prefix, np * sizeof(struct sock_filter));
	if (pread(mfd, prog + np, (size_t)st.st_size, 0) != st.st_size)
		return -EIO;
	*ret_prog = TAKE_PTR(prog);
	*ret_len = len;
	return 0;
}

int jail_seccomp_install(const void *prog, size_t len)
{
	struct sock_fprog fprog = {
		.len = (unsigned short)(len / sizeof(struct sock_filter)),
		.filter = (struct sock_filter *)prog,
	};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
		return -errno;
	return 0;
}

/* The program depends on nothing but this build: compiled once per process (libseccomp took 1.3 ms of
 * every jail's start), then shared read-only by every start. */
static struct {
	pthread_once_t once;
	void *prog;
	size_t len;
	int err;
} cached = { .once = PTHREAD_ONCE_INIT };

static void build_once(void)
{
	cached.err = jail_seccomp_build(&cached.prog, &cached.len);
}

int jail_seccomp_program(const void **ret_prog, size_t *ret_len)
{
	pthread_once(&cached.once, build_once);
	if (cached.err < 0)
		return cached.err;
	*ret_prog = cached.prog;
	*ret_len = cached.len;
	return 0;
}
