/* SPDX-License-Identifier: Apache-2.0 */
#include "devices/virtio_mmio.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct virtio_mmio {
	pthread_mutex_t lock;
	const struct virtio_dev_ops *ops;
	void *dev;
	const struct guest_mem *mem;
	struct mmio_irq irq;

	uint64_t device_features;
	uint64_t driver_features;
	uint32_t device_features_sel, driver_features_sel, queue_sel;
	uint32_t status;
	uint32_t isr;
	uint32_t config_generation;
	const char *broken_why;
	struct virtqueue vq[VIRTIO_MMIO_MAX_QUEUES];
};

#define TRANSPORT_FEATURES                                                                          \
	((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_INDIRECT_DESC) |                     \
	 (1ull << VIRTIO_RING_F_EVENT_IDX))

static void raise_irq(struct virtio_mmio *t, uint32_t why)
{
	t->isr |= why;
	if (t->irq.trigger)
		(void)t->irq.trigger(t->irq.opaque); /* a lost edge is recovered by the driver's polling */
}

void virtio_mmio_fail(struct virtio_mmio *t, const char *why)
{
	if (t->broken_why)
		return;
	t->broken_why = why ? why : "device error";
	t->status |= VIRTIO_STATUS_NEEDS_RESET;
	raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
}

bool virtio_mmio_broken(const struct virtio_mmio *t, const char **ret_why)
{
	if (ret_why)
		*ret_why = t->broken_why;
	return t->broken_why != NULL;
}

void virtio_mmio_config_changed(struct virtio_mmio *t)
{
	t->config_generation++;
	if (t->status & VIRTIO_STATUS_DRIVER_OK)
		raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
}

uint64_t virtio_mmio_features(const struct virtio_mmio *t)
{
	return t->driver_features;
}

void virtio_mmio_lock(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->lock);
}

void virtio_mmio_unlock(struct virtio_mmio *t)
{
	pthread_mutex_unlock(&t->lock);
}

int virtio_mmio_pop(struct virtio_mmio *t, unsigned q, struct virtq_chain *chain)
{
	if (t->broken_why || q >= t->ops->num_queues)
		return -EPROTO;
	int r = virtqueue_pop(&t->vq[q], chain);
	if (r < 0)
		virtio_mmio_fail(t, t->vq[q].error);
	return r;
}

void virtio_mmio_push(struct virtio_mmio *t, unsigned q, uint16_t head, uint32_t written)
{
	if (q < t->ops->num_queues && t->vq[q].ready)
		virtqueue_push(&t->vq[q], head, written);
}

uint16_t virtio_mmio_used_idx(const struct virtio_mmio *t, unsigned q)
{
	return q < t->ops->num_queues ? t->vq[q].used_idx : 0;
}

void virtio_mmio_notify_used(struct virtio_mmio *t, unsigned q, uint16_t old_used)
{
	if (q >= t->ops->num_queues || !t->vq[q].ready || t->vq[q].used_idx == old_used)
		return;
	if (virtqueue_should_notify(&t->vq[q], old_used))
		raise_irq(t, VIRTIO_MMIO_INT_VRING);
}

bool virtio_mmio_enable_notify(struct virtio_mmio *t, unsigned q)
{
	if (t->broken_why || q >= t->ops->num_queues || !t->vq[q].ready)
		return false;
	return virtqueue_enable_notify(&t->vq[q]);
}

static void transport_reset(struct virtio_mmio *t)
{
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		virtqueue_reset(&t->vq[i]);
	t->driver_features = 0;
	t->device_features_sel = t->driver_features_sel = t->queue_sel = 0;
	t->status = 0;
	t->isr = 0;
	t->broken_why = NULL;
	if (t->ops->reset)
		t->ops->reset(t->dev);
}

static struct virtqueue *selected_queue(struct virtio_mmio *t)
{
	return t->queue_sel < t->ops->num_queues ? &t->vq[t->queue_sel] : NULL;
}

static bool features_acceptable(const struct virtio_mmio *t)
{
	return !(t->driver_features & ~t->device_features) &&
	       (t->driver_features & (1ull << VIRTIO_F_VERSION_1));
}

static void write_status(struct virtio_mmio *t, uint32_t v)
{
	if (v == 0) {
		transport_reset(t);
		return;
	}
	uint32_t keep = t->status & VIRTIO_STATUS_NEEDS_RESET;
	uint32_t old = t->status & ~VIRTIO_STATUS_NEEDS_RESET;
	uint32_t new = v & ~VIRTIO_STATUS_NEEDS_RESET;

	/* Bits only go away through a reset. */
	if (old & ~new)
		return;
	if ((new & VIRTIO_STATUS_FEATURES_OK) && !(old & VIRTIO_STATUS_FEATURES_OK) &&
	    !features_acceptable(t))
		new &= ~VIRTIO_STATUS_FEATURES_OK;
	if ((new & VIRTIO_STATUS_DRIVER_OK) && !(new & VIRTIO_STATUS_FEATURES_OK))
		new &= ~VIRTIO_STATUS_DRIVER_OK;
	t->status = new | keep;
}

static void write_queue_ready(struct virtio_mmio *t, struct virtqueue *vq, uint32_t v)
{
	if (!v) {
		/* The driver stops using the queue; a later ready starts from fresh indices. */
		vq->ready = false;
		return;
	}
	if (vq->ready)
		return;
	vq->indirect = t->driver_features & (1ull << VIRTIO_RING_F_INDIRECT_DESC);
	vq->event_idx = t->driver_features & (1ull << VIRTIO_RING_F_EVENT_IDX);
	if (virtqueue_activate(vq, t->mem, t->ops->queue_max) < 0)
		virtio_mmio_fail(t, vq->error);
}

static void set_half(uint64_t *v, bool high, uint32_t part)
{
	if (high)
		*v = (*v & 0xffffffffull) | ((uint64_t)part << 32);
	else
		*v = (*v & ~0xffffffffull) | part;
}

static void write_queue_reg(struct virtio_mmio *t, uint64_t offset, uint32_t v)
{
	struct virtqueue *vq = selected_queue(t);

	if (!vq)
		return;
	if (offset == VIRTIO_MMIO_QUEUE_READY) {
		write_queue_ready(t, vq, v);
		return;
	}
	/* The layout of a live queue is fixed until it is disabled or the device reset. */
	if (vq->ready)
		return;
	switch (offset) {
	case VIRTIO_MMIO_QUEUE_NUM:
		vq->num = v > UINT16_MAX ? 0 : (uint16_t)v;
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		set_half(&vq->desc_gpa, offset == VIRTIO_MMIO_QUEUE_DESC_HIGH, v);
		break;
	case VIRTIO_MMIO_QUEUE_DRIVER_LOW:
	case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
		set_half(&vq->avail_gpa, offset == VIRTIO_MMIO_QUEUE_DRIVER_HIGH, v);
		break;
	case VIRTIO_MMIO_QUEUE_DEVICE_LOW:
	case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
		set_half(&vq->used_gpa, offset == VIRTIO_MMIO_QUEUE_DEVICE_HIGH, v);
		break;
	}
}

static void notify(struct virtio_mmio *t, uint32_t v)
{
	/* Without VIRTIO_F_NOTIFICATION_DATA the value is the queue index. */
	if (v >= t->ops->num_queues || t->broken_why || !(t->status & VIRTIO_STATUS_DRIVER_OK) ||
	    !t->vq[v].ready)
		return;
	t->ops->queue_notify(t->dev, t, v);
}

static void reg_write(struct virtio_mmio *t, uint64_t offset, uint32_t v)
{
	switch (offset) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		t->device_features_sel = v;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		t->driver_features_sel = v;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (t->status & VIRTIO_STATUS_FEATURES_OK || t->driver_features_sel > 1)
			break;
		set_half(&t->driver_features, t->driver_features_sel == 1, v);
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		t->queue_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
	case VIRTIO_MMIO_QUEUE_READY:
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_DRIVER_LOW:
	case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
	case VIRTIO_MMIO_QUEUE_DEVICE_LOW:
	case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
		write_queue_reg(t, offset, v);
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		notify(t, v);
		break;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		t->isr &= ~v;
		break;
	case VIRTIO_MMIO_STATUS:
		write_status(t, v);
		break;
	default:
		break; /* read-only or unknown: ignored */
	}
}

static uint32_t reg_read(struct virtio_mmio *t, uint64_t offset)
{
	struct virtqueue *vq = selected_queue(t);

	switch (offset) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return VIRTIO_MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return 2;
	case VIRTIO_MMIO_DEVICE_ID:
		return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return VIRTIO_MMIO_VENDOR;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		if (t->device_features_sel > 1)
			return 0;
		return (uint32_t)(t->device_features >> (32 * t->device_features_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return vq ? t->ops->queue_max : 0;
	case VIRTIO_MMIO_QUEUE_NUM:
		return vq ? vq->num : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return vq ? vq->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return t->isr;
	case VIRTIO_MMIO_STATUS:
		return t->status;
	case VIRTIO_MMIO_SHM_LEN_LOW:
	case VIRTIO_MMIO_SHM_LEN_HIGH:
		return 0xffffffffu; /* no shared memory regions */
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return t->config_generation;
	default:
		return 0;
	}
}

static bool config_range_ok(const struct virtio_mmio *t, uint64_t offset, unsigned len)
{
	return offset >= VIRTIO_MMIO_CONFIG && (len == 1 || len == 2 || len == 4 || len == 8) &&
	       offset - VIRTIO_MMIO_CONFIG <= t->ops->config_size &&
	       len <= t->ops->config_size - (offset - VIRTIO_MMIO_CONFIG);
}

static void mmio_read(void *opaque, uint64_t offset, void *data, unsigned len)
{
	struct virtio_mmio *t = opaque;

	if (len > 8)
		return;
	memset(data, 0, len);
	pthread_mutex_lock(&t->lock);
	if (offset >= VIRTIO_MMIO_CONFIG) {
		if (config_range_ok(t, offset, len))
			t->ops->config_read(t->dev, (uint32_t)(offset - VIRTIO_MMIO_CONFIG), data, len);
	} else if (len == 4 && offset % 4 == 0) {
		uint32_t v = reg_read(t, offset);
		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&t->lock);
}

static void mmio_write(void *opaque, uint64_t offset, const void *data, unsigned len)
{
	struct virtio_mmio *t = opaque;

	pthread_mutex_lock(&t->lock);
	if (offset >= VIRTIO_MMIO_CONFIG) {
		if (t->ops->config_write && config_range_ok(t, offset, len))
			t->ops->config_write(t->dev, (uint32_t)(offset - VIRTIO_MMIO_CONFIG), data, len);
	} else if (len == 4 && offset % 4 == 0) {
		uint32_t v;
		memcpy(&v, data, 4);
		reg_write(t, offset, v);
	}
	pthread_mutex_unlock(&t->lock);
}

static void mmio_destroy(void *opaque)
{
	struct virtio_mmio *t = opaque;

	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	if (t->ops->destroy)
		t->ops->destroy(t->dev);
	free(t);
}

static const struct mmio_dev_ops virtio_mmio_dev_ops = {
	.read = mmio_read,
	.write = mmio_write,
	.destroy = mmio_destroy,
};

int virtio_mmio_save(struct virtio_mmio *t, struct virtio_mmio_state *st, void *dev_buf, size_t cap)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&t->lock);
	int n = t->ops->save ? t->ops->save(t->dev, dev_buf, cap) : 0;
	if (n < 0 || (size_t)n > cap) {
		pthread_mutex_unlock(&t->lock);
		return n < 0 ? n : -EOVERFLOW;
	}
	st->device_id = t->ops->device_id;
	st->num_queues = t->ops->num_queues;
	st->device_features = t->device_features;
	st->driver_features = t->driver_features;
	st->device_features_sel = t->device_features_sel;
	st->driver_features_sel = t->driver_features_sel;
	st->queue_sel = t->queue_sel;
	st->status = t->status;
	st->isr = t->isr;
	st->config_generation = t->config_generation;
	st->broken = t->broken_why != NULL;
	st->dev_len = (uint32_t)n;
	for (unsigned i = 0; i < t->ops->num_queues; i++) {
		const struct virtqueue *vq = &t->vq[i];
		uint16_t held = vq->ready && t->ops->held ? t->ops->held(t->dev, i) : 0;
		st->q[i] = (struct virtio_mmio_queue_state){
			.desc_gpa = vq->desc_gpa, .avail_gpa = vq->avail_gpa, .used_gpa = vq->used_gpa,
			.num = vq->num, .last_avail = (uint16_t)(vq->last_avail - held), .used_idx = vq->used_idx,
			.ready = vq->ready,
		};
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

#define STATUS_KNOWN                                                                                \
	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK |               \
	 VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_NEEDS_RESET | VIRTIO_STATUS_FAILED)

static int restore_locked(struct virtio_mmio *t, const struct virtio_mmio_state *st, const void *dev_buf,
			  size_t dev_len)
{
	if (st->device_id != t->ops->device_id || st->num_queues != t->ops->num_queues ||
	    st->device_features != t->device_features || (st->driver_features & ~t->device_features) ||
	    (st->status & ~STATUS_KNOWN) || st->dev_len != dev_len)
		return -EINVAL;
	transport_reset(t);
	t->driver_features = st->driver_features;
	t->device_features_sel = st->device_features_sel;
	t->driver_features_sel = st->driver_features_sel;
	t->queue_sel = st->queue_sel;
	t->status = st->status & ~VIRTIO_STATUS_NEEDS_RESET;
	t->isr = st->isr & (VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG);
	t->config_generation = st->config_generation;
	for (unsigned i = 0; i < t->ops->num_queues; i++) {
		const struct virtio_mmio_queue_state *qs = &st->q[i];
		struct virtqueue *vq = &t->vq[i];
		vq->num = qs->num;
		vq->desc_gpa = qs->desc_gpa;
		vq->avail_gpa = qs->avail_gpa;
		vq->used_gpa = qs->used_gpa;
		if (!qs->ready)
			continue;
		/* The same checks a driver's setup gets: the file is no more trusted than the guest. */
		vq->indirect = t->driver_features & (1ull << VIRTIO_RING_F_INDIRECT_DESC);
		vq->event_idx = t->driver_features & (1ull << VIRTIO_RING_F_EVENT_IDX);
		if (virtqueue_activate(vq, t->mem, t->ops->queue_max) < 0)
			return -EINVAL;
		vq->last_avail = qs->last_avail;
		vq->used_idx = qs->used_idx;
	}
	if (st->broken)
		virtio_mmio_fail(t, "device was broken when the snapshot was taken");
	if (t->ops->restore)
		return t->ops->restore(t->dev, t, dev_buf, dev_len);
	return dev_len ? -EINVAL : 0;
}

int virtio_mmio_restore(struct virtio_mmio *t, const struct virtio_mmio_state *st, const void *dev_buf,
			size_t dev_len)
{
	pthread_mutex_lock(&t->lock);
	int r = restore_locked(t, st, dev_buf, dev_len);
	if (r < 0)
		transport_reset(t);
	pthread_mutex_unlock(&t->lock);
	return r;
}

struct virtio_mmio *virtio_mmio_from_dev(const struct mmio_dev *d)
{
	return d && d->ops == &virtio_mmio_dev_ops ? d->dev : NULL;
}

int virtio_mmio_create(const struct virtio_dev_ops *ops, void *dev, const struct guest_mem *mem,
		       struct mmio_irq irq, const char *name, struct mmio_dev *ret)
{
	if (!ops || !mem || !ret || !ops->queue_notify || !ops->config_read || !ops->features ||
	    ops->num_queues == 0 || ops->num_queues > VIRTIO_MMIO_MAX_QUEUES ||
	    ops->queue_max == 0 || ops->queue_max > VIRTQUEUE_MAX_SIZE ||
	    (ops->queue_max & (ops->queue_max - 1)) ||
	    ops->config_size > VIRTIO_MMIO_WINDOW - VIRTIO_MMIO_CONFIG)
		return -EINVAL;

	struct virtio_mmio *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	int r = pthread_mutex_init(&t->lock, NULL);
	if (r) {
		free(t);
		return -r;
	}
	t->ops = ops;
	t->dev = dev;
	t->mem = mem;
	t->irq = irq;
	t->device_features = ops->features(dev) | TRANSPORT_FEATURES;

	*ret = (struct mmio_dev){
		.ops = &virtio_mmio_dev_ops,
		.dev = t,
		.size = VIRTIO_MMIO_WINDOW,
		.name = name,
		.virtio = t,
	};
	return 0;
}
