/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One client connection to space-agent: address parsing and connecting, frame I/O with bounded buffers,
 * the HELLO exchange and ERR/OK replies. Internal to agent_client.c.
 */
#pragma once

#include "proto/agent_client.h"
#include "proto/proto.h"

struct agent_conn {
	int fd;
	uint8_t *rbuf; /* received bytes: rbuf[roff..rlen) not yet parsed */
	size_t roff, rlen, rcap;
	struct proto_buf out; /* frames queued for sending */
};

#define AGENT_CONN_INIT { .fd = -1 }

/* Connects to addr (see agent_client.h), retrying until timeout_ms (0: one attempt). */
int agent_conn_open(struct agent_conn *c, const char *addr, int timeout_ms, struct agent_error *err);
/* Connects and queues our HELLO; the caller queues its request, then calls agent_conn_hello_reply(). */
int agent_conn_request(struct agent_conn *c, const char *addr, int timeout_ms, struct agent_error *err);
/* Sends everything queued (blocking). */
int agent_conn_flush(struct agent_conn *c);
/* Sends what the socket takes now without blocking; 0 or -errno. */
int agent_conn_flush_some(struct agent_conn *c);
/*
 * Returns the next complete frame (payload valid until the next call). deadline_ns: util_now_ns()
 * deadline or 0 for none. -EPIPE on EOF, -EBADMSG on an oversized frame, -ETIMEDOUT.
 */
int agent_conn_next(struct agent_conn *c, struct proto_frame *ret, uint64_t deadline_ns);
/* Whether a complete frame is buffered. */
bool agent_conn_has_frame(struct agent_conn *c);
/* Reads once from the socket into the buffer (blocking); 0, or -EPIPE on EOF. */
int agent_conn_fill(struct agent_conn *c);
/* Flushes and reads the agent's HELLO; checks magic and major version. */
int agent_conn_hello_reply(struct agent_conn *c, uint64_t deadline_ns, struct agent_info *ret,
			   struct agent_error *err);
/* Turns an ERR frame into -errno + err; anything but ERR/expected into -EBADMSG. */
int agent_conn_unexpected(const struct proto_frame *f, struct agent_error *err);
/* Reads one frame and expects OK. */
int agent_conn_expect_ok(struct agent_conn *c, struct agent_error *err);
void agent_conn_close(struct agent_conn *c);

/* Records a local error description (keeps an existing agent message for the same code). */
int agent_err(struct agent_error *err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
