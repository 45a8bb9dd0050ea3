/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-rng (virtio 1.x, 5.4): one request queue; each chain's device-writable buffers are filled
 * with getrandom() bytes, synchronously on the notifying vCPU thread. Device-readable buffers carry
 * nothing for this device and are ignored. A chain with no writable byte is completed with length 0.
 */
#include "devices/virtio_rng.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include "devices/virtio_mmio.h"
#include "util/cleanup.h"

struct virtio_rng {
	struct virtq_chain chain;
};

static uint64_t rng_features(void *dev)
{
	(void)dev;
	return 0;
}

static void rng_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	(void)dev;
	(void)offset;
	(void)data;
	(void)len; /* no configuration space (config_size 0): never called */
}

/* Fills up to VIRTIO_RNG_MAX_REQ bytes of the writable part of c. Returns the bytes written. */
static uint32_t rng_fill(const struct virtq_chain *c)
{
	uint32_t done = 0;
	for (unsigned i = c->nout; i < c->nout + c->nin && done < VIRTIO_RNG_MAX_REQ; i++) {
		uint8_t *p = c->iov[i].iov_base;
		size_t want = c->iov[i].iov_len;
		if (want > VIRTIO_RNG_MAX_REQ - done)
			want = VIRTIO_RNG_MAX_REQ - done;
		size_t got = 0;
		while (got < want) {
			ssize_t n = getrandom(p + got, want - got, 0);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				return done + (uint32_t)got; /* what is filled is random; report only that */
			}
			got += (size_t)n;
		}
		done += (uint32_t)got;
	}
	return done;
}

static void rng_queue_notify(void *dev, struct virtio_mmio *t, unsigned q)
{
	struct virtio_rng *r = dev;
	uint16_t old = virtio_mmio_used_idx(t, q);
	int e;

	do {
		while ((e = virtio_mmio_pop(t, q, &r->chain)) == 1)
			virtio_mmio_push(t, q, r->chain.head, rng_fill(&r->chain));
		if (e < 0)
			return; /* the transport marked the device broken */
	} while (virtio_mmio_enable_notify(t, q));
	virtio_mmio_notify_used(t, q, old);
}

static void rng_destroy(void *dev)
{
	free(dev);
}

static const struct virtio_dev_ops rng_ops = {
	.device_id = VIRTIO_ID_RNG,
	.num_queues = 1,
	.queue_max = VIRTIO_RNG_QUEUE_SIZE,
	.config_size = 0,
	.features = rng_features,
	.config_read = rng_config_read,
	.queue_notify = rng_queue_notify,
	.destroy = rng_destroy,
};

int virtio_rng_create(const struct guest_mem *mem, struct mmio_irq irq, struct mmio_dev *ret)
{
	if (!mem || !ret)
		return -EINVAL;
	_cleanup_free_ struct virtio_rng *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	int e = virtio_mmio_create(&rng_ops, r, mem, irq, "virtio-rng", ret);
	if (e < 0)
		return e;
	TAKE_PTR(r);
	return 0;
}
