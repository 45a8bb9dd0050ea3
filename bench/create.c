/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/create: host-side latency of space_sandbox_create from a template snapshot (disk clone + space-vmm
 * start + restore + the agent answering), against a cold boot of the same template and a jail create;
 * space-vmm's memory beyond guest RAM; and the host memory 50 restored clones of one template use. The
 * printout gives figures and ratios; nothing passes or fails on time (bench/README.md).
 *
 * usage: create [--runs N] [--cold-runs N] [--jail-runs N] [--clones N] [--memory MIB]
 *               [--kernel FILE [--modules DIR]]
 * Without --kernel (or where vm isolation does not work) only the jail part runs.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "space.h"
#include "util/cleanup.h"
#include "util/util.h"

#define TEMPLATE "bench-create"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct series {
	const char *name;
	double *v;
	size_t n;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted series. */
static double pct(const struct series *s, double p)
{
	if (!s->n)
		return 0;
	size_t k = (size_t)((p / 100.0) * (double)s->n + 0.999999);
	if (k < 1)
		k = 1;
	return s->v[(k > s->n ? s->n : k) - 1];
}

static void print_series(struct series *s, const char *unit)
{
	if (!s->n) {
		printf("  %-34s %9s\n", s->name, "-");
		return;
	}
	qsort(s->v, s->n, sizeof(double), cmp_double);
	printf("  %-34s %9.2f %9.2f %9.2f %9.2f  %s (n=%zu)\n", s->name, pct(s, 50), pct(s, 99), s->v[0],
	       s->v[s->n - 1], unit, s->n);
}

static void fail_msg(space_ctx *ctx, const char *what, int r)
{
	fprintf(stderr, "create: %s: %s (%s)\n", what, space_strerror(r), space_ctx_last_error(ctx));
}

/* kB of "Key:" in a /proc file of key/value lines (meminfo, smaps_rollup); -1 if absent. */
static long long proc_kb(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[256];
	long long v = -1;
	size_t kl = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = atoll(line + kl + 1);
			break;
		}
	fclose(f);
	return v;
}

/* Rss (kB) of every mapping of pid except the guest RAM one (exactly guest_bytes long). */
static long long rss_beyond_guest(int pid, unsigned long long guest_bytes)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long long total = 0;
	bool guest = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			guest = hi - lo == guest_bytes;
			continue;
		}
		if (!strncmp(line, "Rss:", 4) && !guest)
			total += atoll(line + 4);
	}
	fclose(f);
	return total;
}

static int sandbox_pid(space_sandbox *sb)
{
	struct space_sandbox_info *info;
	if (space_sandbox_get_info(sb, &info) < 0)
		return -1;
	int pid = info->pid;
	space_sandbox_info_free(info);
	return pid;
}

/* One timed create; *ret_sb stays for the caller to measure and destroy. */
static int timed_create(space_ctx *ctx, const char *iso, uint32_t memory_mib, double *ret_ms, space_sandbox **ret_sb)
{
	struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
	o.template_name = TEMPLATE;
	o.isolation = iso;
	o.memory_mib = memory_mib;
	uint64_t t0 = util_now_ns();
	int r = space_sandbox_create(ctx, &o, ret_sb);
	*ret_ms = (double)(util_now_ns() - t0) / 1e6;
	return r;
}

static void destroy(space_ctx *ctx, space_sandbox *sb)
{
	int r = space_sandbox_destroy(sb);
	if (r < 0) {
		fail_msg(ctx, "destroy", r);
		if ((r = space_sandbox_remove(ctx, space_sandbox_id(sb))) < 0)
			fail_msg(ctx, "remove", r);
	}
	space_sandbox_free(sb);
}

/*
 * runs creates of iso (vm: also the space-vmm memory beyond guest RAM, into mem_kb when not NULL),
 * each destroyed after measuring, outside the timed part.
 */
static int create_series(space_ctx *ctx, const char *iso, uint32_t memory_mib, size_t runs, struct series *lat,
			 struct series *mem_kb, unsigned long long guest_bytes)
{
	for (size_t i = 0; i < runs && !interrupted; i++) {
		space_sandbox *sb;
		double ms;
		int r = timed_create(ctx, iso, memory_mib, &ms, &sb);
		if (r < 0) {
			fail_msg(ctx, iso, r);
			return r;
		}
		lat->v[lat->n++] = ms;
		long long kb = mem_kb ? rss_beyond_guest(sandbox_pid(sb), guest_bytes) : -1;
		if (kb >= 0)
			mem_kb->v[mem_kb->n++] = (double)kb / 1024.0;
		destroy(ctx, sb);
	}
	return interrupted ? -EINTR : 0;
}

/* count restored clones alive at once: MemAvailable delta and the sum of their space-vmm's Pss. */
static int clones(space_ctx *ctx, size_t count, uint32_t memory_mib)
{
	space_sandbox **sbs = calloc(count, sizeof(*sbs));
	if (!sbs)
		return -ENOMEM;
	sync();
	long long avail0 = proc_kb("/proc/meminfo", "MemAvailable");
	int r = 0;
	size_t n = 0;
	for (; n < count && !interrupted; n++) {
		double ms;
		if ((r = timed_create(ctx, "vm", 0, &ms, &sbs[n])) < 0) {
			fail_msg(ctx, "clone", r);
			break;
		}
	}
	long long avail1 = proc_kb("/proc/meminfo", "MemAvailable");
	long long pss = 0;
	for (size_t i = 0; i < n; i++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/smaps_rollup", sandbox_pid(sbs[i]));
		long long k = proc_kb(p, "Pss");
		pss += k > 0 ? k : 0;
	}
	double naive = (double)n * memory_mib;
	if (n) {
		double used = (double)(avail0 - avail1) / 1024.0;
		printf("\n%zu restored clones of one %u MiB template alive at once:\n", n, memory_mib);
		printf("  host MemAvailable drop            %9.1f MiB  (%.1f%% of %zu x %u MiB = %.0f MiB)\n", used,
		       100.0 * used / naive, n, memory_mib, naive);
		printf("  sum of space-vmm Pss              %9.1f MiB  (%.1f%% of %.0f MiB)\n", (double)pss / 1024.0,
		       100.0 * (double)pss / 1024.0 / naive, naive);
		printf("  per clone (MemAvailable drop)     %9.1f MiB\n", used / (double)n);
	}
	for (size_t i = 0; i < n; i++)
		destroy(ctx, sbs[i]);
	free(sbs);
	return r;
}

static int vm_part(space_ctx *ctx, size_t runs, size_t cold_runs, size_t nclones, uint32_t memory_mib,
		   double jail_med)
{
	unsigned long long guest = (unsigned long long)memory_mib << 20;
	struct series cold = { "cold boot (no snapshot)", calloc(cold_runs + 1, sizeof(double)), 0 };
	struct series cold_mem = { "space-vmm RSS beyond guest, cold", calloc(cold_runs + 1, sizeof(double)), 0 };
	struct series warm = { "from the template snapshot", calloc(runs + 1, sizeof(double)), 0 };
	struct series warm_mem = { "space-vmm RSS beyond guest, restore", calloc(runs + 1, sizeof(double)), 0 };
	int r = -ENOMEM;
	if (!cold.v || !cold_mem.v || !warm.v || !warm_mem.v)
		goto out;
	printf("vm: %zu cold boots of the template, then a template snapshot, %zu creates from it\n", cold_runs, runs);
	fflush(stdout);
	r = create_series(ctx, "vm", memory_mib, cold_runs, &cold, &cold_mem, guest);
	/* Each part is printed as soon as it is measured: a later failure keeps what was. */
	printf("\n  %-34s %9s %9s %9s %9s\n", "vm create", "median", "p99", "min", "max");
	print_series(&cold, "ms");
	print_series(&cold_mem, "MiB");
	fflush(stdout);
	if (r < 0)
		goto out;
	uint64_t t0 = util_now_ns();
	struct space_template_snapshot_options so = SPACE_TEMPLATE_SNAPSHOT_OPTIONS_INIT;
	so.cpus = 1;
	so.memory_mib = memory_mib;
	r = space_template_snapshot(ctx, TEMPLATE, &so);
	if (r < 0) {
		fail_msg(ctx, "template snapshot", r);
		goto out;
	}
	printf("  (template snapshot taken in %.0f ms: one boot + checkpoint)\n", (double)(util_now_ns() - t0) / 1e6);
	r = create_series(ctx, "vm", 0, runs, &warm, &warm_mem, guest);
	print_series(&warm, "ms");
	print_series(&warm_mem, "MiB");
	if (cold.n && warm.n)
		printf("  snapshot / cold boot (median)      %9.3f\n", pct(&warm, 50) / pct(&cold, 50));
	if (jail_med > 0 && warm.n)
		printf("  snapshot / jail create (median)    %9.3f\n", pct(&warm, 50) / jail_med);
	if (warm.n)
		printf("  targets: median <= 10 ms (%s), p99 <= 25 ms (%s), <= 5 MiB beyond guest RAM (%s; peak %.2f MiB)\n",
		       pct(&warm, 50) <= 10 ? "met" : "not met", pct(&warm, 99) <= 25 ? "met" : "not met",
		       warm_mem.n && warm_mem.v[warm_mem.n - 1] <= 5 ? "met" : "not met",
		       warm_mem.n ? warm_mem.v[warm_mem.n - 1] : 0.0);
	if (r == 0 && nclones)
		r = clones(ctx, nclones, memory_mib);
	int d = space_template_snapshot_drop(ctx, TEMPLATE);
	if (d < 0)
		fail_msg(ctx, "drop the template snapshot", d);
out:
	free(cold.v);
	free(cold_mem.v);
	free(warm.v);
	free(warm_mem.v);
	return r;
}

static int jail_part(space_ctx *ctx, size_t runs, double *ret_median)
{
	struct series s = { "jail create", calloc(runs + 1, sizeof(double)), 0 };
	if (!s.v)
		return -ENOMEM;
	int r = create_series(ctx, "jail", 0, runs, &s, NULL, 0);
	printf("\n  %-34s %9s %9s %9s %9s\n", "", "median", "p99", "min", "max");
	print_series(&s, "ms");
	*ret_median = s.n ? pct(&s, 50) : 0;
	free(s.v);
	return r;
}

static int parse_count(const char *s, uint64_t max, size_t *ret)
{
	uint64_t v;
	if (util_parse_uint(s, 0, max, &v) < 0)
		return -EINVAL;
	*ret = (size_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	size_t runs = 100, cold_runs = 10, jail_runs = 100, nclones = 50, mem = 256;
	const char *kernel = NULL, *modules = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = !v;
		if (!bad && !strcmp(a, "--runs"))
			bad = parse_count(v, 100000, &runs) < 0;
		else if (!bad && !strcmp(a, "--cold-runs"))
			bad = parse_count(v, 10000, &cold_runs) < 0;
		else if (!bad && !strcmp(a, "--jail-runs"))
			bad = parse_count(v, 100000, &jail_runs) < 0;
		else if (!bad && !strcmp(a, "--clones"))
			bad = parse_count(v, 1000, &nclones) < 0;
		else if (!bad && !strcmp(a, "--memory"))
			bad = parse_count(v, 1 << 20, &mem) < 0 || mem < 16;
		else if (!bad && !strcmp(a, "--kernel"))
			kernel = v;
		else if (!bad && !strcmp(a, "--modules"))
			modules = v;
		else
			bad = 1;
		if (bad) {
			fprintf(stderr, "usage: create [--runs N] [--cold-runs N] [--jail-runs N] [--clones N] "
					"[--memory MIB] [--kernel FILE [--modules DIR]]\n");
			return 2;
		}
		i++;
	}
	if (geteuid() != 0) {
		printf("create: skipped: needs root (loop pool, jails, VMs)\n");
		return 77;
	}
	const char *src = getenv("SPACE_SOURCE_DIR");
	char dir[] = "/tmp/space-bench-create-XXXXXX", state[64], tree[64], pool[80], script[4096];
	if (!mkdtemp(dir)) {
		perror("create: mkdtemp");
		return 1;
	}
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	snprintf(pool, sizeof(pool), "%s/pool", state);
	snprintf(script, sizeof(script), "%s/scripts/busybox-tree.sh", src ? src : ".");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	int rc = 1, r;
	bool imported = false;
	space_ctx *ctx = NULL;
	const char *tree_argv[] = { "bash", script, tree, NULL };
	_cleanup_free_ char *tree_out = NULL;
	if ((r = util_run(tree_argv, &tree_out)) < 0) {
		printf("create: skipped: busybox tree (%s): %s\n", script, tree_out ? tree_out : space_strerror(r));
		rc = 77;
		goto out;
	}
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = state;
	if ((r = space_ctx_new(&co, &ctx)) < 0) {
		fprintf(stderr, "create: context: %s\n", space_strerror(r));
		goto out;
	}
	struct space_init_options io = SPACE_INIT_OPTIONS_INIT;
	io.loop_pool_size = 4ull << 30;
	io.isolation = "jail";
	if ((r = space_init(ctx, &io)) < 0) {
		printf("create: skipped: no loop-mounted btrfs pool here: %s\n", space_ctx_last_error(ctx));
		rc = 77;
		goto out;
	}
	struct space_template_import_options ti = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	ti.name = TEMPLATE;
	ti.rootfs = tree;
	ti.kernel = kernel;
	ti.modules_dir = modules;
	if ((r = space_template_import(ctx, &ti)) < 0) {
		fail_msg(ctx, "import", r);
		goto out;
	}
	imported = true;
	printf("create: host-side space_sandbox_create latency, each sandbox destroyed after measuring (untimed)\n");
	double jail_med = 0;
	/* The VM part runs even when jails cannot (the error is printed above). */
	if ((r = jail_part(ctx, jail_runs, &jail_med)) < 0 && interrupted)
		goto out;
	if (!kernel) {
		printf("\nvm: skipped: no --kernel given (the template needs a kernel to boot)\n");
	} else {
		char *doc = NULL;
		bool vm_ok = space_doctor(ctx, 0, &doc) == 0 && doc && strstr(doc, "\"vm\":{\"usable\":true");
		free(doc);
		if (!vm_ok) {
			printf("\nvm: skipped: vm isolation is not usable on this host (see `space doctor`)\n");
		} else {
			printf("\n");
			if ((r = vm_part(ctx, runs, cold_runs, nclones, (uint32_t)mem, jail_med)) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	if (imported && space_template_remove(ctx, TEMPLATE, true) < 0)
		fprintf(stderr, "create: remove template: %s\n", space_ctx_last_error(ctx));
	if (ctx && space_pool_unmount(ctx) < 0)
		fprintf(stderr, "create: unmount pool: %s\n", space_ctx_last_error(ctx));
	space_ctx_free(ctx);
	umount2(pool, MNT_DETACH);
	const char *rm_argv[] = { "rm", "-rf", dir, NULL };
	(void)util_run(rm_argv, NULL);
	return interrupted ? 130 : rc;
}
