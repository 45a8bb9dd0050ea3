/* SPDX-License-Identifier: Apache-2.0 */
#include "vdev.h"

#define barrier() __asm__ volatile("" ::: "memory")

uint32_t gv_rd(const struct gv *v, uint32_t off)
{
	return mmio_read32(v->base + off);
}

void gv_wr(const struct gv *v, uint32_t off, uint32_t val)
{
	mmio_write32(v->base + off, val);
}

uint64_t gv_find(const uint8_t *bp)
{
	char val[64];
	if (!guest_cmdline_value(bp, "virtio_mmio.device", val, sizeof(val)))
		return 0;
	const char *p;
	(void)guest_parse_num(val, &p);
	if (*p != '@')
		return 0;
	return guest_parse_num(p + 1, &p);
}

static void wr64(const struct gv *v, uint32_t off, const volatile void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	gv_wr(v, off, (uint32_t)a);
	gv_wr(v, off + 4, (uint32_t)(a >> 32));
}

const char *gv_init(struct gv *v, uint64_t base, uint64_t want)
{
	v->base = base;
	if (gv_rd(v, GV_MAGIC) != 0x74726976u)
		return "no virtio-mmio magic";
	if (gv_rd(v, GV_VERSION) != 2)
		return "virtio-mmio version is not 2";
	if (gv_rd(v, GV_DEVICE_ID) != 2)
		return "not a block device";
	gv_wr(v, GV_STATUS, 0);
	if (gv_rd(v, GV_STATUS) != 0)
		return "reset did not clear Status";
	gv_wr(v, GV_STATUS, 1);
	gv_wr(v, GV_STATUS, 3);
	gv_wr(v, GV_DEVICE_FEATURES_SEL, 0);
	uint64_t f = gv_rd(v, GV_DEVICE_FEATURES);
	gv_wr(v, GV_DEVICE_FEATURES_SEL, 1);
	f |= (uint64_t)gv_rd(v, GV_DEVICE_FEATURES) << 32;
	if (!(f & GV_F_VERSION_1))
		return "device does not offer VERSION_1";
	f &= want | GV_F_VERSION_1;
	gv_wr(v, GV_DRIVER_FEATURES_SEL, 0);
	gv_wr(v, GV_DRIVER_FEATURES, (uint32_t)f);
	gv_wr(v, GV_DRIVER_FEATURES_SEL, 1);
	gv_wr(v, GV_DRIVER_FEATURES, (uint32_t)(f >> 32));
	gv_wr(v, GV_STATUS, 3 | GV_S_FEATURES_OK);
	if (!(gv_rd(v, GV_STATUS) & GV_S_FEATURES_OK))
		return "FEATURES_OK refused";

	gv_wr(v, GV_QUEUE_SEL, 0);
	if (gv_rd(v, GV_QUEUE_READY) != 0)
		return "queue ready after reset";
	if (gv_rd(v, GV_QUEUE_NUM_MAX) < GV_QSIZE)
		return "QueueNumMax too small";
	if (!v->desc) {
		v->desc = guest_alloc(16 * GV_QSIZE, 4096);
		v->avail = guest_alloc(6 + 2 * GV_QSIZE, 4096);
		v->used = guest_alloc(6 + 8 * GV_QSIZE, 4096);
		v->hdr = guest_alloc(16, 16);
		v->status = guest_alloc(1, 16);
	}
	memset(v->desc, 0, 16 * GV_QSIZE);
	memset((void *)v->avail, 0, 6 + 2 * GV_QSIZE);
	memset((void *)v->used, 0, 6 + 8 * GV_QSIZE);
	v->avail_idx = v->used_idx = 0;
	gv_wr(v, GV_QUEUE_NUM, GV_QSIZE);
	wr64(v, GV_QUEUE_DESC, v->desc);
	wr64(v, GV_QUEUE_DRIVER, v->avail);
	wr64(v, GV_QUEUE_DEVICE, v->used);
	gv_wr(v, GV_QUEUE_READY, 1);
	gv_wr(v, GV_STATUS, 3 | GV_S_FEATURES_OK | GV_S_DRIVER_OK);
	uint32_t st = gv_rd(v, GV_STATUS);
	if (!(st & GV_S_DRIVER_OK) || (st & GV_S_NEEDS_RESET))
		return "device did not accept DRIVER_OK";
	return NULL;
}

void gv_set_desc(struct gv_desc *table, uint16_t i, const volatile void *addr, uint32_t len,
		 uint16_t flags, uint16_t next)
{
	table[i].addr = (uint64_t)(uintptr_t)addr;
	table[i].len = len;
	table[i].flags = flags;
	table[i].next = next;
}

bool gv_submit(struct gv *v, uint16_t head)
{
	v->avail[2 + v->avail_idx % GV_QSIZE] = head;
	barrier();
	v->avail[1] = ++v->avail_idx;
	barrier();
	gv_wr(v, GV_QUEUE_NOTIFY, 0);
	for (int spin = 0; spin < 1000; spin++) {
		if (v->used[1] != v->used_idx) {
			v->used_idx++;
			gv_wr(v, GV_INTERRUPT_ACK, gv_rd(v, GV_INTERRUPT_STATUS));
			return true;
		}
		__asm__ volatile("pause");
	}
	return false;
}

int gv_blk(struct gv *v, uint32_t type, uint64_t sector, void *buf, uint32_t len, bool device_writes)
{
	memcpy(v->hdr, &type, 4);
	memset(v->hdr + 4, 0, 4);
	memcpy(v->hdr + 8, &sector, 8);
	*v->status = 0xff;
	uint16_t n = 0;
	gv_set_desc(v->desc, n, v->hdr, 16, GV_D_NEXT, (uint16_t)(n + 1));
	n++;
	if (len) {
		gv_set_desc(v->desc, n, buf, len, (uint16_t)(GV_D_NEXT | (device_writes ? GV_D_WRITE : 0)),
			    (uint16_t)(n + 1));
		n++;
	}
	gv_set_desc(v->desc, n, v->status, 1, GV_D_WRITE, 0);
	if (!gv_submit(v, 0))
		return -1;
	return *v->status;
}

bool gv_is_pattern_sector(const uint8_t *buf, uint64_t n)
{
	char num[21];
	int len = 0;
	do {
		num[len++] = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	if (memcmp(buf, "SPACE-SECTOR-", 13) != 0 || buf[511] != '\n')
		return false;
	for (int i = 0; i < 498; i++) {
		char want = i < len ? num[len - 1 - i] : ' ';
		if (buf[13 + i] != (uint8_t)want)
			return false;
	}
	return true;
}
