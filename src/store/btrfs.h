/* SPDX-License-Identifier: Apache-2.0 */
/* btrfs subvolumes through libbtrfsutil (no process spawning: a snapshot is one ioctl). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The quotas of the btrfs holding path: 0 none, 1 simple quotas, 2 full qgroups; -errno. */
enum { STORE_QUOTA_NONE = 0, STORE_QUOTA_SIMPLE = 1, STORE_QUOTA_FULL = 2 };
int store_btrfs_quota_mode(const char *path);

/* Turns on simple quotas (each subvolume is charged for the extents it writes; a snapshot starts at zero)
 * on the btrfs holding path. Idempotent; -EINVAL or -EOPNOTSUPP on a kernel without them (before 6.7). */
int store_btrfs_squota_enable(const char *path);

/* Caps what the subvolume at path may hold (its qgroup's referenced bytes; under simple quotas what it
 * wrote itself). 0 lifts the cap. -ENOTCONN when the file system has no quotas. */
int store_btrfs_qgroup_limit(const char *subvol, uint64_t bytes);

/* The subvolume's quota group: its referenced bytes (under simple quotas: what it wrote itself), as of the
 * last commit of the file system, and its cap (0: none). -ENOENT when it has none (no quotas). */
int store_btrfs_qgroup_usage(const char *subvol, uint64_t *ret_bytes, uint64_t *ret_cap);
