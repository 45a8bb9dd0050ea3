/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host uids of sandboxes: each sandbox holds one machine-wide slot (src/util/uidalloc.h) from its
 * creation to its destruction, recorded in its row (host_uid): a jail's range (root inside is its first
 * uid) or a VMM's single uid. A restart (rollback) keeps it; a slot whose sandbox no longer exists is
 * reclaimed at `space init`. Also the state directory's identity-map setting. Private.
 *
 * Slot owners are "<state dir> <sandbox id> <jail|vmm>", so any process of any state directory can tell
 * whether a slot is still in use.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

struct sandbox_row;

/*
 * Takes a slot for a sandbox whose row exists (status creating) and records it in the row and in
 * row->host_uid. Refused with a message when no slot is free even after stale ones were reclaimed.
 */
int uids_acquire(space_ctx *ctx, struct sandbox_row *row);

/* Before a restart: makes sure the sandbox still holds the slot its row names (takes it again if a reboot
 * freed it, or a new one if another owner has it meanwhile, recording that). */
int uids_reclaim(space_ctx *ctx, struct sandbox_row *row);

/* Frees the sandbox's slot (only if it still holds it). */
void uids_release(space_ctx *ctx, const struct sandbox_row *row);

/*
 * A single uid for a helper process of a sandbox (kind: a word such as "gateway"), owned as
 * "<state dir> <id> <kind>", so it is reclaimed with the sandbox's row like the sandbox's own slot. The
 * caller records it and frees it with uids_helper_release once the helper is gone.
 */
int uids_helper_acquire(space_ctx *ctx, const char *sandbox_id, const char *kind, uint32_t *ret_uid);
void uids_helper_release(space_ctx *ctx, const char *sandbox_id, const char *kind, uint32_t uid);

/* Frees every slot whose owner no longer exists: a sandbox row destroyed or gone (in any state
 * directory, judged by that directory's store), a process that ended. Returns the number freed. */
int uids_reap_stale(space_ctx *ctx);

/*
 * Whether the state directory lets a jail run with the identity uid map where idmapped mounts fail (root
 * inside = host uid 0, without host capabilities): `space init --allow-identity-map`. Default: refused.
 */
bool uids_identity_map_allowed(space_ctx *ctx);

/* Store meta key of that setting ("allow" when allowed). */
#define UIDS_IDENTITY_MAP_KEY "identity_map"
