/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The vm back-end without KVM: the failure reason taken from a space-vmm log, and the daemon's ready
 * protocol (`space-vmm run --ready-fd N --gate` answers "error <reason>" when it cannot set up a VM).
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../vmm/check.h"
#include "core/vm_backend.h"
#include "util/util.h"

extern char **environ;

static void write_log(const char *dir, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/sandbox.log", dir);
	int r = util_write_file_atomic(path, text, strlen(text), 0600);
	CHECK(r == 0, "write %s: %s", path, strerror(-r));
}

static void test_death_reason(void)
{
	char dir[] = "/tmp/space-vmbackend-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char why[256];

	vm_backend_death_reason(dir, 42, why, sizeof(why));
	CHECK(strstr(why, "pid 42") && strstr(why, "without giving a reason"), "no log: '%s'", why);

	/* The last space-vmm line wins over console noise and status notes after it. */
	write_log(dir, "[    0.1] Linux version 6.1\n"
		       "space-vmm: running (pid 1, 1 vCPUs, 256 MiB)\n"
		       "[    2.0] some guest line\n"
		       "space-vmm: triple fault on vCPU 0\n"
		       "[    2.1] trailing console\x01\x7f bytes\n"
		       "space-vmm: paused\n");
	vm_backend_death_reason(dir, 7, why, sizeof(why));
	CHECK(!strcmp(why, "space-vmm: triple fault on vCPU 0"), "triple fault: '%s'", why);

	/* Only status notes: the generic sentence, naming the log. */
	write_log(dir, "space-vmm: running (pid 1, 1 vCPUs, 256 MiB)\nspace-vmm: resumed\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(strstr(why, "sandbox.log") != NULL, "status only: '%s'", why);

	/* Control characters of a hostile console never reach the reason. */
	write_log(dir, "space-vmm: seccomp violation: execve (59) in a vcpu thread\x1b[2J\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strchr(why, '\x1b') && strstr(why, "seccomp violation: execve"), "seccomp: '%s'", why);

	/* SIGKILL: the supervisor's line alone; SIGSYS: the violation, with the signal. */
	write_log(dir, "space-vmm: running (pid 1, 1 vCPUs, 256 MiB)\nspace-vmm: killed by signal 9 (Killed)\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strcmp(why, "space-vmm: killed by signal 9 (Killed)"), "sigkill: '%s'", why);
	write_log(dir, "space-vmm: seccomp violation: execve (59) in a vcpu thread\n"
		       "space-vmm: killed by signal 31 (Bad system call)\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strcmp(why, "space-vmm: seccomp violation: execve (59) in a vcpu thread (killed by signal 31 (Bad "
			   "system call))"),
	      "sigsys: '%s'", why);

	/* A reason longer than the buffer is cut, still NUL-terminated. */
	char small[16];
	vm_backend_death_reason(dir, 9, small, sizeof(small));
	CHECK(strlen(small) == sizeof(small) - 1, "truncation: '%s'", small);
	util_rm_rf(dir);
}

/* space-vmm run reports a setup failure on its ready fd, after the gate. */
static void test_ready_error(void)
{
	const char *vmm = getenv("SPACE_VMM_PATH");
	if (!vmm || access(vmm, X_OK) < 0) {
		printf("skip ready protocol: no SPACE_VMM_PATH\n");
		return;
	}
	char dir[] = "/tmp/space-vmready-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char ctl[600], logp[600];
	snprintf(ctl, sizeof(ctl), "%s/control.sock", dir);
	snprintf(logp, sizeof(logp), "%s/vm.log", dir);
	int sp[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
	const char *argv[] = { "space-vmm", "run", "--kernel", "/nonexistent/kernel", "--control", ctl, "--log", logp,
			       "--ready-fd", "3", "--gate", "--foreground", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sp[1], 3);
	pid_t pid;
	int e = posix_spawn(&pid, vmm, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	CHECK(e == 0, "spawn %s: %s", vmm, strerror(e));
	close(sp[1]);
	if (e == 0) {
		CHECK(send(sp[0], "g", 1, MSG_NOSIGNAL) == 1, "gate");
		char line[512] = "";
		ssize_t n = 0, k;
		while (n < (ssize_t)sizeof(line) - 1 && (k = read(sp[0], line + n, sizeof(line) - 1 - (size_t)n)) > 0)
			n += k;
		line[n > 0 ? n : 0] = '\0';
		int st = 0;
		waitpid(pid, &st, 0);
		CHECK(!strncmp(line, "error ", 6) && strchr(line, '\n'), "ready line: '%s'", line);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status 0x%x", st);
		printf("space-vmm run without a usable kernel/KVM says: %s", line);
	}
	close(sp[0]);
	util_rm_rf(dir);
}

int main(void)
{
	test_death_reason();
	test_ready_error();
	return check_exit();
}
