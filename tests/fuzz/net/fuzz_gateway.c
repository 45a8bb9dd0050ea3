/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what the egress gateway parses from the guest (src/net): DNS queries (gw_dns.c, answered
 * from a policy that allows *.example.com) and TLS ClientHello records (gw_tls.c, the SNI the gateway
 * routes by). Byte 0 picks the parser; the rest is the guest's packet or record. Invariants: no
 * sanitizer report; an answer never exceeds the output buffer; a DNS answer's synthetic address maps
 * back to a name; an extracted SNI is NUL-terminated within its buffer.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/gw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The gateway's policy and event log live in gw_main.c (with its main()): small stand-ins here. */
bool gw_allowed(const struct gw *g, const char *host, uint16_t port)
{
	(void)g;
	(void)port;
	size_t n = strlen(host);
	return n >= 11 && !strcmp(host + n - 11, "example.com");
}

void gw_event(struct gw *g, const char *kind, const char *fmt, ...)
{
	(void)g;
	(void)kind;
	(void)fmt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gw g;
	static char names[GW_MAX_NAMES][256];
	if (!g.names) {
		pthread_mutex_init(&g.lock, NULL);
		g.names = names;
	}
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (data[0] & 1) {
		char sni[256];
		memset(sni, 0x55, sizeof(sni));
		if (gw_tls_sni(p, n, sni, sizeof(sni)) && !memchr(sni, '\0', sizeof(sni)))
			__builtin_trap();
		return 0;
	}
	if (g.n_names >= GW_MAX_NAMES - 1)
		g.n_names = 0; /* keep the table from filling over a long run */
	uint8_t out[512];
	int len = gw_dns_answer(&g, p, n, out, sizeof(out));
	if (len > (int)sizeof(out))
		__builtin_trap();
	if (len >= 16 && (out[3] & 0x0f) == 0 && out[7] == 1) { /* NOERROR with one answer: its A record is last */
		uint32_t a;
		memcpy(&a, out + len - 4, 4);
		char name[256];
		if (!gw_dns_name_of(&g, a, name, sizeof(name)))
			__builtin_trap();
	}
	return 0;
}
