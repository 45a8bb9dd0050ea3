/* SPDX-License-Identifier: Apache-2.0 */
/* PORT_CONNECT from the host (contract in agent_client.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "proto/agent_client.h"
#include "proto/agent_conn.h"

/* Reads exactly n bytes: after OK the stream is the port's, so not one byte past the reply may be taken. */
static int read_exact(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = recv(fd, (char *)buf + got, n - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (k == 0)
			return -EPIPE;
		got += (size_t)k;
	}
	return 0;
}

int agent_port_connect(const char *addr, uint16_t port, int *ret_fd, struct agent_error *err)
{
	if (err)
		*err = (struct agent_error){ 0 };
	if (port == 0)
		return agent_err(err, -EINVAL, "port 0 is not a port");
	struct agent_conn c = AGENT_CONN_INIT;
	int r = agent_conn_request(&c, addr, 0, err);
	struct agent_info info;
	if (r >= 0)
		r = agent_conn_hello_reply(&c, 0, &info, err);
	if (r >= 0 && !(info.caps & PROTO_CAP_PORT))
		r = agent_err(err, -EOPNOTSUPP, "the sandbox's agent (%s) cannot connect to its ports", info.version);
	/* The agent sends nothing between its HELLO and the request's answer: nothing past HELLO is buffered. */
	if (r >= 0 && c.rlen > c.roff)
		r = agent_err(err, -EBADMSG, "unexpected bytes from the agent after its HELLO");
	if (r >= 0) {
		r = proto_put_port_connect(&c.out, port, 0);
		r = r < 0 ? r : agent_conn_flush(&c);
		if (r < 0)
			r = agent_err(err, r, "sending to agent: %s", strerror(-r));
	}
	/* The reply, byte-exact: a header, then an empty OK or a bounded ERR. */
	uint8_t frame[PROTO_HEADER_SIZE + 8 + PROTO_MAX_ERRMSG];
	if (r >= 0) {
		r = read_exact(c.fd, frame, PROTO_HEADER_SIZE);
		if (r < 0)
			r = agent_err(err, r, "no answer from agent: %s", strerror(-r));
	}
	if (r >= 0) {
		uint32_t len = (uint32_t)frame[0] | (uint32_t)frame[1] << 8 | (uint32_t)frame[2] << 16 |
			       (uint32_t)frame[3] << 24;
		if (len > sizeof(frame) - PROTO_HEADER_SIZE)
			r = agent_err(err, -EBADMSG, "oversized answer from agent");
		else
			r = read_exact(c.fd, frame + PROTO_HEADER_SIZE, len);
		struct proto_frame f;
		if (r >= 0 && proto_frame_parse(frame, PROTO_HEADER_SIZE + len, PROTO_MAX_PAYLOAD, &f) <= 0)
			r = -EBADMSG;
		if (r >= 0 && f.type == PROTO_OK)
			r = proto_get_empty(&f) < 0 ? agent_err(err, -EBADMSG, "malformed OK from agent") : 0;
		else if (r >= 0)
			r = agent_conn_unexpected(&f, err);
	}
	if (r < 0) {
		agent_conn_close(&c);
		return r;
	}
	*ret_fd = c.fd;
	c.fd = -1;
	agent_conn_close(&c);
	return 0;
}
