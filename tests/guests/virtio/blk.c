/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `blk`: drives the first virtio-mmio device as a virtio-blk disk. Reads sector blk_read
 * (the host wrote the SPACE-SECTOR-<n> pattern), writes sector blk_write with (i ^ 0xa5), flushes,
 * reads it back, checks GET_ID and that a read past the end fails. With blk_ro=1 the disk must say
 * read-only and refuse the write. The host test then checks the file.
 */
#include "vdev.h"

#define NAME "blk"
#define T_IN 0u
#define T_OUT 1u
#define T_FLUSH 4u
#define T_GET_ID 8u
#define F_RO (1u << 5)

static uint64_t cmdline_num(const uint8_t *bp, const char *key, uint64_t dflt)
{
	char val[24];
	return guest_cmdline_value(bp, key, val, sizeof(val)) ? guest_parse_num(val, NULL) : dflt;
}

void guest_main(const uint8_t *bp)
{
	static struct gv v;
	uint64_t base = gv_find(bp);
	if (!base)
		guest_fail(NAME, "no virtio_mmio.device= on the command line");
	const char *err = gv_init(&v, base, GV_F_BLK_FLUSH);
	if (err)
		guest_fail(NAME, err);

	uint64_t rsec = cmdline_num(bp, "blk_read", 3);
	uint64_t wsec = cmdline_num(bp, "blk_write", 5);
	bool ro = cmdline_num(bp, "blk_ro", 0) != 0;
	uint64_t cap = gv_rd(&v, GV_CONFIG) | (uint64_t)gv_rd(&v, GV_CONFIG + 4) << 32;
	if (cap <= rsec || cap <= wsec)
		guest_fail(NAME, "disk smaller than the sectors asked for");
	gv_wr(&v, GV_DEVICE_FEATURES_SEL, 0);
	if (!!(gv_rd(&v, GV_DEVICE_FEATURES) & F_RO) != ro)
		guest_fail(NAME, "read-only feature bit does not match");

	uint8_t *buf = guest_alloc(512, 512);
	if (gv_blk(&v, T_IN, rsec, buf, 512, true) != 0)
		guest_fail(NAME, "read failed");
	if (!gv_is_pattern_sector(buf, rsec))
		guest_fail(NAME, "read data does not match the pattern");

	for (unsigned i = 0; i < 512; i++)
		buf[i] = (uint8_t)(i ^ 0xa5);
	int s = gv_blk(&v, T_OUT, wsec, buf, 512, false);
	if (ro) {
		if (s != 1)
			guest_fail(NAME, "write to a read-only disk did not fail with IOERR");
	} else {
		if (s != 0)
			guest_fail(NAME, "write failed");
		if (gv_blk(&v, T_FLUSH, 0, NULL, 0, false) != 0)
			guest_fail(NAME, "flush failed");
		memset(buf, 0, 512);
		if (gv_blk(&v, T_IN, wsec, buf, 512, true) != 0)
			guest_fail(NAME, "read-back failed");
		for (unsigned i = 0; i < 512; i++)
			if (buf[i] != (uint8_t)(i ^ 0xa5))
				guest_fail(NAME, "read-back differs from what was written");
	}

	memset(buf, 0, 20);
	if (gv_blk(&v, T_GET_ID, 0, buf, 20, true) != 0 || buf[0] == 0)
		guest_fail(NAME, "GET_ID failed");
	if (gv_blk(&v, T_IN, cap, buf, 512, true) != 1)
		guest_fail(NAME, "read past the end did not fail with IOERR");
	if (gv_rd(&v, GV_STATUS) & GV_S_NEEDS_RESET)
		guest_fail(NAME, "device reports NEEDS_RESET");
	guest_puts("blk: capacity ");
	guest_put_dec(cap);
	guest_puts(" sectors, id ");
	buf[20] = 0;
	guest_puts((const char *)buf);
	guest_puts("\n");
	guest_ok(NAME);
}
