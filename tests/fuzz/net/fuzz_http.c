/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: whole sandbox connections through the gateway's HTTP request checker (src/net/gw_http.c):
 * pipelined requests, absolute-form targets, odd whitespace, chunked and Content-Length bodies, trailers,
 * delivered in pieces the way reads return them.
 *
 * Input: byte 0 picks the connection (bit 0: TLS to api.test:443, else plain api.test:80; bit 1: the host
 * has a credential rule injecting X-Api-Key); byte 1 seeds the sizes of the pieces (0: all at once); the
 * rest is what the sandbox sends.
 * Invariants, besides no sanitizer report:
 *  - what the checker forwards is a fixpoint: fed to a fresh checker for the same connection it is
 *    accepted (no refusal; only the size limits may trip, since the rewrite adds the rule's header),
 *    gives the same number of requests, and comes out byte for byte the same. So every forwarded head
 *    names the connection's host and port, and its framing is the checker's own;
 *  - on that second pass the only header removed as a credential is the one the first pass injected,
 *    spelled as it injects it: nothing the sandbox sent as a credential survived;
 *  - a refusal has a status the gateway answers with and a reason safe to print (sandbox-made text
 *    escaped: no control byte, valid UTF-8, one line).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/gw_http.h"
#include "util/escape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_MAX (1u << 20)

struct sink {
	char *buf;
	size_t n;
	unsigned stripped, foreign; /* headers removed; of those, not the rule's own spelling */
};

static int sink_forward(void *ud, const char *b, size_t len)
{
	struct sink *s = ud;
	if (len > OUT_MAX - s->n)
		__builtin_trap(); /* the checker never forwards more than a bounded multiple of its input */
	memcpy(s->buf + s->n, b, len);
	s->n += len;
	return 0;
}

static void sink_stripped(void *ud, const char *name)
{
	struct sink *s = ud;
	s->stripped++;
	if (strcmp(name, "X-Api-Key"))
		s->foreign++;
}

static const struct gw_http_ops ops = { sink_forward, sink_stripped };
static const struct gw_http_header key[] = { { "X-Api-Key", "SECRET" } };

struct pass {
	int rc;
	unsigned requests;
	int status;
};

static struct pass run(const struct gw_http_conf *conf, const char *in, size_t n, uint8_t seed, struct sink *s)
{
	struct gw_http h;
	struct pass p = { 0 };
	if (gw_http_init(&h, conf, &ops, s) < 0)
		return (struct pass){ -1, 0, -1 };
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n && p.rc >= 0 && p.rc != 1;) {
		size_t k = n - i;
		if (seed) {
			x = x * 1103515245u + 12345u;
			size_t piece = 1 + (x >> 16) % 97;
			k = piece < k ? piece : k;
		}
		p.rc = gw_http_feed(&h, in + i, k);
		i += k;
	}
	p.requests = h.requests;
	p.status = h.status;
	if (p.rc < 0 && h.status) {
		if (h.status != 400 && h.status != 403 && h.status != 431 && h.status != 501)
			__builtin_trap();
		if (!h.why[0])
			__builtin_trap();
		if (!util_text_is_safe(h.why, strlen(h.why)) || strchr(h.why, '\n') || strchr(h.why, '\t'))
			__builtin_trap();
	}
	gw_http_finish(&h);
	return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *out1, *out2;
	if (!out1) {
		out1 = malloc(OUT_MAX);
		out2 = malloc(OUT_MAX);
		if (!out1 || !out2)
			return 0;
	}
	if (size < 2 || size > OUT_MAX / 4)
		return 0;
	bool tls = data[0] & 1, rules = data[0] & 2;
	struct gw_http_conf conf = { "api.test", tls ? 443 : 80, tls, rules, rules ? key : NULL, rules ? 1 : 0 };
	struct sink s1 = { out1, 0, 0, 0 }, s2 = { out2, 0, 0, 0 };
	struct pass p1 = run(&conf, (const char *)data + 2, size - 2, data[1], &s1);
	if (p1.status < 0)
		return 0;
	struct pass p2 = run(&conf, out1, s1.n, 0, &s2);
	if (p2.status == 431)
		return 0; /* the rule's header or "Connection: close" took a head over the limit */
	if (p2.rc < 0 || p2.requests != p1.requests || (p1.rc == 1) != (p2.rc == 1))
		__builtin_trap();
	if (s2.n != s1.n || memcmp(out1, out2, s1.n))
		__builtin_trap();
	if (s2.foreign)
		__builtin_trap();
	return 0;
}
