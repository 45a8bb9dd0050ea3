/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `rng`: drives the first virtio-mmio device as a virtio-rng (device id 4). Reads 64 bytes
 * twice into device-writable buffers; each read must come back whole, not all zero, and the two must
 * differ.
 */
#include "vdev.h"

#define NAME "rng"
#define RNG_ID 4u
#define RNG_BYTES 64u

static void wr64(const struct gv *v, uint32_t off, const volatile void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	gv_wr(v, off, (uint32_t)a);
	gv_wr(v, off + 4, (uint32_t)(a >> 32));
}

/* The same bring-up as gv_init, for an entropy device. */
static void rng_init(struct gv *v, uint64_t base)
{
	v->base = base;
	if (gv_rd(v, GV_MAGIC) != 0x74726976u || gv_rd(v, GV_VERSION) != 2)
		guest_fail(NAME, "not a virtio-mmio v2 device");
	if (gv_rd(v, GV_DEVICE_ID) != RNG_ID)
		guest_fail(NAME, "not an entropy device");
	gv_wr(v, GV_STATUS, 0);
	gv_wr(v, GV_STATUS, 1);
	gv_wr(v, GV_STATUS, 3);
	gv_wr(v, GV_DRIVER_FEATURES_SEL, 0);
	gv_wr(v, GV_DRIVER_FEATURES, 0);
	gv_wr(v, GV_DRIVER_FEATURES_SEL, 1);
	gv_wr(v, GV_DRIVER_FEATURES, (uint32_t)(GV_F_VERSION_1 >> 32));
	gv_wr(v, GV_STATUS, 3 | GV_S_FEATURES_OK);
	if (!(gv_rd(v, GV_STATUS) & GV_S_FEATURES_OK))
		guest_fail(NAME, "FEATURES_OK refused");
	gv_wr(v, GV_QUEUE_SEL, 0);
	if (gv_rd(v, GV_QUEUE_NUM_MAX) < GV_QSIZE)
		guest_fail(NAME, "QueueNumMax too small");
	v->desc = guest_alloc(16 * GV_QSIZE, 4096);
	v->avail = guest_alloc(6 + 2 * GV_QSIZE, 4096);
	v->used = guest_alloc(6 + 8 * GV_QSIZE, 4096);
	gv_wr(v, GV_QUEUE_NUM, GV_QSIZE);
	wr64(v, GV_QUEUE_DESC, v->desc);
	wr64(v, GV_QUEUE_DRIVER, v->avail);
	wr64(v, GV_QUEUE_DEVICE, v->used);
	gv_wr(v, GV_QUEUE_READY, 1);
	gv_wr(v, GV_STATUS, 3 | GV_S_FEATURES_OK | GV_S_DRIVER_OK);
	if (gv_rd(v, GV_STATUS) & GV_S_NEEDS_RESET)
		guest_fail(NAME, "device did not accept DRIVER_OK");
}

/* One request of two writable descriptors (the device must fill across them). */
static void rng_read(struct gv *v, uint8_t *buf)
{
	memset(buf, 0, RNG_BYTES);
	gv_set_desc(v->desc, 0, buf, 24, GV_D_WRITE | GV_D_NEXT, 1);
	gv_set_desc(v->desc, 1, buf + 24, RNG_BYTES - 24, GV_D_WRITE, 0);
	if (!gv_submit(v, 0))
		guest_fail(NAME, "device used nothing");
	uint32_t len = *(const volatile uint32_t *)((const volatile uint8_t *)v->used + 4 +
						     8u * ((v->used_idx - 1u) % GV_QSIZE) + 4);
	if (len != RNG_BYTES)
		guest_fail(NAME, "used length is not the buffer size");
	bool zero = true;
	for (unsigned i = 0; i < RNG_BYTES; i++)
		zero = zero && buf[i] == 0;
	if (zero)
		guest_fail(NAME, "entropy came back all zero");
}

void guest_main(const uint8_t *bp)
{
	static struct gv v;
	uint64_t base = gv_find(bp);
	if (!base)
		guest_fail(NAME, "no virtio_mmio.device= on the command line");
	rng_init(&v, base);
	uint8_t *a = guest_alloc(RNG_BYTES, 64), *b = guest_alloc(RNG_BYTES, 64);
	rng_read(&v, a);
	rng_read(&v, b);
	if (memcmp(a, b, RNG_BYTES) == 0)
		guest_fail(NAME, "two reads returned the same bytes");
	guest_puts("rng: 2 x 64 bytes of entropy, distinct\n");
	guest_ok(NAME);
}
