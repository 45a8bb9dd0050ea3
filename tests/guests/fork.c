/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `fork`: sets up its virtio-blk disk, fills a page with 'S', prints "fork: ready" and
 * polls sector 1 of the disk. The test snapshots it there and restores the snapshot twice, at the
 * same time, each with its own copy of the disk whose sector 1 starts "FORK-<c>". Each restore finds
 * the page still all 'S' (the snapshot's content), writes its own <c> over it, waits, reads back only
 * <c> (the other restore's writes never meet its own), writes "FORKED-<c>" to sector 2 and passes.
 * fork.poll and fork.wait (command line) are the spin loops' lengths between polls and before reading
 * back: shorter where ring 0 is emulated.
 */
#include "virtio/vdev.h"

#define NAME "fork"
#define T_IN 0u
#define T_OUT 1u
#define T_FLUSH 4u

static uint8_t page[4096] __attribute__((aligned(4096)));

static void spin(uint64_t n)
{
	for (volatile uint64_t i = 0; i < n; i++)
		;
}

static uint64_t cmdline_num(const uint8_t *bp, const char *key, uint64_t dflt)
{
	char val[24];
	return guest_cmdline_value(bp, key, val, sizeof(val)) ? guest_parse_num(val, NULL) : dflt;
}

void guest_main(const uint8_t *bp)
{
	static struct gv v;
	uint64_t poll_spin = cmdline_num(bp, "fork.poll", 1000000);
	uint64_t wait_spin = cmdline_num(bp, "fork.wait", 20000000);
	uint64_t base = gv_find(bp);
	if (!base)
		guest_fail(NAME, "no virtio_mmio.device= on the command line");
	const char *err = gv_init(&v, base, GV_F_BLK_FLUSH);
	if (err)
		guest_fail(NAME, err);
	memset(page, 'S', sizeof(page));
	uint8_t *buf = guest_alloc(512, 512);
	guest_puts("fork: ready\n");
	uint8_t mine = 0;
	for (uint64_t polls = 0; !mine; polls++) {
		if (gv_blk(&v, T_IN, 1, buf, 512, true) != 0)
			guest_fail(NAME, "reading sector 1 failed");
		if (memcmp(buf, "FORK-", 5) == 0)
			mine = buf[5];
		else if (polls > 100000000)
			guest_fail(NAME, "never restored with a fork disk");
		else
			spin(poll_spin);
	}
	for (unsigned i = 0; i < sizeof(page); i++)
		if (page[i] != 'S')
			guest_fail(NAME, "the page does not hold the snapshot's content");
	memset(page, mine, sizeof(page));
	spin(wait_spin); /* the other restore runs meanwhile */
	for (unsigned i = 0; i < sizeof(page); i++)
		if (page[i] != mine)
			guest_fail(NAME, "another restore's write reached this one's page");
	memset(buf, 0, 512);
	memcpy(buf, "FORKED-", 7);
	buf[7] = mine;
	if (gv_blk(&v, T_OUT, 2, buf, 512, false) != 0 || gv_blk(&v, T_FLUSH, 0, NULL, 0, false) != 0)
		guest_fail(NAME, "writing sector 2 failed");
	guest_puts("fork: value ");
	char s[2] = { (char)mine, 0 };
	guest_puts(s);
	guest_puts("\n");
	guest_ok(NAME);
}
