/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's DNS: the sandbox's only resolver. A name the policy allows gets a synthetic address
 * (198.18.0.0/15) that stands for that name alone; every other name gets NXDOMAIN and an event. Real
 * addresses are never given out: the gateway resolves the name itself when the sandbox connects.
 * Queries are hostile input: every length is checked against the packet, and a name (any bytes but '.'
 * and NUL) reaches an event only escaped and capped (gw_quote).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/gw.h"

#define DNS_HDR 12
#define T_A 1
#define T_AAAA 28
#define RCODE_NXDOMAIN 3
#define RCODE_FORMERR 1
#define RCODE_NOTIMP 4

/* Reads the question's name (no compression is valid in a question) into out; returns the offset just
 * after it, or -1. */
static int read_qname(const uint8_t *b, size_t len, char *out, size_t out_len)
{
	size_t off = DNS_HDR, n = 0;
	for (;;) {
		if (off >= len)
			return -1;
		uint8_t l = b[off++];
		if (l == 0)
			break;
		if (l > 63 || off + l > len || n + l + 2 > out_len)
			return -1;
		if (n)
			out[n++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			if (b[off + i] == 0)
				return -1; /* would cut the name short in every string compare */
			out[n++] = (char)tolower(b[off + i]);
		}
		off += l;
	}
	out[n] = '\0';
	return n ? (int)off : -1;
}

/* A host name's bytes (read_qname() already checked the label lengths): letters, digits, '-', '_'. */
static bool name_ok(const char *name)
{
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
			return false;
	return true;
}

/* The synthetic address for name, allocating one on first use; 0 when the table is full. */
static uint32_t synth_addr(struct gw *g, const char *name)
{
	uint32_t a = 0;
	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->n_names && !a; i++)
		if (!strcmp(g->names[i], name))
			a = GW_SYNTH_BASE + 1 + i;
	if (!a && g->n_names < GW_MAX_NAMES) {
		snprintf(g->names[g->n_names], sizeof(g->names[0]), "%s", name);
		a = GW_SYNTH_BASE + 1 + g->n_names++;
	}
	pthread_mutex_unlock(&g->lock);
	return a;
}

bool gw_dns_name_of(struct gw *g, uint32_t addr_be, char *buf, size_t len)
{
	uint32_t a = ntohl(addr_be);
	if ((a & GW_SYNTH_MASK) != GW_SYNTH_BASE || a == GW_SYNTH_BASE)
		return false;
	uint32_t i = a - GW_SYNTH_BASE - 1;
	bool ok = false;
	pthread_mutex_lock(&g->lock);
	if (i < g->n_names) {
		snprintf(buf, len, "%s", g->names[i]);
		ok = true;
	}
	pthread_mutex_unlock(&g->lock);
	return ok;
}

static int reply(const uint8_t *q, size_t qend, uint8_t *out, size_t out_len, int rcode, uint32_t a_be)
{
	size_t need = qend + (a_be ? 16 : 0);
	if (need > out_len)
		return -1;
	memcpy(out, q, qend);
	out[2] = (uint8_t)(0x80 | (q[2] & 0x01));       /* QR, opcode 0, RD copied */
	out[3] = (uint8_t)(0x80 | (rcode & 0x0f));       /* RA, rcode */
	out[4] = 0, out[5] = 1;                          /* one question */
	out[6] = 0, out[7] = a_be ? 1 : 0;               /* answers */
	memset(out + 8, 0, 4);                           /* no authority, no additional */
	if (a_be) {
		uint8_t *p = out + qend;
		static const uint8_t rr[] = { 0xc0, 0x0c, 0, T_A, 0, 1, 0, 0, 0, 30, 0, 4 };
		memcpy(p, rr, sizeof(rr));
		memcpy(p + sizeof(rr), &a_be, 4);
	}
	return (int)need;
}

int gw_dns_answer(struct gw *g, const uint8_t *q, size_t len, uint8_t *out, size_t out_len)
{
	if (len < DNS_HDR || (q[2] & 0x80))
		return -1; /* too short, or a response: drop */
	char name[256];
	int off = (q[4] == 0 && q[5] == 1) ? read_qname(q, len, name, sizeof(name)) : -1;
	if (off < 0 || (size_t)off + 4 > len)
		return len >= DNS_HDR ? reply(q, DNS_HDR, out, out_len, RCODE_FORMERR, 0) : -1;
	uint16_t type = (uint16_t)(q[off] << 8 | q[off + 1]);
	size_t qend = (size_t)off + 4;
	if ((q[2] & 0x78) != 0)
		return reply(q, qend, out, out_len, RCODE_NOTIMP, 0);
	size_t nl = strlen(name);
	if (nl && name[nl - 1] == '.')
		name[nl - 1] = '\0';
	char quoted[GW_QUOTE_BUF];
	/* Only a well-formed host name can be allowed: the names table feeds leaf certificates, SNI and Host
	 * checks and events, so no byte a wildcard would let through (ESC, '/', ' ') ever enters it. */
	if (!name_ok(name) || !gw_allowed(g, name, 0)) {
		gw_event(g, "egress-denied", "dns %s: not in the allowlist", gw_quote(quoted, name));
		return reply(q, qend, out, out_len, RCODE_NXDOMAIN, 0);
	}
	if (type != T_A)
		return reply(q, qend, out, out_len, 0, 0); /* the name exists, with IPv4 only */
	uint32_t a = synth_addr(g, name);
	if (!a) {
		gw_event(g, "egress-denied", "dns %s: too many names", gw_quote(quoted, name));
		return reply(q, qend, out, out_len, 2 /* SERVFAIL */, 0);
	}
	return reply(q, qend, out, out_len, 0, htonl(a));
}
