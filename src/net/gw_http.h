/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's HTTP/1.1 request checker (docs/network.md, "HTTP"): a pure, incremental parser of the byte
 * stream a sandbox sends on one connection, with no I/O of its own, so it can be tested and fuzzed alone.
 *
 * Every request on the connection is parsed and checked, and what reaches the upstream is the checker's
 * own rewrite of it, never the sandbox's bytes as framed by the sandbox:
 *  - the request line is rebuilt; its target must be origin-form ("/path"), absolute-form naming exactly
 *    the connection's host, port and scheme (forwarded as origin-form), or "*" for OPTIONS; CONNECT and
 *    any other form are refused;
 *  - header names must be tokens followed directly by ':' (no "Host :", no obs-fold continuation lines),
 *    values must hold no control byte but HTAB; exactly one Host, naming the connection's host and port;
 *  - the body is framed by Content-Length (one, decimal) or Transfer-Encoding: chunked (nothing else, never
 *    both); chunks are re-framed by the checker, chunk extensions and trailer fields are dropped, and the
 *    next request starts exactly after the body;
 *  - hop-by-hop headers are dropped; when the host has credential rules, the sandbox's Authorization and
 *    every header a rule injects are removed from each request before the rules' headers are added;
 *    Proxy-Authorization is always removed;
 *  - heads (and trailer sections) are at most GW_HTTP_HEAD_MAX bytes and GW_HTTP_FIELDS_MAX fields.
 * A request the sandbox marks as its last (Connection: close, or HTTP/1.0) ends the stream: it is forwarded
 * with "Connection: close" and nothing after it is.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_HTTP_HEAD_MAX 32768           /* bytes in one request head or one trailer section */
#define GW_HTTP_FIELDS_MAX 100           /* header fields in one head or trailer section */
#define GW_HTTP_CHUNK_MAX (1ull << 31)   /* bytes in one chunk of a chunked body */
#define GW_HTTP_CHUNK_LINE_MAX 1024      /* a chunk-size line, extensions included */
#define GW_HTTP_WHY_MAX 320

/* A header the checker adds to every request (its name is also removed from what the sandbox sent). */
struct gw_http_header {
	const char *name;
	const char *value;   /* may hold a secret: the checker wipes its copies after forwarding them */
};

struct gw_http_conf {
	const char *name;    /* the host the connection's address stands for (lowercase) */
	uint16_t port;       /* the connection's destination port */
	bool tls;            /* the connection was TLS (terminated by the gateway): the scheme is https */
	bool credentials;    /* the host has credential rules: the sandbox's Authorization is removed */
	const struct gw_http_header *inject;
	size_t n_inject;
};

struct gw_http_ops {
	/* Bytes for the upstream, in order. A negative return stops the checker; gw_http_feed returns it. */
	int (*forward)(void *userdata, const char *buf, size_t len);
	/* A header the sandbox sent that could carry a credential was removed (name: a token). May be NULL. */
	void (*stripped)(void *userdata, const char *name);
};

struct gw_http {
	const struct gw_http_conf *conf;
	const struct gw_http_ops *ops;
	void *userdata;
	int state;
	char *buf;           /* the head, trailer section or chunk-size line being gathered */
	size_t len;
	char *out;           /* the rewritten head (holds injected values while it is built) */
	size_t out_cap;
	uint64_t left;       /* body or chunk bytes still to come */
	unsigned blank;      /* empty lines skipped before the current request line */
	bool last;           /* the current request is the connection's last */
	unsigned requests;   /* requests forwarded completely */
	uint64_t extra;      /* bytes the sandbox sent after its last request (not forwarded) */
	unsigned flags;
	int err;             /* once stopped: what every call returns */
	int status;          /* set when a request was refused: 400, 403, 431, 501 */
	char why[GW_HTTP_WHY_MAX]; /* why, with sandbox-made text escaped and capped */
};

/* Sets h up for one connection (conf and ops must outlive it). 0, or -ENOMEM. */
int gw_http_init(struct gw_http *h, const struct gw_http_conf *conf, const struct gw_http_ops *ops, void *userdata);

/* Frees h's buffers (wiped first). Fine on a zeroed or already finished h. */
void gw_http_finish(struct gw_http *h);

/*
 * Feeds n bytes the sandbox sent. Forwards what is complete and checked through ops->forward.
 * Returns 0 to go on; 1 when the connection's last request is complete (bytes after it, now or later,
 * are counted in h->extra and dropped); a negative errno when the stream stops: if h->status is set a
 * request was refused (h->why says why; the caller answers with that status), else forward failed.
 * Once stopped, every later call returns the same.
 */
int gw_http_feed(struct gw_http *h, const char *in, size_t n);

/* The reason phrase of a status the checker or its caller uses ("Forbidden" for 403). */
const char *gw_http_reason(int status);
