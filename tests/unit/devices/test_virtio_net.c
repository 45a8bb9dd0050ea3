/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-net driven by a C driver over fake guest RAM, with a SOCK_SEQPACKET socketpair standing in
 * for the TAP (one message = one frame): identity and MAC, transmit (header stripped, scattered
 * frames), receive (zeroed header, num_buffers 1, scattered buffers), frames held back while the guest
 * has no buffer, oversized frames dropped on both sides, a back-end that stops taking frames, and
 * hostile chains (short headers, buffers outside RAM) that break the device until a reset.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "devices/virtio_net.h"
#include "vdrv.h"

#define QSIZE 16u
#define HDR 12u
#define Q_RX 0u
#define Q_TX 1u

static const uint8_t mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };

struct nq {
	uint64_t desc, avail, used;
	uint16_t avail_idx, used_seen;
};

struct net {
	struct vdrv d;
	struct nq q[2];
	int peer;      /* the "host" end of the fake TAP */
	int dev_end;   /* our copy of the device's end (the device keeps a duplicate) */
	uint64_t tx_hdr, tx_buf;
};

static void wr64(struct vdrv *d, uint64_t off, uint64_t v)
{
	vdrv_wr(d, off, (uint32_t)v);
	vdrv_wr(d, off + 4, (uint32_t)(v >> 32));
}

static void queue_setup(struct net *n, unsigned q)
{
	struct nq *vq = &n->q[q];
	vq->desc = vdrv_alloc(&n->d, 16ull * QSIZE);
	vq->avail = vdrv_alloc(&n->d, 6 + 2ull * QSIZE);
	vq->used = vdrv_alloc(&n->d, 6 + 8ull * QSIZE);
	vq->avail_idx = vq->used_seen = 0;
	vdrv_wr(&n->d, VIRTIO_MMIO_QUEUE_SEL, q);
	vdrv_wr(&n->d, VIRTIO_MMIO_QUEUE_NUM, QSIZE);
	wr64(&n->d, VIRTIO_MMIO_QUEUE_DESC_LOW, vq->desc);
	wr64(&n->d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, vq->avail);
	wr64(&n->d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, vq->used);
	vdrv_wr(&n->d, VIRTIO_MMIO_QUEUE_READY, 1);
}

/* Negotiates VERSION_1 | MAC and sets up both queues. Returns the Status read back. */
static uint32_t negotiate(struct net *n)
{
	struct vdrv *d = &n->d;
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 1u << VIRTIO_NET_F_MAC);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 1); /* VERSION_1 */
	uint32_t st = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	vdrv_wr(d, VIRTIO_MMIO_STATUS, st);
	queue_setup(n, Q_RX);
	queue_setup(n, Q_TX);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, st | VIRTIO_STATUS_DRIVER_OK);
	return vdrv_rd(d, VIRTIO_MMIO_STATUS);
}

static bool start(struct net *n)
{
	memset(n, 0, sizeof(*n));
	int sv[2];
	if (vdrv_init(&n->d) < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	n->dev_end = sv[0];
	n->peer = sv[1];
	struct virtio_net_config cfg = { .fd = sv[0] };
	memcpy(cfg.mac, mac, 6);
	if (virtio_net_create(&cfg, &n->d.mem, vdrv_irq(&n->d), &n->d.dev) < 0)
		return false;
	n->tx_hdr = vdrv_alloc(&n->d, HDR);
	n->tx_buf = vdrv_alloc(&n->d, VIRTIO_NET_MAX_FRAME + 16);
	uint32_t st = negotiate(n);
	return (st & VIRTIO_STATUS_DRIVER_OK) && !(st & VIRTIO_STATUS_NEEDS_RESET);
}

static void stop(struct net *n)
{
	vdrv_done(&n->d);
	close(n->peer);
	close(n->dev_end);
}

static void publish(struct net *n, unsigned q, uint16_t head)
{
	struct nq *vq = &n->q[q];
	uint16_t *a = vdrv_host(&n->d, vq->avail);
	a[2 + vq->avail_idx % QSIZE] = head;
	vq->avail_idx++;
	__atomic_store_n(&a[1], vq->avail_idx, __ATOMIC_RELEASE);
	vdrv_wr(&n->d, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

/* Waits up to timeout_ms for the next used element of q. */
static bool take_used(struct net *n, unsigned q, uint32_t *id, uint32_t *len, int timeout_ms)
{
	struct nq *vq = &n->q[q];
	const uint8_t *u = vdrv_host(&n->d, vq->used);
	for (int waited = 0;; waited++) {
		uint16_t idx = __atomic_load_n((const uint16_t *)(u + 2), __ATOMIC_ACQUIRE);
		if (idx != vq->used_seen)
			break;
		if (waited >= timeout_ms)
			return false;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	const uint8_t *e = u + 4 + 8u * (vq->used_seen % QSIZE);
	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
	vq->used_seen++;
	return true;
}

/* Sends a frame: the header in descriptor 0, the frame split in two more. Returns the used length. */
static int64_t send_frame(struct net *n, const void *frame, uint32_t len, uint32_t hdr_len)
{
	struct vdrv *d = &n->d;
	uint64_t hdr = n->tx_hdr, buf = n->tx_buf;
	memcpy(vdrv_host(d, buf), frame, len);
	uint32_t first = len / 3;
	uint64_t t = n->q[Q_TX].desc;
	vdrv_desc(d, t, 0, hdr, hdr_len, VIRTQ_DESC_F_NEXT, 1);
	vdrv_desc(d, t, 1, buf, first, VIRTQ_DESC_F_NEXT, 2);
	vdrv_desc(d, t, 2, buf + first, len - first, 0, 0);
	publish(n, Q_TX, 0);
	uint32_t id, used;
	return take_used(n, Q_TX, &id, &used, 0) ? (int64_t)used : -1;
}

/* Posts one receive buffer of room bytes (header included) as two writable descriptors at slot. */
static uint64_t post_rx(struct net *n, uint16_t slot, uint32_t room)
{
	struct vdrv *d = &n->d;
	uint64_t buf = vdrv_alloc(d, room);
	memset(vdrv_host(d, buf), 0xee, room);
	uint32_t first = room > 20u ? 20u : room; /* the header straddles two descriptors */
	uint16_t a = (uint16_t)(2 * slot), b = (uint16_t)(2 * slot + 1);
	vdrv_desc(d, n->q[Q_RX].desc, a, buf, first, VIRTQ_DESC_F_WRITE | (room > first ? VIRTQ_DESC_F_NEXT : 0), b);
	vdrv_desc(d, n->q[Q_RX].desc, b, buf + first, room - first, VIRTQ_DESC_F_WRITE, 0);
	publish(n, Q_RX, a);
	return buf;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 13);
}

static bool frames_waiting(struct net *n)
{
	char c;
	return recv(n->dev_end, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

static void test_identity(void)
{
	struct net n;
	CHECK(start(&n));
	struct vdrv *d = &n.d;
	CHECK(vdrv_rd(d, VIRTIO_MMIO_DEVICE_ID) == VIRTIO_ID_NET);
	vdrv_wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	CHECK(vdrv_rd(d, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_NET_F_MAC));
	uint8_t got[8];
	for (unsigned i = 0; i < 8; i++)
		d->dev.ops->read(d->dev.dev, VIRTIO_MMIO_CONFIG + i, &got[i], 1);
	CHECK(memcmp(got, mac, 6) == 0);
	CHECK(got[6] == 1 && got[7] == 0); /* link up */
	for (unsigned q = 0; q < 3; q++) {
		vdrv_wr(d, VIRTIO_MMIO_QUEUE_SEL, q);
		CHECK(vdrv_rd(d, VIRTIO_MMIO_QUEUE_NUM_MAX) == (q < 2 ? VIRTIO_NET_QUEUE_SIZE : 0));
	}
	stop(&n);
}

static void test_tx(void)
{
	struct net n;
	CHECK(start(&n));
	uint8_t frame[1514], got[2048];
	for (int i = 0; i < 3; i++) {
		uint32_t len = i == 0 ? 60 : (i == 1 ? 1514 : 9000);
		uint8_t *f = i == 2 ? malloc(len) : frame;
		fill(f, len, (uint8_t)i);
		CHECK(send_frame(&n, f, len, HDR) == 0);
		uint8_t *g = i == 2 ? malloc(len + 1) : got;
		ssize_t r = recv(n.peer, g, len + 1, MSG_DONTWAIT);
		CHECK(r == (ssize_t)len && memcmp(g, f, len) == 0); /* the header never reaches the TAP */
		if (i == 2) {
			free(f);
			free(g);
		}
	}
	struct virtio_net_stats s;
	virtio_net_stats(&n.d.dev, &s);
	CHECK(s.tx_frames == 3 && s.tx_dropped == 0);
	CHECK(!vdrv_needs_reset(&n.d));
	stop(&n);
}

static void test_rx(void)
{
	struct net n;
	CHECK(start(&n));
	uint64_t buf = post_rx(&n, 0, HDR + 1514);
	uint8_t frame[1000];
	fill(frame, sizeof(frame), 7);
	CHECK(send(n.peer, frame, sizeof(frame), 0) == (ssize_t)sizeof(frame));
	uint32_t id, len;
	CHECK(take_used(&n, Q_RX, &id, &len, 2000));
	CHECK(id == 0 && len == HDR + sizeof(frame));
	const uint8_t *p = vdrv_host(&n.d, buf);
	static const uint8_t want_hdr[HDR] = { [10] = 1 }; /* num_buffers = 1, the rest zero */
	CHECK(memcmp(p, want_hdr, HDR) == 0);
	CHECK(memcmp(p + HDR, frame, sizeof(frame)) == 0);
	CHECK(p[HDR + sizeof(frame)] == 0xee); /* nothing written past the frame */
	stop(&n);
}

/* Without a posted buffer the device reads nothing: the frames wait in the back-end. */
static void test_rx_waits_for_buffers(void)
{
	struct net n;
	CHECK(start(&n));
	uint8_t frame[200];
	for (uint8_t i = 0; i < 3; i++) {
		fill(frame, sizeof(frame), i);
		CHECK(send(n.peer, frame, sizeof(frame), 0) == (ssize_t)sizeof(frame));
	}
	vdrv_wr(&n.d, VIRTIO_MMIO_QUEUE_NOTIFY, Q_RX); /* a notify with an empty ring */
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	CHECK(frames_waiting(&n));
	uint32_t id, len;
	CHECK(!take_used(&n, Q_RX, &id, &len, 0));
	for (uint8_t i = 0; i < 3; i++) {
		uint64_t buf = post_rx(&n, i, HDR + 1514);
		CHECK(take_used(&n, Q_RX, &id, &len, 2000));
		fill(frame, sizeof(frame), i);
		CHECK(len == HDR + sizeof(frame) && memcmp((uint8_t *)vdrv_host(&n.d, buf) + HDR, frame, 200) == 0);
	}
	CHECK(!frames_waiting(&n));
	struct virtio_net_stats s;
	virtio_net_stats(&n.d.dev, &s);
	CHECK(s.rx_frames == 3 && s.rx_dropped == 0);
	stop(&n);
}

/* A frame larger than the buffer is dropped; the buffer takes the next frame that fits. */
static void test_rx_oversized(void)
{
	struct net n;
	CHECK(start(&n));
	uint8_t big[300], small[100];
	fill(big, sizeof(big), 1);
	fill(small, sizeof(small), 2);
	CHECK(send(n.peer, big, sizeof(big), 0) == (ssize_t)sizeof(big));
	CHECK(send(n.peer, big, 101, 0) == 101); /* one byte too many */
	CHECK(send(n.peer, small, sizeof(small), 0) == (ssize_t)sizeof(small));
	uint64_t buf = post_rx(&n, 0, HDR + 100);
	uint32_t id, len;
	CHECK(take_used(&n, Q_RX, &id, &len, 2000));
	CHECK(len == HDR + 100 && memcmp((uint8_t *)vdrv_host(&n.d, buf) + HDR, small, 100) == 0);
	struct virtio_net_stats s;
	virtio_net_stats(&n.d.dev, &s);
	CHECK(s.rx_dropped == 2 && s.rx_frames == 1);
	CHECK(!vdrv_needs_reset(&n.d));
	stop(&n);
}

/* A back-end that takes no more frames makes the device drop them, never block the vCPU. */
static void test_tx_backend_full(void)
{
	struct net n;
	CHECK(start(&n));
	uint8_t frame[1400];
	fill(frame, sizeof(frame), 3);
	for (int i = 0; i < 1000; i++)
		CHECK(send_frame(&n, frame, sizeof(frame), HDR) == 0);
	struct virtio_net_stats s;
	virtio_net_stats(&n.d.dev, &s);
	CHECK(s.tx_dropped > 0 && s.tx_frames > 0 && s.tx_frames + s.tx_dropped == 1000);
	/* An oversized frame is dropped too, without breaking the device. */
	uint32_t big = VIRTIO_NET_MAX_FRAME + 1;
	uint8_t *f = calloc(1, big);
	CHECK(send_frame(&n, f, big, HDR) == 0);
	free(f);
	virtio_net_stats(&n.d.dev, &s);
	CHECK(s.tx_frames + s.tx_dropped == 1001);
	CHECK(!vdrv_needs_reset(&n.d));
	stop(&n);
}

/* Each hostile chain breaks the device; a reset and a fresh setup recover it. */
static void test_hostile(void)
{
	struct net n;
	CHECK(start(&n));
	struct vdrv *d = &n.d;
	uint8_t frame[64];
	fill(frame, sizeof(frame), 9);

	/* The header may end inside the next descriptor: the frame starts after byte 12 of the chain. */
	char sink[256];
	CHECK(send_frame(&n, frame, sizeof(frame), HDR - 1) == 0);
	CHECK(recv(n.peer, sink, sizeof(sink), MSG_DONTWAIT) == (ssize_t)sizeof(frame) - 1);
	CHECK(memcmp(sink, frame + 1, sizeof(frame) - 1) == 0);
	CHECK(!vdrv_needs_reset(d));

	/* A transmit chain shorter than the header. */
	uint64_t hdr = n.tx_hdr;
	vdrv_desc(d, n.q[Q_TX].desc, 0, hdr, HDR - 1, 0, 0);
	publish(&n, Q_TX, 0);
	CHECK(vdrv_needs_reset(d));
	CHECK(recv(n.peer, sink, sizeof(sink), MSG_DONTWAIT) < 0);

	/* Reset, set up again: works. */
	CHECK((negotiate(&n) & VIRTIO_STATUS_NEEDS_RESET) == 0);
	CHECK(send_frame(&n, frame, sizeof(frame), HDR) == 0);
	CHECK(recv(n.peer, sink, sizeof(sink), MSG_DONTWAIT) == (ssize_t)sizeof(frame));

	/* A receive buffer too small for the header. */
	CHECK(send(n.peer, frame, sizeof(frame), 0) == (ssize_t)sizeof(frame));
	uint64_t small = vdrv_alloc(d, 8);
	vdrv_desc(d, n.q[Q_RX].desc, 0, small, 8, VIRTQ_DESC_F_WRITE, 0);
	publish(&n, Q_RX, 0);
	CHECK(vdrv_needs_reset(d));
	uint32_t id, len;
	CHECK(!take_used(&n, Q_RX, &id, &len, 50));

	/* A receive buffer that is read-only (no writable byte at all). */
	CHECK((negotiate(&n) & VIRTIO_STATUS_NEEDS_RESET) == 0);
	uint64_t ro = vdrv_alloc(d, 2048);
	vdrv_desc(d, n.q[Q_RX].desc, 0, ro, 2048, 0, 0);
	publish(&n, Q_RX, 0);
	CHECK(vdrv_needs_reset(d));

	/* A transmit buffer outside guest RAM (in the hole). */
	CHECK((negotiate(&n) & VIRTIO_STATUS_NEEDS_RESET) == 0);
	vdrv_desc(d, n.q[Q_TX].desc, 0, hdr, HDR, VIRTQ_DESC_F_NEXT, 1);
	vdrv_desc(d, n.q[Q_TX].desc, 1, VDRV_HOLE_GPA, 64, 0, 0);
	publish(&n, Q_TX, 0);
	CHECK(vdrv_needs_reset(d));

	/* A receive buffer straddling the end of RAM. */
	CHECK((negotiate(&n) & VIRTIO_STATUS_NEEDS_RESET) == 0);
	vdrv_desc(d, n.q[Q_RX].desc, 0, VDRV_HIGH_GPA + VDRV_HIGH_SIZE - 16, 64, VIRTQ_DESC_F_WRITE, 0);
	publish(&n, Q_RX, 0);
	CHECK(vdrv_needs_reset(d));

	/* After all that a reset device still moves frames both ways. */
	CHECK((negotiate(&n) & VIRTIO_STATUS_NEEDS_RESET) == 0);
	uint64_t buf = post_rx(&n, 0, HDR + 1514);
	CHECK(take_used(&n, Q_RX, &id, &len, 2000) && len == HDR + sizeof(frame));
	CHECK(memcmp((uint8_t *)vdrv_host(d, buf) + HDR, frame, sizeof(frame)) == 0);
	stop(&n);
}

/* The back-end hanging up stops receive polling without breaking transmit bookkeeping. */
static void test_backend_hangup(void)
{
	struct net n;
	CHECK(start(&n));
	post_rx(&n, 0, HDR + 1514);
	close(n.peer);
	n.peer = -1;
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	uint8_t frame[64] = { 0 };
	CHECK(send_frame(&n, frame, sizeof(frame), HDR) == 0);
	struct virtio_net_stats s;
	virtio_net_stats(&n.d.dev, &s);
	CHECK(s.tx_dropped == 1 && s.rx_frames == 0);
	CHECK(!vdrv_needs_reset(&n.d));
	vdrv_done(&n.d);
	close(n.dev_end);
}

int main(void)
{
	RUN(test_identity);
	RUN(test_tx);
	RUN(test_rx);
	RUN(test_rx_waits_for_buffers);
	RUN(test_rx_oversized);
	RUN(test_tx_backend_full);
	RUN(test_hostile);
	RUN(test_backend_hangup);
	return check_failures ? 1 : 0;
}
