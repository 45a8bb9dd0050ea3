/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error paths of every public call (include/space.h only): NULL and invalid arguments, unknown ids, an
 * uninitialized state directory, a destroyed sandbox's handle; the last error names what failed. Calls that
 * could dereference a bad argument run in a child process (SAFE_RC), so a crash is a failed check.
 * Needs $SPACE_STATE_DIR initialized with a jail-capable template $SPACE_API_TEMPLATE (tests/api/run.sh).
 */
#include <dirent.h>
#include <stdint.h>

#include "apitest.h"

#define NO_SB "sb-aaaaaaaaaaaaaaaa"
#define NO_CP "cp-aaaaaaaaaaaaaaaa"

static int cb_dirent(const char *name, const struct space_file_stat *st, void *userdata)
{
	(void)name, (void)st, (void)userdata;
	return 0;
}

/* last_error says something about the failure: not empty, and names the thing when given. */
static void check_last_error(space_ctx *ctx, const char *mentions, int line)
{
	const char *e = space_ctx_last_error(ctx);
	bool ok = e && *e && (!mentions || strstr(e, mentions));
	if (!ok)
		fprintf(stderr, "line %d: last error \"%s\" should mention \"%s\"\n", line, e ? e : "(null)",
			mentions ? mentions : "(anything)");
	CHECK(ok);
}
#define LAST_ERROR(ctx, mentions) check_last_error(ctx, mentions, __LINE__)

/* A successful call leaves no stale detail behind (issue 15: per-thread last error cleared per call). */
#define LAST_ERROR_CLEARED(ctx)                                                                      \
	PENDING(!*space_ctx_last_error(ctx), "a successful call clears the last error")

static void test_static_calls(void)
{
	CHECK(space_version() && !strcmp(space_version(), SPACE_VERSION_STRING));
	CHECK(!strcmp(space_strerror(0), "success"));
	CHECK(space_strerror(-ENOENT) && space_strerror(ENOENT) && !strcmp(space_strerror(-ENOENT), space_strerror(ENOENT)));
	CHECK(strstr(space_strerror(-ENOMEDIUM), "not initialized"));
	CHECK(space_strerror(-99999) && *space_strerror(-99999));
	CHECK(space_strerror(INT32_MIN + 1) && *space_strerror(INT32_MIN + 1));
	CHECK(!strcmp(space_sandbox_status_name(SPACE_SANDBOX_RUNNING), "running"));
	CHECK(!strcmp(space_sandbox_status_name((enum space_sandbox_status)99), "unknown"));
	CHECK(!strcmp(space_sandbox_status_name((enum space_sandbox_status)-1), "unknown"));
	CHECK(!space_checkpoint_is_automatic(NULL));
	CHECK(space_ctx_last_error(NULL) && !*space_ctx_last_error(NULL));
	/* *_free(NULL) is a no-op. */
	CHECK_RC((space_ctx_free(NULL), 0), 0);
	CHECK_RC((space_sandbox_free(NULL), 0), 0);
	CHECK_RC((space_process_free(NULL), 0), 0);
}

static void test_ctx_new(void)
{
	space_ctx *ctx = NULL;
	CHECK_RC(space_ctx_new(NULL, NULL), -EINVAL);
	struct space_ctx_options o = { .version = 0, .state_dir = "/tmp" };
	CHECK(space_ctx_new(&o, &ctx) == -EINVAL && !ctx);
	o.version = SPACE_CTX_OPTIONS_VERSION + 1;
	int r = space_ctx_new(&o, &ctx);
	PENDING(r == -EINVAL, "space_ctx_new refuses an options version newer than the library's");
	if (r == 0) {
		space_ctx_free(ctx);
		ctx = NULL;
	}
	o.version = SPACE_CTX_OPTIONS_VERSION;
	CHECK(space_ctx_new(&o, &ctx) == 0 && ctx);
	CHECK(ctx && !strcmp(space_ctx_state_dir(ctx), "/tmp"));
	CHECK(ctx && !*space_ctx_last_error(ctx));
	space_ctx_free(ctx);
}

/* Every call that takes a context or a handle, with NULL there (and valid everything else). */
static void test_null_handles(void)
{
	struct space_init_options io = SPACE_INIT_OPTIONS_INIT;
	struct space_pool_info *pi = NULL;
	struct space_template_import_options ti = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	ti.name = "x";
	ti.rootfs = "/nonexistent";
	struct space_template_info **tl = NULL, *tinfo = NULL;
	struct space_sandbox_info **sl = NULL, *sinfo = NULL;
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	struct space_checkpoint_info **cl = NULL, *cinfo = NULL;
	struct space_template_warm_info wi = SPACE_TEMPLATE_WARM_INFO_INIT;
	struct space_snapshot_policy sp = SPACE_SNAPSHOT_POLICY_INIT;
	struct space_secret_info **secl = NULL;
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	const char *argv[] = { "true", NULL };
	eo.argv = argv;
	struct space_exec_result er = SPACE_EXEC_RESULT_INIT;
	struct space_file_stat fst = SPACE_FILE_STAT_INIT;
	space_sandbox *sb = NULL, *sbs[1];
	space_process *p = NULL;
	char *json = NULL, cp[SPACE_CHECKPOINT_ID_MAX];
	size_t n;

	CHECK_RC(space_init(NULL, &io), -EINVAL);
	CHECK_RC(space_identity_map_allowed(NULL), -EINVAL);
	CHECK_RC(space_pool_get_info(NULL, &pi), -EINVAL);
	PENDING_RC(space_pool_unmount(NULL), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	CHECK_RC(space_doctor(NULL, 0, &json), -EINVAL);
	CHECK_RC(space_template_import(NULL, &ti), -EINVAL);
	CHECK_RC(space_template_list(NULL, &tl, &n), -EINVAL);
	CHECK_RC(space_template_get(NULL, "tiny", &tinfo), -EINVAL);
	CHECK_RC(space_template_remove(NULL, "tiny", false), -EINVAL);
	CHECK_RC(space_sandbox_list(NULL, &sl, &n), -EINVAL);
	CHECK_RC(space_sandbox_create(NULL, &so, &sb), -EINVAL);
	CHECK_RC(space_sandbox_open(NULL, NO_SB, &sb), -EINVAL);
	CHECK_RC(space_sandbox_remove(NULL, NO_SB), -EINVAL);
	CHECK_RC(space_sandbox_remove_v2(NULL, NO_SB, 0), -EINVAL);
	PENDING_RC(space_sandbox_reap(NULL), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	CHECK_RC(space_sandbox_read_log(NULL, NO_SB, 1), -EINVAL);
	CHECK_RC(space_checkpoint_list(NULL, NULL, &cl, &n), -EINVAL);
	CHECK_RC(space_checkpoint_get(NULL, NO_CP, &cinfo), -EINVAL);
	CHECK_RC(space_checkpoint_find(NULL, NULL, NO_CP, &cinfo), -EINVAL);
	CHECK_RC(space_checkpoint_remove(NULL, NO_CP), -EINVAL);
	CHECK_RC(space_checkpoint_fork(NULL, NO_CP, NULL, sbs), -EINVAL);
	CHECK_RC(space_template_get_warm_info(NULL, "tiny", &wi), -EINVAL);
	CHECK_RC(space_template_snapshot(NULL, "tiny", NULL), -EINVAL);
	CHECK_RC(space_template_snapshot_drop(NULL, "tiny"), -EINVAL);
	CHECK_RC(space_template_set_warm_pool(NULL, "tiny", 1), -EINVAL);
	CHECK_RC(space_warm_pool_fill(NULL, NULL), -EINVAL);
	CHECK_RC(space_sandbox_get_snapshot_policy(NULL, NO_SB, &sp), -EINVAL);
	CHECK_RC(space_template_set_snapshot_policy(NULL, "tiny", 60, 1), -EINVAL);
	CHECK_RC(space_template_get_snapshot_policy(NULL, "tiny", &sp), -EINVAL);
	CHECK_RC(space_secret_set(NULL, "k", "v", 1), -EINVAL);
	CHECK_RC(space_secret_list(NULL, &secl, &n), -EINVAL);
	CHECK_RC(space_secret_remove(NULL, "k"), -EINVAL);

	/* NULL sandbox handles. */
	CHECK_RC(space_sandbox_get_info(NULL, &sinfo), -EINVAL);
	CHECK_RC(space_sandbox_destroy(NULL), -EINVAL);
	CHECK_RC(space_sandbox_set_timeout(NULL, 10), -EINVAL);
	CHECK_RC(space_sandbox_exec(NULL, &eo, &er), -EINVAL);
	CHECK_RC(space_process_start(NULL, &eo, &p), -EINVAL);
	CHECK_RC(space_sandbox_write_file(NULL, "/x", 0, 0644), -EINVAL);
	CHECK_RC(space_sandbox_read_file(NULL, "/x", 1), -EINVAL);
	CHECK_RC(space_sandbox_read_file_v2(NULL, "/x", 1, NULL, NULL), -EINVAL);
	CHECK_RC(space_sandbox_stat(NULL, "/x", &fst), -EINVAL);
	CHECK_RC(space_sandbox_list_dir(NULL, "/", cb_dirent, NULL), -EINVAL);
	CHECK_RC(space_sandbox_mkdir(NULL, "/x", 0755, false), -EINVAL);
	CHECK_RC(space_sandbox_remove_path(NULL, "/x", false), -EINVAL);
	CHECK_RC(space_sandbox_rename(NULL, "/x", "/y"), -EINVAL);
	CHECK_RC(space_sandbox_pause(NULL), -EINVAL);
	CHECK_RC(space_sandbox_resume(NULL), -EINVAL);
	CHECK_RC(space_checkpoint_create(NULL, NULL, cp), -EINVAL);
	CHECK_RC(space_sandbox_rollback(NULL, NO_CP), -EINVAL);
	CHECK_RC(space_sandbox_exec_step(NULL, &eo, 0, &er, cp), -EINVAL);
	/* Accessors: any answer but a crash. */
	CHECK_RC((space_sandbox_id(NULL), 0), 0);
	CHECK_RC((space_sandbox_log_path(NULL), 0), 0);

	/* NULL process handles. */
	PENDING_RC(space_process_fd(NULL), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	PENDING_RC(space_process_pending(NULL) ? 1 : 0, 0, "space_process_pending(NULL) is false (today: crashes)");
	PENDING_RC(space_process_pid(NULL), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	PENDING_RC(space_process_write_stdin(NULL, "x", 1), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	PENDING_RC(space_process_signal(NULL, 15), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	PENDING_RC(space_process_resize(NULL, 24, 80), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
	PENDING_RC(space_process_pump(NULL, &er), -EINVAL, "NULL handle refused with -EINVAL (today: crashes)");
}

/* NULL outputs and required inputs on a good context. */
static void test_null_args(space_ctx *ctx)
{
	struct space_template_info *tinfo = NULL;
	struct space_sandbox_info **sl = NULL;
	struct space_checkpoint_info *cinfo = NULL;
	struct space_template_warm_info wi = SPACE_TEMPLATE_WARM_INFO_INIT;
	struct space_snapshot_policy sp = SPACE_SNAPSHOT_POLICY_INIT;
	space_sandbox *sb;
	size_t n;

	CHECK_RC(space_init(ctx, NULL), -EINVAL);
	CHECK_RC(space_pool_get_info(ctx, NULL), -EINVAL);
	CHECK_RC(space_doctor(ctx, 0, NULL), -EINVAL);
	CHECK_RC(space_template_import(ctx, NULL), -EINVAL);
	CHECK_RC(space_template_list(ctx, NULL, &n), -EINVAL);
	CHECK_RC(space_template_get(ctx, NULL, &tinfo), -EINVAL);
	CHECK_RC(space_template_get(ctx, api_template(), NULL), -EINVAL);
	CHECK_RC(space_template_remove(ctx, NULL, false), -EINVAL);
	CHECK_RC(space_sandbox_list(ctx, NULL, &n), -EINVAL);
	/* The count is optional: the list is NULL-terminated. */
	CHECK(space_sandbox_list(ctx, &sl, NULL) == 0 && sl);
	space_sandbox_info_list_free(sl);
	CHECK_RC(space_sandbox_create(ctx, NULL, &sb), -EINVAL);
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	CHECK_RC(space_sandbox_create(ctx, &so, NULL), -EINVAL);
	CHECK_RC(space_sandbox_open(ctx, NULL, &sb), -EINVAL);
	CHECK_RC(space_sandbox_open(ctx, NO_SB, NULL), -EINVAL);
	CHECK_RC(space_sandbox_remove(ctx, NULL), -EINVAL);
	CHECK_RC(space_sandbox_read_log(ctx, NULL, 1), -EINVAL);
	CHECK_RC(space_sandbox_read_log(ctx, NO_SB, -1), -EINVAL);
	CHECK_RC(space_checkpoint_list(ctx, NULL, NULL, &n), -EINVAL);
	CHECK_RC(space_checkpoint_get(ctx, NULL, &cinfo), -EINVAL);
	CHECK_RC(space_checkpoint_find(ctx, NULL, NULL, &cinfo), -EINVAL);
	CHECK_RC(space_checkpoint_find(ctx, NULL, NO_CP, NULL), -EINVAL);
	CHECK_RC(space_checkpoint_remove(ctx, NULL), -EINVAL);
	CHECK_RC(space_checkpoint_fork(ctx, NULL, NULL, &sb), -EINVAL);
	CHECK_RC(space_checkpoint_fork(ctx, NO_CP, NULL, NULL), -EINVAL);
	CHECK_RC(space_template_get_warm_info(ctx, NULL, &wi), -EINVAL);
	CHECK_RC(space_template_snapshot(ctx, NULL, NULL), -EINVAL);
	CHECK_RC(space_template_snapshot_drop(ctx, NULL), -EINVAL);
	CHECK_RC(space_template_set_warm_pool(ctx, NULL, 1), -EINVAL);
	CHECK_RC(space_sandbox_get_snapshot_policy(ctx, NULL, &sp), -EINVAL);
	CHECK_RC(space_sandbox_get_snapshot_policy(ctx, NO_SB, NULL), -EINVAL);
	CHECK_RC(space_template_set_snapshot_policy(ctx, NULL, 60, 1), -EINVAL);
	CHECK_RC(space_template_get_snapshot_policy(ctx, NULL, &sp), -EINVAL);
	CHECK_RC(space_secret_set(ctx, NULL, "v", 1), -EINVAL);
	CHECK_RC(space_secret_set(ctx, "k", NULL, 1), -EINVAL);
	CHECK_RC(space_secret_list(ctx, NULL, &n), -EINVAL);
	CHECK_RC(space_secret_remove(ctx, NULL), -EINVAL);
}

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

/* A state directory nobody initialized: -ENOMEDIUM saying to run `space init`, and nothing written. */
static void test_uninitialized(void)
{
	char dir[] = "/tmp/space-api-uninit-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	space_ctx *ctx = api_ctx(dir);
	struct space_sandbox_info **sl = NULL;
	struct space_template_info **tl = NULL, *tinfo = NULL;
	struct space_checkpoint_info **cl = NULL, *cinfo = NULL;
	struct space_pool_info *pi = NULL;
	struct space_template_warm_info wi = SPACE_TEMPLATE_WARM_INFO_INIT;
	struct space_snapshot_policy sp = SPACE_SNAPSHOT_POLICY_INIT;
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = "tiny";
	so.isolation = "jail";
	space_sandbox *sb = NULL;
	size_t n;

#define UNINIT(call)                                                                                 \
	do {                                                                                         \
		int _r = (call);                                                                     \
		if (_r != -ENOMEDIUM)                                                                \
			fprintf(stderr, "uninitialized: %s returned %d, wanted -ENOMEDIUM\n", #call, _r); \
		CHECK(_r == -ENOMEDIUM);                                                             \
		LAST_ERROR(ctx, "space init");                                                       \
	} while (0)
	UNINIT(space_sandbox_list(ctx, &sl, &n));
	UNINIT(space_template_list(ctx, &tl, &n));
	UNINIT(space_template_get(ctx, "tiny", &tinfo));
	UNINIT(space_template_remove(ctx, "tiny", false));
	UNINIT(space_sandbox_create(ctx, &so, &sb));
	UNINIT(space_sandbox_open(ctx, NO_SB, &sb));
	UNINIT(space_sandbox_remove(ctx, NO_SB));
	UNINIT(space_sandbox_reap(ctx));
	UNINIT(space_sandbox_read_log(ctx, NO_SB, 1));
	UNINIT(space_checkpoint_list(ctx, NULL, &cl, &n));
	UNINIT(space_checkpoint_get(ctx, NO_CP, &cinfo));
	UNINIT(space_checkpoint_find(ctx, NULL, NO_CP, &cinfo));
	UNINIT(space_checkpoint_remove(ctx, NO_CP));
	UNINIT(space_checkpoint_fork(ctx, NO_CP, NULL, &sb));
	UNINIT(space_pool_get_info(ctx, &pi));
	UNINIT(space_identity_map_allowed(ctx));
	UNINIT(space_template_get_warm_info(ctx, "tiny", &wi));
	UNINIT(space_template_set_warm_pool(ctx, "tiny", 1));
	UNINIT(space_warm_pool_fill(ctx, NULL));
	UNINIT(space_sandbox_get_snapshot_policy(ctx, NO_SB, &sp));
	UNINIT(space_template_get_snapshot_policy(ctx, "tiny", &sp));
	UNINIT(space_template_set_snapshot_policy(ctx, "tiny", 60, 1));
#undef UNINIT
	/* Nothing was created on the way: not a store, not a pool. */
	CHECK(dir_is_empty(dir));
	space_ctx_free(ctx);
	rmdir(dir);
}

/* Unknown and malformed ids and names on an initialized state directory: -ENOENT (or -EINVAL for a name
 * that cannot be one) with the id in the message, and nothing created. */
static void test_unknown_ids(space_ctx *ctx)
{
	struct space_template_info *tinfo = NULL;
	struct space_checkpoint_info *cinfo = NULL, **cl = NULL;
	struct space_template_warm_info wi = SPACE_TEMPLATE_WARM_INFO_INIT;
	struct space_snapshot_policy sp = SPACE_SNAPSHOT_POLICY_INIT;
	space_sandbox *sb = NULL;
	size_t n = 99;
	int r;

	CHECK(space_sandbox_open(ctx, NO_SB, &sb) == -ENOENT && !sb);
	LAST_ERROR(ctx, NO_SB);
	CHECK(space_sandbox_remove(ctx, NO_SB) == -ENOENT);
	LAST_ERROR(ctx, NO_SB);
	CHECK(space_sandbox_remove_v2(ctx, NO_SB, SPACE_REMOVE_KEEP_EVENTS) == -ENOENT);
	CHECK(space_sandbox_read_log(ctx, NO_SB, 1) == -ENOENT);
	LAST_ERROR(ctx, NO_SB);
	CHECK(space_sandbox_get_snapshot_policy(ctx, NO_SB, &sp) == -ENOENT);
	CHECK(space_checkpoint_get(ctx, NO_CP, &cinfo) == -ENOENT);
	LAST_ERROR(ctx, NO_CP);
	CHECK(space_checkpoint_find(ctx, NULL, NO_CP, &cinfo) == -ENOENT && !cinfo);
	LAST_ERROR(ctx, NO_CP);
	CHECK(space_checkpoint_remove(ctx, NO_CP) == -ENOENT);
	LAST_ERROR(ctx, NO_CP);
	CHECK(space_checkpoint_fork(ctx, NO_CP, NULL, &sb) == -ENOENT && !sb);
	LAST_ERROR(ctx, NO_CP);
	/* Checkpoints of a sandbox that has none (or never existed): an empty list, not an error. */
	CHECK(space_checkpoint_list(ctx, NO_SB, &cl, &n) == 0 && n == 0 && cl && !cl[0]);
	space_checkpoint_info_list_free(cl);
	LAST_ERROR_CLEARED(ctx);

	CHECK(space_template_get(ctx, "no-such-template", &tinfo) == -ENOENT);
	LAST_ERROR(ctx, "no-such-template");
	CHECK(space_template_remove(ctx, "no-such-template", false) == -ENOENT);
	CHECK(space_template_remove(ctx, "no-such-template", true) == -ENOENT);
	CHECK(space_template_get_warm_info(ctx, "no-such-template", &wi) == -ENOENT);
	CHECK(space_template_set_warm_pool(ctx, "no-such-template", 1) == -ENOENT);
	CHECK(space_template_snapshot_drop(ctx, "no-such-template") == -ENOENT);
	CHECK(space_template_set_snapshot_policy(ctx, "no-such-template", 60, 1) == -ENOENT);
	CHECK(space_template_get_snapshot_policy(ctx, "no-such-template", &sp) == -ENOENT);
	CHECK(space_warm_pool_fill(ctx, "no-such-template") == -ENOENT);
	CHECK(space_secret_remove(ctx, "no-such-secret") == -ENOENT);
	LAST_ERROR(ctx, "no-such-secret");

	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = "no-such-template";
	so.isolation = "jail";
	CHECK(space_sandbox_create(ctx, &so, &sb) == -ENOENT && !sb);
	LAST_ERROR(ctx, "no-such-template");
	/* Issue 20: the longest lifetime is one limit (PROTO_MAX_LIFETIME), named in the refusal. */
	so.timeout_s = 366u * 86400 + 1;
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	LAST_ERROR(ctx, "limit of 31622400 s");
	so.timeout_s = 0;

	/* Ids that cannot be ids: refused, never looked up as paths. */
	static const char *const bad[] = { "", "../../../etc", "sb-/../x", "sb-AAAA", "sb-aaaaaaaaaaaaaaaa\n", NULL };
	for (const char *const *b = bad; *b; b++) {
		r = space_sandbox_open(ctx, *b, &sb);
		CHECK(r == -ENOENT || r == -EINVAL);
		r = space_sandbox_remove(ctx, *b);
		CHECK(r == -ENOENT || r == -EINVAL);
		r = space_checkpoint_remove(ctx, *b);
		CHECK(r == -ENOENT || r == -EINVAL);
		r = space_template_remove(ctx, *b, true);
		CHECK(r == -ENOENT || r == -EINVAL);
	}
}

/* Values a call refuses: -EINVAL with a message. */
static void test_invalid_values(space_ctx *ctx)
{
	space_sandbox *sb = NULL;
	char *json = NULL;
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "bogus";
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	LAST_ERROR(ctx, "bogus");
	so.isolation = "jail";
	so.network_policy = "{not json";
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	LAST_ERROR(ctx, NULL);
	so.network_policy = NULL;
	static const char *const bad_cidr[] = { "not-a-cidr", NULL };
	so.network_allow_resolve = bad_cidr;
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	LAST_ERROR(ctx, "not-a-cidr");
	so.network_allow_resolve = NULL;
	so.snapshot_every_s = 604801;
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	LAST_ERROR(ctx, NULL);
	so.snapshot_every_s = 0;

	struct space_template_import_options ti = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	ti.name = "../evil";
	ti.rootfs = "/nonexistent";
	CHECK(space_template_import(ctx, &ti) == -EINVAL);
	LAST_ERROR(ctx, NULL);
	ti.name = "api-missing-rootfs";
	CHECK(space_template_import(ctx, &ti) == -ENOENT);
	LAST_ERROR(ctx, "/nonexistent");
	ti.name = api_template();
	ti.rootfs = "/etc/hostname";
	CHECK(space_template_import(ctx, &ti) < 0);

	CHECK(space_doctor(ctx, 0x80, &json) == -EINVAL && !json);
	CHECK(space_sandbox_remove_v2(ctx, NO_SB, 0x80) == -EINVAL);
	CHECK(space_template_set_warm_pool(ctx, api_template(), 65) == -EINVAL);
	CHECK(space_template_set_snapshot_policy(ctx, api_template(), 604801, 1) == -EINVAL);
	LAST_ERROR(ctx, NULL);
	CHECK(space_template_set_snapshot_policy(ctx, api_template(), 60, 101) == -EINVAL);
	CHECK(space_secret_set(ctx, "../evil", "v", 1) == -EINVAL);
	CHECK(space_secret_set(ctx, "api-secret", "a\nb", 3) == -EINVAL);
	CHECK(space_secret_set(ctx, "api-secret", "", 0) == -EINVAL);
	struct space_checkpoint_fork_options fo = SPACE_CHECKPOINT_FORK_OPTIONS_INIT;
	fo.count = 65;
	CHECK(space_checkpoint_fork(ctx, NO_CP, &fo, &sb) == -EINVAL);
	fo.count = 1;
	fo.timeout_s = SPACE_TIMEOUT_MAX_S + 1; /* the one longest lifetime, forks included */
	CHECK(space_checkpoint_fork(ctx, NO_CP, &fo, &sb) == -EINVAL);
	LAST_ERROR(ctx, "limit of 31622400 s");
	fo.timeout_s = 0;
	fo.version = 0;
	fo.count = 1;
	CHECK(space_checkpoint_fork(ctx, NO_CP, &fo, &sb) == -EINVAL);
	LAST_ERROR(ctx, "space_checkpoint_fork_options");
	struct space_template_snapshot_options tso = { .version = 0 };
	CHECK(space_template_snapshot(ctx, api_template(), &tso) == -EINVAL);
	LAST_ERROR(ctx, "space_template_snapshot_options");
	/* Success, then the stale detail must be gone. */
	struct space_template_info *tinfo = NULL;
	CHECK(space_template_get(ctx, api_template(), &tinfo) == 0 && tinfo && !strcmp(tinfo->name, api_template()));
	space_template_info_free(tinfo);
	LAST_ERROR_CLEARED(ctx);
}

/* Calls on a live sandbox that must fail, then a destroyed sandbox's handle (and a second, stale one). */
static void test_sandbox_handles(space_ctx *ctx)
{
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "jail";
	space_sandbox *sb = NULL, *other = NULL;
	int r = space_sandbox_create(ctx, &so, &sb);
	CHECK(r == 0);
	if (r < 0) {
		fprintf(stderr, "create: %s\n", space_ctx_last_error(ctx));
		return;
	}
	LAST_ERROR_CLEARED(ctx);
	char id[32];
	snprintf(id, sizeof(id), "%s", space_sandbox_id(sb));
	printf("sandbox %s\n", id);
	CHECK(space_sandbox_log_path(sb) && *space_sandbox_log_path(sb));

	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	struct space_exec_result er = SPACE_EXEC_RESULT_INIT;
	space_process *p = NULL;
	CHECK(space_sandbox_exec(sb, NULL, &er) == -EINVAL);
	CHECK(space_sandbox_exec(sb, &eo, &er) == -EINVAL); /* no argv */
	const char *empty_argv[] = { NULL };
	eo.argv = empty_argv;
	CHECK(space_sandbox_exec(sb, &eo, &er) == -EINVAL);
	const char *missing[] = { "/no/such/program", NULL };
	eo.argv = missing;
	CHECK(space_sandbox_exec(sb, &eo, &er) == -ENOENT);
	LAST_ERROR(ctx, "/no/such/program");
	CHECK(space_process_start(sb, NULL, &p) == -EINVAL && !p);
	const char *tru[] = { "true", NULL };
	eo.argv = tru;
	CHECK(space_process_start(sb, &eo, NULL) == -EINVAL);
	eo.version = 0;
	CHECK(space_sandbox_exec(sb, &eo, &er) == -EINVAL);
	eo.version = SPACE_EXEC_OPTIONS_VERSION;
	CHECK(space_sandbox_exec(sb, &eo, NULL) == -EINVAL || space_sandbox_exec(sb, &eo, NULL) == 0);
	CHECK(space_sandbox_exec(sb, &eo, &er) == 0 && er.exited && er.exit_code == 0);
	LAST_ERROR_CLEARED(ctx);

	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	char cp[SPACE_CHECKPOINT_ID_MAX];
	CHECK(space_sandbox_write_file(sb, "/tmp/x", -1, 0644) == -EINVAL);
	CHECK(space_sandbox_write_file(sb, NULL, 0, 0644) == -EINVAL);
	CHECK(space_sandbox_read_file(sb, "/tmp/x", -1) == -EINVAL);
	CHECK(space_sandbox_read_file(sb, "/no/such/file", 1) == -ENOENT);
	LAST_ERROR(ctx, NULL);
	struct space_read_options ro = { .version = 0 };
	CHECK(space_sandbox_read_file_v2(sb, "/etc/passwd", 1, &ro, NULL) == -EINVAL);
	CHECK(space_sandbox_read_file(sb, "/", 1) == -EISDIR || space_sandbox_read_file(sb, "/", 1) == -EINVAL);
	CHECK(space_sandbox_stat(sb, "/no/such/file", &st) == -ENOENT);
	CHECK(space_sandbox_stat(sb, "/", NULL) == -EINVAL);
	CHECK(space_sandbox_list_dir(sb, "/", NULL, NULL) == -EINVAL);
	CHECK(space_sandbox_list_dir(sb, "/no/such/dir", cb_dirent, NULL) == -ENOENT);
	CHECK(space_sandbox_mkdir(sb, "/no/such/dir/x", 0755, false) == -ENOENT);
	CHECK(space_sandbox_remove_path(sb, "/no/such/file", false) == -ENOENT);
	CHECK(space_sandbox_rename(sb, "/no/such/file", "/tmp/y") == -ENOENT);
	CHECK(space_sandbox_set_timeout(sb, 366u * 86400 + 1) == -EINVAL);
	CHECK(space_checkpoint_create(sb, NULL, NULL) == -EINVAL);
	CHECK(space_sandbox_rollback(sb, NULL) == -EINVAL);
	CHECK(space_sandbox_rollback(sb, NO_CP) == -ENOENT);
	LAST_ERROR(ctx, NO_CP);
	/* No checkpoint to roll back to: a failed step says so. */
	const char *fls[] = { "false", NULL };
	eo.argv = fls;
	CHECK(space_sandbox_exec_step(sb, &eo, 0, &er, cp) == -ENOENT);
	LAST_ERROR(ctx, NULL);
	eo.argv = tru;
	CHECK(space_sandbox_exec_step(sb, &eo, 0x80, &er, cp) == -EINVAL);

	/* Paused: exec is -EBUSY, so is set_timeout; pausing twice is a no-op. */
	CHECK(space_sandbox_pause(sb) == 0);
	CHECK(space_sandbox_pause(sb) == 0);
	CHECK(space_sandbox_exec(sb, &eo, &er) == -EBUSY);
	LAST_ERROR(ctx, NULL);
	CHECK(space_sandbox_set_timeout(sb, 60) == -EBUSY);
	CHECK(space_sandbox_resume(sb) == 0);
	CHECK(space_sandbox_resume(sb) == 0);
	CHECK(space_sandbox_exec(sb, &eo, &er) == 0 && er.exited && er.exit_code == 0);

	/* Another sandbox's checkpoint is not a rollback target. */
	CHECK(space_sandbox_open(ctx, id, &other) == 0);
	CHECK(space_checkpoint_create(sb, "api-own", cp) == 0);
	space_sandbox *second = NULL;
	if (space_sandbox_create(ctx, &so, &second) == 0) {
		printf("sandbox %s\n", space_sandbox_id(second));
		CHECK(space_sandbox_rollback(second, cp) == -EINVAL);
		LAST_ERROR(ctx, cp);
		CHECK(space_sandbox_destroy(second) == 0);
		space_sandbox_free(second);
	} else {
		CHECK(!"second sandbox");
	}

	/* Destroyed: every call on the handle fails (no crash, no success), and the stale second handle too. */
	CHECK(space_sandbox_destroy(sb) == 0);
	CHECK(!strcmp(space_sandbox_id(sb), id));
	struct space_sandbox_info *info = NULL;
	r = space_sandbox_get_info(sb, &info);
	CHECK(r == -ENOENT || r == -ESRCH || (r == 0 && info->status == SPACE_SANDBOX_DESTROYED));
	space_sandbox_info_free(info);
	for (space_sandbox **h = (space_sandbox *[]){ sb, other, NULL }; *h; h++) {
		if (!*h)
			continue;
		r = space_sandbox_exec(*h, &eo, &er);
		CHECK(r < 0);
		if (r < 0)
			LAST_ERROR(ctx, NULL);
		CHECK(space_process_start(*h, &eo, &p) < 0 && !p);
		CHECK(space_sandbox_write_file(*h, "/tmp/x", 0, 0644) < 0);
		CHECK(space_sandbox_stat(*h, "/", &st) < 0);
		CHECK(space_sandbox_pause(*h) < 0);
		CHECK(space_sandbox_resume(*h) < 0);
		CHECK(space_sandbox_set_timeout(*h, 60) < 0);
		CHECK(space_checkpoint_create(*h, NULL, cp) < 0);
		r = space_sandbox_destroy(*h);
		CHECK(r == 0 || r == -ENOENT); /* destroying twice: done already */
	}
	CHECK(space_sandbox_open(ctx, id, &other) < 0);
	CHECK(space_sandbox_remove(ctx, id) == -ENOENT);
	space_sandbox_free(sb);
	space_sandbox_free(other);

	/* The checkpoint outlived its sandbox; removing it twice: -ENOENT the second time. */
	CHECK(space_checkpoint_remove(ctx, cp) == 0);
	CHECK(space_checkpoint_remove(ctx, cp) == -ENOENT);
	struct space_sandbox_info **sl = NULL;
	size_t n = 99;
	CHECK(space_sandbox_list(ctx, &sl, &n) == 0 && n == 0 && sl && !sl[0]);
	space_sandbox_info_list_free(sl);
	LAST_ERROR_CLEARED(ctx);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_static_calls();
	test_ctx_new();
	test_null_handles();
	test_uninitialized();
	space_ctx *ctx = api_ctx(NULL);
	test_null_args(ctx);
	test_unknown_ids(ctx);
	test_invalid_values(ctx);
	test_sandbox_handles(ctx);
	space_ctx_free(ctx);
	return api_summary("api-errors");
}
