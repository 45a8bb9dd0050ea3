/* SPDX-License-Identifier: Apache-2.0 */
/* seccomp allowlists of space-vmm per thread role (see sandbox.h). Each entry says why it is needed. */
#include "vmm/sandbox.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "util/cleanup.h"
#include "util/confine.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)

#define V (1u << VMM_THREAD_VCPU)
#define D (1u << VMM_THREAD_DEVICE)
#define C (1u << VMM_THREAD_CONTROL)
#define ALL (V | D | C)
#define MAIN_ONLY 0u /* every rule is in MAIN, the process filter: 0 means "no other role" */

enum arg_check {
	ARGS_ANY,
	ARG1_EQ,      /* ioctl request number */
	ARG0_EQ,      /* socket family, seccomp operation */
	ARG0_NE,      /* any signal but SIGSYS */
	ARG2_NO_EXEC, /* mmap/mprotect protection without PROT_EXEC */
	ARG0_THREAD,  /* clone flags with CLONE_THREAD */
};

static const struct rule {
	int nr;
	unsigned roles;
	enum arg_check check;
	unsigned long value;
	const char *why;
} rules[] = {
	/* KVM: the request numbers each role issues (the fd cannot be checked; these are KVM's). */
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_RUN,
	  "run the vCPU; snapshot: finish a parked vCPU's last exit (immediate_exit)" },
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_GET_REGS, "registers for internal-error reports and state saves" },
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_GET_SREGS, "vCPU state saves (pause, checkpoint)" },
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_GET_FPU, "vCPU state saves" },
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_GET_MSRS, "vCPU state saves" },
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_GET_LAPIC, "vCPU state saves" },
	{ SCMP_SYS(ioctl), V | C, ARG1_EQ, KVM_GET_MP_STATE, "vCPU state saves" },
	/* Snapshots, saved by the control thread while every vCPU is parked (the snapshot-fd request). */
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_XSAVE, "snapshot: FPU/SSE/AVX state" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_XCRS, "snapshot: XCR0" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_VCPU_EVENTS, "snapshot: pending exceptions and interrupts" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_DEBUGREGS, "snapshot: debug registers" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_IRQCHIP, "snapshot: PIC and IOAPIC" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_PIT2, "snapshot: PIT" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_CLOCK, "snapshot: kvmclock" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_GET_MSR_INDEX_LIST, "snapshot: which MSRs to save" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_CHECK_EXTENSION, "snapshot: which state sections KVM has" },
	{ SCMP_SYS(ftruncate), V | C, ARGS_ANY, 0,
	  "snapshot: size the file passed in (holes for zero pages); console log cap: a rotation empties the "
	  "log and cuts its older part (util/caplog.h; the serial port is written from vCPU threads, and "
	  "flushed by the control thread's snapshot)" },
	{ SCMP_SYS(ioctl), V | D, ARG1_EQ, KVM_IRQ_LINE, "edge interrupts of the serial port and i8042" },
	{ SCMP_SYS(ioctl), C, ARG1_EQ, KVM_KVMCLOCK_CTRL, "pause: tell the guest its clock was stopped" },
	/* Memory: no executable mappings, ever (the guest's RAM is mapped before the filter). */
	{ SCMP_SYS(mmap), ALL, ARG2_NO_EXEC, 0, "malloc, thread stacks" },
	{ SCMP_SYS(mprotect), ALL, ARG2_NO_EXEC, 0, "stack guard pages, malloc arenas" },
	{ SCMP_SYS(munmap), ALL, ARGS_ANY, 0, "free, thread stacks, teardown" },
	{ SCMP_SYS(madvise), ALL, ARGS_ANY, 0, "glibc frees thread stacks and arenas" },
	{ SCMP_SYS(mremap), ALL, ARGS_ANY, 0, "realloc of large buffers" },
	{ SCMP_SYS(brk), ALL, ARGS_ANY, 0, "malloc" },
	/* I/O on descriptors opened before the filter. */
	{ SCMP_SYS(read), ALL, ARGS_ANY, 0, "eventfds, sockets" },
	{ SCMP_SYS(write), ALL, ARGS_ANY, 0, "console, console log, eventfds (irqfd, stop), stderr" },
	{ SCMP_SYS(writev), ALL, ARGS_ANY, 0, "stdio on stderr" },
	{ SCMP_SYS(readv), V | D, ARGS_ANY, 0, "virtio-vsock: host socket bytes into guest buffers" },
	{ SCMP_SYS(pread64), V | C, ARGS_ANY, 0, "virtio-blk reads; console log cap: a rotation copies the log" },
	{ SCMP_SYS(pwrite64), V | C, ARGS_ANY, 0,
	  "virtio-blk writes; snapshot: the file passed in; console log cap: the copy into the older part" },
	{ SCMP_SYS(preadv), V, ARGS_ANY, 0, "virtio-blk scattered reads" },
	{ SCMP_SYS(pwritev), V, ARGS_ANY, 0, "virtio-blk scattered writes" },
	{ SCMP_SYS(preadv2), V, ARGS_ANY, 0, "virtio-blk scattered reads (glibc)" },
	{ SCMP_SYS(pwritev2), V, ARGS_ANY, 0, "virtio-blk scattered writes (glibc)" },
	{ SCMP_SYS(fdatasync), V, ARGS_ANY, 0, "virtio-blk flush" },
	{ SCMP_SYS(fsync), V | C, ARGS_ANY, 0, "virtio-blk flush; snapshot: the file passed in" },
	{ SCMP_SYS(fallocate), V, ARGS_ANY, 0, "virtio-blk discard (punch hole)" },
	{ SCMP_SYS(getrandom), V, ARGS_ANY, 0, "virtio-rng entropy" },
	{ SCMP_SYS(close), ALL, ARGS_ANY, 0, "closed connections, teardown" },
	/* Sockets: unix sockets only (the vsock host side and the control socket). */
	{ SCMP_SYS(socket), V, ARG0_EQ, AF_UNIX, "virtio-vsock: a guest connection to a host unix socket" },
	{ SCMP_SYS(connect), V, ARGS_ANY, 0, "virtio-vsock: a guest connection to a host unix socket" },
	{ SCMP_SYS(accept4), D | C, ARGS_ANY, 0, "virtio-vsock host clients, control clients" },
	{ SCMP_SYS(sendmsg), ALL, ARGS_ANY, 0, "guest data to host sockets, control replies" },
	{ SCMP_SYS(sendto), ALL, ARGS_ANY, 0, "send() with MSG_NOSIGNAL" },
	{ SCMP_SYS(recvmsg), C, ARGS_ANY, 0, "control requests" },
	{ SCMP_SYS(recvfrom), C, ARGS_ANY, 0, "recv() of control requests" },
	{ SCMP_SYS(shutdown), ALL, ARGS_ANY, 0, "half-close towards the host" },
	{ SCMP_SYS(epoll_ctl), V | D, ARGS_ANY, 0, "per-connection interest" },
	{ SCMP_SYS(epoll_wait), D, ARGS_ANY, 0, "event loops" },
	{ SCMP_SYS(epoll_pwait), D, ARGS_ANY, 0, "epoll_wait through glibc" },
	{ SCMP_SYS(poll), D | C, ARGS_ANY, 0, "event loops; the main thread waits for the stop event" },
	{ SCMP_SYS(ppoll), D | C, ARGS_ANY, 0, "poll through glibc" },
	/* Threads, locks, signals. */
	{ SCMP_SYS(futex), ALL, ARGS_ANY, 0, "mutexes, condition variables, pthread_join" },
	{ SCMP_SYS(rt_sigprocmask), ALL, ARGS_ANY, 0, "glibc blocks signals in pthread_kill and thread exit" },
	{ SCMP_SYS(rt_sigreturn), ALL, ARGS_ANY, 0, "return from the SIGUSR1 kick handler" },
	{ SCMP_SYS(tgkill), V | C, ARGS_ANY, 0, "pthread_kill kicks vCPU threads out of KVM_RUN" },
	{ SCMP_SYS(getpid), V | C, ARGS_ANY, 0, "pthread_kill" },
	{ SCMP_SYS(gettid), V | C, ARGS_ANY, 0, "pthread_kill" },
	{ SCMP_SYS(clock_gettime), ALL, ARGS_ANY, 0, "timeouts (when the vDSO is not used)" },
	{ SCMP_SYS(exit), ALL, ARGS_ANY, 0, "thread exit" },
	{ SCMP_SYS(exit_group), ALL, ARGS_ANY, 0, "process exit" },
	{ SCMP_SYS(lseek), C, ARGS_ANY, 0, "disk size queries; snapshot: SEEK_DATA over guest RAM" },
	{ SCMP_SYS(fstat), C, ARGS_ANY, 0, "stdio; snapshot: check the file passed in" },
	{ SCMP_SYS(newfstatat), C, ARGS_ANY, 0, "fstat through glibc" },
	/* Main thread only. */
	{ SCMP_SYS(clone), MAIN_ONLY, ARG0_THREAD, 0, "vCPU threads (threads only: no new processes)" },
	{ SCMP_SYS(rt_sigaction), MAIN_ONLY, ARG0_NE, SIGSYS,
	  "the SIGUSR1 kick handler, glibc's thread signals (the SIGSYS reporter stays)" },
	{ SCMP_SYS(set_robust_list), MAIN_ONLY, ARGS_ANY, 0, "new threads (glibc)" },
	{ SCMP_SYS(rseq), MAIN_ONLY, ARGS_ANY, 0, "new threads (glibc registers rseq)" },
	{ SCMP_SYS(seccomp), MAIN_ONLY, ARG0_EQ, SECCOMP_SET_MODE_FILTER,
	  "threads narrow themselves to their role (a filter can only take away)" },
	{ SCMP_SYS(nanosleep), MAIN_ONLY, ARGS_ANY, 0, "short sleeps" },
	{ SCMP_SYS(clock_nanosleep), MAIN_ONLY, ARGS_ANY, 0, "short sleeps" },
	{ SCMP_SYS(sched_yield), MAIN_ONLY, ARGS_ANY, 0, "spin-then-yield" },
};

/*
 * Sanitizer runtimes (LeakSanitizer's stop-the-world clone, report writing) need far more than a VMM: a
 * sanitized *test* build (meson -Dtest_switches=true) runs without the filter. Any other build installs
 * it, sanitized or not: nothing but the build options can take the filter away.
 */
#if HAVE_TEST_SWITCHES
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANDBOX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SANDBOX_SANITIZED 1
#endif
#endif
#endif

/*
 * Process-wide state. seccomp itself is per process (one VM per space-vmm), so this is too: the
 * thread filters, compiled once while everything may still be called (the reporter's names are in
 * util/confine.c).
 */
static struct sock_fprog role_prog[VMM_THREAD_ROLES];
static atomic_bool armed;
static unsigned test_forbidden; /* roles whose threads make the forbidden call (the test hook) */
static int report_fd = -1;      /* the daemon's status file: the reporter's line goes there too */
static __thread int thread_role = -1;
static __thread bool thread_narrowed;

static bool in_role(const struct rule *r, enum vmm_thread_role role)
{
	return role == VMM_THREAD_MAIN || (r->roles & (1u << role));
}

size_t vmm_seccomp_rule_count(enum vmm_thread_role role)
{
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
		n += in_role(&rules[i], role);
	return n;
}

const char *vmm_seccomp_role_name(enum vmm_thread_role role)
{
	static const char *const names[] = { "main", "vCPU", "device", "control" };
	return (unsigned)role < ARRAY_SIZE(names) ? names[role] : "unknown";
}

static int add_rule(scmp_filter_ctx ctx, const struct rule *r)
{
	switch (r->check) {
	case ARG1_EQ:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A1(SCMP_CMP_EQ, r->value));
	case ARG0_EQ:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, r->value));
	case ARG0_NE:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_NE, r->value));
	case ARG2_NO_EXEC:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	case ARG0_THREAD:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1,
					SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	case ARGS_ANY:
		break;
	}
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 0);
}

static int build(enum vmm_thread_role role, scmp_filter_ctx *ret, char *err, size_t errlen)
{
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx) {
		snprintf(err, errlen, "seccomp_init failed");
		return -ENOMEM;
	}
	int r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, CONFINE_KILL_SYSCALL, 0);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(rules); i++)
		if (in_role(&rules[i], role) && (r = add_rule(ctx, &rules[i])) < 0)
			snprintf(err, errlen, "%s rule for syscall %d: %s", vmm_seccomp_role_name(role),
				 rules[i].nr, strerror(-r));
	/* clone3 takes its flags in memory seccomp cannot read: make glibc fall back to clone. */
	if (r == 0 && role == VMM_THREAD_MAIN &&
	    (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		snprintf(err, errlen, "clone3 rule: %s", strerror(-r));
	if (r < 0)
		return r;
	*ret = TAKE_PTR(ctx);
	return 0;
}

/* Compiles ROLE's filter to BPF in memory, for vmm_seccomp_thread_enter (no allocation later). */
static int compile(enum vmm_thread_role role, struct sock_fprog *ret, char *err, size_t errlen)
{
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
	int r = build(role, &ctx, err, errlen);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = memfd_create("space-vmm-bpf", MFD_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "memfd_create: %m");
		return -errno;
	}
	if ((r = seccomp_export_bpf(ctx, fd)) < 0) {
		snprintf(err, errlen, "seccomp_export_bpf: %s", strerror(-r));
		return r;
	}
	off_t size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) || size / 8 > BPF_MAXINSNS) {
		snprintf(err, errlen, "exported filter has a bad size");
		return -EIO;
	}
	struct sock_filter *insns = malloc((size_t)size);
	if (!insns)
		return -ENOMEM;
	if (pread(fd, insns, (size_t)size, 0) != size) {
		free(insns);
		snprintf(err, errlen, "cannot read the exported filter");
		return -EIO;
	}
	*ret = (struct sock_fprog){ .len = (unsigned short)(size / (off_t)sizeof(*insns)), .filter = insns };
	return 0;
}

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char msg[160];
	size_t n = confine_put(msg, 0, sizeof(msg), "space-vmm: seccomp violation: ");
	unsigned nr = (unsigned)si->si_syscall;
	n = confine_put(msg, n, sizeof(msg), confine_syscall_name(nr));
	n = confine_put(msg, n, sizeof(msg), " (");
	n = confine_put_uint(msg, n, sizeof(msg), nr);
	n = confine_put(msg, n, sizeof(msg), ") in a ");
	n = confine_put(msg, n, sizeof(msg), thread_role >= 0 ? vmm_seccomp_role_name(thread_role) : "main");
	n = confine_put(msg, n, sizeof(msg), " thread\n");
	ssize_t w = write(STDERR_FILENO, msg, n);
	/* The status file gets the reason without the "space-vmm: " prefix (the library's format). */
	if (report_fd >= 0)
		w = write(report_fd, msg + 11, n - 11);
	(void)w;
	confine_sigsys_die(); /* SIGSYS for the whole process */
}

int vmm_seccomp_apply(enum vmm_thread_role role, char *err, size_t errlen)
{
	if ((unsigned)role >= VMM_THREAD_ROLES) {
		snprintf(err, errlen, "unknown thread role %d", (int)role);
		return -EINVAL;
	}
#ifdef SANDBOX_SANITIZED
	return 0; /* sanitizer builds are for finding bugs, not for running untrusted guests */
#endif
	int r = confine_sigsys_install(on_sigsys, err, errlen);
	if (r < 0)
		return r;
	if (role == VMM_THREAD_MAIN) {
		for (int k = VMM_THREAD_VCPU; k < VMM_THREAD_ROLES; k++)
			if (!role_prog[k].filter && (r = compile(k, &role_prog[k], err, errlen)) < 0)
				return r;
#if HAVE_TEST_SWITCHES
		const char *t = getenv("SPACE_VMM_TEST_FORBIDDEN_SYSCALL");
		/* "1": vCPU and device threads; "device": device threads only (vCPU threads start first). */
		test_forbidden = !t ? 0 : strcmp(t, "1") == 0 ? V | D : strcmp(t, "device") == 0 ? D : 0;
#endif
	}
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
	if ((r = build(role, &ctx, err, errlen)) < 0)
		return r;
	/* MAIN is the process filter: every thread that exists already gets it too. */
	if (role == VMM_THREAD_MAIN && (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0) {
		snprintf(err, errlen, "seccomp TSYNC: %s", strerror(-r));
		return r;
	}
	if ((r = seccomp_load(ctx)) < 0) {
		snprintf(err, errlen, "cannot load the %s seccomp filter: %s", vmm_seccomp_role_name(role),
			 strerror(-r));
		return r;
	}
	thread_role = (int)role;
	if (role == VMM_THREAD_MAIN)
		atomic_store(&armed, true);
	return 0;
}

int vmm_seccomp_thread_enter(enum vmm_thread_role role)
{
	if ((unsigned)role >= VMM_THREAD_ROLES || role == VMM_THREAD_MAIN)
		return -EINVAL;
	if (!atomic_load(&armed) || thread_narrowed)
		return 0;
	/* The calling thread alone (no TSYNC); no_new_privs is inherited from the process filter. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &role_prog[role]) < 0)
		return -errno;
	thread_narrowed = true;
	thread_role = (int)role;
	if (test_forbidden & (1u << role)) {
		/* The test hook: a syscall this role may not make. The reporter names it, then we die. */
		char *const argv[] = { (char *)"/", NULL };
		execve("/", argv, argv + 1);
	}
	return 0;
}

void vmm_seccomp_set_report_fd(int fd)
{
	report_fd = fd;
}
