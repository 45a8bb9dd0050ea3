/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public API's growth rules (issue 15, item 5): space_*_options_init for every options struct and
 * version, version 0 and unknown versions refused, older versions read with their own meaning, a
 * zero-filled exec struct of the current version has no stdin, the last error cleared by each call and
 * kept per thread, and the store created 0600 without touching the process umask.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../check.h"
#include "core/internal.h"
#include "space.h"
#include "store/db.h"

/* The library's calls to umask land here (this program links the static archive): the store must make
 * none, since the umask is the whole process's. */
static int umask_calls;
mode_t umask(mode_t mask)
{
	umask_calls++;
	return (mode_t)syscall(SYS_umask, mask);
}

typedef int (*init_fn)(void *opts, uint32_t version);

#define WRAP(n)                                      \
	static int init_##n(void *o, uint32_t v)     \
	{                                            \
		return space_##n##_init(o, v);       \
	}
WRAP(ctx_options)
WRAP(init_options)
WRAP(template_import_options)
WRAP(template_export_options)
WRAP(sandbox_options)
WRAP(exec_options)
WRAP(read_options)

struct kind {
	const char *name;
	init_fn init;
	size_t full;
	uint32_t current;
	size_t sizes[4]; /* bytes of versions 1..current */
};

#define KIND(n, ver, ...) { #n, init_##n, sizeof(struct space_##n), ver, { __VA_ARGS__ } }

static const struct kind kinds[] = {
	KIND(ctx_options, SPACE_CTX_OPTIONS_VERSION, sizeof(struct space_ctx_options)),
	KIND(init_options, SPACE_INIT_OPTIONS_VERSION, offsetof(struct space_init_options, identity_map),
	     sizeof(struct space_init_options)),
	KIND(template_import_options, SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION,
	     offsetof(struct space_template_import_options, modules_dir),
	     offsetof(struct space_template_import_options, image), sizeof(struct space_template_import_options)),
	KIND(template_export_options, SPACE_TEMPLATE_EXPORT_OPTIONS_VERSION, sizeof(struct space_template_export_options)),
	KIND(sandbox_options, SPACE_SANDBOX_OPTIONS_VERSION, offsetof(struct space_sandbox_options, network_policy),
	     offsetof(struct space_sandbox_options, snapshot_every_s),
	     offsetof(struct space_sandbox_options, network_policy_trusted), sizeof(struct space_sandbox_options)),
	KIND(exec_options, SPACE_EXEC_OPTIONS_VERSION, offsetof(struct space_exec_options, flags),
	     sizeof(struct space_exec_options)),
	KIND(read_options, SPACE_READ_OPTIONS_VERSION, sizeof(struct space_read_options)),
};

static void test_options_init(void)
{
	CHECK(SPACE_EXEC_OPTIONS_VERSION == 2);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const struct kind *c = &kinds[k];
		unsigned char buf[512];
		CHECK(c->full <= sizeof(buf));
		CHECK(c->init(NULL, c->current) == -EINVAL);
		memset(buf, 0xa5, sizeof(buf));
		CHECK(c->init(buf, 0) == -EINVAL);
		CHECK(c->init(buf, c->current + 1) == -EINVAL);
		CHECK(buf[0] == 0xa5); /* refused: nothing written */
		for (uint32_t v = 1; v <= c->current; v++) {
			memset(buf, 0xa5, sizeof(buf));
			CHECK(c->init(buf, v) == 0);
			uint32_t got;
			memcpy(&got, buf, sizeof(got));
			CHECK(got == v);
			size_t n = c->sizes[v - 1];
			bool zero = true, untouched = true;
			for (size_t i = sizeof(uint32_t); i < n; i++) {
				bool is_stdin = !strcmp(c->name, "exec_options") &&
						i >= offsetof(struct space_exec_options, stdin_fd) &&
						i < offsetof(struct space_exec_options, stdin_fd) + sizeof(int);
				if (!is_stdin && buf[i])
					zero = false;
			}
			for (size_t i = n; i < sizeof(buf); i++)
				if (buf[i] != 0xa5)
					untouched = false;
			if (!zero || !untouched)
				fprintf(stderr, "%s version %u: zero %d, bytes past it untouched %d\n", c->name, v, zero,
					untouched);
			CHECK(zero);
			CHECK(untouched); /* an older caller's smaller struct is not overrun */
		}
	}
	/* The exec defaults are "no stdin" in every version; the _INIT macro and the function agree. */
	for (uint32_t v = 1; v <= SPACE_EXEC_OPTIONS_VERSION; v++) {
		struct space_exec_options o;
		CHECK(space_exec_options_init(&o, v) == 0 && o.stdin_fd == -1);
	}
	struct space_exec_options m = SPACE_EXEC_OPTIONS_INIT, f;
	CHECK(space_exec_options_init(&f, SPACE_EXEC_OPTIONS_VERSION) == 0);
	CHECK(!memcmp(&m, &f, sizeof(m)));
}

static void test_exec_stdin(void)
{
	struct space_exec_options in, out;
	/* The current version zero-filled: no stdin (version 1 read fd 0, the host's stdin). */
	memset(&in, 0, sizeof(in));
	in.version = SPACE_EXEC_OPTIONS_VERSION;
	CHECK(opts_exec_load(NULL, &in, false, &out) == 0 && !(out.flags & SPACE_EXEC_STDIN));
	CHECK(opts_exec_load(NULL, &in, true, &out) == 0 && !(out.flags & SPACE_EXEC_STDIN));
	/* Version 1 keeps its meaning, 0 included; later fields of a version 1 struct are not read. */
	unsigned char v1[sizeof(struct space_exec_options)];
	memset(v1, 0xff, sizeof(v1));
	memset(v1, 0, offsetof(struct space_exec_options, flags));
	((struct space_exec_options *)v1)->version = 1;
	CHECK(opts_exec_load(NULL, (void *)v1, false, &out) == 0 && (out.flags & SPACE_EXEC_STDIN) && out.stdin_fd == 0);
	((struct space_exec_options *)v1)->stdin_fd = -1;
	CHECK(opts_exec_load(NULL, (void *)v1, false, &out) == 0 && out.flags == 0);
	/* Version 2: the flag says it. */
	in.flags = SPACE_EXEC_STDIN;
	in.stdin_fd = 0;
	CHECK(opts_exec_load(NULL, &in, false, &out) == 0 && (out.flags & SPACE_EXEC_STDIN) && out.stdin_fd == 0);
	in.stdin_fd = -1;
	CHECK(opts_exec_load(NULL, &in, false, &out) == -EINVAL); /* exec needs the descriptor */
	CHECK(opts_exec_load(NULL, &in, true, &out) == 0 && (out.flags & SPACE_EXEC_STDIN)); /* a process: a pipe */
	in.flags = 0;
	in.stdin_fd = 5;
	CHECK(opts_exec_load(NULL, &in, false, &out) == -EINVAL); /* a descriptor without the flag */
	in.stdin_fd = -1;
	in.flags = SPACE_EXEC_USER;
	CHECK(opts_exec_load(NULL, &in, false, &out) == 0 && out.flags == SPACE_EXEC_USER); /* uid/gid as given */
	in.flags = 4;
	CHECK(opts_exec_load(NULL, &in, false, &out) == -EINVAL); /* unknown flag */
	in.flags = 0;
	in.version = 0;
	CHECK(opts_exec_load(NULL, &in, false, &out) == -EINVAL);
	in.version = SPACE_EXEC_OPTIONS_VERSION + 1;
	CHECK(opts_exec_load(NULL, &in, false, &out) == -EINVAL);
}

static void test_old_versions(space_ctx *ctx)
{
	/* A version 1 sandbox struct: the caller's memory past it is not read (later fields zero). */
	unsigned char raw[sizeof(struct space_sandbox_options)];
	memset(raw, 0xff, sizeof(raw));
	memset(raw, 0, offsetof(struct space_sandbox_options, network_policy));
	((struct space_sandbox_options *)raw)->version = 1;
	((struct space_sandbox_options *)raw)->cpus = 3;
	struct space_sandbox_options o;
	CHECK(opts_sandbox_load(ctx, (void *)raw, &o) == 0);
	CHECK(o.version == 1 && o.cpus == 3 && !o.network_policy && !o.snapshot_every_s && !o.network_policy_trusted &&
	      !o.network_allow_resolve);
	/* Version 3: up to snapshot_keep, not the trust fields of version 4. */
	memset(raw, 0xff, sizeof(raw));
	memset(raw, 0, offsetof(struct space_sandbox_options, network_policy_trusted));
	((struct space_sandbox_options *)raw)->version = 3;
	((struct space_sandbox_options *)raw)->snapshot_keep = 7;
	CHECK(opts_sandbox_load(ctx, (void *)raw, &o) == 0 && o.snapshot_keep == 7 && !o.network_policy_trusted);
	/* Template import version 1: no modules_dir. */
	unsigned char ti[sizeof(struct space_template_import_options)];
	memset(ti, 0xff, sizeof(ti));
	memset(ti, 0, offsetof(struct space_template_import_options, modules_dir));
	((struct space_template_import_options *)ti)->version = 1;
	struct space_template_import_options t;
	CHECK(opts_template_import_load(ctx, (void *)ti, &t) == 0 && !t.modules_dir);
}

static void test_version_refused(space_ctx *ctx)
{
	space_ctx *c = NULL;
	struct space_ctx_options co = { .version = 0 };
	CHECK(space_ctx_new(&co, &c) == -EINVAL && !c);
	co.version = SPACE_CTX_OPTIONS_VERSION + 1;
	CHECK(space_ctx_new(&co, &c) == -EINVAL && !c);

	space_sandbox *sb = NULL;
	struct space_sandbox_options so = { .version = 0 };
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	so.version = SPACE_SANDBOX_OPTIONS_VERSION + 1;
	CHECK(space_sandbox_create(ctx, &so, &sb) == -EINVAL && !sb);
	CHECK(strstr(space_last_error(ctx), "space_sandbox_options version") != NULL);

	struct space_template_import_options io = { .version = 0, .name = "x", .rootfs = "/nonexistent" };
	CHECK(space_template_import(ctx, &io) == -EINVAL);
	io.version = SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION + 1;
	CHECK(space_template_import(ctx, &io) == -EINVAL);
	CHECK(strstr(space_last_error(ctx), "space_template_import_options version") != NULL);

	struct space_init_options in = { .version = 0 };
	CHECK(space_init(ctx, &in) == -EINVAL);
	in.version = SPACE_INIT_OPTIONS_VERSION + 1;
	CHECK(space_init(ctx, &in) == -EINVAL);
	CHECK(strstr(space_last_error(ctx), "space_init_options version") != NULL);
}

/* ---- last error ------------------------------------------------------------------------------------ */

struct thread_arg {
	space_ctx *ctx;
	bool empty_at_start, own_error, cleared, one_kept;
};

static void *other_thread(void *p)
{
	struct thread_arg *a = p;
	/* The main thread's error is not this thread's. */
	a->empty_at_start = space_last_error(a->ctx)[0] == '\0';
	a->own_error = space_secret_set(a->ctx, "bad/thread", "v", 1) == -EINVAL &&
		       strstr(space_last_error(a->ctx), "bad/thread") != NULL;
	a->cleared = space_secret_set(a->ctx, "good", "v", 1) == 0 && space_last_error(a->ctx)[0] == '\0';
	(void)space_secret_set(a->ctx, "bad/again", "v", 1);
	a->one_kept = strstr(space_last_error(a->ctx), "bad/again") != NULL;
	return NULL;
}

static void test_last_error(space_ctx *ctx)
{
	CHECK(space_secret_set(ctx, "bad/main", "v", 1) == -EINVAL);
	CHECK(strstr(space_last_error(ctx), "bad/main") != NULL);
	CHECK(!strcmp(space_ctx_last_error(ctx), space_last_error(ctx)));
	/* A success clears it. */
	CHECK(space_secret_set(ctx, "good", "value", 5) == 0);
	CHECK(space_last_error(ctx)[0] == '\0');
	CHECK(space_secret_remove(ctx, "missing") < 0 && strstr(space_last_error(ctx), "missing") != NULL);

	/* Per thread: another thread's calls on the same ctx neither clear nor replace ours. */
	struct thread_arg a = { .ctx = ctx };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, other_thread, &a) == 0);
	pthread_join(t, NULL);
	CHECK(a.empty_at_start);
	CHECK(a.own_error);
	CHECK(a.cleared);
	CHECK(a.one_kept);
	CHECK(strstr(space_last_error(ctx), "missing") != NULL);
	/* Our next call takes over again: its error, then a success clears. */
	CHECK(space_secret_set(ctx, "bad/main2", "v", 1) == -EINVAL && strstr(space_last_error(ctx), "bad/main2"));
	CHECK(space_secret_remove(ctx, "good") == 0 && space_last_error(ctx)[0] == '\0');
	CHECK(space_last_error(NULL)[0] == '\0');
}

static void test_store_mode(const char *dir)
{
	char db[512];
	snprintf(db, sizeof(db), "%s/mode.db", dir);
	mode_t old = umask(0); /* the most permissive: the store must still be private */
	umask_calls = 0;
	struct store *s = NULL;
	char msg[256];
	CHECK(store_open(db, true, &s, msg, sizeof(msg)) == 0);
	CHECK(s && store_meta_set(s, "k", "v") == 0);
	CHECK(umask_calls == 0);
	const char *sfx[] = { "", "-wal", "-shm" };
	for (size_t i = 0; i < 3; i++) {
		char p[600];
		struct stat st;
		snprintf(p, sizeof(p), "%s%s", db, sfx[i]);
		CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
	}
	store_close(s);
	umask(old);
}

int main(void)
{
	char dir[] = "/tmp/space-api-options-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	test_options_init();
	test_exec_stdin();

	/* A state directory with a store (no pool: these calls need none). */
	char db[600];
	snprintf(db, sizeof(db), "%s/space.db", dir);
	struct store *s = NULL;
	char msg[256];
	CHECK(store_open(db, true, &s, msg, sizeof(msg)) == 0);
	store_close(s);
	struct space_ctx_options co;
	CHECK(space_ctx_options_init(&co, SPACE_CTX_OPTIONS_VERSION) == 0);
	co.state_dir = dir;
	space_ctx *ctx = NULL;
	CHECK(space_ctx_new(&co, &ctx) == 0);
	if (ctx) {
		test_old_versions(ctx);
		test_version_refused(ctx);
		test_last_error(ctx);
		space_ctx_free(ctx);
	}
	test_store_mode(dir);

	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	return check_summary("api_options");
}
