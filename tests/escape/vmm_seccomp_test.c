/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-vmm's seccomp filters without KVM: each case forks a child that installs a role's filter and
 * then makes one call. Forbidden calls must kill the child with SIGSYS after it names the syscall on
 * stderr; the calls each role needs must keep working.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "vmm/sandbox.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static int apply(enum vmm_thread_role role)
{
	char err[256];
	int r = vmm_seccomp_apply(role, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "apply %s: %s\n", vmm_seccomp_role_name(role), err);
		_exit(90);
	}
	return r;
}

/* ---- the cases: each runs in a fresh child ---- */

static void device_execve(void)
{
	apply(VMM_THREAD_DEVICE);
	char *const argv[] = { (char *)"/bin/true", NULL };
	execve("/bin/true", argv, argv + 1);
}

static void vcpu_socket_inet(void)
{
	apply(VMM_THREAD_VCPU);
	(void)socket(AF_INET, SOCK_STREAM, 0);
}

static void vcpu_mmap_exec(void)
{
	apply(VMM_THREAD_VCPU);
	(void)mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void vcpu_mprotect_exec(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	apply(VMM_THREAD_VCPU);
	(void)mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

static void vcpu_open(void)
{
	apply(VMM_THREAD_VCPU);
	(void)open("/etc/passwd", O_RDONLY | O_CLOEXEC);
}

static void vcpu_other_ioctl(void)
{
	apply(VMM_THREAD_VCPU);
	(void)ioctl(0, KVM_SET_USER_MEMORY_REGION, NULL); /* KVM, but not a vCPU thread's request */
}

/* What a vCPU thread does: must all be allowed (the child exits 0). */
static void vcpu_allowed(void)
{
	int p[2];
	if (pipe(p) < 0)
		_exit(91);
	apply(VMM_THREAD_VCPU);
	char buf[16];
	if (write(p[1], "x", 1) != 1 || read(p[0], buf, 1) != 1)
		_exit(92);
	void *big = malloc(8 << 20); /* mmap without PROT_EXEC */
	if (!big)
		_exit(93);
	free(big);
	if (getrandom(buf, sizeof(buf), 0) != sizeof(buf))
		_exit(94);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		_exit(95);
	close(s);
	if (ioctl(-1, KVM_RUN, 0) != -1 || errno != EBADF) /* the request passes the filter */
		_exit(96);
	_exit(0);
}

static void main_fork(void)
{
	apply(VMM_THREAD_MAIN);
	(void)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0); /* a process, not a thread */
}

static void main_sigsys_handler(void)
{
	apply(VMM_THREAD_MAIN);
	signal(SIGSYS, SIG_IGN); /* the reporter cannot be replaced */
}

static void main_ptrace(void)
{
	pid_t parent = getppid();
	apply(VMM_THREAD_MAIN);
	(void)ptrace(PTRACE_ATTACH, parent, NULL, NULL);
}

/* The control thread reads VM state for snapshots; it never changes it. */
static void control_kvm_set_regs(void)
{
	apply(VMM_THREAD_CONTROL);
	(void)ioctl(-1, KVM_SET_REGS, 0);
}

static void *vcpu_thread_opens(void *arg)
{
	(void)arg;
	if (vmm_seccomp_thread_enter(VMM_THREAD_VCPU) < 0)
		_exit(97);
	if (ioctl(-1, KVM_RUN, 0) != -1 || errno != EBADF)
		_exit(98);
	(void)open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	return NULL;
}

/* The process filter then a thread that narrows itself: the thread, not main, may not open files. */
static void main_then_vcpu_thread(void)
{
	apply(VMM_THREAD_MAIN);
	pthread_t t;
	if (pthread_create(&t, NULL, vcpu_thread_opens, NULL))
		_exit(99);
	pthread_join(t, NULL);
}

static void *plain_thread(void *arg)
{
	(void)arg;
	(void)vmm_seccomp_thread_enter(VMM_THREAD_VCPU);
	return NULL;
}

/* The test hook of space-vmm: SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 makes a vCPU thread call execve, in test
 * builds only (meson -Dtest_switches=true); any other build ignores the variable. */
static void test_hook(void)
{
	setenv("SPACE_VMM_TEST_FORBIDDEN_SYSCALL", "1", 1);
	apply(VMM_THREAD_MAIN);
	pthread_t t;
	if (pthread_create(&t, NULL, plain_thread, NULL))
		_exit(99);
	pthread_join(t, NULL);
}

/* Before the process filter, thread_enter does nothing (a --no-seccomp run). */
static void unarmed_thread_enter(void)
{
	if (vmm_seccomp_thread_enter(VMM_THREAD_VCPU) < 0)
		_exit(97);
	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	_exit(fd >= 0 ? 0 : 98);
}

static const struct test_case {
	const char *name;
	void (*fn)(void);
	bool dies;          /* killed by SIGSYS (else: exits 0) */
	const char *report; /* expected on stderr */
} cases[] = {
	{ "device thread: execve", device_execve, true, "seccomp violation: execve (59) in a device thread" },
	{ "vCPU thread: socket(AF_INET)", vcpu_socket_inet, true, "seccomp violation: socket" },
	{ "vCPU thread: mmap PROT_EXEC", vcpu_mmap_exec, true, "seccomp violation: mmap" },
	{ "vCPU thread: mprotect PROT_EXEC", vcpu_mprotect_exec, true, "seccomp violation: mprotect" },
	{ "vCPU thread: open", vcpu_open, true, "seccomp violation: open" },
	{ "vCPU thread: KVM_SET_USER_MEMORY_REGION", vcpu_other_ioctl, true, "seccomp violation: ioctl" },
	{ "vCPU thread: its own work", vcpu_allowed, false, NULL },
	{ "main: fork", main_fork, true, "seccomp violation: clone" },
	{ "main: replace the SIGSYS reporter", main_sigsys_handler, true, "seccomp violation: rt_sigaction" },
	{ "main: ptrace", main_ptrace, true, "seccomp violation: ptrace" },
	{ "control thread: KVM_SET_REGS", control_kvm_set_regs, true, "seccomp violation: ioctl" },
	{ "vCPU thread under the process filter: open", main_then_vcpu_thread, true,
	  "seccomp violation: openat (257) in a vCPU thread" },
#if HAVE_TEST_SWITCHES
	{ "test hook SPACE_VMM_TEST_FORBIDDEN_SYSCALL", test_hook, true, "seccomp violation: execve" },
#else
	{ "test hook SPACE_VMM_TEST_FORBIDDEN_SYSCALL ignored (release build)", test_hook, false, NULL },
#endif
	{ "thread_enter before the process filter", unarmed_thread_enter, false, NULL },
};

static int run_case(const struct test_case *c)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		c->fn();
		_exit(0);
	}
	close(p[1]);
	char out[1024];
	size_t n = 0;
	ssize_t k;
	while (n + 1 < sizeof(out) && (k = read(p[0], out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = '\0';
	close(p[0]);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	bool ok = c->dies ? WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS : WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (ok && c->report && !strstr(out, c->report))
		ok = false;
	if (ok) {
		printf("ok: %s\n", c->name);
		return 0;
	}
	printf("FAIL: %s: %s %d; stderr: %s\n", c->name, WIFSIGNALED(st) ? "signal" : "exit status",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), out);
	return 1;
}

int main(void)
{
#ifdef SANITIZED
	printf("SKIP: sanitizer builds install no seccomp filter\n");
	return 77;
#endif
	for (int role = 0; role < VMM_THREAD_ROLES; role++)
		printf("%s role: %zu rules\n", vmm_seccomp_role_name(role), vmm_seccomp_rule_count(role));
	int fails = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fails += run_case(&cases[i]) != 0;
	printf("vmm seccomp: %zu cases, %d failed\n", sizeof(cases) / sizeof(cases[0]), fails);
	return fails ? 1 : 0;
}
