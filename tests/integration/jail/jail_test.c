/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jail integration tests (root). Usage: jail-test <case> <probe-path>
 *   basic    PID 1, hostname, only lo, no host files, writes land in this image only, root owns them
 *   limits   memory limit OOM-kills the hog but not PID 1, pids limit stops a fork bomb, freeze/thaw
 *   seccomp  denied syscalls return EPERM inside, normal ones still work
 *   cycles   20 start/kill cycles leave no mount, loop device, cgroup or process; latency medians over 50
 *   errors   bad images fail with a clear message and leave nothing behind
 *   agent    the real space-agent ($SPACE_AGENT_PATH) as PID 1, driven through the agent client
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail_internal.h"
#include "jail_fixture.h"
#include "proto/agent_client.h"
#include "util/util.h"

#define WAIT_MS 10000

static int test_outlives_creator(struct fixture *f);
static int test_identity(struct fixture *f);

static int test_basic(struct fixture *f)
{
	char other[512], log[512], v[256];
	struct jail_info info;
	CHECK(fixture_copy_image(f, other, sizeof(other)) == 0, "copy image");

	const char *script =
		"mount -t proc proc /mnt 2>/dev/null && echo newproc=yes || echo newproc=no;"
		"(echo 1 > /proc/sys/net/ipv4/ip_forward) 2>/dev/null && echo sysctl=rw || echo sysctl=ro;"
		"umount /proc/sys 2>/dev/null && echo umount=yes || echo umount=no;"
		"touch /sys/x 2>/dev/null && echo sys=rw || echo sys=ro;"
		"mount -o remount,rw /sys 2>/dev/null && echo sysremount=yes || echo sysremount=no;"
		"echo cmdline=$(tr '\\0' ' ' < /proc/1/cmdline);"
		"echo pid=$$;"
		"echo hostname=$(hostname);"
		"echo links=$(ls /sys/class/net | tr '\\n' ' ');"
		"echo loflags=$(cat /sys/class/net/lo/flags);"
		"echo uid=$(id -u);"
		"if [ -e /etc/debian_version ] || [ -e /work ] || [ -e /var/tmp ]; then echo host=visible; "
		"else echo host=hidden; fi;"
		"echo mounts=$(wc -l < /proc/self/mountinfo);"
		"echo devnull=$(echo x > /dev/null && echo ok);"
		"echo urandom=$(head -c 8 /dev/urandom | wc -c);"
		"echo written > /root/written && echo write=ok;"
		"sync; echo READY; while :; do sleep 1; done";
	CHECK(fixture_start(f, f->image, script, NULL, &info, log, sizeof(log)) == 0, "start");
	CHECK(jail_alive(&info) == 1, "alive after start");
	char *out = fixture_wait_log(log, "READY", WAIT_MS);
	CHECK(out, "jail never got ready");
	printf("%s", out);

	/* proc and sysfs are the jail's own, locked: no other instance, no unmount, no rw remount. */
	CHECK(fixture_value(out, "newproc", v, sizeof(v)) && !strcmp(v, "no"), "new proc mount: %s", v);
	CHECK(fixture_value(out, "sysctl", v, sizeof(v)) && !strcmp(v, "ro"), "/proc/sys: %s", v);
	CHECK(fixture_value(out, "umount", v, sizeof(v)) && !strcmp(v, "no"), "umount /proc/sys: %s", v);
	CHECK(fixture_value(out, "sysremount", v, sizeof(v)) && !strcmp(v, "no"), "remount /sys rw: %s", v);
	CHECK(fixture_value(out, "sys", v, sizeof(v)) && !strcmp(v, "ro"), "sysfs read-only: %s", v);
	CHECK(fixture_value(out, "cmdline", v, sizeof(v)) && !strncmp(v, "sh -c", 5), "PID 1 is ours: %s", v);
	CHECK(fixture_value(out, "pid", v, sizeof(v)) && !strcmp(v, "1"), "shell is PID 1: %s", v);
	CHECK(fixture_value(out, "hostname", v, sizeof(v)) && !strcmp(v, "jailtest"), "hostname: %s", v);
	CHECK(fixture_value(out, "links", v, sizeof(v)) && !strcmp(v, "lo"), "only lo: '%s'", v);
	CHECK(fixture_value(out, "loflags", v, sizeof(v)) && (strtoul(v, NULL, 16) & 1), "lo up: %s", v);
	CHECK(fixture_value(out, "uid", v, sizeof(v)) && !strcmp(v, "0"), "root inside: %s", v);
	CHECK(fixture_value(out, "host", v, sizeof(v)) && !strcmp(v, "hidden"), "host files: %s", v);
	/* rootfs, /dev and its 6 binds, pts, shm, /tmp, /run, /proc and its 5 read-only parts, /sys: 18. */
	CHECK(fixture_value(out, "mounts", v, sizeof(v)) && atoi(v) < 20, "few mounts inside: %s", v);
	CHECK(fixture_value(out, "devnull", v, sizeof(v)) && !strcmp(v, "ok"), "/dev/null: %s", v);
	CHECK(fixture_value(out, "urandom", v, sizeof(v)) && !strcmp(v, "8"), "/dev/urandom: %s", v);
	CHECK(strstr(out, "write=ok"), "write inside");
	bool idmapped = strstr(out, "idmapped rootfs, root inside is host uid") != NULL;
	printf("uid mapping: %s (uid_base %u)\n", idmapped ? "private range + idmapped rootfs" : "identity",
	       info.uid_base);
	free(out);

	/* PID 1 must not be our child: the jail outlives its creator. */
	CHECK(getppid() != info.pid && kill(info.pid, 0) == 0, "pid visible");
	CHECK(jail_kill(&info, 5000) == 0, "kill");
	CHECK(jail_alive(&info) == 0, "dead after kill");
	CHECK(jail_kill(&info, 1000) == 0, "kill is idempotent");

	/* Wait for the loop device to let go, then read the image from the host. */
	for (int i = 0; i < 200 && fixture_sh("losetup -j %s | grep -q .", f->image) == 0; i++)
		fixture_sleep_ms(10);
	CHECK(fixture_sh("debugfs -R 'cat /root/written' %s 2>/dev/null | grep -q written", f->image) == 0,
	      "write reached the image");
	CHECK(fixture_sh("debugfs -R 'stat /root/written' %s 2>/dev/null | grep -q 'User: *0 '", f->image) == 0,
	      "file written by root inside is owned by uid 0 in the image");
	CHECK(fixture_sh("debugfs -R 'stat /root/written' %s 2>&1 | grep -q 'File not found'", other) == 0,
	      "other image untouched");
	return test_outlives_creator(f) || test_identity(f);
}

/* The sandbox outlives the process that created it (and that process's session going away). */
static int test_outlives_creator(struct fixture *f)
{
	int pfd[2];
	char log[512];
	CHECK(pipe(pfd) == 0, "pipe");
	pid_t child = fork();
	if (child == 0) {
		struct jail_info info;
		setsid();
		if (fixture_start(f, f->image, "while :; do sleep 1; done", NULL, &info, log, sizeof(log)) != 0)
			_exit(1);
		_exit(write(pfd[1], &info, sizeof(info)) == sizeof(info) ? 0 : 1);
	}
	close(pfd[1]);
	struct jail_info info;
	ssize_t n = read(pfd[0], &info, sizeof(info));
	close(pfd[0]);
	int st;
	waitpid(child, &st, 0);
	CHECK(n == sizeof(info) && WIFEXITED(st) && WEXITSTATUS(st) == 0, "start in a child");
	f->live[f->nlive++] = info;
	fixture_sleep_ms(200);
	CHECK(jail_alive(&info) == 1, "jail died with its creator");
	CHECK(jail_kill(&info, 5000) == 0 && jail_alive(&info) == 0, "kill from another process");
	return 0;
}

/* The fallback mapping (forced here): uid 0..65535 map to themselves; the jail still works the same. */
static int test_identity(struct fixture *f)
{
	char log[512], v[64];
	struct jail_info info;
	struct jail_config cfg = { .identity_map = true };
	/* With uid 0 inside being host uid 0, only the read-only /proc keeps these from the host's kernel
	 * (the writes are chosen to be no-ops should one ever get through). */
	CHECK(fixture_start(f, f->image, "echo uid=$(id -u); echo x > /root/identity && echo write=ok;"
	                    "(echo h > /proc/sysrq-trigger) 2>/dev/null && echo sysrq=yes || echo sysrq=no;"
	                    "(cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern) 2>/dev/null"
	                    " && echo corepattern=yes || echo corepattern=no;"
	                    "(echo x > /sys/kernel/profiling) 2>/dev/null && echo syswrite=yes || echo syswrite=no;"
	                    "echo READY; while :; do sleep 1; done", &cfg, &info, log, sizeof(log)) == 0, "start");
	char *out = fixture_wait_log(log, "READY", WAIT_MS);
	CHECK(out, "identity jail never got ready");
	bool said = strstr(out, "space-jail: identity uid mapping") != NULL;
	bool ok = fixture_value(out, "uid", v, sizeof(v)) && !strcmp(v, "0") && strstr(out, "write=ok");
	bool shielded = strstr(out, "sysrq=no") && strstr(out, "corepattern=no") && strstr(out, "syswrite=no");
	if (!shielded)
		printf("%s", out);
	free(out);
	CHECK(said && ok && info.uid_base == 0, "identity mapping: logged %d, works %d, base %u", said, ok,
	      info.uid_base);
	CHECK(shielded, "identity-mapped root reached host kernel knobs");
	CHECK(jail_kill(&info, 5000) == 0, "kill");
	return 0;
}

static int test_limits(struct fixture *f)
{
	char log[512], v[256], buf[64];
	struct jail_info info;
	struct jail_config lim = { .memory_bytes = 64ull << 20, .pids_max = 32, .cpus = 1 };
	const char *script = "/bin/probe alloc 256; echo alloc_status=$?;"
	                     "/bin/probe forks 100;"
	                     "echo READY; while :; do echo tick; usleep 20000; done";
	CHECK(fixture_start(f, f->image, script, &lim, &info, log, sizeof(log)) == 0, "start");
	char *out = fixture_wait_log(log, "READY", WAIT_MS * 3);
	CHECK(out, "jail never got ready");
	printf("%s", out);
	CHECK(!strstr(out, "alloc-done"), "256 MiB allocation under a 64 MiB limit must not succeed");
	CHECK(fixture_value(out, "alloc_status", v, sizeof(v)) && !strcmp(v, "137"), "hog SIGKILLed: %s", v);
	CHECK(fixture_value(out, "forks", v, sizeof(v)) && atoi(v) < 32, "fork bomb contained: %s", v);
	CHECK(strstr(out, "err=11"), "fork fails with EAGAIN");
	free(out);
	CHECK(jail_alive(&info) == 1, "PID 1 survived the OOM kill and the fork bomb");

	bool v2 = !strncmp(info.cgroup, "v2:", 3);
	CHECK(util_cgroup_read(info.cgroup, "memory", v2 ? "memory.max" : "memory.limit_in_bytes", buf,
	                       sizeof(buf)) == 0 && !strcmp(buf, "67108864"), "memory limit file: %s", buf);
	CHECK(util_cgroup_read(info.cgroup, "pids", "pids.max", buf, sizeof(buf)) == 0 && !strcmp(buf, "32"),
	      "pids.max: %s", buf);
	CHECK(util_cgroup_read(info.cgroup, "cpu", v2 ? "cpu.max" : "cpu.cfs_quota_us", buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, v2 ? "100000 100000" : "100000"), "cpu quota: %s", buf);
	printf("cgroup backend: %s\n", info.cgroup);

	/* Freeze: the ticking loop stops; thaw: it goes on. */
	CHECK(jail_freeze(&info, true) == 0, "freeze");
	char *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	fixture_sleep_ms(50);
	util_read_file(log, 1 << 20, &a, &la);
	fixture_sleep_ms(300);
	util_read_file(log, 1 << 20, &b, &lb);
	free(a);
	free(b);
	CHECK(la == lb, "frozen jail kept writing (%zu -> %zu)", la, lb);
	CHECK(jail_freeze(&info, false) == 0, "thaw");
	fixture_sleep_ms(300);
	util_read_file(log, 1 << 20, &b, &lb);
	free(b);
	CHECK(lb > la, "thawed jail does not run");

	/* Killing a frozen jail must work too. */
	CHECK(jail_freeze(&info, true) == 0, "freeze again");
	CHECK(jail_kill(&info, 5000) == 0, "kill frozen jail");
	CHECK(jail_alive(&info) == 0, "dead");
	return 0;
}

static int test_seccomp(struct fixture *f)
{
	char log[512], v[64];
	struct jail_info info;
	CHECK(fixture_start(f, f->image, "/bin/probe seccomp; echo READY; sleep 1000", NULL, &info, log,
	                    sizeof(log)) == 0, "start");
	char *out = fixture_wait_log(log, "READY", WAIT_MS);
	CHECK(out, "jail never got ready");
	printf("%s", out);
	static const char *const eperm[] = { "init_module", "finit_module", "delete_module", "kexec_load",
		"keyctl", "add_key", "bpf", "perf_event_open", "ptrace", "userfaultfd", "open_by_handle_at",
		"swapon", "settimeofday", "syslog", "setns", "io_uring_setup", "unshare_user", "clone_user",
		"personality_bad" };
	for (size_t i = 0; i < sizeof(eperm) / sizeof(eperm[0]); i++)
		CHECK(fixture_value(out, eperm[i], v, sizeof(v)) && atoi(v) == EPERM, "%s -> errno %s", eperm[i], v);
	CHECK(fixture_value(out, "clone3", v, sizeof(v)) && atoi(v) == ENOSYS, "clone3 -> %s", v);
	CHECK(fixture_value(out, "socket_vsock", v, sizeof(v)) && atoi(v) == EAFNOSUPPORT, "vsock -> %s", v);
	CHECK(fixture_value(out, "personality_query", v, sizeof(v)) && atoi(v) == 0, "personality query -> %s", v);
	/* No namespace of its own since issue 14 (docs/jail.md): a mount namespace is mounts again. */
	CHECK(fixture_value(out, "unshare_mnt", v, sizeof(v)) && atoi(v) == EPERM, "unshare(NEWNS) -> %s", v);
	CHECK(fixture_value(out, "clone_plain", v, sizeof(v)) && atoi(v) == 0, "plain clone -> %s", v);
	free(out);
	CHECK(jail_kill(&info, 5000) == 0, "kill");
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static bool pid_dead(pid_t pid)
{
	char path[64], *st = NULL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (util_read_file(path, 4096, &st, NULL) < 0)
		return true;
	const char *p = strrchr(st, ')');
	bool zombie = p && (p[2] == 'Z' || p[2] == 'X');
	free(st);
	return zombie;
}

struct par {
	struct fixture *f;
	char image[512];
	int id, result;
};

/* One thread of the parallel check: its own image, three start/kill rounds. */
static void *par_thread(void *arg)
{
	struct par *t = arg;
	t->result = 1;
	for (int round = 0; round < 3; round++) {
		char id[64], log[600], err[256];
		snprintf(id, sizeof(id), "sb-test-%d-par%d-%d", (int)getpid(), t->id, round);
		snprintf(log, sizeof(log), "%s.log", t->image);
		int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		const char *argv[] = { "sh", "-c", "while :; do sleep 1; done", NULL };
		struct jail_config cfg = { .id = id, .rootfs_image = t->image, .agent_path = "/bin/busybox",
			                   .listen_fd = -1, .log_fd = lfd, .argv_override = argv };
		struct jail_info info;
		int r = jail_start(&cfg, &info, err, sizeof(err));
		close(lfd);
		if (r < 0) {
			fprintf(stderr, "thread %d: jail_start: %s\n", t->id, err);
			return NULL;
		}
		bool alive = jail_alive(&info) == 1;
		if (jail_kill(&info, 5000) < 0 || !alive)
			return NULL;
	}
	t->result = 0;
	return NULL;
}

/* jail_start from several threads at once (the forked children must not need the caller's locks). */
static int test_parallel(struct fixture *f)
{
	enum { THREADS = 4 };
	struct par t[THREADS];
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++) {
		t[i] = (struct par){ .f = f, .id = i };
		CHECK(fixture_copy_image(f, t[i].image, sizeof(t[i].image)) == 0, "copy image");
	}
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, par_thread, &t[i]) == 0, "thread");
	int fails = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		fails += t[i].result;
	}
	CHECK(fails == 0, "%d of %d threads failed", fails, THREADS);
	printf("%d threads x 3 start/kill rounds in parallel: ok\n", THREADS);
	return 0;
}

static int test_cycles(struct fixture *f)
{
	enum { CYCLES = 50, LEAK_CYCLES = 20 };
	struct host_state before, after;
	uint64_t start_ns[CYCLES], kill_ns[CYCLES];
	char log[512];

	fixture_host_state(f, &before);
	for (int i = 0; i < CYCLES; i++) {
		struct jail_info info;
		uint64_t t0 = util_now_ns();
		CHECK(fixture_start(f, f->image, "while :; do sleep 1; done", NULL, &info, log, sizeof(log)) == 0,
		      "start %d", i);
		uint64_t t1 = util_now_ns();
		CHECK(jail_alive(&info) == 1, "alive %d", i);
		if (i == 0) {
			/* The leak counters do see a running jail's loop device and cgroups. */
			fixture_host_state(f, &after);
			CHECK(after.loops == before.loops + 1 && after.cgroups > before.cgroups &&
			      after.mounts == before.mounts, "running jail: loops %d cgroups %d mounts %d", after.loops,
			      after.cgroups, after.mounts);
		}
		CHECK(jail_kill(&info, 5000) == 0, "kill %d", i);
		uint64_t t2 = util_now_ns();
		CHECK(jail_alive(&info) == 0, "gone %d", i);
		/* A dead PID 1 may linger as a zombie until its new parent (the host's init) reaps it. */
		CHECK(pid_dead(info.pid), "PID 1 %d still running after kill", (int)info.pid);
		start_ns[i] = t1 - t0;
		kill_ns[i] = t2 - t1;
		if (i + 1 == LEAK_CYCLES) {
			/* Mount and loop teardown finish asynchronously after the last process is gone. */
			uint64_t w0 = util_now_ns();
			for (int w = 0; w < 300; w++) {
				fixture_host_state(f, &after);
				if (after.loops == before.loops && after.mounts == before.mounts)
					break;
				fixture_sleep_ms(10);
			}
			CHECK(after.mounts == before.mounts, "mounts %d -> %d", before.mounts, after.mounts);
			CHECK(after.loops == before.loops, "loop devices %d -> %d", before.loops, after.loops);
			CHECK(after.cgroups == before.cgroups, "cgroups %d -> %d", before.cgroups, after.cgroups);
			printf("%d cycles: nothing left behind (mounts %d, loops %d, cgroups %d; loop device gone %.1f ms "
			       "after the last kill)\n", LEAK_CYCLES, after.mounts, after.loops, after.cgroups,
			       (util_now_ns() - w0) / 1e6);
		}
	}
	if (test_parallel(f))
		return 1;
	for (int w = 0; w < 300; w++) {
		fixture_host_state(f, &after);
		if (after.loops == before.loops && after.mounts == before.mounts && after.cgroups == before.cgroups)
			break;
		fixture_sleep_ms(10);
	}
	CHECK(after.loops == before.loops && after.mounts == before.mounts && after.cgroups == before.cgroups,
	      "after the parallel rounds: loops %d mounts %d cgroups %d", after.loops, after.mounts, after.cgroups);
	qsort(start_ns, CYCLES, sizeof(start_ns[0]), cmp_u64);
	qsort(kill_ns, CYCLES, sizeof(kill_ns[0]), cmp_u64);
	printf("jail_start (to agent exec): median %.2f ms, p90 %.2f ms, max %.2f ms over %d\n",
	       start_ns[CYCLES / 2] / 1e6, start_ns[CYCLES * 9 / 10] / 1e6, start_ns[CYCLES - 1] / 1e6, CYCLES);
	printf("jail_kill (incl. cgroup removal): median %.2f ms, p90 %.2f ms, max %.2f ms over %d\n",
	       kill_ns[CYCLES / 2] / 1e6, kill_ns[CYCLES * 9 / 10] / 1e6, kill_ns[CYCLES - 1] / 1e6, CYCLES);
	return 0;
}

static int expect_failure(struct fixture *f, const char *image, const char *needle)
{
	struct host_state before, after;
	struct jail_info info;
	char err[256];
	const char *argv[] = { "sh", "-c", "sleep 1000", NULL };
	char id[64];
	snprintf(id, sizeof(id), "sb-test-%d-errors", (int)getpid());
	struct jail_config cfg = { .id = id, .rootfs_image = image, .agent_path = "/bin/busybox",
		                   .listen_fd = -1, .log_fd = -1, .argv_override = argv };
	fixture_host_state(f, &before);
	int r = jail_start(&cfg, &info, err, sizeof(err));
	printf("%s -> %d (%s)\n", image, r, err);
	CHECK(r < 0, "jail_start on %s must fail", image);
	CHECK(strstr(err, needle), "message '%s' lacks '%s'", err, needle);
	for (int w = 0; w < 300; w++) {
		fixture_host_state(f, &after);
		if (after.loops == before.loops)
			break;
		fixture_sleep_ms(10);
	}
	CHECK(after.mounts == before.mounts && after.loops == before.loops && after.cgroups == before.cgroups,
	      "failed start left something behind");
	return 0;
}

static int test_errors(struct fixture *f)
{
	char junk[512];
	snprintf(junk, sizeof(junk), "%s/junk.img", f->dir);
	CHECK(fixture_sh("truncate -s 8M %s", junk) == 0, "junk image");
	if (expect_failure(f, "/nonexistent/rootfs.ext4", "open rootfs"))
		return 1;
	if (expect_failure(f, junk, "mount rootfs"))
		return 1;
	/* A hostile image whose /dev is a symlink to a host path must not get mounts redirected there. */
	char evil[512];
	snprintf(evil, sizeof(evil), "%s/evil.ext4", f->dir);
	CHECK(fixture_sh("set -e; t=%s/evil; mkdir -p $t/bin; ln -s /etc $t/dev; mkfs.ext4 -q -d $t %s 16M", f->dir,
	                 evil) == 0, "evil image");
	if (expect_failure(f, evil, "create /dev in rootfs"))
		return 1;

	/* An image with nothing but /bin still starts: the mount points are created. */
	char bare[512], log[512], v[64];
	struct jail_info info;
	snprintf(bare, sizeof(bare), "%s/bare.ext4", f->dir);
	CHECK(fixture_sh("set -e; t=%s/bare; mkdir -p $t/bin; cp /bin/busybox $t/bin/; ln -s busybox $t/bin/sh;"
	                 "ln -s busybox $t/bin/ls; mkfs.ext4 -q -d $t %s 16M", f->dir, bare) == 0, "bare image");
	CHECK(fixture_start(f, bare, "echo top=$(ls -d /dev /proc /sys); echo READY; exec sh -c 'sleep 1000'", NULL, &info, log, sizeof(log)) == 0, "start bare image");
	char *out = fixture_wait_log(log, "READY", WAIT_MS);
	CHECK(out && fixture_value(out, "top", v, sizeof(v)) && !strcmp(v, "/dev /proc /sys"), "bare: %s", out);
	free(out);
	CHECK(jail_kill(&info, 5000) == 0, "kill bare");

	char err[256];
	struct jail_config bad = { .id = "../escape", .rootfs_image = f->image, .agent_path = "/bin/busybox" };
	CHECK(jail_start(&bad, &info, err, sizeof(err)) == -EINVAL, "bad id rejected");
	struct jail_info gone = { .pid = 0 };
	CHECK(jail_alive(&gone) == 0 && jail_kill(&gone, 10) == 0, "empty info is fine");
	return 0;
}

struct outbuf {
	char data[4096];
	size_t len;
};

static int collect(int stream, const void *buf, size_t len, void *userdata)
{
	struct outbuf *o = userdata;
	size_t n = len < sizeof(o->data) - 1 - o->len ? len : sizeof(o->data) - 1 - o->len;
	memcpy(o->data + o->len, buf, n);
	o->len += n;
	o->data[o->len] = 0;
	return 0;
}

/* Runs argv in the jail through the agent; output in out, exit code returned (or -errno). */
static int agent_run(const char *addr, const char *const *argv, struct outbuf *out)
{
	struct agent_exec_req req = { .argv = argv, .uid = PROTO_ID_INHERIT, .gid = PROTO_ID_INHERIT };
	struct agent_exit ex;
	struct agent_error err = { 0 };
	out->len = 0;
	out->data[0] = 0;
	int r = agent_exec_run(addr, &req, -1, collect, out, &ex, &err);
	if (r < 0) {
		fprintf(stderr, "agent exec %s: %s (%s)\n", argv[0], strerror(-r), err.msg);
		return r;
	}
	int code = ex.exited ? ex.code : 128 + ex.signal;
	if (code != 0)
		fprintf(stderr, "agent exec %s: exit %d, output '%s'\n", argv[0], code, out->data);
	return code;
}

static int agent_checks(const char *addr)
{
	struct outbuf out;
	const char *cmdline[] = { "cat", "/proc/1/cmdline", NULL };
	CHECK(agent_run(addr, cmdline, &out) == 0 && !strcmp(out.data, "space-agent"), "PID 1: %s", out.data);
	const char *hn[] = { "hostname", NULL };
	CHECK(agent_run(addr, hn, &out) == 0 && !strcmp(out.data, "agentbox\n"), "hostname: %s", out.data);
	const char *net[] = { "ls", "/sys/class/net", NULL };
	CHECK(agent_run(addr, net, &out) == 0 && !strcmp(out.data, "lo\n"), "links: %s", out.data);
	const char *idu[] = { "id", "-u", NULL };
	CHECK(agent_run(addr, idu, &out) == 0 && !strcmp(out.data, "0\n"), "uid: %s", out.data);
	const char *hostfs[] = { "ls", "/etc/debian_version", NULL };
	CHECK(agent_run(addr, hostfs, &out) != 0, "host file visible inside");
	const char *sc[] = { "/bin/probe", "seccomp", NULL };
	CHECK(agent_run(addr, sc, &out) == 0 && strstr(out.data, "init_module=1\n"), "seccomp under the agent: %s",
	      out.data);
	const char *echo[] = { "sh", "-c", "echo hi > /tmp/x && cat /tmp/x", NULL };
	CHECK(agent_run(addr, echo, &out) == 0 && !strcmp(out.data, "hi\n"), "tmp: %s", out.data);

	return 0;
}

static int test_agent(struct fixture *f)
{
	const char *agent = getenv("SPACE_AGENT_PATH");
	if (!agent || access(agent, X_OK) < 0) {
		/* Ours, so a broken build: a failure, never a skip. */
		printf("FAIL: space-agent not built (SPACE_AGENT_PATH=%s)\n", agent ? agent : "unset");
		return 1;
	}
	char sock[512], addr[520], log[512], id[64];
	snprintf(sock, sizeof(sock), "%s/agent.sock", f->dir);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	snprintf(log, sizeof(log), "%s/agent.log", f->dir);
	snprintf(id, sizeof(id), "sb-test-agent-%d", (int)getpid());

	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 16) == 0, "socket");
	int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	CHECK(logfd >= 0, "log");

	struct jail_config cfg = { .id = id, .rootfs_image = f->image, .agent_path = agent, .hostname = "agentbox",
		                   .listen_fd = lfd, .log_fd = logfd, .memory_bytes = 256ull << 20, .cpus = 1 };
	struct jail_info info;
	char err[256];
	int r = jail_start(&cfg, &info, err, sizeof(err));
	close(lfd);
	close(logfd);
	CHECK(r == 0, "jail_start with the agent: %s (%s)", strerror(-r), err);
	f->live[f->nlive++] = info;

	struct agent_info ai;
	struct agent_error aerr = { 0 };
	r = agent_hello(addr, 5000, &ai, &aerr);
	if (r < 0)
		fixture_sh("cat %s", log);
	CHECK(r == 0, "agent hello: %s (%s)", strerror(-r), aerr.msg);
	printf("agent %s, protocol %u.%u, hostname %s\n", ai.version, ai.major, ai.minor, ai.hostname);

	/* The exec checks run in a child so a stuck client cannot keep the jail alive past the test. */
	pid_t child = fork();
	if (child == 0)
		_exit(agent_checks(addr));
	int st = -1;
	for (int w = 0; w < 3000 && waitpid(child, &st, WNOHANG) == 0; w++)
		fixture_sleep_ms(10);
	if (kill(child, 0) == 0) {
		kill(child, SIGKILL);
		waitpid(child, &st, 0);
		fprintf(stderr, "agent exec checks timed out\n");
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "agent exec checks failed");

	CHECK(jail_freeze(&info, true) == 0, "freeze");
	CHECK(agent_hello(addr, 300, &ai, &aerr) < 0, "frozen agent answered");
	CHECK(jail_freeze(&info, false) == 0, "thaw");
	CHECK(agent_hello(addr, 5000, &ai, &aerr) == 0, "thawed agent silent: %s", aerr.msg);

	CHECK(jail_kill(&info, 5000) == 0, "kill");
	CHECK(jail_alive(&info) == 0, "dead");
	fixture_sh("cat %s", log);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s basic|limits|seccomp|cycles|errors PROBE\n", argv[0]);
		return 2;
	}
	fixture_require();
	printf("%s\n", jail_describe_boundary());
	struct fixture f;
	int r = fixture_init(&f, argv[2]);
	if (r < 0) {
		fprintf(stderr, "building the test rootfs failed: %s\n", strerror(-r));
		fixture_done(&f);
		return 1;
	}
	if (!strcmp(argv[1], "basic"))
		r = test_basic(&f);
	else if (!strcmp(argv[1], "limits"))
		r = test_limits(&f);
	else if (!strcmp(argv[1], "seccomp"))
		r = test_seccomp(&f);
	else if (!strcmp(argv[1], "cycles"))
		r = test_cycles(&f);
	else if (!strcmp(argv[1], "errors"))
		r = test_errors(&f);
	else if (!strcmp(argv[1], "agent"))
		r = test_agent(&f);
	else
		r = 2;
	fixture_done(&f);
	if (r == 0)
		printf("OK %s\n", argv[1]);
	if (r == 77)
		return 77;
	return r;
}
