/* SPDX-License-Identifier: Apache-2.0 */
/* btrfs subvolumes through libbtrfsutil (no process spawning: a snapshot is one ioctl). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* 0 if path is on a btrfs filesystem, -EMEDIUMTYPE if not, -errno if it cannot be checked. */
int store_btrfs_check(const char *path);

/* Whether path is the root of a subvolume. */
bool store_btrfs_is_subvolume(const char *path);

int store_btrfs_subvolume_create(const char *path);

/* Snapshot of src at dst (dst must not exist), optionally read-only. */
int store_btrfs_snapshot(const char *src, const char *dst, bool read_only);

/* Deletes the subvolume at path and any nested in it. Missing is fine. A read-only subvolume is made
 * writable first (deleting it needs that when not root). */
int store_btrfs_subvolume_delete(const char *path);

/* Marks a subvolume read-only or writable. */
int store_btrfs_set_read_only(const char *path, bool read_only);
