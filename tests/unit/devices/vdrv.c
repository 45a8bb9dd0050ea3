/* SPDX-License-Identifier: Apache-2.0 */
#include "vdrv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/virtio_blk.h"

static int count_irq(void *opaque)
{
	struct vdrv *d = opaque;
	d->irqs++;
	return 0;
}

int vdrv_init(struct vdrv *d)
{
	memset(d, 0, sizeof(*d));
	void *low = aligned_alloc(4096, VDRV_LOW_SIZE);
	void *high = aligned_alloc(4096, VDRV_HIGH_SIZE);
	if (!low || !high) {
		free(low);
		free(high);
		return -ENOMEM;
	}
	memset(low, 0, VDRV_LOW_SIZE);
	memset(high, 0, VDRV_HIGH_SIZE);
	d->mem.regions[0] = (struct guest_region){ .gpa = 0, .size = VDRV_LOW_SIZE, .host = low };
	d->mem.regions[1] = (struct guest_region){ .gpa = VDRV_HIGH_GPA, .size = VDRV_HIGH_SIZE, .host = high };
	d->mem.nregions = 2;
	d->next_free = 0x1000;
	return 0;
}

struct mmio_irq vdrv_irq(struct vdrv *d)
{
	return (struct mmio_irq){ .trigger = count_irq, .opaque = d };
}

void vdrv_done(struct vdrv *d)
{
	if (d->dev.ops && d->dev.ops->destroy)
		d->dev.ops->destroy(d->dev.dev);
	free(d->mem.regions[0].host);
	free(d->mem.regions[1].host);
	memset(d, 0, sizeof(*d));
}

uint32_t vdrv_rd(struct vdrv *d, uint64_t off)
{
	uint32_t v = 0;
	d->dev.ops->read(d->dev.dev, off, &v, 4);
	return v;
}

void vdrv_wr(struct vdrv *d, uint64_t off, uint32_t v)
{
	d->dev.ops->write(d->dev.dev, off, &v, 4);
}

void *vdrv_host(struct vdrv *d, uint64_t gpa)
{
	return guest_mem_ptr(&d->mem, gpa, 1);
}

uint64_t vdrv_alloc(struct vdrv *d, uint64_t size)
{
	uint64_t gpa = d->next_free;
	d->next_free = (d->next_free + size + 15) & ~15ull;
	if (d->next_free > VDRV_LOW_SIZE)
		abort(); /* a test asked for more fake RAM than exists */
	memset(vdrv_host(d, gpa), 0, size);
	return gpa;
}

uint32_t vdrv_setup(struct vdrv *d, uint64_t want, uint16_t qsize)
{
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	uint64_t f = 0;
	for (uint32_t sel = 0; sel < 2; sel++) {
		vdrv_wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, sel);
		f |= (uint64_t)vdrv_rd(d, VIRTIO_MMIO_DEVICE_FEATURES) << (32 * sel);
	}
	f &= want;
	for (uint32_t sel = 0; sel < 2; sel++) {
		vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, sel);
		vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(f >> (32 * sel)));
	}
	uint32_t st = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	vdrv_wr(d, VIRTIO_MMIO_STATUS, st);
	if (!(vdrv_rd(d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK))
		return vdrv_rd(d, VIRTIO_MMIO_STATUS);

	d->qsize = qsize;
	d->desc = vdrv_alloc(d, 16ull * qsize);
	d->avail = vdrv_alloc(d, 6 + 2ull * qsize);
	d->used = vdrv_alloc(d, 6 + 8ull * qsize);
	d->avail_idx = d->used_seen = 0;
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_NUM, qsize);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)d->desc);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(d->desc >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)d->avail);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, (uint32_t)(d->avail >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)d->used);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, (uint32_t)(d->used >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, st | VIRTIO_STATUS_DRIVER_OK);
	return vdrv_rd(d, VIRTIO_MMIO_STATUS);
}

void vdrv_desc(struct vdrv *d, uint64_t table, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
	       uint16_t next)
{
	struct virtq_desc v = { .addr = addr, .len = len, .flags = flags, .next = next };
	memcpy(vdrv_host(d, table + 16ull * i), &v, sizeof(v));
}

void vdrv_set_avail_idx(struct vdrv *d, uint16_t idx)
{
	uint16_t *a = vdrv_host(d, d->avail);
	__atomic_store_n(&a[1], idx, __ATOMIC_RELEASE);
}

void vdrv_publish(struct vdrv *d, uint16_t head)
{
	uint16_t *a = vdrv_host(d, d->avail);
	a[2 + d->avail_idx % d->qsize] = head;
	d->avail_idx++;
	vdrv_set_avail_idx(d, d->avail_idx);
}

void vdrv_kick(struct vdrv *d)
{
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

bool vdrv_take_used(struct vdrv *d, uint32_t *id, uint32_t *len)
{
	uint8_t *u = vdrv_host(d, d->used);
	uint16_t idx = __atomic_load_n((uint16_t *)(u + 2), __ATOMIC_ACQUIRE);
	if (idx == d->used_seen)
		return false;
	const uint8_t *e = u + 4 + 8u * (d->used_seen % d->qsize);
	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
	d->used_seen++;
	return true;
}

bool vdrv_needs_reset(struct vdrv *d)
{
	return vdrv_rd(d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET;
}

int vdrv_tmpdisk(char *path, size_t path_len, uint64_t sectors)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, path_len, "%s/vdrv-disk-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	uint8_t sec[512];
	for (uint64_t s = 0; s < sectors; s++) {
		for (unsigned i = 0; i < 512; i++)
			sec[i] = vdrv_pattern(s * 512 + i);
		if (pwrite(fd, sec, 512, (off_t)(s * 512)) != 512) {
			int r = -errno;
			close(fd);
			unlink(path);
			return r ? r : -EIO;
		}
	}
	close(fd);
	return 0;
}

int vdrv_attach_blk(struct vdrv *d, const char *path, bool read_only, const char *serial)
{
	struct virtio_blk_config cfg = { .path = path, .read_only = read_only, .serial = serial };
	return virtio_blk_create(&cfg, &d->mem, vdrv_irq(d), &d->dev);
}

int vdrv_blk_req(struct vdrv *d, uint32_t type, uint64_t sector, uint64_t data, uint32_t len,
		 bool device_writes, bool indirect, uint32_t *used_len)
{
	uint64_t hdr = vdrv_alloc(d, 16);
	uint64_t status = vdrv_alloc(d, 1);
	uint8_t *h = vdrv_host(d, hdr);
	memcpy(h, &type, 4);
	memcpy(h + 8, &sector, 8);
	*(uint8_t *)vdrv_host(d, status) = 0xee;

	uint64_t table = indirect ? vdrv_alloc(d, 48) : d->desc;
	uint16_t base = indirect ? 0 : (uint16_t)((d->avail_idx * 3u) % d->qsize);
	uint16_t n = 0;
	/* A direct chain takes three consecutive slots; requests complete synchronously, so reuse is safe. */
#define SLOT(k) (uint16_t)((base + (k)) % (indirect ? 3u : d->qsize))
	vdrv_desc(d, table, SLOT(n), hdr, 16, VIRTQ_DESC_F_NEXT, SLOT(n + 1));
	n++;
	if (len) {
		vdrv_desc(d, table, SLOT(n), data, len,
			  VIRTQ_DESC_F_NEXT | (device_writes ? VIRTQ_DESC_F_WRITE : 0), SLOT(n + 1));
		n++;
	}
	vdrv_desc(d, table, SLOT(n), status, 1, VIRTQ_DESC_F_WRITE, 0);
	n++;
	uint16_t head = base;
	if (indirect) {
		head = (uint16_t)(d->avail_idx % d->qsize);
		vdrv_desc(d, d->desc, head, table, 16u * n, VIRTQ_DESC_F_INDIRECT, 0);
	}
#undef SLOT
	vdrv_publish(d, head);
	vdrv_kick(d);

	uint32_t id, ulen;
	if (!vdrv_take_used(d, &id, &ulen) || id != head)
		return -1;
	if (used_len)
		*used_len = ulen;
	return *(uint8_t *)vdrv_host(d, status);
}
