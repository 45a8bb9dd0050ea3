/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Options structs of every version: a struct laid out as an older caller's (only the fields its version
 * had, ending at an inaccessible page, so reading a later field faults) is honoured; version 0 is refused
 * with -EINVAL; a version newer than the library's is refused too (PENDING until issue 15). Also the
 * zero-filled exec options' stdin_fd (issue 15: zero must not mean the host's stdin).
 * Needs $SPACE_STATE_DIR with template $SPACE_API_TEMPLATE and its rootfs tree at $SPACE_API_ROOTFS.
 */
#include <stddef.h>

#include "apitest.h"

/* An old-layout copy of an options struct: the first size bytes of *full, at a guard page. */
#define OLD_COPY(full, size)                                                                         \
	__extension__({                                                                              \
		void *_p = api_old_struct(size);                                                     \
		if (_p)                                                                              \
			memcpy(_p, (full), (size));                                                  \
		(__typeof__(full))_p;                                                                \
	})

static char created[16][32];
static int ncreated;

/* Creates a sandbox from opts (in a child, so a fault reading past an old struct is a failed check, not
 * the end of the test) and opens it in this process. Returns the create's code; *ret is the handle. */
static int create_in_child(space_ctx *ctx, const struct space_sandbox_options *opts, space_sandbox **ret)
{
	int fds[2];
	*ret = NULL;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		space_ctx *c = api_ctx(NULL);
		space_sandbox *sb = NULL;
		char msg[32 + 512] = { 0 };
		int r = space_sandbox_create(c, opts, &sb);
		memcpy(msg, &r, sizeof(r));
		if (r == 0)
			snprintf(msg + sizeof(r), 32, "%s", space_sandbox_id(sb));
		else
			snprintf(msg + sizeof(r), sizeof(msg) - sizeof(r), "%s", space_ctx_last_error(c));
		_exit(write(fds[1], msg, sizeof(msg)) == (ssize_t)sizeof(msg) ? 0 : 1);
	}
	close(fds[1]);
	char msg[32 + 512];
	int r = API_CRASHED, st;
	if (read(fds[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg)) {
		memcpy(&r, msg, sizeof(r));
		msg[sizeof(msg) - 1] = '\0';
	}
	close(fds[0]);
	waitpid(pid, &st, 0);
	if (r == 0) {
		printf("sandbox %s\n", msg + sizeof(r));
		if (ncreated < 16)
			snprintf(created[ncreated++], 32, "%s", msg + sizeof(r));
		int o = space_sandbox_open(ctx, msg + sizeof(r), ret);
		CHECK(o == 0);
	} else if (r != API_CRASHED) {
		printf("create (version %u): %s: %s\n", opts->version, space_strerror(r), msg + sizeof(r));
	} else {
		fprintf(stderr, "create (version %u) crashed (read past the struct?)\n", opts->version);
	}
	return r;
}

static void destroy(space_sandbox *sb)
{
	if (!sb)
		return;
	CHECK(space_sandbox_destroy(sb) == 0);
	space_sandbox_free(sb);
}

static void check_sh(space_sandbox *sb, const char *script, const char *want)
{
	struct api_capture out;
	int code = -1;
	int r = api_sh(sb, script, &out, &code);
	bool ok = r == 0 && code == 0 && !strcmp(out.out, want);
	if (!ok)
		fprintf(stderr, "'%s': rc %d exit %d output '%s', wanted '%s'\n", script, r, code, out.out, want);
	CHECK(ok);
}

static void test_sandbox_options(space_ctx *ctx)
{
	static const char *const env[] = { "API_V=old", NULL };
	struct space_sandbox_options full = SPACE_SANDBOX_OPTIONS_INIT;
	full.template_name = api_template();
	full.isolation = "jail";
	full.cpus = 2;
	full.memory_mib = 256;
	full.timeout_s = 3600;
	full.hostname = "api-v1";
	full.env = env;
	/* Later fields set to what would be refused: an old caller's struct does not have them, so a library
	 * that read them anyway would fail (or fault at the guard page first). */
	full.network_policy = "{not json";
	full.snapshot_every_s = 3600;
	full.snapshot_keep = 2;
	full.network_policy_trusted = true;
	static const char *const bad_cidr[] = { "not-a-cidr", NULL };
	full.network_allow_resolve = bad_cidr;
	space_sandbox *sb;
	struct space_sandbox_info *info = NULL;
	struct space_snapshot_policy pol = SPACE_SNAPSHOT_POLICY_INIT;

	/* Version 1: template, isolation, cpus, memory, timeout, hostname, env. */
	size_t v1 = offsetof(struct space_sandbox_options, network_policy);
	struct space_sandbox_options *o = OLD_COPY(&full, v1);
	o->version = 1;
	CHECK(create_in_child(ctx, o, &sb) == 0);
	if (sb) {
		CHECK(space_sandbox_get_info(sb, &info) == 0 && info->cpus == 2 && info->memory_mib == 256 &&
		      info->expires_ms > info->created_ms && !strcmp(info->isolation, "jail"));
		space_sandbox_info_free(info);
		check_sh(sb, "hostname; echo $API_V", "api-v1\nold\n");
		CHECK(space_sandbox_get_snapshot_policy(ctx, space_sandbox_id(sb), &pol) == 0 && pol.every_s == 0);
		destroy(sb);
	}
	/* The same struct as version 0: refused before anything happens. */
	o->version = 0;
	CHECK(create_in_child(ctx, o, &sb) == -EINVAL && !sb);
	api_old_struct_free(o, v1);

	/* Version 2 adds network_policy: read (a bad one is refused), nothing after it. */
	size_t v2 = offsetof(struct space_sandbox_options, snapshot_every_s);
	o = OLD_COPY(&full, v2);
	o->version = 2;
	CHECK(create_in_child(ctx, o, &sb) == -EINVAL && !sb);
	o->network_policy = NULL;
	o->hostname = "api-v2";
	CHECK(create_in_child(ctx, o, &sb) == 0);
	if (sb) {
		check_sh(sb, "hostname", "api-v2\n");
		CHECK(space_sandbox_get_snapshot_policy(ctx, space_sandbox_id(sb), &pol) == 0 && pol.every_s == 0);
		destroy(sb);
	}
	api_old_struct_free(o, v2);

	/* Version 3 adds the snapshot policy. */
	size_t v3 = offsetof(struct space_sandbox_options, network_policy_trusted);
	o = OLD_COPY(&full, v3);
	o->version = 3;
	o->network_policy = NULL;
	o->hostname = "api-v3";
	CHECK(create_in_child(ctx, o, &sb) == 0);
	if (sb) {
		check_sh(sb, "hostname", "api-v3\n");
		CHECK(space_sandbox_get_snapshot_policy(ctx, space_sandbox_id(sb), &pol) == 0 && pol.every_s == 3600 &&
		      pol.keep == 2);
		destroy(sb);
	}
	api_old_struct_free(o, v3);

	/* Version 4 (today's): network_allow_resolve is read. */
	o = OLD_COPY(&full, sizeof(full));
	o->version = 4;
	o->network_policy = NULL;
	CHECK(create_in_child(ctx, o, &sb) == -EINVAL && !sb);
	o->network_allow_resolve = NULL;
	o->snapshot_every_s = 0;
	o->snapshot_keep = 0;
	o->hostname = "api-v4";
	CHECK(create_in_child(ctx, o, &sb) == 0);
	if (sb) {
		check_sh(sb, "hostname", "api-v4\n");
		destroy(sb);
	}
	/* A version the library does not know: its struct may be longer than the library's; refused. */
	o->version = SPACE_SANDBOX_OPTIONS_VERSION + 1;
	int r = create_in_child(ctx, o, &sb);
	PENDING(r == -EINVAL, "space_sandbox_create refuses an options version newer than the library's");
	destroy(sb);
	o->version = UINT32_MAX;
	r = create_in_child(ctx, o, &sb);
	PENDING(r == -EINVAL, "space_sandbox_create refuses options version UINT32_MAX");
	destroy(sb);
	api_old_struct_free(o, sizeof(full));
}

static void test_other_options(space_ctx *ctx)
{
	/* Context options: version 1 is the whole struct; 0 and newer are refused. */
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = getenv("SPACE_STATE_DIR");
	struct space_ctx_options *c = OLD_COPY(&co, sizeof(co));
	space_ctx *x = NULL;
	CHECK_RC(space_ctx_new(c, &x) == 0 && x ? (space_ctx_free(x), 0) : -1, 0);
	c->version = 0;
	CHECK_RC(space_ctx_new(c, &x), -EINVAL);
	c->version = SPACE_CTX_OPTIONS_VERSION + 1;
	int r = SAFE_RC(space_ctx_new(c, &x));
	PENDING(r == -EINVAL, "space_ctx_new refuses a newer options version");
	api_old_struct_free(c, sizeof(co));

	/* Init options version 1 lack identity_map: re-initializing leaves the setting alone. */
	struct space_init_options io = SPACE_INIT_OPTIONS_INIT;
	io.identity_map = SPACE_IDENTITY_MAP_ALLOW; /* not there for a version 1 caller */
	size_t i1 = offsetof(struct space_init_options, identity_map);
	struct space_init_options *i = OLD_COPY(&io, i1);
	i->version = 1;
	int before = space_identity_map_allowed(ctx);
	CHECK(before == 0 || before == 1);
	CHECK_RC(space_init(ctx, i), 0);
	CHECK(space_identity_map_allowed(ctx) == before);
	i->version = 0;
	CHECK_RC(space_init(ctx, i), -EINVAL);
	api_old_struct_free(i, i1);
	i = OLD_COPY(&io, sizeof(io));
	i->version = 2;
	i->identity_map = before ? SPACE_IDENTITY_MAP_ALLOW : SPACE_IDENTITY_MAP_REFUSE;
	CHECK_RC(space_init(ctx, i), 0);
	CHECK(space_identity_map_allowed(ctx) == before);
	i->version = SPACE_INIT_OPTIONS_VERSION + 1;
	r = SAFE_RC(space_init(ctx, i));
	PENDING(r == -EINVAL, "space_init refuses a newer options version");
	api_old_struct_free(i, sizeof(io));

	/* Template import options version 1 lack modules_dir. */
	const char *rootfs = getenv("SPACE_API_ROOTFS");
	struct space_template_import_options to = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	to.name = "api-old-import";
	to.rootfs = rootfs;
	to.modules_dir = "/nonexistent/modules"; /* would be refused (no kernel) if read */
	size_t t1 = offsetof(struct space_template_import_options, modules_dir);
	struct space_template_import_options *t = OLD_COPY(&to, t1);
	t->version = 0;
	CHECK_RC(space_template_import(ctx, t), -EINVAL);
	t->version = 1;
	CHECK(rootfs && *rootfs);
	if (rootfs) {
		CHECK_RC(space_template_import(ctx, t), 0);
		struct space_template_info *ti = NULL;
		CHECK(space_template_get(ctx, "api-old-import", &ti) == 0 && !ti->has_kernel);
		space_template_info_free(ti);
		CHECK(space_template_remove(ctx, "api-old-import", false) == 0);
	}
	api_old_struct_free(t, t1);
	t = OLD_COPY(&to, sizeof(to));
	t->version = SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION + 1;
	t->modules_dir = NULL;
	r = SAFE_RC(space_template_import(ctx, t));
	PENDING(r == -EINVAL, "space_template_import refuses a newer options version");
	if (r == 0)
		space_template_remove(ctx, "api-old-import", false);
	api_old_struct_free(t, sizeof(to));
}

static void test_exec_options(space_ctx *ctx)
{
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "jail";
	space_sandbox *sb = NULL;
	if (space_sandbox_create(ctx, &so, &sb) < 0) {
		fprintf(stderr, "create: %s\n", space_ctx_last_error(ctx));
		CHECK(!"create");
		return;
	}
	printf("sandbox %s\n", space_sandbox_id(sb));
	const char *argv[] = { "sh", "-c", "echo out; cat", NULL };
	struct api_capture cap = { .len = 0 };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = argv;
	eo.output = api_capture_output;
	eo.userdata = &cap;
	struct space_exec_options *e = OLD_COPY(&eo, sizeof(eo));
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	CHECK(space_sandbox_exec(sb, e, &res) == 0 && res.exited && !strcmp(cap.out, "out\n"));
	space_process *p = NULL;
	e->version = 0;
	CHECK(space_sandbox_exec(sb, e, &res) == -EINVAL);
	CHECK(space_process_start(sb, e, &p) == -EINVAL && !p);
	e->version = SPACE_EXEC_OPTIONS_VERSION + 1;
	e->stdin_fd = -1;
	cap.len = 0;
	int r = SAFE_RC(space_sandbox_exec(sb, e, &res));
	PENDING(r == -EINVAL, "space_sandbox_exec refuses a newer options version");
	api_old_struct_free(e, sizeof(eo));

#ifdef SPACE_EXEC_STDIN
	/* Version 1 of the exec options (before flags): stdin_fd -1 is no stdin, as it always was. */
	size_t x1 = offsetof(struct space_exec_options, flags);
	e = OLD_COPY(&eo, x1);
	e->version = 1;
	e->stdin_fd = -1;
	cap.len = 0;
	CHECK(SAFE_RC(space_sandbox_exec(sb, e, &res)) == 0);
	api_old_struct_free(e, x1);

	/* The *_options_init functions: refuse what they cannot fill; write only the version's fields. */
	CHECK(space_sandbox_options_init(NULL, SPACE_SANDBOX_OPTIONS_VERSION) == -EINVAL);
	struct space_sandbox_options sdef;
	CHECK(space_sandbox_options_init(&sdef, 0) == -EINVAL);
	CHECK(space_sandbox_options_init(&sdef, SPACE_SANDBOX_OPTIONS_VERSION + 1) == -EINVAL);
	size_t s1 = offsetof(struct space_sandbox_options, network_policy);
	struct space_sandbox_options *sold = api_old_struct(s1);
	CHECK(sold && SAFE_RC(space_sandbox_options_init(sold, 1)) == 0);
	CHECK(sold && space_sandbox_options_init(sold, 1) == 0 && sold->version == 1);
	if (sold)
		api_old_struct_free(sold, s1);
	struct space_exec_options edef;
	CHECK(space_exec_options_init(&edef, SPACE_EXEC_OPTIONS_VERSION) == 0 && edef.stdin_fd == -1 &&
	      edef.version == SPACE_EXEC_OPTIONS_VERSION);
	CHECK(space_exec_options_init(&edef, 0) == -EINVAL);
#endif

	/* A zero-filled struct (only version and argv set): stdin_fd 0 must not feed the host's stdin in. */
	int fds[2];
	if (pipe(fds) == 0) {
		int saved = dup(0);
		CHECK(write(fds[1], "HOST-STDIN\n", 11) == 11);
		close(fds[1]);
		dup2(fds[0], 0);
		close(fds[0]);
		struct space_exec_options z;
		memset(&z, 0, sizeof(z));
		z.version = SPACE_EXEC_OPTIONS_VERSION;
		z.argv = argv;
		z.output = api_capture_output;
		z.userdata = &cap;
		z.timeout_ms = 10000;
		cap.len = 0;
		cap.out[0] = '\0';
		r = space_sandbox_exec(sb, &z, &res);
		if (r < 0)
			fprintf(stderr, "zero-filled exec: %s: %s\n", space_strerror(r), space_ctx_last_error(ctx));
		CHECK(r == 0 && res.exited);
		PENDING(!strstr(cap.out, "HOST-STDIN"), "a zero-filled space_exec_options does not read the host's stdin");
		dup2(saved, 0);
		close(saved);
	}

	/* Read options: version 1 is the whole struct; max_bytes is honoured; 0 and newer refused. */
	struct space_read_options ro = SPACE_READ_OPTIONS_INIT;
	ro.max_bytes = 4;
	struct space_read_options *rp = OLD_COPY(&ro, sizeof(ro));
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(space_sandbox_read_file_v2(sb, "/etc/passwd", devnull, rp, NULL) == -EFBIG);
	rp->max_bytes = 0;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	CHECK(space_sandbox_read_file_v2(sb, "/etc/passwd", devnull, rp, &st) == 0 && st.file_size > 4);
	rp->version = 0;
	CHECK(space_sandbox_read_file_v2(sb, "/etc/passwd", devnull, rp, NULL) == -EINVAL);
	rp->version = SPACE_READ_OPTIONS_VERSION + 1;
	r = space_sandbox_read_file_v2(sb, "/etc/passwd", devnull, rp, NULL);
	PENDING(r == -EINVAL, "space_sandbox_read_file_v2 refuses a newer options version");
	close(devnull);
	api_old_struct_free(rp, sizeof(ro));
	destroy(sb);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	space_ctx *ctx = api_ctx(NULL);
	test_sandbox_options(ctx);
	test_other_options(ctx);
	test_exec_options(ctx);
	/* Whatever a version the library accepted today left behind. */
	for (int i = 0; i < ncreated; i++)
		space_sandbox_remove(ctx, created[i]);
	space_ctx_free(ctx);
	return api_summary("api-options");
}
