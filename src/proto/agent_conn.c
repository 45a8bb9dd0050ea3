/* SPDX-License-Identifier: Apache-2.0 */
#include "proto/agent_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "util/cleanup.h"
#include "util/util.h"

int agent_err(struct agent_error *err, int r, const char *fmt, ...)
{
	if (err && r < 0 && err->code != -r) {
		va_list ap;
		err->code = -r;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return r;
}

static int connect_unix(const char *path, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Firecracker-style host-initiated vsock: "CONNECT <port>\n" -> "OK <host port>\n". */
static int vsock_handshake(int fd, unsigned port, uint64_t deadline_ns)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	int r;
	/* One small send; MSG_NOSIGNAL: a VMM that hung up must not kill the host with SIGPIPE. */
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n)
		return errno == EPIPE || errno == ECONNRESET ? -ECONNREFUSED : -errno;
	/* Byte by byte: whatever follows the newline already belongs to the agent's stream. */
	size_t len = 0;
	for (;;) {
		if (deadline_ns) {
			uint64_t now = util_now_ns();
			int ms = now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000 + 1);
			struct pollfd p = { .fd = fd, .events = POLLIN };
			r = poll(&p, 1, ms);
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r == 0)
				return -ETIMEDOUT;
		}
		char ch;
		ssize_t k = read(fd, &ch, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -ECONNREFUSED; /* the VMM hung up: nobody listens on that port (yet) */
		if (ch == '\n')
			break;
		if (len + 1 >= sizeof(line))
			return -EBADMSG;
		line[len++] = ch;
	}
	line[len] = '\0';
	return strncmp(line, "OK ", 3) == 0 ? 0 : -ECONNREFUSED;
}

static int connect_once(const char *addr, uint64_t deadline_ns, int *ret_fd)
{
	if (strncmp(addr, "unix:", 5) == 0)
		return connect_unix(addr + 5, ret_fd);
	if (strncmp(addr, "fd:", 3) == 0) {
		uint64_t n;
		int r = util_parse_uint(addr + 3, 0, INT_MAX, &n);
		if (r < 0)
			return -EINVAL;
		int fd = fcntl((int)n, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return -errno;
		*ret_fd = fd;
		return 0;
	}
	if (strncmp(addr, "vsock-uds:", 10) == 0) {
		const char *colon = strrchr(addr + 10, ':');
		uint64_t port;
		if (!colon || colon == addr + 10 || util_parse_uint(colon + 1, 0, UINT32_MAX, &port) < 0)
			return -EINVAL;
		_cleanup_free_ char *path = strndup(addr + 10, (size_t)(colon - (addr + 10)));
		if (!path)
			return -ENOMEM;
		_cleanup_close_ int fd = -1;
		int r = connect_unix(path, &fd);
		if (r < 0)
			return r;
		r = vsock_handshake(fd, (unsigned)port, deadline_ns);
		if (r < 0)
			return r;
		*ret_fd = TAKE_FD(fd);
		return 0;
	}
	return -EINVAL;
}

int agent_conn_open(struct agent_conn *c, const char *addr, int timeout_ms, struct agent_error *err)
{
	if (!addr)
		return agent_err(err, -EINVAL, "no agent address");
	uint64_t deadline = timeout_ms > 0 ? util_now_ns() + (uint64_t)timeout_ms * 1000000 : 0;
	int last = 0;
	for (;;) {
		int fd = -1;
		int r = connect_once(addr, deadline, &fd);
		if (r == 0) {
			c->fd = fd;
			return 0;
		}
		/* Running out of time in a retry says less than why the attempts failed. */
		if (r == -ETIMEDOUT && last)
			r = last;
		bool transient = r == -ENOENT || r == -ECONNREFUSED || r == -ECONNRESET || r == -EAGAIN;
		last = r;
		if (!transient || !deadline || util_now_ns() >= deadline)
			return agent_err(err, r, "cannot connect to agent at %s: %s", addr, strerror(-r));
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

int agent_conn_request(struct agent_conn *c, const char *addr, int timeout_ms, struct agent_error *err)
{
	int r = agent_conn_open(c, addr, timeout_ms, err);
	if (r < 0)
		return r;
	struct proto_hello h = { .magic = PROTO_MAGIC, .major = PROTO_VERSION_MAJOR,
				 .minor = PROTO_VERSION_MINOR, .max_payload = PROTO_MAX_PAYLOAD };
	snprintf(h.version, sizeof(h.version), "libspace %s", SPACE_VERSION_STRING);
	return proto_put_hello(&c->out, &h);
}

static int send_some(struct agent_conn *c, int flags)
{
	while (proto_buf_pending(&c->out) > 0) {
		ssize_t n = send(c->fd, c->out.data + c->out.head, proto_buf_pending(&c->out),
				 MSG_NOSIGNAL | flags);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && (flags & MSG_DONTWAIT))
			return 0;
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		proto_buf_consume(&c->out, (size_t)n);
	}
	return 0;
}

int agent_conn_flush(struct agent_conn *c) { return send_some(c, 0); }
int agent_conn_flush_some(struct agent_conn *c) { return send_some(c, MSG_DONTWAIT); }

int agent_conn_fill(struct agent_conn *c)
{
	if (c->roff > 0) {
		memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
		c->rlen -= c->roff;
		c->roff = 0;
	}
	/* Room for at least a whole frame as its header announces (bounded by PROTO_MAX_PAYLOAD). */
	size_t need = 128u << 10;
	if (c->rlen >= 4) {
		uint32_t n = (uint32_t)c->rbuf[0] | (uint32_t)c->rbuf[1] << 8 | (uint32_t)c->rbuf[2] << 16 |
			     (uint32_t)c->rbuf[3] << 24;
		if (n > PROTO_MAX_PAYLOAD)
			return -EBADMSG;
		if (PROTO_HEADER_SIZE + (size_t)n > need)
			need = PROTO_HEADER_SIZE + (size_t)n;
	}
	if (c->rcap < need) {
		uint8_t *p = realloc(c->rbuf, need);
		if (!p)
			return -ENOMEM;
		c->rbuf = p;
		c->rcap = need;
	}
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (n == 0)
			return -EPIPE;
		c->rlen += (size_t)n;
		return 0;
	}
}

static long parse_buffered(struct agent_conn *c, struct proto_frame *f)
{
	if (!c->rbuf)
		return 0;
	long r = proto_frame_parse(c->rbuf + c->roff, c->rlen - c->roff, PROTO_MAX_PAYLOAD, f);
	return r < 0 ? -EBADMSG : r;
}

bool agent_conn_has_frame(struct agent_conn *c)
{
	struct proto_frame f;
	return parse_buffered(c, &f) != 0;
}

int agent_conn_next(struct agent_conn *c, struct proto_frame *ret, uint64_t deadline_ns)
{
	for (;;) {
		long r = parse_buffered(c, ret);
		if (r < 0)
			return (int)r;
		if (r > 0) {
			c->roff += (size_t)r;
			return 0;
		}
		if (deadline_ns) {
			uint64_t now = util_now_ns();
			int ms = now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000 + 1);
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			int k = poll(&p, 1, ms);
			if (k < 0 && errno != EINTR)
				return -errno;
			if (k == 0)
				return -ETIMEDOUT;
			if (k < 0)
				continue;
		}
		int k = agent_conn_fill(c);
		if (k < 0)
			return k;
	}
}

int agent_conn_unexpected(const struct proto_frame *f, struct agent_error *err)
{
	if (f->type == PROTO_ERR) {
		struct proto_err e;
		if (proto_get_err(f, &e) < 0)
			return agent_err(err, -EBADMSG, "malformed ERR frame from agent");
		if (err) {
			err->code = e.code;
			snprintf(err->msg, sizeof(err->msg), "%s", e.msg);
		}
		return -e.code;
	}
	return agent_err(err, -EBADMSG, "unexpected %s frame from agent", proto_type_name(f->type));
}

int agent_conn_hello_reply(struct agent_conn *c, uint64_t deadline_ns, struct agent_info *ret,
			   struct agent_error *err)
{
	int r = agent_conn_flush(c);
	/* On a send failure the agent may still have told us why: read before giving up. */
	struct proto_frame f;
	int k = agent_conn_next(c, &f, deadline_ns);
	if (k < 0)
		return agent_err(err, r < 0 ? r : k, "no HELLO from agent: %s", strerror(-(r < 0 ? r : k)));
	if (f.type != PROTO_HELLO)
		return agent_conn_unexpected(&f, err);
	struct proto_hello h;
	if (proto_get_hello(&f, &h) < 0)
		return agent_err(err, -EBADMSG, "malformed HELLO from agent");
	if (h.major != PROTO_VERSION_MAJOR)
		return agent_err(err, -EPROTONOSUPPORT, "agent speaks protocol %u.%u, we speak %u.%u",
				 h.major, h.minor, PROTO_VERSION_MAJOR, PROTO_VERSION_MINOR);
	if (r < 0)
		return agent_err(err, r, "sending to agent: %s", strerror(-r));
	if (ret) {
		*ret = (struct agent_info){ .major = h.major, .minor = h.minor, .caps = h.caps };
		memcpy(ret->version, h.version, sizeof(ret->version));
		memcpy(ret->hostname, h.hostname, sizeof(ret->hostname));
	}
	return 0;
}

int agent_conn_expect_ok(struct agent_conn *c, struct agent_error *err)
{
	struct proto_frame f;
	int r = agent_conn_next(c, &f, 0);
	if (r < 0)
		return agent_err(err, r, "reading agent reply: %s", strerror(-r));
	if (f.type == PROTO_OK && proto_get_empty(&f) == 0)
		return 0;
	return agent_conn_unexpected(&f, err);
}

void agent_conn_close(struct agent_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->rbuf);
	proto_buf_free(&c->out);
	*c = (struct agent_conn)AGENT_CONN_INIT;
}
