/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Split virtqueues (virtio 1.x, section 2.7) as seen from the device side.
 *
 * Everything in a ring is written by the guest and is hostile: a head or next index out of range, a
 * chain longer than the queue (a loop), a buffer outside guest RAM, an indirect table that is empty,
 * misaligned, oversized, nested or not negotiated, a device-readable buffer after a device-writable
 * one, or an available index that runs more than the queue size ahead of the device. Any of these
 * makes virtqueue_pop() return -EPROTO and leaves a static reason in vq->error; the caller (the
 * transport) then marks the device NEEDS_RESET and stops processing it. No ring or buffer byte is
 * ever read or written outside what guest_mem_ptr() granted.
 *
 * Ring addresses are translated once, at virtqueue_activate(), through the checked translation; the
 * host pointers are kept for the life of the queue (guest RAM is mapped for the life of the VM).
 * Each descriptor is copied out of guest memory once before it is checked and used, so a guest that
 * rewrites a descriptor while the device walks it cannot make a checked value change under it.
 *
 * A virtqueue is not locked: the transport serialises all calls for one device.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmm/guest_mem.h"

/* Largest queue any of our devices offers (QueueNumMax); the spec maximum is 32768. */
#define VIRTQUEUE_MAX_SIZE 1024u
/* Most buffers one chain may hold after indirect tables are expanded. */
#define VIRTQUEUE_MAX_SEGS 1024u

#define VIRTQ_DESC_F_NEXT 1u
#define VIRTQ_DESC_F_WRITE 2u
#define VIRTQ_DESC_F_INDIRECT 4u
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1u
#define VIRTQ_USED_F_NO_NOTIFY 1u

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct virtqueue {
	/* Set by the driver through the transport while the queue is not ready. */
	uint16_t num;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	/* Negotiated ring features, set by the transport at DRIVER_OK/ready time. */
	bool indirect;
	bool event_idx;

	/* Runtime state, valid while ready. */
	bool ready;
	uint16_t last_avail; /* next available-ring slot the device will consume */
	uint16_t used_idx;   /* device's own copy of used->idx; the guest's copy is never read back */
	struct virtq_desc *desc;
	uint16_t *avail;     /* flags, idx, ring[num], used_event */
	uint8_t *used;       /* flags, idx, ring[num] of {id, len}, avail_event */
	const struct guest_mem *mem;
	const char *error;   /* static reason for the last -EPROTO, NULL otherwise */
};

/* One popped request: its device-readable buffers first (nout), then its device-writable ones. */
struct virtq_chain {
	uint16_t head;
	unsigned nout, nin;
	uint64_t out_len, in_len; /* byte totals of each part */
	struct iovec iov[VIRTQUEUE_MAX_SEGS];
};

/* Returns the queue to its reset state (not ready, addresses and size cleared, counters zero). */
void virtqueue_reset(struct virtqueue *vq);

/*
 * Checks the size (power of two, 1..max) and alignment of the three rings, translates them through
 * mem and marks the queue ready. Returns 0 or -EINVAL (vq->error says why; the queue stays not ready).
 */
int virtqueue_activate(struct virtqueue *vq, const struct guest_mem *mem, uint16_t max);

/*
 * Takes the next available chain. Returns 1 and fills *chain, 0 if the ring is empty, -EPROTO if the
 * guest broke the ring (vq->error says how; the queue must not be used again until reset).
 * Zero-length buffers are accepted and dropped from the iovec.
 */
int virtqueue_pop(struct virtqueue *vq, struct virtq_chain *chain);

/* Publishes chain head as used with written bytes. Publication is ordered after the buffer writes. */
void virtqueue_push(struct virtqueue *vq, uint16_t head, uint32_t written);

/*
 * Whether the driver wants an interrupt for the used entries published since used index old_used
 * (honours VIRTQ_AVAIL_F_NO_INTERRUPT or, with EVENT_IDX, used_event).
 */
bool virtqueue_should_notify(const struct virtqueue *vq, uint16_t old_used);

/*
 * Before a device stops polling: with EVENT_IDX publishes avail_event = last_avail so the driver
 * notifies for the next buffer. Returns true if more buffers arrived meanwhile (poll again).
 */
bool virtqueue_enable_notify(struct virtqueue *vq);

/*
 * Copies len bytes starting offset bytes into the readable part of chain into buf.
 * Returns 0 or -EINVAL if the readable part is shorter.
 */
int virtq_chain_read(const struct virtq_chain *chain, uint64_t offset, void *buf, uint64_t len);

/*
 * Fills out[] (at most max entries) with the iovec of [offset, offset+len) of the readable (in =
 * false) or writable (in = true) part. Returns the entry count or -EINVAL if the part is too short.
 */
int virtq_chain_slice(const struct virtq_chain *chain, bool in, uint64_t offset, uint64_t len,
		      struct iovec *out, unsigned max);
