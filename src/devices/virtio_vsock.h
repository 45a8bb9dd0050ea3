/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-vsock (virtio 1.x, 5.10) over virtio-mmio: stream sockets between the guest and host unix
 * sockets, Firecracker-style.
 *
 * Host side: the device listens on the unix socket uds_path. A host client connects, writes
 * "CONNECT <port>\n" and, once the guest accepted, reads "OK <hostport>\n"; from then on the unix
 * stream is the connection to the guest's vsock port. A guest connect() to host port P is bridged to
 * the unix socket "<uds_path>_<P>" when something listens there, and refused (RST) otherwise.
 */
#pragma once

#include <stdint.h>

#include "devices/mmio_dev.h"

#define VIRTIO_ID_VSOCK 19u
#define VIRTIO_VSOCK_HOST_CID 2u
#define VIRTIO_VSOCK_QUEUE_SIZE 256u
#define VIRTIO_VSOCK_MAX_CONNS 64u
/* Credit the device gives the guest per connection: bytes it buffers for the host socket. */
#define VIRTIO_VSOCK_BUF_ALLOC (64u << 10)
/* Largest payload of one packet, either way. */
#define VIRTIO_VSOCK_MAX_PKT (64u << 10)

#define VIRTIO_VSOCK_TYPE_STREAM 1u
#define VIRTIO_VSOCK_OP_REQUEST 1u
#define VIRTIO_VSOCK_OP_RESPONSE 2u
#define VIRTIO_VSOCK_OP_RST 3u
#define VIRTIO_VSOCK_OP_SHUTDOWN 4u
#define VIRTIO_VSOCK_OP_RW 5u
#define VIRTIO_VSOCK_OP_CREDIT_UPDATE 6u
#define VIRTIO_VSOCK_OP_CREDIT_REQUEST 7u
#define VIRTIO_VSOCK_SHUTDOWN_RCV 1u
#define VIRTIO_VSOCK_SHUTDOWN_SEND 2u

/* The packet header (little-endian on the wire; x86 hosts only). */
struct virtio_vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));
_Static_assert(sizeof(struct virtio_vsock_hdr) == 44, "virtio-vsock header layout");

struct virtio_vsock_config {
	uint64_t guest_cid;    /* 3..UINT32_MAX-1 */
	const char *uds_path;  /* host listening socket; a stale socket file there is replaced */
	/* Called by the host-side event thread after each wake-up, before it touches guest memory (the
	 * VMM narrows the thread's seccomp filter there); a negative return ends the thread. NULL: none. */
	int (*thread_enter)(void);
};

/*
 * Creates the device and its host-side event thread (listening on cfg->uds_path). On success fills
 * *ret and returns 0; the VMM sets ret->base and ret->gsi. Frees (stopping the thread, closing every
 * socket) through ret->ops->destroy(ret->dev).
 */
int virtio_vsock_create(const struct virtio_vsock_config *cfg, const struct guest_mem *mem,
			struct mmio_irq irq, struct mmio_dev *ret);
