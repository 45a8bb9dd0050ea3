/* SPDX-License-Identifier: Apache-2.0 */
#include "mq.h"

#define barrier() __asm__ volatile("" ::: "memory")

static void wr_addr(const struct gv *v, uint32_t off, const volatile void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	gv_wr(v, off, (uint32_t)a);
	gv_wr(v, off + 4, (uint32_t)(a >> 32));
}

const char *mq_init(struct mq_dev *d, uint64_t base, uint32_t device_id, uint64_t want, unsigned nq)
{
	struct gv *v = &d->gv;
	v->base = base;
	if (gv_rd(v, GV_MAGIC) != 0x74726976u || gv_rd(v, GV_VERSION) != 2)
		return "not a virtio-mmio v2 device";
	if (gv_rd(v, GV_DEVICE_ID) != device_id)
		return "unexpected device type";
	gv_wr(v, GV_STATUS, 0);
	gv_wr(v, GV_STATUS, 1);
	gv_wr(v, GV_STATUS, 3);
	uint64_t f = 0;
	for (uint32_t sel = 0; sel < 2; sel++) {
		gv_wr(v, GV_DEVICE_FEATURES_SEL, sel);
		f |= (uint64_t)gv_rd(v, GV_DEVICE_FEATURES) << (32 * sel);
	}
	if (!(f & GV_F_VERSION_1))
		return "device does not offer VERSION_1";
	f &= want | GV_F_VERSION_1;
	for (uint32_t sel = 0; sel < 2; sel++) {
		gv_wr(v, GV_DRIVER_FEATURES_SEL, sel);
		gv_wr(v, GV_DRIVER_FEATURES, (uint32_t)(f >> (32 * sel)));
	}
	gv_wr(v, GV_STATUS, 3 | GV_S_FEATURES_OK);
	if (!(gv_rd(v, GV_STATUS) & GV_S_FEATURES_OK))
		return "FEATURES_OK refused";
	for (unsigned i = 0; i < nq && i < MQ_MAX_QUEUES; i++) {
		struct mq_queue *q = &d->q[i];
		gv_wr(v, GV_QUEUE_SEL, i);
		if (gv_rd(v, GV_QUEUE_NUM_MAX) < MQ_QSIZE)
			return "QueueNumMax too small";
		q->desc = guest_alloc(16 * MQ_QSIZE, 4096);
		q->avail = guest_alloc(6 + 2 * MQ_QSIZE, 4096);
		q->used = guest_alloc(6 + 8 * MQ_QSIZE, 4096);
		memset(q->desc, 0, 16 * MQ_QSIZE);
		memset((void *)q->avail, 0, 6 + 2 * MQ_QSIZE);
		memset((void *)q->used, 0, 6 + 8 * MQ_QSIZE);
		q->avail_idx = q->used_seen = 0;
		gv_wr(v, GV_QUEUE_NUM, MQ_QSIZE);
		wr_addr(v, GV_QUEUE_DESC, q->desc);
		wr_addr(v, GV_QUEUE_DRIVER, q->avail);
		wr_addr(v, GV_QUEUE_DEVICE, q->used);
		gv_wr(v, GV_QUEUE_READY, 1);
	}
	gv_wr(v, GV_STATUS, 3 | GV_S_FEATURES_OK | GV_S_DRIVER_OK);
	uint32_t st = gv_rd(v, GV_STATUS);
	if (!(st & GV_S_DRIVER_OK) || (st & GV_S_NEEDS_RESET))
		return "device did not accept DRIVER_OK";
	return NULL;
}

void mq_publish(struct mq_dev *d, unsigned qi, uint16_t head)
{
	struct mq_queue *q = &d->q[qi];
	q->avail[2 + q->avail_idx % MQ_QSIZE] = head;
	barrier();
	q->avail[1] = ++q->avail_idx;
	barrier();
	gv_wr(&d->gv, GV_QUEUE_NOTIFY, qi);
}

bool mq_take_used(struct mq_dev *d, unsigned qi, uint32_t *id, uint32_t *len)
{
	struct mq_queue *q = &d->q[qi];
	barrier();
	if (*(volatile uint16_t *)(q->used + 2) == q->used_seen)
		return false;
	barrier();
	const volatile uint8_t *e = q->used + 4 + 8u * (q->used_seen % MQ_QSIZE);
	*id = *(const volatile uint32_t *)e;
	*len = *(const volatile uint32_t *)(e + 4);
	q->used_seen++;
	return true;
}

uint8_t mq_config8(const struct mq_dev *d, unsigned off)
{
	return mmio_read8(d->gv.base + GV_CONFIG + off);
}
