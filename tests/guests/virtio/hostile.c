/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `hostile`: publishes malformed descriptor chains on the virtio-blk device. After each
 * one the device must report NEEDS_RESET in Status (with a configuration interrupt pending) and use
 * nothing; after a reset it must serve a normal read again. Reaching GUEST-OK means the VMM survived.
 */
#include "vdev.h"

#define NAME "hostile"
#define FAR_AWAY ((const volatile void *)(uintptr_t)0xfff00000000ull) /* far beyond any guest RAM */

static struct gv v;

static void start(uint64_t want)
{
	const char *err = gv_init(&v, v.base, want);
	if (err)
		guest_fail(NAME, err);
}

static void expect_broken(const char *what)
{
	uint32_t st = gv_rd(&v, GV_STATUS);
	if (!(st & GV_S_NEEDS_RESET)) {
		guest_puts("hostile: not refused: ");
		guest_puts(what);
		guest_puts("\n");
		guest_fail(NAME, "device accepted a malformed chain");
	}
	if (!(gv_rd(&v, GV_INTERRUPT_STATUS) & 2))
		guest_fail(NAME, "no configuration interrupt with NEEDS_RESET");
	if (v.used[1] != 0)
		guest_fail(NAME, "broken device used a buffer");
	guest_puts("hostile: refused ");
	guest_puts(what);
	guest_puts("\n");
}

static void publish(uint16_t head)
{
	(void)gv_submit(&v, head); /* nothing may come back */
}

void guest_main(const uint8_t *bp)
{
	v.base = gv_find(bp);
	if (!v.base)
		guest_fail(NAME, "no virtio_mmio.device= on the command line");
	start(GV_F_INDIRECT);
	uint8_t *buf = guest_alloc(512, 512);
	struct gv_desc *table = guest_alloc(64, 16);
	struct gv_desc *table2 = guest_alloc(64, 16);

	/* A chain that loops on itself. */
	gv_set_desc(v.desc, 0, v.hdr, 16, GV_D_NEXT, 1);
	gv_set_desc(v.desc, 1, buf, 512, GV_D_NEXT, 0);
	publish(0);
	expect_broken("descriptor loop");

	/* A buffer far outside guest RAM. */
	start(GV_F_INDIRECT);
	gv_set_desc(v.desc, 0, v.hdr, 16, GV_D_NEXT, 1);
	gv_set_desc(v.desc, 1, FAR_AWAY, 512, GV_D_NEXT | GV_D_WRITE, 2);
	gv_set_desc(v.desc, 2, v.status, 1, GV_D_WRITE, 0);
	publish(0);
	expect_broken("buffer outside RAM");

	/* A length that runs off the end of RAM. */
	start(GV_F_INDIRECT);
	gv_set_desc(v.desc, 0, v.hdr, 16, GV_D_NEXT, 1);
	gv_set_desc(v.desc, 1, buf, 0xfffff000u, GV_D_NEXT | GV_D_WRITE, 2);
	gv_set_desc(v.desc, 2, v.status, 1, GV_D_WRITE, 0);
	publish(0);
	expect_broken("oversized length");

	/* An indirect table that points at another indirect table. */
	start(GV_F_INDIRECT);
	gv_set_desc(table2, 0, v.hdr, 16, GV_D_NEXT, 1);
	gv_set_desc(table2, 1, v.status, 1, GV_D_WRITE, 0);
	gv_set_desc(table, 0, table2, 32, GV_D_INDIRECT, 0);
	gv_set_desc(v.desc, 0, table, 16, GV_D_INDIRECT, 0);
	publish(0);
	expect_broken("indirect inside indirect");

	/* A head index beyond the queue. */
	start(GV_F_INDIRECT);
	publish(GV_QSIZE + 3);
	expect_broken("head index out of range");

	/* An available index that jumps ahead by more than the queue size. */
	start(GV_F_INDIRECT);
	v.avail[1] = GV_QSIZE * 5;
	gv_wr(&v, GV_QUEUE_NOTIFY, 0);
	expect_broken("available index jump");

	/* A request with no room for its status byte. */
	start(GV_F_INDIRECT);
	gv_set_desc(v.desc, 0, v.hdr, 16, 0, 0);
	publish(0);
	expect_broken("missing status byte");

	/* After a reset the device works again. */
	start(GV_F_INDIRECT);
	if (gv_blk(&v, 0, 1, buf, 512, true) != 0)
		guest_fail(NAME, "device unusable after reset");
	if (!gv_is_pattern_sector(buf, 1))
		guest_fail(NAME, "read after reset returned wrong data");
	guest_ok(NAME);
}
