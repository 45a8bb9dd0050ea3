/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers of the public API tests (tests/api): they use include/space.h only, like any program that
 * links libspace. The state directory comes from $SPACE_STATE_DIR (tests/api/run.sh makes one on a loop
 * btrfs pool, with a busybox template named by $SPACE_API_TEMPLATE).
 *
 * Pending checks: what issue 15 asks of the API but the library does not do yet (a last error cleared by
 * the next successful call, options versions newer than the library refused). PENDING(cond, why) counts as
 * a CHECK when $SPACE_API_TEST_ISSUE15 is 1 (set it in tests/api/meson.build once the redesign lands);
 * until then a false one prints "PENDING: why" and does not fail the test.
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <space.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"

static int pending_count;

static inline bool api_issue15(void)
{
	const char *e = getenv("SPACE_API_TEST_ISSUE15");
	return e && !strcmp(e, "1");
}

#define PENDING(cond, why)                                                                           \
	do {                                                                                         \
		if (api_issue15()) {                                                                 \
			CHECK(cond);                                                                 \
		} else if (!(cond)) {                                                                \
			pending_count++;                                                             \
			printf("PENDING (issue 15): %s:%d: %s [%s]\n", __FILE__, __LINE__, why, #cond); \
		}                                                                                    \
	} while (0)

/* A return code a call in a child process could not give: the child crashed (or hung up). */
#define API_CRASHED (-100000)

/* Runs expr (an int expression) in a child process and gives its value, or API_CRASHED: a library that
 * dereferences a bad argument is a failed check, not the end of the test. */
#define SAFE_RC(expr)                                                                                \
	__extension__({                                                                              \
		int _fds[2], _rc = API_CRASHED;                                                      \
		if (pipe2(_fds, O_CLOEXEC) == 0) {                                                   \
			pid_t _pid = fork();                                                         \
			if (_pid == 0) {                                                             \
				int _v = (int)(expr);                                                \
				_exit(write(_fds[1], &_v, sizeof(_v)) == sizeof(_v) ? 0 : 1);         \
			}                                                                            \
			close(_fds[1]);                                                              \
			if (_pid > 0) {                                                              \
				int _v, _st;                                                         \
				if (read(_fds[0], &_v, sizeof(_v)) == sizeof(_v))                    \
					_rc = _v;                                                    \
				waitpid(_pid, &_st, 0);                                              \
			}                                                                            \
			close(_fds[0]);                                                              \
		}                                                                                    \
		_rc;                                                                                 \
	})

/* CHECK_RC(expr, want): expr (run in a child) returns want; prints what it returned otherwise. */
#define CHECK_RC(expr, want)                                                                         \
	do {                                                                                         \
		int _got = SAFE_RC(expr);                                                            \
		if (_got != (want))                                                                  \
			fprintf(stderr, "%s:%d: %s returned %d%s, wanted %d\n", __FILE__, __LINE__, #expr, \
				_got, _got == API_CRASHED ? " (crashed)" : "", (want));                \
		CHECK(_got == (want));                                                               \
	} while (0)

static inline space_ctx *api_ctx(const char *state_dir)
{
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = state_dir ? state_dir : getenv("SPACE_STATE_DIR");
	space_ctx *ctx = NULL;
	int r = space_ctx_new(&o, &ctx);
	if (r < 0) {
		fprintf(stderr, "space_ctx_new: %s\n", space_strerror(r));
		exit(1);
	}
	return ctx;
}

static inline const char *api_template(void)
{
	const char *t = getenv("SPACE_API_TEMPLATE");
	return t && *t ? t : "tiny";
}

/*
 * A zeroed block of size bytes that ends where an inaccessible page begins: an options struct laid out as
 * an older caller's (only the fields its version had). A library that reads a field that version lacks
 * faults instead of reading garbage. Freed with api_old_struct_free().
 */
static inline void *api_old_struct(size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t span = ((size + (size_t)page - 1) / (size_t)page + 1) * (size_t)page;
	char *base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	if (mprotect(base + span - (size_t)page, (size_t)page, PROT_NONE) < 0) {
		munmap(base, span);
		return NULL;
	}
	return base + span - (size_t)page - size;
}

static inline void api_old_struct_free(void *p, size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t end = (uintptr_t)p + size; /* the guard page's start */
	size_t span = ((size + (size_t)page - 1) / (size_t)page + 1) * (size_t)page;
	munmap((void *)(end + (size_t)page - span), span);
}

struct api_capture {
	char out[4096];
	size_t len;
};

static inline int api_capture_output(int stream, const void *data, size_t len, void *userdata)
{
	struct api_capture *c = userdata;
	if (stream == 1 && c->len + len < sizeof(c->out)) {
		memcpy(c->out + c->len, data, len);
		c->len += len;
		c->out[c->len] = '\0';
	}
	return 0;
}

/* Runs "sh -c script" in sb; gives the exec's return code and, in out, its stdout. */
static inline int api_sh(space_sandbox *sb, const char *script, struct api_capture *out, int *ret_exit)
{
	const char *argv[] = { "sh", "-c", script, NULL };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = argv;
	eo.output = api_capture_output;
	eo.userdata = out;
	out->len = 0;
	out->out[0] = '\0';
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	int r = space_sandbox_exec(sb, &eo, &res);
	if (r == 0 && ret_exit)
		*ret_exit = res.exited ? res.exit_code : 128 + res.signal;
	return r;
}

/* Prints the completion line, with the pending count apart. */
static inline int api_summary(const char *name)
{
	if (pending_count)
		printf("%s: %d pending checks (issue 15; SPACE_API_TEST_ISSUE15=1 makes them count)\n", name,
		       pending_count);
	return check_summary(name);
}

/* PENDING_RC(expr, want, why): CHECK_RC that is PENDING (see above) until issue 15. */
#define PENDING_RC(expr, want, why)                                                                  \
	do {                                                                                         \
		int _got = SAFE_RC(expr);                                                            \
		if (_got != (want) && api_issue15())                                                 \
			fprintf(stderr, "%s:%d: %s returned %d%s, wanted %d\n", __FILE__, __LINE__, #expr, \
				_got, _got == API_CRASHED ? " (crashed)" : "", (want));                \
		PENDING(_got == (want), why);                                                        \
	} while (0)
