/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-snapd: takes a sandbox's periodic file snapshots (src/core/autosnap.c, space.h "Periodic file
 * snapshots"). One per sandbox with a policy, spawned by the library:
 *
 *   space-snapd --state DIR --sandbox ID --every SECONDS --keep K     (fd 3: status pipe)
 *
 * It forks once so that it is nobody's child, reports "ready <pid>" on fd 3 and then, on absolute
 * deadlines every SECONDS apart (a slow snapshot does not shift the ones after it; missed ones are
 * skipped), takes an automatic checkpoint and prunes the oldest beyond K. It exits when the sandbox is
 * no longer running or paused, was restarted (its process changed: the restart starts a new helper), or
 * names another helper in its row; and on SIGTERM, which it only looks at between snapshots so that a
 * snapshot is never cut off half way.
 *
 * It keeps root for the btrfs snapshots, the store and the cgroup freezer, but never reads a byte the
 * sandbox made: the one conversation with the sandbox's agent (SYNC before each snapshot) happens in a
 * short-lived child that holds a uid slot of its own, no capabilities, no_new_privs and a seccomp allowlist,
 * and that reports only an errno (src/core/autosnap_sync.c). This process itself has no seccomp filter yet:
 * SQLite, btrfs ioctls, cgroup files and the fork of that child make its allowlist a task of its own.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/sandbox.h"
#include "util/util.h"

struct snapd {
	space_ctx *ctx;
	const char *id;
	uint32_t every_s, keep;
	int32_t sandbox_pid;
	uint64_t sandbox_pid_start;
};

static void log_line(int level, const char *msg, void *ud)
{
	(void)ud;
	time_t now = time(NULL);
	struct tm tm;
	char ts[32];
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	fprintf(stderr, "%s space-snapd[%d] %s: %s\n", ts, (int)getpid(), level <= SPACE_LOG_WARNING ? "warning" : "info",
		msg);
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits until the monotonic deadline; returns the signal that ended the wait early, or 0. */
static int wait_until(const sigset_t *sigs, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ns();
		if (left <= 0)
			return 0;
		struct timespec ts = { .tv_sec = left / 1000000000, .tv_nsec = left % 1000000000 };
		int sig = sigtimedwait(sigs, NULL, &ts);
		if (sig > 0)
			return sig;
		if (errno != EAGAIN && errno != EINTR)
			return 0;
	}
}

/* 1 to take a snapshot now, 0 to skip this one (paused), -1 to exit; says why on exits. */
static int still_wanted(struct snapd *d)
{
	struct sandbox_row row;
	int r = sandbox_row_load(d->ctx, d->id, &row);
	if (r < 0) {
		fprintf(stderr, "space-snapd: sandbox %s: %s; exiting\n", d->id, space_ctx_last_error(d->ctx));
		return -1;
	}
	struct space_snapshot_policy p = { 0 };
	(void)autosnap_policy_load(d->ctx, d->id, &p, NULL); /* the recorded helper (0: not yet) */
	const char *why = NULL;
	if (row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED)
		why = space_sandbox_status_name(row.info.status);
	else if (row.info.pid != d->sandbox_pid || row.pid_start != d->sandbox_pid_start)
		why = "restarted";
	else if (!core_process_alive(row.info.pid, row.pid_start))
		why = "dead";
	else if (p.pid != 0 && p.pid != (int32_t)getpid())
		why = "served by another helper";
	/* pid 0: the spawner has not recorded this helper yet. */
	int ret = why ? -1 : row.info.status == SPACE_SANDBOX_PAUSED || p.pid == 0 ? 0 : 1;
	if (why)
		fprintf(stderr, "space-snapd: sandbox %s is %s; exiting\n", d->id, why);
	sandbox_row_clear(&row);
	return ret;
}

static int run(struct snapd *d, const sigset_t *sigs)
{
	struct sandbox_row row;
	if (sandbox_row_load(d->ctx, d->id, &row) < 0) {
		fprintf(stderr, "space-snapd: %s\n", space_ctx_last_error(d->ctx));
		return 1;
	}
	d->sandbox_pid = row.info.pid;
	d->sandbox_pid_start = row.pid_start;
	sandbox_row_clear(&row);
	const int64_t period = (int64_t)d->every_s * 1000000000;
	int64_t deadline = mono_ns() + period;
	for (;;) {
		int sig = wait_until(sigs, deadline);
		if (sig) {
			fprintf(stderr, "space-snapd: sandbox %s: %s; exiting\n", d->id, strsignal(sig));
			return 0;
		}
		int64_t now = mono_ns();
		while (deadline <= now)
			deadline += period;
		int w = still_wanted(d);
		if (w < 0)
			return 0;
		if (w == 0)
			continue;
		char cid[SPACE_CHECKPOINT_ID_MAX];
		int r = autosnap_take(d->ctx, d->id, d->keep, cid);
		if (r < 0)
			fprintf(stderr, "space-snapd: sandbox %s: snapshot: %s\n", d->id, space_ctx_last_error(d->ctx));
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: space-snapd --state DIR --sandbox ID --every SECONDS --keep K (status on fd 3)\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *state = NULL;
	struct snapd d = { 0 };
	/* For `space doctor --verbose`: the process that talks to the sandbox is the confined sync child; the
	 * daemon itself stays root (no filter) but reads nothing the sandbox made. */
	if (argc == 2 && !strcmp(argv[1], "--describe-sandbox")) {
		int n = autosnap_sync_rule_count();
		if (n < 0) {
			fprintf(stderr, "space-snapd: seccomp filter: %s\n", strerror(-n));
			return 1;
		}
		printf("{\"helper\":\"space-snapd\",\"uid\":\"own\",\"capabilities\":\"none\",\"no_new_privs\":true,"
		       "\"dumpable\":false,\"seccomp\":{\"sync\":%d},\"default_action\":\"kill process\","
		       "\"note\":\"the agent conversation runs in a child with its own uid, no capabilities and the "
		       "rules above; the daemon that snapshots subvolumes and writes the store stays root without a "
		       "filter and reads only the child's errno\"}\n",
		       n);
		return 0;
	}
	for (int i = 1; i + 1 < argc; i += 2) {
		uint64_t v;
		if (!strcmp(argv[i], "--state"))
			state = argv[i + 1];
		else if (!strcmp(argv[i], "--sandbox"))
			d.id = argv[i + 1];
		else if (!strcmp(argv[i], "--every") && util_parse_uint(argv[i + 1], 1, AUTOSNAP_EVERY_MAX, &v) == 0)
			d.every_s = (uint32_t)v;
		else if (!strcmp(argv[i], "--keep") && util_parse_uint(argv[i + 1], 1, AUTOSNAP_KEEP_MAX, &v) == 0)
			d.keep = (uint32_t)v;
		else
			return usage();
	}
	if (!state || !d.id || !d.every_s || !d.keep || argc % 2 == 0)
		return usage();

	/* Signals that end it are only ever received in wait_until(), between snapshots. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* Nothing of the spawner's but the status pipe: no socket or file of it stays open here. */
	syscall(SYS_close_range, 4U, ~0U, 0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("space-snapd: fork");
		return 1;
	}
	if (pid > 0)
		_exit(0); /* the spawner reaps this one; the child is reparented */
	dprintf(3, "ready %d\n", (int)getpid());
	close(3);

	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = state;
	o.log = log_line;
	space_ctx *ctx;
	int r = space_ctx_new(&o, &ctx);
	if (r < 0) {
		fprintf(stderr, "space-snapd: context: %s\n", space_strerror(r));
		return 1;
	}
	d.ctx = ctx;
	ctx->sync_confined = true; /* never parse the agent's replies as root */
	fprintf(stderr, "space-snapd: sandbox %s: a snapshot every %us, keeping %u\n", d.id, d.every_s, d.keep);
	int rc = run(&d, &sigs);
	space_ctx_free(ctx);
	return rc;
}
