/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Machine-wide unique host uids for sandboxes and their helpers.
 *
 * Two sandboxes must never share host uids: a jail's root inside is its range's first host uid, a VMM or a
 * gateway runs as its own single uid, and processes of one uid can signal and (when dumpable) trace each
 * other. Several state directories may share one kernel, so the allocation is not in any one store: each
 * allocated slot is a file under UIDALLOC_DIR (on /run, a tmpfs, so a reboot frees everything, as it frees
 * every uid user). A slot file appears with its content in one step (written to a temporary name, then
 * link()ed to the slot's name, which fails if the slot exists), so nobody ever reads a half-written owner.
 * The file holds the owner's description, so a stale slot (its owner gone after a crash) can be found and
 * released: "<state dir> <sandbox id> <kind>" for sandboxes of a store (src/core/uids.c checks the store),
 * "pid <pid> <start time> <kind>" for a process that owns its slot itself (checked against /proc).
 *
 *   ranges:  65536 uids each, bases in [0x40000000, 0x80000000)      jail user namespaces
 *   singles: one uid each, in [0x90000000, 0xa0000000)               space-vmm, space-gateway, helpers
 *
 * All functions return 0 or -errno and need root (they create UIDALLOC_DIR, root-owned 0700).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UIDALLOC_DIR "/run/space-uids"
#define UIDALLOC_RANGE_SIZE 65536u
#define UIDALLOC_OWNER_MAX 255 /* bytes of owner text, without the NUL */

enum uidalloc_kind {
	UIDALLOC_RANGE,  /* 65536 consecutive uids (a jail's user namespace) */
	UIDALLOC_SINGLE, /* one uid (a helper process) */
};

/*
 * Allocates a free slot of kind for owner (text of 1..UIDALLOC_OWNER_MAX bytes without newlines, else
 * -EINVAL / -ENAMETOOLONG) and returns its first uid. -ENOSPC when every slot is taken.
 */
int uidalloc_acquire(enum uidalloc_kind kind, const char *owner, uint32_t *ret_uid);

/* Takes a specific slot (a sandbox re-started on the uid it had). -EEXIST if another owner has it, 0 if
 * taken now or already held with the same owner text; -EINVAL if uid does not start a slot of kind. */
int uidalloc_claim(enum uidalloc_kind kind, uint32_t uid, const char *owner);

/* Replaces the owner text of a held slot atomically (the slot never looks free meanwhile). -ESTALE if its
 * current owner is not old_owner, -ENOENT if the slot is free. */
int uidalloc_set_owner(enum uidalloc_kind kind, uint32_t uid, const char *old_owner, const char *new_owner);

/* Frees the slot that starts at uid when its owner text is owner (NULL: whoever holds it). Free already,
 * or held by another owner: 0, nothing done (a stale record never frees another's slot). */
int uidalloc_release(enum uidalloc_kind kind, uint32_t uid, const char *owner);

/* Reads the owner text of the slot at uid into buf (NUL-terminated, cut to len - 1). -ENOENT if free. */
int uidalloc_owner(enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len);

/*
 * Calls fn for each held slot (in no particular order) with its kind, first uid and owner text; stops at
 * the first negative return of fn and returns it. Also removes temporary files that a writer which
 * crashed between writing and linking left behind (older than a minute). A missing directory is 0.
 */
typedef int (*uidalloc_visit_fn)(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata);
int uidalloc_foreach(uidalloc_visit_fn fn, void *userdata);

/* The slot kind whose uids include uid, and the slot's first uid; false for uids outside both areas. */
bool uidalloc_slot_of(uint32_t uid, enum uidalloc_kind *ret_kind, uint32_t *ret_first);
