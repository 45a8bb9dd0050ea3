/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SYNC step of space-snapd, privilege-separated the OpenSSH way (contract in autosnap.h).
 *
 * space-snapd keeps root for what needs it: btrfs snapshots, the store, the cgroup freezer. The agent's
 * replies, though, are sandbox-made bytes, so root here only connects the agent's transport
 * (agent_connect: a unix connect, or for a VM the CONNECT line that space-vmm answers) and hands the
 * descriptor to a forked child, which
 *   - keeps only that descriptor (fd 3) and the result pipe (fd 4),
 *   - drops to a machine-wide uid slot of its own ("snapd-sync", freed once the child is reaped),
 *     with no supplementary groups, every capability set and the bounding set empty,
 *   - sets no_new_privs and not-dumpable,
 *   - loads the seccomp allowlist below (anything else kills it),
 *   - speaks HELLO + SYNC over the descriptor (agent_sync through the address "fd:3"),
 *   - writes one fixed-size result on the pipe and exits.
 * Root reads those 8 bytes and the child's exit status, nothing else. The agent's error text stays in the
 * child: root reports only the errno, range-checked.
 *
 * autosnap_take() runs in space-snapd, which is single-threaded, so the child may allocate and use libc
 * freely before it confines itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/uids.h"
#include "proto/agent_client.h"
#include "util/cleanup.h"
#include "util/confine.h"
#include "util/util.h"

#define SYNC_UID_KIND "snapd-sync"
#define SOCK_FD 3
#define RESULT_FD 4
/* The "fd:3" address makes the client work on F_DUPFD_CLOEXEC of fd 3: the lowest free number >= 3,
 * which is 5 since only 0..4 are open in the child. */
#define CONN_FD 5
/* A guest flushing a large page cache can take a while; a sandbox that never answers cannot hold the
 * helper forever. */
#define SYNC_TIMEOUT_MS (300 * 1000)

enum { STAGE_AGENT = 1, STAGE_CONFINE = 2 };

/* What the child writes on the pipe: which step ended it and its 0 or -errno. */
struct sync_result {
	int32_t stage;
	int32_t code;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)

/* The allowlist: syscall, the descriptor its first argument must be (-1: any or none), why. */
static const struct sync_rule {
	int nr;
	int fd;
	const char *why;
} sync_rules[] = {
	{ SCMP_SYS(fcntl), SOCK_FD, "the \"fd:3\" address duplicates the connection (F_DUPFD_CLOEXEC only)" },
	{ SCMP_SYS(sendto), CONN_FD, "HELLO and SYNC to the agent (send)" },
	{ SCMP_SYS(recvfrom), CONN_FD, "the agent's HELLO and reply (recv)" },
	{ SCMP_SYS(close), CONN_FD, "the client closes its duplicate when done" },
	{ SCMP_SYS(write), RESULT_FD, "the one result, on the pipe to root" },
	{ SCMP_SYS(brk), -1, "malloc: the client's frame buffers" },
	{ SCMP_SYS(mmap), -1, "malloc of large buffers (never executable)" },
	{ SCMP_SYS(munmap), -1, "free of large buffers" },
	{ SCMP_SYS(mremap), -1, "realloc of a large buffer: the receive buffer grows to a frame's size" },
	{ SCMP_SYS(clock_gettime), -1, "libc time without the vDSO" },
	{ SCMP_SYS(exit_group), -1, "the end" },
};

static int sync_filter_build(scmp_filter_ctx *ret)
{
	_cleanup_(seccomp_releasep) scmp_filter_ctx f = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < ARRAY_SIZE(sync_rules); i++) {
		const struct sync_rule *s = &sync_rules[i];
		int r;
		if (s->nr == SCMP_SYS(fcntl))
			r = seccomp_rule_add(f, SCMP_ACT_ALLOW, s->nr, 2, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)s->fd),
					     SCMP_A1(SCMP_CMP_EQ, F_DUPFD_CLOEXEC));
		else if (s->nr == SCMP_SYS(mmap))
			r = seccomp_rule_add(f, SCMP_ACT_ALLOW, s->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
		else if (s->fd >= 0)
			r = seccomp_rule_add(f, SCMP_ACT_ALLOW, s->nr, 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)s->fd));
		else
			r = seccomp_rule_add(f, SCMP_ACT_ALLOW, s->nr, 0);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(f);
	return 0;
}

int autosnap_sync_rule_count(void)
{
	scmp_filter_ctx f = NULL;
	int r = sync_filter_build(&f);
	if (r < 0)
		return r;
	seccomp_release(f);
	return (int)ARRAY_SIZE(sync_rules);
}

/* Everything of root goes, for good; checked rather than trusted. */
static int sync_drop_privileges(uint32_t uid)
{
	struct rlimit none = { 0, 0 };
	if (setrlimit(RLIMIT_CORE, &none) < 0)
		return -errno;
	return confine_drop_to_uid(uid, NULL, 0);
}

static _Noreturn void sync_child_finish(int32_t stage, int32_t code)
{
	struct sync_result res = { stage, code };
	(void)util_write_all(RESULT_FD, &res, sizeof(res));
	/* Straight to the kernel: no atexit handler of the parent's runs here. */
	syscall(SYS_exit_group, 0);
	__builtin_unreachable();
}

static _Noreturn void sync_child(int sock, int result, uint32_t uid)
{
	/* fd 3 the connection, fd 4 the pipe, nothing else of snapd's (store, pool, log). Copies above both
	 * first, so that neither dup2 below overwrites the other's source. */
	int a = fcntl(sock, F_DUPFD, 100), b = fcntl(result, F_DUPFD, 100);
	if (a < 0 || b < 0 || dup2(a, SOCK_FD) < 0 || dup2(b, RESULT_FD) < 0)
		syscall(SYS_exit_group, 1);
	syscall(SYS_close_range, 0U, 2U, 0);
	if (syscall(SYS_close_range, 5U, ~0U, 0) < 0)
		sync_child_finish(STAGE_CONFINE, -errno);
	scmp_filter_ctx f = NULL;
	int r = sync_filter_build(&f); /* allocates: before the filter is in place */
	if (r < 0)
		sync_child_finish(STAGE_CONFINE, r);
	if ((r = sync_drop_privileges(uid)) < 0)
		sync_child_finish(STAGE_CONFINE, r);
	if ((r = seccomp_load(f)) < 0)
		sync_child_finish(STAGE_CONFINE, r);
	/* Only the allowlist from here on; the filter's memory stays (freeing it is one more call to allow). */
	r = agent_sync("fd:3", NULL);
	sync_child_finish(STAGE_AGENT, r);
}

static int sync_err(struct agent_error *err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sync_err(struct agent_error *err, int r, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		err->code = -r;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return r;
}

static int sync_confined(space_ctx *ctx, const char *sandbox_id, const char *addr, struct agent_error *err)
{
	uint32_t uid;
	int r = uids_helper_acquire(ctx, sandbox_id, SYNC_UID_KIND, &uid);
	if (r < 0)
		return sync_err(err, r, "%s", ctx->last_error);
	_cleanup_close_ int sock = -1, rd = -1;
	int pfd[2] = { -1, -1 };
	pid_t pid = -1;
	if ((r = agent_connect(addr, &sock, err)) < 0)
		goto out;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		r = sync_err(err, -errno, "pipe: %s", strerror(errno));
		goto out;
	}
	rd = pfd[0];
	/* A confined child that never execs and ends with this call: a plain fork, not util_spawn. */
	pid = fork();
	if (pid == 0)
		sync_child(sock, pfd[1], uid);
	close(pfd[1]);
	if (pid < 0) {
		r = sync_err(err, -errno, "fork: %s", strerror(errno));
		goto out;
	}
	close(TAKE_FD(sock)); /* the child's now: our copy would keep the connection open if it died */
	struct sync_result res = { 0 };
	r = util_read_exact_timeout(rd, &res, sizeof(res), SYNC_TIMEOUT_MS);
	if (r < 0)
		kill(pid, SIGKILL); /* no result: the wait below must not hang on it (an exited child ignores it) */
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r == -ETIMEDOUT) {
		r = sync_err(err, r, "the agent did not answer within %d s", SYNC_TIMEOUT_MS / 1000);
	} else if (WIFSIGNALED(status)) {
		r = sync_err(err, -EPROTO, "the confined sync process was killed by signal %d%s", WTERMSIG(status),
			     WTERMSIG(status) == SIGSYS ? " (a system call outside its seccomp allowlist)" : "");
	} else if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || res.code > 0 || res.code < -4095 ||
		   (res.stage != STAGE_AGENT && res.stage != STAGE_CONFINE)) {
		r = sync_err(err, -EPROTO, "the confined sync process failed (exit status %d)",
			     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	} else if (res.stage == STAGE_CONFINE) {
		r = res.code < 0 ? res.code : -EPROTO; /* never a success: it did not sync */
		sync_err(err, r, "confining the sync process: %s", strerror(-r));
	} else if ((r = res.code) < 0) {
		/* The agent's own text stayed in the child: only the errno crossed. */
		sync_err(err, r, "the agent answered: %s", strerror(-r));
	}
out:
	uids_helper_release(ctx, sandbox_id, SYNC_UID_KIND, uid);
	return r;
}

int autosnap_sync(space_ctx *ctx, const char *sandbox_id, const char *addr, struct agent_error *err)
{
	if (err)
		*err = (struct agent_error){ 0 };
	if (!ctx->sync_confined)
		return agent_sync(addr, err);
	return sync_confined(ctx, sandbox_id, addr, err);
}
