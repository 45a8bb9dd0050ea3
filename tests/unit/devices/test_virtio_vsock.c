/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-vsock driven by a C guest driver over fake guest RAM, with real unix sockets on the host
 * side: identity and config, host-initiated streams (CONNECT line, OK reply, data both ways, close),
 * guest-initiated streams to "<path>_<port>" and refusal when nobody listens, credit both ways (the
 * device never exceeds the guest's window; a guest exceeding ours is reset), many concurrent
 * streams, malformed CONNECT lines, and hostile packets.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "util/util.h"
#include "vsockdrv.h"

#define CID 42u
#define WAIT_MS 2000

static char dir[128], path[160];

static int unix_connect(const char *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int unix_listen(const char *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p);
	unlink(p);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Reads exactly n bytes within WAIT_MS; returns the bytes read (< n on EOF or timeout). */
static size_t read_for(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, WAIT_MS) <= 0)
			break;
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Whether fd reaches EOF (or a reset) within WAIT_MS, discarding data. */
static bool sees_eof(int fd)
{
	char buf[4096];
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, WAIT_MS) <= 0)
			return false;
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r <= 0)
			return true;
	}
}

/* Host client connects through the device to guest port; the guest accepts. Returns the fd. */
static int host_connect(struct vsd *s, uint32_t port, uint32_t guest_port, uint32_t *host_port,
			uint32_t buf_alloc)
{
	struct virtio_vsock_hdr h;
	int fd = unix_connect(path);
	char line[32];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return -1;
	if (vsd_recv(s, &h, NULL, 0, WAIT_MS) != 0 || h.op != VIRTIO_VSOCK_OP_REQUEST || h.dst_port != port ||
	    h.dst_cid != CID || h.src_cid != VIRTIO_VSOCK_HOST_CID || h.type != VIRTIO_VSOCK_TYPE_STREAM ||
	    h.buf_alloc != VIRTIO_VSOCK_BUF_ALLOC || h.src_port < (1u << 30)) {
		close(fd);
		return -1;
	}
	*host_port = h.src_port;
	(void)guest_port;
	vsd_send(s, port, h.src_port, VIRTIO_VSOCK_OP_RESPONSE, 0, NULL, 0, buf_alloc, 0);
	char ok[32] = { 0 }, want[32];
	int wn = snprintf(want, sizeof(want), "OK %u\n", h.src_port);
	if (read_for(fd, ok, (size_t)wn) != (size_t)wn || memcmp(ok, want, (size_t)wn) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_identity(void)
{
	struct vsd s;
	CHECK(vsd_start(&s, CID, path) == 0);
	CHECK(vdrv_rd(&s.d, VIRTIO_MMIO_DEVICE_ID) == VIRTIO_ID_VSOCK);
	CHECK(vdrv_rd(&s.d, VIRTIO_MMIO_CONFIG) == CID && vdrv_rd(&s.d, VIRTIO_MMIO_CONFIG + 4) == 0);
	for (unsigned q = 0; q < 4; q++) {
		vdrv_wr(&s.d, VIRTIO_MMIO_QUEUE_SEL, q);
		CHECK(vdrv_rd(&s.d, VIRTIO_MMIO_QUEUE_NUM_MAX) == (q < 3 ? VIRTIO_VSOCK_QUEUE_SIZE : 0));
	}
	vsd_stop(&s);
	/* A CID the spec reserves is refused. */
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0);
	struct virtio_vsock_config cfg = { .guest_cid = 2, .uds_path = path };
	CHECK(virtio_vsock_create(&cfg, &d.mem, vdrv_irq(&d), &d.dev) == -EINVAL);
	/* A socket path that cannot be bound fails creation cleanly. */
	cfg = (struct virtio_vsock_config){ .guest_cid = CID, .uds_path = "/nonexistent-dir/v.sock" };
	CHECK(virtio_vsock_create(&cfg, &d.mem, vdrv_irq(&d), &d.dev) == -ENOENT);
	CHECK(d.dev.ops == NULL);
	vdrv_done(&d);
}

static void test_host_initiated(void)
{
	struct vsd s;
	struct virtio_vsock_hdr h;
	char buf[64];
	uint32_t hp;
	CHECK(vsd_start(&s, CID, path) == 0);
	int fd = host_connect(&s, 1024, 1024, &hp, 1u << 16);
	CHECK(fd >= 0);
	if (fd < 0)
		goto out;
	CHECK(write(fd, "hello", 5) == 5);
	CHECK(vsd_recv(&s, &h, buf, sizeof(buf), WAIT_MS) == 5);
	CHECK(h.op == VIRTIO_VSOCK_OP_RW && h.len == 5 && h.src_port == hp && h.dst_port == 1024 &&
	      memcmp(buf, "hello", 5) == 0);
	CHECK(vsd_send(&s, 1024, hp, VIRTIO_VSOCK_OP_RW, 0, "world!", 6, 1u << 16, 5));
	CHECK(read_for(fd, buf, 6) == 6 && memcmp(buf, "world!", 6) == 0);
	/* The host client closes: the guest is told both directions ended, and answers RST. */
	close(fd);
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0);
	CHECK(h.op == VIRTIO_VSOCK_OP_SHUTDOWN && h.flags == 3 && h.fwd_cnt == 6);
	CHECK(vsd_send(&s, 1024, hp, VIRTIO_VSOCK_OP_RST, 0, NULL, 0, 0, 0));
	/* The connection is gone: data for it is answered with RST. */
	CHECK(vsd_send(&s, 1024, hp, VIRTIO_VSOCK_OP_RW, 0, "x", 1, 1u << 16, 0));
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0 && h.op == VIRTIO_VSOCK_OP_RST);
	CHECK(!vdrv_needs_reset(&s.d));
out:
	vsd_stop(&s);
}

static void test_guest_initiated(void)
{
	struct vsd s;
	struct virtio_vsock_hdr h;
	char p[200], buf[64];
	snprintf(p, sizeof(p), "%s_5000", path);
	int lfd = unix_listen(p);
	CHECK(lfd >= 0);
	CHECK(vsd_start(&s, CID, path) == 0);
	CHECK(vsd_send(&s, 7777, 5000, VIRTIO_VSOCK_OP_REQUEST, 0, NULL, 0, 1u << 16, 0));
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0);
	CHECK(h.op == VIRTIO_VSOCK_OP_RESPONSE && h.src_port == 5000 && h.dst_port == 7777);
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(vsd_send(&s, 7777, 5000, VIRTIO_VSOCK_OP_RW, 0, "ping", 4, 1u << 16, 0));
	CHECK(read_for(fd, buf, 4) == 4 && memcmp(buf, "ping", 4) == 0);
	CHECK(write(fd, "pong", 4) == 4);
	CHECK(vsd_recv(&s, &h, buf, sizeof(buf), WAIT_MS) == 4 && memcmp(buf, "pong", 4) == 0);
	/* Guest SHUTDOWN(SEND): the host side reads EOF; then SHUTDOWN(RCV) ends it with RST. */
	CHECK(vsd_send(&s, 7777, 5000, VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_SHUTDOWN_SEND, NULL, 0,
		       1u << 16, 4));
	CHECK(sees_eof(fd));
	CHECK(vsd_send(&s, 7777, 5000, VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_SHUTDOWN_RCV, NULL, 0,
		       1u << 16, 4));
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0 && h.op == VIRTIO_VSOCK_OP_RST && h.dst_port == 7777);
	if (fd >= 0)
		close(fd);
	/* Nobody listens on port 5001: RST. */
	CHECK(vsd_send(&s, 7778, 5001, VIRTIO_VSOCK_OP_REQUEST, 0, NULL, 0, 1u << 16, 0));
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0 && h.op == VIRTIO_VSOCK_OP_RST && h.dst_port == 7778);
	vsd_stop(&s);
	close(lfd);
	unlink(p);
}

static void test_credit_to_guest(void)
{
	struct vsd s;
	struct virtio_vsock_hdr h;
	char buf[256], data[100];
	uint32_t hp;
	CHECK(vsd_start(&s, CID, path) == 0);
	int fd = host_connect(&s, 1025, 1025, &hp, 16); /* the guest has room for 16 bytes */
	CHECK(fd >= 0);
	if (fd < 0)
		goto out;
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (char)i;
	CHECK(write(fd, data, sizeof(data)) == (ssize_t)sizeof(data));
	int n = vsd_recv(&s, &h, buf, sizeof(buf), WAIT_MS);
	CHECK(n == 16 && memcmp(buf, data, 16) == 0);
	CHECK(vsd_recv(&s, &h, buf, sizeof(buf), 200) == -1); /* window full: nothing more */
	/* The guest asks for our credit and gets it; then frees 16 bytes and gets the next 16. */
	CHECK(vsd_send(&s, 1025, hp, VIRTIO_VSOCK_OP_CREDIT_REQUEST, 0, NULL, 0, 16, 0));
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0 && h.op == VIRTIO_VSOCK_OP_CREDIT_UPDATE &&
	      h.buf_alloc == VIRTIO_VSOCK_BUF_ALLOC);
	CHECK(vsd_send(&s, 1025, hp, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0, 16, 16));
	n = vsd_recv(&s, &h, buf, sizeof(buf), WAIT_MS);
	CHECK(n == 16 && memcmp(buf, data + 16, 16) == 0);
	/* A lying fwd_cnt (more freed than ever sent) gives no credit. */
	CHECK(vsd_send(&s, 1025, hp, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0, 16, 1000));
	CHECK(vsd_recv(&s, &h, buf, sizeof(buf), 200) == -1);
	close(fd);
out:
	vsd_stop(&s);
}

static void test_credit_from_guest(void)
{
	struct vsd s;
	struct virtio_vsock_hdr h;
	uint32_t hp;
	static char chunk[60000];
	CHECK(vsd_start(&s, CID, path) == 0);
	int fd = host_connect(&s, 1026, 1026, &hp, 1u << 16);
	CHECK(fd >= 0);
	if (fd < 0)
		goto out;
	/* The host client reads nothing: the socket buffer fills, then our 64 KiB window, then RST. */
	int sent = 0, n;
	bool rst = false;
	for (sent = 0; sent < 64 && !rst; sent++) {
		CHECK(vsd_send(&s, 1026, hp, VIRTIO_VSOCK_OP_RW, 0, chunk, sizeof(chunk), 1u << 16, 0));
		while ((n = vsd_recv(&s, &h, NULL, 0, 20)) >= 0)
			rst = rst || h.op == VIRTIO_VSOCK_OP_RST;
	}
	CHECK(rst);
	CHECK(sees_eof(fd)); /* whatever fit was delivered, then the socket closed */
	close(fd);
out:
	vsd_stop(&s);
}

/* Out of rx buffers: the device asks to be notified (EVENT_IDX) and resumes when buffers return. */
static void test_rx_starvation(void)
{
	struct vsd s;
	struct virtio_vsock_hdr h;
	uint32_t hp;
	static char data[(VSD_QSIZE + 8) * VSD_RX_BUF];
	static char got[(VSD_QSIZE + 8) * VSD_RX_BUF];
	uint16_t slots[VSD_QSIZE];
	CHECK(vsd_start(&s, CID, path) == 0);
	int fd = host_connect(&s, 1028, 1028, &hp, 1u << 20);
	CHECK(fd >= 0);
	if (fd < 0)
		goto out;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + i / 4096);
	CHECK(write(fd, data, sizeof(data)) == (ssize_t)sizeof(data));
	s.no_repost = true;
	size_t total = 0;
	unsigned n = 0;
	int len;
	while (n < VSD_QSIZE && (len = vsd_recv(&s, &h, got + total, VSD_RX_BUF, 300)) >= 0) {
		CHECK(h.op == VIRTIO_VSOCK_OP_RW && (uint32_t)len == h.len);
		total += (size_t)len;
		slots[n++] = s.last_rx;
	}
	CHECK(n == VSD_QSIZE); /* every buffer used, some data still waiting on the host socket */
	CHECK(total < sizeof(data));
	CHECK(vsd_rx_avail_event(&s) == s.q[0].avail_idx);
	s.no_repost = false;
	for (unsigned i = 0; i < n; i++)
		vsd_repost(&s, slots[i]);
	while (total < sizeof(data) && (len = vsd_recv(&s, &h, got + total, VSD_RX_BUF, WAIT_MS)) >= 0)
		total += (size_t)len;
	CHECK(total == sizeof(data) && memcmp(got, data, sizeof(data)) == 0);
	close(fd);
out:
	vsd_stop(&s);
}

static void test_many_streams(void)
{
	enum { N = 40 };
	struct vsd s;
	struct virtio_vsock_hdr h;
	int fds[N];
	uint32_t hp[N];
	char buf[64];
	CHECK(vsd_start(&s, CID, path) == 0);
	for (int i = 0; i < N; i++) {
		fds[i] = host_connect(&s, 2000 + (uint32_t)i, 0, &hp[i], 1u << 16);
		CHECK(fds[i] >= 0);
	}
	for (int i = 0; i < N; i++) {
		char msg[16];
		int len = snprintf(msg, sizeof(msg), "stream-%d", i);
		CHECK(vsd_send(&s, 2000 + (uint32_t)i, hp[i], VIRTIO_VSOCK_OP_RW, 0, msg, (uint32_t)len, 1u << 16, 0));
		CHECK(fds[i] >= 0 && read_for(fds[i], buf, (size_t)len) == (size_t)len && memcmp(buf, msg, (size_t)len) == 0);
		CHECK(fds[i] >= 0 && write(fds[i], msg, (size_t)len) == len);
	}
	int seen = 0;
	while (vsd_recv(&s, &h, buf, sizeof(buf), 500) >= 0) {
		int i = (int)h.dst_port - 2000;
		char msg[16];
		int len = snprintf(msg, sizeof(msg), "stream-%d", i);
		CHECK(h.op == VIRTIO_VSOCK_OP_RW && i >= 0 && i < N && h.src_port == hp[i] && (int)h.len == len &&
		      memcmp(buf, msg, (size_t)len) == 0);
		seen++;
	}
	CHECK(seen == N);
	for (int i = 0; i < N; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	vsd_stop(&s);
}

static void test_bad_connect_lines(void)
{
	static const char *bad[] = { "HELLO\n", "CONNECT\n", "CONNECT x1\n", "CONNECT 99999999999\n",
				     "CONNECT 1234567890123456789012345678901234567890\n" };
	struct vsd s;
	struct virtio_vsock_hdr h;
	CHECK(vsd_start(&s, CID, path) == 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = unix_connect(path);
		CHECK(fd >= 0 && write(fd, bad[i], strlen(bad[i])) == (ssize_t)strlen(bad[i]));
		CHECK(fd >= 0 && sees_eof(fd));
		if (fd >= 0)
			close(fd);
	}
	CHECK(vsd_recv(&s, &h, NULL, 0, 100) == -1); /* the guest heard of none of them */
	vsd_stop(&s);
}

static void test_hostile_packets(void)
{
	struct vsd s;
	struct virtio_vsock_hdr h, g;
	uint32_t hp;
	CHECK(vsd_start(&s, CID, path) == 0);
	int fd = host_connect(&s, 1027, 1027, &hp, 1u << 16);
	CHECK(fd >= 0);
	/* A header cut short is used and ignored. */
	g = (struct virtio_vsock_hdr){ .src_cid = CID, .dst_cid = 2, .src_port = 1, .dst_port = 2,
				       .type = VIRTIO_VSOCK_TYPE_STREAM, .op = VIRTIO_VSOCK_OP_REQUEST };
	CHECK(vsd_send_raw(&s, &g, 20, NULL, 0));
	CHECK(vsd_recv(&s, &h, NULL, 0, 100) == -1);
	/* Wrong type, wrong source CID, wrong destination CID, unknown op to nobody: RST each. */
	struct virtio_vsock_hdr variants[4];
	for (int i = 0; i < 4; i++)
		variants[i] = g;
	variants[0].type = 2;
	variants[1].src_cid = CID + 1;
	variants[2].dst_cid = 1;
	variants[3].op = 99;
	for (int i = 0; i < 4; i++) {
		CHECK(vsd_send_raw(&s, &variants[i], sizeof(g), NULL, 0));
		CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0 && h.op == VIRTIO_VSOCK_OP_RST && h.dst_port == 1 &&
		      h.src_port == 2);
	}
	/* A length beyond the buffer on a live connection resets it; the host client sees EOF. */
	g = (struct virtio_vsock_hdr){ .src_cid = CID, .dst_cid = 2, .src_port = 1027, .dst_port = hp, .len = 100,
				       .type = VIRTIO_VSOCK_TYPE_STREAM, .op = VIRTIO_VSOCK_OP_RW, .buf_alloc = 4096 };
	CHECK(vsd_send_raw(&s, &g, sizeof(g), "abc", 3));
	CHECK(vsd_recv(&s, &h, NULL, 0, WAIT_MS) == 0 && h.op == VIRTIO_VSOCK_OP_RST && h.dst_port == 1027);
	CHECK(fd >= 0 && sees_eof(fd));
	if (fd >= 0)
		close(fd);
	CHECK(!vdrv_needs_reset(&s.d));
	vsd_stop(&s);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/vsock-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/v.sock", dir);
	RUN(test_identity);
	RUN(test_host_initiated);
	RUN(test_guest_initiated);
	RUN(test_credit_to_guest);
	RUN(test_credit_from_guest);
	RUN(test_rx_starvation);
	RUN(test_many_streams);
	RUN(test_bad_connect_lines);
	RUN(test_hostile_packets);
	util_rm_rf(dir);
	return check_failures ? 1 : 0;
}
