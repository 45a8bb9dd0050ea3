/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-agent end to end: starts `space-agent --listen <tmp>/a.sock` as a plain process and drives it
 * through the host client API (agent_client.h), as a sandbox user would. Runs one case (argv[1]) or all.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_test.h"
#include "proto/agent_client.h"
#include "proto/proto.h"
#include "util/util.h"

static char dir[64], sock[96], addr[160];
static pid_t agent_pid = -1, tether_agent_pid = -1;
static const char *agent_path;

static void cleanup(void)
{
	if (tether_agent_pid > 0) {
		kill(tether_agent_pid, SIGKILL);
		waitpid(tether_agent_pid, NULL, 0);
		tether_agent_pid = -1;
	}
	if (agent_pid > 0) {
		kill(agent_pid, SIGTERM);
		waitpid(agent_pid, NULL, 0);
		agent_pid = -1;
	}
	if (dir[0])
		util_rm_rf(dir);
}

static char *path_in(const char *name)
{
	static char buf[4][256];
	static int i;
	char *p = buf[i++ % 4];
	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

/* Collected output of one exec. */
struct out {
	char *buf[3];
	size_t len[3];
	uint64_t first_ns; /* when the first byte arrived */
};

static int collect(int stream, const void *buf, size_t len, void *userdata)
{
	struct out *o = userdata;
	if (!o->first_ns)
		o->first_ns = util_now_ns();
	char *p = realloc(o->buf[stream], o->len[stream] + len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p + o->len[stream], buf, len);
	o->len[stream] += len;
	p[o->len[stream]] = '\0';
	o->buf[stream] = p;
	return 0;
}

static void out_free(struct out *o)
{
	free(o->buf[1]);
	free(o->buf[2]);
	*o = (struct out){ 0 };
}

#define REQ(...) ((struct agent_exec_req){ .uid = PROTO_ID_INHERIT, .gid = PROTO_ID_INHERIT, __VA_ARGS__ })
#define ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static int run(const struct agent_exec_req *req, int stdin_fd, struct out *o, struct agent_exit *ex)
{
	struct agent_error err;
	*o = (struct out){ 0 };
	int r = agent_exec_run(addr, req, stdin_fd, collect, o, ex, &err);
	if (r < 0)
		fprintf(stderr, "  exec: %s (%s)\n", strerror(-r), err.msg);
	return r;
}

static void test_hello(void)
{
	struct agent_info info;
	struct agent_error err;
	int r = agent_hello(addr, 2000, &info, &err);
	CHECK(r == 0, "%s", err.msg);
	CHECK(info.major == PROTO_VERSION_MAJOR, "major %u", info.major);
	CHECK(strncmp(info.version, "space-agent ", 12) == 0, "version '%s'", info.version);
	CHECK(info.hostname[0] != '\0', "no hostname");
	CHECK(info.caps & PROTO_CAP_PTY, "caps");
}

static void test_exec_streams(void)
{
	struct out o;
	struct agent_exit ex;
	CHECK(run(&REQ(.argv = ARGV("sh", "-c", "echo out; echo err >&2; exit 3")), -1, &o, &ex) == 0, "run");
	CHECK(ex.exited && ex.code == 3 && !ex.timed_out, "exit %d/%d", ex.exited, ex.code);
	CHECK(o.buf[1] && strcmp(o.buf[1], "out\n") == 0, "stdout '%s'", o.buf[1]);
	CHECK(o.buf[2] && strcmp(o.buf[2], "err\n") == 0, "stderr '%s'", o.buf[2]);
	out_free(&o);

	/* env, cwd */
	CHECK(run(&REQ(.argv = ARGV("sh", "-c", "echo $FOO $HOME $PATH; pwd"), .env = ARGV("FOO=bar", "PATH=/bin"),
		       .cwd = "/tmp"), -1, &o, &ex) == 0, "run");
	CHECK(o.buf[1] && strcmp(o.buf[1], "bar /root /bin\n/tmp\n") == 0, "stdout '%s'", o.buf[1]);
	out_free(&o);
}

static void test_streaming(void)
{
	struct out o;
	struct agent_exit ex;
	uint64_t t0 = util_now_ns();
	CHECK(run(&REQ(.argv = ARGV("sh", "-c", "echo first; sleep 1.5; echo second")), -1, &o, &ex) == 0, "run");
	uint64_t t1 = util_now_ns();
	CHECK(o.first_ns - t0 < 1000000000ull, "first output after %llu ms (buffered until exit?)",
	      (unsigned long long)(o.first_ns - t0) / 1000000);
	CHECK(t1 - t0 >= 1400000000ull, "exited too early");
	CHECK(strcmp(o.buf[1], "first\nsecond\n") == 0, "stdout '%s'", o.buf[1]);
	out_free(&o);
}

static int memfd_with(size_t len, uint8_t **ret_data)
{
	uint8_t *d = malloc(len);
	if (!d || util_random_bytes(d, len) < 0)
		return -1;
	int fd = memfd_create("data", MFD_CLOEXEC);
	if (fd < 0 || util_write_all(fd, d, len) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	*ret_data = d;
	return fd;
}

static void test_stdin(void)
{
	size_t len = 4u << 20;
	uint8_t *data = NULL;
	int fd = memfd_with(len, &data);
	CHECK(fd >= 0, "memfd");
	struct out o;
	struct agent_exit ex;
	CHECK(run(&REQ(.argv = ARGV("cat")), fd, &o, &ex) == 0, "run");
	CHECK(ex.exited && ex.code == 0, "exit");
	CHECK(o.len[1] == len && memcmp(o.buf[1], data, len) == 0, "cat returned %zu bytes, differs", o.len[1]);
	out_free(&o);
	close(fd);
	free(data);

	/* Interactive: write, read the echo, then EOF. */
	struct agent_exec *x = NULL;
	struct agent_error err;
	CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("cat"), .stdin_pipe = true), &x, &err) == 0, "%s", err.msg);
	CHECK(agent_exec_write_stdin(x, "ping\n", 5) == 0, "write");
	o = (struct out){ 0 };
	while (o.len[1] < 5) {
		struct pollfd pfd = { .fd = agent_exec_fd(x), .events = POLLIN };
		CHECK(agent_exec_pending(x) || poll(&pfd, 1, 5000) == 1, "no output from cat");
		CHECK(agent_exec_pump(x, collect, &o, &ex) == 0, "pump");
	}
	CHECK(strcmp(o.buf[1], "ping\n") == 0, "echo '%s'", o.buf[1]);
	CHECK(agent_exec_write_stdin(x, NULL, 0) == 0, "eof");
	int r;
	while ((r = agent_exec_pump(x, collect, &o, &ex)) == 0)
		;
	CHECK(r == 1 && ex.exited && ex.code == 0, "exit after EOF");
	agent_exec_free(x);
	out_free(&o);
}

static void test_signal_timeout(void)
{
	struct agent_exec *x = NULL;
	struct agent_error err;
	struct agent_exit ex;
	CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("sleep", "100")), &x, &err) == 0, "%s", err.msg);
	CHECK(agent_exec_pid(x) > 0, "pid");
	CHECK(agent_exec_signal(x, SIGTERM) == 0, "signal");
	int r;
	while ((r = agent_exec_pump(x, NULL, NULL, &ex)) == 0)
		;
	CHECK(r == 1 && !ex.exited && ex.signal == SIGTERM && !ex.timed_out, "exit %d sig %d", ex.exited, ex.signal);
	agent_exec_free(x);

	struct out o;
	uint64_t t0 = util_now_ns();
	CHECK(run(&REQ(.argv = ARGV("sh", "-c", "sleep 100 & sleep 100"), .timeout_ms = 300), -1, &o, &ex) == 0,
	      "run");
	uint64_t ms = (util_now_ns() - t0) / 1000000;
	CHECK(ex.timed_out && !ex.exited && ex.signal == SIGKILL, "timeout: %d %d %d", ex.timed_out, ex.exited,
	      ex.signal);
	CHECK(ms >= 300 && ms < 3000, "took %llu ms", (unsigned long long)ms);
	out_free(&o);
}

static void test_pty(void)
{
	struct out o;
	struct agent_exit ex;
	CHECK(run(&REQ(.argv = ARGV("sh", "-c", "tty; stty size"), .pty = true, .rows = 33, .cols = 101), -1, &o,
		  &ex) == 0, "run");
	CHECK(ex.exited && ex.code == 0, "exit %d", ex.code);
	CHECK(o.buf[1] && strncmp(o.buf[1], "/dev/pts/", 9) == 0, "tty said '%s'", o.buf[1]);
	CHECK(strstr(o.buf[1], "33 101"), "stty size '%s'", o.buf[1]);
	CHECK(o.len[2] == 0, "stderr on a pty");
	out_free(&o);
}

static void test_concurrent(void)
{
	enum { N = 100 };
	struct agent_exec *x[N];
	struct out o[N];
	struct agent_error err;
	char arg[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(arg[i], sizeof(arg[i]), "n%d", i);
		CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("sh", "-c", "sleep 0.2; echo $0", arg[i])), &x[i],
				       &err) == 0, "start %d: %s", i, err.msg);
		o[i] = (struct out){ 0 };
	}
	for (int i = 0; i < N; i++) {
		struct agent_exit ex;
		int r;
		while ((r = agent_exec_pump(x[i], collect, &o[i], &ex)) == 0)
			;
		CHECK(r == 1 && ex.exited && ex.code == 0, "exit %d", i);
		char want[20];
		snprintf(want, sizeof(want), "n%d\n", i);
		CHECK(o[i].buf[1] && strcmp(o[i].buf[1], want) == 0, "%d said '%s'", i, o[i].buf[1]);
		agent_exec_free(x[i]);
		out_free(&o[i]);
	}
}

static long agent_rss_kb(void)
{
	char path[64], *status = NULL;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)agent_pid);
	if (util_read_file(path, 1 << 16, &status, NULL) < 0)
		return -1;
	const char *p = strstr(status, "VmRSS:");
	long kb = p ? strtol(p + 6, NULL, 10) : -1;
	free(status);
	return kb;
}

static int count_bytes(int stream, const void *buf, size_t len, void *userdata)
{
	(void)stream, (void)buf;
	*(size_t *)userdata += len;
	return 0;
}

static void test_big_output(void)
{
	struct out o;
	struct agent_exit ex;
	uint64_t t0 = util_now_ns();
	CHECK(run(&REQ(.argv = ARGV("head", "-c", "67108864", "/dev/zero")), -1, &o, &ex) == 0, "run");
	double s = (double)(util_now_ns() - t0) / 1e9;
	CHECK(ex.exited && ex.code == 0 && o.len[1] == 64u << 20, "got %zu", o.len[1]);
	printf("  64 MiB of stdout in %.3f s (%.0f MiB/s)\n", s, 64 / s);
	out_free(&o);

	/* Flow control: a client that does not read holds the process back, not the agent's memory. */
	struct agent_exec *x = NULL;
	struct agent_error err;
	long rss0 = agent_rss_kb();
	CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("head", "-c", "209715200", "/dev/zero")), &x, &err) == 0,
	      "%s", err.msg);
	usleep(1000 * 1000);
	long rss_kb = agent_rss_kb();
	printf("  agent RSS with 200 MiB of unread output pending: %ld KiB (%+ld KiB)\n", rss_kb, rss_kb - rss0);
	CHECK(rss0 > 0 && rss_kb - rss0 < 16 * 1024, "agent grew by %ld KiB: output not flow-controlled",
	      rss_kb - rss0);
	size_t total = 0;
	int r;
	while ((r = agent_exec_pump(x, count_bytes, &total, &ex)) == 0)
		;
	CHECK(r == 1 && ex.exited && ex.code == 0 && total == 200u << 20, "got %zu", total);
	agent_exec_free(x);
}

static int count_entries(const char *name, const struct agent_stat *st, void *userdata)
{
	(void)st;
	(void)name;
	(*(int *)userdata)++;
	return 0;
}

static int find_entry(const char *name, const struct agent_stat *st, void *userdata)
{
	if (strcmp(name, "big") == 0 && S_ISREG(st->mode))
		*(uint64_t *)userdata = st->size;
	return 0;
}

static void test_files(void)
{
	struct agent_error err;
	size_t len = 50u << 20;
	uint8_t *data = NULL;
	int fd = memfd_with(len, &data);
	CHECK(fd >= 0, "memfd");
	const char *big = path_in("sub/dir/big");
	uint64_t t0 = util_now_ns();
	CHECK(agent_file_write(addr, big, 0640, true, fd, &err) == 0, "write: %s", err.msg);
	uint64_t t1 = util_now_ns();
	int back = memfd_create("back", MFD_CLOEXEC);
	struct agent_stat st;
	CHECK(agent_file_read(addr, big, back, &st, &err) == 0, "read: %s", err.msg);
	uint64_t t2 = util_now_ns();
	printf("  50 MiB file write %.0f MiB/s, read %.0f MiB/s\n", 50e9 / (double)(t1 - t0),
	       50e9 / (double)(t2 - t1));
	CHECK(st.size == len && S_ISREG(st.mode) && (st.mode & 0777) == 0640, "stat %llu %o",
	      (unsigned long long)st.size, st.mode);
	uint8_t *got = mmap(NULL, len, PROT_READ, MAP_SHARED, back, 0);
	CHECK(got != MAP_FAILED && lseek(back, 0, SEEK_END) == (off_t)len, "size");
	CHECK(memcmp(got, data, len) == 0, "content differs");
	munmap(got, len);
	close(back);
	close(fd);
	free(data);

	CHECK(agent_stat(addr, path_in("sub/dir"), true, &st, &err) == 0 && S_ISDIR(st.mode), "stat dir");
	uint64_t size = 0;
	CHECK(agent_list_dir(addr, path_in("sub/dir"), find_entry, &size, &err) == 0, "list: %s", err.msg);
	CHECK(size == len, "listed size %llu", (unsigned long long)size);

	CHECK(agent_mkdir(addr, path_in("m/a/b/c"), 0755, true, &err) == 0, "mkdir -p: %s", err.msg);
	CHECK(agent_mkdir(addr, path_in("m/a/b/c"), 0755, false, &err) == -EEXIST, "mkdir existing");
	CHECK(agent_rename(addr, path_in("m/a"), path_in("m/z"), &err) == 0, "rename: %s", err.msg);
	CHECK(agent_stat(addr, path_in("m/z/b/c"), true, &st, &err) == 0 && S_ISDIR(st.mode), "renamed");
	CHECK(agent_remove(addr, path_in("m/z"), false, &err) == -ENOTEMPTY, "rmdir non-empty");
	CHECK(agent_remove(addr, path_in("m/z"), true, &err) == 0, "rm -r: %s", err.msg);
	int n = 0;
	CHECK(agent_list_dir(addr, path_in("m"), count_entries, &n, &err) == 0 && n == 0, "m has %d", n);
	CHECK(agent_sync(addr, &err) == 0, "sync");
	uint8_t seed[64] = { 1, 2, 3 };
	CHECK(agent_reseed(addr, seed, sizeof(seed), &err) == 0, "reseed: %s", err.msg);

	/* Overwrite keeps a complete file; small files and empty files. */
	int e = memfd_create("e", MFD_CLOEXEC);
	CHECK(agent_file_write(addr, big, 0600, false, e, &err) == 0, "empty write");
	CHECK(agent_stat(addr, big, true, &st, &err) == 0 && st.size == 0, "empty size");
	close(e);
}

static void test_errors(void)
{
	struct agent_error err;
	struct agent_stat st;
	const char *missing = path_in("no/such/file");
	int r = agent_file_read(addr, missing, -1, &st, &err);
	CHECK(r == -ENOENT && err.code == ENOENT && strstr(err.msg, missing), "read missing: %d '%s'", r, err.msg);
	r = agent_stat(addr, missing, true, &st, &err);
	CHECK(r == -ENOENT && strstr(err.msg, "No such file"), "stat missing: %d '%s'", r, err.msg);
	int fd = memfd_create("x", MFD_CLOEXEC);
	r = agent_file_write(addr, missing, 0644, false, fd, &err);
	CHECK(r == -ENOENT, "write without mkdir_p: %d '%s'", r, err.msg);
	close(fd);
	r = agent_list_dir(addr, missing, NULL, NULL, &err);
	CHECK(r == -ENOENT, "list missing: %d", r);
	r = agent_file_read(addr, dir, -1, &st, &err);
	CHECK(r == -EISDIR, "read dir: %d", r);
	struct agent_exec *x = NULL;
	r = agent_exec_start(addr, &REQ(.argv = ARGV("/no/such/program")), &x, &err);
	CHECK(r == -ENOENT && strstr(err.msg, "/no/such/program"), "exec missing: %d '%s'", r, err.msg);
	r = agent_exec_start(addr, &REQ(.argv = ARGV("true"), .cwd = "/no/such/dir"), &x, &err);
	CHECK(r == -ENOENT && strstr(err.msg, "chdir"), "bad cwd: %d '%s'", r, err.msg);
	r = agent_signal_pid(addr, getpid(), SIGTERM, &err);
	CHECK(r == -ESRCH, "signal a pid the agent did not start: %d", r);
	r = agent_hello("unix:/nonexistent/sock", 100, NULL, &err);
	CHECK(r == -ENOENT, "no agent: %d", r);
}

static int find_sleep(int pid, const char *const *argv, void *userdata)
{
	if (argv[0] && argv[1] && strcmp(argv[0], "sleep") == 0 && strcmp(argv[1], "77") == 0)
		*(int *)userdata = pid;
	return 0;
}

static void test_procs(void)
{
	struct agent_exec *x = NULL;
	struct agent_error err;
	struct agent_exit ex;
	CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("sleep", "77")), &x, &err) == 0, "%s", err.msg);
	int pid = 0;
	CHECK(agent_list_procs(addr, find_sleep, &pid, &err) == 0, "list: %s", err.msg);
	CHECK(pid == agent_exec_pid(x), "listed pid %d vs %d", pid, agent_exec_pid(x));
	CHECK(agent_signal_pid(addr, pid, SIGKILL, &err) == 0, "signal_pid: %s", err.msg);
	int r;
	while ((r = agent_exec_pump(x, NULL, NULL, &ex)) == 0)
		;
	CHECK(r == 1 && !ex.exited && ex.signal == SIGKILL, "killed");
	agent_exec_free(x);
	pid = 0;
	CHECK(agent_list_procs(addr, find_sleep, &pid, &err) == 0 && pid == 0, "still listed");

	/* A client that goes away takes its process with it. */
	CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("sleep", "77")), &x, &err) == 0, "%s", err.msg);
	int gone = agent_exec_pid(x);
	agent_exec_free(x);
	for (int i = 0; i < 100 && kill(gone, 0) == 0; i++)
		usleep(20 * 1000);
	CHECK(kill(gone, 0) < 0 && errno == ESRCH, "process %d outlived its connection", gone);
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void raw_send(int fd, struct proto_buf *b)
{
	CHECK(util_write_all(fd, b->data + b->head, proto_buf_pending(b)) == 0, "send");
	proto_buf_consume(b, proto_buf_pending(b));
}

/* Reads until EOF; returns the byte count (the agent closed the connection) or -1 on timeout. */
static ssize_t drain_to_eof(int fd, uint8_t *buf, size_t cap)
{
	size_t len = 0;
	for (;;) {
		ssize_t n = recv(fd, buf + len, cap - len, 0);
		if (n < 0)
			return errno == ECONNRESET ? (ssize_t)len : -1;
		if (n == 0)
			return (ssize_t)len;
		len += (size_t)n;
		if (len == cap)
			len = 0;
	}
}

static void test_malformed(void)
{
	/* A running exec on another connection must not notice. */
	struct agent_exec *x = NULL;
	struct agent_error err;
	CHECK(agent_exec_start(addr, &REQ(.argv = ARGV("cat"), .stdin_pipe = true), &x, &err) == 0, "%s", err.msg);

	static uint8_t buf[1 << 16];
	struct proto_buf b = { 0 };
	struct proto_hello h = { .magic = PROTO_MAGIC, .major = PROTO_VERSION_MAJOR, .max_payload = PROTO_MAX_PAYLOAD };
	/* 1: garbage without HELLO */
	int fd = raw_connect();
	CHECK(fd >= 0, "connect");
	CHECK(write(fd, "GET / HTTP/1.0\r\n\r\n", 18) == 18, "write");
	CHECK(drain_to_eof(fd, buf, sizeof(buf)) == 0, "garbage: answered or not closed");
	close(fd);
	/* 2: an oversized frame after HELLO */
	fd = raw_connect();
	proto_put_hello(&b, &h);
	raw_send(fd, &b);
	uint8_t huge[5] = { 0x00, 0x00, 0x20, 0x00, PROTO_EXEC }; /* 2 MiB */
	CHECK(write(fd, huge, 5) == 5, "write");
	CHECK(drain_to_eof(fd, buf, sizeof(buf)) >= 0, "oversized: not closed");
	close(fd);
	/* 3: an EXEC with a lying string length */
	fd = raw_connect();
	proto_put_hello(&b, &h);
	proto_begin(&b, PROTO_EXEC);
	proto_put_u32(&b, 1);
	proto_put_u32(&b, 1000); /* argv[0] claims 1000 bytes, frame has 3 */
	proto_put_raw(&b, "abc", 3);
	proto_end(&b);
	raw_send(fd, &b);
	CHECK(drain_to_eof(fd, buf, sizeof(buf)) >= 0, "lying length: not closed");
	close(fd);
	/* 4: a wrong major version is told so */
	fd = raw_connect();
	h.major = PROTO_VERSION_MAJOR + 1;
	proto_put_hello(&b, &h);
	raw_send(fd, &b);
	ssize_t n = drain_to_eof(fd, buf, sizeof(buf));
	CHECK(n > 0, "version: not closed");
	struct proto_frame f;
	long k = proto_frame_parse(buf, (size_t)n, PROTO_MAX_PAYLOAD, &f);
	CHECK(k > 0 && f.type == PROTO_HELLO, "no HELLO");
	struct proto_err e;
	CHECK(proto_frame_parse(buf + k, (size_t)n - (size_t)k, PROTO_MAX_PAYLOAD, &f) > 0 &&
		      proto_get_err(&f, &e) == 0 && e.code == EPROTONOSUPPORT, "no EPROTONOSUPPORT");
	close(fd);
	/* 5: a file upload cut short leaves nothing behind */
	fd = raw_connect();
	h.major = PROTO_VERSION_MAJOR;
	proto_put_hello(&b, &h);
	proto_put_path_op(&b, PROTO_FILE_WRITE, path_in("cut"), NULL, 0644, 0);
	proto_put_bytes(&b, PROTO_DATA, "half", 4);
	raw_send(fd, &b);
	close(fd);
	usleep(200 * 1000);
	int entries = 0;
	CHECK(agent_list_dir(addr, dir, count_entries, &entries, &err) == 0, "list");
	struct agent_stat st;
	CHECK(agent_stat(addr, path_in("cut"), true, &st, &err) == -ENOENT, "cut upload exists");
	proto_buf_free(&b);

	/* The exec still works. */
	struct out o = { 0 };
	struct agent_exit ex;
	CHECK(agent_exec_write_stdin(x, "still\n", 6) == 0, "write");
	CHECK(agent_exec_write_stdin(x, NULL, 0) == 0, "eof");
	int r;
	while ((r = agent_exec_pump(x, collect, &o, &ex)) == 0)
		;
	CHECK(r == 1 && o.buf[1] && strcmp(o.buf[1], "still\n") == 0, "exec disturbed");
	agent_exec_free(x);
	out_free(&o);
	CHECK(agent_hello(addr, 1000, NULL, &err) == 0, "agent gone");
}

/* A stand-in for the VMM's vsock unix socket: "CONNECT 1024\n" -> "OK <n>\n", then bytes both ways to
 * the agent's socket. Other ports are refused by hanging up, as Firecracker does. */
static void vsock_proxy_conn(int c)
{
	char line[32];
	size_t len = 0;
	while (len < sizeof(line) - 1 && read(c, line + len, 1) == 1 && line[len] != '\n')
		len++;
	line[len] = '\0';
	int a = raw_connect();
	if (strcmp(line, "CONNECT 1024") != 0 || a < 0 || write(c, "OK 1073741824\n", 14) != 14)
		_exit(0);
	struct timeval tv = { 0, 0 };
	setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = a, .events = POLLIN } };
	static uint8_t buf[1 << 16];
	for (;;) {
		if (poll(p, 2, -1) < 0)
			_exit(1);
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0 || util_write_all(p[1 - i].fd, buf, (size_t)n) < 0)
				_exit(0);
		}
	}
}

static void test_vsock_uds(void)
{
	char vpath[96], vaddr[192];
	snprintf(vpath, sizeof(vpath), "%s/v.sock", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", vpath);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 16) == 0, "listen");
	pid_t proxy = fork();
	if (proxy == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;) {
			int c = accept(l, NULL, NULL);
			if (c < 0)
				_exit(1);
			if (fork() == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				vsock_proxy_conn(c);
			}
			close(c);
		}
	}
	close(l);
	struct agent_error err;
	struct agent_info info;
	snprintf(vaddr, sizeof(vaddr), "vsock-uds:%s:1024", vpath);
	int r = agent_hello(vaddr, 2000, &info, &err);
	CHECK(r == 0 && info.major == PROTO_VERSION_MAJOR, "hello over vsock-uds: %s", err.msg);
	struct out o = { 0 };
	struct agent_exit ex;
	struct agent_exec_req req = REQ(.argv = ARGV("echo", "via vsock"));
	CHECK(agent_exec_run(vaddr, &req, -1, collect, &o, &ex, &err) == 0 && ex.exited && ex.code == 0, "exec");
	CHECK(o.buf[1] && strcmp(o.buf[1], "via vsock\n") == 0, "'%s'", o.buf[1]);
	out_free(&o);
	snprintf(vaddr, sizeof(vaddr), "vsock-uds:%s:1025", vpath);
	uint64_t t0 = util_now_ns();
	r = agent_hello(vaddr, 300, &info, &err);
	CHECK(r == -ECONNREFUSED && util_now_ns() - t0 >= 250000000ull, "no listener on the port: %d", r);
	kill(proxy, SIGKILL);
	waitpid(proxy, NULL, 0);
}

static void test_shutdown(void)
{
	struct agent_error err;
	CHECK(agent_shutdown(addr, &err) == 0, "shutdown: %s", err.msg);
	int status;
	CHECK(waitpid(agent_pid, &status, 0) == agent_pid, "wait");
	agent_pid = -1;
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "agent status %x", status);
}

/* TETHER (issue 20): a held tether's closing ends nothing; an armed one's ends the agent. Its own agent. */
static void test_tether(void)
{
	char tsock[128], taddr[160];
	snprintf(tsock, sizeof(tsock), "%s/tether.sock", dir);
	snprintf(taddr, sizeof(taddr), "unix:%s", tsock);
	pid_t pid = tether_agent_pid = fork();
	if (pid == 0) {
		execl(agent_path, agent_path, "--listen", tsock, (char *)NULL);
		_exit(127);
	}
	struct agent_error err;
	struct agent_info info;
	CHECK(agent_hello(taddr, 5000, &info, &err) == 0, "tether agent did not come up: %s", err.msg);
	CHECK(info.caps & PROTO_CAP_TETHER, "no TETHER capability");
	int t1 = -1, t2 = -1, status;
	CHECK(agent_tether(taddr, &t1, &err) == 0, "arm: %s", err.msg);
	CHECK(agent_tether_hold(taddr, true, &err) == 0, "hold: %s", err.msg);
	close(t1);
	usleep(200000);
	CHECK(waitpid(pid, &status, WNOHANG) == 0, "a held tether's closing ended the agent");
	CHECK(agent_hello(taddr, 1000, NULL, &err) == 0, "agent after a held tether closed: %s", err.msg);
	CHECK(agent_tether_hold(taddr, false, &err) == 0, "release: %s", err.msg);
	CHECK(agent_tether(taddr, &t2, &err) == 0, "arm again: %s", err.msg);
	usleep(100000);
	CHECK(waitpid(pid, &status, WNOHANG) == 0, "an armed tether ended the agent while open");
	close(t2); /* as the kernel does for a killed holder */
	uint64_t t0 = util_now_ns();
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && util_now_ns() - t0 < 5000000000ull)
		usleep(10000);
	if (w == pid)
		tether_agent_pid = -1;
	CHECK(w == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the agent did not end with its tether");
}

/* Reads until n bytes or EOF; returns the count. */
static size_t read_all(int fd, char *buf, size_t n)
{
	size_t got = 0;
	ssize_t k;
	while (got < n && (k = read(fd, buf + got, n - got)) > 0)
		got += (size_t)k;
	return got;
}

/* PORT_CONNECT: a stream to a loopback port (here the host's, the agent runs unconfined), half-closes both
 * ways, 1 MiB through, a refused port named in the message, port 0 refused by the client. */
static void test_port(void)
{
	struct agent_error err;
	struct agent_info info;
	CHECK(agent_hello(addr, 1000, &info, &err) == 0 && (info.caps & PROTO_CAP_PORT), "no PORT capability");
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 4) == 0 &&
		      getsockname(l, (struct sockaddr *)&sa, &sl) == 0, "listener");
	uint16_t port = ntohs(sa.sin_port);
	int fd = -1;
	CHECK(agent_port_connect(addr, port, &fd, &err) == 0, "port connect: %s", err.msg);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "not close-on-exec");
	int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	CHECK(s >= 0, "accept");
	char buf[64] = { 0 };
	CHECK(write(fd, "ping", 4) == 4 && read_all(s, buf, 4) == 4 && memcmp(buf, "ping", 4) == 0, "client->port");
	CHECK(shutdown(fd, SHUT_WR) == 0 && read_all(s, buf, sizeof(buf)) == 0, "the client's half-close did not pass");
	/* The port answers after the half-close: 1 MiB, then its own end. */
	static char big[1 << 20], back[(1 << 20) + 16];
	memset(big, 'x', sizeof(big));
	pid_t w = fork();
	if (w == 0) {
		_exit(write(s, "pong", 4) == 4 && write(s, big, sizeof(big)) == (ssize_t)sizeof(big) ? 0 : 1);
	}
	close(s); /* the writer's copy is the last: its exit is the port's end */
	size_t n = read_all(fd, back, sizeof(back));
	int status;
	waitpid(w, &status, 0);
	CHECK(n == 4 + sizeof(big) && memcmp(back, "pong", 4) == 0 && back[n - 1] == 'x', "port->client %zu bytes", n);
	close(fd);
	/* Bytes sent right behind the request, before OK, reach the port after it; nothing else does. */
	int raw = raw_connect();
	struct proto_buf pb = { 0 };
	struct proto_hello hh = { .magic = PROTO_MAGIC, .major = PROTO_VERSION_MAJOR, .minor = PROTO_VERSION_MINOR,
				  .max_payload = PROTO_MAX_PAYLOAD };
	CHECK(raw >= 0 && proto_put_hello(&pb, &hh) == 0 && proto_put_port_connect(&pb, port, 0) == 0, "raw request");
	proto_put_raw(&pb, "early", 5);
	raw_send(raw, &pb);
	proto_buf_free(&pb);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	CHECK(s >= 0 && read_all(s, buf, 5) == 5 && memcmp(buf, "early", 5) == 0, "early bytes: '%.5s'", buf);
	close(s);
	close(raw);
	/* A second stream, whose port closes first; then nothing listens. */
	CHECK(agent_port_connect(addr, port, &fd, &err) == 0, "again: %s", err.msg);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	CHECK(s >= 0 && write(fd, "abc", 3) == 3 && read_all(s, buf, 3) == 3, "second stream");
	close(s);
	CHECK(read_all(fd, buf, sizeof(buf)) == 0, "the port's close did not reach the client");
	close(fd);
	close(l);
	int r = agent_port_connect(addr, port, &fd, &err);
	CHECK(r == -ECONNREFUSED && strstr(err.msg, "is not listening"), "refused: %d '%s'", r, err.msg);
	CHECK(agent_port_connect(addr, 0, &fd, &err) == -EINVAL, "port 0");
	CHECK(agent_hello(addr, 1000, NULL, &err) == 0, "agent after the forwards: %s", err.msg);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "hello", test_hello },	 { "exec", test_exec_streams }, { "streaming", test_streaming },
	{ "stdin", test_stdin },	 { "signal", test_signal_timeout }, { "pty", test_pty },
	{ "concurrent", test_concurrent }, { "big-output", test_big_output }, { "files", test_files },
	{ "errors", test_errors },	 { "procs", test_procs },	{ "malformed", test_malformed }, { "vsock-uds", test_vsock_uds },
	{ "tether", test_tether },	 { "port", test_port },	 { "shutdown", test_shutdown },
};

int main(int argc, char **argv)
{
	const char *agent = getenv("SPACE_AGENT_PATH");
	if (!agent || access(agent, X_OK) < 0) {
		/* Ours, so a broken build: a failure, never a skip. */
		printf("FAIL: space-agent not built (SPACE_AGENT_PATH=%s)\n", agent ? agent : "unset");
		return 1;
	}
	agent_path = agent;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/space-agent-test-XXXXXX");
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/a.sock", dir);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	agent_pid = fork();
	if (agent_pid == 0) {
		execl(agent, agent, "--listen", sock, (char *)NULL);
		_exit(127);
	}
	struct agent_error err;
	CHECK(agent_hello(addr, 5000, NULL, &err) == 0, "agent did not come up: %s", err.msg);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc > 1 && strcmp(argv[1], cases[i].name) != 0 && strcmp(cases[i].name, "shutdown") != 0)
			continue;
		uint64_t t0 = util_now_ns();
		cases[i].fn();
		printf("ok %s (%.0f ms)\n", cases[i].name, (double)(util_now_ns() - t0) / 1e6);
	}
	cleanup();
	return 0;
}
