/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TAP devices for virtio-net: opened as IFF_TAP | IFF_NO_PI without IFF_VNET_HDR, so each read() is
 * one Ethernet frame and each write() sends one (the frame-oriented back-end virtio_net.h expects).
 */
#pragma once

#include <stddef.h>

/*
 * Opens the TAP interface name (created if it does not exist, which needs CAP_NET_ADMIN in the current
 * network namespace; NULL or "" lets the kernel pick "tapN") and brings it up when allowed. Writes the
 * interface's name to ifname_out (when non-NULL, len >= 16). Returns the fd (O_CLOEXEC, non-blocking)
 * or -errno.
 */
int tap_open(const char *name, char *ifname_out, size_t len);

/*
 * Checks that fd is a TAP the device can use: IFF_TAP with IFF_NO_PI and without IFF_VNET_HDR.
 * Writes the interface name to ifname_out (when non-NULL). Returns 0, -ENOTTY for something that is
 * not a TUN/TAP fd, or -EINVAL for a TAP opened with other flags.
 */
int tap_check_fd(int fd, char *ifname_out, size_t len);
