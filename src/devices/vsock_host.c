/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host side of virtio-vsock: one epoll thread per device watches the listening unix socket and
 * every connection's socket, and handles each event under the transport lock, like a vCPU would.
 *
 * A host client's first line must be "CONNECT <port>\n" (at most VSOCK_LINE_MAX bytes, read one byte
 * at a time so nothing after it is consumed); anything else closes it. Sockets are non-blocking; a
 * connection's interest follows its state: the line while reading it, input while the guest has
 * credit and rx buffers, output while guest data waits for the host socket.
 */
#include "devices/vsock_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"

#define EV_WAKE 0u
#define EV_LISTEN 1u
#define EV_CONN 2u

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	*sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

void vsock_conn_update_events(struct virtio_vsock *v, struct vsock_conn *c)
{
	if (c->fd < 0 || v->epoll_fd < 0 || c->hup)
		return; /* after a hangup the socket is only read when the guest has room */
	uint32_t want = 0;
	if (c->state == VSOCK_LINE)
		want = EPOLLIN;
	else if (c->state == VSOCK_EST) {
		if (!c->host_eof && !c->peer_no_recv && !v->rx_starved && vsock_peer_credit(c) > 0)
			want |= EPOLLIN;
		if (c->len)
			want |= EPOLLOUT;
	}
	/* Level-triggered; an empty mask keeps the fd registered for EPOLLHUP/EPOLLERR only. */
	struct epoll_event ev = { .events = want, .data.u64 = EV_CONN + (uint64_t)(c - v->conns) };
	if (c->ep_registered && c->ep_mask == want)
		return;
	int op = c->ep_registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(v->epoll_fd, op, c->fd, &ev) == 0) {
		c->ep_mask = want;
		c->ep_registered = true;
	}
}

struct vsock_conn *vsock_host_connect(struct virtio_vsock *v, uint32_t host_port)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	struct sockaddr_un sa;
	snprintf(path, sizeof(path), "%s_%u", v->path, host_port);
	if (unix_addr(path, &sa) < 0)
		return NULL;
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return NULL; /* nobody listens (or the backlog is full): the guest gets RST */
	struct vsock_conn *c = vsock_conn_alloc(v);
	if (!c)
		return NULL;
	c->fd = TAKE_FD(fd);
	return c;
}

static bool port_in_use(const struct virtio_vsock *v, uint32_t port)
{
	for (unsigned i = 0; i < VIRTIO_VSOCK_MAX_CONNS; i++)
		if (v->conns[i].state != VSOCK_FREE && v->conns[i].state != VSOCK_LINE &&
		    v->conns[i].local_port == port)
			return true;
	return false;
}

/* "CONNECT <port>" with a decimal port of at most 10 digits that fits 32 bits. */
static int parse_connect(const char *line, uint32_t *port)
{
	if (strncmp(line, "CONNECT ", 8) != 0)
		return -EINVAL;
	const char *p = line + 8;
	uint64_t n = 0;
	if (!*p)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || n > UINT32_MAX / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (n > UINT32_MAX)
		return -EINVAL;
	*port = (uint32_t)n;
	return 0;
}

static void line_readable(struct virtio_vsock *v, struct vsock_conn *c)
{
	for (;;) {
		char ch;
		ssize_t n = read(c->fd, &ch, 1);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0 || c->line_len + 1 >= VSOCK_LINE_MAX) {
			vsock_conn_free(v, c);
			return;
		}
		if (ch != '\n') {
			c->line[c->line_len++] = ch;
			continue;
		}
		c->line[c->line_len] = '\0';
		uint32_t port;
		if (parse_connect(c->line, &port) < 0) {
			vsock_conn_free(v, c);
			return;
		}
		uint32_t local = v->next_port;
		while (port_in_use(v, local))
			local = local + 1 < VSOCK_FIRST_HOST_PORT ? VSOCK_FIRST_HOST_PORT : local + 1;
		v->next_port = local + 1 < VSOCK_FIRST_HOST_PORT ? VSOCK_FIRST_HOST_PORT : local + 1;
		c->local_port = local;
		c->peer_port = port;
		c->state = VSOCK_HOST_INIT;
		c->pending |= VSOCK_P_REQUEST;
		vsock_conn_update_events(v, c);
		return;
	}
}

static void accept_all(struct virtio_vsock *v)
{
	for (;;) {
		int fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct vsock_conn *c = vsock_conn_alloc(v);
		if (!c) {
			close(fd); /* every connection slot is busy */
			continue;
		}
		c->fd = fd;
		c->state = VSOCK_LINE;
		vsock_conn_update_events(v, c);
	}
}

static void conn_event(struct virtio_vsock *v, struct vsock_conn *c, uint32_t events)
{
	if (c->state == VSOCK_FREE)
		return; /* closed earlier in this batch */
	if (c->state == VSOCK_LINE) {
		line_readable(v, c);
		return;
	}
	if (events & EPOLLERR) {
		vsock_conn_reset(v, c);
		return;
	}
	if (c->state == VSOCK_HOST_INIT) {
		if (events & EPOLLHUP)
			vsock_conn_reset(v, c); /* the client gave up before the guest answered */
		return;
	}
	if (events & EPOLLOUT)
		vsock_conn_flush(v, c);
	if (c->state == VSOCK_FREE)
		return;
	if (events & (EPOLLIN | EPOLLHUP))
		c->readable = true;
	if (events & EPOLLHUP) {
		if (c->host_eof && !c->len) {
			vsock_conn_reset(v, c); /* nothing left either way */
			return;
		}
		/*
		 * The client is gone but unread data may remain: leave the epoll set (a hangup is
		 * level-triggered) and drain it as credit allows until read() returns 0.
		 */
		epoll_ctl(v->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
		c->hup = true;
		c->ep_registered = false;
	}
}

static void *event_thread(void *arg)
{
	struct virtio_vsock *v = arg;
	struct epoll_event evs[32];
	for (;;) {
		int n = epoll_wait(v->epoll_fd, evs, (int)ARRAY_SIZE(evs), -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (v->thread_enter && v->thread_enter() < 0)
			return NULL; /* no filter for this thread: it must not serve the guest */
		virtio_mmio_lock(v->t);
		bool stop = false;
		for (int i = 0; i < n; i++) {
			uint64_t id = evs[i].data.u64;
			if (id == EV_WAKE)
				stop = true;
			else if (id == EV_LISTEN)
				accept_all(v);
			else if (id - EV_CONN < VIRTIO_VSOCK_MAX_CONNS)
				conn_event(v, &v->conns[id - EV_CONN], evs[i].events);
		}
		if (!stop)
			vsock_rx_process(v);
		virtio_mmio_unlock(v->t);
		if (stop)
			return NULL;
	}
}

int vsock_host_start(struct virtio_vsock *v, const char *path)
{
	struct sockaddr_un sa;
	int r = unix_addr(path, &sa);
	if (r < 0)
		return r;
	if (!(v->path = strdup(path)))
		return -ENOMEM;
	v->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (v->listen_fd < 0)
		return -errno;
	(void)unlink(path); /* a socket left by an earlier run */
	if (bind(v->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(v->listen_fd, 64) < 0)
		return -errno;
	v->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	v->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->epoll_fd < 0 || v->wake_fd < 0)
		return -errno;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EV_WAKE };
	if (epoll_ctl(v->epoll_fd, EPOLL_CTL_ADD, v->wake_fd, &ev) < 0)
		return -errno;
	ev.data.u64 = EV_LISTEN;
	if (epoll_ctl(v->epoll_fd, EPOLL_CTL_ADD, v->listen_fd, &ev) < 0)
		return -errno;
	int e = pthread_create(&v->thread, NULL, event_thread, v);
	if (e)
		return -e;
	v->thread_started = true;
	return 0;
}

void vsock_host_stop(struct virtio_vsock *v)
{
	if (v->thread_started) {
		uint64_t one = 1;
		if (write(v->wake_fd, &one, sizeof(one)) != sizeof(one)) {
			/* an eventfd write of 1 cannot fail short of a full counter */
		}
		pthread_join(v->thread, NULL);
		v->thread_started = false;
	}
	if (v->listen_fd >= 0)
		close(TAKE_FD(v->listen_fd));
	if (v->wake_fd >= 0)
		close(TAKE_FD(v->wake_fd));
	if (v->epoll_fd >= 0)
		close(TAKE_FD(v->epoll_fd));
}
