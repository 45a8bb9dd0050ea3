/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: requests for a port of a sandbox, proxied to it through the sandbox's agent
 * (space_sandbox_port_connect; never to any other address). A request is one when it names the sandbox
 * and a port other than envd's with E2b-Sandbox-Id and E2b-Sandbox-Port (what the E2B SDKs send with
 * E2B_SANDBOX_URL), or when its Host is "PORT-ID.DOMAIN" under --domain. It needs the sandbox's access
 * token (X-Access-Token or E2b-Traffic-Access-Token), unless the sandbox was created with
 * allowPublicTraffic; the token is not passed on.
 *
 * The request goes to the server inside as HTTP/1.0 with its body (a JSON-size body: at most 1 MiB), so
 * the answer is never chunked and ends with the connection; it streams back as it comes. A request with
 * Upgrade goes as HTTP/1.1; a 101 answer makes the connection a byte relay both ways (WebSocket).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_chunked.h"
#include "relay.h"
#include "serve.h"
#include "serve_e2b.h"

#define PORT_HEAD_MAX (64u << 10) /* the sandbox server's answer head */
#define E2B_ENVD_PORT 49983

#define FWD_IN_SIZE (16u << 10)   /* a kept connection's body bytes read past the head */

struct port_state {
	int fd;          /* to the sandbox's port, or to a host of the cluster */
	bool cluster;    /* the far side is a host of the cluster */
	char *head;      /* the answer's head buffer; head[body_off..head_len) are body bytes */
	size_t head_len, body_off;
	/* A kept connection (serve_fwd_keep): the answer is read by its framing, and the connection goes
	 * back once it was read whole (done). */
	struct serve_fwd_keep keep;
	char peer[64];
	bool http11;     /* the request was HTTP/1.1 without Connection: close (its answer may be chunked) */
	bool kept, chunked, done;
	long long left;  /* Content-Length bytes still to come, -1 unknown */
	struct http_chunked dec;
	char *in;        /* body bytes read past the head */
	size_t in_off, in_len;
};

/* "PORT-ID.DOMAIN[:P]" (case-insensitive domain) into id and port. */
static bool host_route(const char *host, const char *domain, char id[32], uint16_t *port)
{
	if (!host || !domain || !*domain)
		return false;
	char *end;
	unsigned long p = strtoul(host, &end, 10);
	if (end == host || *end != '-' || p == 0 || p > 65535 || host[0] == '0')
		return false;
	const char *s = end + 1, *dot = strchr(s, '.');
	if (!dot || dot == s || (size_t)(dot - s) >= 32)
		return false;
	size_t dl = strlen(domain);
	const char *rest = dot + 1;
	if (strncasecmp(rest, domain, dl) || (rest[dl] && rest[dl] != ':'))
		return false;
	memcpy(id, s, (size_t)(dot - s));
	id[dot - s] = '\0';
	*port = (uint16_t)p;
	return true;
}

static bool id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n >= 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
			return false;
	return true;
}

bool serve_port_sandbox(struct serve_req *r, char id[32])
{
	const char *hid = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	uint16_t port;
	if (hid && *hid && strlen(hid) < 32)
		snprintf(id, 32, "%s", hid);
	else if (!host_route(host, r->srv->domain, id, &port))
		return false;
	return id_ok(id);
}

int serve_port_match(struct serve_req *r)
{
	const char *hid = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *hport = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	char id[32];
	uint16_t port = 0;
	if (hid && hport) {
		char *end;
		unsigned long p = strtoul(hport, &end, 10);
		if (p == E2B_ENVD_PORT && !*end)
			return 0; /* envd: the server answers it itself */
		if (end == hport || *end || p == 0 || p > 65535 || strlen(hid) >= sizeof(id)) {
			serve_reply_error(r, 400, "invalid", "E2b-Sandbox-Port must be a port (1..65535)");
			return -1;
		}
		snprintf(id, sizeof(id), "%s", hid);
		port = (uint16_t)p;
	} else if (!host_route(host, r->srv->domain, id, &port)) {
		return 0;
	}
	if (!id_ok(id)) {
		serve_reply_error(r, 400, "invalid", "not a sandbox id");
		return -1;
	}
	const char *token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token");
	if (!token || !*token)
		token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Traffic-Access-Token");
	char owner[32] = "";
	int e = -EACCES;
	pthread_mutex_lock(&r->srv->store_lock);
	if (serve_public_get(r->srv->store, id)) {
		e = 0; /* created with allowPublicTraffic */
		snprintf(owner, sizeof(owner), "%s", id);
	} else if (token && *token) {
		e = serve_token_check(r->srv->store, token, owner);
	}
	pthread_mutex_unlock(&r->srv->store_lock);
	if (e < 0 && e != -EACCES) {
		serve_reply_error(r, 500, "internal", "check access token: %s", space_strerror(e));
		return -1;
	}
	if (e == -EACCES || strcmp(owner, id)) {
		serve_reply_error(r, token && *token ? 403 : 401, "unauthorized",
				  "port %u of sandbox %s needs the sandbox's access token (X-Access-Token)", port, id);
		return -1;
	}
	snprintf(r->envd_sandbox, sizeof(r->envd_sandbox), "%s", id);
	r->port = port;
	return 1;
}

/* --- the request to the sandbox ------------------------------------------------------------------------- */

struct head_buf {
	char *p;
	size_t len, cap;
	bool bad;
};

static void hb_add(struct head_buf *b, const char *s, size_t n)
{
	if (b->bad)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->bad = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void hb_str(struct head_buf *b, const char *s) { hb_add(b, s, strlen(s)); }

/* Percent-encodes what MHD decoded (path, query keys and values); keep: bytes left as they are. */
static void hb_enc(struct head_buf *b, const char *s, const char *keep)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c) ||
		    (c && strchr(keep, c))) {
			hb_add(b, (const char *)&c, 1);
		} else {
			char e[4];
			snprintf(e, sizeof(e), "%%%02X", c);
			hb_add(b, e, 3);
		}
	}
}

struct query_arg {
	struct head_buf *b;
	bool first;
};

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct query_arg *q = cls;
	(void)kind;
	hb_add(q->b, q->first ? "?" : "&", 1);
	q->first = false;
	hb_enc(q->b, key, "");
	if (value) {
		hb_add(q->b, "=", 1);
		hb_enc(q->b, value, "");
	}
	return MHD_YES;
}

/* Hop-by-hop headers, never passed on; with port, also the sandbox's own (its access token, the routing
 * headers). X-Space-Cluster-* are our hosts' to add: never passed on from a client or a sandbox; an answer
 * of a host of the cluster (cluster) keeps X-Space-Cluster-Host, which names it, and X-Space-Cluster-Pull
 * (a create whose template that host pulled first). */
static bool hop_header(const char *k, bool port, bool cluster)
{
	static const char *const drop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
					    "Transfer-Encoding", "Content-Length", "Upgrade", "TE", "Expect" };
	static const char *const drop_port[] = { "X-Access-Token", "E2b-Traffic-Access-Token", "E2b-Sandbox-Id",
						 "E2b-Sandbox-Port" };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (!strcasecmp(k, drop[i]))
			return true;
	for (size_t i = 0; port && i < sizeof(drop_port) / sizeof(drop_port[0]); i++)
		if (!strcasecmp(k, drop_port[i]))
			return true;
	if (cluster && (!strcasecmp(k, "X-Space-Cluster-Host") || !strcasecmp(k, "X-Space-Cluster-Pull")))
		return false;
	return !strncasecmp(k, "X-Space-Cluster-", 16);
}

struct header_arg {
	struct head_buf *b;
	bool port;
};

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct header_arg *h = cls;
	(void)kind;
	/* MHD keeps header bytes as sent; a CR or LF cannot be inside one (it ends the line). */
	if (hop_header(key, h->port, false) || !value)
		return MHD_YES;
	hb_str(h->b, key);
	hb_add(h->b, ": ", 2);
	hb_str(h->b, value);
	hb_add(h->b, "\r\n", 2);
	return MHD_YES;
}

int serve_fwd_send(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* --- the answer ----------------------------------------------------------------------------------------- */

/* Reads the answer's head: its status, and where its body starts. -EBADMSG when it is not HTTP. */
static int read_head(struct port_state *s, unsigned *ret_status)
{
	s->head = malloc(PORT_HEAD_MAX + 1);
	if (!s->head)
		return -ENOMEM;
	char *end = NULL;
	while (!end) {
		if (s->head_len >= PORT_HEAD_MAX)
			return -EMSGSIZE;
		ssize_t n = recv(s->fd, s->head + s->head_len, PORT_HEAD_MAX - s->head_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		s->head_len += (size_t)n;
		s->head[s->head_len] = '\0';
		end = memmem(s->head, s->head_len, "\r\n\r\n", 4);
	}
	s->body_off = (size_t)(end - s->head) + 4;
	unsigned st;
	if (sscanf(s->head, "HTTP/1.%*1[01] %3u", &st) != 1 || st < 100 || st > 599)
		return -EBADMSG;
	*ret_status = st;
	return 0;
}

/* Copies the answer's headers but the hop-by-hop ones to resp (NULL: none); *ret_len: Content-Length, or
 * -1. Without resp, also notes a chunked body (s->chunked) and an answer that ends its connection (a kept
 * one is not kept then). */
static void copy_headers(struct port_state *s, struct MHD_Response *resp, bool upgrade, long long *ret_len)
{
	*ret_len = -1;
	if (!resp && strncmp(s->head, "HTTP/1.1", 8))
		s->kept = false; /* HTTP/1.0: the connection ends with the answer */
	char *line = strstr(s->head, "\r\n");
	while (line && line + 2 < s->head + s->body_off - 2) {
		line += 2;
		char *eol = strstr(line, "\r\n");
		if (!eol)
			break;
		*eol = '\0';
		char *colon = strchr(line, ':');
		if (colon) {
			*colon = '\0';
			char *v = colon + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			if (!strcasecmp(line, "Content-Length")) {
				char *e;
				long long n = strtoll(v, &e, 10);
				if (e != v && !*e && n >= 0)
					*ret_len = n;
			} else if (!resp && !strcasecmp(line, "Transfer-Encoding")) {
				s->chunked = s->http11 && strcasestr(v, "chunked");
			} else if (!resp && !strcasecmp(line, "Connection") && strcasestr(v, "close")) {
				s->kept = false;
			} else if (resp && upgrade && !strcasecmp(line, "Upgrade")) {
				MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, v); /* MHD requires it on a 101 */
			} else if (resp && !hop_header(line, false, s->cluster) && strcasecmp(line, "Date")) {
				MHD_add_response_header(resp, line, v);
			}
			*colon = ':';
		}
		*eol = '\r';
		line = eol;
	}
}

/* The body bytes at hand (those read with the head first, then a read of the connection) at *p: how many,
 * 0 at the end of the connection, -errno. in_used() takes n of them. */
static ssize_t in_avail(struct port_state *s, const char **p)
{
	if (s->body_off < s->head_len) {
		*p = s->head + s->body_off;
		return (ssize_t)(s->head_len - s->body_off);
	}
	if (s->in_off == s->in_len) {
		if (!s->in && !(s->in = malloc(FWD_IN_SIZE)))
			return -ENOMEM;
		ssize_t n;
		while ((n = recv(s->fd, s->in, FWD_IN_SIZE, 0)) < 0 && errno == EINTR)
			;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		s->in_off = 0;
		s->in_len = (size_t)n;
	}
	*p = s->in + s->in_off;
	return (ssize_t)(s->in_len - s->in_off);
}

static void in_used(struct port_state *s, size_t n)
{
	if (s->body_off < s->head_len)
		s->body_off += n;
	else
		s->in_off += n;
}

/* A chunked body, decoded: the data of its chunks, then the end once its trailer is read. */
static ssize_t chunked_reader(struct port_state *s, char *buf, size_t max)
{
	for (;;) {
		if (s->dec.done) { /* (the last data may have come with the end: never read past it) */
			s->done = true;
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		const char *p;
		ssize_t n = in_avail(s, &p);
		if (n <= 0) /* the connection ended (or failed) before the body did */
			return MHD_CONTENT_READER_END_WITH_ERROR;
		size_t used, made;
		if (http_chunked_feed(&s->dec, p, (size_t)n, buf, max, &used, &made) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		in_used(s, used);
		if (made)
			return (ssize_t)made;
	}
}

static ssize_t body_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct port_state *s = cls;
	(void)pos;
	if (s->done)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (s->chunked)
		return chunked_reader(s, buf, max);
	if (s->left == 0) {
		s->done = true;
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	if (!s->kept && s->body_off == s->head_len) { /* read to the end of the connection: straight into buf */
		ssize_t n;
		while ((n = recv(s->fd, buf, max, 0)) < 0 && errno == EINTR)
			;
		if (n == 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
	}
	const char *p;
	ssize_t n = in_avail(s, &p);
	if (n == 0) /* the end of the connection ends a body of unknown length only */
		return s->left < 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	size_t k = (size_t)n < max ? (size_t)n : max;
	if (s->left > 0 && (unsigned long long)k > (unsigned long long)s->left)
		k = (size_t)s->left;
	memcpy(buf, p, k);
	in_used(s, k);
	if (s->left > 0 && !(s->left -= (long long)k))
		s->done = true;
	return (ssize_t)k;
}

/* A kept connection read whole goes back to its pool (no byte of another answer may be left in it);
 * any other is closed. */
static void body_free(void *cls)
{
	struct port_state *s = cls;
	bool back = s->kept && s->done && s->keep.give && s->fd >= 0 && s->body_off == s->head_len &&
		    s->in_off == s->in_len;
	if (back)
		s->keep.give(s->keep.arg, s->peer, s->fd);
	else if (s->fd >= 0)
		close(s->fd);
	free(s->in);
	free(s->head);
	free(s);
}

struct upgraded {
	int fd;
	struct MHD_UpgradeResponseHandle *urh;
	MHD_socket sock;
};

static void *upgraded_main(void *arg)
{
	struct upgraded *u = arg;
	/* The client's socket stays MHD's: the relay does not close it, MHD does. */
	int c = dup(u->sock);
	if (c >= 0)
		cli_relay(c, u->fd);
	else
		close(u->fd);
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(u);
	return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra_in,
		       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct port_state *s = cls;
	(void)conn;
	(void)req_cls;
	/* Bytes both sides sent past the heads go first: the client's to the sandbox, the sandbox's to it. */
	bool ok = serve_fwd_send(s->fd, extra_in, extra_in_size) == 0 &&
		  serve_fwd_send(sock, s->head + s->body_off, s->head_len - s->body_off) == 0;
	struct upgraded *u = ok ? malloc(sizeof(*u)) : NULL;
	pthread_t t;
	pthread_attr_t attr;
	if (u) {
		*u = (struct upgraded){ .fd = s->fd, .urh = urh, .sock = sock };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, upgraded_main, u) == 0)
			s->fd = -1;
		else
			free(u), u = NULL;
		pthread_attr_destroy(&attr);
	}
	if (!u)
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	body_free(s);
}

static enum MHD_Result port_error(struct serve_req *r, int e, uint16_t port, const char *id)
{
	if (e == -ENOENT)
		return serve_reply_error(r, 404, "not_found", "sandbox %s does not exist", id);
	if (e == -EBUSY)
		return serve_reply_error(r, 409, "paused", "sandbox %s is paused: resume it to reach port %u", id, port);
	if (e == -ESRCH) {
		/* Removed (its row stays, destroyed) is gone: 404 like one that never was. */
		enum space_sandbox_status st;
		if (space_sandbox_get_status(r->ctx, id, &st) == 0 && st == SPACE_SANDBOX_DESTROYED)
			return serve_reply_error(r, 404, "not_found", "sandbox %s was removed", id);
		return serve_reply_error(r, 502, "not_running", "sandbox %s is not running", id);
	}
	if (e == -ECONNREFUSED)
		return serve_reply_error(r, 502, "port_not_listening", "port %u of sandbox %s is not listening", port, id);
	const char *d = r->ctx ? space_ctx_last_error(r->ctx) : "";
	return serve_reply_error(r, 502, "bad_gateway", "port %u of sandbox %s: %s", port, id,
				 d && *d ? d : space_strerror(e));
}

char *serve_fwd_target(struct serve_req *r)
{
	struct head_buf b = { 0 };
	hb_enc(&b, r->path, "/!$&'()*+,;=:@");
	struct query_arg q = { &b, true };
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_query, &q);
	if (b.bad || !b.p) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

int serve_fwd_head(struct serve_req *r, int fd, const char *target, bool port, const char *extra,
		   long long content_length, bool keep_alive)
{
	const char *upgrade = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
	struct head_buf b = { 0 };
	hb_str(&b, r->method);
	hb_add(&b, " ", 1);
	hb_str(&b, target);
	hb_str(&b, upgrade || keep_alive ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
	struct header_arg h = { &b, port };
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_header, &h);
	if (upgrade) {
		hb_str(&b, "Connection: Upgrade\r\nUpgrade: ");
		hb_str(&b, upgrade);
		hb_add(&b, "\r\n", 2);
	} else if (!keep_alive) {
		hb_str(&b, "Connection: close\r\n");
	}
	if (extra)
		hb_str(&b, extra);
	char cl[48];
	if (content_length < 0 &&
	    (r->body_len || !strcmp(r->method, "POST") || !strcmp(r->method, "PUT") || !strcmp(r->method, "PATCH")))
		content_length = (long long)r->body_len;
	if (content_length >= 0) {
		snprintf(cl, sizeof(cl), "Content-Length: %lld\r\n", content_length);
		hb_str(&b, cl);
	}
	hb_add(&b, "\r\n", 2);
	int e = b.bad ? -ENOMEM : serve_fwd_send(fd, b.p, b.len);
	free(b.p);
	return e;
}

enum MHD_Result serve_fwd_answer(struct serve_req *r, int fd, bool cluster, const char *what,
				 const struct serve_fwd_keep *keep)
{
	struct port_state *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return serve_reply_error(r, 500, "internal", "out of memory");
	}
	s->fd = fd;
	s->cluster = cluster;
	s->left = -1;
	if (keep) {
		s->keep = *keep;
		s->kept = s->http11 = true;
		snprintf(s->peer, sizeof(s->peer), "%s", keep->peer);
	}
	unsigned status = 0;
	int e = read_head(s, &status);
	if (e < 0) {
		body_free(s);
		return serve_reply_error(r, 502, "bad_gateway", "%s: %s", what,
					 e == -EBADMSG ? "the answer is not HTTP" :
					 e == -EMSGSIZE ? "the answer's head is over 64 KiB" : space_strerror(e));
	}
	const char *upgrade = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
	struct MHD_Response *resp;
	long long len;
	if (status == 101 && upgrade) {
		s->kept = false;
		resp = MHD_create_response_for_upgrade(on_upgrade, s);
		if (resp)
			copy_headers(s, resp, true, &len);
	} else {
		/* A known size gives the client a Content-Length, else chunks. */
		copy_headers(s, NULL, false, &len);
		if (s->chunked) /* chunks outweigh a Content-Length (RFC 9112 6.3) */
			len = -1;
		/* A kept connection's answer ends by its framing: its length, its last chunk, or no body at all
		 * (HEAD, 1xx, 204, 304); without either it ends with the connection, which is then not kept. */
		bool bodiless = !strcmp(r->method, "HEAD") || status < 200 || status == 204 || status == 304;
		if (s->kept && bodiless) {
			s->chunked = false;
			s->left = 0;
			s->done = true;
		} else if (s->kept && !s->chunked) {
			s->left = len;
			s->kept = len >= 0;
		}
		resp = MHD_create_response_from_callback(len >= 0 ? (uint64_t)len : MHD_SIZE_UNKNOWN, 32 << 10,
							 body_reader, s, body_free);
		if (resp)
			copy_headers(s, resp, false, &len);
	}
	if (!resp) {
		body_free(s);
		return MHD_NO;
	}
	enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	r->answered = true;
	r->status = status;
	return ret;
}

enum MHD_Result serve_port_proxy(struct serve_req *r)
{
	const char *id = r->envd_sandbox;
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	int e = space_sandbox_open(ctx, id, &r->sb);
	if (e < 0)
		return port_error(r, e, r->port, id);
	int fd = -1;
	e = space_sandbox_port_connect(r->sb, r->port, &fd);
	if (e < 0)
		return port_error(r, e, r->port, id);
	_cleanup_free_ char *target = serve_fwd_target(r);
	e = target ? serve_fwd_head(r, fd, target, true, NULL, -1, false) : -ENOMEM;
	if (e == 0 && r->body_len)
		e = serve_fwd_send(fd, r->body, r->body_len);
	char what[96];
	snprintf(what, sizeof(what), "port %u of sandbox %s", r->port, id);
	if (e < 0) {
		close(fd);
		return serve_reply_error(r, 502, "bad_gateway", "%s: %s", what, space_strerror(e));
	}
	return serve_fwd_answer(r, fd, false, what, NULL);
}
