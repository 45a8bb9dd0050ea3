/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `vsock`: drives the first virtio-mmio device as virtio-vsock (device id 19), as a stream
 * socket peer with credit accounting both ways:
 *   - connects to host port vsock.hostport (the host serves it on <sock>_<port>), sends
 *     "PING-FROM-GUEST\n" and expects "PONG-FROM-HOST\n" back before the host closes;
 *   - listens on vsock.port: echoes everything a host client sends through `CONNECT <port>` until it
 *     closes, and checks that exactly vsock.bytes went through.
 * Prints GUEST-OK vsock. tests/nested/vsock_peer.py is the host side.
 */
#include "mq.h"

#define NAME "vsock"
#define VSOCK_ID 19u
#define HOST_CID 2u
#define Q_RX 0u
#define Q_TX 1u
#define HDR 44u
#define RX_DATA 4096u
#define RX_SLOTS MQ_QSIZE
#define BUF_ALLOC (64u << 10)  /* our receive window = the echo ring */
#define GUEST_PORT 5000u

enum { OP_REQUEST = 1, OP_RESPONSE, OP_RST, OP_SHUTDOWN, OP_RW, OP_CREDIT_UPDATE, OP_CREDIT_REQUEST };

struct hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

struct conn {
	bool open, done;
	uint32_t local, peer;              /* guest port, host port */
	uint32_t peer_buf_alloc, peer_fwd; /* the device's window */
	uint32_t tx_cnt;                   /* bytes we sent */
	uint32_t fwd_cnt;                  /* bytes we consumed */
	uint64_t rx_total;
	uint8_t *ring;                     /* echo: received, not yet sent back */
	uint32_t head, len;
};

static struct mq_dev d;
static uint64_t cid;
static struct hdr *tx_hdr;
static uint8_t *tx_data;

static void send_pkt(struct conn *c, uint16_t op, const uint8_t *data, uint32_t len)
{
	*tx_hdr = (struct hdr){
		.src_cid = cid, .dst_cid = HOST_CID, .src_port = c->local, .dst_port = c->peer, .len = len,
		.type = 1, .op = op, .buf_alloc = BUF_ALLOC, .fwd_cnt = c->fwd_cnt,
	};
	gv_set_desc(d.q[Q_TX].desc, 0, tx_hdr, HDR, len ? GV_D_NEXT : 0, 1);
	if (len) {
		memcpy(tx_data, data, len);
		gv_set_desc(d.q[Q_TX].desc, 1, tx_data, len, 0, 0);
	}
	mq_publish(&d, Q_TX, 0);
	uint32_t id, used;
	if (!mq_take_used(&d, Q_TX, &id, &used)) /* the device serves tx during the notify */
		guest_fail(NAME, "a transmit chain was not used");
	c->tx_cnt += len;
}

static uint32_t peer_credit(const struct conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd;
	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

/* Sends back what the echo connection holds, as far as the device's window allows. */
static void echo(struct conn *c)
{
	while (c->open && c->len) {
		uint32_t n = c->len, first = BUF_ALLOC - c->head, credit = peer_credit(c);
		if (n > first)
			n = first;
		if (n > RX_DATA)
			n = RX_DATA;
		if (n > credit)
			n = credit;
		if (!n)
			return; /* wait for a CREDIT_UPDATE */
		c->fwd_cnt += n; /* consumed: the header of this packet tells the device */
		send_pkt(c, OP_RW, c->ring + c->head, n);
		c->head = (c->head + n) % BUF_ALLOC;
		c->len -= n;
	}
}

static const char ping[] = "PING-FROM-GUEST\n", pong[] = "PONG-FROM-HOST\n";
static uint8_t reply[64];
static uint32_t reply_len;

static void rx_packet(struct conn *out, struct conn *in, uint32_t listen_port, const uint8_t *b, uint32_t len)
{
	struct hdr h;
	memcpy(&h, b, HDR);
	if (h.src_cid != HOST_CID || h.dst_cid != cid || h.type != 1 || h.len > len - HDR)
		guest_fail(NAME, "malformed packet from the device");
	struct conn *c = NULL;
	if (out->open && h.dst_port == out->local && h.src_port == out->peer)
		c = out;
	else if (in->open && h.dst_port == in->local && h.src_port == in->peer)
		c = in;
	if (!c) {
		if (h.op == OP_REQUEST && h.dst_port == listen_port && !in->open && !in->done) {
			*in = (struct conn){ .open = true, .local = listen_port, .peer = h.src_port,
					     .peer_buf_alloc = h.buf_alloc, .peer_fwd = h.fwd_cnt, .ring = in->ring };
			send_pkt(in, OP_RESPONSE, NULL, 0);
			guest_puts("vsock: accepted a host connection\n");
		}
		return; /* RSTs and strays for connections we closed */
	}
	c->peer_buf_alloc = h.buf_alloc;
	c->peer_fwd = h.fwd_cnt;
	switch (h.op) {
	case OP_RESPONSE:
		send_pkt(c, OP_RW, (const uint8_t *)ping, sizeof(ping) - 1);
		break;
	case OP_RW:
		c->rx_total += h.len;
		if (c == in) {
			if (h.len > BUF_ALLOC - c->len)
				guest_fail(NAME, "the device sent beyond our credit");
			for (uint32_t i = 0; i < h.len; i++)
				c->ring[(c->head + c->len + i) % BUF_ALLOC] = b[HDR + i];
			c->len += h.len;
		} else {
			if (h.len > sizeof(reply) - reply_len)
				guest_fail(NAME, "the host's reply is too long");
			memcpy(reply + reply_len, b + HDR, h.len);
			reply_len += h.len;
			c->fwd_cnt += h.len;
		}
		break;
	case OP_CREDIT_REQUEST:
		send_pkt(c, OP_CREDIT_UPDATE, NULL, 0);
		break;
	case OP_SHUTDOWN:
		if (c == in)
			echo(c); /* the host closed after it read everything back: nothing should be left */
		send_pkt(c, OP_RST, NULL, 0);
		c->open = false;
		c->done = true;
		break;
	case OP_RST:
		c->open = false;
		c->done = true;
		break;
	default:
		break; /* CREDIT_UPDATE: the window is taken above */
	}
}

static uint64_t param(const uint8_t *bp, const char *key, uint64_t def)
{
	char val[32];
	const char *end;
	return guest_cmdline_value(bp, key, val, sizeof(val)) ? guest_parse_num(val, &end) : def;
}

void guest_main(const uint8_t *bp)
{
	uint64_t base = gv_find(bp);
	if (!base)
		guest_fail(NAME, "no virtio_mmio.device= on the command line");
	const char *why = mq_init(&d, base, VSOCK_ID, 0, 3);
	if (why)
		guest_fail(NAME, why);
	for (unsigned i = 0; i < 8; i++)
		cid |= (uint64_t)mq_config8(&d, i) << (8 * i);
	uint32_t listen_port = (uint32_t)param(bp, "vsock.port", 1234);
	uint32_t host_port = (uint32_t)param(bp, "vsock.hostport", 2000);
	uint64_t want_bytes = param(bp, "vsock.bytes", 1 << 20);

	uint8_t *rx[RX_SLOTS];
	for (uint16_t i = 0; i < RX_SLOTS; i++) {
		rx[i] = guest_alloc(HDR + RX_DATA, 64);
		gv_set_desc(d.q[Q_RX].desc, i, rx[i], HDR + RX_DATA, GV_D_WRITE, 0);
		mq_publish(&d, Q_RX, i);
	}
	tx_hdr = guest_alloc(HDR, 64);
	tx_data = guest_alloc(RX_DATA, 64);
	static struct conn out, in;
	in.ring = guest_alloc(BUF_ALLOC, 64);
	out = (struct conn){ .open = true, .local = GUEST_PORT, .peer = host_port };
	send_pkt(&out, OP_REQUEST, NULL, 0);

	/* The VMM's --timeout bounds this loop. */
	while (!out.done || !in.done) {
		uint32_t id, len;
		bool any = false;
		while (mq_take_used(&d, Q_RX, &id, &len)) {
			if (id >= RX_SLOTS || len < HDR || len > HDR + RX_DATA)
				guest_fail(NAME, "bad used element on the receive queue");
			rx_packet(&out, &in, listen_port, rx[id], len);
			mq_publish(&d, Q_RX, (uint16_t)id);
			any = true;
		}
		echo(&in);
		if (!any)
			__asm__ volatile("pause");
	}
	if (reply_len != sizeof(pong) - 1 || memcmp(reply, pong, reply_len) != 0)
		guest_fail(NAME, "the host's answer on the guest-initiated connection is wrong");
	guest_puts("vsock: guest -> host port ");
	guest_put_dec(host_port);
	guest_puts(" answered\n");
	if (in.rx_total != want_bytes)
		guest_fail(NAME, "the echo connection did not carry vsock.bytes");
	guest_puts("vsock: echoed ");
	guest_put_dec(in.rx_total);
	guest_puts(" bytes on port ");
	guest_put_dec(listen_port);
	guest_puts("\n");
	guest_ok(NAME);
}
