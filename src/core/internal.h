/* SPDX-License-Identifier: Apache-2.0 */
/* The context and helpers shared by the library's core files. Private. */
#pragma once

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>

#include "space.h"
#include "core/info.h"
#include "store/db.h"

struct space_ctx {
	char *state_dir;
	char *libexec_dir;          /* NULL: compiled-in default / environment */
	space_log_fn log;
	void *log_userdata;
	int log_level;
	struct store *store;        /* opened on first use */
	char pool_root[PATH_MAX];   /* "" until the pool is known */
	bool vm_usable;             /* doctor_vm_usable() said yes once: hardware does not change */
	bool sync_confined;         /* space-snapd: agent SYNC only through a confined child (autosnap_sync) */
	char last_error[1024];      /* the error of the thread that entered last (ctx.c: ctx_errors) */
	struct ctx_errors *errors;  /* which thread owns last_error; other threads' kept errors */
};

/*
 * Every public function that takes a ctx, a sandbox or a process starts with CTX_ENTER(ctx) (ctx may be
 * NULL): the calling thread's last error on ctx is cleared, unless the thread is already inside a call on
 * the same ctx (a public function the library calls itself keeps the outer call's error). It marks the
 * call for the rest of the enclosing block.
 */
struct ctx_call {
	space_ctx *ctx;
};
struct ctx_call ctx_enter(space_ctx *ctx);
void ctx_leave(struct ctx_call *call);
#define CTX_ENTER(ctx) __attribute__((cleanup(ctx_leave), unused)) struct ctx_call ctx_call_ = ctx_enter(ctx)

/* Versioned options (options.c): a caller's struct of any known version into the current layout, later
 * fields zero; -EINVAL (with a message on ctx, which may be NULL) for version 0 or one newer than ours. */
int opts_copy(space_ctx *ctx, const char *what, void *dst, size_t full, const void *src, const size_t *sizes,
	      size_t nsizes);
int opts_ctx_load(const struct space_ctx_options *src, struct space_ctx_options *dst);
int opts_init_load(space_ctx *ctx, const struct space_init_options *src, struct space_init_options *dst);
int opts_template_import_load(space_ctx *ctx, const struct space_template_import_options *src,
			      struct space_template_import_options *dst);
int opts_template_build_load(space_ctx *ctx, const struct space_template_build_options *src,
			     struct space_template_build_options *dst);
int opts_template_send_load(space_ctx *ctx, const struct space_template_send_options *src,
			    struct space_template_send_options *dst);
int opts_template_receive_load(space_ctx *ctx, const struct space_template_receive_options *src,
			       struct space_template_receive_options *dst);
int opts_template_export_load(space_ctx *ctx, const struct space_template_export_options *src,
			      struct space_template_export_options *dst);
int opts_sandbox_load(space_ctx *ctx, const struct space_sandbox_options *src, struct space_sandbox_options *dst);
int opts_read_load(space_ctx *ctx, const struct space_read_options *src, struct space_read_options *dst);
/* Also checks the stdin fields; dst->flags has SPACE_EXEC_STDIN exactly when the process gets a stdin,
 * whatever the caller's version (process: for space_process_start, which needs no stdin_fd). */
int opts_exec_load(space_ctx *ctx, const struct space_exec_options *src, bool process, struct space_exec_options *dst);

/*
 * Records "<what>: <why>" as the context's last error, where why is strerror(-err) unless the formatted
 * text already says why (pass err as the code to return). Returns err, so callers can
 * `return ctx_error(ctx, r, "open %s", path);`.
 */
int ctx_error(space_ctx *ctx, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Like ctx_error, but the message is exactly the formatted text (it already says why). */
int ctx_error_msg(space_ctx *ctx, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void ctx_log(space_ctx *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Ends a store transaction begun with store_begin(): when r is 0, records the event (kind, detail; for
 * sandbox_id, which may be NULL) and commits; otherwise, or when either fails, rolls back and records the
 * store's error in the context. Returns 0 or the -errno.
 */
int ctx_store_finish(space_ctx *ctx, struct store *s, int r, const char *sandbox_id, const char *kind,
		     const char *detail);

/* Opens the store; -ENOMEDIUM (with a message saying to run `space init`) if the state dir has none; -EACCES
 * or -EPERM (ctx_error_needs_root's message) if this caller may not reach it. */
int ctx_store(space_ctx *ctx, struct store **ret);

/* err (-EACCES or -EPERM met at path, in the state directory) as the one message every caller gets: the
 * state directory is root's alone, so this needs root (or `space serve`'s API). Returns err. */
int ctx_error_needs_root(space_ctx *ctx, int err, const char *path);

/* Opens the store and makes sure the pool is there (re-mounting a loop pool); fills ctx->pool_root. */
int ctx_pool(space_ctx *ctx, const char **ret_root);

/* "<state_dir>/<name>" into buf. */
int ctx_state_path(space_ctx *ctx, const char *name, char *buf, size_t len);

/* Path of a helper binary (space-agent, space-vmm): $SPACE_AGENT_PATH/$SPACE_VMM_PATH, then the
 * context's libexec dir, then $SPACE_LIBEXEC_DIR, then the install location. */
int ctx_helper_path(space_ctx *ctx, const char *name, char *buf, size_t len);

/* Random sandbox/checkpoint id: prefix + 16 lowercase base32 characters (80 bits from getrandom). */
int core_new_id(const char *prefix, char *buf, size_t len);

/* Sandbox rows. */
int core_status_parse(const char *name);
uint64_t core_process_start_time(int pid);
/* Work subvolumes under the pool's .tmp named after their owner, and the sweep of a dead owner's (template.c). */
int core_pool_tmp_path(space_ctx *ctx, const char *root, char *buf, size_t len);
int core_pool_tmp_sweep(space_ctx *ctx, const char *root);
bool core_process_alive(int pid, uint64_t start_time);
/* Moves a sandbox to status along the state machine (store/sandboxes.h) from whatever status may precede
 * it, with its event; -ESTALE (with a message) when its current status may not, -ENOENT when no row. */
int core_sandbox_set_status(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason);
/* The same from the statuses in `from` only (a STORE_ST() set; 0: every allowed predecessor). */
int core_sandbox_transition(space_ctx *ctx, const char *id, unsigned from, enum space_sandbox_status to,
			    const char *reason);
/* Takes the sandbox's lock (store/lock.h) for a multi-step operation: *ret_fd holds it until
 * store_lock_release(). -EBUSY with a message when another operation kept it for the whole wait. */
int core_sandbox_lock(space_ctx *ctx, const char *id, int *ret_fd);
struct store_sandbox;
/* The public view of a row, as stored. */
void core_sandbox_info(const struct store_sandbox *row, struct sandbox_info *ret);
/* The public view of a row as a reap would leave it: a live status whose process is gone (judged only
 * from the pid namespace it was recorded in) reads failed, with the reason. Writes nothing; true when
 * it differs from the row. */
bool core_sandbox_observe(space_ctx *ctx, const struct store_sandbox *row, struct sandbox_info *ret);
/* Marks failed every user sandbox whose process is gone (compare-and-set from the status seen, so a
 * sandbox destroyed meanwhile stays destroyed). Returns how many, or -errno. space_sandbox_reap's half
 * for the dead; lifetimes are its other half. */
int core_sandbox_reap_dead(space_ctx *ctx);
