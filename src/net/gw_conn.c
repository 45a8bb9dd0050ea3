/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One guest TCP connection through the gateway. The destination address must be one the gateway's DNS
 * gave out (it stands for exactly one name), the name and port must be allowed, the TLS SNI must be that
 * name. Then: TLS relayed unopened only for hosts the policy lists under "passthrough" (and that have no
 * credential rule); any other TLS is terminated with a gateway-minted certificate and re-originated with
 * full verification. Plain and terminated HTTP go through the request checker (gw_http.c): every request
 * on the connection is parsed, checked against the name and port, stripped of the sandbox's credentials
 * and given the rules' headers. Everything read from the guest is hostile: lengths are bounded, a request
 * that does not parse is refused.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "net/gw.h"
#include "net/gw_http.h"
#include "net/net.h"
#include "util/cleanup.h"
#include "util/util.h"

#define HANDSHAKE_TIMEOUT_MS 10000
#define IO_TIMEOUT_S 60
#define IDLE_TIMEOUT_MS 300000
#define HELLO_MAX (16384 + 5)

struct stream {
	int fd;
	SSL *ssl;
};

static ssize_t s_read(struct stream *s, void *buf, size_t n)
{
	if (!s->ssl)
		return read(s->fd, buf, n);
	int r = SSL_read(s->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
	return r > 0 ? r : (SSL_get_error(s->ssl, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1);
}

static int s_write_all(struct stream *s, const void *buf, size_t n)
{
	if (!s->ssl)
		return util_write_all(s->fd, buf, n);
	const char *p = buf;
	while (n > 0) {
		int w = SSL_write(s->ssl, p, (int)(n > 65536 ? 65536 : n));
		if (w <= 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void s_close(struct stream *s)
{
	if (s->ssl) {
		SSL_shutdown(s->ssl);
		SSL_free(s->ssl);
	}
	if (s->fd >= 0)
		close(s->fd);
	s->ssl = NULL;
	s->fd = -1;
}

static void set_timeouts(int fd)
{
	struct timeval tv = { IO_TIMEOUT_S, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- upstream --------------------------------------------------------------------------------------- */

static bool addr_local(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
		return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 24) == 0 || (a >> 16) == 0xa9fe ||
		       (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 || (a & GW_SYNTH_MASK) == GW_SYNTH_BASE ||
		       (a >> 28) >= 0xe;
	}
	const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) || IN6_IS_ADDR_LINKLOCAL(a6) || IN6_IS_ADDR_V4MAPPED(a6) ||
	       IN6_IS_ADDR_UNSPECIFIED(a6) || (a6->s6_addr[0] & 0xfe) == 0xfc;
}

static int connect_timeout(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) < 0 && errno != EINPROGRESS) {
		int r = -errno;
		close(fd);
		return r;
	}
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t el = sizeof(err);
	if (poll(&p, 1, HANDSHAKE_TIMEOUT_MS) <= 0)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	set_timeouts(fd);
	return fd;
}

/* Connects to name:port as the gateway resolves it: the policy's static map first (which may point at
 * loopback: that is the operator's choice), else the host's resolver, whose local answers are refused so
 * a name cannot be used to reach the host's own services. */
static int upstream_connect(struct gw *g, const char *name, uint16_t port, char *why, size_t wl)
{
	const char *fixed = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g->resolve, name));
	if (fixed) {
		char ip[64];
		snprintf(ip, sizeof(ip), "%s", fixed);
		char *colon = strchr(ip, ':');
		uint64_t p = port;
		if (colon) {
			*colon = '\0';
			if (util_parse_uint(colon + 1, 1, 65535, &p) < 0)
				p = port;
		}
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
		if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
			snprintf(why, wl, "resolve entry '%s' is not IPv4[:port]", fixed);
			return -EINVAL;
		}
		int fd = connect_timeout((struct sockaddr *)&sa, sizeof(sa));
		if (fd < 0)
			snprintf(why, wl, "connect %s: %s", fixed, strerror(-fd));
		return fd;
	}
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int e = getaddrinfo(name, ps, &hints, &res);
	if (e) {
		snprintf(why, wl, "resolve %s: %s", name, gai_strerror(e));
		return -EHOSTUNREACH;
	}
	int fd = -EHOSTUNREACH;
	snprintf(why, wl, "%s resolves only to local addresses", name);
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		if (addr_local(a->ai_addr))
			continue;
		fd = connect_timeout(a->ai_addr, a->ai_addrlen);
		if (fd < 0)
			snprintf(why, wl, "connect %s:%u: %s", name, port, strerror(-fd));
	}
	freeaddrinfo(res);
	return fd;
}

static int upstream_tls(struct gw *g, int fd, const char *name, struct stream *ret, char *why, size_t wl)
{
	SSL *ssl = SSL_new(g->upstream);
	if (!ssl) {
		close(fd);
		snprintf(why, wl, "TLS: out of memory");
		return -ENOMEM;
	}
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, name);
	SSL_set1_host(ssl, name);
	if (SSL_connect(ssl) != 1 || SSL_get_verify_result(ssl) != X509_V_OK) {
		long v = SSL_get_verify_result(ssl);
		snprintf(why, wl, "TLS to the upstream %s: %s", name,
			 v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake failed");
		SSL_free(ssl);
		close(fd);
		return -EPROTO;
	}
	*ret = (struct stream){ fd, ssl };
	return 0;
}

/* ---- relay ------------------------------------------------------------------------------------------ */

/* Which of two streams (on[i]: still read) has bytes to read, TLS bytes already decrypted first: 0 or 1,
 * or -1 after IDLE_TIMEOUT_MS of silence or a poll error. */
static int ready_side(struct stream *const s[2], const bool on[2])
{
	for (;;) {
		struct pollfd p[2];
		int ready = -1;
		for (int i = 0; i < 2; i++) {
			p[i] = (struct pollfd){ .fd = on[i] ? s[i]->fd : -1, .events = POLLIN };
			if (on[i] && s[i]->ssl && SSL_pending(s[i]->ssl) > 0)
				ready = i;
		}
		if (ready >= 0)
			return ready;
		int r = poll(p, 2, IDLE_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		return (p[0].revents & (POLLIN | POLLHUP | POLLERR)) ? 0 : 1;
	}
}

static void relay(struct gw *g, struct stream *a, struct stream *b)
{
	struct stream *s[2] = { a, b };
	bool open_[2] = { true, true };
	char buf[16384];
	while (open_[0] || open_[1]) {
		int ready = ready_side(s, open_);
		if (ready < 0)
			return;
		int o = 1 - ready;
		ssize_t n = s_read(s[ready], buf, sizeof(buf));
		if (n <= 0) {
			/* End of one direction: TLS has no half-close worth keeping, plain TCP does. */
			if (s[ready]->ssl || s[o]->ssl || !open_[o])
				return;
			shutdown(s[o]->fd, SHUT_WR);
			open_[ready] = false;
			continue;
		}
		gw_throttle(g, (size_t)n);
		if (s_write_all(s[o], buf, (size_t)n) < 0)
			return;
	}
}

/* ---- HTTP ------------------------------------------------------------------------------------------- */

static const struct gw_inject *rule_for(const struct gw *g, const char *name, size_t from)
{
	for (size_t i = from; i < g->n_inject; i++)
		if (net_host_match(g->inject[i].host, name))
			return &g->inject[i];
	return NULL;
}

/* TLS to name is relayed unopened: the policy lists it under "passthrough" and no rule injects into it. */
static bool passthrough(const struct gw *g, const char *name)
{
	const cJSON *p;
	if (rule_for(g, name, 0))
		return false;
	cJSON_ArrayForEach(p, g->passthrough)
		if (cJSON_IsString(p) && net_host_match(p->valuestring, name))
			return true;
	return false;
}

static void refuse_http(struct stream *c, int status, const char *why)
{
	char msg[700];
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\nspace-gateway: %s\n", status, gw_http_reason(status),
			 strlen(why) + 16, why);
	if (n > 0)
		(void)s_write_all(c, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/* One sandbox connection's HTTP requests, checked by gw_http.c; the upstream is connected on the first
 * request that passes. */
struct http_conn {
	struct gw *g;
	const char *name;
	uint16_t port;
	bool tls;
	struct stream u;
	char why[400]; /* why the upstream could not be reached */
};

static int http_forward(void *userdata, const char *buf, size_t len)
{
	struct http_conn *hc = userdata;
	if (hc->u.fd < 0) {
		int fd = upstream_connect(hc->g, hc->name, hc->port, hc->why, sizeof(hc->why));
		if (fd < 0)
			return fd;
		struct stream u = { fd, NULL };
		if (hc->tls) {
			int r = upstream_tls(hc->g, fd, hc->name, &u, hc->why, sizeof(hc->why));
			if (r < 0)
				return r;
		}
		hc->u = u;
	}
	gw_throttle(hc->g, len);
	return s_write_all(&hc->u, buf, len) < 0 ? -EPIPE : 0;
}

static void http_stripped(void *userdata, const char *header)
{
	struct http_conn *hc = userdata;
	gw_event(hc->g, "egress-stripped", "http %s: the sandbox's own %s header removed", hc->name, header);
}

/* Ends what the gateway sends upstream, so the upstream answers what it has and closes. */
static void http_upstream_done(struct http_conn *hc)
{
	if (hc->u.fd < 0)
		return;
	if (hc->u.ssl)
		SSL_shutdown(hc->u.ssl);
	shutdown(hc->u.fd, SHUT_WR);
}

/*
 * The sandbox's requests go through the checker; the upstream's answers come back as they are. A refusal
 * after earlier requests went upstream is answered only once the upstream has answered those and closed
 * (it is told nothing more will come), so the sandbox reads the answers in the order of its requests.
 */
static void http_serve(struct gw *g, struct stream *c, const char *name, uint16_t port, bool tls)
{
	static const struct gw_http_ops ops = { http_forward, http_stripped };
	_cleanup_free_ struct gw_http_header *inj = calloc(g->n_inject + 1, sizeof(*inj));
	_cleanup_free_ char *buf = malloc(16384);
	if (!inj || !buf)
		return;
	struct gw_http_conf conf = { .name = name, .port = port, .tls = tls };
	for (const struct gw_inject *r = rule_for(g, name, 0); r; r = rule_for(g, name, (size_t)(r - g->inject) + 1))
		inj[conf.n_inject++] = (struct gw_http_header){ r->header, r->value };
	conf.inject = inj;
	conf.credentials = conf.n_inject > 0;
	struct http_conn hc = { .g = g, .name = name, .port = port, .tls = tls, .u = { -1, NULL } };
	struct gw_http h;
	if (gw_http_init(&h, &conf, &ops, &hc) < 0)
		return;
	struct stream *s[2] = { c, &hc.u };
	bool client_open = true, stopped = false, refused = false;
	for (;;) {
		bool on[2] = { client_open, hc.u.fd >= 0 };
		if (!on[1] && (!on[0] || stopped))
			break;
		int ready = ready_side(s, on);
		if (ready < 0)
			break;
		ssize_t n = s_read(s[ready], buf, 16384);
		if (ready == 1) {
			/* The upstream's answers go back as they come; it ending ends the connection. */
			if (n <= 0)
				break;
			gw_throttle(g, (size_t)n);
			if (s_write_all(c, buf, (size_t)n) < 0)
				break;
			continue;
		}
		if (n <= 0) {
			/* The sandbox is done sending: let the upstream finish its answers. */
			client_open = false;
			if (!refused)
				http_upstream_done(&hc);
			continue;
		}
		if (refused)
			continue; /* nothing more goes upstream */
		int r = gw_http_feed(&h, buf, (size_t)n);
		if (r >= 0) {
			/* 1: the last request (Connection: close) is through; what follows is counted and dropped. */
			stopped |= r > 0;
			continue;
		}
		stopped = true;
		if (h.status) {
			gw_event(g, "egress-denied", "tcp %s:%u: %s", name, port, h.why);
			refused = true;
			http_upstream_done(&hc);
			continue;
		}
		if (hc.why[0]) {
			gw_event(g, "egress-failed", "tcp %s:%u: %s", name, port, hc.why);
			refuse_http(c, 502, hc.why);
		}
		break;
	}
	if (refused)
		refuse_http(c, h.status, h.why);
	if (h.extra)
		gw_event(g, "egress-denied", "tcp %s:%u: http: %llu bytes after the last request (Connection: close) dropped",
			 name, port, (unsigned long long)h.extra);
	gw_http_finish(&h);
	s_close(&hc.u);
}

/* ---- one connection ----------------------------------------------------------------------------- */

/* Peeks at the complete first TLS record (the ClientHello) without consuming it. */
static ssize_t peek_hello(int fd, uint8_t *buf, size_t cap)
{
	int64_t deadline = util_wall_ms() + HANDSHAKE_TIMEOUT_MS;
	size_t need = 5;
	for (;;) {
		ssize_t n = recv(fd, buf, cap, MSG_PEEK);
		if (n <= 0)
			return -1;
		if ((size_t)n >= 5)
			need = 5 + ((size_t)buf[3] << 8 | buf[4]);
		if (need > cap)
			return -1;
		if ((size_t)n >= need)
			return (ssize_t)need;
		if (util_wall_ms() > deadline)
			return -1;
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

void gw_conn_serve(struct gw *g, int fd)
{
	struct stream c = { fd, NULL };
	_cleanup_free_ uint8_t *hello = NULL;
	set_timeouts(fd);
	struct sockaddr_in peer, local;
	socklen_t pl = sizeof(peer), ll = sizeof(local);
	char name[256], dst[INET_ADDRSTRLEN];
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 || getsockname(fd, (struct sockaddr *)&local, &ll) < 0)
		goto out;
	uint16_t port = ntohs(local.sin_port);
	inet_ntop(AF_INET, &local.sin_addr, dst, sizeof(dst));
	if (peer.sin_addr.s_addr != g->guest_addr) {
		gw_event(g, "egress-denied", "tcp %s:%u from %s: spoofed source address", dst, port,
			 inet_ntoa(peer.sin_addr));
		goto out;
	}
	if (!gw_dns_name_of(g, local.sin_addr.s_addr, name, sizeof(name))) {
		gw_event(g, "egress-denied", "tcp %s:%u: not an address the gateway's DNS gave out", dst, port);
		goto out;
	}
	if (!gw_allowed(g, name, port)) {
		gw_event(g, "egress-denied", "tcp %s:%u: port not allowed for this host", name, port);
		goto out;
	}
	uint8_t first;
	if (recv(fd, &first, 1, MSG_PEEK) != 1)
		goto out;
	if (first != 0x16) {
		http_serve(g, &c, name, port, false);
		goto out;
	}
	hello = malloc(HELLO_MAX);
	char sni[256];
	ssize_t hn = hello ? peek_hello(fd, hello, HELLO_MAX) : -1;
	if (hn < 0 || !gw_tls_sni(hello, (size_t)hn, sni, sizeof(sni))) {
		gw_event(g, "egress-denied", "tls %s:%u: no server name (SNI) in the ClientHello", name, port);
		goto out;
	}
	if (strcmp(sni, name)) {
		char q[GW_QUOTE_BUF];
		gw_event(g, "egress-denied", "tls %s:%u: SNI '%s' is not the name this address stands for", name, port,
			 gw_quote(q, sni));
		goto out;
	}
	if (passthrough(g, name)) {
		char why[400];
		int ufd = upstream_connect(g, name, port, why, sizeof(why));
		if (ufd < 0) {
			gw_event(g, "egress-failed", "tcp %s:%u: %s", name, port, why);
			goto out;
		}
		struct stream u = { ufd, NULL };
		relay(g, &c, &u);
		s_close(&u);
		goto out;
	}
	SSL_CTX *leaf = gw_tls_leaf(g, name);
	c.ssl = leaf ? SSL_new(leaf) : NULL;
	SSL_CTX_free(leaf);
	if (!c.ssl)
		goto out;
	SSL_set_fd(c.ssl, fd);
	if (SSL_accept(c.ssl) != 1) {
		gw_event(g, "egress-denied", "tls %s:%u: the sandbox refused the gateway's certificate", name, port);
		goto out;
	}
	http_serve(g, &c, name, port, true);
out:
	s_close(&c);
}
