/* SPDX-License-Identifier: Apache-2.0 */
/* Client connections: framing, HELLO, request dispatch, buffered non-blocking output. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"
#include "config.h"

#define RBUF_MIN (64u << 10)

void conn_accept(struct agent *a)
{
	for (;;) {
		int fd = accept4(a->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* The listener would stay readable and spin the loop: rest it until an fd frees. */
				watch_set(a, &a->listen, 0);
				a->listen_paused = true;
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				agent_log("accept: %m");
			}
			return;
		}
		if (a->nconns >= AGENT_MAX_CONNS) {
			close(fd);
			continue;
		}
		struct conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		c->a = a;
		c->w = (struct watch){ .fd = fd, .kind = W_CONN, .obj = c };
		c->file_fd = -1;
		c->port.up = (struct watch){ .fd = -1, .kind = W_PORT, .obj = c };
		c->state = C_HELLO;
		if (watch_set(a, &c->w, EPOLLIN) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = a->conns;
		a->conns = c;
		a->nconns++;
	}
}

/* Queues ERR and closes the connection once it is sent. */
static void conn_fail(struct conn *c, int code, const char *what)
{
	proto_put_err(&c->out, code, "%s: %s", what, strerror(code < 0 ? -code : code));
	c->state = C_CLOSING;
}

void conn_update(struct conn *c)
{
	if (c->dead)
		return;
	if (port_active(c)) {
		port_update(c);
		return;
	}
	uint32_t ev = 0;
	bool reading = c->state != C_CLOSING && !c->rd_eof && !(c->proc && proc_stdin_full(c->proc)) &&
		       proto_buf_pending(&c->out) < AGENT_OUT_HIGH;
	if (reading)
		ev |= EPOLLIN;
	if (proto_buf_pending(&c->out) > 0)
		ev |= EPOLLOUT;
	if (ev == 0 && c->state == C_CLOSING) {
		conn_close(c);
		return;
	}
	/* EPOLLRDHUP tells us about a vanished client while we do not read. */
	if (!c->rd_eof)
		ev |= EPOLLRDHUP;
	watch_set(c->a, &c->w, ev);
}

/* The client half-closed or vanished: an exec or upload is abandoned, a download or reply goes on. */
static void conn_eof(struct conn *c)
{
	if (c->state == C_FILE_READ || c->state == C_CLOSING) {
		c->rd_eof = true;
		return;
	}
	conn_close(c);
}

void conn_flush(struct conn *c)
{
	while (!c->dead && proto_buf_pending(&c->out) > 0) {
		ssize_t n = send(c->w.fd, c->out.data + c->out.head, proto_buf_pending(&c->out),
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			conn_close(c);
			return;
		}
		proto_buf_consume(&c->out, (size_t)n);
	}
	if (c->dead)
		return;
	/* Producers paused by a full buffer may go on. */
	if (proto_buf_pending(&c->out) < AGENT_OUT_HIGH / 2) {
		if (c->proc)
			proc_resume(c->proc);
		/* (a port forward reads its port again from port_update) */
		if (!c->dead && c->state == C_FILE_READ)
			files_read_more(c);
	}
	if (!c->dead)
		conn_update(c);
}

void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	if (c->proc) {
		proc_detach(c->proc);
		c->proc = NULL;
	}
	files_abort(c);
	port_abort(c);
	if (c->shutdown_after)
		c->a->quit = true;
	if (c->state == C_TETHER && !c->tether_held) {
		/* The kernel closes the holder's end however the holder ended (exit, crash, SIGKILL). */
		agent_log("the sandbox's tether closed (its holder is gone): shutting down");
		c->a->quit = true;
	}
	watch_close(c->a, &c->w);
}

static void hello(struct conn *c, const struct proto_frame *f)
{
	struct proto_hello h;
	if (proto_get_hello(f, &h) < 0) {
		conn_close(c);
		return;
	}
	struct proto_hello me = { .magic = PROTO_MAGIC, .major = PROTO_VERSION_MAJOR, .minor = PROTO_VERSION_MINOR,
				  .max_payload = PROTO_MAX_PAYLOAD,
				  .caps = PROTO_CAP_PTY | PROTO_CAP_RESEED | PROTO_CAP_SET_TIME | PROTO_CAP_LIFETIME |
					  PROTO_CAP_HOSTNAME | PROTO_CAP_TETHER | PROTO_CAP_PORT | PROTO_CAP_DETACH |
					  (c->a->vm ? PROTO_CAP_VSOCK : 0) };
	strcpy(me.version, "space-agent " SPACE_VERSION_STRING);
	memcpy(me.hostname, c->a->hostname, sizeof(me.hostname));
	proto_put_hello(&c->out, &me);
	if (h.major != PROTO_VERSION_MAJOR) {
		proto_put_err(&c->out, EPROTONOSUPPORT, "protocol %u.%u not supported (agent speaks %u.%u)", h.major,
			      h.minor, PROTO_VERSION_MAJOR, PROTO_VERSION_MINOR);
		c->state = C_CLOSING;
		return;
	}
	c->peer_minor = h.minor;
	c->state = C_REQUEST;
}

/* TETHER: ARM makes this connection the sandbox's tether; HOLD / RELEASE act on every tether open now. */
static void tether(struct conn *c, const struct proto_frame *f)
{
	uint32_t op;
	if (proto_get_u32(f, &op) < 0) {
		conn_close(c);
		return;
	}
	if (op == PROTO_TETHER_HOLD || op == PROTO_TETHER_RELEASE) {
		for (struct conn *t = c->a->conns; t; t = t->next)
			if (!t->dead && t->state == C_TETHER)
				t->tether_held = op == PROTO_TETHER_HOLD;
		proto_put_empty(&c->out, PROTO_OK);
		c->state = C_CLOSING;
		return;
	}
	if (op != PROTO_TETHER_ARM) {
		conn_fail(c, EINVAL, "tether");
		return;
	}
	proto_put_empty(&c->out, PROTO_OK);
	c->state = C_TETHER;
}

static void request(struct conn *c, const struct proto_frame *f)
{
	switch (f->type) {
	case PROTO_EXEC: {
		struct proto_exec *x = NULL;
		int r = proto_get_exec(f, &x);
		if (r == -ENOMEM) {
			conn_fail(c, ENOMEM, "exec");
			return;
		}
		if (r < 0) {
			conn_close(c);
			return;
		}
		r = exec_start(c, x);
		free(x);
		if (r == 0)
			c->state = C_EXEC;
		else
			c->state = C_CLOSING; /* exec_start queued the ERR, or STARTED of a detached process */
		return;
	}
	case PROTO_SIGNAL_PID: {
		uint32_t pid, sig;
		if (proto_get_u32x2(f, &pid, &sig) < 0) {
			conn_close(c);
			return;
		}
		int r = exec_signal_pid(c->a, pid, sig);
		if (r < 0)
			conn_fail(c, r, "signal");
		else
			proto_put_empty(&c->out, PROTO_OK);
		c->state = C_CLOSING;
		return;
	}
	case PROTO_LIST_PROCS:
		if (proto_get_empty(f) < 0) {
			conn_close(c);
			return;
		}
		exec_list(c);
		c->state = C_CLOSING;
		return;
	case PROTO_FILE_WRITE:
	case PROTO_FILE_READ:
	case PROTO_STAT:
	case PROTO_LIST_DIR:
	case PROTO_MKDIR:
	case PROTO_REMOVE:
	case PROTO_RENAME:
		files_request(c, f);
		return;
	case PROTO_SYNC:
	case PROTO_SET_TIME:
	case PROTO_RESEED:
	case PROTO_SHUTDOWN:
	case PROTO_SET_LIFETIME:
	case PROTO_SET_HOSTNAME:
		system_request(c, f);
		return;
	case PROTO_TETHER:
		tether(c, f);
		return;
	case PROTO_PORT_CONNECT:
		port_request(c, f);
		return;
	default:
		conn_close(c);
		return;
	}
}

static void dispatch(struct conn *c, const struct proto_frame *f)
{
	switch (c->state) {
	case C_HELLO:
		hello(c, f);
		break;
	case C_REQUEST:
		request(c, f);
		break;
	case C_EXEC:
		exec_frame(c, f);
		break;
	case C_FILE_WRITE:
	case C_DISCARD:
		files_write_frame(c, f);
		break;
	case C_FILE_READ:
	case C_CLOSING:
	case C_TETHER:
	case C_PORT_CONNECTING:
	case C_PORT:
		/* Nothing more is expected from the client. */
		conn_close(c);
		break;
	}
}

static void conn_read(struct conn *c)
{
	/* Room for the announced frame (bounded by PROTO_MAX_PAYLOAD) or a minimum buffer. */
	size_t need = RBUF_MIN;
	if (c->rlen >= 4) {
		uint32_t n = (uint32_t)c->rbuf[0] | (uint32_t)c->rbuf[1] << 8 | (uint32_t)c->rbuf[2] << 16 |
			     (uint32_t)c->rbuf[3] << 24;
		if (n > PROTO_MAX_PAYLOAD) {
			conn_close(c);
			return;
		}
		if (PROTO_HEADER_SIZE + (size_t)n > need)
			need = PROTO_HEADER_SIZE + n;
	}
	if (c->rcap < need) {
		uint8_t *p = realloc(c->rbuf, need);
		if (!p) {
			conn_close(c);
			return;
		}
		c->rbuf = p;
		c->rcap = need;
	}
	ssize_t n = recv(c->w.fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_eof(c);
		return;
	}
	c->rlen += (size_t)n;

	size_t off = 0;
	/* After PORT_CONNECT the rest is raw bytes for the port: they stay in rbuf (port.c). */
	while (!c->dead && c->state != C_CLOSING && !port_active(c)) {
		struct proto_frame f;
		long r = proto_frame_parse(c->rbuf + off, c->rlen - off, PROTO_MAX_PAYLOAD, &f);
		if (r < 0) {
			conn_close(c);
			return;
		}
		if (r == 0)
			break;
		off += (size_t)r;
		dispatch(c, &f);
	}
	if (c->dead)
		return;
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	if (c->rcap > RBUF_MIN && c->rlen == 0) {
		free(c->rbuf);
		c->rbuf = NULL;
		c->rlen = c->rcap = 0;
	}
}

void conn_event(struct conn *c, uint32_t events)
{
	if (c->dead)
		return;
	if (c->state == C_PORT) {
		port_conn_event(c, events);
		return;
	}
	if (events & (EPOLLERR | EPOLLHUP))
		conn_close(c);
	else if (events & EPOLLIN)
		conn_read(c);
	else if (events & EPOLLRDHUP)
		conn_eof(c);
	if (!c->dead)
		conn_flush(c);
}

void agent_reap_dead(struct agent *a)
{
	for (struct conn **pc = &a->conns; *pc;) {
		struct conn *c = *pc;
		if (!c->dead) {
			pc = &c->next;
			continue;
		}
		*pc = c->next;
		a->nconns--;
		if (a->listen_paused && watch_set(a, &a->listen, EPOLLIN) == 0)
			a->listen_paused = false;
		free(c->rbuf);
		proto_buf_free(&c->out);
		free(c);
	}
	for (struct proc **pp = &a->procs; *pp;) {
		struct proc *p = *pp;
		if (!p->dead) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		a->nprocs--;
		free(p->inbuf);
		free(p->argv);
		free(p);
	}
}
