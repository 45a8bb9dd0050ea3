/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzzes the virtio-mmio transport, the split virtqueue parser and virtio-blk together, as a guest
 * would drive them. Input:
 *   byte 0      options: bit 0 read-only disk, bit 1 no INDIRECT_DESC, bit 2 no EVENT_IDX,
 *               bit 3 skip the standard driver setup (the op stream must do it)
 *   byte 1      log2 of the queue size (mod 9)
 *   u16 n, n bytes   copied to guest RAM at gpa 0 (descriptor table at 0, avail ring at 0x1000,
 *                    used ring at 0x2000, anything else above)
 *   then ops until the input ends (op byte % 7):
 *     0 u16 gpa, u8 len, bytes   write guest RAM (low region, clipped)
 *     1 u8 reg, u32 value        32-bit register write at (reg * 4) % 0x200
 *     2 u16 offset, u8 len       read of len (1, 2, 4 or 8) at offset % 0x200
 *     3 u8 head                  publish head in the avail ring, bump avail idx, notify queue 0
 *     4                          notify queue 0
 *     5 u16 idx                  set avail idx, notify
 *     6                          reset and redo the standard setup
 * Invariants checked: no sanitizer report; a broken device reports NEEDS_RESET in Status.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices/virtio_blk.h"
#include "devices/virtio_mmio.h"

#define LOW_SIZE 0x10000u
#define HIGH_GPA 0x100000ull
#define HIGH_SIZE 0x1000u
#define DESC 0x0u
#define AVAIL 0x1000u
#define USED 0x2000u
#define DISK_BYTES (64u * 512)

struct input {
	const uint8_t *p;
	size_t left;
};

static bool take(struct input *in, void *out, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

static int no_irq(void *opaque)
{
	(void)opaque;
	return 0;
}

static void wr(struct mmio_dev *d, uint64_t off, uint32_t v)
{
	d->ops->write(d->dev, off, &v, 4);
}

static uint32_t rd(struct mmio_dev *d, uint64_t off)
{
	uint32_t v = 0;
	d->ops->read(d->dev, off, &v, 4);
	return v;
}

static void setup(struct mmio_dev *d, uint8_t opts, uint16_t qsize)
{
	uint64_t want = ~0ull;
	if (opts & 2)
		want &= ~(1ull << VIRTIO_RING_F_INDIRECT_DESC);
	if (opts & 4)
		want &= ~(1ull << VIRTIO_RING_F_EVENT_IDX);
	wr(d, VIRTIO_MMIO_STATUS, 0);
	wr(d, VIRTIO_MMIO_STATUS, 3);
	for (uint32_t sel = 0; sel < 2; sel++) {
		wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, sel);
		uint32_t f = rd(d, VIRTIO_MMIO_DEVICE_FEATURES) & (uint32_t)(want >> (32 * sel));
		wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, sel);
		wr(d, VIRTIO_MMIO_DRIVER_FEATURES, f);
	}
	wr(d, VIRTIO_MMIO_STATUS, 0xb);
	wr(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	wr(d, VIRTIO_MMIO_QUEUE_NUM, qsize);
	wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, DESC);
	wr(d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, AVAIL);
	wr(d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, USED);
	wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	wr(d, VIRTIO_MMIO_STATUS, 0xf);
}

static int disk_fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *low, *high;
	struct input in = { data, size };
	uint8_t opts, qlog;
	uint16_t n;

	if (!low) {
		low = aligned_alloc(4096, LOW_SIZE);
		high = aligned_alloc(4096, HIGH_SIZE);
		disk_fd = memfd_create("fuzz-disk", MFD_CLOEXEC);
		if (!low || !high || disk_fd < 0 || ftruncate(disk_fd, DISK_BYTES) < 0)
			abort();
	}
	if (!take(&in, &opts, 1) || !take(&in, &qlog, 1) || !take(&in, &n, 2))
		return 0;
	memset(low, 0, LOW_SIZE);
	memset(high, 0, HIGH_SIZE);
	n = n < in.left ? n : (uint16_t)in.left;
	take(&in, low, n); /* n <= 65535 < LOW_SIZE */

	struct guest_mem mem = { .nregions = 2 };
	mem.regions[0] = (struct guest_region){ .gpa = 0, .size = LOW_SIZE, .host = low };
	mem.regions[1] = (struct guest_region){ .gpa = HIGH_GPA, .size = HIGH_SIZE, .host = high };

	struct blk_backend be;
	int fd = dup(disk_fd);
	if (fd < 0 || blk_backend_from_fd(fd, opts & 1, &be) < 0)
		abort();
	struct mmio_dev d;
	if (virtio_blk_create_backend(&be, "fuzz", &mem, (struct mmio_irq){ .trigger = no_irq }, &d) < 0)
		abort();

	uint16_t qsize = (uint16_t)(1u << (qlog % 9));
	uint16_t avail_idx = 0;
	if (!(opts & 8))
		setup(&d, opts, qsize);

	uint8_t op;
	while (take(&in, &op, 1)) {
		switch (op % 7) {
		case 0: {
			uint16_t gpa;
			uint8_t len;
			if (!take(&in, &gpa, 2) || !take(&in, &len, 1))
				break;
			size_t l = len < in.left ? len : in.left;
			if (gpa + l > LOW_SIZE)
				l = LOW_SIZE - gpa;
			take(&in, low + gpa, l);
			break;
		}
		case 1: {
			uint8_t reg;
			uint32_t v;
			if (take(&in, &reg, 1) && take(&in, &v, 4))
				wr(&d, (reg * 4u) % 0x200, v);
			break;
		}
		case 2: {
			uint16_t off;
			uint8_t len;
			uint64_t v;
			if (take(&in, &off, 2) && take(&in, &len, 1))
				d.ops->read(d.dev, off % 0x200, &v, 1u << (len % 4));
			break;
		}
		case 3: {
			uint8_t head;
			if (!take(&in, &head, 1))
				break;
			uint16_t *avail = (uint16_t *)(low + AVAIL);
			avail[2 + avail_idx % qsize] = head;
			avail[1] = ++avail_idx;
			wr(&d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
			break;
		}
		case 4:
			wr(&d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
			break;
		case 5:
			if (take(&in, &avail_idx, 2)) {
				((uint16_t *)(low + AVAIL))[1] = avail_idx;
				wr(&d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
			}
			break;
		case 6:
			setup(&d, opts, qsize);
			avail_idx = 0;
			break;
		}
	}

	struct virtio_mmio *t = virtio_mmio_from_dev(&d);
	if (!t || (virtio_mmio_broken(t, NULL) && !(rd(&d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET)))
		abort();
	d.ops->destroy(d.dev);
	return 0;
}
