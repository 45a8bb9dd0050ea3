/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-rng (entropy device, virtio 1.x 5.4) over virtio-mmio, fed by the host kernel's CSPRNG. */
#pragma once

#include "devices/mmio_dev.h"

#define VIRTIO_ID_RNG 4u
#define VIRTIO_RNG_QUEUE_SIZE 64u
/* Most bytes served for one request; a larger buffer is filled up to this and reported as such. */
#define VIRTIO_RNG_MAX_REQ (64u << 10)

/*
 * Creates the device. On success fills *ret (ops, dev, size = 0x200, name) and returns 0; the VMM sets
 * ret->base and ret->gsi. mem must stay valid for the device's lifetime. Frees through
 * ret->ops->destroy(ret->dev).
 */
int virtio_rng_create(const struct guest_mem *mem, struct mmio_irq irq, struct mmio_dev *ret);
