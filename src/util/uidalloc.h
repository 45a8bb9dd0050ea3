/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Machine-wide unique host uids for sandboxes and their helpers.
 *
 * Two sandboxes must never share host uids: a jail's root inside is its range's first host uid, a VMM or a
 * gateway runs as its own single uid, and processes of one uid can signal and (when dumpable) trace each
 * other. Several state directories may share one kernel, so the allocation is not in any one store: each
 * allocated slot is a file created with O_EXCL under UIDALLOC_DIR (on /run, a tmpfs, so a reboot frees
 * everything, as it frees every uid user). The file holds the owner's description, so a stale slot (its
 * owner gone after a crash) can be found and released.
 *
 *   ranges:  65536 uids each, bases in [0x40000000, 0x80000000)      jail user namespaces
 *   singles: one uid each, in [0x90000000, 0xa0000000)               space-vmm, space-gateway, helpers
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define UIDALLOC_DIR "/run/space-uids"
#define UIDALLOC_RANGE_SIZE 65536u

enum uidalloc_kind {
	UIDALLOC_RANGE,  /* 65536 consecutive uids (a jail's user namespace) */
	UIDALLOC_SINGLE, /* one uid (a helper process) */
};

/*
 * Allocates a free slot of kind for owner (free text, e.g. "<state dir> <sandbox id> gateway"; at most 255
 * bytes) and returns its first uid. -ENOSPC when every slot is taken, -errno on I/O errors. Root only.
 */
int uidalloc_acquire(enum uidalloc_kind kind, const char *owner, uint32_t *ret_uid);

/* Takes a specific slot (a sandbox re-started on the uid its disk is owned by). -EEXIST if another has it,
 * 0 if taken now or already held with the same owner text. */
int uidalloc_claim(enum uidalloc_kind kind, uint32_t uid, const char *owner);

/* Frees the slot that starts at uid. Missing is fine. */
int uidalloc_release(enum uidalloc_kind kind, uint32_t uid);

/* Reads the owner text of the slot at uid into buf (NUL-terminated). -ENOENT if free. */
int uidalloc_owner(enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len);
