/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `net`: drives the first virtio-mmio device as virtio-net (device id 1). Reads its MAC
 * from the configuration space, posts receive buffers, sends one broadcast Ethernet frame of
 * EtherType 0x88b5 (local experimental) whose payload is "SPACE-NET-PING " + 49 pattern bytes, then
 * waits (repeating the ping now and then) for a frame of the same EtherType addressed to its MAC whose payload is the ping's payload
 * reversed (what the host peer in tests/nested/net_peer.py answers). Other frames (the host's own
 * IPv6 chatter, say) are skipped. Prints GUEST-OK net.
 */
#include "mq.h"

#define NAME "net"
#define NET_ID 1u
#define F_MAC (1ull << 5)
#define HDR 12u
#define ETH 14u
#define PAYLOAD 64u
#define RX_BUF (HDR + 1514u)
#define RX_SLOTS 8u
#define Q_RX 0u
#define Q_TX 1u

static const char ping[] = "SPACE-NET-PING ";

static void make_payload(uint8_t *p)
{
	memcpy(p, ping, sizeof(ping) - 1);
	for (unsigned i = sizeof(ping) - 1; i < PAYLOAD; i++)
		p[i] = (uint8_t)('a' + i % 26);
}

static bool is_reply(const uint8_t *f, uint32_t len, const uint8_t *mac, const uint8_t *payload)
{
	if (len < ETH + PAYLOAD || memcmp(f, mac, 6) != 0 || f[12] != 0x88 || f[13] != 0xb5)
		return false;
	for (unsigned i = 0; i < PAYLOAD; i++)
		if (f[ETH + i] != payload[PAYLOAD - 1 - i])
			return false;
	return true;
}

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static void send_ping(struct mq_dev *d, uint8_t *hdr, uint8_t *frame)
{
	gv_set_desc(d->q[Q_TX].desc, 0, hdr, HDR, GV_D_NEXT, 1);
	gv_set_desc(d->q[Q_TX].desc, 1, frame, ETH + PAYLOAD, 0, 0);
	mq_publish(d, Q_TX, 0);
	uint32_t id, len;
	if (!mq_take_used(d, Q_TX, &id, &len)) /* transmit completes during the notify */
		guest_fail(NAME, "the transmit chain was not used");
}

void guest_main(const uint8_t *bp)
{
	static struct mq_dev d;
	uint64_t base = gv_find(bp);
	if (!base)
		guest_fail(NAME, "no virtio_mmio.device= on the command line");
	const char *why = mq_init(&d, base, NET_ID, F_MAC, 2);
	if (why)
		guest_fail(NAME, why);
	uint8_t mac[6];
	for (unsigned i = 0; i < 6; i++)
		mac[i] = mq_config8(&d, i);
	if (mac[0] & 1)
		guest_fail(NAME, "the device's MAC is a multicast address");

	uint8_t *rx[RX_SLOTS];
	for (uint16_t i = 0; i < RX_SLOTS; i++) {
		rx[i] = guest_alloc(RX_BUF, 64);
		gv_set_desc(d.q[Q_RX].desc, i, rx[i], RX_BUF, GV_D_WRITE, 0);
		mq_publish(&d, Q_RX, i);
	}

	uint8_t payload[PAYLOAD];
	make_payload(payload);
	uint8_t *hdr = guest_alloc(HDR, 16), *frame = guest_alloc(ETH + PAYLOAD, 16);
	memset(hdr, 0, HDR);
	memset(frame, 0xff, 6);
	memcpy(frame + 6, mac, 6);
	frame[12] = 0x88;
	frame[13] = 0xb5;
	memcpy(frame + ETH, payload, PAYLOAD);
	send_ping(&d, hdr, frame);
	guest_puts("net: ping sent, waiting for the reply\n");

	/* The VMM's --timeout bounds this wait. The ping is repeated about every 2^31 TSC cycles, for a
	 * peer that starts listening late. */
	uint64_t last = rdtsc();
	uint32_t id, len;
	for (unsigned skipped = 0;;) {
		if (!mq_take_used(&d, Q_RX, &id, &len)) {
			if (rdtsc() - last > (1ull << 31)) {
				send_ping(&d, hdr, frame);
				last = rdtsc();
			}
			__asm__ volatile("pause");
			continue;
		}
		if (id >= RX_SLOTS || len < HDR || len > RX_BUF)
			guest_fail(NAME, "bad used element on the receive queue");
		const uint8_t *b = rx[id];
		if (guest_rd16(b + 10) != 1 || b[0] != 0 || b[1] != 0)
			guest_fail(NAME, "receive header is not flags 0, gso none, num_buffers 1");
		if (is_reply(b + HDR, len - HDR, mac, payload))
			break;
		if (++skipped > 64)
			guest_fail(NAME, "64 frames and none was the reply");
		mq_publish(&d, Q_RX, (uint16_t)id);
	}
	guest_puts("net: reply with the payload reversed received\n");
	guest_ok(NAME);
}
