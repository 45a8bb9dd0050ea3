/* SPDX-License-Identifier: Apache-2.0 */
/* The context and helpers shared by the library's core files. Private. */
#pragma once

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>

#include "space.h"
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
	char last_error[1024];
};

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

/* Opens the store; -ENOMEDIUM (with a message saying to run `space init`) if the state dir has none. */
int ctx_store(space_ctx *ctx, struct store **ret);

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
bool core_process_alive(int pid, uint64_t start_time);
int core_sandbox_set_status(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason);
const char *core_sandbox_select(void);
void core_sandbox_row(sqlite3_stmt *st, struct space_sandbox_info *b, uint64_t *ret_pid_start);
