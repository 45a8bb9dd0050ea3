/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Static helper copied into the test rootfs; runs inside the jail.
 *   probe seccomp          prints "<name>=<errno>" for calls the jail must refuse (0 = allowed)
 *   probe alloc <MiB>      allocates and touches memory, prints "alloc-done" if it survives
 *   probe forks <n>        forks up to n sleeping children, prints "forks=<made> err=<errno>"
 */
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long r)
{
	printf("%s=%d\n", name, r < 0 ? errno : 0);
}

static int do_seccomp(void)
{
	report("init_module", syscall(SYS_init_module, NULL, 0, ""));
	report("finit_module", syscall(SYS_finit_module, -1, "", 0));
	report("delete_module", syscall(SYS_delete_module, "loop", 0));
	report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
	report("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
	report("add_key", syscall(SYS_add_key, "user", "x", "y", 1, -3));
	report("bpf", syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, NULL, 0));
	report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	report("ptrace", syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
	report("userfaultfd", syscall(SYS_userfaultfd, 0));
	report("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, NULL, 0));
	report("swapon", syscall(SYS_swapon, "/nonexistent", 0));
	report("settimeofday", syscall(SYS_settimeofday, NULL, NULL));
	report("syslog", syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0));
	report("setns", syscall(SYS_setns, -1, 0));
	report("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
	report("unshare_user", syscall(SYS_unshare, CLONE_NEWUSER));
	report("clone_user", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0));
	report("clone3", syscall(SYS_clone3, NULL, 0));
	report("personality_bad", syscall(SYS_personality, 0x0400000 /* READ_IMPLIES_EXEC */));
	report("socket_vsock", syscall(SYS_socket, 40 /* AF_VSOCK */, SOCK_STREAM, 0));
	/* Allowed ones, to show the filter does not break normal programs. */
	report("personality_query", syscall(SYS_personality, 0xffffffffUL));
	report("unshare_mnt", syscall(SYS_unshare, CLONE_NEWNS));
	long pid = syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	report("clone_plain", pid);
	return 0;
}

static int do_alloc(long mib)
{
	for (long i = 0; i < mib; i++) {
		char *p = malloc(1 << 20);
		if (!p) {
			printf("alloc-failed\n");
			return 1;
		}
		memset(p, 0x5a, 1 << 20);
	}
	printf("alloc-done\n");
	return 0;
}

static int do_forks(long n)
{
	long made = 0;
	int err = 0;
	for (; made < n; made++) {
		pid_t pid = fork();
		if (pid == 0) {
			sleep(3);
			_exit(0);
		}
		if (pid < 0) {
			err = errno;
			break;
		}
	}
	printf("forks=%ld err=%d\n", made, err);
	fflush(stdout);
	while (wait(NULL) > 0)
		;
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "seccomp"))
		return do_seccomp();
	if (argc >= 3 && !strcmp(argv[1], "alloc"))
		return do_alloc(atol(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "forks"))
		return do_forks(atol(argv[2]));
	fprintf(stderr, "usage: probe seccomp | alloc MiB | forks N\n");
	return 2;
}
