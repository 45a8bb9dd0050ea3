/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-blk over virtio-mmio, backed by a host file. */
#pragma once

#include <stdbool.h>

#include "devices/blk_backend.h"
#include "devices/mmio_dev.h"

struct virtio_blk_config {
	const char *path;    /* backing file (raw image), opened by virtio_blk_create */
	bool read_only;      /* VIRTIO_BLK_F_RO; writes fail with VIRTIO_BLK_S_IOERR */
	const char *serial;  /* GET_ID string, at most 20 bytes; NULL = derived from the path */
	/* Writes that find the host's file system full wait while this says so (blk_backend.h); NULL: IOERR. */
	bool (*wait_space)(void *opaque, enum blk_space_event ev);
	void *wait_opaque;
};

/*
 * Creates the device. On success fills *ret (ops, dev, size = 0x200, name) and returns 0; the VMM sets
 * ret->base and ret->gsi before the guest runs. mem must stay valid for the device's lifetime.
 * Frees everything through ret->ops->destroy(ret->dev).
 */
int virtio_blk_create(const struct virtio_blk_config *cfg, const struct guest_mem *mem,
		      struct mmio_irq irq, struct mmio_dev *ret);

/*
 * Same over an already open back-end (tests use one that fails on purpose). Ownership of *be passes to
 * the device on success (closed by destroy); on failure the caller keeps it. serial as above (NULL =
 * "space-blk").
 */
int virtio_blk_create_backend(struct blk_backend *be, const char *serial, const struct guest_mem *mem,
			      struct mmio_irq irq, struct mmio_dev *ret);

/* virtio-blk request types, status values and feature bits (virtio 1.x, 5.2). */
#define VIRTIO_BLK_T_IN 0u
#define VIRTIO_BLK_T_OUT 1u
#define VIRTIO_BLK_T_FLUSH 4u
#define VIRTIO_BLK_T_GET_ID 8u
#define VIRTIO_BLK_T_DISCARD 11u
#define VIRTIO_BLK_T_WRITE_ZEROES 13u
#define VIRTIO_BLK_S_OK 0u
#define VIRTIO_BLK_S_IOERR 1u
#define VIRTIO_BLK_S_UNSUPP 2u
#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_F_DISCARD 13
#define VIRTIO_BLK_ID_BYTES 20u
#define VIRTIO_BLK_QUEUE_SIZE 256u
#define VIRTIO_BLK_SEG_MAX 254u
#define VIRTIO_BLK_SIZE_MAX (1u << 20)
#define VIRTIO_BLK_MAX_DISCARD_SECTORS (1u << 22)
