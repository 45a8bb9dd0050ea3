/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-agent in jail mode, as PID 1 of new user/mount/pid/uts/net namespaces over a busybox rootfs:
 * what the jail code sets up (pivot_root, a few bind-mounted devices, a listening socket as fd N) is
 * done here by hand, then the agent must mount its own /proc, /dev/pts, /tmp... and serve.
 * Skips (77) without user namespaces or busybox.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_test.h"
#include "proto/agent_client.h"
#include "util/util.h"

static char dir[64], root[128], addr[160];
static pid_t child = -1;

static void cleanup(void)
{
	if (child > 0) {
		kill(child, SIGKILL); /* the agent follows through PR_SET_PDEATHSIG */
		waitpid(child, NULL, 0);
		child = -1;
	}
	if (dir[0])
		util_rm_rf(dir);
}

static const char *const devices[] = { "null", "zero", "full", "random", "urandom", "tty" };
static const char *const applets[] = { "sh", "cat", "echo", "ls", "tty", "hostname", "mount", "grep", "id" };

static int build_rootfs(const char *agent)
{
	char p[512];
	const char *dirs[] = { "bin", "dev", "root", "old", "etc", "proc", "sys" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		if (util_mkdir_p(p, 0755) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, devices[i]);
		if (util_write_file_atomic(p, "", 0, 0644) < 0)
			return -1;
	}
	char *data = NULL;
	size_t len = 0;
	snprintf(p, sizeof(p), "%s/bin/busybox", root);
	if (util_read_file("/bin/busybox", 64u << 20, &data, &len) < 0 || util_write_file_atomic(p, data, len, 0755) < 0)
		return -1;
	free(data);
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(p, sizeof(p), "%s/bin/%s", root, applets[i]);
		if (symlink("busybox", p) < 0)
			return -1;
	}
	snprintf(p, sizeof(p), "%s/space-agent", root);
	if (util_read_file(agent, 64u << 20, &data, &len) < 0 || util_write_file_atomic(p, data, len, 0755) < 0)
		return -1;
	free(data);
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = util_write_all(fd, s, strlen(s));
	close(fd);
	return r;
}

/* In the child: namespaces, then PID 1 (the grandchild) pivots into root and becomes the agent. */
static _Noreturn void start_jail(int listen_fd, uid_t uid, gid_t gid)
{
	char map[64], p[512];
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWIPC) < 0)
		_exit(77);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (write_str("/proc/self/setgroups", "deny") < 0 || write_str("/proc/self/uid_map", map) < 0)
		_exit(78);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	if (write_str("/proc/self/gid_map", map) < 0)
		_exit(78);
	pid_t pid = fork();
	if (pid < 0)
		_exit(79);
	if (pid > 0) {
		int status;
		waitpid(pid, &status, 0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || mount(root, root, NULL, MS_BIND, NULL) < 0)
		_exit(80);
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		char src[64];
		snprintf(src, sizeof(src), "/dev/%s", devices[i]);
		snprintf(p, sizeof(p), "%s/dev/%s", root, devices[i]);
		if (mount(src, p, NULL, MS_BIND, NULL) < 0)
			_exit(81);
	}
	/* Like the jail code: proc and sysfs while the old root still shows its own (a user namespace's rule). */
	snprintf(p, sizeof(p), "%s/proc", root);
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		_exit(84);
	snprintf(p, sizeof(p), "%s/sys", root);
	if (mount("sysfs", p, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)
		_exit(85);
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", "old") < 0 || chdir("/") < 0 ||
	    umount2("/old", MNT_DETACH) < 0)
		_exit(82);
	rmdir("/old");
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", listen_fd);
	execl("/space-agent", "space-agent", "--jail", "--listen-fd", fdarg, "--hostname", "jailtest", (char *)NULL);
	_exit(83);
}

struct out {
	char buf[4096];
	size_t len;
};

static int collect(int stream, const void *buf, size_t len, void *userdata)
{
	struct out *o = userdata;
	(void)stream;
	if (len > sizeof(o->buf) - 1 - o->len)
		len = sizeof(o->buf) - 1 - o->len;
	memcpy(o->buf + o->len, buf, len);
	o->len += len;
	o->buf[o->len] = '\0';
	return 0;
}

static void sh(const char *script, bool pty, struct out *o)
{
	const char *argv[] = { "sh", "-c", script, NULL };
	struct agent_exec_req req = { .argv = argv, .uid = PROTO_ID_INHERIT, .gid = PROTO_ID_INHERIT, .pty = pty };
	struct agent_exit ex;
	struct agent_error err;
	*o = (struct out){ 0 };
	int r = agent_exec_run(addr, &req, -1, collect, o, &ex, &err);
	CHECK(r == 0 && ex.exited && ex.code == 0, "'%s': r=%d (%s) code=%d out='%s'", script, r, err.msg, ex.code,
	      o->buf);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *agent = getenv("SPACE_AGENT_PATH");
	if (!agent || access(agent, X_OK) < 0) {
		/* Ours, so a broken build: a failure, never a skip. */
		printf("FAIL: space-agent not built (SPACE_AGENT_PATH=%s)\n", agent ? agent : "unset");
		return 1;
	}
	if (access("/bin/busybox", X_OK) < 0) {
		printf("SKIP: needs /bin/busybox (busybox-static)\n");
		return 77;
	}
	snprintf(dir, sizeof(dir), "/tmp/space-agent-jail-XXXXXX");
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		return 1;
	}
	snprintf(root, sizeof(root), "%s/root", dir);
	CHECK(build_rootfs(agent) == 0, "rootfs: %m");

	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", dir);
	snprintf(addr, sizeof(addr), "unix:%s", sa.sun_path);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0); /* inherited by the agent: no CLOEXEC */
	CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 64) == 0, "listen");

	uid_t uid = getuid();
	gid_t gid = getgid();
	child = fork();
	if (child == 0)
		start_jail(lfd, uid, gid);
	close(lfd);

	struct agent_info info;
	struct agent_error err;
	int r = agent_hello(addr, 5000, &info, &err);
	if (r < 0) {
		int status = 0;
		if (waitpid(child, &status, WNOHANG) == child && WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			child = -1;
			printf("SKIP: cannot create user namespaces here\n");
			cleanup();
			return 77;
		}
		CHECK(r == 0, "agent did not answer: %s (child status %d)", err.msg, status);
	}
	CHECK(strcmp(info.hostname, "jailtest") == 0, "hostname '%s'", info.hostname);
	printf("ok hello (%s, hostname %s)\n", info.version, info.hostname);

	struct out o;
	sh("cat /proc/1/comm; hostname", false, &o);
	CHECK(strncmp(o.buf, "space-agent", 11) == 0, "PID 1 is not the agent: '%s'", o.buf);
	CHECK(strstr(o.buf, "jailtest\n"), "hostname: '%s'", o.buf);
	printf("ok pid1\n");
	sh("tty", true, &o);
	CHECK(strncmp(o.buf, "/dev/pts/0", 10) == 0, "private devpts expected, tty said '%s'", o.buf);
	printf("ok pty\n");
	sh("ls -A /tmp /run; mount | grep -c -E ' /(proc|tmp|run|dev/pts|dev/shm) '", false, &o);
	CHECK(strstr(o.buf, "5\n"), "mounts: '%s'", o.buf);
	printf("ok mounts\n");

	int mfd = memfd_create("d", MFD_CLOEXEC);
	CHECK(util_write_all(mfd, "inside\n", 7) == 0 && lseek(mfd, 0, SEEK_SET) == 0, "memfd");
	CHECK(agent_file_write(addr, "/root/deep/f", 0600, true, mfd, &err) == 0, "write: %s", err.msg);
	sh("cat /root/deep/f", false, &o);
	CHECK(strcmp(o.buf, "inside\n") == 0, "read back '%s'", o.buf);
	close(mfd);
	printf("ok files\n");
	/* The jail cannot set the clock: a clean error, not a crash. */
	CHECK(agent_set_time(addr, 1, &err) == -EPERM, "set_time in a jail: %s", err.msg);

	CHECK(agent_shutdown(addr, &err) == 0, "shutdown: %s", err.msg);
	int status;
	CHECK(waitpid(child, &status, 0) == child, "wait");
	child = -1;
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "agent exit status %x", status);
	printf("ok shutdown\n");
	cleanup();
	return 0;
}
