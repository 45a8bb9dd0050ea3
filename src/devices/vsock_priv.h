/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals shared by the virtio-vsock device (virtio_vsock.c: packets and credit) and its host side
 * (vsock_host.c: the epoll thread, unix sockets). All state below is guarded by the transport lock.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "devices/virtio_mmio.h"
#include "devices/virtio_vsock.h"

#define VSOCK_MAX_RST 64u
#define VSOCK_LINE_MAX 32u
#define VSOCK_FIRST_HOST_PORT (1u << 30)

enum vsock_state {
	VSOCK_FREE = 0,
	VSOCK_LINE,      /* host client accepted, reading "CONNECT <port>\n" */
	VSOCK_HOST_INIT, /* REQUEST sent (or due) to the guest, waiting for RESPONSE */
	VSOCK_EST,       /* connected */
};

/* Control packets due to the guest for one connection. */
#define VSOCK_P_REQUEST 1u
#define VSOCK_P_RESPONSE 2u
#define VSOCK_P_SHUTDOWN 4u
#define VSOCK_P_CREDIT 8u

struct vsock_conn {
	enum vsock_state state;
	int fd;
	uint32_t ep_mask;          /* events registered with epoll */
	bool ep_registered;
	bool hup;                  /* the host socket hung up: no longer in the epoll set */
	uint32_t local_port;       /* host side port */
	uint32_t peer_port;        /* guest side port */
	uint32_t pending;          /* VSOCK_P_* */
	bool readable;             /* the host socket may have data */
	bool host_eof;             /* the host client will send nothing more */
	bool peer_no_send, peer_no_recv, host_shut_wr;
	/* Guest -> host flow: bytes received, bytes written to the host socket, fwd_cnt last told. */
	uint32_t rx_cnt, fwd_cnt, fwd_sent;
	/* Host -> guest flow: bytes sent, and the guest's last advertised window. */
	uint32_t tx_cnt, peer_buf_alloc, peer_fwd_cnt;
	uint8_t *buf;              /* ring of VIRTIO_VSOCK_BUF_ALLOC bytes waiting for the host socket */
	uint32_t head, len;
	char line[VSOCK_LINE_MAX];
	unsigned line_len;
};

struct vsock_rst {
	uint32_t src_port, dst_port; /* as sent: src is the host side */
};

struct virtio_vsock {
	uint64_t cid;
	struct virtio_mmio *t;
	struct mmio_dev inner;     /* the transport's own mmio_dev, wrapped so the thread stops first */
	bool active;               /* the driver has set up its queues (first notify) */
	bool rx_starved;           /* no rx buffer left: stop reading host sockets */
	struct vsock_conn conns[VIRTIO_VSOCK_MAX_CONNS];
	struct vsock_rst rst[VSOCK_MAX_RST];
	unsigned nrst;
	unsigned rr;               /* round-robin start for rx service */
	uint32_t next_port;
	bool have_rx;              /* rx holds a popped, unused guest buffer */
	struct virtq_chain rx, tx;
	struct iovec iov[VIRTQUEUE_MAX_SEGS];

	char *path;
	int listen_fd, epoll_fd, wake_fd;
	pthread_t thread;
	bool thread_started;
	int (*thread_enter)(void); /* from the config: the event thread calls it after each wake-up */
};

/* Bytes the guest can still take on c: its buf_alloc minus what is in flight (0 if it lies). */
static inline uint32_t vsock_peer_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;
	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

/* virtio_vsock.c */
void vsock_rx_process(struct virtio_vsock *v);
void vsock_conn_free(struct virtio_vsock *v, struct vsock_conn *c);
void vsock_conn_reset(struct virtio_vsock *v, struct vsock_conn *c);
void vsock_queue_rst(struct virtio_vsock *v, uint32_t src_port, uint32_t dst_port);
void vsock_conn_flush(struct virtio_vsock *v, struct vsock_conn *c);
struct vsock_conn *vsock_conn_alloc(struct virtio_vsock *v);

/* vsock_host.c */
int vsock_host_start(struct virtio_vsock *v, const char *path);
void vsock_host_stop(struct virtio_vsock *v);
/* Registers c's fd with the interest its state calls for (idempotent). */
void vsock_conn_update_events(struct virtio_vsock *v, struct vsock_conn *c);
/* Guest REQUEST to host port: connects to "<path>_<port>". Returns the connection or NULL. */
struct vsock_conn *vsock_host_connect(struct virtio_vsock *v, uint32_t host_port);
