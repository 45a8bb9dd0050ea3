/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/serve: N concurrent clients (default 200) against one `space serve`, each doing create (jail,
 * busybox template) -> exec(`true`) -> destroy over the native HTTP API, then the same N-way concurrent
 * work through the library directly (one space_ctx per thread), the peer that shows what HTTP costs.
 * Reports p50/p99/max latency per operation for both and their ratio, the errors (must be 0), and what
 * was left behind afterwards: sandboxes not destroyed, processes naming one of the sandboxes, mounts and
 * loop devices of the state directory beyond the pool's own. Never fails on time: exit 0 when it
 * measured cleanly, 77 (with the reason) when it cannot run here, 1 on an error or a leak.
 *
 * usage: serve [--clients N] [--rounds R]   (root, loop devices, btrfs, namespaces; SPACE_CLI and
 *                                            SPACE_SOURCE_DIR name the space binary and the source tree)
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "space.h"
#include "util/cleanup.h"
#include "util/util.h"

#define SKIP 77
#define CLIENTS_MAX 1000

enum op { OP_CREATE, OP_EXEC, OP_DESTROY, N_OPS };
static const char *const op_names[N_OPS] = { "create", "exec(true)", "destroy" };

struct bench {
	uint16_t port;
	char key[80];
	char state[128];
	unsigned rounds;
	bool http;                    /* this pass: HTTP (else the library) */
	pthread_mutex_t lock;
	pthread_barrier_t start;
	double *ms[N_OPS];            /* samples of the pass, clients * rounds each */
	size_t n[N_OPS];
	unsigned errors;
	char first_error[512];
	char (*ids)[32];              /* every sandbox created, for the leak checks */
	size_t n_ids, cap_ids;
};

static void record_error(struct bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_error(struct bench *b, const char *fmt, ...)
{
	pthread_mutex_lock(&b->lock);
	if (!b->errors++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(b->first_error, sizeof(b->first_error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&b->lock);
}

static void record(struct bench *b, enum op op, uint64_t t0, const char *id)
{
	double ms = (double)(util_now_ns() - t0) / 1e6;
	pthread_mutex_lock(&b->lock);
	b->ms[op][b->n[op]++] = ms;
	if (id && b->n_ids < b->cap_ids)
		snprintf(b->ids[b->n_ids++], sizeof(b->ids[0]), "%s", id);
	pthread_mutex_unlock(&b->lock);
}

/* HTTP through bench_util.h's bu_http. */
static int http(const struct bench *b, const char *method, const char *path, const char *body, char **ret_body)
{
	return bu_http(b->port, b->key, method, path, body, ret_body);
}

/* One client's round over HTTP: create, exec, destroy. */
static void http_round(struct bench *b)
{
	_cleanup_free_ char *reply = NULL;
	uint64_t t0 = util_now_ns();
	int st = http(b, "POST", "/v1/sandboxes", "{\"template\":\"tiny\",\"isolation\":\"jail\"}", &reply);
	cJSON *j = st == 201 ? cJSON_Parse(reply) : NULL;
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
	if (!id) {
		record_error(b, "create: %d %.300s", st, reply ? reply : "");
		cJSON_Delete(j);
		return;
	}
	record(b, OP_CREATE, t0, id);
	char path[96];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	free(reply);
	reply = NULL;
	t0 = util_now_ns();
	st = http(b, "POST", path, "{\"argv\":[\"true\"]}", &reply);
	if (st == 200 && reply && strstr(reply, "\"exit_code\":0"))
		record(b, OP_EXEC, t0, NULL);
	else
		record_error(b, "exec in %s: %d %.300s", id, st, reply ? reply : "");
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	free(reply);
	reply = NULL;
	t0 = util_now_ns();
	st = http(b, "DELETE", path, NULL, &reply);
	if (st == 204)
		record(b, OP_DESTROY, t0, NULL);
	else
		record_error(b, "destroy %s: %d %.300s", id, st, reply ? reply : "");
	cJSON_Delete(j);
}

/* The same round through the library. */
static void lib_round(struct bench *b, space_ctx *ctx)
{
	static const char *const argv[] = { "true", NULL };
	struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
	o.template_name = "tiny";
	o.isolation = "jail";
	space_sandbox *sb = NULL;
	uint64_t t0 = util_now_ns();
	int r = space_sandbox_create(ctx, &o, &sb);
	if (r < 0) {
		record_error(b, "create: %s", space_ctx_last_error(ctx));
		return;
	}
	record(b, OP_CREATE, t0, space_sandbox_id(sb));
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = argv;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	t0 = util_now_ns();
	r = space_sandbox_exec(sb, &eo, &res);
	if (r == 0 && res.exited && res.exit_code == 0)
		record(b, OP_EXEC, t0, NULL);
	else
		record_error(b, "exec: %s", r < 0 ? space_ctx_last_error(ctx) : "non-zero exit");
	t0 = util_now_ns();
	r = space_sandbox_destroy(sb);
	if (r == 0)
		record(b, OP_DESTROY, t0, NULL);
	else
		record_error(b, "destroy: %s", space_ctx_last_error(ctx));
	space_sandbox_free(sb);
}

static void *client(void *arg)
{
	struct bench *b = arg;
	space_ctx *ctx = NULL;
	if (!b->http) {
		struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
		co.state_dir = b->state;
		if (space_ctx_new(&co, &ctx) < 0)
			record_error(b, "context");
	}
	pthread_barrier_wait(&b->start);
	for (unsigned i = 0; i < b->rounds; i++) {
		if (b->http)
			http_round(b);
		else if (ctx)
			lib_round(b, ctx);
	}
	space_ctx_free(ctx);
	return NULL;
}

/* Runs one pass with n clients; false when threads could not start. */
static bool run_pass(struct bench *b, unsigned n, bool over_http)
{
	b->http = over_http;
	memset(b->n, 0, sizeof(b->n));
	pthread_t *t = calloc(n, sizeof(*t));
	if (!t || pthread_barrier_init(&b->start, NULL, n) != 0) {
		free(t);
		return false;
	}
	unsigned started = 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (; started < n; started++)
		if (pthread_create(&t[started], &attr, client, b) != 0)
			break;
	pthread_attr_destroy(&attr);
	if (started < n) {
		/* The barrier waits for n: a pass that cannot start all its clients cannot run at all. */
		fprintf(stderr, "serve: only %u of %u client threads started\n", started, n);
		_exit(1);
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&b->start);
	free(t);
	return true;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* p50, p99 (nearest rank) and max of v (sorted in place); zeros when empty. */
static void summary(double *v, size_t n, double out[3])
{
	out[0] = out[1] = out[2] = 0;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	size_t i50 = (n * 50 + 99) / 100, i99 = (n * 99 + 99) / 100;
	out[0] = v[i50 ? i50 - 1 : 0];
	out[1] = v[i99 ? i99 - 1 : 0];
	out[2] = v[n - 1];
}

/* --- the server and the state directory --- */

/* How many lines of /proc/self/mountinfo and loop devices name the state directory. */
static void count_mounts(const char *state, unsigned *ret_mounts, unsigned *ret_loops)
{
	_cleanup_free_ char *mi = NULL;
	*ret_mounts = *ret_loops = 0;
	if (util_read_file("/proc/self/mountinfo", 16u << 20, &mi, NULL) == 0)
		for (char *p = mi; (p = strstr(p, state)); p += strlen(state))
			(*ret_mounts)++;
	DIR *d = opendir("/sys/block");
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300];
		_cleanup_free_ char *bf = NULL;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		if (!strncmp(e->d_name, "loop", 4) && util_read_file(path, 4096, &bf, NULL) == 0 && strstr(bf, state))
			(*ret_loops)++;
	}
	if (d)
		closedir(d);
}

/* Processes whose command line names one of the sandboxes (agents, gateways). */
static unsigned count_processes(const struct bench *b)
{
	unsigned found = 0;
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300];
		_cleanup_free_ char *cmd = NULL;
		size_t len;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		if (util_read_file(path, 65536, &cmd, &len) < 0)
			continue;
		for (size_t i = 0; i < len; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		for (size_t i = 0; i < b->n_ids; i++)
			if (strstr(cmd, b->ids[i])) {
				found++;
				break;
			}
	}
	if (d)
		closedir(d);
	return found;
}

/* Sandboxes of the state directory that are not destroyed. */
static int count_sandboxes(const char *state)
{
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = state;
	space_ctx *ctx;
	if (space_ctx_new(&co, &ctx) < 0)
		return -1;
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	int r = space_sandbox_list(ctx, &list, &n);
	space_sandbox_info_list_free(list);
	space_ctx_free(ctx);
	return r < 0 ? r : (int)n;
}

static const char *cannot_run(const char **ret_cli, const char **ret_src)
{
	*ret_cli = getenv("SPACE_CLI");
	*ret_src = getenv("SPACE_SOURCE_DIR");
	if (geteuid() != 0)
		return "needs root";
	if (!*ret_cli || access(*ret_cli, X_OK) < 0)
		return "SPACE_CLI does not name the space binary";
	if (!*ret_src)
		return "SPACE_SOURCE_DIR is not set (scripts/busybox-tree.sh builds the template)";
	if (access("/dev/loop-control", F_OK) < 0)
		return "no loop devices";
	if (!util_have_program("busybox"))
		return "busybox missing (busybox-static)";
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "clients", required_argument, NULL, 'c' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t clients = 200, rounds = 1;
	int c;
	while ((c = getopt_long(argc, argv, "c:r:h", longopts, NULL)) != -1) {
		if (c == 'c' && util_parse_uint(optarg, 1, CLIENTS_MAX, &clients) == 0)
			continue;
		if (c == 'r' && util_parse_uint(optarg, 1, 1000, &rounds) == 0)
			continue;
		fprintf(stderr, "usage: serve [--clients N (1..%d, default 200)] [--rounds R (default 1)]\n",
			CLIENTS_MAX);
		return c == 'h' ? 0 : 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *cli, *src;
	const char *why = cannot_run(&cli, &src);
	if (why) {
		printf("serve: skipped: %s\n", why);
		return SKIP;
	}
	signal(SIGPIPE, SIG_IGN);

	struct bench b = { .rounds = (unsigned)rounds };
	pthread_mutex_init(&b.lock, NULL);
	size_t per = clients * rounds;
	for (int k = 0; k < N_OPS; k++)
		b.ms[k] = calloc(per, sizeof(double));
	b.cap_ids = 2 * per + 2; /* both passes and the warm-ups */
	b.ids = calloc(b.cap_ids, sizeof(*b.ids));
	char dir[] = "/tmp/space-bench-serve-XXXXXX";
	if (!b.ms[0] || !b.ms[1] || !b.ms[2] || !b.ids || !mkdtemp(dir)) {
		perror("serve: setup");
		return 1;
	}
	char tree[96], log[96], script[4200], conns_arg[32], listen_arg[48];
	snprintf(b.state, sizeof(b.state), "%s/state", dir);
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	snprintf(log, sizeof(log), "%s/serve.log", dir);
	snprintf(script, sizeof(script), "%s/scripts/busybox-tree.sh", src);
	int rc = 1;
	pid_t server = 0;
	_cleanup_free_ char *out = NULL;
	const char *const mk_tree[] = { script, tree, NULL };
	const char *const init[] = { cli, "init", "--loop-pool", "8G", "--isolation", "jail", "--state", b.state, NULL };
	const char *const import[] = { cli, "template", "import", "tiny", "--rootfs", tree, "--state", b.state, NULL };
	const char *const apikey[] = { cli, "apikey", "create", "--name", "bench", "--state", b.state, NULL };
	if (util_run(mk_tree, NULL) < 0) {
		fprintf(stderr, "serve: %s failed\n", script);
		goto out;
	}
	if (util_run(init, &out) < 0) {
		printf("serve: skipped: no loop-mounted btrfs pool here: %s\n", out ? out : "");
		rc = SKIP;
		goto out;
	}
	free(out);
	out = NULL;
	if (util_run(import, NULL) < 0 || util_run(apikey, &out) < 0 || !out || !strstr(out, "e2b_")) {
		fprintf(stderr, "serve: template import or API key failed\n");
		goto out;
	}
	snprintf(b.key, sizeof(b.key), "%.68s", strstr(out, "e2b_"));
	b.port = bu_free_port();
	snprintf(conns_arg, sizeof(conns_arg), "%u", (unsigned)clients * 2 + 16);
	snprintf(listen_arg, sizeof(listen_arg), "127.0.0.1:%u", b.port);
	const char *const serve[] = { cli, "serve", "--listen", listen_arg, "--state", b.state, "--max-connections",
				      conns_arg, NULL };
	if (!b.port || bu_spawn_logged(serve, log, &server) < 0) {
		fprintf(stderr, "serve: cannot start space serve\n");
		goto out;
	}
	for (int i = 0; i < 100 && http(&b, "GET", "/v1/health", NULL, NULL) != 200; i++)
		usleep(100000);

	/* One warm-up of each (page cache, first cgroup), not measured. */
	if (!run_pass(&b, 1, true) || !run_pass(&b, 1, false) || b.errors) {
		fprintf(stderr, "serve: warm-up failed: %s\n", b.first_error);
		if (strstr(b.first_error, "namespace") || strstr(b.first_error, "isolation")) {
			printf("serve: skipped: jail isolation not usable here: %s\n", b.first_error);
			rc = SKIP;
		}
		goto out;
	}
	double load = 0;
	(void)getloadavg(&load, 1);
	printf("serve: %llu concurrent clients x %llu round(s) of create -> exec(true) -> destroy (jail, busybox\n"
	       "       template), over HTTP against one `space serve`, then through the library (one context per\n"
	       "       thread); %ld CPUs, load average %.2f at start\n",
	       (unsigned long long)clients, (unsigned long long)rounds, sysconf(_SC_NPROCESSORS_ONLN), load);
	double res[2][N_OPS][3];
	unsigned errors[2];
	double wall[2];
	for (int pass = 0; pass < 2; pass++) {
		b.errors = 0;
		uint64_t t0 = util_now_ns();
		run_pass(&b, (unsigned)clients, pass == 0);
		wall[pass] = (double)(util_now_ns() - t0) / 1e9;
		errors[pass] = b.errors;
		if (b.errors)
			printf("  %s: %u error(s), the first: %s\n", pass ? "library" : "http", b.errors, b.first_error);
		for (int k = 0; k < N_OPS; k++)
			summary(b.ms[k], b.n[k], res[pass][k]);
	}
	printf("  %-24s %10s %10s %10s   (ms)\n", "", "p50", "p99", "max");
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < N_OPS; k++)
			printf("  %-8s %-15s %10.1f %10.1f %10.1f\n", pass ? "library" : "http", op_names[k],
			       res[pass][k][0], res[pass][k][1], res[pass][k][2]);
	for (int k = 0; k < N_OPS; k++)
		printf("  ratio http/library %-12s p50 %.2fx, p99 %.2fx\n", op_names[k],
		       res[1][k][0] > 0 ? res[0][k][0] / res[1][k][0] : 0, res[1][k][1] > 0 ? res[0][k][1] / res[1][k][1] : 0);
	printf("  wall time: http %.1f s, library %.1f s; errors: http %u, library %u\n", wall[0], wall[1], errors[0],
	       errors[1]);

	/* Leaks: the server still runs (sandboxes outlive requests); everything of the sandboxes must be gone. */
	unsigned mounts, loops, procs = count_processes(&b);
	count_mounts(b.state, &mounts, &loops);
	int left = count_sandboxes(b.state);
	/* The pool itself: one mount and one loop device. */
	printf("  left behind: %d sandbox(es), %u process(es), %u mount(s) and %u loop device(s) beyond the pool's\n",
	       left, procs, mounts > 1 ? mounts - 1 : 0, loops > 1 ? loops - 1 : 0);
	rc = errors[0] || errors[1] || left != 0 || procs || mounts > 1 || loops > 1 ? 1 : 0;
out:
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
	}
	const char *const unmount[] = { cli, "pool", "unmount", "--state", b.state, NULL };
	if (b.state[0])
		(void)util_run(unmount, NULL);
	util_rm_rf(dir);
	for (int k = 0; k < N_OPS; k++)
		free(b.ms[k]);
	free(b.ids);
	return rc;
}
