/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fault walk: every step of every lifecycle operation, crashed. For each operation (create, fork,
 * checkpoint, rollback, destroy, template import) and each step N of it, a child process sets the operation
 * up, then runs it with SPACE_TEST_FAULT="OP:N" (src/util/fault.h: test builds only), which kills the child
 * with SIGKILL exactly there. Then the invariant checker of the kill -9 harness (killpoints_check: reap,
 * no lost, doubled or mis-stated sandbox, everything removable, nothing leaked) must pass, and for template
 * import the same name must import again and be removable, with nothing left under the pool's .tmp. The walk
 * of an operation ends when it completes with no fault point left at step N; each operation must have at
 * least one. Public API only, on $SPACE_STATE_DIR with the busybox template $SPACE_API_TEMPLATE.
 * usage: faultwalk CHECKER JOURNAL TREE       (TREE: a rootfs directory to import as a template)
 * The last line is "faultwalk: N checks, F failed"; each step walked prints "faultwalk: OP:N crashed".
 */
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>

#include "../api/apitest.h"

static const char *checker, *journal_path, *tree;
static int journal_fd = -1;

static void journal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void journal(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1)
		return;
	line[n++] = '\n';
	if (journal_fd >= 0 && write(journal_fd, "fw.0 ", 5) == 5)
		(void)!write(journal_fd, line, (size_t)n);
}

static space_sandbox *setup_sandbox(space_ctx *ctx)
{
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "jail";
	space_sandbox *sb = NULL;
	if (space_sandbox_create(ctx, &so, &sb) < 0) {
		fprintf(stderr, "faultwalk: setup create: %s\n", space_ctx_last_error(ctx));
		_exit(3);
	}
	journal("create end %s rc=0", space_sandbox_id(sb));
	return sb;
}

static void setup_checkpoint(space_ctx *ctx, space_sandbox *sb, char cp[SPACE_CHECKPOINT_ID_MAX])
{
	if (space_checkpoint_create(sb, NULL, cp) < 0) {
		fprintf(stderr, "faultwalk: setup checkpoint: %s\n", space_ctx_last_error(ctx));
		_exit(3);
	}
}

/* In the child: set up, arm the fault point, run the operation. Exits 0 when it completed. */
static void run_op(const char *op, int step)
{
	space_ctx *ctx = api_ctx(NULL);
	char spec[64], cp[SPACE_CHECKPOINT_ID_MAX];
	snprintf(spec, sizeof(spec), "%s:%d", !strcmp(op, "fork") ? "create" : op, step);
	space_sandbox *sb = NULL, *forked[1] = { NULL };
	int r = -1;
	if (!strcmp(op, "create")) {
		setenv("SPACE_TEST_FAULT", spec, 1);
		journal("create begin -");
		struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
		so.template_name = api_template();
		so.isolation = "jail";
		if ((r = space_sandbox_create(ctx, &so, &sb)) == 0)
			journal("create end %s rc=0", space_sandbox_id(sb));
	} else if (!strcmp(op, "fork")) {
		sb = setup_sandbox(ctx);
		setup_checkpoint(ctx, sb, cp);
		setenv("SPACE_TEST_FAULT", spec, 1);
		journal("fork begin %s", cp);
		if ((r = space_checkpoint_fork(ctx, cp, NULL, forked)) == 0) /* NULL: one sandbox */
			journal("fork end %s rc=0 %s", cp, space_sandbox_id(forked[0]));
	} else if (!strcmp(op, "checkpoint")) {
		sb = setup_sandbox(ctx);
		setenv("SPACE_TEST_FAULT", spec, 1);
		journal("checkpoint begin %s", space_sandbox_id(sb));
		r = space_checkpoint_create(sb, NULL, cp);
	} else if (!strcmp(op, "rollback")) {
		sb = setup_sandbox(ctx);
		setup_checkpoint(ctx, sb, cp);
		setenv("SPACE_TEST_FAULT", spec, 1);
		journal("rollback begin %s %s", space_sandbox_id(sb), cp);
		r = space_sandbox_rollback(sb, cp);
	} else if (!strcmp(op, "destroy")) {
		sb = setup_sandbox(ctx);
		setenv("SPACE_TEST_FAULT", spec, 1);
		journal("destroy begin %s", space_sandbox_id(sb));
		r = space_sandbox_destroy(sb);
	} else if (!strcmp(op, "template-import")) {
		setenv("SPACE_TEST_FAULT", spec, 1);
		struct space_template_import_options o = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
		o.name = "faultwalk";
		o.rootfs = tree;
		r = space_template_import(ctx, &o);
	}
	if (r < 0)
		fprintf(stderr, "faultwalk: %s (no fault at step %d) failed: %s\n", op, step, space_ctx_last_error(ctx));
	_exit(r < 0 ? 1 : 0);
}

/* After a template import crashed: the name imports again (or is there, complete) and is removed, and the
 * pool's .tmp holds nothing of ours. In a child, like the operations. */
static void template_converges(void)
{
	space_ctx *ctx = api_ctx(NULL);
	struct space_template_import_options o = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	o.name = "faultwalk";
	o.rootfs = tree;
	int r = space_template_import(ctx, &o);
	if (r < 0 && r != -EEXIST) {
		fprintf(stderr, "faultwalk: re-import: %s\n", space_ctx_last_error(ctx));
		_exit(1);
	}
	if (space_template_remove(ctx, "faultwalk", false) < 0) {
		fprintf(stderr, "faultwalk: template remove: %s\n", space_ctx_last_error(ctx));
		_exit(1);
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s/pool/.tmp", space_ctx_state_dir(ctx));
	DIR *d = opendir(tmp);
	struct dirent *e;
	int left = 0;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			fprintf(stderr, "faultwalk: left under .tmp: %s\n", e->d_name);
			left++;
		}
	if (d)
		closedir(d);
	_exit(left ? 1 : 0);
}

static int wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

static int run_checker(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl(checker, checker, (char *)NULL);
		_exit(127);
	}
	int st = pid > 0 ? wait_child(pid) : -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: faultwalk CHECKER JOURNAL TREE\n");
		return 2;
	}
	checker = argv[1];
	journal_path = argv[2];
	tree = argv[3];
	setenv("KILLPOINTS_JOURNAL", journal_path, 1);
	static const char *const ops[] = { "create", "fork", "checkpoint", "rollback", "destroy", "template-import" };
	int walked_total = 0;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		int walked = 0;
		for (int step = 1; step <= 32; step++) {
			journal_fd = open(journal_path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0600);
			pid_t pid = fork();
			if (pid == 0)
				run_op(ops[i], step);
			int st = pid > 0 ? wait_child(pid) : -1;
			close(journal_fd);
			journal_fd = -1;
			bool crashed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
			bool completed = WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (crashed)
				printf("faultwalk: %s:%d crashed\n", ops[i], step);
			CHECK(crashed || completed);
			if (!crashed && !completed)
				printf("faultwalk: %s at step %d ended with status %#x\n", ops[i], step, st);
			fflush(stdout);
			int c = run_checker();
			if (c != 0)
				printf("faultwalk: the checker failed after %s:%d (exit %d)\n", ops[i], step, c);
			CHECK(c == 0);
			if (!strcmp(ops[i], "template-import")) {
				pid_t t = fork();
				if (t == 0)
					template_converges();
				int ts = t > 0 ? wait_child(t) : -1;
				if (!WIFEXITED(ts) || WEXITSTATUS(ts) != 0)
					printf("faultwalk: template import did not converge after step %d\n", step);
				CHECK(WIFEXITED(ts) && WEXITSTATUS(ts) == 0);
			}
			fflush(stdout);
			if (!crashed)
				break;
			walked++;
		}
		printf("faultwalk: %s: %d fault points walked\n", ops[i], walked);
		CHECK(walked >= 1);
		walked_total += walked;
	}
	printf("faultwalk: %d fault points in all\n", walked_total);
	return check_summary("faultwalk");
}
