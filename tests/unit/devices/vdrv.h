/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A virtio driver written in C for tests: fake guest RAM (two malloc'd regions wrapped in a struct
 * guest_mem), register access through the device's mmio_dev ops, queue 0 set up in that RAM, and
 * helpers to write descriptors and publish chains exactly as a guest would.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "devices/mmio_dev.h"
#include "devices/virtio_mmio.h"

#define VDRV_LOW_SIZE (1u << 20)        /* RAM at gpa 0 */
#define VDRV_HIGH_GPA 0x100000000ull    /* a second RAM region above a hole */
#define VDRV_HIGH_SIZE (64u << 10)
#define VDRV_HOLE_GPA 0x80000000ull     /* not RAM */

struct vdrv {
	struct guest_mem mem;
	struct mmio_dev dev;
	int irqs;                /* interrupts raised */
	uint16_t qsize;
	uint64_t desc, avail, used;
	uint16_t avail_idx;      /* driver's next avail idx */
	uint16_t used_seen;      /* used entries consumed */
	uint64_t next_free;      /* bump allocator inside the low region */
};

/* Allocates the fake RAM and fills mem; irq() returns the struct mmio_irq to give the device. */
int vdrv_init(struct vdrv *d);
struct mmio_irq vdrv_irq(struct vdrv *d);
/* Destroys the device (if any) and frees the RAM. */
void vdrv_done(struct vdrv *d);

uint32_t vdrv_rd(struct vdrv *d, uint64_t off);
void vdrv_wr(struct vdrv *d, uint64_t off, uint32_t v);

/*
 * ACKNOWLEDGE, DRIVER, features (device & want), FEATURES_OK, queue 0 of qsize entries, DRIVER_OK.
 * Returns the Status read back at the end.
 */
uint32_t vdrv_setup(struct vdrv *d, uint64_t want, uint16_t qsize);

void *vdrv_host(struct vdrv *d, uint64_t gpa);
/* A zeroed, 16-byte aligned buffer in low RAM. */
uint64_t vdrv_alloc(struct vdrv *d, uint64_t size);
void vdrv_desc(struct vdrv *d, uint64_t table, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
	       uint16_t next);
/* Puts head in the available ring (idx += 1) without notifying. */
void vdrv_publish(struct vdrv *d, uint16_t head);
/* Sets avail->idx directly. */
void vdrv_set_avail_idx(struct vdrv *d, uint16_t idx);
void vdrv_kick(struct vdrv *d);
/* Takes the next used element; false if none. */
bool vdrv_take_used(struct vdrv *d, uint32_t *id, uint32_t *len);
/* The transport's view: NEEDS_RESET set in Status. */
bool vdrv_needs_reset(struct vdrv *d);

/* Test disk: a temp file of sectors * 512 bytes filled with vdrv_pattern(); path gets its name. */
int vdrv_tmpdisk(char *path, size_t path_len, uint64_t sectors);
static inline uint8_t vdrv_pattern(uint64_t off)
{
	return (uint8_t)((off >> 9) * 7 + (off & 511) + 1);
}
/* Creates a virtio-blk over path into d->dev. */
int vdrv_attach_blk(struct vdrv *d, const char *path, bool read_only, const char *serial);

/*
 * Submits one blk request as the chain header -> data (if len) -> status, directly or through an
 * indirect table, kicks, and returns the status byte (>= 0), or -1 if the device used nothing.
 * *used_len gets the used length when non-NULL.
 */
int vdrv_blk_req(struct vdrv *d, uint32_t type, uint64_t sector, uint64_t data, uint32_t len,
		 bool device_writes, bool indirect, uint32_t *used_len);
