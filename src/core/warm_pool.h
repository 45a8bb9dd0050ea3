/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The warm pool: per template, up to pool_size sandboxes created ahead of time and paused, handed out by
 * space_sandbox_create. Private.
 *
 * A pooled sandbox is an ordinary row (status "paused") whose pool column names its template
 * (store/sandboxes.h). Listings of user sandboxes leave such rows out; handing one out clears the column
 * in the same UPDATE that claims it (store_sandbox_pool_take), so two processes never take the same one.
 */
#pragma once

#include "core/internal.h"

/*
 * Hands out a pooled sandbox when o asks for nothing a pooled one cannot give (no env, hostname, network
 * policy, cpus or memory; the isolation, if given, that of the pool). Resumes it, gives it fresh entropy
 * (and, VM, the time), applies o->timeout_s. Returns 1 with *ret set, 0 when none was handed out (the
 * caller creates one the usual way; a pooled sandbox found broken on the way is removed). Holds the lock
 * of the sandbox it hands out while it readies it; the caller holds no sandbox lock.
 */
int warm_pool_take(space_ctx *ctx, const struct space_sandbox_options *o, space_sandbox **ret);

/* Destroys every pooled sandbox of template (all templates: NULL). Returns how many, or -errno. */
int warm_pool_drain(space_ctx *ctx, const char *template_name);

/* Number of pooled sandboxes of a template (0 on any error). */
uint32_t warm_pool_count(space_ctx *ctx, const char *template_name);

/* The pool_size set for a template (0 when none). */
uint32_t warm_pool_size(space_ctx *ctx, const char *template_name);

/* Takes the lock that lets one filler run at a time per state directory, across processes (so pools never
 * overshoot), blocking until it is free. Returns the fd holding it (close it to release) or -errno. */
int warm_pool_lock(space_ctx *ctx);

/* Forgets a template's pool_size (its row in the meta table). */
int warm_pool_forget(space_ctx *ctx, const char *template_name);
