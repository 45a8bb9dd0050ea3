/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the egress policy compiler, host matching, the gateway's DNS answers and its
 * ClientHello SNI parser (no privileges needed). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/gw.h"
#include "net/net.h"

static int failures;
/* The operator's policies, as the CLI compiles them; test_net_policy_trust.c covers API callers'. */
static const struct net_policy_trust trusted = { .trusted = true };
#define CHECK(c)                                                                     \
	do {                                                                         \
		if (!(c)) {                                                          \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                  \
		}                                                                    \
	} while (0)

/* The gateway's policy lookups and event log, for gw_dns.c alone. */
static unsigned events;
void gw_event(struct gw *g, const char *kind, const char *fmt, ...)
{
	(void)g, (void)kind, (void)fmt;
	events++;
}
bool gw_allowed(const struct gw *g, const char *host, uint16_t port)
{
	(void)g, (void)port;
	return net_host_match("api.test", host) || net_host_match("*.example.org", host);
}

static void test_policy(void)
{
	char err[256], *cfg = NULL;
	setenv("NET_TEST_SECRET", "s3cr3t", 1);
	CHECK(net_policy_compile("{\"allow\":[\"API.test\",\"*.example.org:8443\"],\"secrets\":{\"K\":\"env:NET_TEST_SECRET\"},"
				 "\"inject\":[{\"host\":\"api.test\",\"header\":\"Authorization\",\"value\":\"Bearer ${K}\"}]}",
				 &trusted, &cfg, err, sizeof(err)) == 0);
	cJSON *c = cJSON_Parse(cfg);
	CHECK(!strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "allow"), 0)->child->valuestring, "api.test"));
	CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "allow"), 1), "port")->valueint == 8443);
	CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "inject"), 0),
							      "value")), "Bearer s3cr3t"));
	CHECK(!cJSON_GetObjectItem(c, "secrets")); /* only expanded values travel on */
	cJSON_Delete(c);
	free(cfg);
	CHECK(net_policy_compile(NULL, &trusted, &cfg, err, sizeof(err)) == 0);
	free(cfg);
	static const char *const bad[] = {
		"[]", "{\"allow\":\"x\"}", "{\"allow\":[\"bad host\"]}", "{\"allow\":[\"a.test:0\"]}",
		"{\"allow\":[\"a.test:70000\"]}", "{\"nope\":1}", "{\"secrets\":{\"K\":\"env:NET_TEST_UNSET_VAR\"}}",
		"{\"secrets\":{\"K\":\"plain\"}}",
		"{\"inject\":[{\"host\":\"a.test\",\"header\":\"X\",\"value\":\"${MISSING}\"}]}",
		"{\"inject\":[{\"host\":\"a.test\",\"header\":\"X: y\",\"value\":\"v\"}]}",
		"{\"limits\":{\"max_connections\":-1}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfg = NULL;
		int r = net_policy_compile(bad[i], &trusted, &cfg, err, sizeof(err));
		if (r >= 0)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(r < 0 && err[0] && !cfg);
	}
	/* A secret with a line break would split the header: refused, and the message does not show it. */
	setenv("NET_TEST_SECRET", "abc\r\nX-Evil: 1", 1);
	CHECK(net_policy_compile("{\"secrets\":{\"K\":\"env:NET_TEST_SECRET\"},\"inject\":[{\"host\":\"a.test\","
				 "\"header\":\"Authorization\",\"value\":\"${K}\"}]}", &trusted, &cfg, err, sizeof(err)) == -EINVAL);
	CHECK(!strstr(err, "abc"));
}

/* "passthrough": hosts whose TLS is relayed unopened, opt-in; never a host with an inject rule. */
static void test_passthrough(void)
{
	char err[256], *cfg = NULL;
	CHECK(net_policy_compile("{\"allow\":[\"a.test\",\"*.b.test\"],\"passthrough\":[\"A.test\",\"*.b.test\"]}", &trusted, &cfg,
				 err, sizeof(err)) == 0);
	cJSON *c = cJSON_Parse(cfg);
	cJSON *p = cJSON_GetObjectItem(c, "passthrough");
	CHECK(cJSON_GetArraySize(p) == 2 && !strcmp(cJSON_GetArrayItem(p, 0)->valuestring, "a.test") &&
	      !strcmp(cJSON_GetArrayItem(p, 1)->valuestring, "*.b.test"));
	cJSON_Delete(c);
	free(cfg);
	/* Without the key nothing is passed through. */
	CHECK(net_policy_compile("{\"allow\":[\"a.test\"]}", &trusted, &cfg, err, sizeof(err)) == 0);
	c = cJSON_Parse(cfg);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(c, "passthrough")) == 0);
	cJSON_Delete(c);
	free(cfg);
	static const char *const bad[] = {
		"{\"passthrough\":\"a.test\"}", "{\"passthrough\":[1]}", "{\"passthrough\":[\"a.test:443\"]}",
		"{\"passthrough\":[\"bad host\"]}", "{\"passthrough\":[\"\"]}",
		"{\"passthrough\":[\"a.test\"],\"inject\":[{\"host\":\"a.test\",\"header\":\"X\",\"value\":\"v\"}]}",
		"{\"passthrough\":[\"*.b.test\"],\"inject\":[{\"host\":\"api.b.test\",\"header\":\"X\",\"value\":\"v\"}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfg = NULL;
		int r = net_policy_compile(bad[i], &trusted, &cfg, err, sizeof(err));
		if (r >= 0)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(r < 0 && err[0] && !cfg);
	}
}

static void test_match(void)
{
	CHECK(net_host_match("api.test", "api.test"));
	CHECK(net_host_match("api.test", "API.Test"));
	CHECK(!net_host_match("api.test", "xapi.test"));
	CHECK(net_host_match("*.example.org", "a.example.org"));
	CHECK(net_host_match("*.example.org", "a.b.example.org"));
	CHECK(!net_host_match("*.example.org", "example.org"));
	CHECK(!net_host_match("*.example.org", "evilexample.org"));
	CHECK(net_host_valid("a-b.c_d.test"));
	CHECK(!net_host_valid("a..b") && !net_host_valid(".a") && !net_host_valid("a b") && !net_host_valid(""));
}

static size_t query(uint8_t *q, const char *name, uint16_t type)
{
	size_t n = 12;
	memset(q, 0, 12);
	q[0] = 0xab, q[1] = 0xcd, q[2] = 0x01, q[5] = 1;
	for (const char *p = name; *p;) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		q[n++] = (uint8_t)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
	}
	q[n++] = 0;
	q[n++] = (uint8_t)(type >> 8), q[n++] = (uint8_t)type, q[n++] = 0, q[n++] = 1;
	return n;
}

static void test_dns(void)
{
	static struct gw g = { .lock = PTHREAD_MUTEX_INITIALIZER };
	static char names[GW_MAX_NAMES][256];
	g.names = names;
	uint8_t q[512], a[512];
	size_t n = query(q, "api.test", 1);
	int len = gw_dns_answer(&g, q, n, a, sizeof(a));
	CHECK(len == (int)n + 16 && a[0] == 0xab && (a[2] & 0x80) && (a[3] & 0x0f) == 0 && a[7] == 1);
	uint32_t addr;
	memcpy(&addr, a + n + 12, 4);
	CHECK((ntohl(addr) & GW_SYNTH_MASK) == GW_SYNTH_BASE);
	char back[256];
	CHECK(gw_dns_name_of(&g, addr, back, sizeof(back)) && !strcmp(back, "api.test"));
	CHECK(gw_dns_answer(&g, q, n, a, sizeof(a)) == len); /* same name, same address */
	memcpy(&addr, a + n + 12, 4);
	CHECK(gw_dns_name_of(&g, addr, back, sizeof(back)));
	CHECK(!gw_dns_name_of(&g, htonl(0xc6120000u + 999), back, sizeof(back)));
	CHECK(!gw_dns_name_of(&g, htonl(0x7f000001), back, sizeof(back)));
	unsigned ev = events;
	n = query(q, "evil.test", 1);
	len = gw_dns_answer(&g, q, n, a, sizeof(a));
	CHECK(len == (int)n && (a[3] & 0x0f) == 3 && events == ev + 1); /* NXDOMAIN, recorded */
	/* A wildcard does not let a malformed name in: a terminal escape below an allowed suffix. */
	ev = events;
	n = query(q, "\x1b]0;pwned\x07.example.org", 1);
	len = gw_dns_answer(&g, q, n, a, sizeof(a));
	CHECK(len == (int)n && (a[3] & 0x0f) == 3 && events == ev + 1);
	n = query(q, "x.example.org", 28);
	len = gw_dns_answer(&g, q, n, a, sizeof(a));
	CHECK(len == (int)n && (a[3] & 0x0f) == 0 && a[7] == 0); /* AAAA: exists, no answer */
	/* Hostile input: truncated names, oversized labels, responses; never read past the end. */
	for (size_t cut = 0; cut < n; cut++)
		CHECK(gw_dns_answer(&g, q, cut, a, sizeof(a)) <= (int)cut + 16);
	q[12] = 200; /* a label longer than 63 */
	len = gw_dns_answer(&g, q, n, a, sizeof(a));
	CHECK(len == 12 && (a[3] & 0x0f) == 1); /* FORMERR */
	q[2] |= 0x80;
	CHECK(gw_dns_answer(&g, q, n, a, sizeof(a)) == -1);
}

static size_t hello(uint8_t *b, const char *sni)
{
	size_t nl = strlen(sni), n = 0;
	uint8_t body[600];
	size_t k = 0;
	body[k++] = 3, body[k++] = 3;
	memset(body + k, 0x11, 32), k += 32;
	body[k++] = 0;                            /* session id */
	body[k++] = 0, body[k++] = 2, body[k++] = 0x13, body[k++] = 0x01;
	body[k++] = 1, body[k++] = 0;             /* compression */
	size_t ext_len = 4 + 2 + 1 + 2 + nl + 4;  /* SNI + an empty extension */
	body[k++] = (uint8_t)(ext_len >> 8), body[k++] = (uint8_t)ext_len;
	body[k++] = 0, body[k++] = 0xff, body[k++] = 0, body[k++] = 0; /* unrelated, empty */
	body[k++] = 0, body[k++] = 0;             /* server_name */
	body[k++] = (uint8_t)((nl + 5) >> 8), body[k++] = (uint8_t)(nl + 5);
	body[k++] = (uint8_t)((nl + 3) >> 8), body[k++] = (uint8_t)(nl + 3);
	body[k++] = 0;
	body[k++] = (uint8_t)(nl >> 8), body[k++] = (uint8_t)nl;
	memcpy(body + k, sni, nl), k += nl;
	b[n++] = 0x16, b[n++] = 3, b[n++] = 1;
	b[n++] = (uint8_t)((k + 4) >> 8), b[n++] = (uint8_t)(k + 4);
	b[n++] = 1, b[n++] = 0, b[n++] = (uint8_t)(k >> 8), b[n++] = (uint8_t)k;
	memcpy(b + n, body, k);
	return n + k;
}

static void test_sni(void)
{
	uint8_t b[700];
	char out[256];
	size_t n = hello(b, "API.test");
	CHECK(gw_tls_sni(b, n, out, sizeof(out)) && !strcmp(out, "api.test"));
	for (size_t cut = 0; cut < n; cut++)
		CHECK(!gw_tls_sni(b, cut, out, sizeof(out)));
	CHECK(!gw_tls_sni(b, n, out, 4)); /* does not fit */
	b[0] = 0x17;
	CHECK(!gw_tls_sni(b, n, out, sizeof(out)));
}

int main(void)
{
	test_policy();
	test_passthrough();
	test_match();
	test_dns();
	test_sni();
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("net parsers: ok\n");
	return 0;
}
