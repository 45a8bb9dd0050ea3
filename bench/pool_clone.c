/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/pool_clone: checks the claim behind sandbox creation — a sandbox's disk is a btrfs snapshot of
 * its template, made in milliseconds whatever the template's size. In a loop pool set up by space_init,
 * two subvolumes hold one file each, 1 MiB and 1 GiB of incompressible data (fsync'ed, then the
 * filesystem synced); each is snapshotted N times (alternating, the way store code does it: one
 * libbtrfsutil ioctl), and the 1 GiB file is copied with `cp --reflink=always` and with a full data copy
 * (`cp --reflink=never`; plain `cp` reflinks by default on coreutils >= 9) for comparison. Reports
 * median and max of each and the ratios. Never fails on time: exit 0 when it measured, 77 (with the
 * reason) when it cannot run here, 1 when something broke.
 *
 * usage: pool_clone [--runs N] [--copies N] [--big SIZE]     (needs root, loop devices, btrfs)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "space.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/util.h"

#define SKIP 77
#define CHUNK (1u << 20)

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sorts the n samples; returns the median (mean of the middle two for even n); *ret_max the largest. */
static double median_max(double *ms, size_t n, double *ret_max)
{
	qsort(ms, n, sizeof(*ms), by_value);
	*ret_max = ms[n - 1];
	return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

static double elapsed_ms(uint64_t t0)
{
	return (double)(util_now_ns() - t0) / 1e6;
}

/* Writes size bytes that neither compress nor deduplicate (random, each MiB stamped), then fsyncs. */
static int write_data(const char *path, uint64_t size)
{
	_cleanup_free_ unsigned char *buf = malloc(CHUNK);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (!buf || fd < 0)
		return -errno;
	int r = util_random_bytes(buf, CHUNK);
	for (uint64_t off = 0; r >= 0 && off < size; off += CHUNK) {
		memcpy(buf, &off, sizeof(off));
		r = util_write_all(fd, buf, size - off < CHUNK ? size - off : CHUNK);
	}
	if (r >= 0 && (fsync(fd) < 0 || syncfs(fd) < 0))
		r = -errno;
	return r;
}

static int sync_path(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		return -errno;
	return 0;
}

/* `cp <mode> src dst`: the command's wall time, and the time of syncing the filesystem after it. */
static int copy_once(const char *mode, const char *src, const char *dst, const char *fs, double *ret_cp,
		     double *ret_sync)
{
	const char *argv[] = { "cp", mode, src, dst, NULL };
	_cleanup_free_ char *out = NULL;
	uint64_t t0 = util_now_ns();
	int r = util_run(argv, &out);
	*ret_cp = elapsed_ms(t0);
	if (r < 0) {
		fprintf(stderr, "pool_clone: cp %s: %s\n", mode, out ? out : strerror(-r));
		return r;
	}
	t0 = util_now_ns();
	r = sync_path(fs);
	*ret_sync = elapsed_ms(t0);
	if (unlink(dst) < 0 || sync_path(fs) < 0) /* the next copy starts on a quiet filesystem */
		return -errno;
	return r;
}

enum { SMALL, BIG, NSIZES };

struct bench {
	char work[4200];          /* our directory in the pool */
	char tpl[NSIZES][4300];   /* the two "templates" */
	uint64_t bytes[NSIZES];
	uint64_t runs, copies;
	double *snap[NSIZES], *del[NSIZES];
	double reflink[3][2], full[3][2]; /* [copy][cp, sync] */
};

static int snapshot_all(struct bench *b)
{
	char dst[4400];
	for (uint64_t i = 0; i < b->runs; i++) {
		for (int s = 0; s < NSIZES; s++) {
			snprintf(dst, sizeof(dst), "%s/snap-%d-%llu", b->work, s, (unsigned long long)i);
			uint64_t t0 = util_now_ns();
			int r = store_btrfs_snapshot(b->tpl[s], dst, false);
			b->snap[s][i] = elapsed_ms(t0);
			if (r < 0) {
				fprintf(stderr, "pool_clone: snapshot %s: %s\n", b->tpl[s], strerror(-r));
				return r;
			}
		}
		if (interrupted)
			return -EINTR;
	}
	for (uint64_t i = 0; i < b->runs; i++) {
		for (int s = 0; s < NSIZES; s++) {
			snprintf(dst, sizeof(dst), "%s/snap-%d-%llu", b->work, s, (unsigned long long)i);
			uint64_t t0 = util_now_ns();
			int r = store_btrfs_subvolume_delete(dst);
			b->del[s][i] = elapsed_ms(t0);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int run(struct bench *b)
{
	char data[NSIZES][4400], copy[4300];
	int r;
	for (int s = 0; s < NSIZES; s++) {
		snprintf(data[s], sizeof(data[s]), "%s/data", b->tpl[s]);
		if ((r = store_btrfs_subvolume_create(b->tpl[s])) < 0 || (r = write_data(data[s], b->bytes[s])) < 0) {
			fprintf(stderr, "pool_clone: template %s: %s\n", b->tpl[s], strerror(-r));
			return r;
		}
	}
	if ((r = snapshot_all(b)) < 0)
		return r;
	snprintf(copy, sizeof(copy), "%s/copy", b->work);
	for (uint64_t i = 0; i < b->copies && !interrupted; i++) {
		r = copy_once("--reflink=always", data[BIG], copy, b->work, &b->reflink[i][0], &b->reflink[i][1]);
		if (r >= 0)
			r = copy_once("--reflink=never", data[BIG], copy, b->work, &b->full[i][0], &b->full[i][1]);
		if (r < 0)
			return r;
	}
	return interrupted ? -EINTR : 0;
}

static void report(struct bench *b)
{
	static const char *const label[NSIZES] = { "1 MiB", "1 GiB" };
	double med[NSIZES], mx, dmed, dmx, cp[2][2];
	char sz[32];
	double load = 0;
	(void)getloadavg(&load, 1);
	printf("pool_clone: btrfs snapshot (libbtrfsutil) of a subvolume holding one file, %llu each;\n"
	       "            cp of the %s file %llu times (%ld CPUs, load average %.2f at the end)\n",
	       (unsigned long long)b->runs, util_format_size(b->bytes[BIG], sz, sizeof(sz)),
	       (unsigned long long)b->copies, sysconf(_SC_NPROCESSORS_ONLN), load);
	printf("  %-34s %10s %10s   (ms)\n", "", "median", "max");
	for (int s = 0; s < NSIZES; s++) {
		const char *l = s == BIG ? util_format_size(b->bytes[BIG], sz, sizeof(sz)) : label[s];
		med[s] = median_max(b->snap[s], b->runs, &mx);
		dmed = median_max(b->del[s], b->runs, &dmx);
		printf("  snapshot, %-24s %10.2f %10.2f\n", l, med[s], mx);
		printf("  delete snapshot, %-17s %10.2f %10.2f\n", l, dmed, dmx);
	}
	double (*runs[2])[2] = { b->reflink, b->full };
	static const char *const name[2] = { "cp --reflink=always", "cp --reflink=never" };
	for (int k = 0; k < 2; k++) {
		double c[3], s[3], cmx, smx;
		for (uint64_t i = 0; i < b->copies; i++) {
			c[i] = runs[k][i][0];
			s[i] = runs[k][i][0] + runs[k][i][1];
		}
		cp[k][0] = median_max(c, b->copies, &cmx);
		cp[k][1] = median_max(s, b->copies, &smx);
		printf("  %-34s %10.2f %10.2f\n", name[k], cp[k][0], cmx);
		printf("  %-34s %10.2f %10.2f\n", "  + syncfs (data on disk)", cp[k][1], smx);
	}
	util_format_size(b->bytes[BIG], sz, sizeof(sz));
	printf("  ratio snapshot %s / 1 MiB (median): %.2fx for %.0fx the data\n", sz, med[BIG] / med[SMALL],
	       (double)b->bytes[BIG] / (double)b->bytes[SMALL]);
	printf("  ratio cp --reflink=always / snapshot %s (median): %.2fx\n", sz, cp[0][0] / med[BIG]);
	printf("  ratio cp --reflink=never / snapshot %s (median): %.1fx (%.1fx with syncfs)\n", sz,
	       cp[1][0] / med[BIG], cp[1][1] / med[BIG]);
}

/* Our subvolumes, the pool and the temp dir go; returns 0 when nothing is left behind. */
static int cleanup(space_ctx *ctx, bool inited, struct bench *b, const char *dir, const char *pool)
{
	int r = 0;
	if (b->work[0]) {
		for (int s = 0; s < NSIZES; s++)
			if (store_btrfs_subvolume_delete(b->tpl[s]) < 0)
				r = -1;
		(void)util_rm_rf(b->work); /* leftover snapshots and copies of an interrupted run */
	}
	if (inited && space_pool_unmount(ctx) < 0) {
		fprintf(stderr, "pool_clone: unmount pool: %s\n", space_ctx_last_error(ctx));
		r = -1;
	}
	space_ctx_free(ctx);
	if (umount2(pool, 0) < 0 && errno != EINVAL && errno != ENOENT) {
		fprintf(stderr, "pool_clone: %s still mounted (%m): %s left in place\n", pool, dir);
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
		{ "copies", required_argument, NULL, 'c' },
		{ "big", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench b = { .bytes = { 1u << 20, 1u << 30 }, .runs = 30, .copies = 3 };
	int c, ok;
	while ((c = getopt_long(argc, argv, "n:c:b:h", longopts, NULL)) != -1) {
		ok = (c == 'n' && util_parse_uint(optarg, 1, 10000, &b.runs) == 0) ||
		     (c == 'c' && util_parse_uint(optarg, 1, 3, &b.copies) == 0) ||
		     (c == 'b' && util_parse_size(optarg, &b.bytes[BIG]) == 0 && b.bytes[BIG] >= CHUNK &&
		      b.bytes[BIG] <= (8ull << 30));
		if (!ok) {
			fprintf(stderr, "usage: pool_clone [--runs N] [--copies 1..3] [--big SIZE (1M..8G)]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("pool_clone: skipped: needs root (loop-mounted btrfs pool)\n");
		return SKIP;
	}
	if (access("/dev/loop-control", F_OK) < 0) {
		printf("pool_clone: skipped: no loop devices (/dev/loop-control)\n");
		return SKIP;
	}
	if (!util_have_program("cp")) {
		printf("pool_clone: skipped: peer missing: cp\n");
		return SKIP;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	char dir[] = "/tmp/space-bench-pool-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("pool_clone: mkdtemp");
		return 1;
	}
	char state[64], pool[80];
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(pool, sizeof(pool), "%s/pool", state); /* where space_init mounts a loop pool */
	int rc = 1, r;
	bool inited = false;
	space_ctx *ctx = NULL;
	for (int s = 0; s < NSIZES; s++) {
		b.snap[s] = calloc(b.runs, sizeof(double));
		b.del[s] = calloc(b.runs, sizeof(double));
		if (!b.snap[s] || !b.del[s])
			goto out;
	}

	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = state;
	if ((r = space_ctx_new(&co, &ctx)) < 0) {
		fprintf(stderr, "pool_clone: context: %s\n", space_strerror(r));
		goto out;
	}
	/* Room for the big file, one full copy of it, and btrfs metadata. */
	struct space_init_options io = SPACE_INIT_OPTIONS_INIT;
	io.loop_pool_size = 2 * b.bytes[BIG] + (1ull << 30);
	if ((r = space_init(ctx, &io)) < 0) {
		printf("pool_clone: skipped: no loop-mounted btrfs pool here: %s\n", space_ctx_last_error(ctx));
		rc = SKIP;
		goto out;
	}
	inited = true;
	struct space_pool_info *pi;
	if ((r = space_pool_get_info(ctx, &pi)) < 0) {
		fprintf(stderr, "pool_clone: pool info: %s\n", space_ctx_last_error(ctx));
		goto out;
	}
	snprintf(b.work, sizeof(b.work), "%s/bench-clone", pi->path);
	space_pool_info_free(pi);
	for (int s = 0; s < NSIZES; s++)
		snprintf(b.tpl[s], sizeof(b.tpl[s]), "%s/template-%d", b.work, s);
	if (mkdir(b.work, 0755) < 0) {
		fprintf(stderr, "pool_clone: mkdir %s: %m\n", b.work);
		goto out;
	}
	if ((r = run(&b)) < 0) {
		if (r == -EINTR)
			fprintf(stderr, "pool_clone: interrupted\n");
		goto out;
	}
	report(&b);
	rc = 0;
out:
	if (cleanup(ctx, inited, &b, dir, pool) < 0 && rc == 0)
		rc = 1;
	for (int s = 0; s < NSIZES; s++) {
		free(b.snap[s]);
		free(b.del[s]);
	}
	return rc;
}
