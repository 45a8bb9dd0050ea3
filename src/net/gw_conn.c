/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One guest TCP connection through the gateway. The destination address must be one the gateway's DNS
 * gave out (it stands for exactly one name), the name and port must be allowed, the TLS SNI and the
 * HTTP Host must be that name. Then: TLS passthrough for hosts without credential rules; TLS terminated
 * with a gateway-minted certificate and re-originated with full verification for hosts with rules (and
 * plain HTTP likewise), with the guest's Authorization (and the injected headers' names) stripped and
 * the rules' headers added. Everything read from the guest is hostile: lengths are bounded, a request
 * whose head does not parse is refused.
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
#include "net/net.h"
#include "util/cleanup.h"
#include "util/util.h"

#define HANDSHAKE_TIMEOUT_MS 10000
#define IO_TIMEOUT_S 60
#define IDLE_TIMEOUT_MS 300000
#define HEAD_MAX 32768
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

static void relay(struct gw *g, struct stream *a, struct stream *b)
{
	struct stream *s[2] = { a, b };
	bool open_[2] = { true, true };
	char buf[16384];
	while (open_[0] || open_[1]) {
		struct pollfd p[2];
		int ready = -1;
		for (int i = 0; i < 2; i++) {
			p[i] = (struct pollfd){ .fd = open_[i] ? s[i]->fd : -1, .events = POLLIN };
			if (open_[i] && s[i]->ssl && SSL_pending(s[i]->ssl) > 0)
				ready = i;
		}
		if (ready < 0) {
			int r = poll(p, 2, IDLE_TIMEOUT_MS);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return;
			ready = (p[0].revents & (POLLIN | POLLHUP | POLLERR)) ? 0 : 1;
		}
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

static bool header_is(const char *line, size_t nlen, const char *name)
{
	return strlen(name) == nlen && !strncasecmp(line, name, nlen);
}

/* Rewrites the request head (head..end, ending "\r\n\r\n") into out. Returns its length, or -1 with why. */
static int rewrite_head(struct gw *g, const char *name, char *head, size_t hlen, char *out, size_t out_len,
			char *why, size_t wl)
{
	bool rules = rule_for(g, name, 0) != NULL, have_host = false;
	size_t n = 0;
	head[hlen - 2] = '\0'; /* the head's last line now ends in a single "\r\n" */
	char *line = head, *next;
	for (int i = 0; (next = strstr(line, "\r\n")); i++, line = next + 2) {
		*next = '\0';
		size_t ll = (size_t)(next - line);
		if (memchr(line, '\n', ll) || memchr(line, '\r', ll)) {
			snprintf(why, wl, "http: a bare line break in the request head");
			return -1;
		}
		if (i == 0) {
			char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
			if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7)) {
				snprintf(why, wl, "http: not an HTTP/1.x request");
				return -1;
			}
		} else {
			char *colon = strchr(line, ':');
			if (!colon || colon == line) {
				snprintf(why, wl, "http: malformed header line");
				return -1;
			}
			size_t nl = (size_t)(colon - line);
			const char *val = colon + 1;
			while (*val == ' ' || *val == '\t')
				val++;
			if (header_is(line, nl, "Host")) {
				char host[256];
				snprintf(host, sizeof(host), "%s", val);
				char *c = strrchr(host, ':');
				if (c && !strchr(host, ']'))
					*c = '\0';
				if (have_host || strcasecmp(host, name)) {
					snprintf(why, wl, "http Host '%.100s' is not %s (the name this connection resolved)",
						 val, name);
					return -1;
				}
				have_host = true;
			}
			bool drop = header_is(line, nl, "Connection") || header_is(line, nl, "Keep-Alive") ||
				    header_is(line, nl, "Proxy-Connection") || header_is(line, nl, "Proxy-Authorization");
			if (rules) {
				bool secret = header_is(line, nl, "Authorization");
				for (const struct gw_inject *r = rule_for(g, name, 0); r; r = rule_for(g, name, (size_t)(r - g->inject) + 1))
					secret |= header_is(line, nl, r->header);
				if (secret)
					gw_event(g, "egress-stripped", "http %s: the sandbox's own %.*s header removed", name,
						 (int)nl, line);
				drop |= secret;
			}
			if (drop)
				continue;
		}
		int w = snprintf(out + n, out_len - n, "%s\r\n", line);
		if (w < 0 || (size_t)w >= out_len - n)
			goto too_big;
		n += (size_t)w;
	}
	if (!have_host) {
		snprintf(why, wl, "http: no Host header");
		return -1;
	}
	for (const struct gw_inject *r = rule_for(g, name, 0); r; r = rule_for(g, name, (size_t)(r - g->inject) + 1)) {
		int w = snprintf(out + n, out_len - n, "%s: %s\r\n", r->header, r->value);
		if (w < 0 || (size_t)w >= out_len - n)
			goto too_big;
		n += (size_t)w;
	}
	/* One request per connection: every request is checked and gets its header. */
	int w = snprintf(out + n, out_len - n, "Connection: close\r\n\r\n");
	if (w < 0 || (size_t)w >= out_len - n)
		goto too_big;
	return (int)(n + (size_t)w);
too_big:
	snprintf(why, wl, "http: request head too large");
	return -1;
}

static void refuse_http(struct stream *c, const char *why)
{
	char body[700];
	int n = snprintf(body, sizeof(body),
			 "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\nspace-gateway: %s\n", strlen(why) + 15, why);
	if (n > 0)
		(void)s_write_all(c, body, (size_t)n < sizeof(body) ? (size_t)n : sizeof(body) - 1);
}

static void http_forward(struct gw *g, struct stream *c, const char *name, uint16_t port, bool tls)
{
	char why[400] = "";
	_cleanup_free_ char *head = malloc(HEAD_MAX + 1), *out = malloc(HEAD_MAX + 4096);
	if (!head || !out)
		return;
	size_t hlen = 0;
	char *end = NULL;
	while (!end) {
		if (hlen == HEAD_MAX) {
			snprintf(why, sizeof(why), "http: request head larger than %d bytes", HEAD_MAX);
			goto deny;
		}
		ssize_t k = s_read(c, head + hlen, HEAD_MAX - hlen);
		if (k <= 0)
			return;
		hlen += (size_t)k;
		head[hlen] = '\0';
		end = memmem(head, hlen, "\r\n\r\n", 4);
	}
	size_t head_len = (size_t)(end - head) + 4;
	int olen = rewrite_head(g, name, head, head_len, out, HEAD_MAX + 4096, why, sizeof(why));
	if (olen < 0)
		goto deny;
	int fd = upstream_connect(g, name, port, why, sizeof(why));
	if (fd < 0) {
		gw_event(g, "egress-failed", "tcp %s:%u: %s", name, port, why);
		refuse_http(c, why);
		explicit_bzero(out, (size_t)olen);
		return;
	}
	struct stream u = { fd, NULL };
	if (tls && upstream_tls(g, fd, name, &u, why, sizeof(why)) < 0) {
		gw_event(g, "egress-failed", "tcp %s:%u: %s", name, port, why);
		refuse_http(c, why);
		explicit_bzero(out, (size_t)olen);
		return;
	}
	int r = s_write_all(&u, out, (size_t)olen);
	explicit_bzero(out, (size_t)olen);
	if (r == 0 && hlen > head_len)
		r = s_write_all(&u, head + head_len, hlen - head_len);
	if (r == 0)
		relay(g, c, &u);
	s_close(&u);
	return;
deny:
	gw_event(g, "egress-denied", "tcp %s:%u: %s", name, port, why);
	refuse_http(c, why);
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
		http_forward(g, &c, name, port, false);
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
		gw_event(g, "egress-denied", "tls %s:%u: SNI '%s' is not the name this address stands for", name, port, sni);
		goto out;
	}
	if (!rule_for(g, name, 0)) {
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
	http_forward(g, &c, name, port, true);
out:
	s_close(&c);
}
