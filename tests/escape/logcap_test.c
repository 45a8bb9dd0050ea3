/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-logcap (src/logcap/logcap.c), the writer of a jail's log, driven directly: what a sandbox pours
 * into its stdout stays under the cap on the host, the newest output is kept in order across the two
 * files, and the writer runs as its own uid with no capabilities, no_new_privs and a seccomp filter.
 * Needs root (a uid slot, the uid switch). Usage: logcap-test PATH-OF-space-logcap
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/uidalloc.h"
#include "util/util.h"

static int checks;
#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		checks++;                                                               \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
			return 1;                                                       \
		}                                                                       \
	} while (0)

struct writer {
	pid_t pid;
	int in, status;
	char line[128];
};

/* Starts the writer on dir's two files with the given uid and cap; reads its status line. */
static int start(const char *bin, const char *dir, uint32_t uid, const char *max, struct writer *w)
{
	char p[512], o[512], uid_arg[16];
	snprintf(p, sizeof(p), "%s/sandbox.log", dir);
	snprintf(o, sizeof(o), "%s/sandbox.log.1", dir);
	snprintf(uid_arg, sizeof(uid_arg), "%u", uid);
	int log = open(p, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	int old = open(o, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	int in[2], st[2];
	if (log < 0 || old < 0 || pipe2(in, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0)
		return -errno;
	w->pid = fork();
	if (w->pid == 0) {
		int want[5] = { in[0], st[1], st[1], log, old }, tmp[5];
		for (int i = 0; i < 5; i++)
			tmp[i] = fcntl(want[i], F_DUPFD_CLOEXEC, 10);
		for (int i = 0; i < 5; i++)
			dup2(tmp[i], i);
		execl(bin, "space-logcap", "--uid", uid_arg, "--max-bytes", max, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(st[1]);
	close(log);
	close(old);
	w->in = in[1];
	w->status = st[0];
	ssize_t n = read(w->status, w->line, sizeof(w->line) - 1);
	w->line[n > 0 ? n : 0] = '\0';
	return 0;
}

static int finish(struct writer *w)
{
	close(w->in);
	close(w->status);
	int st;
	if (waitpid(w->pid, &st, 0) != w->pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static long status_field(pid_t pid, const char *key, char *buf, size_t len)
{
	char path[64], *text = NULL;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (util_read_file(path, 1 << 16, &text, NULL) < 0)
		return -1;
	const char *at = strstr(text, key);
	buf[0] = '\0';
	if (at) {
		at += strlen(key);
		at += strspn(at, " \t");
		size_t k = strcspn(at, "\n");
		snprintf(buf, len, "%.*s", (int)k, at);
	}
	free(text);
	return at ? 0 : -1;
}

static off_t size_of(const char *dir, const char *name)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

/* Pours total bytes of numbered lines through the writer; checks caps and order afterwards. */
static int pour(const char *bin, const char *dir, uint32_t uid, uint64_t max, uint64_t total)
{
	char max_arg[24];
	snprintf(max_arg, sizeof(max_arg), "%llu", (unsigned long long)max);
	struct writer w;
	CHECK(start(bin, dir, uid, max_arg, &w) == 0, "start");
	CHECK(!strncmp(w.line, "ready ", 6), "status: %s", w.line);

	/* Confined before it reads a byte: its own uid, no capabilities, no_new_privs, a seccomp filter. */
	char v[256], want[64];
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", uid, uid, uid, uid);
	CHECK(status_field(w.pid, "Uid:", v, sizeof(v)) == 0 && !strcmp(v, want), "Uid: %s", v);
	CHECK(status_field(w.pid, "Gid:", v, sizeof(v)) == 0 && !strcmp(v, want), "Gid: %s", v);
	CHECK(status_field(w.pid, "Groups:", v, sizeof(v)) == 0 && !strcmp(v, ""), "Groups: %s", v);
	static const char *const zero[] = { "CapInh:", "CapPrm:", "CapEff:", "CapAmb:" };
	for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
		CHECK(status_field(w.pid, zero[i], v, sizeof(v)) == 0 && strspn(v, "0") == strlen(v), "%s %s", zero[i], v);
	CHECK(status_field(w.pid, "NoNewPrivs:", v, sizeof(v)) == 0 && !strcmp(v, "1"), "NoNewPrivs: %s", v);
	CHECK(status_field(w.pid, "Seccomp:", v, sizeof(v)) == 0 && !strcmp(v, "2"), "Seccomp: %s", v);

	/* Batches of whole lines, as a program's stdio would write them. */
	static char batch[1 << 16];
	uint64_t sent = 0, n = 0;
	int werr = 0;
	while (sent < total && !werr) {
		size_t len = 0;
		while (len + 16 <= sizeof(batch))
			len += (size_t)snprintf(batch + len, 17, "line %010llu\n", (unsigned long long)n++);
		werr = util_write_all(w.in, batch, len);
		sent += len;
	}
	CHECK(werr == 0, "write to the pipe after %llu bytes: %s", (unsigned long long)sent, strerror(-werr));
	CHECK(finish(&w) == 0, "the writer did not end cleanly at EOF");

	off_t cur = size_of(dir, "sandbox.log"), old = size_of(dir, "sandbox.log.1");
	printf("cap %llu: %llu bytes in, sandbox.log %lld + sandbox.log.1 %lld bytes kept\n", (unsigned long long)max,
	       (unsigned long long)sent, (long long)cur, (long long)old);
	CHECK(cur >= 0 && old >= 0 && (uint64_t)cur <= max / 2 && (uint64_t)old <= max / 2, "a file over half the cap");
	CHECK(cur + old >= (off_t)(max / 4), "too little kept: %lld", (long long)(cur + old));

	/* sandbox.log.1 then sandbox.log: consecutive lines ending with the last one sent (a rotation may cut
	 * a line between the files; the concatenation joins it again). */
	char p[512], *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	snprintf(p, sizeof(p), "%s/sandbox.log.1", dir);
	CHECK(util_read_file(p, 1 << 30, &a, &la) == 0, "read .1");
	snprintf(p, sizeof(p), "%s/sandbox.log", dir);
	CHECK(util_read_file(p, 1 << 30, &b, &lb) == 0, "read log");
	char *all = malloc(la + lb + 1);
	memcpy(all, a, la);
	memcpy(all + la, b, lb);
	all[la + lb] = '\0';
	free(a);
	free(b);
	char *s = strchr(all, '\n'); /* the first line may be a tail */
	unsigned long long prev = 0, first = 0, count = 0;
	int bad = 0;
	for (char *q = s ? s + 1 : all; *q; q = strchr(q, '\n') + 1) {
		/* Not sscanf: it measures the whole remaining buffer each time. */
		char *end;
		unsigned long long k = strncmp(q, "line ", 5) ? 0 : strtoull(q + 5, &end, 10);
		if (strncmp(q, "line ", 5) || *end != '\n' || (count && k != prev + 1)) {
			bad = 1;
			break;
		}
		if (!count)
			first = k;
		prev = k;
		count++;
	}
	free(all);
	CHECK(!bad && count > 0, "lines out of order after %llu", prev);
	CHECK(prev == n - 1, "the last line kept is %llu, sent %llu", prev, (unsigned long long)(n - 1));
	printf("kept lines %llu..%llu of %llu, in order\n", first, prev, (unsigned long long)n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	if (geteuid() != 0) {
		printf("SKIP: needs root\n");
		return 77;
	}
	if (access(argv[1], X_OK) < 0) {
		fprintf(stderr, "FAIL: space-logcap not built (%s)\n", argv[1]);
		return 1;
	}
	char dir[] = "/tmp/space-logcap-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char owner[96];
	snprintf(owner, sizeof(owner), "pid %d 0 logcap-test", (int)getpid());
	uint32_t uid;
	int r = uidalloc_acquire(UIDALLOC_SINGLE, owner, &uid);
	if (r < 0) {
		fprintf(stderr, "FAIL: uid slot: %s\n", strerror(-r));
		return 1;
	}
	int fails = 0;
	/* The default cap (8 MiB) against 40 MiB, then a small one so that it rotates hundreds of times. */
	fails += pour(argv[1], dir, uid, 8u << 20, 40u << 20);
	fails += pour(argv[1], dir, uid, 64u << 10, 16u << 20);

	/* Refusals: never root, never a uid outside the single-uid slots (a jail's range, say). */
	struct writer w;
	const uint32_t bad_uids[] = { 0, 0x40000000u };
	for (size_t i = 0; i < 2 && !fails; i++) {
		if (start(argv[1], dir, bad_uids[i], "1048576", &w) < 0 || strncmp(w.line, "error: --uid", 12) ||
		    finish(&w) == 0) {
			fprintf(stderr, "FAIL: --uid %u accepted: %s\n", bad_uids[i], w.line);
			fails++;
		}
		checks++;
	}
	(void)uidalloc_release(UIDALLOC_SINGLE, uid, owner);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fails++;
	if (fails)
		return 1;
	printf("OK logcap: %d checks\n", checks);
	return 0;
}
