/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The serial console log's cap (devices/serial.h over util/caplog.h), with no KVM: a "guest" writes
 * through the UART's transmit register far more than the cap, and the host files must stay under it with
 * the newest bytes kept, in order, across the two parts. Also under a seccomp filter that allows only what
 * space-vmm's vCPU threads may do for it, so the rotation needs no other syscall.
 */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "devices/serial.h"
#include "util/caplog.h"
#include "util/util.h"

static char dir[] = "/tmp/space-test-serial-log-XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static off_t size_of(const char *name)
{
	char p[256];
	path_of(p, sizeof(p), name);
	struct stat st;
	return stat(p, &st) == 0 ? st.st_size : -1;
}

/* FILE.1 then FILE, as `space logs` reads them, into a malloc'd buffer. */
static char *read_both(const char *name, size_t *ret_len)
{
	char p[256], q[256];
	path_of(p, sizeof(p), name);
	snprintf(q, sizeof(q), "%s.1", p);
	char *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	if (util_read_file(q, 64u << 20, &a, &na) < 0)
		na = 0;
	if (util_read_file(p, 64u << 20, &b, &nb) < 0)
		nb = 0;
	char *out = malloc(na + nb + 1);
	memcpy(out, a ? a : "", na);
	memcpy(out + na, b ? b : "", nb);
	out[na + nb] = '\0';
	free(a);
	free(b);
	*ret_len = na + nb;
	return out;
}

static void open_pair(const char *name, int *fd, int *old_fd)
{
	char p[256], q[256];
	path_of(p, sizeof(p), name);
	snprintf(q, sizeof(q), "%s.1", p);
	*fd = open(p, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	*old_fd = open(q, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

/* The guest prints "line NNNNNN\n" n times (12 bytes each) through THR. */
static void guest_prints(struct serial *s, unsigned first, unsigned n)
{
	for (unsigned i = first; i < first + n; i++) {
		char line[16];
		snprintf(line, sizeof(line), "line %06u\n", i);
		for (const char *c = line; *c; c++) {
			uint8_t v = (uint8_t)*c;
			serial_io(s, 0, true, &v);
		}
	}
}

/* The lines in buf are consecutive and end with last. */
static bool lines_consecutive_to(const char *buf, unsigned last, unsigned *ret_count)
{
	unsigned prev = 0, count = 0;
	bool first = true;
	for (const char *p = buf; *p;) {
		unsigned v;
		if (sscanf(p, "line %06u\n", &v) != 1)
			return false;
		if (!first && v != prev + 1)
			return false;
		first = false;
		prev = v;
		count++;
		const char *nl = strchr(p, '\n');
		if (!nl)
			return false;
		p = nl + 1;
	}
	*ret_count = count;
	return count > 0 && prev == last;
}

static void test_cap_holds(void)
{
	const uint64_t max = 64 << 10;
	int fd, old;
	open_pair("cap.log", &fd, &old);
	CHECK(fd >= 0 && old >= 0);
	struct serial_log log = { .fd = fd, .old_fd = old, .max = max };
	struct serial *s;
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == 0);
	/* 100,000 lines: 1.2 MB from the guest against a 64 KiB cap. */
	guest_prints(s, 0, 100000);
	serial_flush(s);
	CHECK(serial_log_rotations(s) >= 30);
	CHECK(size_of("cap.log") <= (off_t)(max / 2));
	CHECK(size_of("cap.log.1") <= (off_t)(max / 2));
	size_t n;
	char *all = read_both("cap.log", &n);
	CHECK(n <= max);
	CHECK(n >= max / 2); /* the older part is kept, not only the current one */
	unsigned count = 0;
	CHECK(lines_consecutive_to(all, 99999, &count)); /* the newest lines, none missing, in order */
	free(all);
	serial_destroy(s);
	close(fd);
	close(old);
}

/* A log left larger than its share by an earlier, uncapped writer is cut back when the device starts. */
static void test_oversized_at_start(void)
{
	int fd, old;
	open_pair("big.log", &fd, &old);
	static char junk[200000];
	memset(junk, 'x', sizeof(junk));
	CHECK(util_write_all(fd, junk, sizeof(junk)) == 0);
	struct serial_log log = { .fd = fd, .old_fd = old, .max = 64 << 10 };
	struct serial *s;
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == 0);
	CHECK(size_of("big.log") == 0);
	CHECK(size_of("big.log.1") == 32 << 10);
	guest_prints(s, 0, 10);
	serial_flush(s);
	CHECK(size_of("big.log") == 120);
	serial_destroy(s);
	close(fd);
	close(old);
}

/* Bad caps and a log that is not a file are refused, not run uncapped. */
static void test_refusals(void)
{
	int fd, old;
	open_pair("bad.log", &fd, &old);
	struct serial *s;
	struct serial_log log = { .fd = fd, .old_fd = old, .max = CAPLOG_MIN_MAX - 1 };
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == -EINVAL);
	log.max = CAPLOG_MAX_MAX + 1;
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == -EINVAL);
	int p[2];
	CHECK(pipe(p) == 0);
	log = (struct serial_log){ .fd = p[1], .old_fd = -1, .max = 1 << 20 };
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == -EINVAL);
	close(p[0]);
	close(p[1]);
	close(fd);
	close(old);
}

/*
 * The rotation under a filter that allows only the calls space-vmm's vCPU threads have for it (write,
 * pread64, pwrite64, ftruncate, plus exit): anything else kills the child, and the test fails.
 */
static void test_under_seccomp(void)
{
	int fd, old;
	open_pair("sec.log", &fd, &old);
	struct serial_log log = { .fd = fd, .old_fd = old, .max = 16 << 10 };
	struct serial *s;
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
		static const int allowed[] = { SCMP_SYS(write), SCMP_SYS(pread64), SCMP_SYS(pwrite64),
					       SCMP_SYS(ftruncate), SCMP_SYS(futex), SCMP_SYS(exit_group) };
		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
		if (seccomp_load(ctx) < 0)
			_exit(3);
		guest_prints(s, 0, 20000);
		serial_flush(s);
		_exit(serial_log_rotations(s) >= 10 ? 0 : 2);
	}
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(size_of("sec.log") <= 8 << 10 && size_of("sec.log.1") <= 8 << 10);
	size_t n;
	char *all = read_both("sec.log", &n);
	unsigned count = 0;
	CHECK(lines_consecutive_to(all, 19999, &count));
	free(all);
	serial_destroy(s);
	close(fd);
	close(old);
}

/* No log at all, and the uncapped log of `space-vmm boot --console-log`, still work as before. */
static void test_uncapped(void)
{
	int fd, old;
	open_pair("free.log", &fd, &old);
	struct serial_log log = { .fd = fd, .old_fd = -1, .max = 0 };
	struct serial *s, *t;
	CHECK(serial_create(-1, &log, NULL, NULL, &s) == 0);
	CHECK(serial_create(-1, NULL, NULL, NULL, &t) == 0);
	guest_prints(s, 0, 10000);
	guest_prints(t, 0, 10);
	serial_flush(s);
	CHECK(size_of("free.log") == 120000);
	CHECK(serial_log_rotations(s) == 0);
	serial_destroy(s);
	serial_destroy(t);
	close(fd);
	close(old);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_cap_holds);
	RUN(test_oversized_at_start);
	RUN(test_refusals);
	/* The sanitizers' runtime makes calls of its own (it maps shadow memory, writes reports) that the
	 * five-call filter refuses; the unsanitized build runs this check. */
#if !defined(__SANITIZE_ADDRESS__)
	RUN(test_under_seccomp);
#else
	(void)test_under_seccomp;
#endif
	RUN(test_uncapped);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return check_failures ? 1 : 0;
}
