/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-net over virtio-mmio, backed by a frame-oriented fd (see virtio_net.h for the contract).
 *
 * Threads: transmit runs on the notifying vCPU thread. Receive runs wherever a frame or a buffer
 * shows up: on the vCPU thread that posts receive buffers, and on the device's receive thread, which
 * polls the back-end only while the guest has buffers (rx_starved clear). Both hold the transport lock.
 */
#include "devices/virtio_net.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "devices/virtio_mmio.h"
#include "util/cleanup.h"

#define HDR_LEN ((uint32_t)sizeof(struct virtio_net_hdr))
#define Q_RX 0u
#define Q_TX 1u
#define VIRTIO_NET_S_LINK_UP 1u
/* Frames moved to the guest per call, so a flood cannot hold the transport lock for long. */
#define RX_BUDGET 64u

struct virtio_net {
	struct virtio_mmio *t;
	struct mmio_dev inner;   /* the transport's own mmio_dev, wrapped so the thread stops first */
	uint8_t config[8];       /* mac[6], status (le16) */
	int fd, wake_fd;
	int (*thread_enter)(void); /* from the config: the receive thread calls it after each wake-up */
	pthread_t thread;
	bool thread_started;
	/* Guarded by the transport lock. */
	bool stop;               /* the receive thread must end */
	bool active;             /* the driver has notified a queue since the last reset */
	bool rx_starved;         /* no receive buffer: do not poll the back-end */
	bool backend_down;       /* the back-end hung up or failed: stop reading it */
	bool have_rx;            /* rx holds a popped receive buffer not yet used */
	uint8_t scratch;         /* one byte past the guest's buffer: a frame reaching it is too big */
	struct virtio_net_stats stats;
	struct virtq_chain rx, tx;
	struct iovec iov[VIRTQUEUE_MAX_SEGS + 1];
};

static void net_wake(struct virtio_net *n)
{
	uint64_t one = 1;
	if (write(n->wake_fd, &one, sizeof(one)) != sizeof(one)) {
		/* the counter cannot overflow at one increment per notify; the thread wakes anyway */
	}
}

/* Writes the receive header (no offloads, one buffer) at the start of the held rx chain. */
static void rx_put_hdr(struct virtio_net *n)
{
	const struct virtio_net_hdr h = { .num_buffers = 1 };
	const uint8_t *p = (const uint8_t *)&h;
	struct iovec iov[HDR_LEN];
	int k = virtq_chain_slice(&n->rx, true, 0, HDR_LEN, iov, HDR_LEN);
	for (int i = 0; i < k; i++) {
		memcpy(iov[i].iov_base, p, iov[i].iov_len);
		p += iov[i].iov_len;
	}
}

/* Moves frames from the back-end into posted receive buffers. Transport lock held. */
static void net_rx(struct virtio_net *n)
{
	struct virtio_mmio *t = n->t;
	if (!n->active || n->backend_down || virtio_mmio_broken(t, NULL))
		return;
	uint16_t old = virtio_mmio_used_idx(t, Q_RX);
	for (unsigned budget = RX_BUDGET; budget; budget--) {
		if (!n->have_rx) {
			int r = virtio_mmio_pop(t, Q_RX, &n->rx);
			if (r < 0)
				return; /* the transport marked the device broken */
			if (r == 0) {
				if (virtio_mmio_enable_notify(t, Q_RX))
					continue;
				n->rx_starved = true; /* the next receive notify clears it */
				break;
			}
			if (n->rx.in_len < HDR_LEN) {
				virtio_mmio_fail(t, "virtio-net receive buffer smaller than its header");
				return;
			}
			n->have_rx = true;
		}
		uint64_t room = n->rx.in_len - HDR_LEN;
		if (room > VIRTIO_NET_MAX_FRAME)
			room = VIRTIO_NET_MAX_FRAME;
		int k = room ? virtq_chain_slice(&n->rx, true, HDR_LEN, room, n->iov, VIRTQUEUE_MAX_SEGS) : 0;
		if (k < 0)
			return; /* cannot happen: room is within the writable part */
		n->iov[k] = (struct iovec){ &n->scratch, 1 };
		ssize_t got = readv(n->fd, n->iov, k + 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break; /* the buffer stays held for the next frame */
		if (got <= 0) {
			n->backend_down = true; /* EOF or a hard error: polling it again would spin */
			break;
		}
		if ((uint64_t)got > room) {
			n->stats.rx_dropped++; /* truncated: the rest of the frame is gone */
			continue;
		}
		rx_put_hdr(n);
		virtio_mmio_push(t, Q_RX, n->rx.head, HDR_LEN + (uint32_t)got);
		n->have_rx = false;
		n->stats.rx_frames++;
	}
	virtio_mmio_notify_used(t, Q_RX, old);
}

/* One transmit chain: the frame after the header goes to the back-end whole, or is dropped. */
static void tx_frame(struct virtio_net *n)
{
	uint64_t len = n->tx.out_len - HDR_LEN;
	if (len == 0 || len > VIRTIO_NET_MAX_FRAME) {
		n->stats.tx_dropped++;
		return;
	}
	int k = virtq_chain_slice(&n->tx, false, HDR_LEN, len, n->iov, VIRTQUEUE_MAX_SEGS);
	if (k < 0) {
		n->stats.tx_dropped++; /* cannot happen: len is within the readable part */
		return;
	}
	ssize_t w;
	do
		w = writev(n->fd, n->iov, k);
	while (w < 0 && errno == EINTR);
	if (w < 0 || (uint64_t)w != len)
		n->stats.tx_dropped++;
	else
		n->stats.tx_frames++;
}

static void net_tx(struct virtio_net *n)
{
	struct virtio_mmio *t = n->t;
	uint16_t old = virtio_mmio_used_idx(t, Q_TX);
	int r;
	do {
		while ((r = virtio_mmio_pop(t, Q_TX, &n->tx)) == 1) {
			if (n->tx.out_len < HDR_LEN) {
				virtio_mmio_fail(t, "virtio-net transmit chain shorter than its header");
				return;
			}
			tx_frame(n);
			virtio_mmio_push(t, Q_TX, n->tx.head, 0);
		}
		if (r < 0)
			return;
	} while (virtio_mmio_enable_notify(t, Q_TX));
	virtio_mmio_notify_used(t, Q_TX, old);
}

static void *rx_thread(void *arg)
{
	struct virtio_net *n = arg;
	for (;;) {
		virtio_mmio_lock(n->t);
		bool stop = n->stop;
		bool want = n->active && !n->rx_starved && !n->backend_down && !virtio_mmio_broken(n->t, NULL);
		virtio_mmio_unlock(n->t);
		if (stop)
			return NULL;
		struct pollfd p[2] = {
			{ .fd = n->wake_fd, .events = POLLIN },
			{ .fd = want ? n->fd : -1, .events = POLLIN },
		};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (n->thread_enter && n->thread_enter() < 0)
			return NULL; /* no filter for this thread: it must not serve the guest */
		if (p[0].revents & POLLIN) {
			uint64_t v;
			if (read(n->wake_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: another read took it; nothing else can fail on an eventfd */
			}
		}
		if (p[1].revents) {
			virtio_mmio_lock(n->t);
			net_rx(n);
			virtio_mmio_unlock(n->t);
		}
	}
}

static uint64_t net_features(void *dev)
{
	(void)dev;
	return 1ull << VIRTIO_NET_F_MAC;
}

static void net_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	struct virtio_net *n = dev;
	memcpy(data, n->config + offset, len);
}

static void net_queue_notify(void *dev, struct virtio_mmio *t, unsigned q)
{
	struct virtio_net *n = dev;
	(void)t;
	bool was_idle = !n->active || n->rx_starved;
	n->active = true;
	if (q == Q_TX)
		net_tx(n);
	else if (q == Q_RX)
		n->rx_starved = false;
	net_rx(n);
	if (was_idle && !n->rx_starved)
		net_wake(n); /* the thread polls the back-end again */
}

static void net_reset(void *dev)
{
	struct virtio_net *n = dev;
	n->active = false;
	n->have_rx = false;
	n->rx_starved = false;
}

static void net_destroy(void *dev)
{
	struct virtio_net *n = dev;
	if (n->fd >= 0)
		close(n->fd);
	if (n->wake_fd >= 0)
		close(n->wake_fd);
	free(n);
}

static const struct virtio_dev_ops net_ops = {
	.device_id = VIRTIO_ID_NET,
	.num_queues = 2,
	.queue_max = VIRTIO_NET_QUEUE_SIZE,
	.config_size = sizeof(((struct virtio_net *)0)->config),
	.features = net_features,
	.config_read = net_config_read,
	.queue_notify = net_queue_notify,
	.reset = net_reset,
	.destroy = net_destroy,
};

/* The mmio_dev the VMM sees wraps the transport's: destroy stops the thread before the lock goes. */
static void wrap_read(void *dev, uint64_t offset, void *data, unsigned len)
{
	struct virtio_net *n = dev;
	n->inner.ops->read(n->inner.dev, offset, data, len);
}

static void wrap_write(void *dev, uint64_t offset, const void *data, unsigned len)
{
	struct virtio_net *n = dev;
	n->inner.ops->write(n->inner.dev, offset, data, len);
}

static void wrap_destroy(void *dev)
{
	struct virtio_net *n = dev;
	if (n->thread_started) {
		virtio_mmio_lock(n->t);
		n->stop = true;
		virtio_mmio_unlock(n->t);
		net_wake(n);
		pthread_join(n->thread, NULL);
		n->thread_started = false;
	}
	n->inner.ops->destroy(n->inner.dev); /* ends in net_destroy(n) */
}

static const struct mmio_dev_ops wrap_ops = { .read = wrap_read, .write = wrap_write, .destroy = wrap_destroy };

void virtio_net_stats(const struct mmio_dev *d, struct virtio_net_stats *ret)
{
	struct virtio_net *n = d->dev;
	virtio_mmio_lock(n->t);
	*ret = n->stats;
	virtio_mmio_unlock(n->t);
}

int virtio_net_create(const struct virtio_net_config *cfg, const struct guest_mem *mem, struct mmio_irq irq,
		      struct mmio_dev *ret)
{
	if (!cfg || cfg->fd < 0 || !mem || !ret)
		return -EINVAL;
	struct virtio_net *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	memcpy(n->config, cfg->mac, 6);
	n->thread_enter = cfg->thread_enter;
	n->config[6] = VIRTIO_NET_S_LINK_UP;
	n->fd = fcntl(cfg->fd, F_DUPFD_CLOEXEC, 3);
	n->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int flags = n->fd < 0 ? -1 : fcntl(n->fd, F_GETFL);
	if (n->fd < 0 || n->wake_fd < 0 || flags < 0 || fcntl(n->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		int r = -errno;
		net_destroy(n);
		return r;
	}
	int r = virtio_mmio_create(&net_ops, n, mem, irq, "virtio-net", ret);
	if (r < 0) {
		net_destroy(n);
		return r;
	}
	n->t = virtio_mmio_from_dev(ret);
	n->inner = *ret;
	ret->ops = &wrap_ops;
	ret->dev = n;
	int e = pthread_create(&n->thread, NULL, rx_thread, n);
	if (e) {
		wrap_destroy(n);
		*ret = (struct mmio_dev){ 0 };
		return -e;
	}
	n->thread_started = true;
	return 0;
}
