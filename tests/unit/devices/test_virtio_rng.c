/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-rng driven by the C test driver over fake guest RAM: identity and queue layout, entropy
 * across scattered writable buffers, distinct reads, the per-request cap, readable-only chains,
 * a chain outside guest RAM (NEEDS_RESET) and recovery after a reset.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "devices/virtio_rng.h"
#include "vdrv.h"

static bool start(struct vdrv *d)
{
	if (vdrv_init(d) < 0 || virtio_rng_create(&d->mem, vdrv_irq(d), &d->dev) < 0)
		return false;
	uint32_t st = vdrv_setup(d, ~0ull, 8);
	return (st & VIRTIO_STATUS_DRIVER_OK) && !(st & VIRTIO_STATUS_NEEDS_RESET);
}

/* Submits buf as two writable descriptors (split at split) and returns the used length or -1. */
static int64_t read_rng(struct vdrv *d, uint64_t buf, uint32_t len, uint32_t split)
{
	uint32_t id, used;
	vdrv_desc(d, d->desc, 0, buf, split, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, buf + split, len - split, VIRTQ_DESC_F_WRITE, 0);
	vdrv_publish(d, 0);
	vdrv_kick(d);
	if (!vdrv_take_used(d, &id, &used) || id != 0)
		return -1;
	return used;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void test_identity(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	CHECK(virtio_rng_create(&d.mem, vdrv_irq(&d), &d.dev) == 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_DEVICE_ID) == VIRTIO_ID_RNG);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_QUEUE_NUM_MAX) == VIRTIO_RNG_QUEUE_SIZE);
	vdrv_wr(&d, VIRTIO_MMIO_QUEUE_SEL, 1);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_QUEUE_NUM_MAX) == 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_CONFIG) == 0); /* no configuration space */
	vdrv_done(&d);
}

static void test_entropy(void)
{
	struct vdrv d;
	CHECK(start(&d));
	uint64_t a = vdrv_alloc(&d, 64), b = vdrv_alloc(&d, 64);
	CHECK(read_rng(&d, a, 64, 24) == 64);
	CHECK(read_rng(&d, b, 64, 1) == 64);
	CHECK(!all_zero(vdrv_host(&d, a), 64));
	CHECK(!all_zero(vdrv_host(&d, a) + 24, 40)); /* the second descriptor was filled too */
	CHECK(memcmp(vdrv_host(&d, a), vdrv_host(&d, b), 64) != 0);
	CHECK(d.irqs >= 1); /* EVENT_IDX with used_event 0: one interrupt */
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

static void test_cap_and_readable(void)
{
	struct vdrv d;
	CHECK(start(&d));
	uint32_t big = VIRTIO_RNG_MAX_REQ + 4096;
	uint64_t buf = vdrv_alloc(&d, big);
	CHECK(read_rng(&d, buf, big, 4096) == VIRTIO_RNG_MAX_REQ);
	CHECK(all_zero(vdrv_host(&d, buf + VIRTIO_RNG_MAX_REQ), 4096)); /* nothing past the cap */

	/* A device-readable buffer carries nothing: used with length 0, untouched. */
	uint32_t id, used;
	uint64_t ro = vdrv_alloc(&d, 32);
	vdrv_desc(&d, d.desc, 2, ro, 32, 0, 0);
	vdrv_publish(&d, 2);
	vdrv_kick(&d);
	CHECK(vdrv_take_used(&d, &id, &used) && id == 2 && used == 0);
	CHECK(all_zero(vdrv_host(&d, ro), 32));
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

static void test_hostile_then_reset(void)
{
	struct vdrv d;
	uint32_t id, used;
	CHECK(start(&d));
	vdrv_desc(&d, d.desc, 0, VDRV_HOLE_GPA, 64, VIRTQ_DESC_F_WRITE, 0);
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	CHECK(vdrv_needs_reset(&d));
	CHECK(!vdrv_take_used(&d, &id, &used));
	CHECK(vdrv_setup(&d, ~0ull, 8) & VIRTIO_STATUS_DRIVER_OK);
	CHECK(!vdrv_needs_reset(&d));
	uint64_t a = vdrv_alloc(&d, 64);
	CHECK(read_rng(&d, a, 64, 32) == 64);
	CHECK(!all_zero(vdrv_host(&d, a), 64));
	vdrv_done(&d);
}

int main(void)
{
	RUN(test_identity);
	RUN(test_entropy);
	RUN(test_cap_and_readable);
	RUN(test_hostile_then_reset);
	return check_failures ? 1 : 0;
}
