/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the gateway's HTTP request checker (src/net/gw_http.c): what reaches the upstream for
 * each request a sandbox can send on one connection, and what is refused. The first cases are the
 * bypasses of issue 14 item 6, which the gateway's previous one-head check let through: an absolute-form
 * target naming another host, a pipelined second request (another Host, the sandbox's own key), and
 * "Host :" with a space before the colon.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/gw_http.h"
#include "../../check.h"


/* What the checker forwarded, and what it removed. */
struct sink {
	char out[1 << 16];
	size_t n;
	int fail_with;       /* forward returns this (upstream unreachable) */
	char stripped[256];
};

static int sink_forward(void *ud, const char *buf, size_t len)
{
	struct sink *s = ud;
	if (s->fail_with)
		return s->fail_with;
	if (len > sizeof(s->out) - 1 - s->n)
		return -E2BIG;
	memcpy(s->out + s->n, buf, len);
	s->n += len;
	s->out[s->n] = '\0';
	return 0;
}

static void sink_stripped(void *ud, const char *name)
{
	struct sink *s = ud;
	size_t l = strlen(s->stripped);
	snprintf(s->stripped + l, sizeof(s->stripped) - l, "%s%s", l ? "," : "", name);
}

static const struct gw_http_ops ops = { sink_forward, sink_stripped };
static const struct gw_http_header key[] = { { "X-Api-Key", "SECRET" } };
/* api.test:80 plain, with a rule injecting X-Api-Key. */
static const struct gw_http_conf plain = { "api.test", 80, false, true, key, 1 };
static const struct gw_http_conf tls443 = { "api.test", 443, true, true, key, 1 };
static const struct gw_http_conf norules = { "open.test", 443, true, false, NULL, 0 };

struct run {
	int rc;
	int status;
	unsigned requests;
	unsigned long long extra;
	char why[GW_HTTP_WHY_MAX];
};

/* Feeds input (len bytes) in pieces of `step` bytes (0: at once); the sink gets what was forwarded. */
static struct run feed(const struct gw_http_conf *conf, const char *in, size_t len, size_t step, struct sink *s)
{
	struct gw_http h;
	struct run r = { 0 };
	memset(s->out, 0, 16);
	s->n = 0;
	s->stripped[0] = '\0';
	if (gw_http_init(&h, conf, &ops, s) < 0) {
		r.rc = -ENOMEM;
		return r;
	}
	for (size_t i = 0; i < len && r.rc >= 0;) {
		size_t k = step && step < len - i ? step : len - i;
		r.rc = gw_http_feed(&h, in + i, k);
		i += k;
	}
	r.status = h.status;
	r.requests = h.requests;
	r.extra = h.extra;
	snprintf(r.why, sizeof(r.why), "%s", h.why);
	gw_http_finish(&h);
	return r;
}

static struct run feeds(const struct gw_http_conf *conf, const char *in, struct sink *s)
{
	return feed(conf, in, strlen(in), 0, s);
}

#define EXPECT_OUT(r, s, want)                                                               \
	do {                                                                                 \
		CHECK((r).rc >= 0);                                                          \
		CHECK(!strcmp((s)->out, want));                                              \
		if (strcmp((s)->out, want))                                                  \
			fprintf(stderr, "  forwarded: [%s]\n  wanted:    [%s]\n  why: %s\n", \
				(s)->out, want, (r).why);                                    \
	} while (0)

/* A refusal with this status and nothing of the refused request upstream. */
#define EXPECT_REFUSED(conf, in, st)                                                          \
	do {                                                                                  \
		struct sink *s_ = calloc(1, sizeof(*s_));                                     \
		struct run r_ = feeds(conf, in, s_);                                          \
		CHECK(r_.rc == -EPROTO && r_.status == (st));                                 \
		CHECK(s_->n == 0);                                                            \
		if (r_.status != (st) || s_->n)                                               \
			fprintf(stderr, "  input [%s]: rc %d status %d why '%s' forwarded [%s]\n", \
				in, r_.rc, r_.status, r_.why, s_->out);                      \
		free(s_);                                                                     \
	} while (0)

static struct sink S;

static void test_bypasses(void)
{
	/* Domain fronting through an absolute-form target: refused, nothing upstream, the secret not sent. */
	struct run r = feeds(&plain, "GET http://evil.example/ HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	CHECK(r.rc == -EPROTO && r.status == 403 && S.n == 0);
	CHECK(strstr(r.why, "evil.example") != NULL);

	/* A pipelined second request for another host: the first goes, the second is refused. */
	r = feeds(&plain, "GET /one HTTP/1.1\r\nHost: api.test\r\n\r\n"
			  "GET /two HTTP/1.1\r\nHost: evil.example\r\nX-Api-Key: mine\r\n\r\n", &S);
	CHECK(r.rc == -EPROTO && r.status == 403 && r.requests == 1);
	EXPECT_OUT((struct run){ 0 }, &S, "GET /one HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");
	CHECK(strstr(r.why, "Host 'evil.example' is not api.test") != NULL);

	/* A pipelined second request with the sandbox's own key for the right host: stripped there too. */
	r = feeds(&plain, "GET /one HTTP/1.1\r\nHost: api.test\r\n\r\n"
			  "GET /two HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: mine\r\nx-api-key: mine2\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET /one HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n"
			  "GET /two HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");
	CHECK(r.requests == 2 && !strcmp(S.stripped, "X-Api-Key,x-api-key"));
	CHECK(!strstr(S.out, "mine"));

	/* "Host :" (whitespace before the colon) is a malformed field name, not a second spelling of Host. */
	EXPECT_REFUSED(&plain, "GET / HTTP/1.1\r\nHost : evil.example\r\nHost: api.test\r\n\r\n", 400);
	EXPECT_REFUSED(&plain, "GET / HTTP/1.1\r\nHost: api.test\r\nHost\t: evil.example\r\n\r\n", 400);
	EXPECT_REFUSED(&plain, "GET / HTTP/1.1\r\nHost : api.test\r\n\r\n", 400);
}

static void test_targets(void)
{
	struct run r = feeds(&plain, "GET http://api.test/x?y=1 HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET /x?y=1 HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");
	r = feeds(&plain, "GET HTTP://API.test:80 HTTP/1.1\r\nHost: api.test:80\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET / HTTP/1.1\r\nHost: api.test:80\r\nX-Api-Key: SECRET\r\n\r\n");
	r = feeds(&plain, "GET http://api.test?q HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET /?q HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");
	r = feeds(&plain, "OPTIONS http://api.test HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "OPTIONS * HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");
	r = feeds(&plain, "OPTIONS * HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "OPTIONS * HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");
	r = feeds(&tls443, "GET https://api.test:443/a HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET /a HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n");

	static const char *const forbidden[] = {
		"GET http://api.test:81/ HTTP/1.1\r\nHost: api.test\r\n\r\n",            /* another port */
		"GET https://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",              /* another scheme */
		"GET http://user@api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",          /* userinfo */
		"GET http://evil.example@api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET http://api.test.evil.example/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET http://api.test%2eevil/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET http://[::1]/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"CONNECT api.test:80 HTTP/1.1\r\nHost: api.test\r\n\r\n",               /* authority-form */
		"CONNECT evil.example:443 HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test:8080\r\n\r\n",                          /* Host port */
		"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test.\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test:80:80\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
		EXPECT_REFUSED(&plain, forbidden[i], 403);
	EXPECT_REFUSED(&tls443, "GET / HTTP/1.1\r\nHost: api.test:80\r\n\r\n", 403);
	static const struct gw_http_conf p8443 = { "api.test", 8443, true, false, NULL, 0 };
	EXPECT_REFUSED(&p8443, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", 403);
	r = feeds(&p8443, "GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n");

	static const char *const bad[] = {
		"GET * HTTP/1.1\r\nHost: api.test\r\n\r\n",                /* '*' only for OPTIONS */
		"GET api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET ftp://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET /a b HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: api.test\r\n\r\n",
		"GET / http/1.1\r\nHost: api.test\r\n\r\n",
		"GET /\xc3\xa9 HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET /\x7f HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"G(T / HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET /\r\nHost: api.test\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_REFUSED(&plain, bad[i], 400);
}

static void test_fields(void)
{
	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nHost: api.test\r\nX-A: 1\r\n folded\r\n\r\n",     /* obs-fold */
		"GET / HTTP/1.1\r\n Host: api.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nX-A: a\rb\r\n\r\n",             /* bare CR */
		"GET / HTTP/1.1\r\nHost: api.test\nX-A: b\r\n\r\n",                  /* bare LF */
		"GET / HTTP/1.1\nHost: api.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nX-A: \x1b]0;x\x07\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nX A: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\n: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nX-A(: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nno colon\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\n\r\n",        /* duplicate Host */
		"GET / HTTP/1.1\r\nhost: api.test\r\nHOST: evil.example\r\n\r\n",
		"GET / HTTP/1.1\r\nX-A: 1\r\n\r\n",                                   /* no Host */
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 1, 1\r\n\r\nx",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: +1\r\n\r\nx",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: -1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0x10\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.0\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"\r\n\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_REFUSED(&plain, bad[i], 400);
	static const char nul[] = "GET / HTTP/1.1\r\nHost: api.test\r\nX-A: a\0b\r\n\r\n";
	struct run r = feed(&plain, nul, sizeof(nul) - 1, 0, &S);
	CHECK(r.rc == -EPROTO && r.status == 400 && S.n == 0);
	static const char nul_line[] = "GET /\0 HTTP/1.1\r\nHost: api.test\r\n\r\n";
	r = feed(&plain, nul_line, sizeof(nul_line) - 1, 0, &S);
	CHECK(r.rc == -EPROTO && r.status == 400 && S.n == 0);
	EXPECT_REFUSED(&plain, "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
	EXPECT_REFUSED(&plain, "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: identity\r\n\r\n", 501);
	EXPECT_REFUSED(&plain, "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501);

	/* Whitespace around values is trimmed; hop-by-hop fields go; the rule's header is added. */
	r = feeds(&plain, "\r\n\r\nget /p HTTP/1.1\r\nHost:\t api.test \r\nAccept: */*\r\nKeep-Alive: 5\r\n"
				     "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nTE: trailers\r\n"
				     "Proxy-Authorization: Basic eA==\r\nAuthorization: Bearer mine\r\nX-Empty:\r\n\r\n",
			     &S);
	EXPECT_OUT(r, &S, "get /p HTTP/1.1\r\nHost: api.test\r\nAccept: */*\r\nX-Empty: \r\n"
			  "X-Api-Key: SECRET\r\n\r\n");
	CHECK(!strcmp(S.stripped, "Proxy-Authorization,Authorization"));
	/* Without credential rules the sandbox's own Authorization is its business; Proxy-Authorization is not. */
	r = feeds(&norules, "GET / HTTP/1.1\r\nHost: open.test\r\nAuthorization: Bearer own\r\n"
			    "Proxy-Authorization: x\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "GET / HTTP/1.1\r\nHost: open.test\r\nAuthorization: Bearer own\r\n\r\n");

	/* Bounds: head size and field count. */
	char *big = malloc(GW_HTTP_HEAD_MAX + 64);
	int n = snprintf(big, 64, "GET / HTTP/1.1\r\nHost: api.test\r\nX-Big: ");
	memset(big + n, 'a', GW_HTTP_HEAD_MAX);
	memcpy(big + n + GW_HTTP_HEAD_MAX, "\r\n\r\n", 5);
	EXPECT_REFUSED(&plain, big, 431);
	n = snprintf(big, 64, "GET / HTTP/1.1\r\nHost: api.test\r\n");
	for (int i = 0; i < GW_HTTP_FIELDS_MAX; i++)
		n += snprintf(big + n, 16, "X-%d: 1\r\n", i);
	snprintf(big + n, 3, "\r\n");
	EXPECT_REFUSED(&plain, big, 431);
	free(big);

	/* Sandbox-made text in a reason is escaped and capped. */
	r = feeds(&plain, "GET / HTTP/1.1\r\nHost: \x9b" "31m\xff" "evil.example" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", &S);
	CHECK(r.status == 403 && strstr(r.why, "\\x9b31m\\xffevil.example") && strstr(r.why, "...'"));
	for (const char *p = r.why; *p; p++)
		CHECK((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
}

static void test_bodies(void)
{
	/* A Content-Length body that looks like a request is body: passed as is, and the next request after
	 * it is checked on its own. */
	const char *smuggle = "GET /x HTTP/1.1\r\nHost: evil.example\r\n\r\n";
	char in[1024];
	snprintf(in, sizeof(in), "POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0%zu\r\n\r\n%s"
		 "GET /b HTTP/1.1\r\nHost: api.test\r\nConnection: keep-alive\r\n\r\n", strlen(smuggle), smuggle);
	struct run r = feeds(&plain, in, &S);
	char want[1024];
	snprintf(want, sizeof(want), "POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: %zu\r\nX-Api-Key: SECRET\r\n\r\n%s"
		 "GET /b HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n", strlen(smuggle), smuggle);
	EXPECT_OUT(r, &S, want);
	CHECK(r.requests == 2);

	/* Chunked: re-framed (extensions dropped, sizes canonical), trailers checked and dropped, and the
	 * next request starts right after the last chunk. */
	const char *chunked = "POST /c HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: Chunked\r\n\r\n"
			      "005;name=\"v\"\r\nhello\r\n1A \t;x\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n"
			      "Authorization: Bearer smuggled\r\nX-Trailer: 1\r\n\r\n"
			      "GET /d HTTP/1.1\r\nHost: api.test\r\n\r\n";
	const char *want_c = "POST /c HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nX-Api-Key: SECRET\r\n\r\n"
			     "5\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n"
			     "GET /d HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\n\r\n";
	r = feeds(&plain, chunked, &S);
	EXPECT_OUT(r, &S, want_c);
	CHECK(r.requests == 2 && !strstr(S.out, "smuggled"));
	/* The same, one byte at a time and in odd pieces: the same output. */
	for (size_t step = 1; step < 8; step++) {
		r = feed(&plain, chunked, strlen(chunked), step, &S);
		EXPECT_OUT(r, &S, want_c);
	}
	r = feeds(&plain, "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", &S);
	EXPECT_OUT(r, &S, "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nX-Api-Key: SECRET\r\n\r\n0\r\n\r\n");

	static const char *const bad[] = {
		"0x5\r\nhello\r\n0\r\n\r\n", " 5\r\nhello\r\n0\r\n\r\n", "5 x\r\nhello\r\n0\r\n\r\n",
		"-5\r\nhello\r\n0\r\n\r\n", "5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n",
		"80000001\r\n", "00000000000000001\r\nx\r\n0\r\n\r\n", "5;a\x01\r\nhello\r\n0\r\n\r\n",
		"5\r\nhello\r\n0\r\nHost : x\r\n\r\n", "5\r\nhello\r\n0\r\n folded\r\n\r\n", ";\r\n", "\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(in, sizeof(in), "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n%s", bad[i]);
		r = feeds(&plain, in, &S);
		CHECK(r.rc == -EPROTO && r.status == 400 && r.requests == 0);
		if (r.status != 400)
			fprintf(stderr, "  chunked body [%s] not refused: rc %d\n", bad[i], r.rc);
	}
	/* A chunk line of bounded length. */
	char *line = malloc(GW_HTTP_CHUNK_LINE_MAX + 200);
	int n = snprintf(line, 200, "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n1;");
	memset(line + n, 'e', GW_HTTP_CHUNK_LINE_MAX);
	line[n + GW_HTTP_CHUNK_LINE_MAX] = '\0';
	r = feeds(&plain, line, &S);
	CHECK(r.status == 400);
	free(line);
}

static void test_connection(void)
{
	/* Connection: close ends the stream: forwarded with it, then nothing more (counted as extra). */
	struct run r = feeds(&plain, "GET / HTTP/1.1\r\nHost: api.test\r\nConnection: keep-alive, Close\r\n\r\n"
				     "GET /after HTTP/1.1\r\nHost: evil.example\r\n\r\n", &S);
	CHECK(r.rc == 1 && r.requests == 1 && r.extra == strlen("GET /after HTTP/1.1\r\nHost: evil.example\r\n\r\n"));
	EXPECT_OUT(r, &S, "GET / HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: SECRET\r\nConnection: close\r\n\r\n");
	/* HTTP/1.0: one request, closed. */
	r = feeds(&plain, "GET / HTTP/1.0\r\nHost: api.test\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n", &S);
	CHECK(r.rc == 1 && r.requests == 1);
	EXPECT_OUT(r, &S, "GET / HTTP/1.0\r\nHost: api.test\r\nX-Api-Key: SECRET\r\nConnection: close\r\n\r\n");
	/* After a body too. */
	r = feeds(&plain, "POST / HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\nContent-Length: 2\r\n\r\nokGET", &S);
	CHECK(r.rc == 1 && r.requests == 1 && r.extra == 3);
	/* The upstream failing: its error, no status. */
	S.fail_with = -ECONNREFUSED;
	r = feeds(&plain, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", &S);
	CHECK(r.rc == -ECONNREFUSED && r.status == 0);
	S.fail_with = 0;
	/* Once stopped, stopped. */
	struct gw_http h;
	CHECK(gw_http_init(&h, &plain, &ops, &S) == 0);
	const char *bad = "GET / HTTP/1.1\r\nHost : x\r\n\r\n", *good = "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n";
	CHECK(gw_http_feed(&h, bad, strlen(bad)) == -EPROTO);
	CHECK(gw_http_feed(&h, good, strlen(good)) == -EPROTO);
	gw_http_finish(&h);
	gw_http_finish(&h);
}

int main(void)
{
	test_bypasses();
	test_targets();
	test_fields();
	test_bodies();
	test_connection();
	return check_summary("net-http");
}
