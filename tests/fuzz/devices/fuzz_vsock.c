/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzzes virtio-vsock as a guest drives it: arbitrary packet headers and lengths on the tx queue,
 * rx buffers of any size, raw writes into the rings, resets and register writes, plus a host peer
 * (a listener at "<path>_5000" whose accepted streams write and close). Input:
 *   byte 0    guest CID = 3 + (byte % 4)
 *   then ops until the input ends (op byte % 8):
 *     0 u16 gpa, u8 len, bytes   write guest RAM (clipped to the low region)
 *     1 44 header bytes, u8 fix, u16 dlen
 *                                send a packet: fix bit 0 sets valid CIDs, bit 1 type STREAM,
 *                                bit 2 len = dlen % 4096, bit 3 op %= 8, bit 4 dst_port = 5000
 *     2 u8 slot, u8 size         post rx buffer slot % 16 of size * 17 bytes, notify rx
 *     3 u8 len                   every accepted host stream writes len bytes, notify rx
 *     4 u8 q                     notify queue q % 4
 *     5                          reset and redo the driver setup
 *     6 u8 reg, u32 value        32-bit register write at (reg * 4) % 0x200
 *     7                          close every accepted host stream
 * Invariants: no sanitizer report; every rx buffer the device used holds a header to this guest's CID
 * from the host and no more bytes than the buffer has.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/virtio_mmio.h"
#include "devices/virtio_vsock.h"

#define LOW_SIZE 0x40000u
#define QSIZE 16u
#define DESC(q) (0x1000u * (q))
#define AVAIL(q) (0x3000u + 0x400u * (q))
#define USED(q) (0x4000u + 0x400u * (q))
#define TX_HDR 0x8000u
#define TX_DATA 0x9000u
#define RX_BUF(i) (0x10000u + 0x1000u * (i))
#define MAX_PEERS 64

struct input {
	const uint8_t *p;
	size_t left;
};

struct state {
	uint8_t *ram;
	struct guest_mem mem;
	struct mmio_dev dev;
	uint64_t cid;
	uint16_t avail_idx[3];
	uint32_t rx_len[QSIZE]; /* largest rx buffer posted in each slot */
	bool rings_dirty; /* the input wrote into the rings itself: their contents prove nothing */
	int peers[MAX_PEERS];
	unsigned npeers;
};

static char sock_path[128];
static int listen_fd = -1;

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
	wr(s, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr(s, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	uint32_t st = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	wr(s, VIRTIO_MMIO_STATUS, st);
	for (unsigned q = 0; q < 3; q++) {
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

static void send_packet(struct state *s, struct input *in)
{
	struct virtio_vsock_hdr h;
	uint8_t fix;
	uint16_t dlen;
	if (!take(in, &h, sizeof(h)) || !take(in, &fix, 1) || !take(in, &dlen, 2))
		return;
	dlen %= 4096;
	if (fix & 1) {
		h.src_cid = s->cid;
		h.dst_cid = VIRTIO_VSOCK_HOST_CID;
	}
	if (fix & 2)
		h.type = VIRTIO_VSOCK_TYPE_STREAM;
	if (fix & 4)
		h.len = dlen;
	if (fix & 8)
		h.op %= 8;
	if (fix & 16)
		h.dst_port = 5000;
	memcpy(s->ram + TX_HDR, &h, sizeof(h));
	uint16_t slot = (uint16_t)(2 * (s->avail_idx[1] % (QSIZE / 2)));
	set_desc(s, 1, slot, TX_HDR, sizeof(h), dlen ? 1 : 0, (uint16_t)(slot + 1));
	set_desc(s, 1, slot + 1u, TX_DATA, dlen, 0, 0);
	publish(s, 1, slot);
}

static void accept_peers(struct state *s)
{
	int fd;
	while (s->npeers < MAX_PEERS && (fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
		s->peers[s->npeers++] = fd;
}

static void close_peers(struct state *s)
{
	for (unsigned i = 0; i < s->npeers; i++)
		close(s->peers[i]);
	s->npeers = 0;
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
		if (id >= QSIZE || len > s->rx_len[id] || len < sizeof(struct virtio_vsock_hdr)) {
			fprintf(stderr, "fuzz_vsock: rx entry %u used with length %u\n", id, len);
			abort();
		}
	}
}

static char sock_dir[64];

static void cleanup_dir(void)
{
	char p[160];
	snprintf(p, sizeof(p), "%s_5000", sock_path);
	unlink(p);
	unlink(sock_path);
	rmdir(sock_dir);
}

static void init_once(void)
{
	if (listen_fd >= 0)
		return;
	snprintf(sock_dir, sizeof(sock_dir), "/tmp/fuzz-vsock-XXXXXX");
	if (!mkdtemp(sock_dir))
		abort();
	atexit(cleanup_dir);
	snprintf(sock_path, sizeof(sock_path), "%s/v.sock", sock_dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_5000", sock_path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(listen_fd, 128) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct state s;
	struct input in = { data, size };
	uint8_t b;
	init_once();
	if (!take(&in, &b, 1))
		return 0;
	if (!s.ram && !(s.ram = aligned_alloc(4096, LOW_SIZE)))
		abort();
	memset(s.ram, 0, LOW_SIZE);
	s.mem = (struct guest_mem){ .regions = { { 0, LOW_SIZE, s.ram } }, .nregions = 1 };
	s.cid = 3 + b % 4;
	s.rings_dirty = false;
	struct virtio_vsock_config cfg = { .guest_cid = s.cid, .uds_path = sock_path };
	if (virtio_vsock_create(&cfg, &s.mem, (struct mmio_irq){ no_irq, NULL }, &s.dev) < 0)
		abort();
	setup(&s);
	uint8_t op;
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
			send_packet(&s, &in);
			break;
		case 2: {
			uint8_t slot, sz;
			if (!take(&in, &slot, 1) || !take(&in, &sz, 1))
				break;
			slot %= QSIZE;
			uint32_t len = (uint32_t)sz * 17 > 4096 ? 4096 : (uint32_t)sz * 17;
			if (len > s.rx_len[slot])
				s.rx_len[slot] = len; /* the largest this slot ever had */
			set_desc(&s, 0, slot, RX_BUF(slot), len, 2 /* WRITE */, 0);
			publish(&s, 0, slot);
			break;
		}
		case 3: {
			uint8_t len, buf[256];
			if (!take(&in, &len, 1))
				break;
			memset(buf, 'x', len);
			accept_peers(&s);
			for (unsigned i = 0; i < s.npeers; i++)
				(void)!send(s.peers[i], buf, len, MSG_NOSIGNAL);
			wr(&s, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
			break;
		}
		case 4:
			if (take(&in, &b, 1))
				wr(&s, VIRTIO_MMIO_QUEUE_NOTIFY, b % 4u);
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
			accept_peers(&s);
			close_peers(&s);
			break;
		}
	}
	s.dev.ops->destroy(s.dev.dev);
	check_rx(&s);
	accept_peers(&s);
	close_peers(&s);
	return 0;
}
