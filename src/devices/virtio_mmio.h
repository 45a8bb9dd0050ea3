/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The virtio-mmio transport, version 2 (virtio 1.x "modern", section 4.2), shared by every virtio
 * device. A device is one file that fills a `static const struct virtio_dev_ops` and calls
 * virtio_mmio_create(); the transport owns the register file, feature negotiation, the device status
 * state machine, the queues, the interrupt status and the NEEDS_RESET handling.
 *
 * Locking: the transport has one mutex. Every MMIO access takes it, and every virtio_dev_ops callback
 * runs with it held, so a device model needs no lock of its own for state touched only from its ops.
 * The virtio_mmio_* helpers below are for use from inside those callbacks (lock held). A device that
 * completes requests on another thread takes the lock with virtio_mmio_lock()/virtio_mmio_unlock().
 *
 * Failure model: when a device or a queue finds the guest broke the protocol it calls
 * virtio_mmio_fail(): Status gets DEVICE_NEEDS_RESET (0x40), a configuration-change interrupt is
 * raised, and no queue of that device is processed again until the driver resets it (Status = 0).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/mmio_dev.h"
#include "devices/virtqueue.h"

/* Register offsets inside the 0x200-byte window. */
#define VIRTIO_MMIO_MAGIC_VALUE 0x000
#define VIRTIO_MMIO_VERSION 0x004
#define VIRTIO_MMIO_DEVICE_ID 0x008
#define VIRTIO_MMIO_VENDOR_ID 0x00c
#define VIRTIO_MMIO_DEVICE_FEATURES 0x010
#define VIRTIO_MMIO_DEVICE_FEATURES_SEL 0x014
#define VIRTIO_MMIO_DRIVER_FEATURES 0x020
#define VIRTIO_MMIO_DRIVER_FEATURES_SEL 0x024
#define VIRTIO_MMIO_QUEUE_SEL 0x030
#define VIRTIO_MMIO_QUEUE_NUM_MAX 0x034
#define VIRTIO_MMIO_QUEUE_NUM 0x038
#define VIRTIO_MMIO_QUEUE_READY 0x044
#define VIRTIO_MMIO_QUEUE_NOTIFY 0x050
#define VIRTIO_MMIO_INTERRUPT_STATUS 0x060
#define VIRTIO_MMIO_INTERRUPT_ACK 0x064
#define VIRTIO_MMIO_STATUS 0x070
#define VIRTIO_MMIO_QUEUE_DESC_LOW 0x080
#define VIRTIO_MMIO_QUEUE_DESC_HIGH 0x084
#define VIRTIO_MMIO_QUEUE_DRIVER_LOW 0x090
#define VIRTIO_MMIO_QUEUE_DRIVER_HIGH 0x094
#define VIRTIO_MMIO_QUEUE_DEVICE_LOW 0x0a0
#define VIRTIO_MMIO_QUEUE_DEVICE_HIGH 0x0a4
#define VIRTIO_MMIO_SHM_SEL 0x0ac
#define VIRTIO_MMIO_SHM_LEN_LOW 0x0b0
#define VIRTIO_MMIO_SHM_LEN_HIGH 0x0b4
#define VIRTIO_MMIO_CONFIG_GENERATION 0x0fc
#define VIRTIO_MMIO_CONFIG 0x100
#define VIRTIO_MMIO_WINDOW 0x200

#define VIRTIO_MMIO_MAGIC 0x74726976u   /* "virt" */
#define VIRTIO_MMIO_VENDOR 0x43415053u  /* "SPAC" */

/* Status bits. */
#define VIRTIO_STATUS_ACKNOWLEDGE 0x01u
#define VIRTIO_STATUS_DRIVER 0x02u
#define VIRTIO_STATUS_DRIVER_OK 0x04u
#define VIRTIO_STATUS_FEATURES_OK 0x08u
#define VIRTIO_STATUS_NEEDS_RESET 0x40u
#define VIRTIO_STATUS_FAILED 0x80u

/* InterruptStatus bits. */
#define VIRTIO_MMIO_INT_VRING 0x1u
#define VIRTIO_MMIO_INT_CONFIG 0x2u

/* Transport feature bits (the transport adds them to every device's features). */
#define VIRTIO_RING_F_INDIRECT_DESC 28
#define VIRTIO_RING_F_EVENT_IDX 29
#define VIRTIO_F_VERSION_1 32

#define VIRTIO_MMIO_MAX_QUEUES 8u

struct virtio_mmio;

struct virtio_dev_ops {
	uint32_t device_id;  /* virtio device type (2 = block) */
	unsigned num_queues; /* 1..VIRTIO_MMIO_MAX_QUEUES */
	uint16_t queue_max;  /* QueueNumMax, a power of two <= VIRTQUEUE_MAX_SIZE */
	uint32_t config_size; /* bytes of device configuration space at 0x100 (<= 0x100) */

	/* Device-specific feature bits offered to the driver (transport bits are added). */
	uint64_t (*features)(void *dev);
	/* Reads/writes [offset, offset+len) of the configuration space; the range is already checked. */
	void (*config_read)(void *dev, uint32_t offset, void *data, unsigned len);
	void (*config_write)(void *dev, uint32_t offset, const void *data, unsigned len); /* may be NULL */
	/*
	 * The driver notified queue q (ready, DRIVER_OK, device not broken). The device pops chains with
	 * virtio_mmio_pop() and completes them with virtio_mmio_push()/virtio_mmio_notify_used().
	 */
	void (*queue_notify)(void *dev, struct virtio_mmio *t, unsigned q);
	/* The driver reset the device (Status = 0): drop in-flight state. May be NULL. */
	void (*reset)(void *dev);
	/* Frees the device model (after the transport stopped using it). May be NULL. */
	void (*destroy)(void *dev);

	/*
	 * Snapshots (each may be NULL: nothing beyond the transport's state). save writes at most cap
	 * bytes of device state to buf and returns the length or -errno. held tells how many chains of
	 * queue q the device popped and has not used yet: the snapshot rewinds that queue's
	 * last_avail by that many, so a restored device sees them again. restore runs in a new device
	 * created with the same configuration, after the transport state is back; buf is hostile (a
	 * file): check everything. Returns 0 or -errno.
	 */
	int (*save)(void *dev, void *buf, size_t cap);
	uint16_t (*held)(void *dev, unsigned q);
	int (*restore)(void *dev, struct virtio_mmio *t, const void *buf, size_t len);
};

/*
 * Creates a transport for (ops, dev) over guest memory mem, raising interrupts through irq, and fills
 * *ret (ops, dev, size = 0x200, name); the VMM sets base and gsi. Returns 0 or -errno; on failure dev
 * is not freed (the caller still owns it). On success ret->ops->destroy(ret->dev) frees the transport
 * and then calls ops->destroy(dev).
 */
int virtio_mmio_create(const struct virtio_dev_ops *ops, void *dev, const struct guest_mem *mem,
		       struct mmio_irq irq, const char *name, struct mmio_dev *ret);

/*
 * Pops the next chain of queue q (see virtqueue_pop). On a ring violation it fails the device with
 * the queue's reason and returns -EPROTO; the caller just stops.
 */
int virtio_mmio_pop(struct virtio_mmio *t, unsigned q, struct virtq_chain *chain);

/* Publishes a used chain on queue q. */
void virtio_mmio_push(struct virtio_mmio *t, unsigned q, uint16_t head, uint32_t written);

/*
 * After a batch of pushes that started when the used index was old_used: raises the queue
 * interrupt if the driver asked for one.
 */
void virtio_mmio_notify_used(struct virtio_mmio *t, unsigned q, uint16_t old_used);

/* The queue's current used index (take it before a batch, pass it to virtio_mmio_notify_used). */
uint16_t virtio_mmio_used_idx(const struct virtio_mmio *t, unsigned q);

/* See virtqueue_enable_notify(). */
bool virtio_mmio_enable_notify(struct virtio_mmio *t, unsigned q);

/* Negotiated features (valid once FEATURES_OK is set). */
uint64_t virtio_mmio_features(const struct virtio_mmio *t);

/* Marks the device NEEDS_RESET for a static reason and raises a configuration interrupt. */
void virtio_mmio_fail(struct virtio_mmio *t, const char *why);

/* Whether the device is marked NEEDS_RESET, and why (static string or NULL). */
bool virtio_mmio_broken(const struct virtio_mmio *t, const char **ret_why);

/* Bumps ConfigGeneration and raises a configuration-change interrupt. */
void virtio_mmio_config_changed(struct virtio_mmio *t);

/* For completions from another thread: the transport lock. */
void virtio_mmio_lock(struct virtio_mmio *t);
void virtio_mmio_unlock(struct virtio_mmio *t);

/* ---- snapshots (src/vmm/snapshot.c) ---- */

#define VIRTIO_MMIO_DEV_STATE_MAX 4096u

struct virtio_mmio_queue_state {
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint16_t num, last_avail, used_idx;
	uint8_t ready, reserved;
};

/* The transport's registers and queues (fixed layout: it is written to snapshot files as is). */
struct virtio_mmio_state {
	uint32_t device_id, num_queues;
	uint64_t device_features, driver_features;
	uint32_t device_features_sel, driver_features_sel, queue_sel, status;
	uint32_t isr, config_generation, broken, dev_len; /* dev_len: device bytes that follow */
	struct virtio_mmio_queue_state q[VIRTIO_MMIO_MAX_QUEUES];
};

/*
 * Fills *st and up to cap bytes of device state at dev_buf (st->dev_len says how many), under the
 * transport lock. The VM must be paused. Returns 0 or -errno.
 */
int virtio_mmio_save(struct virtio_mmio *t, struct virtio_mmio_state *st, void *dev_buf, size_t cap);

/*
 * Takes back a saved state into a freshly created transport of the same device and configuration:
 * refuses (-EINVAL) another device type, queue count or feature set, driver features the device
 * does not offer, and rings that fail the same checks as a driver's setup. Then the device's own
 * bytes (dev_len of them at dev_buf) go to its restore op. Returns 0 or -errno.
 */
int virtio_mmio_restore(struct virtio_mmio *t, const struct virtio_mmio_state *st, const void *dev_buf,
			size_t dev_len);

/* The transport behind an mmio_dev created by virtio_mmio_create (for the VMM's logs and tests). */
struct virtio_mmio *virtio_mmio_from_dev(const struct mmio_dev *d);
