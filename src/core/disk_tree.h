/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A jail's disk as a directory tree. A template holds its file system twice in its subvolume: rootfs.ext4
 * (a VM's disk, what builds and exports read) and tree/, the same files copied out of it once when the
 * template is made (core/unpack.h: confined, owners kept). A jail sandbox's subvolume is a snapshot of the
 * template's, and its jail binds <sandbox>/tree as / (no loop device, no ext4): its writes go to the pool's
 * btrfs directly, so a full pool is ENOSPC inside and the rest of the disk stays writable, and a simple
 * quota on its subvolume caps what it writes at the template's disk size (EDQUOT inside). Checkpoints,
 * rollbacks and forks snapshot the subvolume as before and take the tree with it. Which of the two is the
 * sandbox's disk follows from its isolation: a jail started on a tree keeps using it; a VM renames a tree
 * it carries aside (tree.stale) so that nothing ever takes the stale copy for its disk.
 * A pool without quotas (a directory pool whose operator has not turned them on, a kernel before 6.7)
 * keeps ext4 images for jails, as before; `space doctor` says which. Private.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

#define DISK_TREE "tree"
#define DISK_TREE_STALE "tree.stale"

/* Whether the pool at root gives jails directory disks: its btrfs has quotas. On a loop pool of ours
 * simple quotas are turned on here; an operator's file system is left as it is. */
bool disk_tree_pool_ready(space_ctx *ctx, const char *root);

/* Adds <subvol>/tree, copied from <subvol>/rootfs.ext4, when the pool gives jails directory disks. */
int disk_tree_add(space_ctx *ctx, const char *root, const char *subvol, space_progress_fn progress,
		  void *progress_userdata);

/* 1 with <subvol>/tree in buf when the subvolume has a tree, 0 when not. */
int disk_tree_of(const char *subvol, char *buf, size_t len);

/* Moves a tree the subvolume carries aside (a VM's disk is its image; the tree would go stale). */
void disk_tree_retire(space_ctx *ctx, const char *subvol);

/* A template made from a VM's checkpoint of it (a booted snapshot): the tree the VM moved aside is the
 * template's own, which no VM writes, and jails (which boot nothing) take it again. 0 or -errno. */
int disk_tree_reinstate(const char *subvol);
