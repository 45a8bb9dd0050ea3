/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-net (virtio 1.x, 5.1) over virtio-mmio: one receive queue (0) and one transmit queue (1),
 * VIRTIO_NET_F_MAC, no offloads, no mergeable receive buffers. Each buffer starts with the 12-byte
 * struct virtio_net_hdr.
 *
 * Back-end: a frame-oriented fd (a TAP opened with IFF_TAP | IFF_NO_PI and without IFF_VNET_HDR, or
 * in tests a SOCK_SEQPACKET/SOCK_DGRAM socket): each read() returns one Ethernet frame, each write()
 * sends one. The device never sends the guest's virtio_net_hdr to the back-end: it strips it on
 * transmit and writes a zeroed header (num_buffers = 1) on receive.
 *
 * Receive: a per-device thread reads the back-end only while the guest has a receive buffer posted;
 * without one the frame stays in the back-end (the TAP's own queue drops beyond its length), so the
 * device never buffers guest-bound frames. A frame larger than the posted buffer is dropped.
 * Transmit: each chain is one frame written to the back-end on the notifying vCPU thread; a frame the
 * back-end does not take at once (EAGAIN) is dropped, as a network may.
 *
 * Hostile chains: a transmit chain shorter than the header, or a receive chain whose writable part is
 * shorter than the header, breaks the device (NEEDS_RESET); ring violations are caught by virtqueue.c.
 */
#pragma once

#include <stdint.h>

#include "devices/mmio_dev.h"

#define VIRTIO_ID_NET 1u
#define VIRTIO_NET_QUEUE_SIZE 256u
#define VIRTIO_NET_F_MAC 5
/* Largest frame either way (without the header): 64 KiB covers any MTU the TAP can have. */
#define VIRTIO_NET_MAX_FRAME (64u << 10)

/* The per-buffer header (virtio 1.x: num_buffers is always present). */
struct virtio_net_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_net_hdr) == 12, "virtio-net header layout");

struct virtio_net_config {
	int fd;            /* back-end; dup'ed (the caller keeps its own fd) and made non-blocking */
	uint8_t mac[6];    /* the guest's MAC address, shown in the configuration space */
	/* Called by the receive thread after each wake-up, before it touches guest memory (the VMM
	 * narrows the thread's seccomp filter there); a negative return ends the thread. NULL: none. */
	int (*thread_enter)(void);
};

/* Counters for tests and logs (read them with virtio_net_stats). */
struct virtio_net_stats {
	uint64_t rx_frames, tx_frames;
	uint64_t rx_dropped;  /* frames larger than the guest's buffer */
	uint64_t tx_dropped;  /* frames the back-end refused, or empty or oversized ones */
};

/*
 * Creates the device and its receive thread. On success fills *ret and returns 0; the VMM sets
 * ret->base and ret->gsi. Frees (stopping the thread, closing its fd) through ret->ops->destroy(ret->dev).
 */
int virtio_net_create(const struct virtio_net_config *cfg, const struct guest_mem *mem, struct mmio_irq irq,
		      struct mmio_dev *ret);

/* Copies the counters of the device behind d (created by virtio_net_create). */
void virtio_net_stats(const struct mmio_dev *d, struct virtio_net_stats *ret);
