/* SPDX-License-Identifier: Apache-2.0 */
/* Byte relay between two connected stream sockets (contract in relay.h). */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_CHUNK (64u << 10)

struct pipe_dir {
	int from, to;
};

/* One direction: from's bytes to to, then from's end as to's half-close. */
static void *pump(void *arg)
{
	const struct pipe_dir *d = arg;
	char *buf = malloc(RELAY_CHUNK);
	while (buf) {
		ssize_t n = recv(d->from, buf, RELAY_CHUNK, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* A non-blocking socket (an upgraded one of libmicrohttpd's): wait for it. */
			struct pollfd p = { .fd = d->from, .events = POLLIN };
			if (poll(&p, 1, -1) >= 0 || errno == EINTR)
				continue;
			break;
		}
		if (n <= 0)
			break;
		ssize_t off = 0;
		while (off < n) {
			ssize_t k = send(d->to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				struct pollfd p = { .fd = d->to, .events = POLLOUT };
				if (poll(&p, 1, -1) >= 0 || errno == EINTR)
					continue;
			}
			if (k < 0)
				break;
			off += k;
		}
		if (off < n) {
			/* The receiving side is gone: the sender learns it as soon as it writes again. */
			shutdown(d->from, SHUT_RD);
			break;
		}
	}
	free(buf);
	shutdown(d->to, SHUT_WR);
	return NULL;
}

void cli_relay(int a, int b)
{
	struct pipe_dir ab = { a, b }, ba = { b, a };
	pthread_t t;
	bool threaded = pthread_create(&t, NULL, pump, &ba) == 0;
	pump(&ab);
	if (threaded)
		pthread_join(t, NULL);
	close(a);
	close(b);
}

static void *relay_main(void *arg)
{
	int *fds = arg;
	int a = fds[0], b = fds[1];
	free(fds);
	cli_relay(a, b);
	return NULL;
}

int cli_relay_detached(int a, int b)
{
	int *fds = malloc(2 * sizeof(int));
	pthread_attr_t attr;
	pthread_t t;
	int r = fds ? pthread_attr_init(&attr) : ENOMEM;
	if (r == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		fds[0] = a;
		fds[1] = b;
		r = pthread_create(&t, &attr, relay_main, fds);
		pthread_attr_destroy(&attr);
	}
	if (r != 0) {
		free(fds);
		close(a);
		close(b);
		return -r;
	}
	return 0;
}
