/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/jail_run: latency of one disposable command in a libspace jail sandbox — create, exec(`true`),
 * destroy — through the public API, side by side with bubblewrap running `true` in a comparable namespace
 * set (user, pid, net, ipc, uts, cgroup, mount) over the same busybox tree. The runs of the two alternate,
 * so background load hits both alike. Reports median, p99 and min of each, libspace's three parts
 * separately, and the ratio libspace/bwrap. Never fails on time: exit 0 when it measured, 77 (with the
 * reason) when it cannot run here, 1 when something broke.
 *
 * usage: jail_run [--runs N] [--bwrap PATH]      (needs root, loop devices, btrfs, user namespaces;
 *                                                 SPACE_AGENT_PATH names the space-agent binary)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "space.h"
#include "util/util.h"

#define SKIP 77

extern char **environ;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Samples of one series, in milliseconds. */
struct series {
	const char *name;
	double *ms;
	size_t n;
};

static int cmp_ms(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples. */
static double rank(const struct series *s, double pct)
{
	size_t i = (size_t)(pct / 100.0 * (double)s->n + 0.999999);
	if (i < 1)
		i = 1;
	if (i > s->n)
		i = s->n;
	return s->ms[i - 1];
}

static void print_series(struct series *s)
{
	qsort(s->ms, s->n, sizeof(double), cmp_ms);
	printf("  %-28s %9.2f %9.2f %9.2f %9.2f\n", s->name, rank(s, 50), rank(s, 99), s->ms[0], s->ms[s->n - 1]);
}

/* Why this host cannot run the benchmark, or NULL. */
static const char *cannot_run(const char *bwrap)
{
	static char why[512];
	if (geteuid() != 0)
		return "needs root (loop-mounted btrfs pool, jail namespaces)";
	const char *agent = getenv("SPACE_AGENT_PATH");
	if (!agent || access(agent, X_OK) < 0) {
		snprintf(why, sizeof(why), "space-agent not found (SPACE_AGENT_PATH=%s)", agent ? agent : "");
		return why;
	}
	if (access("/bin/busybox", X_OK) < 0)
		return "no /bin/busybox (install busybox-static)";
	if (access(bwrap, X_OK) < 0) {
		snprintf(why, sizeof(why), "peer missing: %s (install bubblewrap)", bwrap);
		return why;
	}
	pid_t pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0);
	int status = 1;
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return "cannot create user/mount/pid/net/ipc/uts namespaces here";
	return NULL;
}

/* One bwrap run of `true`; its wall time from spawn to reaped exit. */
static int bwrap_once(const char *bwrap, const char *tree, double *ret_ms)
{
	const char *argv[] = { bwrap,		 "--unshare-user", "--unshare-pid", "--unshare-net",
			       "--unshare-ipc",	 "--unshare-uts",  "--unshare-cgroup", "--ro-bind",
			       tree,		 "/",		   "--proc",	      "/proc",
			       "--dev",		 "/dev",	   "true",	      NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	uint64_t t0 = util_now_ns();
	pid_t pid;
	int r = posix_spawn(&pid, bwrap, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r)
		return -r;
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	*ret_ms = (double)(util_now_ns() - t0) / 1e6;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "jail_run: bwrap exited with status %#x\n", status);
		return -EPROTO;
	}
	return 0;
}

/* One libspace run: create, exec `true`, destroy; the three parts' wall times in ms. */
static int space_once(space_ctx *ctx, double part[3])
{
	static const char *const argv[] = { "true", NULL };
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	space_sandbox *sb = NULL;
	so.template_name = "bench";
	so.isolation = "jail";
	eo.argv = argv;

	uint64_t t0 = util_now_ns();
	int r = space_sandbox_create(ctx, &so, &sb);
	if (r < 0) {
		fprintf(stderr, "jail_run: create: %s (%s)\n", space_strerror(r), space_ctx_last_error(ctx));
		return r;
	}
	uint64_t t1 = util_now_ns();
	r = space_sandbox_exec(sb, &eo, &res);
	uint64_t t2 = util_now_ns();
	if (r < 0)
		fprintf(stderr, "jail_run: exec: %s (%s)\n", space_strerror(r), space_ctx_last_error(ctx));
	else if (!res.exited || res.exit_code != 0) {
		fprintf(stderr, "jail_run: `true` ended with exit %d signal %d\n", res.exit_code, res.signal);
		r = -EPROTO;
	}
	int rd = space_sandbox_destroy(sb);
	uint64_t t3 = util_now_ns();
	space_sandbox_free(sb);
	if (rd < 0) {
		fprintf(stderr, "jail_run: destroy: %s (%s)\n", space_strerror(rd), space_ctx_last_error(ctx));
		return rd;
	}
	part[0] = (double)(t1 - t0) / 1e6;
	part[1] = (double)(t2 - t1) / 1e6;
	part[2] = (double)(t3 - t2) / 1e6;
	return r;
}

/* Template, pool and everything under dir go; returns 0 when nothing is left behind. */
static int teardown(space_ctx *ctx, bool imported, bool inited, const char *dir, const char *pool)
{
	int r = 0;
	if (imported && space_template_remove(ctx, "bench", true) < 0) {
		fprintf(stderr, "jail_run: remove template: %s\n", space_ctx_last_error(ctx));
		r = -1;
	}
	if (inited && space_pool_unmount(ctx) < 0) {
		fprintf(stderr, "jail_run: unmount pool: %s\n", space_ctx_last_error(ctx));
		r = -1;
	}
	space_ctx_free(ctx);
	/* Never recurse into a pool that is still mounted (say, after a half-done init). */
	if (umount2(pool, 0) < 0 && errno != EINVAL && errno != ENOENT) {
		fprintf(stderr, "jail_run: %s still mounted (%m): %s left in place\n", pool, dir);
		return -1;
	}
	if (util_rm_rf(dir) < 0)
		r = -1;
	return r;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runs", required_argument, NULL, 'n' },
		{ "bwrap", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t runs = 100;
	const char *bwrap = "/usr/bin/bwrap";
	int c;
	while ((c = getopt_long(argc, argv, "n:b:h", longopts, NULL)) != -1) {
		if (c == 'n' && util_parse_uint(optarg, 1, 100000, &runs) == 0)
			continue;
		if (c == 'b') {
			bwrap = optarg;
			continue;
		}
		fprintf(stderr, "usage: jail_run [--runs N] [--bwrap PATH]\n");
		return c == 'h' ? 0 : 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *why = cannot_run(bwrap);
	if (why) {
		printf("jail_run: skipped: %s\n", why);
		return SKIP;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	char dir[] = "/tmp/space-bench-jail-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("jail_run: mkdtemp");
		return 1;
	}
	char state[64], tree[64], pool[80];
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	snprintf(pool, sizeof(pool), "%s/pool", state); /* where space_init mounts a loop pool */
	int rc = 1, r;
	bool imported = false, inited = false;
	space_ctx *ctx = NULL;
	double *buf = calloc(5 * runs, sizeof(double));
	struct series total = { "libspace jail total", buf, 0 }, part[3] = {
		{ "  create", buf + runs, 0 },
		{ "  exec(true)", buf + 2 * runs, 0 },
		{ "  destroy", buf + 3 * runs, 0 },
	};
	struct series peer = { "bwrap true", buf + 4 * runs, 0 };
	if (!buf)
		goto out;
	if ((r = bu_busybox_tree(tree)) < 0) {
		fprintf(stderr, "jail_run: busybox tree: %s\n", strerror(-r));
		goto out;
	}

	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = state;
	if ((r = space_ctx_new(&co, &ctx)) < 0) {
		fprintf(stderr, "jail_run: context: %s\n", space_strerror(r));
		goto out;
	}
	struct space_init_options io = SPACE_INIT_OPTIONS_INIT;
	io.loop_pool_size = 1ull << 30;
	io.isolation = "jail";
	if ((r = space_init(ctx, &io)) < 0) {
		printf("jail_run: skipped: no loop-mounted btrfs pool here: %s\n", space_ctx_last_error(ctx));
		rc = SKIP;
		goto out;
	}
	inited = true;
	struct space_template_import_options ti = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	ti.name = "bench";
	ti.rootfs = tree;
	if ((r = space_template_import(ctx, &ti)) < 0) {
		fprintf(stderr, "jail_run: import: %s (%s)\n", space_strerror(r), space_ctx_last_error(ctx));
		goto out;
	}
	imported = true;

	/* One warm-up of each (page cache, first cgroup creation), then alternate. */
	double p3[3], ms;
	if ((r = space_once(ctx, p3)) < 0) {
		if (r == -ENODEV) {
			printf("jail_run: skipped: jail isolation not usable here: %s\n", space_ctx_last_error(ctx));
			rc = SKIP;
		}
		goto out;
	}
	if (bwrap_once(bwrap, tree, &ms) < 0)
		goto out;
	double load = 0;
	(void)getloadavg(&load, 1);
	printf("jail_run: %llu runs each of create -> exec(true) -> destroy, libspace and bwrap alternating\n"
	       "          (%ld CPUs, load average %.2f at start)\n",
	       (unsigned long long)runs, sysconf(_SC_NPROCESSORS_ONLN), load);
	for (uint64_t i = 0; i < runs && !interrupted; i++) {
		if (space_once(ctx, p3) < 0)
			goto out;
		total.ms[total.n++] = p3[0] + p3[1] + p3[2];
		for (int k = 0; k < 3; k++)
			part[k].ms[part[k].n++] = p3[k];
		if (bwrap_once(bwrap, tree, &ms) < 0)
			goto out;
		peer.ms[peer.n++] = ms;
	}
	if (interrupted || total.n == 0) {
		fprintf(stderr, "jail_run: interrupted\n");
		goto out;
	}

	printf("  %-28s %9s %9s %9s %9s   (ms)\n", "", "median", "p99", "min", "max");
	print_series(&total);
	for (int k = 0; k < 3; k++)
		print_series(&part[k]);
	print_series(&peer);
	printf("  ratio libspace/bwrap: median %.2fx, p99 %.2fx\n", rank(&total, 50) / rank(&peer, 50),
	       rank(&total, 99) / rank(&peer, 99));
	rc = 0;
out:
	if (teardown(ctx, imported, inited, dir, pool) < 0 && rc == 0)
		rc = 1;
	free(buf);
	return rc;
}
