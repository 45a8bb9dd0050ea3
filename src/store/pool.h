/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pool: a btrfs filesystem holding templates/, sandboxes/ and checkpoints/. Either a directory on an
 * existing btrfs mount, or a loop pool: an image file formatted btrfs and mounted at <state>/pool.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Smallest loop pool mkfs.btrfs accepts with room to work. */
#define POOL_MIN_LOOP_BYTES (256ull << 20)

/* Creates image (sparse, size bytes) and formats it btrfs. Refuses to overwrite an existing file. */
int store_pool_loop_create(const char *image, uint64_t size, char *errbuf, size_t errlen);

/* Whether mountpoint currently has a btrfs filesystem mounted on it (not just a directory on one). */
bool store_pool_is_mounted(const char *mountpoint);

/* Mounts image at mountpoint through an autoclear loop device (released again on unmount). */
int store_pool_loop_mount(const char *image, const char *mountpoint, char *errbuf, size_t errlen);

/* Unmounts mountpoint; the loop device goes with it. Not mounted is fine. */
int store_pool_unmount(const char *mountpoint);

/* Creates templates/, sandboxes/, checkpoints/ under root. */
int store_pool_prepare(const char *root);
