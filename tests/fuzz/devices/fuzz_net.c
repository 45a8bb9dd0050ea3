/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzzes virtio-net as a guest drives it, over a SOCK_SEQPACKET socketpair standing in for the TAP:
 * transmit chains with any header length and frame size, receive buffers of any size, frames from the
 * host side, raw writes into guest RAM (rings included), notifies, resets and register writes. Input:
 *   ops until the input ends (op byte % 8):
 *     0 u16 gpa, u8 len, bytes   write guest RAM (clipped to the low region)
 *     1 u8 hlen, u16 flen        transmit: header buffer of hlen % 24 bytes, frame of flen bytes in
 *                                two buffers (flen % 8 == 7: 64 KiB + 1, oversized)
 *     2 u8 slot, u8 size         post receive buffer slot % 16 of size * 17 bytes, notify
 *     3 u16 len                  the host side sends a frame of len % 2048 bytes
 *     4 u8 q                     notify queue q % 3
 *     5                          reset and redo the driver setup
 *     6 u8 reg, u32 value        32-bit register write at (reg * 4) % 0x200
 *     7                          the host side reads every frame waiting for it
 * Invariants: no sanitizer report; unless the input wrote into the rings, every receive buffer the
 * device used has a length of at least the 12-byte header and at most the buffer's size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/virtio_mmio.h"
#include "devices/virtio_net.h"

#define LOW_SIZE 0x40000u
#define QSIZE 16u
#define DESC(q) (0x1000u * (q))
#define AVAIL(q) (0x3000u + 0x400u * (q))
#define USED(q) (0x4000u + 0x400u * (q))
#define TX_HDR 0x8000u
#define TX_DATA 0x9000u          /* up to 64 KiB + 1 */
#define RX_BUF(i) (0x1a000u + 0x1000u * (i))

struct input {
	const uint8_t *p;
	size_t left;
};

struct state {
	uint8_t *ram;
	struct guest_mem mem;
	struct mmio_dev dev;
	int peer;
	uint16_t avail_idx[2];
	uint32_t rx_len[QSIZE];
	bool rings_dirty;
};

static bool take(struct input *in, void *out, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

static int no_irq(void *opaque)
{
	(void)opaque;
	return 0;
}

static void wr(struct state *s, uint64_t off, uint32_t v)
{
	s->dev.ops->write(s->dev.dev, off, &v, 4);
}

static void setup(struct state *s)
{
	wr(s, VIRTIO_MMIO_STATUS, 0);
	memset(s->ram, 0, 0x8000);
	memset(s->avail_idx, 0, sizeof(s->avail_idx));
	memset(s->rx_len, 0, sizeof(s->rx_len));
	s->rings_dirty = false;
	wr(s, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(s, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	wr(s, VIRTIO_MMIO_DRIVER_FEATURES, 1u << VIRTIO_NET_F_MAC);
	wr(s, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr(s, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	uint32_t st = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	wr(s, VIRTIO_MMIO_STATUS, st);
	for (unsigned q = 0; q < 2; q++) {
		wr(s, VIRTIO_MMIO_QUEUE_SEL, q);
		wr(s, VIRTIO_MMIO_QUEUE_NUM, QSIZE);
		wr(s, VIRTIO_MMIO_QUEUE_DESC_LOW, DESC(q));
		wr(s, VIRTIO_MMIO_QUEUE_DRIVER_LOW, AVAIL(q));
		wr(s, VIRTIO_MMIO_QUEUE_DEVICE_LOW, USED(q));
		wr(s, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	wr(s, VIRTIO_MMIO_STATUS, st | VIRTIO_STATUS_DRIVER_OK);
}

static void set_desc(struct state *s, unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	uint8_t *d = s->ram + DESC(q) + 16u * (i % QSIZE);
	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &next, 2);
}

static void publish(struct state *s, unsigned q, uint16_t head)
{
	uint16_t *a = (uint16_t *)(s->ram + AVAIL(q));
	a[2 + s->avail_idx[q] % QSIZE] = head;
	s->avail_idx[q]++;
	__atomic_store_n(&a[1], s->avail_idx[q], __ATOMIC_RELEASE);
	wr(s, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

static void transmit(struct state *s, struct input *in)
{
	uint8_t hlen;
	uint16_t flen16;
	if (!take(in, &hlen, 1) || !take(in, &flen16, 2))
		return;
	hlen %= 24;
	uint32_t flen = flen16 % 8 == 7 ? VIRTIO_NET_MAX_FRAME + 1 : flen16 % 4096;
	uint16_t slot = (uint16_t)(3 * (s->avail_idx[1] % (QSIZE / 3)));
	set_desc(s, 1, slot, TX_HDR, hlen, 1, (uint16_t)(slot + 1));
	set_desc(s, 1, slot + 1u, TX_DATA, flen / 2, 1, (uint16_t)(slot + 2));
	set_desc(s, 1, slot + 2u, TX_DATA + flen / 2, flen - flen / 2, 0, 0);
	publish(s, 1, slot);
}

static void drain(struct state *s)
{
	char buf[2048];
	while (recv(s->peer, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
}

static void check_rx(struct state *s)
{
	if (s->rings_dirty)
		return;
	const uint8_t *u = s->ram + USED(0);
	uint16_t idx;
	memcpy(&idx, u + 2, 2);
	for (uint16_t k = 0; k < idx && k < QSIZE; k++) {
		uint32_t id, len;
		memcpy(&id, u + 4 + 8u * k, 4);
		memcpy(&len, u + 8 + 8u * k, 4);
		if (id >= QSIZE || len > s->rx_len[id] || len < sizeof(struct virtio_net_hdr)) {
			fprintf(stderr, "fuzz_net: receive entry %u used with length %u\n", id, len);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct state s;
	struct input in = { data, size };
	if (!s.ram && !(s.ram = aligned_alloc(4096, LOW_SIZE)))
		abort();
	memset(s.ram, 0, LOW_SIZE);
	s.mem = (struct guest_mem){ .regions = { { 0, LOW_SIZE, s.ram } }, .nregions = 1 };
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	s.peer = sv[1];
	struct virtio_net_config cfg = { .fd = sv[0], .mac = { 2, 0, 0, 0, 0, 1 } };
	if (virtio_net_create(&cfg, &s.mem, (struct mmio_irq){ no_irq, NULL }, &s.dev) < 0)
		abort();
	close(sv[0]); /* the device holds its own duplicate */
	setup(&s);
	uint8_t op, b;
	while (take(&in, &op, 1)) {
		switch (op % 8) {
		case 0: {
			uint16_t gpa;
			uint8_t len;
			if (!take(&in, &gpa, 2) || !take(&in, &len, 1))
				break;
			size_t n = len < in.left ? len : in.left;
			if (gpa + n > LOW_SIZE)
				n = LOW_SIZE - gpa;
			take(&in, s.ram + gpa, n);
			s.rings_dirty = s.rings_dirty || gpa < TX_HDR;
			break;
		}
		case 1:
			transmit(&s, &in);
			break;
		case 2: {
			uint8_t slot, sz;
			if (!take(&in, &slot, 1) || !take(&in, &sz, 1))
				break;
			slot %= QSIZE;
			uint32_t len = (uint32_t)sz * 17 > 4096 ? 4096 : (uint32_t)sz * 17;
			if (len > s.rx_len[slot])
				s.rx_len[slot] = len;
			set_desc(&s, 0, slot, RX_BUF(slot), len, 2 /* WRITE */, 0);
			publish(&s, 0, slot);
			break;
		}
		case 3: {
			uint16_t len;
			uint8_t frame[2048];
			if (!take(&in, &len, 2))
				break;
			len %= sizeof(frame);
			memset(frame, 0x5a, len);
			(void)!send(s.peer, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		}
		case 4:
			if (take(&in, &b, 1))
				wr(&s, VIRTIO_MMIO_QUEUE_NOTIFY, b % 3u);
			break;
		case 5:
			setup(&s);
			break;
		case 6: {
			uint8_t reg;
			uint32_t val;
			if (take(&in, &reg, 1) && take(&in, &val, 4))
				wr(&s, (reg * 4u) % VIRTIO_MMIO_WINDOW, val);
			break;
		}
		case 7:
			drain(&s);
			break;
		}
	}
	s.dev.ops->destroy(s.dev.dev);
	check_rx(&s);
	close(s.peer);
	return 0;
}
