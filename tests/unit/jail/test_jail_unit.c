/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jail pieces that need no privileges: the boundary warning, argument checks, cgroup spec parsing, and the
 * seccomp program itself (installed in a forked child: seccomp with no_new_privs needs no root).
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"
#include "jail/jail_internal.h"

#include "jail_check.h"

static int test_boundary(void)
{
	const char *s = jail_describe_boundary();
	CHECK(s && strstr(s, "weaker") && strstr(s, "kernel") && !strchr(s, '\n'), "boundary line: %s", s);
	return 0;
}

static int test_args(void)
{
	struct jail_info info;
	char err[128] = "";
	struct jail_config cfg = { .id = "sb-x", .rootfs_image = "/x", .agent_path = "/y", .listen_fd = -1,
		                   .log_fd = -1 };
	CHECK(jail_start(NULL, &info, err, sizeof(err)) == -EINVAL, "NULL config");
	struct jail_config bad = cfg;
	bad.id = "../../etc";
	CHECK(jail_start(&bad, &info, err, sizeof(err)) == -EINVAL && err[0], "bad id: %s", err);
	bad = cfg;
	bad.rootfs_image = NULL;
	CHECK(jail_start(&bad, &info, err, sizeof(err)) == -EINVAL, "no image");
	bad = cfg;
	bad.hostname = "a-very-long-hostname-that-does-not-fit-into-the-sixty-four-bytes-of-utsname-xxxxxxxx";
	CHECK(jail_start(&bad, &info, err, sizeof(err)) == -EINVAL, "long hostname");

	struct jail_info none = { 0 };
	CHECK(jail_alive(&none) == 0, "no pid is not alive");
	CHECK(jail_alive(NULL) == 0, "NULL is not alive");
	CHECK(jail_kill(&none, 0) == 0, "kill of nothing is fine");
	CHECK(jail_kill(NULL, 0) == -EINVAL, "kill NULL");
	CHECK(jail_freeze(&none, true) == -EINVAL, "freeze without cgroup");

	/* A pid that exists with another start time is not our jail: never signalled. */
	struct jail_info reused = { .pid = getpid(), .start_time = 1 };
	CHECK(jail_alive(&reused) == 0, "reused pid");
	CHECK(jail_kill(&reused, 0) == 0, "kill of a reused pid is a no-op");
	return 0;
}

static int test_cgroup_spec(void)
{
	char buf[64];
	static const char *const bad[] = { "", "v3:space/x", "v1:", "v1:/abs", "v2:space.slice/../../x", "space/x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(jail_cgroup_attach(bad[i], 1) == -EINVAL, "attach '%s'", bad[i]);
		CHECK(jail_cgroup_remove(bad[i], 0) == -EINVAL, "remove '%s'", bad[i]);
		CHECK(jail_cgroup_freeze(bad[i], true) == -EINVAL, "freeze '%s'", bad[i]);
		CHECK(jail_cgroup_read(bad[i], "pids", "pids.max", buf, sizeof(buf)) == -EINVAL, "read '%s'", bad[i]);
	}
	CHECK(jail_cgroup_remove(NULL, 0) == -EINVAL, "NULL spec");
	/* Removing a cgroup that does not exist is fine (idempotent kill). */
	CHECK(jail_cgroup_remove("v1:space/sb-unit-never-created", 0) == 0, "missing v1");
	CHECK(jail_cgroup_remove("v2:space.slice/sb-unit-never-created", 0) == 0, "missing v2");
	return 0;
}

/* In a child: install the filter, report what a few calls return. */
static int seccomp_child(const void *prog, size_t len)
{
	if (jail_seccomp_install(prog, len) < 0)
		return 10;
	int fails = 0;
	long r;
#define EXPECT(call, want)                                                                                 \
	do {                                                                                               \
		errno = 0;                                                                                 \
		r = (call);                                                                                \
		int e = r < 0 ? errno : 0;                                                                 \
		if (e != (want)) {                                                                         \
			fprintf(stderr, "FAIL %s -> errno %d, want %d\n", #call, e, (want));               \
			fails++;                                                                           \
		}                                                                                          \
	} while (0)
	EXPECT(syscall(SYS_init_module, NULL, 0, ""), EPERM);
	EXPECT(syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
	EXPECT(syscall(SYS_bpf, 0, NULL, 0), EPERM);
	EXPECT(syscall(SYS_keyctl, 0, -3, 0), EPERM);
	EXPECT(syscall(SYS_unshare, CLONE_NEWUSER), EPERM);
	EXPECT(syscall(SYS_clone3, NULL, 0), ENOSYS);
	EXPECT(syscall(SYS_socket, 40, SOCK_STREAM, 0), EAFNOSUPPORT);
	EXPECT(syscall(SYS_personality, 0x0400000), EPERM);
	EXPECT(syscall(SYS_personality, 0xffffffffUL), 0);
	EXPECT(syscall(SYS_getpid), 0);
#undef EXPECT
	return fails ? 11 : 0;
}

static int test_seccomp(void)
{
	void *prog = NULL;
	size_t len = 0;
	int r = jail_seccomp_build(&prog, &len);
	CHECK(r == 0, "build: %s", strerror(-r));
	CHECK(len > 0 && len % sizeof(struct sock_filter) == 0 && len / sizeof(struct sock_filter) <= BPF_MAXINSNS,
	      "program size %zu", len);
	pid_t pid = fork();
	if (pid == 0)
		_exit(seccomp_child(prog, len));
	free(prog);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid, "wait");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "filter behaviour (status %d)", st);
	return 0;
}

int main(void)
{
	int fails = 0;
	fails += test_boundary();
	fails += test_args();
	fails += test_cgroup_spec();
	fails += test_seccomp();
	if (fails)
		return 1;
	printf("OK jail unit\n");
	return 0;
}
