/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vm-escape-probe: the attacker inside a VM sandbox (root in a real Linux guest), for
 * tests/nested/nested-escape.sh. Static; every attack prints one line, "BLOCKED <name>: <detail>" or
 * "ESCAPED <name>: <detail>", and the host checks its own side (listeners, canary, the VMM's state).
 *
 *   vm-escape-probe net P1,P2.. TOKEN ADDR... TCP to each ADDR on each port, UDP to P1 and DNS to each
 *                                             ADDR, ICMP echo to each ADDR; ESCAPED only when an answer
 *                                             carries TOKEN (a gateway that accepts and refuses is not
 *                                             the host)
 *   vm-escape-probe listen PORT TOKEN SECS    TCP and AF_VSOCK listeners on PORT answering TOKEN; logs
 *                                             "ACCEPTED <peer>" for each connection, for SECS seconds
 *   vm-escape-probe vsock PORT TOKEN          AF_VSOCK connects: other CIDs (another sandbox's listener
 *                                             on PORT, agents on 1024) and the host (CID 2) on ports
 *                                             it does not serve
 *   vm-escape-probe virtq PLATFORM-DEV...     hostile virtqueues: for each unbound virtio-mmio device
 *                                             (e.g. virtio-mmio.1), maps its window through /dev/mem
 *                                             and drives it with malformed descriptor chains
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_ADDRS 32
#define MAX_PORTS 8

static int verdict_escaped;

static void blocked(const char *name, const char *detail)
{
	printf("BLOCKED %s: %s\n", name, detail);
	fflush(stdout);
}

static void escaped(const char *name, const char *detail)
{
	printf("ESCAPED %s: %s\n", name, detail);
	fflush(stdout);
	verdict_escaped = 1;
}

/* Reads what arrives on fd within ms milliseconds; 1 if it contains token. */
static int answer_has(int fd, const char *token, int ms)
{
	char buf[512];
	size_t have = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (have + 1 < sizeof(buf) && poll(&p, 1, ms) == 1) {
		ssize_t n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		if (memmem(buf, have, token, strlen(token)))
			return 1;
	}
	return 0;
}

/* ---- the network ---- */

/* TCP to every address on every port (ports: "P1,P2,..."), all connects in flight at once. */
static void tcp_batch(const char *ports, const char *token, char **addrs, int n)
{
	int fds[MAX_ADDRS * MAX_PORTS], port[MAX_PORTS], np = 0;
	for (const char *p = ports; p && *p && np < MAX_PORTS; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		port[np++] = atoi(p);
	for (int i = 0; i < n * np; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port[i / n]) };
		fds[i] = -1;
		if (inet_pton(AF_INET, addrs[i % n], &sa.sin_addr) != 1)
			continue;
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fds[i] >= 0)
			connect(fds[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	/* 4 s for all of them (ARP gives up after ~3 s). */
	sleep(4);
	for (int i = 0; i < n * np; i++) {
		char name[96], detail[160];
		snprintf(name, sizeof(name), "tcp %s:%d", addrs[i % n], port[i / n]);
		int err = 0;
		socklen_t len = sizeof(err);
		if (fds[i] < 0) {
			blocked(name, "no socket");
			continue;
		}
		getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &err, &len);
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		if (err || getpeername(fds[i], (struct sockaddr *)&peer, &pl) < 0) {
			snprintf(detail, sizeof(detail), "%s", err ? strerror(err) : "no connection (timed out)");
			blocked(name, detail);
		} else if (answer_has(fds[i], token, 2000)) {
			escaped(name, "the host listener answered");
		} else {
			blocked(name, "something accepted (the gateway?) but it is not the host listener");
		}
		close(fds[i]);
	}
}

/* A DNS query for "escape-probe.invalid" (type A); the host's fake resolver answers with TOKEN. */
static size_t dns_query(uint8_t *q)
{
	static const uint8_t hdr[] = { 0x51, 0x7a, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	static const char qname[] = "\014escape-probe\007invalid";
	size_t n = sizeof(hdr);
	memcpy(q, hdr, n);
	memcpy(q + n, qname, sizeof(qname)); /* with its terminating zero label */
	n += sizeof(qname);
	q[n++] = 0, q[n++] = 1, q[n++] = 0, q[n++] = 1;
	return n;
}

/* Every datagram is sent before any answer is awaited: one 2 s wait for the whole batch. */
static void udp_batch(int port, const char *token, char **addrs, int n, int dns)
{
	int fds[MAX_ADDRS];
	for (int i = 0; i < n; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(dns ? 53 : port)) };
		uint8_t q[64];
		size_t len = dns ? dns_query(q) : (size_t)snprintf((char *)q, sizeof(q), "udp-escape");
		fds[i] = -1;
		if (inet_pton(AF_INET, addrs[i], &sa.sin_addr) != 1 || (fds[i] = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
			continue;
		/* connected: only that address's answers arrive on this socket */
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 || send(fds[i], q, len, 0) < 0) {
			close(fds[i]);
			fds[i] = -2;
		}
	}
	sleep(2);
	for (int i = 0; i < n; i++) {
		char name[96];
		snprintf(name, sizeof(name), "%s %s:%d", dns ? "dns" : "udp", addrs[i], dns ? 53 : port);
		if (fds[i] < 0)
			blocked(name, fds[i] == -2 ? "cannot send" : "bad address");
		else if (answer_has(fds[i], token, 100))
			escaped(name, "the host listener answered");
		else
			blocked(name, "no answer from the host");
		if (fds[i] >= 0)
			close(fds[i]);
	}
}

static uint16_t icmp_sum(const void *p, size_t n)
{
	const uint16_t *w = p;
	uint32_t s = 0;
	for (; n > 1; n -= 2)
		s += *w++;
	s = (s >> 16) + (s & 0xffff);
	return (uint16_t)~(s + (s >> 16));
}

static void ping_batch(char **addrs, int n)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	struct in_addr dst[MAX_ADDRS];
	int replied[MAX_ADDRS] = { 0 };
	for (int i = 0; fd >= 0 && i < n; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		dst[i].s_addr = 0;
		if (inet_pton(AF_INET, addrs[i], &sa.sin_addr) != 1 || (ntohl(sa.sin_addr.s_addr) >> 24) == 127)
			continue;
		dst[i] = sa.sin_addr;
		struct icmphdr h = { .type = ICMP_ECHO, .un.echo = { .id = htons(0x5e5e), .sequence = htons((uint16_t)i) } };
		h.checksum = icmp_sum(&h, sizeof(h));
		sendto(fd, &h, sizeof(h), 0, (struct sockaddr *)&sa, sizeof(sa));
	}
	struct pollfd p = { .fd = fd, .events = POLLIN };
	for (time_t end = time(NULL) + 2; fd >= 0 && time(NULL) <= end;) {
		if (poll(&p, 1, 500) != 1)
			continue;
		uint8_t buf[256];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t got = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		size_t ihl = got > 0 ? (size_t)(buf[0] & 15) * 4 : 0;
		if (got < (ssize_t)(ihl + 8) || buf[ihl] != ICMP_ECHOREPLY)
			continue;
		for (int i = 0; i < n; i++)
			if (dst[i].s_addr && dst[i].s_addr == from.sin_addr.s_addr)
				replied[i] = 1;
	}
	for (int i = 0; i < n; i++) {
		char name[96];
		snprintf(name, sizeof(name), "ping %s", addrs[i]);
		if (fd < 0 || !dst[i].s_addr)
			blocked(name, fd < 0 ? "no raw socket" : "skipped (the guest's own loopback)");
		else if (replied[i])
			escaped(name, "echo reply");
		else
			blocked(name, "no echo reply");
	}
	if (fd >= 0)
		close(fd);
}

static int cmd_net(const char *ports, const char *token, char **addrs, int n)
{
	int port = atoi(ports); /* UDP: the first port */
	if (n > MAX_ADDRS)
		n = MAX_ADDRS;
	tcp_batch(ports, token, addrs, n);
	udp_batch(port, token, addrs, n, 0);
	udp_batch(port, token, addrs, n, 1);
	ping_batch(addrs, n);
	return 0;
}

/* ---- listeners (the victim sandbox) ---- */

static int cmd_listen(int port, const char *token, int secs)
{
	int t = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_vm vm = { .svm_family = AF_VSOCK, .svm_port = (unsigned)port, .svm_cid = VMADDR_CID_ANY };
	int v = socket(AF_VSOCK, SOCK_STREAM, 0);
	if (t < 0 || bind(t, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(t, 16) < 0) {
		printf("LISTEN-FAILED tcp: %s\n", strerror(errno));
		return 1;
	}
	if (v < 0 || bind(v, (struct sockaddr *)&vm, sizeof(vm)) < 0 || listen(v, 16) < 0) {
		printf("LISTEN-FAILED vsock: %s\n", strerror(errno));
		return 1;
	}
	printf("LISTENING %d\n", port);
	fflush(stdout);
	time_t end = time(NULL) + secs;
	while (time(NULL) < end) {
		struct pollfd p[2] = { { .fd = t, .events = POLLIN }, { .fd = v, .events = POLLIN } };
		if (poll(p, 2, 1000) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			int c = accept(p[i].fd, NULL, NULL);
			if (c < 0)
				continue;
			printf("ACCEPTED %s\n", i ? "vsock" : "tcp");
			fflush(stdout);
			if (write(c, token, strlen(token)) < 0) {
				/* the peer went away */
			}
			close(c);
		}
	}
	return 0;
}

/* ---- AF_VSOCK ---- */

static int vsock_try(unsigned cid, unsigned port, const char *token, int *got_token)
{
	int fd = socket(AF_VSOCK, SOCK_STREAM, 0);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 3 };
	setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT_OLD, &tv, sizeof(tv));
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_port = port, .svm_cid = cid };
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	*got_token = r == 0 && token && answer_has(fd, token, 1500);
	close(fd);
	return r;
}

static int cmd_vsock(int port, const char *token)
{
	/* Other CIDs: another sandbox (every VM has CID 3 in its own VMM; 4, 5, 100 do not exist). */
	static const unsigned others[] = { 3, 4, 5, 100, 0xfffffffeu };
	/* The host (CID 2) on ports nothing serves there. */
	static const unsigned host_ports[] = { 1, 22, 80, 443, 1025, 2049, 5000, 8080, 9999, 65535 };
	char name[96], detail[160];
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		unsigned ports[2] = { (unsigned)port, 1024 };
		for (int k = 0; k < 2; k++) {
			if (others[i] == 3 && ports[k] == 1024)
				continue; /* CID 3 is this guest too: port 1024 is its own agent */
			int tok = 0;
			int r = vsock_try(others[i], ports[k], token, &tok);
			snprintf(name, sizeof(name), "vsock cid %u port %u", others[i], ports[k]);
			snprintf(detail, sizeof(detail), "%s", r ? strerror(-r) : "connected to this guest only");
			if (tok || (r == 0 && others[i] != 3))
				escaped(name, tok ? "the other sandbox's listener answered" : "connected");
			else
				blocked(name, detail);
		}
	}
	for (size_t i = 0; i < sizeof(host_ports) / sizeof(host_ports[0]); i++) {
		int tok = 0;
		int r = vsock_try(2, host_ports[i] == 9999 ? (unsigned)port : host_ports[i], NULL, &tok);
		snprintf(name, sizeof(name), "vsock host cid 2 port %u", host_ports[i] == 9999 ? (unsigned)port : host_ports[i]);
		if (r == 0)
			escaped(name, "connected to a host port nothing should serve");
		else
			blocked(name, strerror(-r));
	}
	return 0;
}

/* ---- hostile virtqueues through /dev/mem ---- */

#define R_MAGIC 0x000
#define R_DEVICE_ID 0x008
#define R_DEV_FEAT 0x010
#define R_DEV_FEAT_SEL 0x014
#define R_DRV_FEAT 0x020
#define R_DRV_FEAT_SEL 0x024
#define R_QSEL 0x030
#define R_QNUM_MAX 0x034
#define R_QNUM 0x038
#define R_QREADY 0x044
#define R_NOTIFY 0x050
#define R_STATUS 0x070
#define R_QDESC 0x080
#define R_QAVAIL 0x090
#define R_QUSED 0x0a0
#define F_NEXT 1
#define F_WRITE 2
#define F_INDIRECT 4
#define QN 8u
#define BAD_GPA (1ull << 40)

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

struct pages {
	uint8_t *va[5]; /* desc, avail, used, indirect table, data */
	uint64_t pa[5];
};

static volatile uint32_t *mmio;

static void w32(unsigned off, uint32_t v)
{
	mmio[off / 4] = v;
}

static uint32_t r32(unsigned off)
{
	return mmio[off / 4];
}

static void w64(unsigned off, uint64_t v)
{
	w32(off, (uint32_t)v);
	w32(off + 4, (uint32_t)(v >> 32));
}

/* Five locked pages and their guest-physical addresses (from /proc/self/pagemap, root only). */
static int pages_get(struct pages *p)
{
	uint8_t *m = mmap(NULL, 5 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED, -1, 0);
	int fd = open("/proc/self/pagemap", O_RDONLY);
	if (m == MAP_FAILED || fd < 0)
		return -1;
	for (int i = 0; i < 5; i++) {
		p->va[i] = m + i * 4096;
		memset(p->va[i], 0, 4096);
		uint64_t e = 0;
		if (pread(fd, &e, 8, (off_t)(((uintptr_t)p->va[i] / 4096) * 8)) != 8 || !(e >> 63) ||
		    !(e & ((1ull << 55) - 1)))
			return close(fd), -1;
		p->pa[i] = (e & ((1ull << 55) - 1)) * 4096;
	}
	close(fd);
	return 0;
}

/* Resets the device and brings queue q up at the given ring addresses (the driver's sequence). */
static void dev_setup(unsigned q, uint32_t num, uint64_t desc, uint64_t avail, uint64_t used)
{
	w32(R_STATUS, 0);
	w32(R_STATUS, 1);
	w32(R_STATUS, 3);
	for (unsigned s = 0; s < 2; s++) {
		w32(R_DEV_FEAT_SEL, s);
		uint32_t f = r32(R_DEV_FEAT);
		w32(R_DRV_FEAT_SEL, s);
		w32(R_DRV_FEAT, f);
	}
	w32(R_STATUS, 0xb);
	w32(R_QSEL, q);
	w32(R_QNUM, num);
	w64(R_QDESC, desc);
	w64(R_QAVAIL, avail);
	w64(R_QUSED, used);
	w32(R_QREADY, 1);
	w32(R_STATUS, 0xf);
}

enum attack {
	A_BEYOND_RAM, A_TOP, A_WRAP, A_MMIO, A_LEN_HUGE, A_LEN_ZERO, A_LOOP2, A_LOOP_SELF, A_NEXT_RANGE,
	A_LOOP_ALL, A_IND_BEYOND, A_IND_ODD, A_IND_HUGE, A_IND_NESTED, A_IND_LOOP, A_IND_BAD_ADDR, A_IND_NEXT,
	A_HEAD_RANGE, A_AVAIL_JUMP, A_RINGS_BEYOND, A_USED_IN_MMIO, A_QNUM_ODD, A_QNUM_HUGE, A_NOTIFY_BAD,
	A_REG_SWEEP, A_COUNT,
};

static const char *const attack_names[A_COUNT] = {
	"addr-beyond-ram", "addr-top", "addr-wrap", "addr-mmio-window", "len-huge", "len-zero", "loop-2",
	"loop-self", "next-out-of-range", "loop-all", "indirect-beyond-ram", "indirect-len-odd",
	"indirect-len-huge", "indirect-nested", "indirect-loop", "indirect-bad-addr", "indirect-with-next",
	"head-out-of-range", "avail-idx-jump", "rings-beyond-ram", "used-ring-in-mmio", "queue-num-3",
	"queue-num-65535", "notify-bad-queue", "register-sweep",
};

static void run_attack(enum attack a, unsigned q, uint16_t wr, const struct pages *p, uint64_t base)
{
	struct desc *d = (struct desc *)p->va[0], *ind = (struct desc *)p->va[3];
	uint16_t *avail = (uint16_t *)p->va[1];
	uint64_t data = p->pa[4];
	memset(p->va[0], 0, 4096), memset(p->va[1], 0, 4096), memset(p->va[2], 0, 4096), memset(p->va[3], 0, 4096);
	uint32_t num = QN;
	uint64_t dgpa = p->pa[0], ugpa = p->pa[2];
	uint16_t head = 0, idx = 1;
	switch (a) {
	case A_BEYOND_RAM: d[0] = (struct desc){ BAD_GPA, 4096, wr, 0 }; break;
	case A_TOP: d[0] = (struct desc){ 0xfffffffffffff000ull, 4096, wr, 0 }; break;
	case A_WRAP: d[0] = (struct desc){ 0xffffffffffffff00ull, 0x1000, wr, 0 }; break;
	case A_MMIO: d[0] = (struct desc){ base, 0x200, wr, 0 }; break;
	case A_LEN_HUGE: d[0] = (struct desc){ data, 0xffffffffu, wr, 0 }; break;
	case A_LEN_ZERO: d[0] = (struct desc){ data, 0, wr, 0 }; break;
	case A_LOOP2:
		d[0] = (struct desc){ data, 16, wr | F_NEXT, 1 };
		d[1] = (struct desc){ data + 16, 16, wr | F_NEXT, 0 };
		break;
	case A_LOOP_SELF: d[0] = (struct desc){ data, 16, wr | F_NEXT, 0 }; break;
	case A_NEXT_RANGE: d[0] = (struct desc){ data, 16, wr | F_NEXT, 0xffff }; break;
	case A_LOOP_ALL:
		for (unsigned i = 0; i < QN; i++)
			d[i] = (struct desc){ data + 16 * i, 16, wr | F_NEXT, (uint16_t)((i + 1) % QN) };
		break;
	case A_IND_BEYOND: d[0] = (struct desc){ BAD_GPA, 64, F_INDIRECT, 0 }; break;
	case A_IND_ODD: d[0] = (struct desc){ p->pa[3], 15, F_INDIRECT, 0 }; break;
	case A_IND_HUGE: d[0] = (struct desc){ p->pa[3], 0xfffffff0u, F_INDIRECT, 0 }; break;
	case A_IND_NESTED:
		ind[0] = (struct desc){ p->pa[3], 16, F_INDIRECT, 0 };
		d[0] = (struct desc){ p->pa[3], 16, F_INDIRECT, 0 };
		break;
	case A_IND_LOOP:
		ind[0] = (struct desc){ data, 16, wr | F_NEXT, 1 };
		ind[1] = (struct desc){ data + 16, 16, wr | F_NEXT, 0 };
		d[0] = (struct desc){ p->pa[3], 32, F_INDIRECT, 0 };
		break;
	case A_IND_BAD_ADDR:
		ind[0] = (struct desc){ BAD_GPA, 4096, wr, 0 };
		d[0] = (struct desc){ p->pa[3], 16, F_INDIRECT, 0 };
		break;
	case A_IND_NEXT:
		ind[0] = (struct desc){ data, 16, wr, 0 };
		d[0] = (struct desc){ p->pa[3], 16, F_INDIRECT | F_NEXT, 1 };
		d[1] = (struct desc){ data, 16, wr, 0 };
		break;
	case A_HEAD_RANGE: head = 0xffff; break;
	case A_AVAIL_JUMP:
		d[0] = (struct desc){ data, 16, wr, 0 };
		idx = 0x8000;
		break;
	case A_RINGS_BEYOND: dgpa = BAD_GPA; break;
	case A_USED_IN_MMIO: ugpa = base; d[0] = (struct desc){ data, 16, wr, 0 }; break;
	case A_QNUM_ODD: num = 3; d[0] = (struct desc){ data, 16, wr, 0 }; break;
	case A_QNUM_HUGE: num = 0xffff; d[0] = (struct desc){ data, 16, wr, 0 }; break;
	case A_NOTIFY_BAD: case A_REG_SWEEP: case A_COUNT: break;
	}
	avail[2] = head; /* ring[0] */
	__sync_synchronize();
	avail[1] = idx;
	__sync_synchronize();
	dev_setup(q, num, dgpa, p->pa[1], ugpa);
	if (a == A_NOTIFY_BAD) {
		w32(R_NOTIFY, 0xffffffffu);
		w32(R_NOTIFY, 7);
		w32(R_NOTIFY, 0x10000 | q);
	} else if (a == A_REG_SWEEP) {
		for (unsigned off = 0; off < 0x200; off += 4)
			w32(off, off == R_NOTIFY ? q : 0xffffffffu);
		uint32_t sum = 0;
		for (unsigned off = 0; off < 0x1000; off += 4)
			sum += r32(off);
		(void)sum;
	} else {
		w32(R_NOTIFY, q);
	}
	usleep(100000);
	char name[96], detail[96];
	snprintf(name, sizeof(name), "virtq q%u %s", q, attack_names[a]);
	snprintf(detail, sizeof(detail), "device status 0x%x afterwards, used idx %u", r32(R_STATUS),
		 ((volatile uint16_t *)p->va[2])[1]);
	blocked(name, detail);
	w32(R_STATUS, 0);
}

/* The window of an unbound virtio-mmio platform device, from /proc/iomem ("d0001000-d00011ff : NAME"). */
static int window_of(const char *dev, uint64_t *base)
{
	FILE *f = fopen("/proc/iomem", "re");
	char line[256];
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		char name[128];
		if (sscanf(line, " %llx-%llx : %127s", &s, &e, name) == 3 && strcmp(name, dev) == 0)
			*base = s, found = 1;
	}
	if (f)
		fclose(f);
	return found ? 0 : -1;
}

static int cmd_virtq(char **devs, int n)
{
	struct pages p;
	if (pages_get(&p) < 0) {
		printf("VIRTQ-UNAVAILABLE: no guest-physical addresses from /proc/self/pagemap\n");
		return 2;
	}
	int fd = open("/dev/mem", O_RDWR | O_SYNC);
	if (fd < 0) {
		printf("VIRTQ-UNAVAILABLE: /dev/mem: %s\n", strerror(errno));
		return 2;
	}
	int done = 0;
	for (int i = 0; i < n; i++) {
		uint64_t base;
		if (window_of(devs[i], &base) < 0) {
			printf("VIRTQ-UNAVAILABLE: %s not in /proc/iomem\n", devs[i]);
			continue;
		}
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
		if (m == MAP_FAILED) {
			printf("VIRTQ-UNAVAILABLE: mmap of %s at 0x%llx through /dev/mem: %s\n", devs[i],
			       (unsigned long long)base, strerror(errno));
			continue;
		}
		mmio = m;
		uint32_t id = r32(R_DEVICE_ID);
		if (r32(R_MAGIC) != 0x74726976u) {
			printf("VIRTQ-UNAVAILABLE: %s: no virtio-mmio magic\n", devs[i]);
			munmap(m, 4096);
			continue;
		}
		printf("VIRTQ-DEVICE %s id %u at 0x%llx\n", devs[i], id, (unsigned long long)base);
		/* virtio-net: receive (device writes) and transmit (device reads); others: queue 0, writes. */
		unsigned nq = id == 1 ? 2 : 1;
		for (unsigned q = 0; q < nq; q++)
			for (int a = 0; a < A_COUNT; a++)
				run_attack((enum attack)a, q, id == 1 && q == 1 ? 0 : F_WRITE, &p, base);
		munmap(m, 4096);
		done++;
	}
	close(fd);
	printf("VIRTQ-DONE %d devices\n", done);
	return done ? 0 : 2;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && strcmp(argv[1], "net") == 0)
		cmd_net(argv[2], argv[3], argv + 4, argc - 4);
	else if (argc == 5 && strcmp(argv[1], "listen") == 0)
		return cmd_listen(atoi(argv[2]), argv[3], atoi(argv[4]));
	else if (argc == 4 && strcmp(argv[1], "vsock") == 0)
		cmd_vsock(atoi(argv[2]), argv[3]);
	else if (argc >= 3 && strcmp(argv[1], "virtq") == 0)
		return cmd_virtq(argv + 2, argc - 2);
	else {
		fprintf(stderr, "usage: vm-escape-probe net|listen|vsock|virtq ...\n");
		return 2;
	}
	return verdict_escaped;
}
