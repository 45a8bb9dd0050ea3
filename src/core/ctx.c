/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "core/internal.h"
#include "store/btrfs.h"
#include "store/pool.h"
#include "util/cleanup.h"
#include "util/util.h"

SPACE_API const char *space_version(void)
{
	return SPACE_VERSION_STRING;
}

SPACE_API const char *space_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case ENOMEDIUM:
		return "state directory not initialized";
	case EMEDIUMTYPE:
		return "not a btrfs filesystem";
	default: {
		const char *s = strerrordesc_np(err);
		return s ? s : "unknown error";
	}
	}
}

/*
 * Last errors, per thread and context. ctx->last_error is written in place by the calls of the thread that
 * entered ctx last (its owner); when another thread enters, the owner's text moves to a small table kept
 * with the context, where space_last_error finds it for that thread. The library's own code keeps writing
 * ctx->last_error directly, and a context is used by one thread at a time, so only the hand-over and the
 * readers take the lock.
 */
#define CTX_KEPT_ERRORS 8

struct ctx_kept_error {
	uint64_t thread;            /* 0: free */
	uint64_t seq;               /* when kept: the oldest goes first */
	char msg[sizeof(((space_ctx *)0)->last_error)];
};

struct ctx_errors {
	pthread_mutex_t lock;
	uint64_t owner;             /* the thread whose error ctx->last_error is; 0: none */
	uint64_t seq;
	struct ctx_kept_error kept[CTX_KEPT_ERRORS];
};

static _Thread_local uint64_t ctx_thread_id;
static _Thread_local unsigned ctx_depth;           /* public calls this thread is inside */
static _Thread_local const space_ctx *ctx_outer;   /* the ctx of the outermost one */
static _Thread_local char ctx_error_copy[sizeof(((space_ctx *)0)->last_error)];

/* Numbers that are never reused, unlike pthread_t or tids of exited threads. */
static uint64_t ctx_thread(void)
{
	static atomic_uint_fast64_t next = 1;
	if (!ctx_thread_id)
		ctx_thread_id = atomic_fetch_add(&next, 1);
	return ctx_thread_id;
}

static struct ctx_kept_error *ctx_kept_find(struct ctx_errors *e, uint64_t thread)
{
	for (size_t i = 0; i < CTX_KEPT_ERRORS; i++)
		if (e->kept[i].thread == thread)
			return &e->kept[i];
	return NULL;
}

/* A slot for thread's kept error: its own, a free one, else the one kept longest ago. */
static struct ctx_kept_error *ctx_kept_slot(struct ctx_errors *e, uint64_t thread)
{
	struct ctx_kept_error *k = ctx_kept_find(e, thread);
	if (!k)
		k = ctx_kept_find(e, 0);
	if (k)
		return k;
	k = &e->kept[0];
	for (size_t i = 1; i < CTX_KEPT_ERRORS; i++)
		if (e->kept[i].seq < k->seq)
			k = &e->kept[i];
	return k;
}

/* Makes the calling thread the owner of ctx->last_error (under e->lock), keeping the previous owner's
 * error for it. clear: the caller starts a call, its error starts empty. */
static void ctx_errors_claim(space_ctx *ctx, bool clear)
{
	struct ctx_errors *e = ctx->errors;
	uint64_t me = ctx_thread();
	if (e->owner != me) {
		if (e->owner && ctx->last_error[0]) {
			struct ctx_kept_error *k = ctx_kept_slot(e, e->owner);
			k->thread = e->owner;
			k->seq = ++e->seq;
			snprintf(k->msg, sizeof(k->msg), "%s", ctx->last_error);
		}
		/* Without clear, a new error of ours follows at once: what we had kept is replaced. */
		struct ctx_kept_error *mine = ctx_kept_find(e, me);
		if (mine)
			mine->thread = 0;
		e->owner = me;
		ctx->last_error[0] = '\0';
	}
	if (clear)
		ctx->last_error[0] = '\0';
}

struct ctx_call ctx_enter(space_ctx *ctx)
{
	if (!ctx)
		return (struct ctx_call){ NULL };
	/* A public function the library calls from inside another on the same ctx keeps the outer error. */
	if (ctx_depth == 0 || ctx_outer != ctx) {
		pthread_mutex_lock(&ctx->errors->lock);
		ctx_errors_claim(ctx, true);
		pthread_mutex_unlock(&ctx->errors->lock);
	}
	if (ctx_depth++ == 0)
		ctx_outer = ctx;
	return (struct ctx_call){ ctx };
}

void ctx_leave(struct ctx_call *call)
{
	if (call->ctx && ctx_depth > 0 && --ctx_depth == 0)
		ctx_outer = NULL;
}

SPACE_API const char *space_last_error(const space_ctx *ctx)
{
	ctx_error_copy[0] = '\0';
	if (!ctx)
		return ctx_error_copy;
	struct ctx_errors *e = ctx->errors;
	uint64_t me = ctx_thread();
	pthread_mutex_lock(&e->lock);
	const struct ctx_kept_error *k = e->owner == me ? NULL : ctx_kept_find(e, me);
	if (e->owner == me)
		snprintf(ctx_error_copy, sizeof(ctx_error_copy), "%s", ctx->last_error);
	else if (k)
		snprintf(ctx_error_copy, sizeof(ctx_error_copy), "%s", k->msg);
	pthread_mutex_unlock(&e->lock);
	return ctx_error_copy;
}

SPACE_API int space_ctx_new(const struct space_ctx_options *opts_in, space_ctx **ret_ctx)
{
	if (!ret_ctx)
		return -EINVAL;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	const struct space_ctx_options *opts = NULL;
	if (opts_in) {
		int r = opts_ctx_load(opts_in, &o);
		if (r < 0)
			return r;
		opts = &o;
	}
	_cleanup_free_ space_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	_cleanup_free_ struct ctx_errors *errors = calloc(1, sizeof(*errors));
	if (!errors || pthread_mutex_init(&errors->lock, NULL) != 0)
		return -ENOMEM;
	/* Operator settings from the environment are read with secure_getenv: a setuid or otherwise
	 * AT_SECURE process ignores them (docs/configuration.md lists them all). */
	const char *dir = opts && opts->state_dir ? opts->state_dir : secure_getenv("SPACE_STATE_DIR");
	if (!dir || !*dir)
		dir = SPACE_DEFAULT_STATE_DIR;
	if (dir[0] != '/') {
		/* Relative state dirs would change meaning with the cwd of a daemonized helper. */
		char *abs = realpath(dir, NULL);
		if (abs)
			ctx->state_dir = abs;
		else if (asprintf(&ctx->state_dir, "%s/%s", getcwd(NULL, 0) ?: ".", dir) < 0)
			ctx->state_dir = NULL;
	} else {
		ctx->state_dir = strdup(dir);
	}
	if (!ctx->state_dir)
		return -ENOMEM;
	size_t n = strlen(ctx->state_dir);
	while (n > 1 && ctx->state_dir[n - 1] == '/')
		ctx->state_dir[--n] = '\0';
	if (opts && opts->libexec_dir && !(ctx->libexec_dir = strdup(opts->libexec_dir))) {
		free(ctx->state_dir);
		return -ENOMEM;
	}
	if (opts) {
		ctx->log = opts->log;
		ctx->log_userdata = opts->log_userdata;
		ctx->log_level = opts->log_level;
	}
	if (!ctx->log_level)
		ctx->log_level = SPACE_LOG_INFO;
	ctx->errors = TAKE_PTR(errors);
	*ret_ctx = TAKE_PTR(ctx);
	return 0;
}

SPACE_API void space_ctx_free(space_ctx *ctx)
{
	if (!ctx)
		return;
	store_close(ctx->store);
	free(ctx->state_dir);
	free(ctx->libexec_dir);
	pthread_mutex_destroy(&ctx->errors->lock);
	free(ctx->errors);
	free(ctx);
}

SPACE_API const char *space_ctx_last_error(const space_ctx *ctx)
{
	return space_last_error(ctx);
}

SPACE_API const char *space_ctx_state_dir(const space_ctx *ctx)
{
	return ctx->state_dir;
}

static int ctx_verror(space_ctx *ctx, int err, bool add_why, const char *fmt, va_list ap)
{
	if (!ctx)
		return err;
	/* A call not (yet) marked with CTX_ENTER still files its error under its own thread. */
	pthread_mutex_lock(&ctx->errors->lock);
	ctx_errors_claim(ctx, false);
	pthread_mutex_unlock(&ctx->errors->lock);
	char what[768];
	vsnprintf(what, sizeof(what), fmt, ap);
	if (add_why)
		snprintf(ctx->last_error, sizeof(ctx->last_error), "%s: %s", what, space_strerror(err));
	else
		snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", what);
	ctx_log(ctx, SPACE_LOG_DEBUG, "error: %s", ctx->last_error);
	return err;
}

int ctx_error(space_ctx *ctx, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctx_verror(ctx, err, true, fmt, ap);
	va_end(ap);
	return err;
}

int ctx_error_msg(space_ctx *ctx, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctx_verror(ctx, err, false, fmt, ap);
	va_end(ap);
	return err;
}

void ctx_log(space_ctx *ctx, int level, const char *fmt, ...)
{
	if (!ctx->log || level > ctx->log_level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctx->log(level, msg, ctx->log_userdata);
}

int ctx_state_path(space_ctx *ctx, const char *name, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%s", ctx->state_dir, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int ctx_error_needs_root(space_ctx *ctx, int err, const char *path)
{
	/* Never "not initialized" nor a raw errno: the operator made the directory 0700 on purpose (write
	 * access to the store is a way to root), so the answer is who may use it, not how to repair it. */
	return ctx_error_msg(ctx, err,
			     "%s: %s: the state directory %s is root's alone; this needs root (or the HTTP API of "
			     "`space serve`, with an API key from its operator)",
			     path, strerror(-err), ctx->state_dir);
}

int ctx_store(space_ctx *ctx, struct store **ret)
{
	if (!ctx->store) {
		char db[PATH_MAX];
		int r = ctx_state_path(ctx, "space.db", db, sizeof(db));
		if (r < 0)
			return ctx_error(ctx, r, "state dir %s", ctx->state_dir);
		/* As this process's effective ids would open it: a missing store and a closed one differ. */
		if (faccessat(AT_FDCWD, db, R_OK | W_OK, AT_EACCESS) < 0 && (errno == EACCES || errno == EPERM))
			return ctx_error_needs_root(ctx, -errno, db);
		if (access(db, F_OK) < 0)
			return ctx_error_msg(ctx, -ENOMEDIUM,
					     "state directory %s is not initialized: run `space init` first "
					     "(or pass --state DIR / set SPACE_STATE_DIR)",
					     ctx->state_dir);
		char msg[512];
		r = store_open(db, false, &ctx->store, msg, sizeof(msg));
		if (r == -EACCES || r == -EPERM)
			return ctx_error_needs_root(ctx, r, db);
		if (r < 0)
			return ctx_error_msg(ctx, r, "%s", msg);
	}
	*ret = ctx->store;
	return 0;
}

int ctx_pool(space_ctx *ctx, const char **ret_root)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	_cleanup_free_ char *root = NULL, *image = NULL;
	r = store_meta_get(s, "pool_root", &root);
	if (r < 0)
		return ctx_error(ctx, r == -ENOENT ? -ENOMEDIUM : r, "state directory %s has no pool (run `space init`)",
				 ctx->state_dir);
	if (store_meta_get(s, "loop_image", &image) == 0 && *image && !store_pool_is_mounted(root)) {
		char msg[512];
		if (access(image, F_OK) < 0)
			return ctx_error(ctx, -errno, "loop pool image %s is gone (re-run `space init`)", image);
		ctx_log(ctx, SPACE_LOG_INFO, "mounting loop pool %s on %s", image, root);
		r = store_pool_loop_mount(image, root, msg, sizeof(msg));
		if (r < 0)
			return ctx_error_msg(ctx, r, "%s", msg);
	}
	r = store_btrfs_check(root);
	if (r < 0)
		return ctx_error(ctx, r, "pool %s", root);
	r = store_pool_prepare(root);
	if (r < 0)
		return ctx_error(ctx, r, "prepare pool %s", root);
	snprintf(ctx->pool_root, sizeof(ctx->pool_root), "%s", root);
	*ret_root = ctx->pool_root;
	return 0;
}

/*
 * The helper paths are operator settings: whoever sets them chooses programs the library runs as root, so
 * they come only from the operator's own environment (secure_getenv: never in a setuid/AT_SECURE process)
 * or the context options, never from an API caller (docs/configuration.md).
 */
int ctx_helper_path(space_ctx *ctx, const char *name, char *buf, size_t len)
{
	const char *env = NULL;
	if (!strcmp(name, "space-agent"))
		env = secure_getenv("SPACE_AGENT_PATH");
	else if (!strcmp(name, "space-vmm"))
		env = secure_getenv("SPACE_VMM_PATH");
	else if (!strcmp(name, "space-gateway"))
		env = secure_getenv("SPACE_GATEWAY_PATH");
	else if (!strcmp(name, "space-snapd"))
		env = secure_getenv("SPACE_SNAPD_PATH");
	else if (!strcmp(name, "space-logcap"))
		env = secure_getenv("SPACE_LOGCAP_PATH");
	else if (!strcmp(name, "space-unpack"))
		env = secure_getenv("SPACE_UNPACK_PATH");
	const char *dir = secure_getenv("SPACE_LIBEXEC_DIR");
	int n;
	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (ctx->libexec_dir)
		n = snprintf(buf, len, "%s/%s", ctx->libexec_dir, name);
	else if (dir && *dir)
		n = snprintf(buf, len, "%s/%s", dir, name);
	else
		n = snprintf(buf, len, "%s/%s", SPACE_LIBEXEC_DIR, name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (access(buf, X_OK) < 0)
		return ctx_error(ctx, -errno, "helper %s (%s)", name, buf);
	return 0;
}

int core_new_id(const char *prefix, char *buf, size_t len)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
	uint8_t raw[10];
	int r = util_random_bytes(raw, sizeof(raw));
	if (r < 0)
		return r;
	char enc[17];
	/* 80 bits -> 16 base32 digits, 5 bits each. */
	for (int i = 0; i < 16; i++) {
		int bit = i * 5;
		unsigned v = (unsigned)(raw[bit / 8] << 8 | (bit / 8 + 1 < 10 ? raw[bit / 8 + 1] : 0));
		enc[i] = alphabet[(v >> (11 - bit % 8)) & 31];
	}
	enc[16] = '\0';
	if ((size_t)snprintf(buf, len, "%s%s", prefix, enc) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int ctx_store_finish(space_ctx *ctx, struct store *s, int r, const char *sandbox_id, const char *kind,
		     const char *detail)
{
	if (r == 0)
		r = store_event(s, sandbox_id, kind, detail);
	if (r == 0)
		r = store_commit(s);
	if (r < 0) {
		store_rollback(s);
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	}
	return 0;
}
