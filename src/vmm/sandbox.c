/* SPDX-License-Identifier: Apache-2.0 */
/* seccomp allowlist of space-vmm (see sandbox.h). Each entry says why the running VMM needs it. */
#include "vmm/sandbox.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/socket.h>

#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)

static const struct {
	int nr;
	const char *why;
} allowed[] = {
	{ SCMP_SYS(ioctl), "KVM_RUN, KVM_IRQ_LINE, register reads for error reports" },
	{ SCMP_SYS(read), "eventfds" },
	{ SCMP_SYS(write), "console, console log, eventfds (irqfd, stop), stderr" },
	{ SCMP_SYS(writev), "stdio on stderr" },
	{ SCMP_SYS(pread64), "virtio-blk reads" },
	{ SCMP_SYS(pwrite64), "virtio-blk writes" },
	{ SCMP_SYS(preadv), "virtio-blk scattered reads" },
	{ SCMP_SYS(pwritev), "virtio-blk scattered writes" },
	{ SCMP_SYS(preadv2), "virtio-blk scattered reads" },
	{ SCMP_SYS(pwritev2), "virtio-blk scattered writes" },
	{ SCMP_SYS(fdatasync), "virtio-blk flush" },
	{ SCMP_SYS(fsync), "virtio-blk flush" },
	{ SCMP_SYS(fallocate), "virtio-blk discard (punch hole)" },
	{ SCMP_SYS(lseek), "disk size queries" },
	{ SCMP_SYS(fstat), "disk size queries" },
	{ SCMP_SYS(newfstatat), "fstat through glibc" },
	{ SCMP_SYS(poll), "vm_run waits for the stop eventfd" },
	{ SCMP_SYS(ppoll), "poll through glibc" },
	{ SCMP_SYS(futex), "mutexes, condition variables, pthread_join" },
	{ SCMP_SYS(rt_sigaction), "the no-op SIGUSR1 handler that kicks vCPUs" },
	{ SCMP_SYS(rt_sigprocmask), "signal masks around thread creation" },
	{ SCMP_SYS(rt_sigreturn), "return from the kick handler" },
	{ SCMP_SYS(tgkill), "pthread_kill kicks a vCPU thread" },
	{ SCMP_SYS(getpid), "pthread_kill" },
	{ SCMP_SYS(gettid), "pthread_kill" },
	{ SCMP_SYS(set_robust_list), "new threads" },
	{ SCMP_SYS(rseq), "new threads (glibc registers rseq)" },
	{ SCMP_SYS(mmap), "thread stacks, malloc" },
	{ SCMP_SYS(munmap), "thread stacks, malloc, teardown" },
	{ SCMP_SYS(mprotect), "thread stack guard pages, malloc arenas" },
	{ SCMP_SYS(madvise), "glibc frees thread stacks and arenas" },
	{ SCMP_SYS(mremap), "realloc of large buffers" },
	{ SCMP_SYS(brk), "malloc" },
	{ SCMP_SYS(close), "teardown" },
	{ SCMP_SYS(clock_gettime), "timeouts (when the vDSO is not used)" },
	{ SCMP_SYS(clock_nanosleep), "short sleeps" },
	{ SCMP_SYS(nanosleep), "short sleeps" },
	{ SCMP_SYS(sched_yield), "spin-then-yield locks" },
	{ SCMP_SYS(getrandom), "virtio-rng entropy" },
	{ SCMP_SYS(epoll_wait), "virtio-vsock host event thread" },
	{ SCMP_SYS(epoll_pwait), "epoll_wait through glibc" },
	{ SCMP_SYS(epoll_ctl), "virtio-vsock per-connection interest" },
	{ SCMP_SYS(accept4), "virtio-vsock host clients" },
	{ SCMP_SYS(connect), "virtio-vsock guest connections to host unix sockets" },
	{ SCMP_SYS(shutdown), "virtio-vsock half-close towards the host" },
	{ SCMP_SYS(readv), "virtio-vsock host socket into guest buffers" },
	{ SCMP_SYS(sendmsg), "virtio-vsock guest data to host sockets (MSG_NOSIGNAL)" },
	{ SCMP_SYS(sendto), "virtio-vsock OK line (send with MSG_NOSIGNAL)" },
	{ SCMP_SYS(exit), "thread exit" },
	{ SCMP_SYS(exit_group), "process exit" },
};

/* Sanitizer runtimes (LeakSanitizer's stop-the-world clone, report writing) need far more than a VMM. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANDBOX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SANDBOX_SANITIZED 1
#endif
#endif

int vmm_sandbox_apply(void)
{
#ifdef SANDBOX_SANITIZED
	return 0; /* sanitizer builds are for finding bugs, not for running untrusted guests */
#endif
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -ENOMEM;
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i].nr, 0)) < 0)
			return r;
	/* Threads only (vCPU threads start after the filter): clone without CLONE_THREAD is refused. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (r < 0)
		return r;
	/* virtio-vsock bridges guest connections to host unix sockets: AF_UNIX only. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (r < 0)
		return r;
	/* clone3 takes its flags in memory seccomp cannot read: make glibc fall back to clone. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0)
		return r;
	return seccomp_load(ctx);
}
