/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-blk (virtio 1.x, 5.2) over the virtio-mmio transport. One request queue; requests are served
 * synchronously on the notifying vCPU thread, under the transport lock.
 *
 * A request is: a 16-byte header (type, reserved, sector) in device-readable buffers, then the data
 * (readable for OUT and DISCARD, writable for IN and GET_ID), then a status byte, the last byte of the
 * last writable buffer. A request the guest gets wrong within that shape (bad sector range, odd
 * length, unknown type) is answered with IOERR/UNSUPP; a chain that has no room for the status byte
 * cannot be answered at all and breaks the device.
 */
#include "devices/virtio_blk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/virtio_mmio.h"
#include "util/cleanup.h"

#define SECTOR 512u
#define VIRTIO_ID_BLOCK 2u

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

struct blk_discard_seg {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
};

/* The configuration space layout up to the discard fields (virtio 1.x, 5.2.4). */
struct blk_config {
	uint64_t capacity;
	uint32_t size_max;
	uint32_t seg_max;
	uint16_t cylinders;
	uint8_t heads;
	uint8_t sectors;
	uint32_t blk_size;
	uint8_t physical_block_exp;
	uint8_t alignment_offset;
	uint16_t min_io_size;
	uint32_t opt_io_size;
	uint8_t writeback;
	uint8_t unused0;
	uint16_t num_queues;
	uint32_t max_discard_sectors;
	uint32_t max_discard_seg;
	uint32_t discard_sector_alignment;
} __attribute__((packed));
_Static_assert(sizeof(struct blk_config) == 48, "virtio-blk config layout");

struct virtio_blk {
	struct blk_backend be;
	struct blk_config config;
	char id[VIRTIO_BLK_ID_BYTES];
	struct virtq_chain chain;
	struct iovec data[VIRTQUEUE_MAX_SEGS];
};

static uint64_t blk_features(void *dev)
{
	struct virtio_blk *b = dev;
	uint64_t f = (1ull << VIRTIO_BLK_F_SIZE_MAX) | (1ull << VIRTIO_BLK_F_SEG_MAX) |
		     (1ull << VIRTIO_BLK_F_BLK_SIZE) | (1ull << VIRTIO_BLK_F_FLUSH);

	if (b->be.read_only)
		f |= 1ull << VIRTIO_BLK_F_RO;
	else if (b->be.ops->discard)
		f |= 1ull << VIRTIO_BLK_F_DISCARD;
	return f;
}

static void blk_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	struct virtio_blk *b = dev;
	memcpy(data, (const uint8_t *)&b->config + offset, len);
}

/* Whether [sector, sector + bytes/512) lies on the disk; bytes must be whole sectors. */
static bool range_ok(const struct virtio_blk *b, uint64_t sector, uint64_t bytes)
{
	uint64_t cap = b->config.capacity;
	return bytes % SECTOR == 0 && sector <= cap && bytes / SECTOR <= cap - sector;
}

static bool no_room(int r)
{
	return r == -ENOSPC || r == -EDQUOT;
}

/* A write or flush (op's result r) that found no room waits and is tried again while be.wait_space says so
 * (blk_backend.h). Returns the last result. */
static int retry_for_space(struct virtio_blk *b, int r, const struct blk_req_hdr *h, int n)
{
	if (!no_room(r) || !b->be.wait_space)
		return r;
	while (no_room(r) && b->be.wait_space(b->be.wait_opaque, BLK_SPACE_WAIT))
		r = h ? b->be.ops->writev(b->be.b, b->data, n, h->sector * SECTOR) : b->be.ops->flush(b->be.b);
	if (!no_room(r))
		(void)b->be.wait_space(b->be.wait_opaque, BLK_SPACE_BACK);
	return r;
}

static uint8_t do_rw(struct virtio_blk *b, const struct virtq_chain *c, const struct blk_req_hdr *h,
		     bool write, uint64_t data_len, uint32_t *written)
{
	if (write && b->be.read_only)
		return VIRTIO_BLK_S_IOERR;
	if (data_len >= UINT32_MAX || !range_ok(b, h->sector, data_len))
		return VIRTIO_BLK_S_IOERR;
	int n = virtq_chain_slice(c, !write, write ? sizeof(*h) : 0, data_len, b->data, VIRTIO_BLK_SEG_MAX);
	if (n < 0)
		return VIRTIO_BLK_S_IOERR;
	uint64_t off = h->sector * SECTOR;
	int r = write ? b->be.ops->writev(b->be.b, b->data, n, off)
		      : b->be.ops->readv(b->be.b, b->data, n, off);
	if (write)
		r = retry_for_space(b, r, h, n);
	if (r < 0)
		return VIRTIO_BLK_S_IOERR;
	if (!write)
		*written += (uint32_t)data_len;
	return VIRTIO_BLK_S_OK;
}

static uint8_t do_get_id(struct virtio_blk *b, const struct virtq_chain *c, uint64_t room,
			 uint32_t *written)
{
	uint64_t len = room < VIRTIO_BLK_ID_BYTES ? room : VIRTIO_BLK_ID_BYTES;
	int n = virtq_chain_slice(c, true, 0, len, b->data, VIRTQUEUE_MAX_SEGS);
	if (n < 0)
		return VIRTIO_BLK_S_IOERR;
	const uint8_t *src = (const uint8_t *)b->id;
	for (int i = 0; i < n; i++) {
		memcpy(b->data[i].iov_base, src, b->data[i].iov_len);
		src += b->data[i].iov_len;
	}
	*written += (uint32_t)len;
	return VIRTIO_BLK_S_OK;
}

static uint8_t do_discard(struct virtio_blk *b, const struct virtq_chain *c, uint64_t payload)
{
	struct blk_discard_seg seg;

	if (b->be.read_only)
		return VIRTIO_BLK_S_IOERR;
	if (!b->be.ops->discard)
		return VIRTIO_BLK_S_UNSUPP; /* not offered, so the driver should not have asked */
	/* We advertise max_discard_seg = 1. */
	if (payload != sizeof(seg))
		return VIRTIO_BLK_S_IOERR;
	if (virtq_chain_read(c, sizeof(struct blk_req_hdr), &seg, sizeof(seg)) < 0)
		return VIRTIO_BLK_S_IOERR;
	if (seg.flags != 0 || seg.num_sectors > VIRTIO_BLK_MAX_DISCARD_SECTORS ||
	    !range_ok(b, seg.sector, (uint64_t)seg.num_sectors * SECTOR))
		return VIRTIO_BLK_S_IOERR;
	int r = b->be.ops->discard(b->be.b, seg.sector * SECTOR, (uint64_t)seg.num_sectors * SECTOR);
	/*
	 * A discard is a hint: where the host file system cannot punch holes the sectors simply keep
	 * their contents, which the spec allows (only WRITE_ZEROES promises zeroes).
	 */
	if (r == -EOPNOTSUPP)
		return VIRTIO_BLK_S_OK;
	return r < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
}

/* Serves one chain. Returns the bytes written into it, or -EPROTO if it has no status byte. */
static int64_t blk_handle(struct virtio_blk *b, const struct virtq_chain *c)
{
	struct blk_req_hdr h;

	if (c->nin == 0)
		return -EPROTO;
	/* The status byte is the last byte of the last writable buffer; the data is what precedes it. */
	const struct iovec *last = &c->iov[c->nout + c->nin - 1];
	uint8_t *status = (uint8_t *)last->iov_base + last->iov_len - 1;
	uint64_t in_data = c->in_len - 1;
	uint32_t written = 1;
	uint8_t s;

	if (virtq_chain_read(c, 0, &h, sizeof(h)) < 0) {
		s = VIRTIO_BLK_S_IOERR;
	} else {
		uint64_t out_data = c->out_len - sizeof(h);
		switch (h.type) {
		case VIRTIO_BLK_T_IN:
			s = do_rw(b, c, &h, false, in_data, &written);
			break;
		case VIRTIO_BLK_T_OUT:
			s = do_rw(b, c, &h, true, out_data, &written);
			break;
		case VIRTIO_BLK_T_FLUSH:
			s = b->be.read_only || retry_for_space(b, b->be.ops->flush(b->be.b), NULL, 0) == 0
				    ? VIRTIO_BLK_S_OK
				    : VIRTIO_BLK_S_IOERR;
			break;
		case VIRTIO_BLK_T_GET_ID:
			s = do_get_id(b, c, in_data, &written);
			break;
		case VIRTIO_BLK_T_DISCARD:
			s = do_discard(b, c, out_data);
			break;
		default:
			s = VIRTIO_BLK_S_UNSUPP;
			break;
		}
	}
	*status = s;
	return written;
}

static void blk_queue_notify(void *dev, struct virtio_mmio *t, unsigned q)
{
	struct virtio_blk *b = dev;
	uint16_t old = virtio_mmio_used_idx(t, q);
	int r;

	do {
		while ((r = virtio_mmio_pop(t, q, &b->chain)) == 1) {
			int64_t written = blk_handle(b, &b->chain);
			if (written < 0) {
				virtio_mmio_fail(t, "virtio-blk request without a status byte");
				return;
			}
			virtio_mmio_push(t, q, b->chain.head, (uint32_t)written);
		}
		if (r < 0)
			return; /* the transport marked the device broken */
	} while (virtio_mmio_enable_notify(t, q));
	virtio_mmio_notify_used(t, q, old);
}

static void blk_destroy(void *dev)
{
	struct virtio_blk *b = dev;
	if (!b)
		return;
	blk_backend_close(&b->be);
	free(b);
}

static const struct virtio_dev_ops blk_ops = {
	.device_id = VIRTIO_ID_BLOCK,
	.num_queues = 1,
	.queue_max = VIRTIO_BLK_QUEUE_SIZE,
	.config_size = sizeof(struct blk_config),
	.features = blk_features,
	.config_read = blk_config_read,
	.queue_notify = blk_queue_notify,
	.destroy = blk_destroy,
};

int virtio_blk_create_backend(struct blk_backend *be, const char *serial, const struct guest_mem *mem,
			      struct mmio_irq irq, struct mmio_dev *ret)
{
	if (!be || !be->ops || !mem || !ret)
		return -EINVAL;
	if (!serial)
		serial = "space-blk";

	_cleanup_free_ struct virtio_blk *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->be = *be;
	strncpy(b->id, serial, sizeof(b->id)); /* not NUL-terminated when 20 bytes long, as the spec says */
	b->config = (struct blk_config){
		.capacity = be->size / SECTOR,
		.size_max = VIRTIO_BLK_SIZE_MAX,
		.seg_max = VIRTIO_BLK_SEG_MAX,
		.blk_size = SECTOR,
		.num_queues = 1,
		.max_discard_sectors = VIRTIO_BLK_MAX_DISCARD_SECTORS,
		.max_discard_seg = 1,
		.discard_sector_alignment = 8,
	};
	int r = virtio_mmio_create(&blk_ops, b, mem, irq, "virtio-blk", ret);
	if (r < 0)
		return r;
	TAKE_PTR(b);
	*be = (struct blk_backend){ 0 };
	return 0;
}

int virtio_blk_create(const struct virtio_blk_config *cfg, const struct guest_mem *mem,
		      struct mmio_irq irq, struct mmio_dev *ret)
{
	struct blk_backend be;
	char serial[VIRTIO_BLK_ID_BYTES + 1];

	if (!cfg || !cfg->path)
		return -EINVAL;
	if (cfg->serial && strlen(cfg->serial) > VIRTIO_BLK_ID_BYTES)
		return -EINVAL;
	if (!cfg->serial) {
		const char *base = strrchr(cfg->path, '/');
		base = base ? base + 1 : cfg->path;
		snprintf(serial, sizeof(serial), "%s", base);
	}
	int r = blk_backend_open_file(cfg->path, cfg->read_only, &be);
	if (r < 0)
		return r;
	be.wait_space = cfg->wait_space;
	be.wait_opaque = cfg->wait_opaque;
	r = virtio_blk_create_backend(&be, cfg->serial ? cfg->serial : serial, mem, irq, ret);
	if (r < 0)
		blk_backend_close(&be);
	return r;
}
