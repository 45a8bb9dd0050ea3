/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-mmio + virtio-blk driven by a C "guest driver" over fake guest RAM: registers, feature
 * negotiation, reads and writes checked against the backing file, flush, get-id, discard, read-only
 * refusal, range checks, indirect chains, interrupt suppression, reset, back-end I/O errors, and writes
 * that wait for room in a full host file system.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "util/cleanup.h"
#include "devices/virtio_blk.h"
#include "vdrv.h"

#define SECTORS 2048u
#define ALL_FEATURES (~0ull)

static char disk[256];

/* A device over the test disk, negotiated with want, queue of qsize. */
static bool start(struct vdrv *d, bool ro, uint64_t want, uint16_t qsize)
{
	if (vdrv_init(d) < 0 || vdrv_attach_blk(d, disk, ro, "serial-0123") < 0)
		return false;
	uint32_t st = vdrv_setup(d, want, qsize);
	return (st & VIRTIO_STATUS_DRIVER_OK) && !(st & VIRTIO_STATUS_NEEDS_RESET);
}

static bool disk_sector_is(uint64_t sector, const uint8_t *want)
{
	uint8_t buf[512];
	int fd = open(disk, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = pread(fd, buf, 512, (off_t)(sector * 512)) == 512 && memcmp(buf, want, 512) == 0;
	close(fd);
	return ok;
}

static bool pattern_at(const uint8_t *buf, uint64_t sector, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != vdrv_pattern(sector * 512 + i))
			return false;
	return true;
}

static void test_registers(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	CHECK(vdrv_attach_blk(&d, disk, false, NULL) == 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_MAGIC_VALUE) == 0x74726976);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_VERSION) == 2);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_DEVICE_ID) == 2);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_VENDOR_ID) == VIRTIO_MMIO_VENDOR);
	CHECK(d.dev.size == 0x200);
	vdrv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES) & 1u); /* VERSION_1 */
	vdrv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	uint32_t f = vdrv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES);
	CHECK(f & (1u << VIRTIO_BLK_F_FLUSH));
	CHECK(f & (1u << VIRTIO_RING_F_INDIRECT_DESC));
	CHECK(!(f & (1u << VIRTIO_BLK_F_RO)));
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_QUEUE_NUM_MAX) == VIRTIO_BLK_QUEUE_SIZE);
	vdrv_wr(&d, VIRTIO_MMIO_QUEUE_SEL, 1);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_QUEUE_NUM_MAX) == 0); /* only one queue */

	/* Capacity through 8-byte and two 4-byte config reads; unaligned and out-of-range reads are 0. */
	uint64_t cap = 0;
	d.dev.ops->read(d.dev.dev, 0x100, &cap, 8);
	CHECK(cap == SECTORS);
	CHECK(vdrv_rd(&d, 0x100) == SECTORS && vdrv_rd(&d, 0x104) == 0);
	uint32_t v = 0xdead;
	d.dev.ops->read(d.dev.dev, 0x1fe, &v, 4);
	CHECK(v == 0);
	uint16_t h = 0xbeef;
	d.dev.ops->read(d.dev.dev, 0x002, &h, 2);
	CHECK(h == 0);
	CHECK(vdrv_rd(&d, 0x10c) == VIRTIO_BLK_SEG_MAX);
	CHECK(vdrv_rd(&d, 0x114) == 512); /* blk_size */
	/* Writes to read-only registers and config are ignored. */
	vdrv_wr(&d, VIRTIO_MMIO_MAGIC_VALUE, 0);
	vdrv_wr(&d, 0x100, 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_MAGIC_VALUE) == 0x74726976 && vdrv_rd(&d, 0x100) == SECTORS);
	vdrv_done(&d);
}

static void test_feature_negotiation(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	CHECK(vdrv_attach_blk(&d, disk, false, NULL) == 0);
	/* A legacy driver (no VERSION_1) is refused: FEATURES_OK does not stick, nor does DRIVER_OK. */
	uint32_t st = vdrv_setup(&d, ~(1ull << VIRTIO_F_VERSION_1), 16);
	CHECK(!(st & VIRTIO_STATUS_FEATURES_OK));
	vdrv_wr(&d, VIRTIO_MMIO_STATUS, 0x0f);
	CHECK(!(vdrv_rd(&d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_DRIVER_OK));

	/* Features the device did not offer are refused. */
	vdrv_wr(&d, VIRTIO_MMIO_STATUS, 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_STATUS) == 0);
	vdrv_wr(&d, VIRTIO_MMIO_STATUS, 3);
	vdrv_wr(&d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	vdrv_wr(&d, VIRTIO_MMIO_DRIVER_FEATURES, 1u | 0x80000000u);
	vdrv_wr(&d, VIRTIO_MMIO_STATUS, 0x0b);
	CHECK(!(vdrv_rd(&d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK));

	/* A good driver. Status bits cannot be cleared without a reset. */
	st = vdrv_setup(&d, ALL_FEATURES, 16);
	CHECK(st == 0x0f);
	vdrv_wr(&d, VIRTIO_MMIO_STATUS, 0x07);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_STATUS) == 0x0f);
	/* Driver features are frozen after FEATURES_OK. */
	vdrv_wr(&d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	vdrv_wr(&d, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffff);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_STATUS) == 0x0f);
	vdrv_done(&d);
}

static void test_read_write(void)
{
	struct vdrv d;
	CHECK(start(&d, false, ALL_FEATURES, 16));
	int irqs = d.irqs;

	/* Read 2 sectors from sector 5. */
	uint64_t buf = vdrv_alloc(&d, 1024);
	uint32_t ulen = 0;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 5, buf, 1024, true, false, &ulen) == VIRTIO_BLK_S_OK);
	CHECK(ulen == 1025);
	CHECK(pattern_at(vdrv_host(&d, buf), 5, 1024));
	CHECK(d.irqs == irqs + 1);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_VRING);
	vdrv_wr(&d, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) == 0);

	/* Write sector 9 and see it in the file; the last sector is reachable. */
	uint64_t w = vdrv_alloc(&d, 512);
	memset(vdrv_host(&d, w), 0x5a, 512);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 9, w, 512, false, false, &ulen) == VIRTIO_BLK_S_OK);
	CHECK(ulen == 1);
	CHECK(disk_sector_is(9, vdrv_host(&d, w)));
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, SECTORS - 1, w, 512, false, false, NULL) == 0);
	CHECK(disk_sector_is(SECTORS - 1, vdrv_host(&d, w)));

	/* Many requests wrap the 16-entry ring several times. */
	for (unsigned i = 0; i < 40; i++) {
		memset(vdrv_host(&d, buf), 0, 512);
		CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 100 + i, buf, 512, true, false, NULL) == 0);
		CHECK(pattern_at(vdrv_host(&d, buf), 100 + i, 512));
	}
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

static void test_scattered_and_indirect(void)
{
	struct vdrv d;
	CHECK(start(&d, false, ALL_FEATURES, 8));

	/* Header, three data buffers of odd sizes (one in the high region), status: 1536 bytes. */
	uint64_t hdr = vdrv_alloc(&d, 16), st = vdrv_alloc(&d, 1);
	uint64_t a = vdrv_alloc(&d, 100), b = VDRV_HIGH_GPA + 0x800, c = vdrv_alloc(&d, 1536 - 100 - 1000);
	uint32_t type = VIRTIO_BLK_T_IN;
	uint64_t sector = 40;
	memcpy(vdrv_host(&d, hdr), &type, 4);
	memcpy((uint8_t *)vdrv_host(&d, hdr) + 8, &sector, 8);
	vdrv_desc(&d, d.desc, 0, hdr, 16, VIRTQ_DESC_F_NEXT, 3);
	vdrv_desc(&d, d.desc, 3, a, 100, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 7);
	vdrv_desc(&d, d.desc, 7, b, 1000, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 1);
	vdrv_desc(&d, d.desc, 1, c, 436, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 2);
	vdrv_desc(&d, d.desc, 2, st, 1, VIRTQ_DESC_F_WRITE, 0);
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	uint32_t id, len;
	CHECK(vdrv_take_used(&d, &id, &len) && id == 0 && len == 1537);
	CHECK(*(uint8_t *)vdrv_host(&d, st) == 0);
	CHECK(pattern_at(vdrv_host(&d, a), 40, 100));
	uint8_t whole[1536];
	memcpy(whole, vdrv_host(&d, a), 100);
	memcpy(whole + 100, vdrv_host(&d, b), 1000);
	memcpy(whole + 1100, vdrv_host(&d, c), 436);
	CHECK(pattern_at(whole, 40, 1536));

	/* The same kind of request through an indirect table. */
	uint64_t buf = vdrv_alloc(&d, 512);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 7, buf, 512, true, true, &len) == 0);
	CHECK(len == 513 && pattern_at(vdrv_host(&d, buf), 7, 512));
	memset(vdrv_host(&d, buf), 0x33, 512);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 8, buf, 512, false, true, NULL) == 0);
	CHECK(disk_sector_is(8, vdrv_host(&d, buf)));
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

static void test_flush_get_id_unsupported(void)
{
	struct vdrv d;
	CHECK(start(&d, false, ALL_FEATURES, 16));
	uint32_t len;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, false, &len) == VIRTIO_BLK_S_OK);
	CHECK(len == 1);

	uint64_t id = vdrv_alloc(&d, 20);
	memset(vdrv_host(&d, id), 0xff, 20);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_GET_ID, 0, id, 20, true, false, &len) == 0);
	CHECK(len == 21);
	CHECK(memcmp(vdrv_host(&d, id), "serial-0123\0\0\0\0\0\0\0\0\0", 20) == 0);
	/* A short buffer gets a truncated id. */
	memset(vdrv_host(&d, id), 0xff, 20);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_GET_ID, 0, id, 6, true, false, &len) == 0);
	CHECK(len == 7 && memcmp(vdrv_host(&d, id), "serial\xff", 7) == 0);

	uint64_t buf = vdrv_alloc(&d, 512);
	CHECK(vdrv_blk_req(&d, 99, 0, buf, 512, true, false, NULL) == VIRTIO_BLK_S_UNSUPP);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_WRITE_ZEROES, 0, buf, 16, false, false, NULL) ==
	      VIRTIO_BLK_S_UNSUPP);
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

static void test_bad_ranges(void)
{
	struct vdrv d;
	CHECK(start(&d, false, ALL_FEATURES, 16));
	uint64_t buf = vdrv_alloc(&d, 1024);
	const uint64_t bad[] = { SECTORS, SECTORS - 1 /* 2 sectors: one past the end */, UINT64_MAX,
				 UINT64_MAX / 512 + 1, (UINT64_MAX / 512) - 1 };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, bad[i], buf, 1024, true, false, NULL) ==
		      VIRTIO_BLK_S_IOERR);
		CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, bad[i], buf, 1024, false, false, NULL) ==
		      VIRTIO_BLK_S_IOERR);
	}
	/* Lengths that are not whole sectors. */
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 0, buf, 511, true, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 0, buf, 513, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	/* A header shorter than 16 bytes. */
	uint64_t hdr = vdrv_alloc(&d, 16), st = vdrv_alloc(&d, 1);
	vdrv_desc(&d, d.desc, 0, hdr, 8, VIRTQ_DESC_F_NEXT, 1);
	vdrv_desc(&d, d.desc, 1, st, 1, VIRTQ_DESC_F_WRITE, 0);
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	uint32_t id, len;
	CHECK(vdrv_take_used(&d, &id, &len) && *(uint8_t *)vdrv_host(&d, st) == VIRTIO_BLK_S_IOERR);
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

static void test_read_only(void)
{
	struct vdrv d;
	CHECK(start(&d, true, ALL_FEATURES, 16));
	vdrv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO));
	uint64_t buf = vdrv_alloc(&d, 512);
	memset(vdrv_host(&d, buf), 0x77, 512);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 3, buf, 512, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	uint8_t want[512];
	for (unsigned i = 0; i < 512; i++)
		want[i] = vdrv_pattern(3 * 512 + i);
	CHECK(disk_sector_is(3, want));
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 3, buf, 512, true, false, NULL) == 0);
	CHECK(pattern_at(vdrv_host(&d, buf), 3, 512));
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, false, NULL) == 0);
	vdrv_done(&d);
}

static bool can_punch_holes(void)
{
	char probe[300];
	snprintf(probe, sizeof(probe), "%s.punch", disk);
	int fd = open(probe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	bool ok = ftruncate(fd, 8192) == 0 &&
		  fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
	close(fd);
	unlink(probe);
	return ok;
}

static void test_discard(void)
{
	struct vdrv d;
	CHECK(start(&d, false, ALL_FEATURES, 16));
	vdrv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	if (!(vdrv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_DISCARD))) {
		CHECK(!"discard offered");
		vdrv_done(&d);
		return;
	}
	uint64_t seg = vdrv_alloc(&d, 16);
	uint64_t sector = 64;
	uint32_t num = 16;
	memcpy(vdrv_host(&d, seg), &sector, 8);
	memcpy((uint8_t *)vdrv_host(&d, seg) + 8, &num, 4);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, false, NULL) == VIRTIO_BLK_S_OK);
	/* Where the file system punches holes (tmpfs, ext4, btrfs) the range reads back as zeroes. */
	if (can_punch_holes()) {
		uint8_t zero[512] = { 0 };
		CHECK(disk_sector_is(64, zero) && disk_sector_is(79, zero));
		uint8_t keep[512];
		for (unsigned i = 0; i < 512; i++)
			keep[i] = vdrv_pattern(80 * 512 + i);
		CHECK(disk_sector_is(80, keep));
	}
	/* Past the end, and flags set. */
	sector = SECTORS - 8;
	memcpy(vdrv_host(&d, seg), &sector, 8);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	vdrv_done(&d);
}

static void test_interrupt_suppression(void)
{
	struct vdrv d;
	uint64_t buf;

	/* VIRTQ_AVAIL_F_NO_INTERRUPT without EVENT_IDX. */
	CHECK(start(&d, false, ALL_FEATURES & ~(1ull << VIRTIO_RING_F_EVENT_IDX), 16));
	buf = vdrv_alloc(&d, 512);
	uint16_t *avail = vdrv_host(&d, d.avail);
	avail[0] = VIRTQ_AVAIL_F_NO_INTERRUPT;
	int irqs = d.irqs;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 1, buf, 512, true, false, NULL) == 0);
	CHECK(d.irqs == irqs);
	avail[0] = 0;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 1, buf, 512, true, false, NULL) == 0);
	CHECK(d.irqs == irqs + 1);
	vdrv_done(&d);

	/* EVENT_IDX: interrupt only when used crosses used_event; avail_event is published. */
	CHECK(start(&d, false, ALL_FEATURES, 16));
	buf = vdrv_alloc(&d, 512);
	avail = vdrv_host(&d, d.avail);
	avail[2 + 16] = 2; /* used_event: interrupt when the 3rd entry is used */
	irqs = d.irqs;
	for (unsigned i = 0; i < 3; i++)
		CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, i, buf, 512, true, false, NULL) == 0);
	CHECK(d.irqs == irqs + 1);
	uint16_t avail_event;
	memcpy(&avail_event, (uint8_t *)vdrv_host(&d, d.used) + 4 + 8 * 16, 2);
	CHECK(avail_event == 3);
	vdrv_done(&d);
}

static void test_reset_and_reuse(void)
{
	struct vdrv d;
	CHECK(start(&d, false, ALL_FEATURES, 16));
	uint64_t buf = vdrv_alloc(&d, 512);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 1, buf, 512, true, false, NULL) == 0);
	vdrv_wr(&d, VIRTIO_MMIO_STATUS, 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_STATUS) == 0);
	CHECK(vdrv_rd(&d, VIRTIO_MMIO_QUEUE_READY) == 0);
	/* A notify on a reset device is ignored. */
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	uint32_t id, len;
	CHECK(!vdrv_take_used(&d, &id, &len));
	/* A new setup works from fresh indices. */
	CHECK(vdrv_setup(&d, ALL_FEATURES, 32) == 0x0f);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 2, buf, 512, true, false, NULL) == 0);
	CHECK(pattern_at(vdrv_host(&d, buf), 2, 512));
	vdrv_done(&d);
}

/* Another vCPU hammers the same device (notify, status, config) while requests are submitted. */
static volatile bool stop_hammer;

static void *hammer(void *arg)
{
	struct vdrv *d = arg;
	while (!__atomic_load_n(&stop_hammer, __ATOMIC_ACQUIRE)) {
		vdrv_kick(d);
		(void)vdrv_rd(d, VIRTIO_MMIO_INTERRUPT_STATUS);
		(void)vdrv_rd(d, 0x100);
		vdrv_wr(d, VIRTIO_MMIO_INTERRUPT_ACK, 1);
	}
	return NULL;
}

static void test_concurrent_vcpus(void)
{
	struct vdrv d;
	pthread_t th[2];
	CHECK(start(&d, false, ALL_FEATURES, 64));
	uint64_t buf = vdrv_alloc(&d, 512);
	stop_hammer = false;
	for (unsigned i = 0; i < ARRAY_SIZE(th); i++)
		CHECK(pthread_create(&th[i], NULL, hammer, &d) == 0);
	for (unsigned i = 0; i < 300; i++) {
		CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 200 + i % 100, buf, 512, true, i % 2, NULL) == 0);
		CHECK(pattern_at(vdrv_host(&d, buf), 200 + i % 100, 512)); /* sectors no test writes */
	}
	__atomic_store_n(&stop_hammer, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < ARRAY_SIZE(th); i++)
		pthread_join(th[i], NULL);
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

/* A back-end whose every operation fails with EIO: the guest sees IOERR, the device stays usable. */
static int eio_rw(void *b, const struct iovec *iov, int n, uint64_t off)
{
	(void)b, (void)iov, (void)n, (void)off;
	return -EIO;
}
static int eio_flush(void *b)
{
	(void)b;
	return -EIO;
}
static void eio_close(void *b)
{
	(void)b;
}
static const struct blk_backend_ops eio_ops = {
	.readv = eio_rw, .writev = eio_rw, .flush = eio_flush, .close = eio_close,
};

static void test_backend_errors(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	struct blk_backend be = { .ops = &eio_ops, .size = 64 * 512 };
	CHECK(virtio_blk_create_backend(&be, NULL, &d.mem, vdrv_irq(&d), &d.dev) == 0);
	CHECK(vdrv_setup(&d, ALL_FEATURES, 16) == 0x0f);
	uint64_t buf = vdrv_alloc(&d, 512);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 0, buf, 512, true, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 0, buf, 512, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_DISCARD, 0, buf, 16, false, false, NULL) ==
	      VIRTIO_BLK_S_UNSUPP);
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
}

/* A back-end with no room for its first writes and flushes (ENOSPC, then EDQUOT), then room. */
static int nospace_left; /* failures still to come */
static int nospace_writes;
static uint8_t nospace_data[512];
static int nospace_rw(void *b, const struct iovec *iov, int n, uint64_t off)
{
	(void)b;
	nospace_writes++;
	if (nospace_left > 0)
		return nospace_left-- % 2 ? -ENOSPC : -EDQUOT;
	if (n == 1 && off == 0 && iov[0].iov_len == sizeof(nospace_data))
		memcpy(nospace_data, iov[0].iov_base, sizeof(nospace_data));
	return 0;
}
static int nospace_flush(void *b)
{
	(void)b;
	return nospace_left > 0 ? (nospace_left--, -ENOSPC) : 0;
}
static const struct blk_backend_ops nospace_ops = {
	.readv = eio_rw, .writev = nospace_rw, .flush = nospace_flush, .close = eio_close,
};
static int waits, backs, wait_budget;
static bool wait_space(void *opaque, enum blk_space_event ev)
{
	(void)opaque;
	if (ev == BLK_SPACE_BACK) {
		backs++;
		return false;
	}
	waits++;
	return wait_budget-- > 0;
}

/* A write or flush with no room waits (the hook's word) and goes through once there is: the guest sees OK,
 * with its data written; without the hook, or when the hook gives up (the VM stops), IOERR. */
static void test_no_room_waits(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	struct blk_backend be = { .ops = &nospace_ops, .size = 64 * 512, .wait_space = wait_space };
	CHECK(virtio_blk_create_backend(&be, NULL, &d.mem, vdrv_irq(&d), &d.dev) == 0);
	CHECK(vdrv_setup(&d, ALL_FEATURES, 16) == 0x0f);
	uint64_t buf = vdrv_alloc(&d, 512);
	memset(vdrv_host(&d, buf), 0x5a, 512);
	nospace_left = 3, wait_budget = 100, waits = backs = nospace_writes = 0;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 0, buf, 512, false, false, NULL) == VIRTIO_BLK_S_OK);
	CHECK(waits == 3 && backs == 1 && nospace_writes == 4);
	CHECK(nospace_data[0] == 0x5a && nospace_data[511] == 0x5a);
	nospace_left = 2, waits = backs = 0;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, false, NULL) == VIRTIO_BLK_S_OK);
	CHECK(waits == 2 && backs == 1);
	/* The hook gives up (the VM is stopping): the request fails, and nothing says it went through. */
	nospace_left = 10, wait_budget = 2, waits = backs = 0;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 0, buf, 512, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(waits == 3 && backs == 0);
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);

	/* No hook: IOERR at once, as before. */
	CHECK(vdrv_init(&d) == 0);
	be = (struct blk_backend){ .ops = &nospace_ops, .size = 64 * 512 };
	CHECK(virtio_blk_create_backend(&be, NULL, &d.mem, vdrv_irq(&d), &d.dev) == 0);
	CHECK(vdrv_setup(&d, ALL_FEATURES, 16) == 0x0f);
	buf = vdrv_alloc(&d, 512);
	nospace_left = 1, nospace_writes = 0;
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_OUT, 0, buf, 512, false, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(nospace_writes == 1);
	vdrv_done(&d);
}

/* The backing file shrinks under a running device: reads past its new end fail, the rest works. */
static void test_file_shrinks(void)
{
	char small[256];
	struct vdrv d;
	CHECK(vdrv_tmpdisk(small, sizeof(small), 16) == 0);
	CHECK(vdrv_init(&d) == 0);
	CHECK(vdrv_attach_blk(&d, small, false, NULL) == 0);
	CHECK(vdrv_setup(&d, ALL_FEATURES, 16) == 0x0f);
	CHECK(truncate(small, 8 * 512) == 0);
	uint64_t buf = vdrv_alloc(&d, 1024);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 12, buf, 512, true, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 7, buf, 1024, true, false, NULL) == VIRTIO_BLK_S_IOERR);
	CHECK(vdrv_blk_req(&d, VIRTIO_BLK_T_IN, 6, buf, 1024, true, false, NULL) == VIRTIO_BLK_S_OK);
	CHECK(pattern_at(vdrv_host(&d, buf), 6, 1024));
	CHECK(!vdrv_needs_reset(&d));
	vdrv_done(&d);
	unlink(small);
}

static void test_create_errors(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	struct virtio_blk_config cfg = { .path = "/nonexistent/disk.img" };
	CHECK(virtio_blk_create(&cfg, &d.mem, vdrv_irq(&d), &d.dev) == -ENOENT);
	cfg = (struct virtio_blk_config){ .path = disk, .serial = "123456789012345678901" };
	CHECK(virtio_blk_create(&cfg, &d.mem, vdrv_irq(&d), &d.dev) == -EINVAL);
	cfg = (struct virtio_blk_config){ .path = "/tmp" };
	CHECK(virtio_blk_create(&cfg, &d.mem, vdrv_irq(&d), &d.dev) < 0);
	CHECK(d.dev.ops == NULL);
	vdrv_done(&d);
}

int main(void)
{
	if (vdrv_tmpdisk(disk, sizeof(disk), SECTORS) < 0) {
		perror("temp disk");
		return 1;
	}
	RUN(test_registers);
	RUN(test_feature_negotiation);
	RUN(test_read_write);
	RUN(test_scattered_and_indirect);
	RUN(test_flush_get_id_unsupported);
	RUN(test_bad_ranges);
	RUN(test_read_only);
	RUN(test_discard);
	RUN(test_interrupt_suppression);
	RUN(test_reset_and_reuse);
	RUN(test_concurrent_vcpus);
	RUN(test_backend_errors);
	RUN(test_no_room_waits);
	RUN(test_file_shrinks);
	RUN(test_create_errors);
	unlink(disk);
	return check_failures ? 1 : 0;
}
