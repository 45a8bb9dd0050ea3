/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Binds a free loop device to image (LOOP_CTL_GET_FREE + LOOP_CONFIGURE, with autoclear so the device is
 * released when its last user — a mount, or the returned fd — goes away). Writes "/dev/loopN" into
 * ret_dev and returns an open fd of the device (caller closes it after mounting) or -errno.
 */
int util_loop_attach(const char *image, bool read_only, char *ret_dev, size_t devlen);

/*
 * Waits until no loop device is backed by image any more (a loop device with autoclear is released only
 * once the last mount namespace that mounted it is gone, which the kernel finishes asynchronously after
 * the namespace's last process exits). Returns 0, or -ETIMEDOUT.
 */
int util_loop_wait_released(const char *image, int timeout_ms);

/*
 * The same, when the device that was attached is known (dev: "/dev/loopN", as util_loop_attach gave it):
 * only that device is looked at, not every loop device of the host. dev NULL or not of that form: as
 * util_loop_wait_released.
 */
int util_loop_wait_released_dev(const char *image, const char *dev, int timeout_ms);
