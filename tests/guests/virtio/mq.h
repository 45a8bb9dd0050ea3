/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A polling multi-queue virtio-mmio driver for the net and vsock test guests (vdev.h drives queue 0
 * only): negotiation, several queues of MQ_QSIZE entries, publish + notify, non-blocking used-ring
 * polls. The caller owns the descriptor indices of each queue. Identity-mapped: pointer = address.
 */
#pragma once

#include "vdev.h"

#define MQ_QSIZE 16u
#define MQ_MAX_QUEUES 3u

struct mq_queue {
	struct gv_desc *desc;
	volatile uint16_t *avail; /* flags, idx, ring[MQ_QSIZE], used_event */
	volatile uint8_t *used;   /* flags, idx, ring[MQ_QSIZE] of {id, len} */
	uint16_t avail_idx, used_seen;
};

struct mq_dev {
	struct gv gv; /* base address, for gv_rd/gv_wr */
	struct mq_queue q[MQ_MAX_QUEUES];
};

/*
 * Resets the device at base, checks its type, negotiates VERSION_1 | (want & offered), sets up queues
 * 0..nq-1 and sets DRIVER_OK. Returns NULL or why it failed.
 */
const char *mq_init(struct mq_dev *d, uint64_t base, uint32_t device_id, uint64_t want, unsigned nq);

/* Puts head in queue q's available ring and notifies. */
void mq_publish(struct mq_dev *d, unsigned q, uint16_t head);

/* Takes the next used element of queue q if there is one (no waiting). */
bool mq_take_used(struct mq_dev *d, unsigned q, uint32_t *id, uint32_t *len);

/* One byte of the device configuration space. */
uint8_t mq_config8(const struct mq_dev *d, unsigned off);
