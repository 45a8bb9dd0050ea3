/* SPDX-License-Identifier: Apache-2.0 */
#include "vsockdrv.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static void wr64(struct vdrv *d, uint64_t off, uint64_t v)
{
	vdrv_wr(d, off, (uint32_t)v);
	vdrv_wr(d, off + 4, (uint32_t)(v >> 32));
}

void vsd_queue_setup(struct vsd *s, unsigned q)
{
	struct vsd_queue *vq = &s->q[q];
	vq->desc = vdrv_alloc(&s->d, 16ull * VSD_QSIZE);
	vq->avail = vdrv_alloc(&s->d, 6 + 2ull * VSD_QSIZE);
	vq->used = vdrv_alloc(&s->d, 6 + 8ull * VSD_QSIZE);
	vq->avail_idx = vq->used_seen = 0;
	vdrv_wr(&s->d, VIRTIO_MMIO_QUEUE_SEL, q);
	vdrv_wr(&s->d, VIRTIO_MMIO_QUEUE_NUM, VSD_QSIZE);
	wr64(&s->d, VIRTIO_MMIO_QUEUE_DESC_LOW, vq->desc);
	wr64(&s->d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, vq->avail);
	wr64(&s->d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, vq->used);
	vdrv_wr(&s->d, VIRTIO_MMIO_QUEUE_READY, 1);
}

static void publish(struct vsd *s, unsigned q, uint16_t head)
{
	struct vsd_queue *vq = &s->q[q];
	uint16_t *a = vdrv_host(&s->d, vq->avail);
	a[2 + vq->avail_idx % VSD_QSIZE] = head;
	vq->avail_idx++;
	__atomic_store_n(&a[1], vq->avail_idx, __ATOMIC_RELEASE);
}

static bool take_used(struct vsd *s, unsigned q, uint32_t *id, uint32_t *len)
{
	struct vsd_queue *vq = &s->q[q];
	uint8_t *u = vdrv_host(&s->d, vq->used);
	uint16_t idx = __atomic_load_n((uint16_t *)(u + 2), __ATOMIC_ACQUIRE);
	if (idx == vq->used_seen)
		return false;
	const uint8_t *e = u + 4 + 8u * (vq->used_seen % VSD_QSIZE);
	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
	vq->used_seen++;
	return true;
}

int vsd_start(struct vsd *s, uint64_t cid, const char *path)
{
	memset(s, 0, sizeof(*s));
	int r = vdrv_init(&s->d);
	if (r < 0)
		return r;
	struct virtio_vsock_config cfg = { .guest_cid = cid, .uds_path = path };
	r = virtio_vsock_create(&cfg, &s->d.mem, vdrv_irq(&s->d), &s->d.dev);
	if (r < 0) {
		vdrv_done(&s->d);
		return r;
	}
	s->cid = cid;
	struct vdrv *d = &s->d;
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 1u << VIRTIO_RING_F_EVENT_IDX);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 1); /* VERSION_1 */
	uint32_t st = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	vdrv_wr(d, VIRTIO_MMIO_STATUS, st);
	for (unsigned q = 0; q < 3; q++)
		vsd_queue_setup(s, q);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, st | VIRTIO_STATUS_DRIVER_OK);
	if (vdrv_rd(d, VIRTIO_MMIO_STATUS) != (st | VIRTIO_STATUS_DRIVER_OK))
		return -EPROTO;
	for (uint16_t i = 0; i < VSD_QSIZE; i++) {
		s->rx_buf[i] = vdrv_alloc(d, sizeof(struct virtio_vsock_hdr) + VSD_RX_BUF);
		vdrv_desc(d, s->q[0].desc, i, s->rx_buf[i], sizeof(struct virtio_vsock_hdr) + VSD_RX_BUF,
			  VIRTQ_DESC_F_WRITE, 0);
		publish(s, 0, i);
	}
	s->tx_hdr = vdrv_alloc(d, 64);
	s->tx_data = vdrv_alloc(d, VIRTIO_VSOCK_MAX_PKT + 64);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	return 0;
}

void vsd_stop(struct vsd *s)
{
	vdrv_done(&s->d);
}

bool vsd_send_raw(struct vsd *s, const void *hdr, uint32_t hdr_len, const void *data, uint32_t len)
{
	struct vdrv *d = &s->d;
	memcpy(vdrv_host(d, s->tx_hdr), hdr, hdr_len);
	if (len)
		memcpy(vdrv_host(d, s->tx_data), data, len);
	vdrv_desc(d, s->q[1].desc, 0, s->tx_hdr, hdr_len, len ? VIRTQ_DESC_F_NEXT : 0, 1);
	vdrv_desc(d, s->q[1].desc, 1, s->tx_data, len, 0, 0);
	publish(s, 1, 0);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	uint32_t id, used;
	return take_used(s, 1, &id, &used);
}

bool vsd_send(struct vsd *s, uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t flags,
	      const void *data, uint32_t len, uint32_t buf_alloc, uint32_t fwd_cnt)
{
	struct virtio_vsock_hdr h = {
		.src_cid = s->cid, .dst_cid = VIRTIO_VSOCK_HOST_CID, .src_port = src_port,
		.dst_port = dst_port, .len = len, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = op,
		.flags = flags, .buf_alloc = buf_alloc, .fwd_cnt = fwd_cnt,
	};
	return vsd_send_raw(s, &h, sizeof(h), data, len);
}

int vsd_recv(struct vsd *s, struct virtio_vsock_hdr *h, void *data, uint32_t max, int timeout_ms)
{
	uint32_t id, len;
	for (int waited = 0; !take_used(s, 0, &id, &len); waited++) {
		if (waited >= timeout_ms)
			return -1;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	const uint8_t *buf = vdrv_host(&s->d, s->rx_buf[id % VSD_QSIZE]);
	memcpy(h, buf, sizeof(*h));
	uint32_t n = len > sizeof(*h) ? len - (uint32_t)sizeof(*h) : 0;
	if (n > max)
		n = max;
	if (data && n)
		memcpy(data, buf + sizeof(*h), n);
	if (!s->no_repost)
		vsd_repost(s, (uint16_t)(id % VSD_QSIZE));
	s->last_rx = (uint16_t)(id % VSD_QSIZE);
	return (int)(len > sizeof(*h) ? len - sizeof(*h) : 0);
}

void vsd_repost(struct vsd *s, uint16_t slot)
{
	publish(s, 0, slot);
	vdrv_wr(&s->d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

uint16_t vsd_rx_avail_event(struct vsd *s)
{
	const uint8_t *u = vdrv_host(&s->d, s->q[0].used);
	return __atomic_load_n((const uint16_t *)(u + 4 + 8u * VSD_QSIZE), __ATOMIC_ACQUIRE);
}
