/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's HTTP/1.1 request checker (contract in gw_http.h). Strict on purpose: anything two HTTP
 * parsers could read differently (a space before a colon, a folded line, a bare CR or LF, two lengths, a
 * transfer coding other than chunked) is refused rather than interpreted, and what goes upstream is
 * re-serialized here, so the upstream parses the checker's framing, not the sandbox's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/gw_http.h"
#include "util/escape.h"

enum {
	ST_HEAD,        /* gathering a request head */
	ST_BODY,        /* Content-Length body bytes */
	ST_CHUNK_LINE,  /* gathering a chunk-size line */
	ST_CHUNK_DATA,
	ST_CHUNK_CR,    /* the CRLF after chunk data */
	ST_CHUNK_LF,
	ST_TRAILER,     /* gathering the trailer section after the last chunk */
	ST_DONE,        /* the connection's last request is complete */
	ST_STOPPED,     /* refused, or forwarding failed */
};

#define BLANK_LINES_MAX 16 /* empty lines tolerated before a request line (after a body, some clients add one) */
#define QUOTE_MAX 48       /* bytes of sandbox-made text quoted in a reason */

struct field {
	const char *name, *value;
	size_t nlen, vlen;
};

/* Kept across the chunks of one body: the CRLF that ends a chunk's data is sent with the next size line. */
#define PENDING_CRLF (1u << 0)

static int stop(struct gw_http *h, int err)
{
	h->state = ST_STOPPED;
	h->err = err;
	return err;
}

static int refuse(struct gw_http *h, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(struct gw_http *h, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->why, sizeof(h->why), fmt, ap);
	va_end(ap);
	h->status = status;
	return stop(h, -EPROTO);
}

/* Sandbox-made text for a reason: escaped (no control byte reaches a log or a terminal) and capped. */
static const char *quote(char *out, size_t outlen, const char *s, size_t n)
{
	size_t take = n > QUOTE_MAX ? QUOTE_MAX : n;
	util_escape_text(out, outlen, s, take, 0);
	if (take < n && strlen(out) + 4 <= outlen)
		strcat(out, "...");
	return out;
}
#define QUOTE_BUF (QUOTE_MAX * 4 + 4)

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c);
}

static bool is_token(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_tchar((unsigned char)s[i]))
			return false;
	return true;
}

/* A field value's bytes: HTAB, visible ASCII, space, and obs-text (0x80-0xff); no other control byte. */
static bool value_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return false;
	}
	return true;
}

static bool name_is(const struct field *f, const char *name)
{
	return f->nlen == strlen(name) && !strncasecmp(f->name, name, f->nlen);
}

/* A header the sandbox sends under this name is removed as a possible credential (any case):
 * Proxy-Authorization always; with credential rules also Authorization and every injected name. */
static bool is_credential(const struct gw_http_conf *conf, const char *name, size_t len)
{
	struct field f = { .name = name, .nlen = len };
	if (name_is(&f, "Proxy-Authorization"))
		return true;
	if (!conf->credentials)
		return false;
	if (name_is(&f, "Authorization"))
		return true;
	for (size_t i = 0; i < conf->n_inject; i++)
		if (name_is(&f, conf->inject[i].name))
			return true;
	return false;
}

const char *gw_http_reason(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	default: return "Error";
	}
}

/* "host[:port]" naming exactly the connection's host and port (no port: the scheme's default). */
static bool authority_ok(const struct gw_http_conf *c, const char *s, size_t n)
{
	const char *colon = memchr(s, ':', n);
	size_t hl = colon ? (size_t)(colon - s) : n;
	if (hl != strlen(c->name) || strncasecmp(s, c->name, hl))
		return false;
	unsigned port = c->tls ? 443 : 80;
	if (colon) {
		const char *p = colon + 1;
		size_t pl = n - hl - 1;
		if (pl == 0 || pl > 5)
			return false;
		port = 0;
		for (size_t i = 0; i < pl; i++) {
			if (p[i] < '0' || p[i] > '9')
				return false;
			port = port * 10 + (unsigned)(p[i] - '0');
		}
	}
	return port == c->port;
}

/* ---- output ----------------------------------------------------------------------------------------- */

struct out {
	char *p;
	size_t n, cap;
	bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->full || n > o->cap - o->n) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_field(struct out *o, const char *name, size_t nlen, const char *value, size_t vlen)
{
	put(o, name, nlen);
	put(o, ": ", 2);
	put(o, value, vlen);
	put(o, "\r\n", 2);
}

static int forward(struct gw_http *h, const char *buf, size_t n)
{
	int r = h->ops->forward(h->userdata, buf, n);
	return r < 0 ? stop(h, r) : 0;
}

/* ---- request heads ---------------------------------------------------------------------------------- */

/* Splits the field lines of buf[0..len) (each ending CRLF, the last one followed by the empty line) and
 * checks their syntax. Returns the count, or a refusal. */
static int split_fields(struct gw_http *h, char *p, const char *end, struct field *f, const char *what)
{
	char q[QUOTE_BUF];
	int n = 0;
	while (p < end) {
		char *eol = memchr(p, '\r', (size_t)(end - p));
		if (!eol || eol + 1 >= end || eol[1] != '\n')
			return refuse(h, 400, "http: a bare CR in the %s", what);
		if (eol == p)
			break; /* the empty line */
		if (*p == ' ' || *p == '\t')
			return refuse(h, 400, "http: a folded %s line (obs-fold continuation)", what);
		if (n == GW_HTTP_FIELDS_MAX)
			return refuse(h, 431, "http: more than %d fields in the %s", GW_HTTP_FIELDS_MAX, what);
		char *colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || !is_token(p, (size_t)(colon - p)))
			return refuse(h, 400, "http: malformed field name in the %s: '%s'", what,
				      quote(q, sizeof(q), p, colon ? (size_t)(colon - p) : (size_t)(eol - p)));
		const char *v = colon + 1, *ve = eol;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (!value_ok(v, (size_t)(ve - v)))
			return refuse(h, 400, "http: a control byte in the value of %s field '%s'", what,
				      quote(q, sizeof(q), p, (size_t)(colon - p)));
		f[n++] = (struct field){ p, v, (size_t)(colon - p), (size_t)(ve - v) };
		p = eol + 2;
	}
	return n;
}

/* The request target, as the origin-form to send (pre + rest), or a refusal. */
static int check_target(struct gw_http *h, const char *method, size_t mlen, const char *t, size_t tl,
			const char **pre, const char **rest, size_t *rest_len)
{
	char q[QUOTE_BUF];
	bool options = mlen == 7 && !memcmp(method, "OPTIONS", 7);
	*pre = "";
	*rest = t;
	*rest_len = tl;
	if (t[0] == '/')
		return 0;
	if (tl == 1 && t[0] == '*') {
		if (!options)
			return refuse(h, 400, "http: the target '*' is only for OPTIONS");
		return 0;
	}
	size_t sl = 0;
	if (tl >= 7 && !strncasecmp(t, "http://", 7))
		sl = 7;
	else if (tl >= 8 && !strncasecmp(t, "https://", 8))
		sl = 8;
	if (!sl)
		return refuse(h, 400, "http: request target '%s' is neither a path, an http(s) URL nor '*'",
			      quote(q, sizeof(q), t, tl));
	if ((sl == 8) != h->conf->tls)
		return refuse(h, 403, "http target '%s': its scheme is not this connection's (%s)",
			      quote(q, sizeof(q), t, tl), h->conf->tls ? "https" : "http");
	const char *a = t + sl, *end = t + tl, *ae = a;
	while (ae < end && *ae != '/' && *ae != '?')
		ae++;
	if (memchr(a, '@', (size_t)(ae - a)))
		return refuse(h, 403, "http target '%s': user information in the URL", quote(q, sizeof(q), t, tl));
	if (!authority_ok(h->conf, a, (size_t)(ae - a)))
		return refuse(h, 403, "http target '%s' is not %s:%u (the name this connection resolved)",
			      quote(q, sizeof(q), a, (size_t)(ae - a)), h->conf->name, h->conf->port);
	*rest = ae;
	*rest_len = (size_t)(end - ae);
	if (ae == end) {
		*rest = options ? "*" : "/";
		*rest_len = 1;
	} else if (*ae == '?') {
		*pre = "/";
	}
	return 0;
}

/* Checks a complete head (buf ends with the empty line) and forwards its rewrite. */
static int process_head(struct gw_http *h)
{
	const struct gw_http_conf *c = h->conf;
	char q[QUOTE_BUF];
	char *buf = h->buf, *end = h->buf + h->len - 2; /* end: the empty line's CRLF */
	if (memchr(buf, '\0', h->len))
		return refuse(h, 400, "http: a NUL byte in the request head");
	/* The request line: method SP target SP version, exactly. */
	char *eol = memchr(buf, '\r', (size_t)(end - buf));
	if (!eol || eol[1] != '\n')
		return refuse(h, 400, "http: a bare CR in the request line");
	char *sp1 = memchr(buf, ' ', (size_t)(eol - buf)), *sp2 = NULL;
	for (char *s = eol; s > buf && !sp2; s--)
		if (s[-1] == ' ')
			sp2 = s - 1;
	if (!sp1 || sp2 == sp1 || !is_token(buf, (size_t)(sp1 - buf)) || sp1 - buf > 32)
		return refuse(h, 400, "http: not an HTTP/1.x request line: '%s'", quote(q, sizeof(q), buf, (size_t)(eol - buf)));
	size_t vl = (size_t)(eol - sp2 - 1);
	bool v11 = vl == 8 && !memcmp(sp2 + 1, "HTTP/1.1", 8), v10 = vl == 8 && !memcmp(sp2 + 1, "HTTP/1.0", 8);
	if (!v11 && !v10)
		return refuse(h, 400, "http: not an HTTP/1.0 or 1.1 request: '%s'", quote(q, sizeof(q), sp2 + 1, vl));
	const char *target = sp1 + 1;
	size_t tl = (size_t)(sp2 - target);
	if (tl == 0)
		return refuse(h, 400, "http: an empty request target");
	for (size_t i = 0; i < tl; i++)
		if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f)
			return refuse(h, 400, "http: a space or a control or non-ASCII byte in the request target '%s'",
				      quote(q, sizeof(q), target, tl));

	struct field f[GW_HTTP_FIELDS_MAX];
	int nf = split_fields(h, eol + 2, end + 2, f, "request head");
	if (nf < 0)
		return nf;
	const struct field *host = NULL, *clen = NULL, *te = NULL;
	bool last = v10;
	for (int i = 0; i < nf; i++) {
		if (name_is(&f[i], "Host")) {
			if (host)
				return refuse(h, 400, "http: more than one Host header");
			host = &f[i];
		} else if (name_is(&f[i], "Content-Length")) {
			if (clen)
				return refuse(h, 400, "http: more than one Content-Length header");
			clen = &f[i];
		} else if (name_is(&f[i], "Transfer-Encoding")) {
			if (te)
				return refuse(h, 400, "http: more than one Transfer-Encoding header");
			te = &f[i];
		} else if (name_is(&f[i], "Connection")) {
			/* A comma-separated token list; only "close" matters (the rest is hop-by-hop: dropped). */
			const char *v = f[i].value, *ve = v + f[i].vlen;
			while (v < ve) {
				const char *e = memchr(v, ',', (size_t)(ve - v));
				const char *tok_end = e ? e : ve, *b = v;
				while (b < tok_end && (*b == ' ' || *b == '\t'))
					b++;
				while (tok_end > b && (tok_end[-1] == ' ' || tok_end[-1] == '\t'))
					tok_end--;
				if (tok_end - b == 5 && !strncasecmp(b, "close", 5))
					last = true;
				v = e ? e + 1 : ve;
			}
		}
	}
	if (!host)
		return refuse(h, 400, "http: no Host header");
	if (!authority_ok(c, host->value, host->vlen))
		return refuse(h, 403, "http Host '%s' is not %s (the name this connection resolved)",
			      quote(q, sizeof(q), host->value, host->vlen), c->name);
	uint64_t length = 0;
	if (clen) {
		if (clen->vlen == 0 || clen->vlen > 18)
			return refuse(h, 400, "http: invalid Content-Length '%s'", quote(q, sizeof(q), clen->value, clen->vlen));
		for (size_t i = 0; i < clen->vlen; i++) {
			if (clen->value[i] < '0' || clen->value[i] > '9')
				return refuse(h, 400, "http: invalid Content-Length '%s'",
					      quote(q, sizeof(q), clen->value, clen->vlen));
			length = length * 10 + (uint64_t)(clen->value[i] - '0');
		}
	}
	if (te) {
		if (te->vlen != 7 || strncasecmp(te->value, "chunked", 7))
			return refuse(h, 501, "http: Transfer-Encoding '%s' is not supported (only chunked)",
				      quote(q, sizeof(q), te->value, te->vlen));
		if (clen)
			return refuse(h, 400, "http: both Content-Length and Transfer-Encoding");
		if (v10)
			return refuse(h, 400, "http: Transfer-Encoding in an HTTP/1.0 request");
	}
	size_t mlen = (size_t)(sp1 - buf);
	if (mlen == 7 && !memcmp(buf, "CONNECT", 7))
		return refuse(h, 403, "http: CONNECT is not allowed (the gateway is not a forward proxy)");
	const char *pre, *rest;
	size_t rest_len;
	int r = check_target(h, buf, mlen, target, tl, &pre, &rest, &rest_len);
	if (r < 0)
		return r;

	/* The rewrite: request line, the fields kept, framing, the rules' headers, Connection. */
	struct out o = { h->out, 0, h->out_cap, false };
	put(&o, buf, mlen + 1);
	puts_(&o, pre);
	put(&o, rest, rest_len);
	put(&o, sp2, vl + 1);
	put(&o, "\r\n", 2);
	static const char *const hop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "Upgrade", "TE",
					   "Trailer", "Content-Length", "Transfer-Encoding" };
	for (int i = 0; i < nf; i++) {
		bool drop = false;
		for (size_t k = 0; k < sizeof(hop) / sizeof(hop[0]) && !drop; k++)
			drop = name_is(&f[i], hop[k]);
		if (!drop && is_credential(c, f[i].name, f[i].nlen)) {
			drop = true;
			if (h->ops->stripped) {
				char name[65];
				snprintf(name, sizeof(name), "%.*s", (int)(f[i].nlen < 64 ? f[i].nlen : 64), f[i].name);
				h->ops->stripped(h->userdata, name);
			}
		}
		if (!drop)
			put_field(&o, f[i].name, f[i].nlen, f[i].value, f[i].vlen);
	}
	if (clen) {
		char num[32];
		int k = snprintf(num, sizeof(num), "%llu", (unsigned long long)length);
		put_field(&o, "Content-Length", 14, num, (size_t)k);
	}
	if (te)
		puts_(&o, "Transfer-Encoding: chunked\r\n");
	for (size_t i = 0; i < c->n_inject; i++)
		put_field(&o, c->inject[i].name, strlen(c->inject[i].name), c->inject[i].value, strlen(c->inject[i].value));
	if (last)
		puts_(&o, "Connection: close\r\n");
	put(&o, "\r\n", 2);
	if (o.full) {
		explicit_bzero(o.p, o.n);
		return refuse(h, 431, "http: request head too large");
	}
	r = forward(h, o.p, o.n);
	explicit_bzero(o.p, o.n);
	if (r < 0)
		return r;
	h->last = last;
	h->len = 0;
	h->flags = 0;
	if (te) {
		h->state = ST_CHUNK_LINE;
	} else if (length > 0) {
		h->state = ST_BODY;
		h->left = length;
	} else {
		return 1;
	}
	return 0;
}

/* ---- chunked bodies --------------------------------------------------------------------------------- */

static int process_chunk_line(struct gw_http *h)
{
	char q[QUOTE_BUF];
	const char *p = h->buf, *end = h->buf + h->len - 2;
	if (memchr(p, '\r', (size_t)(end - p)) || memchr(p, '\0', (size_t)(end - p)))
		return refuse(h, 400, "http: a bare CR or NUL in a chunk-size line");
	uint64_t size = 0;
	size_t digits = 0;
	for (; p < end; p++, digits++) {
		int d = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
			: (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10 : -1;
		if (d < 0)
			break;
		if (digits == 16)
			return refuse(h, 400, "http: a chunk size of more than 16 digits");
		size = size << 4 | (uint64_t)d;
	}
	/* Chunk extensions are dropped, but must be well-formed enough to end where the size line ends. */
	const char *x = p;
	while (x < end && (*x == ' ' || *x == '\t'))
		x++;
	if (digits == 0 || (p < end && (x == end || *x != ';')) || !value_ok(x, (size_t)(end - x)))
		return refuse(h, 400, "http: malformed chunk-size line '%s'", quote(q, sizeof(q), h->buf, h->len - 2));
	if (size > GW_HTTP_CHUNK_MAX)
		return refuse(h, 400, "http: a chunk of more than %llu bytes", (unsigned long long)GW_HTTP_CHUNK_MAX);
	h->len = 0;
	if (size == 0) {
		h->state = ST_TRAILER;
		return 0;
	}
	char line[32];
	int k = snprintf(line, sizeof(line), "%s%llx\r\n", (h->flags & PENDING_CRLF) ? "\r\n" : "",
			 (unsigned long long)size);
	h->flags &= ~PENDING_CRLF;
	h->state = ST_CHUNK_DATA;
	h->left = size;
	return forward(h, line, (size_t)k);
}

/* The trailer section is checked like a head, then dropped: a trailer field must not smuggle a header
 * (an Authorization, say) past the checks. */
static int process_trailer(struct gw_http *h)
{
	struct field f[GW_HTTP_FIELDS_MAX];
	int nf = split_fields(h, h->buf, h->buf + h->len, f, "chunked trailer");
	if (nf < 0)
		return nf; /* a NUL is refused there too: not a token, not a value byte */
	const char *fin = (h->flags & PENDING_CRLF) ? "\r\n0\r\n\r\n" : "0\r\n\r\n";
	h->flags &= ~PENDING_CRLF;
	h->len = 0;
	int r = forward(h, fin, strlen(fin));
	return r < 0 ? r : 1;
}

/* ---- the stream ------------------------------------------------------------------------------------- */

/*
 * Gathers lines into h->buf until an empty line ends the head (head: empty lines before the request line
 * are skipped) or the trailer section. Returns 1 when complete, 0 when all of in was taken, or a refusal.
 */
static int gather(struct gw_http *h, const char *in, size_t n, size_t *used, bool head)
{
	const char *what = head ? "request head" : "chunked trailer";
	for (size_t i = 0; i < n; i++) {
		if (h->len == GW_HTTP_HEAD_MAX)
			return refuse(h, 431, "http: %s larger than %d bytes", what, GW_HTTP_HEAD_MAX);
		char ch = in[i];
		h->buf[h->len++] = ch;
		if (ch != '\n')
			continue;
		if (h->len < 2 || h->buf[h->len - 2] != '\r')
			return refuse(h, 400, "http: a bare LF in the %s", what);
		bool done = h->len >= 4 && !memcmp(h->buf + h->len - 4, "\r\n\r\n", 4);
		if (h->len == 2) {
			if (!head) {
				done = true;
			} else {
				h->len = 0;
				if (++h->blank > BLANK_LINES_MAX)
					return refuse(h, 400, "http: more than %d empty lines before a request", BLANK_LINES_MAX);
			}
		}
		if (done) {
			*used = i + 1;
			return 1;
		}
	}
	*used = n;
	return 0;
}

static int gather_line(struct gw_http *h, const char *in, size_t n, size_t *used)
{
	for (size_t i = 0; i < n; i++) {
		if (h->len == GW_HTTP_CHUNK_LINE_MAX)
			return refuse(h, 400, "http: a chunk-size line longer than %d bytes", GW_HTTP_CHUNK_LINE_MAX);
		h->buf[h->len++] = in[i];
		if (in[i] != '\n')
			continue;
		if (h->len < 2 || h->buf[h->len - 2] != '\r')
			return refuse(h, 400, "http: a bare LF in a chunk-size line");
		*used = i + 1;
		return 1;
	}
	*used = n;
	return 0;
}

/* One request forwarded completely: the next one starts here, unless it was the last. */
static int request_done(struct gw_http *h)
{
	h->requests++;
	h->len = 0;
	h->blank = 0;
	h->state = h->last ? ST_DONE : ST_HEAD;
	h->last = false;
	return 0;
}

int gw_http_feed(struct gw_http *h, const char *in, size_t n)
{
	size_t i = 0;
	while (i < n && h->state != ST_STOPPED && h->state != ST_DONE) {
		size_t used = 0, k;
		int r = 0;
		switch (h->state) {
		case ST_HEAD:
			r = gather(h, in + i, n - i, &used, true);
			i += used;
			if (r == 1) {
				r = process_head(h);
				if (r == 1)
					r = request_done(h);
			}
			break;
		case ST_BODY:
		case ST_CHUNK_DATA:
			k = n - i < h->left ? n - i : (size_t)h->left;
			r = forward(h, in + i, k);
			i += k;
			h->left -= k;
			if (r == 0 && h->left == 0) {
				if (h->state == ST_BODY) {
					r = request_done(h);
				} else {
					h->state = ST_CHUNK_CR;
					h->flags |= PENDING_CRLF;
				}
			}
			break;
		case ST_CHUNK_CR:
		case ST_CHUNK_LF:
			if (in[i++] != (h->state == ST_CHUNK_CR ? '\r' : '\n'))
				r = refuse(h, 400, "http: chunk data not followed by CRLF");
			else
				h->state = h->state == ST_CHUNK_CR ? ST_CHUNK_LF : ST_CHUNK_LINE;
			break;
		case ST_CHUNK_LINE:
			r = gather_line(h, in + i, n - i, &used);
			i += used;
			if (r == 1)
				r = process_chunk_line(h);
			break;
		case ST_TRAILER:
			r = gather(h, in + i, n - i, &used, false);
			i += used;
			if (r == 1) {
				r = process_trailer(h);
				if (r == 1)
					r = request_done(h);
			}
			break;
		}
		if (r < 0)
			return r;
	}
	if (h->state == ST_STOPPED)
		return h->err;
	if (h->state == ST_DONE) {
		h->extra += n - i;
		return 1;
	}
	return 0;
}

int gw_http_init(struct gw_http *h, const struct gw_http_conf *conf, const struct gw_http_ops *ops, void *userdata)
{
	*h = (struct gw_http){ .conf = conf, .ops = ops, .userdata = userdata, .state = ST_HEAD };
	/* The rewrite never outgrows the head it came from by more than its own lines and the rules'. */
	h->out_cap = GW_HTTP_HEAD_MAX + 256;
	for (size_t i = 0; i < conf->n_inject; i++)
		h->out_cap += strlen(conf->inject[i].name) + strlen(conf->inject[i].value) + 4;
	h->buf = malloc(GW_HTTP_HEAD_MAX);
	h->out = malloc(h->out_cap);
	if (!h->buf || !h->out) {
		gw_http_finish(h);
		return -ENOMEM;
	}
	return 0;
}

void gw_http_finish(struct gw_http *h)
{
	if (h->buf)
		explicit_bzero(h->buf, GW_HTTP_HEAD_MAX);
	if (h->out)
		explicit_bzero(h->out, h->out_cap);
	free(h->buf);
	free(h->out);
	h->buf = h->out = NULL;
}
