/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PORT_CONNECT: one client connection becomes a byte stream to a TCP port on the sandbox's own loopback
 * (127.0.0.1, then ::1). The agent is PID 1: the connect is non-blocking and both directions are relayed
 * from the main loop, with bounded buffers (client bytes wait in the connection's rbuf, port bytes in its
 * output queue, at most AGENT_OUT_HIGH) and half-closes passed on. Never another address: a forward
 * reaches what listens inside this sandbox only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"

#define PORT_CHUNK (64u << 10)

/* Starts connecting to the loopback address of the current family: 0 connected, 1 under way, or -errno. */
static int port_dial(struct conn *c)
{
	struct port_fwd *p = &c->port;
	int fd = socket(p->v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int r;
	if (p->v6) {
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(p->port),
					   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	} else {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p->port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	if (r < 0 && errno != EINPROGRESS) {
		r = -errno;
		close(fd);
		return r;
	}
	p->up.fd = fd;
	p->up.events = 0;
	return r < 0 ? 1 : 0;
}

static void port_fail(struct conn *c, int code)
{
	watch_close(c->a, &c->port.up);
	if (code == ECONNREFUSED)
		proto_put_err(&c->out, code, "port %u is not listening", c->port.port);
	else
		proto_put_err(&c->out, code, "connect to port %u: %s", c->port.port, strerror(code));
	c->state = C_CLOSING;
}

/* Writes the client's bytes waiting in rbuf to the port. */
static void port_push(struct conn *c)
{
	struct port_fwd *p = &c->port;
	while (c->rlen > 0 && !p->up_shut) {
		ssize_t n = send(p->up.fd, c->rbuf, c->rlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* The port's side is gone for writing: what the client sends from now on is dropped. */
			p->up_shut = true;
			c->rlen = 0;
			return;
		}
		memmove(c->rbuf, c->rbuf + n, c->rlen - (size_t)n);
		c->rlen -= (size_t)n;
	}
}

/* Connected. Bytes the client sent right behind its request wait in rbuf; they go to the port from
 * port_event once port_update asked for EPOLLOUT (never from here: conn_read may still hold the request's
 * own frames at the start of rbuf). */
static void port_ready(struct conn *c)
{
	proto_put_empty(&c->out, PROTO_OK);
	c->state = C_PORT;
}

/* Tries the next address after a failed one (code: its positive errno). */
static void port_next(struct conn *c, int code)
{
	for (;;) {
		if (c->port.v6) {
			/* ::1 refused too, or there is no IPv6: the answer is 127.0.0.1's refusal. */
			bool none = code == ECONNREFUSED || code == EADDRNOTAVAIL || code == EAFNOSUPPORT ||
				    code == ENETUNREACH;
			port_fail(c, none ? ECONNREFUSED : code);
			return;
		}
		if (code != ECONNREFUSED) {
			port_fail(c, code);
			return;
		}
		c->port.v6 = true;
		int r = port_dial(c);
		if (r == 0) {
			port_ready(c);
			return;
		}
		if (r == 1) {
			c->state = C_PORT_CONNECTING;
			return;
		}
		code = -r;
	}
}

void port_request(struct conn *c, const struct proto_frame *f)
{
	uint16_t port;
	uint32_t flags;
	if (proto_get_port_connect(f, &port, &flags) < 0) {
		conn_close(c);
		return;
	}
	c->port.port = port;
	if (flags != 0) {
		proto_put_err(&c->out, EINVAL, "port connect: unknown flags %#x", flags);
		c->state = C_CLOSING;
		return;
	}
	int r = port_dial(c);
	if (r == 0)
		port_ready(c);
	else if (r == 1)
		c->state = C_PORT_CONNECTING;
	else
		port_next(c, -r);
}

void port_abort(struct conn *c)
{
	watch_close(c->a, &c->port.up);
}

void port_update(struct conn *c)
{
	struct port_fwd *p = &c->port;
	size_t out = proto_buf_pending(&c->out);
	if (c->state == C_PORT_CONNECTING) {
		/* The client is not read until OK; EPOLLRDHUP tells about one that gave up. */
		watch_set(c->a, &c->w, EPOLLRDHUP | (out ? EPOLLOUT : 0));
		watch_set(c->a, &p->up, EPOLLOUT);
		return;
	}
	if (c->rd_eof && c->rlen == 0 && !p->up_shut) {
		shutdown(p->up.fd, SHUT_WR);
		p->up_shut = true;
	}
	if (p->up_eof && out == 0 && !p->client_shut) {
		shutdown(c->w.fd, SHUT_WR);
		p->client_shut = true;
	}
	if (p->up_shut && p->client_shut) {
		conn_close(c);
		return;
	}
	/* A socket waiting for nothing leaves the epoll set, so a hung-up peer cannot spin the loop. */
	uint32_t cev = (!c->rd_eof && c->rlen == 0 && !p->up_shut ? EPOLLIN : 0) |
		       (out && !p->client_shut ? EPOLLOUT : 0);
	uint32_t uev = (!p->up_eof && out < AGENT_OUT_HIGH ? EPOLLIN : 0) | (c->rlen > 0 && !p->up_shut ? EPOLLOUT : 0);
	watch_set(c->a, &c->w, cev);
	watch_set(c->a, &p->up, uev);
}

void port_conn_event(struct conn *c, uint32_t events)
{
	if (events & EPOLLERR) {
		conn_close(c);
		return;
	}
	if ((events & (EPOLLIN | EPOLLHUP)) && !c->rd_eof && c->rlen == 0 && !c->port.up_shut) {
		if (c->rcap < PORT_CHUNK) {
			uint8_t *b = realloc(c->rbuf, PORT_CHUNK);
			if (!b) {
				conn_close(c);
				return;
			}
			c->rbuf = b;
			c->rcap = PORT_CHUNK;
		}
		ssize_t n = recv(c->w.fd, c->rbuf, c->rcap, MSG_DONTWAIT);
		if (n > 0)
			c->rlen = (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			c->rd_eof = true;
		port_push(c);
	}
	conn_flush(c);
}

void port_event(struct conn *c, uint32_t events)
{
	struct port_fwd *p = &c->port;
	if (c->dead)
		return;
	if (c->state == C_PORT_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(p->up.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err == 0 && !(events & (EPOLLERR | EPOLLHUP))) {
			port_ready(c);
		} else {
			watch_close(c->a, &p->up);
			port_next(c, err ? err : ECONNREFUSED);
		}
		conn_flush(c);
		return;
	}
	if (c->state != C_PORT)
		return;
	if (events & (EPOLLOUT | EPOLLERR))
		port_push(c);
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !p->up_eof &&
	    proto_buf_pending(&c->out) < AGENT_OUT_HIGH) {
		uint8_t buf[PORT_CHUNK];
		ssize_t n = recv(p->up.fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			proto_put_raw(&c->out, buf, (size_t)n);
			if (c->out.err) {
				conn_close(c);
				return;
			}
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			p->up_eof = true;
			if (n < 0) {
				/* Reset: nothing more goes either way; what was read still reaches the client. */
				p->up_shut = true;
				c->rlen = 0;
			}
		}
	}
	conn_flush(c);
}
