/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-vsock (virtio 1.x, 5.10): queue 0 (rx) carries packets to the guest, queue 1 (tx) packets
 * from it, queue 2 (event) is never used by this device. Only stream sockets between the guest's CID
 * and the host (CID 2) exist.
 *
 * Every tx packet is hostile: a header that does not fit, a length beyond the buffer or the packet
 * limit, a foreign type, CID or connection, or an unknown op is answered with RST (and ends that
 * connection if it names one); nothing the guest sends breaks the device except rx buffers too small
 * for a header, which leave no way to talk to it.
 *
 * Credit: the device tells the guest buf_alloc = VIRTIO_VSOCK_BUF_ALLOC and fwd_cnt = bytes written
 * to the host socket, and buffers at most buf_alloc unwritten bytes per connection; a guest that
 * sends beyond that window is reset. Towards the guest it never has more than the guest's
 * buf_alloc - (tx_cnt - fwd_cnt) in flight, reading the host socket only as far as that window (and
 * the rx buffer at hand) allows.
 */
#include "devices/vsock_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/cleanup.h"

#define HDR_LEN ((uint32_t)sizeof(struct virtio_vsock_hdr))
#define Q_RX 0u
#define Q_TX 1u

struct vsock_conn *vsock_conn_alloc(struct virtio_vsock *v)
{
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &v->conns[i];
		if (c->state != VSOCK_FREE)
			continue;
		if (!c->buf && !(c->buf = malloc(VIRTIO_VSOCK_BUF_ALLOC)))
			return NULL;
		uint8_t *buf = c->buf;
		*c = (struct vsock_conn){ .fd = -1, .buf = buf };
		return c;
	}
	return NULL;
}

void vsock_conn_free(struct virtio_vsock *v, struct vsock_conn *c)
{
	(void)v;
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	uint8_t *buf = c->buf;
	*c = (struct vsock_conn){ .fd = -1, .buf = buf };
}

void vsock_queue_rst(struct virtio_vsock *v, uint32_t src_port, uint32_t dst_port)
{
	if (v->nrst < VSOCK_MAX_RST)
		v->rst[v->nrst++] = (struct vsock_rst){ src_port, dst_port };
}

void vsock_conn_reset(struct virtio_vsock *v, struct vsock_conn *c)
{
	if (c->state == VSOCK_HOST_INIT || c->state == VSOCK_EST)
		vsock_queue_rst(v, c->local_port, c->peer_port);
	vsock_conn_free(v, c);
}

static struct vsock_conn *conn_find(struct virtio_vsock *v, uint32_t local, uint32_t peer)
{
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &v->conns[i];
		if ((c->state == VSOCK_HOST_INIT || c->state == VSOCK_EST) && c->local_port == local &&
		    c->peer_port == peer)
			return c;
	}
	return NULL;
}

/* Writes the ring of guest data to the host socket as far as it takes it. */
void vsock_conn_flush(struct virtio_vsock *v, struct vsock_conn *c)
{
	while (c->len) {
		uint32_t first = VIRTIO_VSOCK_BUF_ALLOC - c->head;
		struct iovec iov[2] = {
			{ c->buf + c->head, first < c->len ? first : c->len },
			{ c->buf, first < c->len ? c->len - first : 0 },
		};
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = iov[1].iov_len ? 2 : 1 };
		ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			vsock_conn_reset(v, c);
			return;
		}
		c->head = (uint32_t)((c->head + (uint32_t)n) % VIRTIO_VSOCK_BUF_ALLOC);
		c->len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
	}
	/* Tell the guest about freed window once half of it is unannounced. */
	if (c->fwd_cnt - c->fwd_sent >= VIRTIO_VSOCK_BUF_ALLOC / 2)
		c->pending |= VSOCK_P_CREDIT;
	if (c->peer_no_send && c->len == 0 && !c->host_shut_wr) {
		shutdown(c->fd, SHUT_WR);
		c->host_shut_wr = true;
	}
	vsock_conn_update_events(v, c);
}

/* Copies len bytes at offset off of the tx chain into c's ring. The caller checked the room. */
static int ring_put(struct virtio_vsock *v, struct vsock_conn *c, uint32_t len)
{
	uint32_t tail = (c->head + c->len) % VIRTIO_VSOCK_BUF_ALLOC;
	uint32_t first = VIRTIO_VSOCK_BUF_ALLOC - tail;
	if (first > len)
		first = len;
	if (virtq_chain_read(&v->tx, HDR_LEN, c->buf + tail, first) < 0 ||
	    virtq_chain_read(&v->tx, HDR_LEN + first, c->buf, len - first) < 0)
		return -EINVAL;
	c->len += len;
	c->rx_cnt += len;
	return 0;
}

static void tx_shutdown(struct virtio_vsock *v, struct vsock_conn *c, uint32_t flags)
{
	if (flags & VIRTIO_VSOCK_SHUTDOWN_RCV)
		c->peer_no_recv = true;
	if (flags & VIRTIO_VSOCK_SHUTDOWN_SEND)
		c->peer_no_send = true;
	if (c->peer_no_recv && c->peer_no_send) {
		/* Both directions closed: the host socket gets what is buffered if it takes it now. */
		vsock_conn_flush(v, c);
		if (c->state != VSOCK_FREE)
			vsock_conn_reset(v, c);
		return;
	}
	vsock_conn_flush(v, c);
}

static void tx_connected(struct virtio_vsock *v, struct vsock_conn *c, const struct virtio_vsock_hdr *h)
{
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	switch (h->op) {
	case VIRTIO_VSOCK_OP_RESPONSE: {
		if (c->state != VSOCK_HOST_INIT) {
			vsock_conn_reset(v, c);
			return;
		}
		char ok[32];
		int n = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);
		if (send(c->fd, ok, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
			vsock_conn_reset(v, c);
			return;
		}
		c->state = VSOCK_EST;
		c->readable = true;
		break;
	}
	case VIRTIO_VSOCK_OP_RW:
		if (c->state != VSOCK_EST || c->peer_no_send || h->len > VIRTIO_VSOCK_BUF_ALLOC - c->len ||
		    ring_put(v, c, h->len) < 0) {
			vsock_conn_reset(v, c); /* beyond the credit we gave, or after SHUTDOWN(SEND) */
			return;
		}
		vsock_conn_flush(v, c);
		return;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->pending |= VSOCK_P_CREDIT;
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		tx_shutdown(v, c, h->flags);
		return;
	case VIRTIO_VSOCK_OP_RST:
		vsock_conn_free(v, c);
		return;
	default: /* REQUEST on an existing connection, or an unknown op */
		vsock_conn_reset(v, c);
		return;
	}
	vsock_conn_update_events(v, c);
}

/* Handles one tx packet (the chain in v->tx). */
static void tx_packet(struct virtio_vsock *v)
{
	struct virtio_vsock_hdr h;
	if (virtq_chain_read(&v->tx, 0, &h, HDR_LEN) < 0)
		return; /* no header: there is no one to answer */
	bool bad = h.type != VIRTIO_VSOCK_TYPE_STREAM || h.src_cid != v->cid ||
		   h.dst_cid != VIRTIO_VSOCK_HOST_CID || h.len > VIRTIO_VSOCK_MAX_PKT ||
		   h.len > v->tx.out_len - HDR_LEN || (h.op != VIRTIO_VSOCK_OP_RW && h.len != 0);
	struct vsock_conn *c = conn_find(v, h.dst_port, h.src_port);
	if (bad) {
		if (c)
			vsock_conn_reset(v, c);
		else if (h.op != VIRTIO_VSOCK_OP_RST)
			vsock_queue_rst(v, h.dst_port, h.src_port);
		return;
	}
	if (c) {
		tx_connected(v, c, &h);
		return;
	}
	if (h.op == VIRTIO_VSOCK_OP_REQUEST) {
		c = vsock_host_connect(v, h.dst_port);
		if (!c) {
			vsock_queue_rst(v, h.dst_port, h.src_port);
			return;
		}
		c->local_port = h.dst_port;
		c->peer_port = h.src_port;
		c->peer_buf_alloc = h.buf_alloc;
		c->peer_fwd_cnt = h.fwd_cnt;
		c->state = VSOCK_EST;
		c->readable = true;
		c->pending |= VSOCK_P_RESPONSE;
		vsock_conn_update_events(v, c);
	} else if (h.op != VIRTIO_VSOCK_OP_RST) {
		vsock_queue_rst(v, h.dst_port, h.src_port);
	}
}

static void tx_process(struct virtio_vsock *v, struct virtio_mmio *t)
{
	uint16_t old = virtio_mmio_used_idx(t, Q_TX);
	int r;
	do {
		while ((r = virtio_mmio_pop(t, Q_TX, &v->tx)) == 1) {
			tx_packet(v);
			virtio_mmio_push(t, Q_TX, v->tx.head, 0);
		}
		if (r < 0)
			return;
	} while (virtio_mmio_enable_notify(t, Q_TX));
	virtio_mmio_notify_used(t, Q_TX, old);
}

/* Writes len bytes of src at offset off of the rx chain's writable part. */
static int rx_write(struct virtio_vsock *v, uint32_t off, const void *src, uint32_t len)
{
	int n = virtq_chain_slice(&v->rx, true, off, len, v->iov, VIRTQUEUE_MAX_SEGS);
	if (n < 0)
		return n;
	const uint8_t *p = src;
	for (int i = 0; i < n; i++) {
		memcpy(v->iov[i].iov_base, p, v->iov[i].iov_len);
		p += v->iov[i].iov_len;
	}
	return 0;
}

static void rx_hdr(struct virtio_vsock *v, struct vsock_conn *c, uint32_t src, uint32_t dst, uint16_t op,
		   uint32_t flags, uint32_t len)
{
	struct virtio_vsock_hdr h = {
		.src_cid = VIRTIO_VSOCK_HOST_CID, .dst_cid = v->cid, .src_port = src, .dst_port = dst,
		.len = len, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .flags = flags,
		.buf_alloc = VIRTIO_VSOCK_BUF_ALLOC, .fwd_cnt = c ? c->fwd_cnt : 0,
	};
	if (c)
		c->fwd_sent = c->fwd_cnt;
	(void)rx_write(v, 0, &h, HDR_LEN); /* the chain was checked to hold a header */
}

/* Whether c has something for the guest now. */
static bool conn_wants_rx(const struct vsock_conn *c)
{
	if (c->state == VSOCK_FREE || c->state == VSOCK_LINE)
		return false;
	if (c->pending)
		return true;
	return c->state == VSOCK_EST && c->readable && !c->host_eof && !c->peer_no_recv &&
	       vsock_peer_credit(c) > 0;
}

/*
 * Fills the held rx buffer for c. Returns the payload bytes written after the header (push it), or
 * -1 if c had nothing after all (the socket was empty) and the buffer stays held.
 */
static int64_t rx_conn(struct virtio_vsock *v, struct vsock_conn *c)
{
	static const struct { uint32_t bit; uint16_t op; } ctl[] = {
		{ VSOCK_P_REQUEST, VIRTIO_VSOCK_OP_REQUEST }, { VSOCK_P_RESPONSE, VIRTIO_VSOCK_OP_RESPONSE },
		{ VSOCK_P_SHUTDOWN, VIRTIO_VSOCK_OP_SHUTDOWN }, { VSOCK_P_CREDIT, VIRTIO_VSOCK_OP_CREDIT_UPDATE },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) {
		if (!(c->pending & ctl[i].bit))
			continue;
		c->pending &= ~ctl[i].bit;
		uint32_t flags = ctl[i].op == VIRTIO_VSOCK_OP_SHUTDOWN
					 ? VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND
					 : 0;
		rx_hdr(v, c, c->local_port, c->peer_port, ctl[i].op, flags, 0);
		return 0;
	}
	uint64_t room = v->rx.in_len - HDR_LEN;
	uint32_t want = vsock_peer_credit(c);
	if (want > room)
		want = (uint32_t)room;
	if (want > VIRTIO_VSOCK_MAX_PKT)
		want = VIRTIO_VSOCK_MAX_PKT;
	if (want == 0) {
		c->readable = false; /* a header-only buffer: wait for the next one */
		return -1;
	}
	int n = virtq_chain_slice(&v->rx, true, HDR_LEN, want, v->iov, VIRTQUEUE_MAX_SEGS);
	ssize_t got = n < 0 ? -1 : readv(c->fd, v->iov, n);
	if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		c->readable = false;
		vsock_conn_update_events(v, c);
		return -1;
	}
	if (got <= 0) {
		if (got < 0) {
			vsock_conn_reset(v, c);
			return -1;
		}
		c->host_eof = true; /* the host client closed: both directions end */
		c->pending |= VSOCK_P_SHUTDOWN;
		vsock_conn_update_events(v, c);
		return -1;
	}
	rx_hdr(v, c, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_RW, 0, (uint32_t)got);
	c->tx_cnt += (uint32_t)got;
	vsock_conn_update_events(v, c);
	return got;
}

static void set_starved(struct virtio_vsock *v, bool starved)
{
	if (v->rx_starved == starved)
		return;
	v->rx_starved = starved;
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++)
		if (v->conns[i].state != VSOCK_FREE)
			vsock_conn_update_events(v, &v->conns[i]);
}

void vsock_rx_process(struct virtio_vsock *v)
{
	struct virtio_mmio *t = v->t;
	if (!v->active || virtio_mmio_broken(t, NULL))
		return;
	uint16_t old = virtio_mmio_used_idx(t, Q_RX);
	unsigned idle = 0; /* connections visited in a row without using the buffer */
	while (idle <= VIRTIO_VSOCK_MAX_CONNS) {
		struct vsock_conn *c = NULL;
		if (!v->nrst) {
			for (unsigned k = 0; k < VIRTIO_VSOCK_MAX_CONNS && !c; k++) {
				struct vsock_conn *cand = &v->conns[(v->rr + k) % VIRTIO_VSOCK_MAX_CONNS];
				if (conn_wants_rx(cand))
					c = cand;
			}
			if (!c)
				break;
		}
		if (!v->have_rx) {
			int r = virtio_mmio_pop(t, Q_RX, &v->rx);
			if (r < 0)
				return;
			if (r == 0) {
				/* Ask for a notification (EVENT_IDX) before waiting; recheck if one slipped in. */
				if (virtio_mmio_enable_notify(t, Q_RX))
					continue;
				set_starved(v, true);
				break;
			}
			if (v->rx.in_len < HDR_LEN) {
				virtio_mmio_fail(t, "virtio-vsock rx buffer smaller than a packet header");
				return;
			}
			v->have_rx = true;
		}
		int64_t payload;
		if (v->nrst) {
			struct vsock_rst r = v->rst[--v->nrst];
			rx_hdr(v, NULL, r.src_port, r.dst_port, VIRTIO_VSOCK_OP_RST, 0, 0);
			payload = 0;
		} else {
			v->rr = (unsigned)(c - v->conns + 1) % VIRTIO_VSOCK_MAX_CONNS;
			payload = rx_conn(v, c);
		}
		if (payload < 0) {
			idle++;
			continue;
		}
		idle = 0;
		virtio_mmio_push(t, Q_RX, v->rx.head, HDR_LEN + (uint32_t)payload);
		v->have_rx = false;
	}
	virtio_mmio_notify_used(t, Q_RX, old);
}

static uint64_t vsock_features(void *dev)
{
	(void)dev;
	return 0; /* stream sockets only, which needs no feature bit */
}

static void vsock_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	struct virtio_vsock *v = dev;
	memcpy(data, (const uint8_t *)&v->cid + offset, len);
}

static void vsock_queue_notify(void *dev, struct virtio_mmio *t, unsigned q)
{
	struct virtio_vsock *v = dev;
	v->active = true;
	if (q == Q_TX)
		tx_process(v, t);
	else if (q == Q_RX)
		set_starved(v, false);
	vsock_rx_process(v);
}

static void vsock_reset(void *dev)
{
	struct virtio_vsock *v = dev;
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++)
		if (v->conns[i].state != VSOCK_FREE)
			vsock_conn_free(v, &v->conns[i]);
	v->nrst = 0;
	v->have_rx = false;
	v->active = false;
	v->rx_starved = false;
}

static void vsock_destroy(void *dev)
{
	struct virtio_vsock *v = dev;
	if (!v)
		return;
	vsock_host_stop(v);
	vsock_reset(v);
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++)
		free(v->conns[i].buf);
	free(v->path);
	free(v);
}

/*
 * Snapshot state: the CID, whether the driver was active, and the ports of each open connection.
 * Host sockets do not survive a restore, so every one of those connections is reset: the restored
 * guest gets an RST for each as soon as it has rx buffers.
 */
struct vsock_saved {
	uint64_t cid;
	uint32_t active, nconns;
	struct vsock_rst conns[VIRTIO_VSOCK_MAX_CONNS];
};

static int vsock_save(void *dev, void *buf, size_t cap)
{
	struct virtio_vsock *v = dev;
	struct vsock_saved s = { .cid = v->cid, .active = v->active };
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++) {
		const struct vsock_conn *c = &v->conns[i];
		if (c->state == VSOCK_HOST_INIT || c->state == VSOCK_EST)
			s.conns[s.nconns++] = (struct vsock_rst){ c->local_port, c->peer_port };
	}
	/* RSTs still queued are owed to the guest too. */
	for (unsigned i = 0; i < v->nrst && s.nconns < VIRTIO_VSOCK_MAX_CONNS; i++)
		s.conns[s.nconns++] = v->rst[i];
	if (cap < sizeof(s))
		return -ENOSPC;
	memcpy(buf, &s, sizeof(s));
	return (int)sizeof(s);
}

static uint16_t vsock_held(void *dev, unsigned q)
{
	struct virtio_vsock *v = dev;
	return q == Q_RX && v->have_rx ? 1 : 0;
}

static int vsock_restore(void *dev, struct virtio_mmio *t, const void *buf, size_t len)
{
	struct virtio_vsock *v = dev;
	struct vsock_saved s;
	(void)t;
	if (len != sizeof(s))
		return -EINVAL;
	memcpy(&s, buf, sizeof(s));
	if (s.cid != v->cid || s.nconns > VIRTIO_VSOCK_MAX_CONNS || s.nconns > VSOCK_MAX_RST)
		return -EINVAL;
	v->active = s.active != 0;
	for (unsigned i = 0; i < s.nconns; i++)
		vsock_queue_rst(v, s.conns[i].src_port, s.conns[i].dst_port);
	vsock_rx_process(v);
	return 0;
}

static const struct virtio_dev_ops vsock_ops = {
	.device_id = VIRTIO_ID_VSOCK,
	.num_queues = 3,
	.queue_max = VIRTIO_VSOCK_QUEUE_SIZE,
	.config_size = sizeof(uint64_t),
	.features = vsock_features,
	.config_read = vsock_config_read,
	.queue_notify = vsock_queue_notify,
	.reset = vsock_reset,
	.destroy = vsock_destroy,
	.save = vsock_save,
	.held = vsock_held,
	.restore = vsock_restore,
};

/*
 * The mmio_dev the VMM sees wraps the transport's: destroy must stop the event thread before the
 * transport lock it takes goes away.
 */
static void wrap_read(void *dev, uint64_t offset, void *data, unsigned len)
{
	struct virtio_vsock *v = dev;
	v->inner.ops->read(v->inner.dev, offset, data, len);
}

static void wrap_write(void *dev, uint64_t offset, const void *data, unsigned len)
{
	struct virtio_vsock *v = dev;
	v->inner.ops->write(v->inner.dev, offset, data, len);
}

static void wrap_destroy(void *dev)
{
	struct virtio_vsock *v = dev;
	vsock_host_stop(v);
	v->inner.ops->destroy(v->inner.dev); /* ends in vsock_destroy(v) */
}

static const struct mmio_dev_ops wrap_ops = { .read = wrap_read, .write = wrap_write, .destroy = wrap_destroy };

int virtio_vsock_create(const struct virtio_vsock_config *cfg, const struct guest_mem *mem,
			struct mmio_irq irq, struct mmio_dev *ret)
{
	if (!cfg || !cfg->uds_path || !mem || !ret || cfg->guest_cid < 3 || cfg->guest_cid >= UINT32_MAX)
		return -EINVAL;
	struct virtio_vsock *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->cid = cfg->guest_cid;
	v->thread_enter = cfg->thread_enter;
	v->next_port = VSOCK_FIRST_HOST_PORT;
	v->listen_fd = v->epoll_fd = v->wake_fd = -1;
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++)
		v->conns[i].fd = -1;
	int r = virtio_mmio_create(&vsock_ops, v, mem, irq, "virtio-vsock", ret);
	if (r < 0) {
		free(v);
		return r;
	}
	v->t = virtio_mmio_from_dev(ret);
	v->inner = *ret;
	ret->ops = &wrap_ops;
	ret->dev = v;
	r = vsock_host_start(v, cfg->uds_path);
	if (r < 0) {
		wrap_destroy(v); /* stops what started and frees v */
		*ret = (struct mmio_dev){ 0 };
		return r;
	}
	return 0;
}
