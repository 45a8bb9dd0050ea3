/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hostile guests: each case publishes one malformed ring or chain on a working virtio-blk. The device
 * must refuse it without touching memory outside guest RAM (ASan watches), report NEEDS_RESET with a
 * configuration interrupt, use nothing, ignore further notifies, and work again after a reset.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "devices/virtio_blk.h"
#include "vdrv.h"

#define QSIZE 16u
#define ALL (~0ull)
#define F_NEXT VIRTQ_DESC_F_NEXT
#define F_WRITE VIRTQ_DESC_F_WRITE
#define F_IND VIRTQ_DESC_F_INDIRECT

static char disk[256];

/* hdr + status buffers of a well-formed IN request for one sector. */
struct req {
	uint64_t hdr, data, st;
};

static struct req good_bufs(struct vdrv *d)
{
	struct req r = { vdrv_alloc(d, 16), vdrv_alloc(d, 512), vdrv_alloc(d, 1) };
	return r; /* a zeroed header is IN of sector 0 */
}

static void loop_two(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, r.data, 512, F_NEXT, 0);
	vdrv_publish(d, 0);
}

static void loop_self(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 5, r.hdr, 16, F_NEXT, 5);
	vdrv_publish(d, 5);
}

static void loop_long(struct vdrv *d, struct req r)
{
	/* A chain through every slot and back to the start: QSIZE + 1 descriptors. */
	for (uint16_t i = 0; i < QSIZE; i++)
		vdrv_desc(d, d->desc, i, r.hdr, 16, F_NEXT, (uint16_t)((i + 1) % QSIZE));
	vdrv_publish(d, 0);
}

static void head_out_of_range(struct vdrv *d, struct req r)
{
	(void)r;
	vdrv_publish(d, QSIZE);
}

static void next_out_of_range(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 0xffff);
	vdrv_publish(d, 0);
}

static void buffer_in_hole(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, VDRV_HOLE_GPA, 512, F_NEXT | F_WRITE, 2);
	vdrv_desc(d, d->desc, 2, r.st, 1, F_WRITE, 0);
	vdrv_publish(d, 0);
}

static void buffer_past_ram_end(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, VDRV_LOW_SIZE - 256, 512, F_NEXT | F_WRITE, 2);
	vdrv_desc(d, d->desc, 2, r.st, 1, F_WRITE, 0);
	vdrv_publish(d, 0);
}

static void buffer_past_high_end(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, VDRV_HIGH_GPA + VDRV_HIGH_SIZE - 1, 2, F_WRITE, 0);
	vdrv_publish(d, 0);
}

static void buffer_address_wraps(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, UINT64_MAX - 100, 512, F_WRITE, 0);
	vdrv_publish(d, 0);
}

static void length_oversized(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, r.data, 0xffffffffu, F_NEXT | F_WRITE, 2);
	vdrv_desc(d, d->desc, 2, r.st, 1, F_WRITE, 0);
	vdrv_publish(d, 0);
}

static void readable_after_writable(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, r.data, 512, F_NEXT | F_WRITE, 2);
	vdrv_desc(d, d->desc, 2, r.st, 1, 0, 0);
	vdrv_publish(d, 0);
}

static void no_status_byte(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, r.data, 512, 0, 0);
	vdrv_publish(d, 0);
}

static void avail_idx_jump(struct vdrv *d, struct req r)
{
	loop_two(d, r); /* never looked at: the index itself is refused */
	vdrv_set_avail_idx(d, QSIZE + 1);
}

static void avail_idx_backwards(struct vdrv *d, struct req r)
{
	(void)r;
	vdrv_set_avail_idx(d, 0xffff);
}

/* Indirect tables. `table` holds a valid 3-entry request unless the case changes it. */
static uint64_t good_table(struct vdrv *d, struct req r)
{
	uint64_t t = vdrv_alloc(d, 64);
	vdrv_desc(d, t, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, t, 1, r.data, 512, F_NEXT | F_WRITE, 2);
	vdrv_desc(d, t, 2, r.st, 1, F_WRITE, 0);
	return t;
}

static void indirect_publish(struct vdrv *d, uint64_t addr, uint32_t len, uint16_t flags)
{
	vdrv_desc(d, d->desc, 0, addr, len, F_IND | flags, 1);
	vdrv_desc(d, d->desc, 1, 0x100, 1, F_WRITE, 0);
	vdrv_publish(d, 0);
}

static void indirect_in_indirect(struct vdrv *d, struct req r)
{
	uint64_t inner = good_table(d, r);
	uint64_t outer = vdrv_alloc(d, 16);
	vdrv_desc(d, outer, 0, inner, 48, F_IND, 0);
	indirect_publish(d, outer, 16, 0);
}

static void indirect_len_not_multiple(struct vdrv *d, struct req r)
{
	indirect_publish(d, good_table(d, r), 40, 0);
}

static void indirect_len_zero(struct vdrv *d, struct req r)
{
	indirect_publish(d, good_table(d, r), 0, 0);
}

static void indirect_misaligned(struct vdrv *d, struct req r)
{
	indirect_publish(d, good_table(d, r) + 8, 32, 0);
}

static void indirect_outside_ram(struct vdrv *d, struct req r)
{
	(void)r;
	indirect_publish(d, VDRV_LOW_SIZE - 32, 48, 0);
}

static void indirect_oversized(struct vdrv *d, struct req r)
{
	(void)r;
	indirect_publish(d, 0x10000, 16u * (VIRTQUEUE_MAX_SEGS + 1), 0);
}

static void indirect_huge(struct vdrv *d, struct req r)
{
	(void)r;
	indirect_publish(d, 0x10000, 0xfffffff0u, 0);
}

static void indirect_with_next(struct vdrv *d, struct req r)
{
	indirect_publish(d, good_table(d, r), 48, F_NEXT);
}

static void indirect_loop(struct vdrv *d, struct req r)
{
	uint64_t t = good_table(d, r);
	vdrv_desc(d, t, 2, r.data, 512, F_NEXT | F_WRITE, 1);
	indirect_publish(d, t, 48, 0);
}

static void indirect_next_outside(struct vdrv *d, struct req r)
{
	uint64_t t = good_table(d, r);
	vdrv_desc(d, t, 1, r.data, 512, F_NEXT | F_WRITE, 3);
	indirect_publish(d, t, 48, 0);
}

static void indirect_after_buffer(struct vdrv *d, struct req r)
{
	vdrv_desc(d, d->desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(d, d->desc, 1, good_table(d, r), 48, F_IND, 0);
	vdrv_publish(d, 0);
}

/* With the feature not negotiated, any indirect descriptor is a violation. */
static void indirect_not_negotiated(struct vdrv *d, struct req r)
{
	indirect_publish(d, good_table(d, r), 48, 0);
}

/* Ring layout errors are caught when the queue is made ready. */
static void set_queue(struct vdrv *d, uint32_t num, uint64_t desc, uint64_t avail, uint64_t used)
{
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0x3);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0xb);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_NUM, num);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)avail);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, (uint32_t)(avail >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)used);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, (uint32_t)(used >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0xf);
	vdrv_kick(d);
}

static void ring_desc_in_hole(struct vdrv *d, struct req r)
{
	(void)r;
	set_queue(d, QSIZE, VDRV_HOLE_GPA, 0x2000, 0x3000);
}

static void ring_used_straddles_end(struct vdrv *d, struct req r)
{
	(void)r;
	set_queue(d, QSIZE, 0x2000, 0x3000, VDRV_LOW_SIZE - 64);
}

static void ring_misaligned(struct vdrv *d, struct req r)
{
	(void)r;
	set_queue(d, QSIZE, 0x2008, 0x3000, 0x4000);
}

static void ring_size_not_pow2(struct vdrv *d, struct req r)
{
	(void)r;
	set_queue(d, 12, 0x2000, 0x3000, 0x4000);
}

static void ring_size_too_big(struct vdrv *d, struct req r)
{
	(void)r;
	set_queue(d, 2 * VIRTIO_BLK_QUEUE_SIZE, 0x2000, 0x8000, 0xa000);
}

static void ring_size_zero(struct vdrv *d, struct req r)
{
	(void)r;
	set_queue(d, 0, 0x2000, 0x3000, 0x4000);
}

struct hostile_case {
	const char *name;
	void (*publish)(struct vdrv *d, struct req r);
	uint64_t features;
};

#define CASE(fn) { #fn, fn, ALL }
static const struct hostile_case cases[] = {
	CASE(loop_two),
	CASE(loop_self),
	CASE(loop_long),
	CASE(head_out_of_range),
	CASE(next_out_of_range),
	CASE(buffer_in_hole),
	CASE(buffer_past_ram_end),
	CASE(buffer_past_high_end),
	CASE(buffer_address_wraps),
	CASE(length_oversized),
	CASE(readable_after_writable),
	CASE(no_status_byte),
	CASE(avail_idx_jump),
	CASE(avail_idx_backwards),
	CASE(indirect_in_indirect),
	CASE(indirect_len_not_multiple),
	CASE(indirect_len_zero),
	CASE(indirect_misaligned),
	CASE(indirect_outside_ram),
	CASE(indirect_oversized),
	CASE(indirect_huge),
	CASE(indirect_with_next),
	CASE(indirect_loop),
	CASE(indirect_next_outside),
	CASE(indirect_after_buffer),
	{ "indirect_not_negotiated", indirect_not_negotiated, ALL & ~(1ull << VIRTIO_RING_F_INDIRECT_DESC) },
	CASE(ring_desc_in_hole),
	CASE(ring_used_straddles_end),
	CASE(ring_misaligned),
	CASE(ring_size_not_pow2),
	CASE(ring_size_too_big),
	CASE(ring_size_zero),
};

static bool run_case(const struct hostile_case *c)
{
	struct vdrv d;
	int before = check_failures;

	CHECK(vdrv_init(&d) == 0);
	CHECK(vdrv_attach_blk(&d, disk, false, NULL) == 0);
	CHECK(vdrv_setup(&d, c->features, QSIZE) == 0x0f);
	struct req r = good_bufs(&d);
	*(uint8_t *)vdrv_host(&d, r.st) = 0xee;
	uint8_t *used = vdrv_host(&d, d.used);
	uint8_t used_before[4 + 8 * QSIZE];
	memcpy(used_before, used, sizeof(used_before));

	c->publish(&d, r);
	vdrv_kick(&d);

	CHECK(vdrv_needs_reset(&d));
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	CHECK(d.irqs >= 1);
	CHECK(memcmp(used, used_before, sizeof(used_before)) == 0);
	CHECK(*(uint8_t *)vdrv_host(&d, r.st) == 0xee);
	struct virtio_mmio *t = virtio_mmio_from_dev(&d.dev);
	const char *why = NULL;
	CHECK(t && virtio_mmio_broken(t, &why) && why && *why);

	/* Further notifies and a valid chain are ignored until reset. */
	vdrv_desc(&d, d.desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(&d, d.desc, 1, r.st, 1, F_WRITE, 0);
	vdrv_kick(&d);
	CHECK(*(uint8_t *)vdrv_host(&d, r.st) == 0xee);

	/* A reset brings the device back. */
	CHECK(vdrv_setup(&d, ALL, QSIZE) == 0x0f);
	CHECK(!vdrv_needs_reset(&d));
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 1, r.data, 512, true, false, NULL) == 0);
	CHECK(*(uint8_t *)vdrv_host(&d, r.data) == vdrv_pattern(512));
	vdrv_done(&d);
	printf("%s %s: %s\n", check_failures == before ? "ok  " : "FAIL", c->name, why ? why : "-");
	return check_failures == before;
}

/* Descriptor chains of exactly QSIZE buffers and full indirect tables are legal. */
static void test_limits_are_legal(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	CHECK(vdrv_attach_blk(&d, disk, false, NULL) == 0);
	CHECK(vdrv_setup(&d, ALL, QSIZE) == 0x0f);
	struct req r = good_bufs(&d);
	uint64_t data = vdrv_alloc(&d, 512 * (QSIZE - 2));
	vdrv_desc(&d, d.desc, 0, r.hdr, 16, F_NEXT, 1);
	for (uint16_t i = 1; i < QSIZE - 1; i++)
		vdrv_desc(&d, d.desc, i, data + 512u * (i - 1), 512, F_NEXT | F_WRITE, (uint16_t)(i + 1));
	vdrv_desc(&d, d.desc, QSIZE - 1, r.st, 1, F_WRITE, 0);
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	uint32_t id, len;
	CHECK(vdrv_take_used(&d, &id, &len) && len == 512 * (QSIZE - 2) + 1);
	CHECK(*(uint8_t *)vdrv_host(&d, r.st) == 0);

	/* Zero-length buffers are skipped, not refused. */
	vdrv_desc(&d, d.desc, 0, r.hdr, 16, F_NEXT, 1);
	vdrv_desc(&d, d.desc, 1, r.data, 0, F_NEXT | F_WRITE, 2);
	vdrv_desc(&d, d.desc, 2, r.data, 512, F_NEXT | F_WRITE, 3);
	vdrv_desc(&d, d.desc, 3, r.st, 1, F_WRITE, 0);
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	CHECK(vdrv_take_used(&d, &id, &len) && len == 513);
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

/* The guest scribbling over the used ring's index changes nothing: the device keeps its own count. */
static void test_used_idx_scribble(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	CHECK(vdrv_attach_blk(&d, disk, false, NULL) == 0);
	CHECK(vdrv_setup(&d, ALL, QSIZE) == 0x0f);
	struct req r = good_bufs(&d);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 1, r.data, 512, true, false, NULL) == 0);
	uint16_t *used_idx = (uint16_t *)((uint8_t *)vdrv_host(&d, d.used) + 2);
	*used_idx = 0x7777;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 2, r.data, 512, true, false, NULL) == 0);
	CHECK(*used_idx == 2);
	CHECK(*(uint8_t *)vdrv_host(&d, r.data) == vdrv_pattern(2 * 512));
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

int main(void)
{
	if (vdrv_tmpdisk(disk, sizeof(disk), 64) < 0) {
		perror("temp disk");
		return 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
	RUN(test_limits_are_legal);
	RUN(test_used_idx_scribble);
	unlink(disk);
	return check_failures ? 1 : 0;
}
