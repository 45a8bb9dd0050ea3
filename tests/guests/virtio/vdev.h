/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal polling virtio-mmio v2 driver for the test guests: finds the device from
 * `virtio_mmio.device=SIZE@ADDR:IRQ` on the command line, negotiates, sets up queue 0 and submits
 * virtio-blk requests. Everything is identity-mapped, so a pointer is its guest physical address.
 * Notifications are handled synchronously by the VMM, so the used ring is checked right after the
 * notify, with a short bounded poll for safety.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "guest.h"

#define GV_MAGIC 0x000
#define GV_VERSION 0x004
#define GV_DEVICE_ID 0x008
#define GV_DEVICE_FEATURES 0x010
#define GV_DEVICE_FEATURES_SEL 0x014
#define GV_DRIVER_FEATURES 0x020
#define GV_DRIVER_FEATURES_SEL 0x024
#define GV_QUEUE_SEL 0x030
#define GV_QUEUE_NUM_MAX 0x034
#define GV_QUEUE_NUM 0x038
#define GV_QUEUE_READY 0x044
#define GV_QUEUE_NOTIFY 0x050
#define GV_INTERRUPT_STATUS 0x060
#define GV_INTERRUPT_ACK 0x064
#define GV_STATUS 0x070
#define GV_QUEUE_DESC 0x080
#define GV_QUEUE_DRIVER 0x090
#define GV_QUEUE_DEVICE 0x0a0
#define GV_CONFIG 0x100

#define GV_S_FEATURES_OK 0x08u
#define GV_S_DRIVER_OK 0x04u
#define GV_S_NEEDS_RESET 0x40u

#define GV_D_NEXT 1u
#define GV_D_WRITE 2u
#define GV_D_INDIRECT 4u

/* Feature bits a guest may ask for. */
#define GV_F_BLK_FLUSH (1ull << 9)
#define GV_F_INDIRECT (1ull << 28)
#define GV_F_VERSION_1 (1ull << 32)

#define GV_QSIZE 8u

struct gv_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct gv {
	uint64_t base;
	struct gv_desc *desc;
	volatile uint16_t *avail;  /* flags, idx, ring[GV_QSIZE], used_event */
	volatile uint16_t *used;   /* flags, idx, then 8-byte elements */
	uint16_t avail_idx, used_idx;
	uint8_t *hdr;              /* 16-byte request header */
	volatile uint8_t *status;  /* request status byte */
};

/* MMIO base of the first virtio-mmio device on the command line, or 0. */
uint64_t gv_find(const uint8_t *boot_params);

/* Resets the device, negotiates VERSION_1 | (want & offered), sets up queue 0, DRIVER_OK.
 * Returns NULL or why it failed. */
const char *gv_init(struct gv *v, uint64_t base, uint64_t want);

uint32_t gv_rd(const struct gv *v, uint32_t off);
void gv_wr(const struct gv *v, uint32_t off, uint32_t val);

void gv_set_desc(struct gv_desc *table, uint16_t i, const volatile void *addr, uint32_t len,
		 uint16_t flags, uint16_t next);

/* Publishes head, notifies, and waits briefly for a used element. True if one arrived. */
bool gv_submit(struct gv *v, uint16_t head);

/* One virtio-blk request (header, optional data, status). Returns the status byte or -1 if unused. */
int gv_blk(struct gv *v, uint32_t type, uint64_t sector, void *buf, uint32_t len, bool device_writes);

/*
 * Whether buf holds sector n of the test disk pattern the host writes: "SPACE-SECTOR-<n>", the number
 * left-justified in 498 columns, then a newline (512 bytes).
 */
bool gv_is_pattern_sector(const uint8_t *buf, uint64_t n);
