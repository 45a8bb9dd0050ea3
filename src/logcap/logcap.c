/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-logcap: the host-side end of a jail's log pipe (docs/jail.md, "The sandbox's log").
 *
 *   space-logcap --uid UID [--max-bytes N]
 *     fd 0  the read end of the pipe; the jail's PID 1 (the agent) holds the write end as its stdout/stderr
 *     fd 1  status: "ready <pid>\n" once confined, or "error: <reason>\n" (written once)
 *     fd 3  sandbox.log, opened by the library read-write with O_APPEND
 *     fd 4  sandbox.log.1, opened by the library write-only
 *   space-logcap --describe-sandbox
 *     prints how it confines itself as JSON (for `space doctor --verbose`), then exits
 *
 * Everything the sandbox writes to its stdout ends up here, so this process stores it, capped: N bytes in
 * all (default 8 MiB). sandbox.log holds at most N/2; when the next chunk would not fit, sandbox.log.1
 * becomes a copy of sandbox.log and sandbox.log starts again, so the newest output is always kept and
 * reading sandbox.log.1 then sandbox.log gives it in order. It reads until EOF, which comes when the
 * jail's last process is gone, and never stops reading before (a full pipe would stall the agent).
 *
 * It parses nothing, but what it reads is hostile, so it keeps nothing of root: its own machine-wide uid
 * (src/util/uidalloc.h, a UIDALLOC_SINGLE slot the library holds), no capabilities nor way back to any
 * (util/confine.h), no_new_privs, not
 * dumpable, RLIMIT_FSIZE at N/2 (the kernel's cap behind ours), and a seccomp allowlist of the six calls
 * the loop makes, each only on the descriptors it needs; anything else kills it. The files were opened for it:
 * it never opens, creates or renames anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/confine.h"
#include "util/uidalloc.h"
#include "util/util.h"

#define IN_FD 0
#define STATUS_FD 1
#define LOG_FD 3
#define OLD_FD 4
#define DEFAULT_MAX (8u << 20)
#define MIN_MAX (8u << 10)
#define MAX_MAX (1ull << 40)
#define CHUNK (64u << 10)

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)

/* The allowlist: syscall, the descriptors it may use (-1: no fd argument), why. */
static const struct {
	int nr;
	int fds[3];
	const char *why;
} allowed[] = {
	{ SCMP_SYS(read), { IN_FD, -1, -1 }, "the pipe" },
	{ SCMP_SYS(pread64), { LOG_FD, -1, -1 }, "rotation copies sandbox.log into sandbox.log.1" },
	{ SCMP_SYS(write), { LOG_FD, OLD_FD, STATUS_FD }, "the two log files; the status line, once confined" },
	{ SCMP_SYS(lseek), { LOG_FD, OLD_FD, -1 }, "sandbox.log's size; sandbox.log.1 rewritten from its start" },
	{ SCMP_SYS(ftruncate), { LOG_FD, OLD_FD, -1 }, "rotation" },
	{ SCMP_SYS(exit_group), { -1, -1, -1 }, "EOF: the jail is gone" },
};

static int build_filter(scmp_filter_ctx *ret)
{
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -ENOMEM;
	int r;
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		for (int k = 0; k < 3; k++) {
			if (allowed[i].fds[k] < 0) {
				if (k == 0 && (r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i].nr, 0)) < 0)
					return r;
				continue;
			}
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i].nr, 1,
					     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)allowed[i].fds[k]));
			if (r < 0)
				return r;
		}
	*ret = TAKE_PTR(ctx);
	return 0;
}

/* The status line and an exit code, for failures before the loop. */
static int fail(const char *what, int err)
{
	dprintf(STATUS_FD, "error: %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
	return 1;
}

/* Drops to uid (and the same gid), then no capabilities, no way to gain any, not dumpable. */
static int drop_privileges(uint32_t uid, uint64_t file_max)
{
	struct rlimit fsize = { file_max, file_max };
	/* Past the cap the kernel answers EFBIG instead of killing us. */
	if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &fsize) < 0)
		return -errno;
	return confine_drop_to_uid(uid, NULL, 0);
}

/* sandbox.log.1 becomes the last half-cap bytes of sandbox.log, which starts again. Errors lose old lines,
 * never the loop. */
static void rotate(uint64_t half)
{
	off_t size = lseek(LOG_FD, 0, SEEK_END);
	if (size < 0)
		size = 0;
	off_t off = (uint64_t)size > half ? size - (off_t)half : 0;
	if (ftruncate(OLD_FD, 0) == 0 && lseek(OLD_FD, 0, SEEK_SET) == 0) {
		static char buf[CHUNK];
		ssize_t k;
		while (off < size && (k = pread(LOG_FD, buf, sizeof(buf), off)) > 0) {
			if (util_write_all(OLD_FD, buf, (size_t)k) < 0)
				break;
			off += k;
		}
	}
	(void)ftruncate(LOG_FD, 0);
}

static void serve(uint64_t half)
{
	static char buf[CHUNK];
	size_t chunk = half < sizeof(buf) ? (size_t)half : sizeof(buf);
	/* A file already past its share (an older writer): start from a rotation. */
	off_t size = lseek(LOG_FD, 0, SEEK_END);
	if (size < 0 || (uint64_t)size > half)
		rotate(half);
	for (;;) {
		ssize_t n = read(IN_FD, buf, chunk);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			break;
		}
		size = lseek(LOG_FD, 0, SEEK_END);
		if (size < 0 || (uint64_t)size + (uint64_t)n > half)
			rotate(half);
		(void)util_write_all(LOG_FD, buf, (size_t)n); /* a full disk drops output, never blocks the jail */
	}
}

static int describe(void)
{
	scmp_filter_ctx ctx = NULL;
	int r = build_filter(&ctx);
	if (r < 0)
		return fail("seccomp filter", -r);
	seccomp_release(ctx);
	printf("{\"name\":\"space-logcap\",\"uid\":\"its own (a machine-wide unique uid slot)\",\"capabilities\":[],"
	       "\"no_new_privs\":true,\"dumpable\":false,\"seccomp\":\"allowlist\",\"seccomp_rules\":%zu,"
	       "\"default_action\":\"kill\"}\n",
	       ARRAY_SIZE(allowed));
	return 0;
}

static void usage(void)
{
	fputs("usage: space-logcap --uid UID [--max-bytes N]   (fd 0 pipe, 1 status, 3 sandbox.log, 4 sandbox.log.1)\n"
	      "       space-logcap --describe-sandbox\n",
	      stderr);
}

int main(int argc, char **argv)
{
	uint64_t uid = 0, max = DEFAULT_MAX;
	if (argc == 2 && !strcmp(argv[1], "--describe-sandbox"))
		return describe();
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			return usage(), 2;
		if (!strcmp(argv[i], "--uid")) {
			if (util_parse_uint(argv[i + 1], 0, UINT32_MAX - 1, &uid) < 0)
				return usage(), 2;
		} else if (!strcmp(argv[i], "--max-bytes")) {
			if (util_parse_uint(argv[i + 1], MIN_MAX, MAX_MAX, &max) < 0)
				return usage(), 2;
		} else {
			return usage(), 2;
		}
	}
	if (fcntl(STATUS_FD, F_GETFD) < 0)
		return 2;
	/* Only a uid of its own: never root, never a sandbox's range or another tool's uid. */
	enum uidalloc_kind kind;
	uint32_t first;
	if (!uid || !uidalloc_slot_of((uint32_t)uid, &kind, &first) || kind != UIDALLOC_SINGLE || first != uid)
		return fail("--uid must be a single uid slot (src/util/uidalloc.h)", 0);
	struct stat st;
	if (fstat(IN_FD, &st) < 0 || !S_ISFIFO(st.st_mode))
		return fail("fd 0 is not a pipe", 0);
	if (fstat(LOG_FD, &st) < 0 || !S_ISREG(st.st_mode) || !(fcntl(LOG_FD, F_GETFL) & O_APPEND) ||
	    (fcntl(LOG_FD, F_GETFL) & O_ACCMODE) != O_RDWR)
		return fail("fd 3 is not sandbox.log opened read-write for appending", 0);
	if (fstat(OLD_FD, &st) < 0 || !S_ISREG(st.st_mode) || (fcntl(OLD_FD, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return fail("fd 4 is not sandbox.log.1 opened for writing", 0);
	/* Nothing else of the parent's; fd 2 goes too (nothing writes to it). */
	if (syscall(SYS_close_range, 5u, ~0u, 0) < 0)
		return fail("close_range", errno);
	close(STDERR_FILENO);

	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
	int r = build_filter(&ctx); /* libseccomp allocates: before the filter */
	if (r < 0)
		return fail("seccomp filter", -r);
	uint64_t half = max / 2;
	char line[32];
	int n = snprintf(line, sizeof(line), "ready %d\n", (int)getpid());
	if ((r = drop_privileges((uint32_t)uid, half)) < 0)
		return fail("drop privileges", -r);
	if ((r = seccomp_load(ctx)) < 0)
		return fail("load seccomp filter", -r);
	/* Only the allowlist's calls from here on. "ready" means confined; the library then closes its end. */
	(void)util_write_all(STATUS_FD, line, (size_t)n);
	serve(half);
	syscall(SYS_exit_group, 0);
	return 0;
}
