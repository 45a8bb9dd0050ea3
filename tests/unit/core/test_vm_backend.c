/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The vm back-end without KVM: the failure reason taken from space-vmm's status file (never from the log,
 * which holds the guest's console), and the daemon's ready protocol (`space-vmm run --ready-fd N --gate`
 * answers "error <reason>" when it cannot set up a VM, and writes the reason to --status FILE).
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

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int r = util_write_file_atomic(path, text, strlen(text), 0600);
	CHECK(r == 0, "write %s: %s", path, strerror(-r));
}

static void test_death_reason(void)
{
	char dir[] = "/tmp/space-vmbackend-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char why[256];

	vm_backend_death_reason(dir, 42, why, sizeof(why));
	CHECK(strstr(why, "pid 42") && strstr(why, "without giving a reason"), "no status: '%s'", why);

	/* The last line of the status file is the reason. */
	write_file(dir, "vmm.status", "guest powered off\ntriple fault on vCPU 0\n");
	vm_backend_death_reason(dir, 7, why, sizeof(why));
	CHECK(!strcmp(why, "space-vmm: triple fault on vCPU 0"), "triple fault: '%s'", why);

	/* A guest prints whatever it likes on its console, which is in sandbox.log: never the reason. Before
	 * the status file, the library took the last "space-vmm: " line of the log, so this was reported. */
	write_file(dir, "sandbox.log", "[    0.1] Linux version 6.1\nspace-vmm: forged by the guest\n"
				       "space-vmm: killed by signal 9 (Killed)\n");
	vm_backend_death_reason(dir, 7, why, sizeof(why));
	CHECK(!strstr(why, "forged") && !strcmp(why, "space-vmm: triple fault on vCPU 0"), "forged: '%s'", why);
	char st_path[600];
	snprintf(st_path, sizeof(st_path), "%s/vmm.status", dir);
	unlink(st_path);
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strstr(why, "forged") && strstr(why, "without giving a reason"), "forged, no status: '%s'", why);

	/* Control characters never reach the reason (a VMM a guest took over writes the status file). */
	write_file(dir, "vmm.status", "seccomp violation: execve (59) in a vcpu thread\x1b[2J\x01\xc2\x9b\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strchr(why, '\x1b') && !strchr(why, '\x01') && !strchr(why, '\xc2') &&
		      strstr(why, "seccomp violation: execve"),
	      "seccomp: '%s'", why);

	/* SIGKILL: the supervisor's line alone; SIGSYS: the violation, with the signal. */
	write_file(dir, "vmm.status", "killed by signal 9 (Killed)\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strcmp(why, "space-vmm: killed by signal 9 (Killed)"), "sigkill: '%s'", why);
	write_file(dir, "vmm.status", "seccomp violation: execve (59) in a vcpu thread\n"
				      "killed by signal 31 (Bad system call)\n");
	vm_backend_death_reason(dir, 9, why, sizeof(why));
	CHECK(!strcmp(why, "space-vmm: seccomp violation: execve (59) in a vcpu thread (killed by signal 31 (Bad "
			   "system call))"),
	      "sigsys: '%s'", why);

	/* A reason longer than the buffer is cut, still NUL-terminated; a huge file is read from its tail. */
	char small[16];
	vm_backend_death_reason(dir, 9, small, sizeof(small));
	CHECK(strlen(small) == sizeof(small) - 1, "truncation: '%s'", small);
	char *big = malloc(1 << 20);
	CHECK(big != NULL, "malloc");
	if (big) {
		memset(big, 'x', (1 << 20) - 32);
		snprintf(big + (1 << 20) - 32, 32, "\nthe real reason\n");
		write_file(dir, "vmm.status", big);
		vm_backend_death_reason(dir, 9, why, sizeof(why));
		CHECK(!strcmp(why, "space-vmm: the real reason"), "big file: '%s'", why);
		free(big);
	}
	util_rm_rf(dir);
}

/* space-vmm run reports a setup failure on its ready fd, after the gate. */
static void test_ready_error(void)
{
	const char *vmm = getenv("SPACE_VMM_PATH");
	if (!vmm) { /* tests/meson.build names it whenever space-vmm is configured */
		printf("skip ready protocol: built without space-vmm (-Dvmm=false)\n");
		return;
	}
	if (access(vmm, X_OK) < 0) { /* configured but missing: a broken build fails */
		CHECK(0, "space-vmm not built: SPACE_VMM_PATH=%s", vmm);
		return;
	}
	char dir[] = "/tmp/space-vmready-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char ctl[600], logp[600], statusp[600];
	snprintf(ctl, sizeof(ctl), "%s/control.sock", dir);
	snprintf(logp, sizeof(logp), "%s/vm.log", dir);
	snprintf(statusp, sizeof(statusp), "%s/vmm.status", dir);
	int sp[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
	const char *argv[] = { "space-vmm", "run", "--kernel", "/nonexistent/kernel", "--control", ctl, "--log", logp,
			       "--status", statusp, "--ready-fd", "3", "--gate", "--foreground", NULL };
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
		/* The same reason reaches the library through the status file, the channel it reads. */
		char why[512];
		vm_backend_death_reason(dir, (int)pid, why, sizeof(why));
		line[strcspn(line, "\n")] = '\0';
		CHECK(!strncmp(why, "space-vmm: ", 11) && !strcmp(why + 11, line + 6), "status file reason '%s' vs '%s'",
		      why, line + 6);
		printf("reason from the status file: %s\n", why);
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
