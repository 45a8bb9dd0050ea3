/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's seccomp filter: default allow, with a deny list of syscalls that reach kernel-global state or
 * large attack surface the sandboxed programs have no use for. Denied calls fail with EPERM (ENOSYS for
 * clone3, so libc falls back to clone, whose flags can be inspected). The filter is built once in the caller
 * (libseccomp allocates) and exported as classic BPF, which PID 1 installs right before exec.
 *
 * What the filter cannot do, and what covers it instead:
 *  - mount(2) is allowed: its file system type is a pointer, which seccomp cannot read. The user namespace
 *    limits mounts to FS_USERNS_MOUNT types (proc, sysfs, tmpfs, devpts, mqueue, ...); block devices cannot
 *    be mounted from it.
 *  - ptrace is denied although the pid namespace already hides every host process: it also keeps one
 *    sandboxed process from rewriting another's memory past its seccomp filter.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
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

/* Each: why the jail has no business calling it. */
static const char *const denied[] = {
	"init_module", "finit_module", "delete_module", "create_module", /* kernel code */
	"kexec_load", "kexec_file_load", "reboot",                       /* replace or stop the host kernel */
	"keyctl", "add_key", "request_key",                              /* kernel keyrings are not namespaced */
	"bpf", "perf_event_open",                                        /* large, often-exploited surface */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",       /* see the header comment */
	"userfaultfd",                                                   /* turns kernel races into exploits */
	"open_by_handle_at", "name_to_handle_at",                        /* file handles bypass the mount tree */
	"swapon", "swapoff", "acct", "quotactl", "quotactl_fd",          /* host-wide resources */
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",    /* the host clock is shared */
	"lookup_dcookie", "iopl", "ioperm", "vm86", "vm86old",           /* hardware and legacy modes */
	"setns",                                                         /* joining other namespaces */
	"fanotify_init", "syslog",                                       /* host-wide event and log streams */
	"io_uring_setup", "io_uring_enter", "io_uring_register",         /* large, often-exploited surface */
	"uselib", "nfsservctl", "get_kernel_syms", "query_module",       /* obsolete */
	"clock_settime64", "stime",                                      /* 32-bit clock setters */
};

/*
 * Calls refused only for some argument values: (args[arg] & mask) == value; err is the errno returned
 * (mask 0: always).
 */
struct arg_rule {
	const char *name;
	int err;
	unsigned arg;
	scmp_datum_t mask, value;
	const char *why;
};

#define ALL32 0xffffffffULL
/* Personality flags that weaken address-space protections; no real persona sets bit 31, the query
 * value 0xffffffff does: "flag set and bit 31 clear" refuses the flags and keeps the query working. */
#define PERSONA(flag) { "personality", EPERM, 0, (flag) | 0x80000000ULL, (flag), "unsafe personality flag" }

static const struct arg_rule arg_rules[] = {
	{ "unshare", EPERM, 0, CLONE_NEWUSER, CLONE_NEWUSER, "new user namespaces: fresh capabilities" },
	{ "clone", EPERM, 0, CLONE_NEWUSER, CLONE_NEWUSER, "new user namespaces: fresh capabilities" },
	/* clone3 passes its flags in memory, out of seccomp's reach: ENOSYS makes libc fall back to clone. */
	{ "clone3", ENOSYS, 0, 0, 0, "flags unreadable" },
	{ "ioctl", EPERM, 1, ALL32, TIOCSTI, "faking terminal input into another session" },
	{ "ioctl", EPERM, 1, ALL32, TIOCLINUX, "VT console control" },
	/* vsock is not network-namespaced: it would reach the host's hypervisor channel. */
	{ "socket", EAFNOSUPPORT, 0, ALL32, AF_VSOCK, "vsock reaches the host" },
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
		struct scmp_arg_cmp cmp = { a->arg, SCMP_CMP_MASKED_EQ, a->mask, a->value };
		r = a->mask ? seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(a->err), nr, 1, &cmp)
		            : seccomp_rule_add(ctx, SCMP_ACT_ERRNO(a->err), nr, 0);
		if (r < 0)
			return r;
	}
	return 0;
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
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		return -E2BIG;
	_cleanup_free_ void *prog = malloc((size_t)st.st_size);
	if (!prog)
		return -ENOMEM;
	if (pread(mfd, prog, (size_t)st.st_size, 0) != st.st_size)
		return -EIO;
	*ret_prog = TAKE_PTR(prog);
	*ret_len = (size_t)st.st_size;
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
