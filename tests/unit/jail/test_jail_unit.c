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
		CHECK(util_cgroup_attach(bad[i], 1) == -EINVAL, "attach '%s'", bad[i]);
		CHECK(util_cgroup_remove(bad[i], 0) == -EINVAL, "remove '%s'", bad[i]);
		CHECK(util_cgroup_freeze(bad[i], true) == -EINVAL, "freeze '%s'", bad[i]);
		CHECK(util_cgroup_read(bad[i], "pids", "pids.max", buf, sizeof(buf)) == -EINVAL, "read '%s'", bad[i]);
	}
	CHECK(util_cgroup_remove(NULL, 0) == -EINVAL, "NULL spec");
	/* Removing a cgroup that does not exist is fine (idempotent kill). */
	CHECK(util_cgroup_remove("v1:space/sb-unit-never-created", 0) == 0, "missing v1");
	CHECK(util_cgroup_remove("v2:space.slice/sb-unit-never-created", 0) == 0, "missing v2");
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
	/* Issue 14 item 2: another process's descriptors and memory. */
	EXPECT(syscall(SYS_pidfd_getfd, -1, 1, 0), EPERM);
	EXPECT(syscall(440 /* process_madvise */, -1, NULL, 0, 0, 0), EPERM);
	/* Item 7: mounts (any type: seccomp cannot read it), new namespaces, sockets outside the allowlist. */
	EXPECT(syscall(SYS_mount, "none", "/", "tmpfs", 0, NULL), EPERM);
	EXPECT(syscall(SYS_umount2, "/", 0), EPERM);
	EXPECT(syscall(SYS_pivot_root, ".", "."), EPERM);
	EXPECT(syscall(430 /* fsopen */, "overlay", 0), EPERM);
	EXPECT(syscall(428 /* open_tree */, -1, "/", 0), EPERM);
	EXPECT(syscall(429 /* move_mount */, -1, "", -1, "", 0), EPERM);
	EXPECT(syscall(442 /* mount_setattr */, -1, "", 0, NULL, 0), EPERM);
	EXPECT(syscall(467 /* open_tree_attr, unknown to older libseccomp */, -1, "/", 0, NULL, 0), EPERM);
	EXPECT(syscall(470 /* newer than the filter */, 0), ENOSYS);
	EXPECT(syscall(0x40000000 | 39 /* x32 getpid */), ENOSYS);
	EXPECT(syscall(SYS_unshare, CLONE_NEWNET), EPERM);
	EXPECT(syscall(SYS_unshare, CLONE_NEWNS), EPERM);
	EXPECT(syscall(SYS_unshare, CLONE_NEWPID), EPERM);
	EXPECT(syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0), EPERM);
	EXPECT(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 12 /* NETLINK_NETFILTER */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 6 /* NETLINK_XFRM */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 16 /* NETLINK_GENERIC */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 1 /* unused */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 0x100000000ULL /* upper bits: refused */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, 17 /* AF_PACKET */, SOCK_RAW, 0x0300), EAFNOSUPPORT);
	EXPECT(syscall(SYS_socket, 0x100000011ULL /* AF_PACKET with upper bits */, SOCK_RAW, 0), EAFNOSUPPORT);
	EXPECT(syscall(SYS_socket, 15 /* AF_KEY */, SOCK_RAW, 2), EAFNOSUPPORT);
	EXPECT(syscall(SYS_socket, 38 /* AF_ALG */, SOCK_SEQPACKET, 0), EAFNOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_INET, SOCK_RAW, 1 /* ICMP */), EPERM);
	EXPECT(syscall(SYS_socket, AF_INET6, SOCK_RAW | SOCK_NONBLOCK, 58), EPERM);
	EXPECT(syscall(SYS_socket, AF_INET, 10 /* SOCK_PACKET */, 0), ESOCKTNOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_INET, SOCK_SEQPACKET, 0 /* SCTP's type */), ESOCKTNOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_INET, SOCK_STREAM, 132 /* SCTP */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_INET6, SOCK_DGRAM, 136 /* UDP-Lite */), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_INET, SOCK_STREAM, 263), EPROTONOSUPPORT);
#define SOCK_OK(fam, type, proto)                                                                          	do {                                                                                               		errno = 0;                                                                                 		r = syscall(SYS_socket, fam, type, proto);                                                 		if (r < 0 && (errno == EPERM || errno == EAFNOSUPPORT || errno == ESOCKTNOSUPPORT ||       		              (errno == EPROTONOSUPPORT && (proto) != 262))) {                             			fprintf(stderr, "FAIL socket(%d, %d, %d) refused: %s\n", fam, type, proto,          			        strerror(errno));                                                          			fails++;                                                                           		}                                                                                          		if (r >= 0)                                                                                			close((int)r);                                                                     	} while (0)
	/* What programs use keeps working (MPTCP may be missing from the kernel: EPROTONOSUPPORT is its own). */
	SOCK_OK(AF_UNIX, SOCK_STREAM, 0);
	SOCK_OK(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	SOCK_OK(AF_INET, SOCK_STREAM, 0);
	SOCK_OK(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 6);
	SOCK_OK(AF_INET6, SOCK_DGRAM, 17);
	SOCK_OK(AF_INET, SOCK_STREAM, 262);
	SOCK_OK(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */);
	SOCK_OK(AF_NETLINK, SOCK_DGRAM, 4 /* NETLINK_SOCK_DIAG */);
	/* Ping sockets: the filter lets them through; the kernel's ping_group_range decides. */
	errno = 0;
	r = syscall(SYS_socket, AF_INET, SOCK_DGRAM, 1 /* IPPROTO_ICMP */);
	if (r < 0 && errno != EACCES) {
		fprintf(stderr, "FAIL ping socket: %s\n", strerror(errno));
		fails++;
	}
	if (r >= 0)
		close((int)r);
#undef SOCK_OK
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
