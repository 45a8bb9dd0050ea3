/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The outputs of ABI 1 stay readable by a caller compiled against them (docs/api.md "Outputs").
 * Each output's first layout is written out below as such a caller has it; the build fails when a field
 * of it moves or changes type (fields are only ever added at the end). At run time the library's objects
 * are read through those layouts, their size says what the library filled, and records (the caller's
 * structs) are written at most up to the size the caller set: a record that ends at an inaccessible page
 * faults if the library writes one byte more, one that is too small is refused before anything runs, and
 * one from a later header (larger) keeps its extra bytes and learns the library's size.
 */
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

#include "apitest.h"

/* ---- the first layout of each output, as a caller built against ABI 1 declares it ---- */

struct v1_sandbox_info {
	uint32_t size;
	const char *id, *template_name, *isolation;
	enum space_sandbox_status status;
	const char *reason;
	int32_t pid;
	uint32_t cpus, memory_mib;
	int64_t created_ms, updated_ms, expires_ms;
	const char *path;
};
struct v1_template_info {
	uint32_t size;
	const char *name, *path;
	uint64_t rootfs_bytes;
	bool has_kernel, has_initrd;
	int64_t created_ms;
	uint32_t sandboxes, checkpoints;
};
struct v1_checkpoint_info {
	uint32_t size;
	const char *id, *sandbox_id, *template_name, *name, *kind, *path;
	int64_t created_ms;
};
struct v1_pool_info {
	uint32_t size;
	const char *path, *loop_image, *isolation;
	uint64_t total_bytes, free_bytes;
	bool mounted;
};
struct v1_secret_info {
	uint32_t size;
	const char *name;
	int64_t created_ms;
};
struct v1_exec_result {
	uint32_t size;
	bool exited;
	int exit_code, signal;
	bool timed_out, oom_killed;
};
struct v1_file_stat {
	uint32_t size, mode, uid, gid;
	uint64_t file_size;
	int64_t mtime_ns;
};
struct v1_sandbox_usage {
	uint32_t size;
	uint32_t cpus;
	uint64_t cpu_ns;
	uint64_t memory_bytes;
	uint64_t memory_cache_bytes;
	uint64_t memory_limit_bytes;
	uint64_t disk_used_bytes;
	uint64_t disk_total_bytes;
	int64_t time_ms;
};
struct v1_template_warm_info {
	uint32_t size;
	bool has_snapshot;
	uint32_t snapshot_cpus, snapshot_memory_mib;
	int64_t snapshot_created_ms;
	uint32_t warm_pool_size, warm_pool_ready;
};
struct v1_snapshot_policy {
	uint32_t size, every_s, keep;
	int32_t pid;
};
struct v1_event {
	uint32_t size;
	int64_t seq, ts_ms;
	const char *sandbox_id, *kind, *detail;
};
struct v1_kernel_info {
	uint32_t size;
	const char *kind, *kernel, *modules, *release;
};
struct v1_boot_assets {
	uint32_t size;
	const char *kernel, *initrd, *cmdline, *release;
};

/* A field of the first layout stays where it was, with its size. */
#define SAME(v1, cur, f)                                                                                  \
	_Static_assert(offsetof(struct v1, f) == offsetof(struct cur, f) &&                               \
			       sizeof(((struct v1 *)0)->f) == sizeof(((struct cur *)0)->f),                \
		       #cur "." #f " moved or changed: add fields at the end, never change one")
#define NOT_SMALLER(v1, cur) _Static_assert(sizeof(struct cur) >= sizeof(struct v1), #cur " shrank")

/* FOR_EACH(m, a, b, x1, ..., xN): m(a, b, x1) ... m(a, b, xN), N up to 13. */
#define FE_1(m, a, b, x) m(a, b, x)
#define FE_2(m, a, b, x, ...) m(a, b, x) FE_1(m, a, b, __VA_ARGS__)
#define FE_3(m, a, b, x, ...) m(a, b, x) FE_2(m, a, b, __VA_ARGS__)
#define FE_4(m, a, b, x, ...) m(a, b, x) FE_3(m, a, b, __VA_ARGS__)
#define FE_5(m, a, b, x, ...) m(a, b, x) FE_4(m, a, b, __VA_ARGS__)
#define FE_6(m, a, b, x, ...) m(a, b, x) FE_5(m, a, b, __VA_ARGS__)
#define FE_7(m, a, b, x, ...) m(a, b, x) FE_6(m, a, b, __VA_ARGS__)
#define FE_8(m, a, b, x, ...) m(a, b, x) FE_7(m, a, b, __VA_ARGS__)
#define FE_9(m, a, b, x, ...) m(a, b, x) FE_8(m, a, b, __VA_ARGS__)
#define FE_10(m, a, b, x, ...) m(a, b, x) FE_9(m, a, b, __VA_ARGS__)
#define FE_11(m, a, b, x, ...) m(a, b, x) FE_10(m, a, b, __VA_ARGS__)
#define FE_12(m, a, b, x, ...) m(a, b, x) FE_11(m, a, b, __VA_ARGS__)
#define FE_13(m, a, b, x, ...) m(a, b, x) FE_12(m, a, b, __VA_ARGS__)
#define FE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, name, ...) name
#define FOR_EACH(m, a, b, ...)                                                                            \
	FE_PICK(__VA_ARGS__, FE_13, FE_12, FE_11, FE_10, FE_9, FE_8, FE_7, FE_6, FE_5, FE_4, FE_3, FE_2, FE_1, \
		unused)(m, a, b, __VA_ARGS__)

/* Every field of every first layout, by struct (PIN applies SAME to each). */
#define PIN1(v1, cur, f) SAME(v1, cur, f);
#define PIN(v1, cur, ...) FOR_EACH(PIN1, v1, cur, __VA_ARGS__)
PIN(v1_sandbox_info, space_sandbox_info, size, id, template_name, isolation, status, reason, pid, cpus, memory_mib,
    created_ms, updated_ms, expires_ms, path)
PIN(v1_template_info, space_template_info, size, name, path, rootfs_bytes, has_kernel, has_initrd, created_ms,
    sandboxes, checkpoints)
PIN(v1_checkpoint_info, space_checkpoint_info, size, id, sandbox_id, template_name, name, kind, path, created_ms)
PIN(v1_pool_info, space_pool_info, size, path, loop_image, isolation, total_bytes, free_bytes, mounted)
PIN(v1_secret_info, space_secret_info, size, name, created_ms)
PIN(v1_exec_result, space_exec_result, size, exited, exit_code, signal, timed_out, oom_killed)
PIN(v1_file_stat, space_file_stat, size, mode, uid, gid, file_size, mtime_ns)
PIN(v1_sandbox_usage, space_sandbox_usage, size, cpus, cpu_ns, memory_bytes, memory_cache_bytes, memory_limit_bytes,
    disk_used_bytes, disk_total_bytes, time_ms)
PIN(v1_template_warm_info, space_template_warm_info, size, has_snapshot, snapshot_cpus, snapshot_memory_mib,
    snapshot_created_ms, warm_pool_size, warm_pool_ready)
PIN(v1_snapshot_policy, space_snapshot_policy, size, every_s, keep, pid)
PIN(v1_event, space_event, size, seq, ts_ms, sandbox_id, kind, detail)
PIN(v1_kernel_info, space_kernel_info, size, kind, kernel, modules, release)
PIN(v1_boot_assets, space_boot_assets, size, kernel, initrd, cmdline, release)
NOT_SMALLER(v1_sandbox_info, space_sandbox_info);
NOT_SMALLER(v1_template_info, space_template_info);
NOT_SMALLER(v1_checkpoint_info, space_checkpoint_info);
NOT_SMALLER(v1_pool_info, space_pool_info);
NOT_SMALLER(v1_secret_info, space_secret_info);
NOT_SMALLER(v1_exec_result, space_exec_result);
NOT_SMALLER(v1_file_stat, space_file_stat);
NOT_SMALLER(v1_sandbox_usage, space_sandbox_usage);
NOT_SMALLER(v1_template_warm_info, space_template_warm_info);
NOT_SMALLER(v1_snapshot_policy, space_snapshot_policy);

/* The end of a record's last first-version field: the least size the library must accept. */
#define V1_END(type, last) (offsetof(struct type, last) + sizeof(((struct type *)0)->last))

/* An object the library made: its size covers the first layout and is the library's own struct. */
#define OBJECT_OK(o, v1, cur) ((o) && (o)->size >= sizeof(struct v1) && (o)->size == sizeof(struct cur))

/* ---- records that end where an inaccessible page begins, shared with a child that fills them ---- */

static void *guarded(size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	char *base = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	if (mprotect(base + page, (size_t)page, PROT_NONE) < 0) {
		munmap(base, 2 * (size_t)page);
		return NULL;
	}
	memset(base, 0, (size_t)page);
	return base + page - size;
}

static void guarded_free(void *p)
{
	long page = sysconf(_SC_PAGESIZE);
	munmap((void *)((uintptr_t)p & ~((uintptr_t)page - 1)), 2 * (size_t)page);
}

static const char *sb_id;

/* In a child (SAFE_RC): its own context and handle (a context is not used across fork), then the call. */
static int child_exec(void *rec)
{
	space_ctx *ctx = api_ctx(NULL);
	space_sandbox *sb;
	int r = space_sandbox_open(ctx, sb_id, &sb);
	if (r == 0) {
		const char *argv[] = { "sh", "-c", "exit 7", NULL };
		struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
		eo.argv = argv;
		r = space_sandbox_exec(sb, &eo, rec);
		space_sandbox_free(sb);
	}
	space_ctx_free(ctx);
	return r;
}

static int child_stat(void *rec)
{
	space_ctx *ctx = api_ctx(NULL);
	space_sandbox *sb;
	int r = space_sandbox_open(ctx, sb_id, &sb);
	if (r == 0) {
		r = space_sandbox_stat(sb, "/etc/passwd", rec);
		space_sandbox_free(sb);
	}
	space_ctx_free(ctx);
	return r;
}

static int child_usage(void *rec)
{
	space_ctx *ctx = api_ctx(NULL);
	space_sandbox *sb;
	int r = space_sandbox_open(ctx, sb_id, &sb);
	if (r == 0) {
		r = space_sandbox_get_usage(sb, rec);
		space_sandbox_free(sb);
	}
	space_ctx_free(ctx);
	return r;
}

static int child_policy(void *rec)
{
	space_ctx *ctx = api_ctx(NULL);
	int r = space_sandbox_get_snapshot_policy(ctx, sb_id, rec);
	space_ctx_free(ctx);
	return r;
}

static int child_warm(void *rec)
{
	space_ctx *ctx = api_ctx(NULL);
	int r = space_template_get_warm_info(ctx, api_template(), rec);
	space_ctx_free(ctx);
	return r;
}

/* A record of exactly v1_end bytes (the first version's fields, no tail padding) before a guard page:
 * filled without a fault, its size set to what was written. */
static void record_at_guard(const char *what, int (*call)(void *), size_t v1_end)
{
	uint32_t *rec = guarded(v1_end);
	CHECK(rec != NULL);
	if (!rec)
		return;
	*rec = (uint32_t)v1_end;
	int r = SAFE_RC(call(rec));
	if (r != 0)
		fprintf(stderr, "%s into a %zu-byte record: %d%s\n", what, v1_end, r,
			r == API_CRASHED ? " (the library wrote past the record's size)" : "");
	CHECK(r == 0);
	CHECK(*rec == v1_end);
	guarded_free(rec);
}

/* ---- the checks ---- */

/* The last failure's detail mentions what. */
#define LAST_ERROR(ctx, what)                                                                             \
	do {                                                                                              \
		const char *e_ = space_last_error(ctx);                                                   \
		if (!strstr(e_, what))                                                                    \
			fprintf(stderr, "%s:%d: last error '%s' does not mention '%s'\n", __FILE__, __LINE__, \
				e_, what);                                                                \
		CHECK(strstr(e_, what));                                                                  \
	} while (0)

static void check_objects(space_ctx *ctx)
{
	struct space_pool_info *pool = NULL;
	CHECK(space_pool_get_info(ctx, &pool) == 0 && OBJECT_OK(pool, v1_pool_info, space_pool_info));
	const struct v1_pool_info *p1 = (const void *)pool;
	CHECK(p1 && p1->mounted && p1->path[0] == '/' && p1->loop_image && p1->total_bytes >= p1->free_bytes);
	space_pool_info_free(pool);

	struct space_template_info **tl = NULL;
	size_t n = 0;
	CHECK(space_template_list(ctx, &tl, &n) == 0 && tl && n >= 1 && tl[n] == NULL);
	const struct v1_template_info *mine = NULL;
	for (size_t i = 0; tl && i < n; i++) {
		const struct v1_template_info *t = (const void *)tl[i];
		CHECK(OBJECT_OK(tl[i], v1_template_info, space_template_info));
		if (!strcmp(t->name, api_template()))
			mine = t;
	}
	CHECK(mine && mine->rootfs_bytes > 0 && strstr(mine->path, mine->name));
	struct space_template_info *t = NULL;
	CHECK(space_template_get(ctx, api_template(), &t) == 0 && OBJECT_OK(t, v1_template_info, space_template_info));
	CHECK(t && mine && t->rootfs_bytes == mine->rootfs_bytes && !strcmp(t->path, mine->path));
	space_template_info_free(t);
	space_template_info_list_free(tl);

	CHECK(space_secret_set(ctx, "api-abi", "v", 1) == 0);
	struct space_secret_info **sl = NULL;
	CHECK(space_secret_list(ctx, &sl, NULL) == 0 && sl);
	bool found = false;
	for (size_t i = 0; sl && sl[i]; i++) {
		const struct v1_secret_info *s = (const void *)sl[i];
		CHECK(OBJECT_OK(sl[i], v1_secret_info, space_secret_info));
		found |= !strcmp(s->name, "api-abi") && s->created_ms > 0;
	}
	CHECK(found);
	space_secret_info_list_free(sl);
	CHECK(space_secret_remove(ctx, "api-abi") == 0);
	/* The list frees cope with nothing. */
	space_sandbox_info_list_free(NULL);
	space_sandbox_info_free(NULL);
}

static void check_sandbox_objects(space_ctx *ctx, space_sandbox *sb)
{
	struct space_sandbox_info *info = NULL;
	CHECK(space_sandbox_get_info(sb, &info) == 0 && OBJECT_OK(info, v1_sandbox_info, space_sandbox_info));
	const struct v1_sandbox_info *i1 = (const void *)info;
	CHECK(i1 && !strcmp(i1->id, space_sandbox_id(sb)) && !strcmp(i1->isolation, "jail") &&
	      !strcmp(i1->template_name, api_template()) && i1->status == SPACE_SANDBOX_RUNNING && i1->pid > 0 &&
	      i1->reason && !i1->reason[0] && i1->path[0] == '/' && i1->cpus >= 1);
	space_sandbox_info_free(info);

	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	CHECK(space_sandbox_list(ctx, &list, &n) == 0 && list && list[n] == NULL);
	size_t seen = 0;
	for (size_t i = 0; list && i < n; i++) {
		CHECK(OBJECT_OK(list[i], v1_sandbox_info, space_sandbox_info));
		seen += !strcmp(((const struct v1_sandbox_info *)(const void *)list[i])->id, space_sandbox_id(sb));
	}
	CHECK(seen == 1);
	space_sandbox_info_list_free(list);
}

static int count_entry(const char *name, const struct space_file_stat *st, void *userdata)
{
	int *ok = userdata;
	/* A record the library passes: its size is the library's. */
	if (name && st && st->size == sizeof(struct space_file_stat))
		(*ok)++;
	return 0;
}

static void check_records(space_ctx *ctx, space_sandbox *sb)
{
	const char *argv[] = { "sh", "-c", "exit 3", NULL };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = argv;

	/* A caller of the first layout. */
	struct v1_exec_result r1 = { .size = sizeof(r1) };
	CHECK(space_sandbox_exec(sb, &eo, (struct space_exec_result *)(void *)&r1) == 0 && r1.exited &&
	      r1.exit_code == 3 && !r1.timed_out && !r1.oom_killed);
	CHECK(r1.size == sizeof(r1));
	/* A caller of a later header: its extra field is left alone and size says the library's. */
	struct {
		struct space_exec_result r;
		uint64_t later;
	} big = { .r = { .size = sizeof(big) }, .later = 0x5a5a5a5a5a5a5a5aull };
	CHECK(space_sandbox_exec(sb, &eo, &big.r) == 0 && big.r.exited && big.r.exit_code == 3);
	CHECK(big.r.size == sizeof(struct space_exec_result) && big.later == 0x5a5a5a5a5a5a5a5aull);
	/* Too small for the first version: refused before the process runs. */
	const char *touch[] = { "touch", "/tmp/abi-ran", NULL };
	eo.argv = touch;
	struct space_exec_result small = { .size = 4 };
	CHECK(space_sandbox_exec(sb, &eo, &small) == -EINVAL);
	LAST_ERROR(ctx, "space_exec_result");
	struct space_exec_result zero;
	memset(&zero, 0, sizeof(zero));
	CHECK(space_sandbox_exec(sb, &eo, &zero) == -EINVAL);
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	CHECK(space_sandbox_stat(sb, "/tmp/abi-ran", &st) == -ENOENT);
	/* NULL result: still allowed (the result is not wanted). */
	CHECK(space_sandbox_exec(sb, &eo, NULL) == 0);
	CHECK(space_sandbox_stat(sb, "/tmp/abi-ran", &st) == 0 && S_ISREG(st.mode) && st.file_size == 0);
	CHECK(st.size == sizeof(struct space_file_stat));

	/* The library writes no byte past a record's size. */
	record_at_guard("exec", child_exec, V1_END(space_exec_result, oom_killed));
	record_at_guard("stat", child_stat, V1_END(space_file_stat, mtime_ns));
	record_at_guard("snapshot policy", child_policy, V1_END(space_snapshot_policy, pid));
	record_at_guard("warm info", child_warm, V1_END(space_template_warm_info, warm_pool_ready));
	record_at_guard("usage", child_usage, V1_END(space_sandbox_usage, time_ms));

	/* Usage: real figures that move (a jail: its cgroup and its file system). */
	struct space_sandbox_usage u0 = SPACE_SANDBOX_USAGE_INIT, u1 = SPACE_SANDBOX_USAGE_INIT;
	CHECK(space_sandbox_get_usage(sb, &u0) == 0 && u0.size == sizeof(u0));
	CHECK(u0.cpus >= 1 && u0.memory_limit_bytes >= (1ull << 20) && u0.memory_bytes > 0 && u0.time_ms > 0);
	CHECK(u0.disk_total_bytes > 0 && u0.disk_used_bytes > 0 && u0.disk_used_bytes <= u0.disk_total_bytes);
	const char *use[] = { "sh", "-c", "dd if=/dev/zero of=/dev/shm/u bs=1M count=16 2>/dev/null; "
				     "dd if=/dev/zero of=/root/u bs=1M count=16 2>/dev/null; sync; "
				     "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", NULL };
	struct space_exec_options ue = SPACE_EXEC_OPTIONS_INIT;
	ue.argv = use;
	CHECK(space_sandbox_exec(sb, &ue, NULL) == 0);
	CHECK(space_sandbox_get_usage(sb, &u1) == 0);
	CHECK(u1.cpu_ns > u0.cpu_ns && u1.memory_bytes >= u0.memory_bytes + (8u << 20) &&
	      u1.disk_used_bytes >= u0.disk_used_bytes + (8u << 20) && u1.time_ms >= u0.time_ms);
	if (!(u1.memory_bytes >= u0.memory_bytes + (8u << 20)) || !(u1.disk_used_bytes >= u0.disk_used_bytes + (8u << 20)))
		fprintf(stderr, "usage before/after: memory %llu/%llu disk %llu/%llu cpu %llu/%llu\n",
			(unsigned long long)u0.memory_bytes, (unsigned long long)u1.memory_bytes,
			(unsigned long long)u0.disk_used_bytes, (unsigned long long)u1.disk_used_bytes,
			(unsigned long long)u0.cpu_ns, (unsigned long long)u1.cpu_ns);
	const char *clean[] = { "rm", "-f", "/dev/shm/u", "/root/u", NULL };
	ue.argv = clean;
	CHECK(space_sandbox_exec(sb, &ue, NULL) == 0);
	struct space_sandbox_usage us = { .size = 8 };
	CHECK(space_sandbox_get_usage(sb, &us) == -EINVAL);
	LAST_ERROR(ctx, "space_sandbox_usage");

	/* File stats of the first layout: stat, a read's, and too small ones refused before the read. */
	struct v1_file_stat f1 = { .size = sizeof(f1) };
	CHECK(space_sandbox_stat(sb, "/etc/passwd", (struct space_file_stat *)(void *)&f1) == 0 &&
	      S_ISREG(f1.mode) && f1.file_size > 0);
	FILE *tmp = tmpfile();
	CHECK(tmp != NULL);
	if (tmp) {
		struct space_file_stat rs = { .size = 8 };
		CHECK(space_sandbox_read_file_v2(sb, "/etc/passwd", fileno(tmp), NULL, &rs) == -EINVAL);
		struct stat hs;
		CHECK(fstat(fileno(tmp), &hs) == 0 && hs.st_size == 0);
		rs.size = sizeof(rs);
		CHECK(space_sandbox_read_file_v2(sb, "/etc/passwd", fileno(tmp), NULL, &rs) == 0 &&
		      rs.file_size == f1.file_size);
		CHECK(fstat(fileno(tmp), &hs) == 0 && (uint64_t)hs.st_size == f1.file_size);
		fclose(tmp);
	}
	int entries = 0;
	CHECK(space_sandbox_list_dir(sb, "/etc", count_entry, &entries) == 0 && entries > 0);

	/* Snapshot policy and warm info: first layout works, zero size refused. */
	struct v1_snapshot_policy p1 = { .size = sizeof(p1), .every_s = 99 };
	CHECK(space_sandbox_get_snapshot_policy(ctx, space_sandbox_id(sb), (struct space_snapshot_policy *)(void *)&p1) ==
		      0 &&
	      p1.every_s == 0 && p1.size == sizeof(p1));
	struct space_snapshot_policy p0 = { .size = 0 };
	CHECK(space_template_get_snapshot_policy(ctx, api_template(), &p0) == -EINVAL);
	LAST_ERROR(ctx, "SPACE_SNAPSHOT_POLICY_INIT");
	struct v1_template_warm_info w1 = { .size = sizeof(w1), .warm_pool_size = 99 };
	CHECK(space_template_get_warm_info(ctx, api_template(), (struct space_template_warm_info *)(void *)&w1) == 0 &&
	      !w1.has_snapshot && w1.warm_pool_size == 0 && w1.warm_pool_ready == 0);
	struct space_template_warm_info w0 = { .size = 3 };
	CHECK(space_template_get_warm_info(ctx, api_template(), &w0) == -EINVAL);

	/* An interactive process pumped into a first-layout result; an exec step likewise. */
	const char *tru[] = { "true", NULL };
	eo.argv = tru;
	space_process *proc = NULL;
	CHECK(space_process_start(sb, &eo, &proc) == 0);
	struct v1_exec_result pr = { .size = sizeof(pr) };
	int r = 0;
	for (int i = 0; proc && i < 1000 && (r = space_process_pump(proc, (struct space_exec_result *)(void *)&pr)) == 0;
	     i++)
		;
	CHECK(r == 1 && pr.exited && pr.exit_code == 0 && pr.size == sizeof(pr));
	space_process_free(proc);
	struct space_exec_result sr = { .size = 2 };
	char cp[SPACE_CHECKPOINT_ID_MAX] = "x";
	CHECK(space_sandbox_exec_step(sb, &eo, 0, &sr, cp) == -EINVAL);
	struct v1_exec_result s1 = { .size = sizeof(s1) };
	CHECK(space_sandbox_exec_step(sb, &eo, 0, (struct space_exec_result *)(void *)&s1, cp) == 0 && s1.exited &&
	      s1.exit_code == 0 && cp[0] == '\0');
}

static void check_checkpoints(space_ctx *ctx, space_sandbox *sb)
{
	char id[SPACE_CHECKPOINT_ID_MAX];
	CHECK(space_checkpoint_create(sb, "abi", id) == 0);
	struct space_checkpoint_info **cl = NULL;
	size_t n = 0;
	CHECK(space_checkpoint_list(ctx, space_sandbox_id(sb), &cl, &n) == 0 && n == 1 && cl && cl[1] == NULL);
	if (cl && n == 1) {
		const struct v1_checkpoint_info *c = (const void *)cl[0];
		CHECK(OBJECT_OK(cl[0], v1_checkpoint_info, space_checkpoint_info));
		CHECK(!strcmp(c->id, id) && !strcmp(c->name, "abi") && !strcmp(c->kind, "disk") &&
		      !strcmp(c->sandbox_id, space_sandbox_id(sb)) && !strcmp(c->template_name, api_template()) &&
		      c->path[0] == '/' && c->created_ms > 0);
		CHECK(!space_checkpoint_is_automatic(cl[0]));
	}
	space_checkpoint_info_list_free(cl);
	struct space_checkpoint_info *c = NULL;
	CHECK(space_checkpoint_get(ctx, id, &c) == 0 && OBJECT_OK(c, v1_checkpoint_info, space_checkpoint_info) &&
	      !strcmp(c->id, id));
	space_checkpoint_info_free(c);
	/* Found by its name within its sandbox, by its id anywhere: the same object. */
	c = NULL;
	CHECK(space_checkpoint_find(ctx, space_sandbox_id(sb), "abi", &c) == 0 &&
	      OBJECT_OK(c, v1_checkpoint_info, space_checkpoint_info) && !strcmp(c->id, id) && !strcmp(c->name, "abi"));
	space_checkpoint_info_free(c);
	c = NULL;
	CHECK(space_checkpoint_find(ctx, NULL, id, &c) == 0 && c && !strcmp(c->name, "abi"));
	space_checkpoint_info_free(c);
	/* A caller's own struct (as a binding would build one) for the name check. */
	struct space_checkpoint_info mine = { .size = sizeof(mine), .name = "auto-1700000000" };
	CHECK(space_checkpoint_is_automatic(&mine));
	mine.name = "auto-x";
	CHECK(!space_checkpoint_is_automatic(&mine));
	CHECK(!space_checkpoint_is_automatic(NULL));

	/* Fork with options (count 2), and with none (one). */
	struct space_checkpoint_fork_options fo;
	CHECK(space_checkpoint_fork_options_init(&fo, SPACE_CHECKPOINT_FORK_OPTIONS_VERSION) == 0 &&
	      fo.version == SPACE_CHECKPOINT_FORK_OPTIONS_VERSION && fo.count == 0);
	CHECK(space_checkpoint_fork_options_init(&fo, SPACE_CHECKPOINT_FORK_OPTIONS_VERSION + 1) == -EINVAL);
	fo.count = 2;
	space_sandbox *forks[4] = { NULL, NULL, NULL, NULL };
	CHECK(space_checkpoint_fork(ctx, id, &fo, forks) == 0 && forks[0] && forks[1] && !forks[2]);
	CHECK(space_checkpoint_fork(ctx, id, NULL, &forks[2]) == 0 && forks[2]);
	/* A lifetime of its own (timeout_s); without one a fork takes its parent's: here none. */
	fo.count = 1;
	fo.timeout_s = 600;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t before_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	CHECK(space_checkpoint_fork(ctx, id, &fo, &forks[3]) == 0 && forks[3]);
	for (int i = 0; i < 4; i++) {
		if (!forks[i])
			continue;
		printf("sandbox %s\n", space_sandbox_id(forks[i]));
		struct space_sandbox_info *fi = NULL;
		CHECK(space_sandbox_get_info(forks[i], &fi) == 0 && fi->status == SPACE_SANDBOX_RUNNING);
		if (fi && i < 3)
			CHECK(fi->expires_ms == 0);
		else if (fi)
			CHECK(fi->expires_ms >= before_ms + 600 * 1000 && fi->expires_ms <= before_ms + 700 * 1000);
		space_sandbox_info_free(fi);
		CHECK(space_sandbox_destroy(forks[i]) == 0);
		space_sandbox_free(forks[i]);
	}
	CHECK(space_checkpoint_remove(ctx, id) == 0);

	struct space_template_snapshot_options so;
	CHECK(space_template_snapshot_options_init(&so, SPACE_TEMPLATE_SNAPSHOT_OPTIONS_VERSION) == 0 &&
	      so.version == SPACE_TEMPLATE_SNAPSHOT_OPTIONS_VERSION && so.cpus == 0 && so.memory_mib == 0);
	CHECK(space_template_snapshot_options_init(&so, 0) == -EINVAL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	space_ctx *ctx = api_ctx(NULL);
	check_objects(ctx);
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "jail";
	space_sandbox *sb = NULL;
	int r = space_sandbox_create(ctx, &so, &sb);
	CHECK(r == 0);
	if (r == 0) {
		sb_id = space_sandbox_id(sb);
		printf("sandbox %s\n", sb_id);
		check_sandbox_objects(ctx, sb);
		check_records(ctx, sb);
		check_checkpoints(ctx, sb);
		CHECK(space_sandbox_destroy(sb) == 0);
		space_sandbox_free(sb);
	} else {
		fprintf(stderr, "create: %s\n", space_ctx_last_error(ctx));
	}
	struct space_sandbox_info **left = NULL;
	size_t n = 99;
	CHECK(space_sandbox_list(ctx, &left, &n) == 0 && n == 0);
	space_sandbox_info_list_free(left);
	space_ctx_free(ctx);
	return api_summary("api-abi");
}
