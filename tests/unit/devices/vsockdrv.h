/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A virtio-vsock guest driver for tests, on the fake RAM of vdrv: negotiates, sets up the rx, tx and
 * event queues, keeps rx buffers posted, sends packets on tx and takes packets from rx.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "devices/virtio_vsock.h"
#include "vdrv.h"

#define VSD_QSIZE 64u
#define VSD_RX_BUF 4096u /* payload room of each rx buffer, after the header */

struct vsd_queue {
	uint64_t desc, avail, used;
	uint16_t avail_idx, used_seen;
};

struct vsd {
	struct vdrv d;
	struct vsd_queue q[3];
	uint64_t rx_buf[VSD_QSIZE];
	uint64_t tx_hdr, tx_data;
	uint64_t cid;
	bool no_repost;   /* vsd_recv leaves the buffer with the driver */
	uint16_t last_rx; /* slot of the last buffer vsd_recv took */
};

/* Puts rx buffer slot back in the ring and notifies. */
void vsd_repost(struct vsd *s, uint16_t slot);

/* avail_event the device published in the rx used ring (EVENT_IDX is negotiated). */
uint16_t vsd_rx_avail_event(struct vsd *s);

/* Creates the device listening on path, negotiates, posts every rx buffer. Returns 0 or -errno. */
int vsd_start(struct vsd *s, uint64_t cid, const char *path);
void vsd_stop(struct vsd *s);

/* Sets up queue q of VSD_QSIZE entries in fake RAM (before DRIVER_OK). */
void vsd_queue_setup(struct vsd *s, unsigned q);

/*
 * Sends one packet: the header in one readable descriptor, then data (len bytes) in another if
 * len > 0. hdr_len lets a test send a short header. Returns true if the device used the chain.
 */
bool vsd_send_raw(struct vsd *s, const void *hdr, uint32_t hdr_len, const void *data, uint32_t len);

/* Sends a well-formed header from the guest (src_cid = cid, dst_cid = 2) with buf_alloc/fwd_cnt. */
bool vsd_send(struct vsd *s, uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t flags,
	      const void *data, uint32_t len, uint32_t buf_alloc, uint32_t fwd_cnt);

/*
 * Waits up to timeout_ms for the next rx packet; copies its header and at most max payload bytes,
 * reposts the buffer (unless no_repost). Returns the payload length or -1 on timeout.
 */
int vsd_recv(struct vsd *s, struct virtio_vsock_hdr *h, void *data, uint32_t max, int timeout_ms);
