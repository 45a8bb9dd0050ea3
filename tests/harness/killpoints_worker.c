/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lifecycle workload of the kill -9 harness (killpoints): through the public API only, on the state
 * directory $SPACE_STATE_DIR, forever (until SIGTERM, after the current operation): create, exec,
 * checkpoint, rollback, fork and destroy jail sandboxes of template $SPACE_API_TEMPLATE, picking targets
 * among every sandbox of the state directory (the other worker's too), at most 5 sandboxes and 6
 * checkpoints. Each operation is journalled to $KILLPOINTS_JOURNAL before it starts and when it ends:
 *   "<worker>.<start> <op> begin <target>"  and  "<worker>.<start> <op> end <target> rc=<rc> [<new id>...]"
 * (one write(2) per line on an O_APPEND descriptor), so the checker knows what was confirmed.
 * Failures caused by the other worker (a target destroyed meanwhile) are expected: they are journalled,
 * never fatal. Random choices come from $KILLPOINTS_SEED. With $KILLPOINTS_HELPERS=1 (the helper kills),
 * about half the sandboxes created get an egress policy ("{}": a gateway runs) and half a snapshot policy
 * (every 2 s, 2 kept: a snapshot helper runs), so each kind of helper process is there to be killed.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>

#include "../api/apitest.h"

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t rng;
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int journal_fd = -1;
static char who[32];

static void journal(const char *fmt, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "%s ", who);
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (journal_fd >= 0 && write(journal_fd, line, (size_t)n) != n)
		_exit(3);
}

static int op_exec(space_ctx *ctx, const char *id)
{
	space_sandbox *sb = NULL;
	journal("exec begin %s", id);
	int r = space_sandbox_open(ctx, id, &sb);
	if (r == 0) {
		struct api_capture out;
		int code = -1;
		r = api_sh(sb, "echo ok > /tmp/kp; cat /tmp/kp", &out, &code);
		if (r == 0 && (code != 0 || strcmp(out.out, "ok\n")))
			r = -EIO;
		space_sandbox_free(sb);
	}
	journal("exec end %s rc=%d", id, r);
	return r;
}

static bool with_helpers;

static void op_create(space_ctx *ctx)
{
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "jail";
	unsigned h = with_helpers ? (unsigned)(rnd() % 4) : 0;
	if (h & 1)
		so.network_policy = "{}";
	if (h & 2) {
		so.snapshot_every_s = 2;
		so.snapshot_keep = 2;
	}
	space_sandbox *sb = NULL;
	journal("create begin -");
	int r = space_sandbox_create(ctx, &so, &sb);
	if (r == 0) {
		journal("create end %s rc=0", space_sandbox_id(sb));
		space_sandbox_free(sb);
	} else {
		journal("create end - rc=%d", r);
	}
}

static void op_checkpoint(space_ctx *ctx, const char *id)
{
	space_sandbox *sb = NULL;
	char cp[SPACE_CHECKPOINT_ID_MAX] = "-";
	journal("checkpoint begin %s", id);
	int r = space_sandbox_open(ctx, id, &sb);
	if (r == 0) {
		r = space_checkpoint_create(sb, NULL, cp);
		space_sandbox_free(sb);
	}
	journal("checkpoint end %s rc=%d %s", id, r, r == 0 ? cp : "-");
}

static void op_rollback(space_ctx *ctx, const char *id)
{
	struct space_checkpoint_info **cl = NULL;
	size_t n = 0;
	if (space_checkpoint_list(ctx, id, &cl, &n) < 0 || n == 0) {
		space_checkpoint_info_list_free(cl);
		op_exec(ctx, id);
		return;
	}
	char cp[SPACE_CHECKPOINT_ID_MAX];
	snprintf(cp, sizeof(cp), "%s", cl[rnd() % n]->id);
	space_checkpoint_info_list_free(cl);
	space_sandbox *sb = NULL;
	journal("rollback begin %s %s", id, cp);
	int r = space_sandbox_open(ctx, id, &sb);
	if (r == 0) {
		r = space_sandbox_rollback(sb, cp);
		space_sandbox_free(sb);
	}
	journal("rollback end %s rc=%d %s", id, r, cp);
}

static void op_fork(space_ctx *ctx)
{
	struct space_checkpoint_info **cl = NULL;
	size_t n = 0;
	if (space_checkpoint_list(ctx, NULL, &cl, &n) < 0 || n == 0) {
		space_checkpoint_info_list_free(cl);
		op_create(ctx);
		return;
	}
	char cp[SPACE_CHECKPOINT_ID_MAX];
	snprintf(cp, sizeof(cp), "%s", cl[rnd() % n]->id);
	space_checkpoint_info_list_free(cl);
	space_sandbox *sb[1] = { NULL };
	journal("fork begin %s", cp);
	int r = space_checkpoint_fork(ctx, cp, NULL, sb); /* NULL: the defaults, one sandbox */
	if (r == 0) {
		journal("fork end %s rc=0 %s", cp, space_sandbox_id(sb[0]));
		space_sandbox_free(sb[0]);
	} else {
		journal("fork end %s rc=%d", cp, r);
	}
}

/* Destroys through the handle when it opens (a running sandbox), else removes by id (failed, half made). */
static void op_destroy(space_ctx *ctx, const char *id)
{
	space_sandbox *sb = NULL;
	journal("destroy begin %s", id);
	int r = space_sandbox_open(ctx, id, &sb);
	if (r == 0) {
		r = space_sandbox_destroy(sb);
		space_sandbox_free(sb);
	} else {
		r = space_sandbox_remove(ctx, id);
	}
	journal("destroy end %s rc=%d", id, r);
}

static void op_trim_checkpoints(space_ctx *ctx)
{
	struct space_checkpoint_info **cl = NULL;
	size_t n = 0;
	if (space_checkpoint_list(ctx, NULL, &cl, &n) == 0 && n > 6) {
		char cp[SPACE_CHECKPOINT_ID_MAX];
		snprintf(cp, sizeof(cp), "%s", cl[rnd() % n]->id);
		journal("cpremove begin %s", cp);
		int r = space_checkpoint_remove(ctx, cp);
		journal("cpremove end %s rc=%d", cp, r);
	}
	space_checkpoint_info_list_free(cl);
}

int main(void)
{
	const char *s = getenv("KILLPOINTS_SEED"), *j = getenv("KILLPOINTS_JOURNAL");
	rng = s ? strtoull(s, NULL, 0) : (uint64_t)getpid();
	snprintf(who, sizeof(who), "%s.%s", getenv("KILLPOINTS_WORKER") ?: "0", getenv("KILLPOINTS_START") ?: "0");
	if (j)
		journal_fd = open(j, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	with_helpers = getenv("KILLPOINTS_HELPERS") && !strcmp(getenv("KILLPOINTS_HELPERS"), "1");
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	space_ctx *ctx = api_ctx(NULL);
	while (!stop) {
		struct space_sandbox_info **l = NULL;
		size_t n = 0;
		if (space_sandbox_list(ctx, &l, &n) < 0) {
			journal("list end - rc=-1 %s", space_ctx_last_error(ctx));
			usleep(100000);
			continue;
		}
		char id[32] = "";
		if (n)
			snprintf(id, sizeof(id), "%s", l[rnd() % n]->id);
		bool target_failed = n && l[0]->status != SPACE_SANDBOX_RUNNING; /* checked below by id */
		for (size_t i = 0; i < n; i++)
			if (!strcmp(l[i]->id, id))
				target_failed = l[i]->status != SPACE_SANDBOX_RUNNING;
		space_sandbox_info_list_free(l);
		unsigned pick = (unsigned)(rnd() % 100);
		if (n < 2 || (pick < 20 && n < 5))
			op_create(ctx);
		else if (target_failed || n >= 5 || pick >= 88)
			op_destroy(ctx, id);
		else if (pick < 40)
			op_exec(ctx, id);
		else if (pick < 58)
			op_checkpoint(ctx, id);
		else if (pick < 72)
			op_rollback(ctx, id);
		else if (pick < 80)
			op_fork(ctx);
		else
			op_trim_checkpoints(ctx);
	}
	space_ctx_free(ctx);
	return 0;
}
