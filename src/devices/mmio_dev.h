/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The contract between the VMM core (src/vmm) and an MMIO device model (src/devices).
 *
 * The VMM owns the address map: it places each device at a window [base, base+size) and a GSI, and
 * routes every KVM_EXIT_MMIO inside that window to the device's ops with the offset relative to base.
 * Accesses are 1, 2, 4 or 8 bytes, little-endian, as the guest issued them. Handlers must never trust
 * the offset/len beyond what they check themselves; they run on a vCPU thread and may be called
 * concurrently from several vCPU threads, so a device serialises itself (its own mutex).
 *
 * A device raises its interrupt through the irq callback the VMM gives it (an irqfd write or
 * KVM_IRQ_LINE pulse, the VMM's choice); the device never issues KVM ioctls itself.
 */
#pragma once

#include <stdint.h>

#include "vmm/guest_mem.h"

struct mmio_dev_ops {
	void (*read)(void *dev, uint64_t offset, void *data, unsigned len);
	void (*write)(void *dev, uint64_t offset, const void *data, unsigned len);
	/* Frees the device. May be NULL. */
	void (*destroy)(void *dev);
};

struct mmio_irq {
	/* Asserts the device's interrupt (edge). Returns 0 or -errno. Thread-safe. */
	int (*trigger)(void *opaque);
	void *opaque;
};

struct virtio_mmio;

struct mmio_dev {
	const struct mmio_dev_ops *ops;
	void *dev;       /* device state passed to ops */
	uint64_t base;   /* guest physical window start, set by the VMM */
	uint64_t size;   /* window size (0x200 for virtio-mmio) */
	uint32_t gsi;    /* interrupt line, set by the VMM */
	const char *name;
	/* The virtio-mmio transport behind the window (set by virtio_mmio_create, kept by devices that
	 * wrap the transport's ops), for snapshots; NULL for other devices. */
	struct virtio_mmio *virtio;
};
