/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-gateway main: build the sandbox's network (netcfg.h) in a fresh namespace, open the listeners
 * there, switch back to the host namespace for upstream connections, take a uid slot and confine itself
 * (gw_confine.c), report "ready <pid> <uid>" on fd 3 and serve until the sandbox's process ends (or
 * SIGKILL from net_sandbox_detach(), which frees the slot).
 *
 *   space-gateway --state DIR --sandbox ID --netns-pid PID [--tap TAP] [--log-old-fd N] [--events-fd N]
 *                 (configuration JSON on stdin; gateway.log on stderr, opened read-write for rotation)
 *   space-gateway --describe-sandbox     (uid, capabilities and seccomp filter size, as JSON)
 *
 * --tap: the namespace of PID is a VMM's, holding the TAP of the guest's virtio-net; the veth end there
 * is wired to it instead of being configured (the guest configures its eth0 itself).
 * --log-old-fd: gateway.log.1, where gateway.log is rotated; --events-fd: the event spool (net.h). Without
 * them (a gateway run by hand) the log is truncated at its cap and events go to the log only.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "net/gw.h"
#include "net/net.h"
#include "net/netcfg.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/uidalloc.h"
#include "util/util.h"

bool gw_allowed(const struct gw *g, const char *host, uint16_t port)
{
	for (size_t i = 0; i < g->n_allow; i++) {
		const struct gw_allow *a = &g->allow[i];
		if (!net_host_match(a->host, host))
			continue;
		if (port == 0 || a->port == port || (a->port == 0 && (port == 80 || port == 443)))
			return true;
	}
	return false;
}

void gw_throttle(struct gw *g, size_t n)
{
	if (!g->bytes_per_second)
		return;
	pthread_mutex_lock(&g->lock);
	int64_t now = (int64_t)util_now_ns();
	double rate = (double)g->bytes_per_second;
	g->tokens += (double)(now - g->bucket_ns) * rate / 1e9;
	if (g->tokens > rate)
		g->tokens = rate;
	g->bucket_ns = now;
	g->tokens -= (double)n;
	double wait_s = g->tokens < 0 ? -g->tokens / rate : 0;
	pthread_mutex_unlock(&g->lock);
	if (wait_s > 0) {
		struct timespec ts = { (time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9) };
		nanosleep(&ts, NULL);
	}
}

/* ---- configuration -------------------------------------------------------------------------------- */

static int load_config(struct gw *g, cJSON *c, char *err, size_t len)
{
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(c, "allow");
	const cJSON *inject = cJSON_GetObjectItemCaseSensitive(c, "inject");
	const cJSON *lim = cJSON_GetObjectItemCaseSensitive(c, "limits");
	g->allow = calloc((size_t)cJSON_GetArraySize(allow) + 1, sizeof(*g->allow));
	g->inject = calloc((size_t)cJSON_GetArraySize(inject) + 1, sizeof(*g->inject));
	if (!g->allow || !g->inject)
		return -ENOMEM;
	/* Served ports: 80 and 443 always (so attempts there are answered and recorded), plus the policy's. */
	g->ports[g->n_ports++] = 80;
	g->ports[g->n_ports++] = 443;
	const cJSON *e;
	cJSON_ArrayForEach(e, allow) {
		struct gw_allow *a = &g->allow[g->n_allow++];
		snprintf(a->host, sizeof(a->host), "%s", cJSON_GetStringValue(cJSON_GetObjectItem(e, "host")));
		a->port = (uint16_t)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "port"));
		bool have = a->port == 0;
		for (size_t i = 0; i < g->n_ports; i++)
			have |= g->ports[i] == a->port;
		if (!have) {
			if (g->n_ports == GW_MAX_PORTS) {
				snprintf(err, len, "more than %d ports in the policy", GW_MAX_PORTS);
				return -E2BIG;
			}
			g->ports[g->n_ports++] = a->port;
		}
	}
	cJSON_ArrayForEach(e, inject) {
		struct gw_inject *in = &g->inject[g->n_inject++];
		snprintf(in->host, sizeof(in->host), "%s", cJSON_GetStringValue(cJSON_GetObjectItem(e, "host")));
		snprintf(in->header, sizeof(in->header), "%s", cJSON_GetStringValue(cJSON_GetObjectItem(e, "header")));
		const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(e, "value"));
		in->value = strdup(v ? v : "");
		if (!in->value)
			return -ENOMEM;
	}
	g->resolve = cJSON_DetachItemFromObjectCaseSensitive(c, "resolve");
	g->passthrough = cJSON_DetachItemFromObjectCaseSensitive(c, "passthrough");
	double mc = cJSON_GetNumberValue(cJSON_GetObjectItem(lim, "max_connections"));
	double bps = cJSON_GetNumberValue(cJSON_GetObjectItem(lim, "bytes_per_second"));
	g->max_conns = mc >= 1 ? (unsigned)mc : 64;
	g->bytes_per_second = bps >= 1 ? (uint64_t)bps : 0;
	g->bucket_ns = (int64_t)util_now_ns();
	g->tokens = (double)g->bytes_per_second;
	return 0;
}

/* ---- the namespace -------------------------------------------------------------------------------- */

struct guest_side {
	pid_t pid;
};

static int configure_guest(void *arg)
{
	struct gw *g = arg;
	int r = netcfg_link_mac(NETCFG_GUEST_IF, g->guest_mac);
	if (r == 0)
		r = netcfg_addr_add(NETCFG_GUEST_IF, NETCFG_GUEST_ADDR, NETCFG_PREFIX);
	if (r == 0)
		r = netcfg_link_up(NETCFG_GUEST_IF);
	if (r == 0)
		r = netcfg_default_route(NETCFG_GUEST_IF, NETCFG_GW_ADDR);
	/* IPv6 has no gateway: keep the link IPv4-only. */
	(void)netcfg_sysctl("net/ipv6/conf/" NETCFG_GUEST_IF "/disable_ipv6", "1");
	return r;
}

/* A VM sandbox: the namespace is the VMM's. The veth end gets no address; it and the TAP are wired
 * together (netcfg_vm_wire), and the guest configures its own eth0 (NETCFG_VM_CMDLINE). */
static int configure_vm(void *arg)
{
	struct gw *g = arg;
	static const uint8_t mac[6] = NETCFG_VM_MAC;
	memcpy(g->guest_mac, mac, sizeof(mac));
	/* The namespace's own stack stays silent: no IPv6 autoconfiguration on either link. */
	(void)netcfg_sysctl("net/ipv6/conf/all/disable_ipv6", "1");
	(void)netcfg_sysctl("net/ipv6/conf/default/disable_ipv6", "1");
	(void)netcfg_sysctl("net/ipv6/conf/" NETCFG_GUEST_IF "/disable_ipv6", "1");
	(void)netcfg_sysctl("net/ipv4/ip_forward", "0");
	int r = netcfg_vm_wire(g->tap, NETCFG_GUEST_IF, mac, NETCFG_GUEST_ADDR);
	if (r == 0)
		r = netcfg_link_up(NETCFG_GUEST_IF);
	if (r == 0)
		r = netcfg_link_up(g->tap);
	return r;
}

/* Builds the gateway namespace (the caller is in it afterwards) and the guest side. */
static int build_netns(struct gw *g, pid_t guest, const char **step)
{
	static const char *const sysctls[][2] = {
		{ "net/ipv4/ip_forward", "0" },            /* nothing is routed anywhere */
		{ "net/ipv4/conf/all/rp_filter", "1" },    /* strict: spoofed sources are dropped */
		{ "net/ipv4/conf/default/rp_filter", "1" },
		{ "net/ipv4/icmp_echo_ignore_all", "1" },  /* every address is local here: do not answer pings */
		{ "net/ipv6/conf/all/disable_ipv6", "1" },
		{ "net/ipv6/conf/default/disable_ipv6", "1" },
	};
	int r;
	*step = "unshare the network namespace";
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(sysctls); i++) {
		*step = sysctls[i][0];
		if ((r = netcfg_sysctl(sysctls[i][0], sysctls[i][1])) < 0 && strstr(sysctls[i][0], "ipv4"))
			return r;
	}
	*step = "bring up lo";
	if ((r = netcfg_link_up("lo")) < 0)
		return r;
	*step = "create the veth pair";
	if ((r = netcfg_veth_create(NETCFG_GW_IF, NETCFG_GUEST_IF, guest)) < 0)
		return r;
	*step = "configure " NETCFG_GW_IF;
	static const uint8_t gw_mac[6] = NETCFG_GW_MAC;
	if ((r = netcfg_link_set_mac(NETCFG_GW_IF, gw_mac)) < 0 ||
	    (r = netcfg_sysctl("net/ipv4/conf/" NETCFG_GW_IF "/rp_filter", "1")) < 0 ||
	    (r = netcfg_addr_add(NETCFG_GW_IF, NETCFG_GW_ADDR, NETCFG_PREFIX)) < 0 || (r = netcfg_link_up(NETCFG_GW_IF)) < 0)
		return r;
	*step = "route every address to the gateway";
	if ((r = netcfg_anyip()) < 0)
		return r;
	*step = "configure the sandbox side";
	return netcfg_in_netns_of(guest, g->tap ? configure_vm : configure_guest, g);
}

static int listen_tcp(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int open_dns(uint32_t gw_addr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = gw_addr };
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int open_watch(void)
{
	/* Only what watch_packet() looks at reaches user space: frames from the sandbox, and of IPv4 TCP only
	 * the opening SYNs (offsets are from the IP header on a SOCK_DGRAM packet socket). Established
	 * connections' data never wakes the main loop. */
	static const struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_PKTTYPE)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 8, 0),            /* -> drop */
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_PROTOCOL)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 5),                  /* not IPv4 -> keep */
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 3),               /* not TCP -> keep */
		BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),
		BPF_STMT(BPF_LD | BPF_B | BPF_IND, 13),                              /* TCP flags */
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x10, 1, 0),                    /* ACK -> drop */
		BPF_STMT(BPF_RET | BPF_K, 0xffff),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog fp = { .len = ARRAY_SIZE(prog), .filter = (struct sock_filter *)prog };
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = (int)if_nametoindex(NETCFG_GW_IF) };
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* ---- the packet watch ----------------------------------------------------------------------------- */

static bool port_served(const struct gw *g, uint16_t port)
{
	for (size_t i = 0; i < g->n_ports; i++)
		if (g->ports[i] == port)
			return true;
	return false;
}

/* One frame from the sandbox: records what no listening socket will see. */
static void watch_packet(struct gw *g, const uint8_t *p, size_t len, const struct sockaddr_ll *from)
{
	if (from->sll_pkttype == PACKET_OUTGOING)
		return;
	uint16_t proto = ntohs(from->sll_protocol);
	/* No bridge and no forwarding behind gw0: a forged MAC reaches nothing more than the real one. It is
	 * recorded; the IP-level checks below and in the listeners still apply. */
	if (from->sll_halen == 6 && memcmp(from->sll_addr, g->guest_mac, 6)) {
		const uint8_t *m = from->sll_addr;
		gw_event(g, "egress-denied", "frame from %02x:%02x:%02x:%02x:%02x:%02x: spoofed source MAC", m[0], m[1],
			 m[2], m[3], m[4], m[5]);
	}
	if (proto == ETH_P_ARP)
		return;
	if (proto != ETH_P_IP) {
		gw_event(g, "egress-denied", "ethertype 0x%04x: only IPv4 leaves the sandbox", proto);
		return;
	}
	if (len < sizeof(struct iphdr))
		return;
	const struct iphdr *ip = (const struct iphdr *)p;
	size_t ihl = (size_t)ip->ihl * 4;
	if (ihl < sizeof(*ip) || len < ihl)
		return;
	char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &ip->saddr, src, sizeof(src));
	inet_ntop(AF_INET, &ip->daddr, dst, sizeof(dst));
	if (ip->saddr != g->guest_addr) {
		gw_event(g, "egress-denied", "ip %s -> %s: spoofed source address (dropped)", src, dst);
		return;
	}
	const uint8_t *l4 = p + ihl;
	size_t l4len = len - ihl;
	if (ip->protocol == IPPROTO_TCP && l4len >= sizeof(struct tcphdr)) {
		const struct tcphdr *t = (const struct tcphdr *)l4;
		if (t->syn && !t->ack && !port_served(g, ntohs(t->dest)))
			gw_event(g, "egress-denied", "tcp %s:%u: port not allowed", dst, ntohs(t->dest));
	} else if (ip->protocol == IPPROTO_UDP && l4len >= sizeof(struct udphdr)) {
		const struct udphdr *u = (const struct udphdr *)l4;
		if (ip->daddr != g->gw_addr || ntohs(u->dest) != 53)
			gw_event(g, "egress-denied", "udp %s:%u: only DNS to the gateway (" NETCFG_GW_ADDR ":53)", dst,
				 ntohs(u->dest));
	} else if (ip->protocol == IPPROTO_ICMP) {
		gw_event(g, "egress-denied", "icmp %s: not allowed", dst);
	} else if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP) {
		gw_event(g, "egress-denied", "ip protocol %u to %s: not allowed", ip->protocol, dst);
	}
}

/* ---- main ------------------------------------------------------------------------------------------ */

/* This process's start time (util/procstat.h), as the library reads it for any pid: with the pid it names
 * this process in the uid slot's owner text, so a stale slot is recognised after a crash. */
static uint64_t self_start_time(void)
{
	return util_proc_self_start_time();
}

/* A descriptor number passed by the library, which must be open. */
static int fd_arg(const char *s)
{
	uint64_t v;
	if (util_parse_uint(s, 3, INT32_MAX, &v) < 0 || fcntl((int)v, F_GETFD) < 0)
		return -EBADF;
	return (int)v;
}

static void *conn_thread(void *arg)
{
	struct { struct gw *g; int fd; } *a = arg;
	struct gw *g = a->g;
	int fd = a->fd;
	free(a);
	gw_conn_serve(g, fd);
	atomic_fetch_sub(&g->conns, 1);
	return NULL;
}

static void accept_one(struct gw *g, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (atomic_fetch_add(&g->conns, 1) >= g->max_conns) {
		atomic_fetch_sub(&g->conns, 1);
		gw_event(g, "egress-denied", "tcp: more than %u connections at once (limit)", g->max_conns);
		close(fd);
		return;
	}
	struct { struct gw *g; int fd; } *a = malloc(sizeof(*a));
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (!a || (a->g = g, a->fd = fd, pthread_create(&t, &attr, conn_thread, a)) != 0) {
		free(a);
		close(fd);
		atomic_fetch_sub(&g->conns, 1);
	}
	pthread_attr_destroy(&attr);
}

static void serve_dns(struct gw *g, int fd)
{
	uint8_t q[1500], a[1500];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
	if (n <= 0)
		return;
	if (from.sin_addr.s_addr != g->guest_addr) {
		gw_event(g, "egress-denied", "dns query from %s: spoofed source address", inet_ntoa(from.sin_addr));
		return;
	}
	int len = gw_dns_answer(g, q, (size_t)n, a, sizeof(a));
	if (len > 0)
		(void)sendto(fd, a, (size_t)len, 0, (struct sockaddr *)&from, fl);
}

static int run(struct gw *g, pid_t guest, int status_fd)
{
	const char *step = "";
	int r;
	_cleanup_close_ int host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, guest, 0);
	if (host_ns < 0 || pidfd < 0) {
		dprintf(status_fd, "error: sandbox process %d: %s\n", (int)guest, strerror(errno));
		return 1;
	}
	int fds[GW_MAX_PORTS + 3];
	size_t nfds = 0;
	r = build_netns(g, guest, &step);
	for (size_t i = 0; r >= 0 && i < g->n_ports; i++) {
		step = "listen";
		r = fds[nfds++] = listen_tcp(g->ports[i]);
	}
	if (r >= 0) {
		step = "DNS socket";
		r = fds[nfds++] = open_dns(g->gw_addr);
	}
	if (r >= 0) {
		step = "packet socket";
		r = fds[nfds++] = open_watch();
	}
	/* Kept open for the process's life: `nsenter --net=/proc/<pid>/fd/<n>` reaches the gateway side. */
	if (r >= 0 && open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) < 0)
		r = -errno;
	if (r >= 0 && setns(host_ns, CLONE_NEWNET) < 0) {
		step = "return to the host namespace";
		r = -errno;
	}
	if (r < 0) {
		dprintf(status_fd, "error: %s: %s\n", step, strerror(-r));
		return 1;
	}
	/* Everything that needs root is done: from here on the gateway reads what the sandbox sends. */
	uint32_t uid;
	char owner[64], err[512];
	snprintf(owner, sizeof(owner), "pid %d %llu gateway", (int)getpid(), (unsigned long long)self_start_time());
	if ((r = uidalloc_acquire(UIDALLOC_SINGLE, owner, &uid)) < 0) {
		dprintf(status_fd, "error: no uid of its own under %s: %s\n", UIDALLOC_DIR, strerror(-r));
		return 1;
	}
	if ((r = gw_confine(g, uid, err, sizeof(err))) < 0) {
		/* Still root when the uid switch itself failed: the slot can go now (else the reaper frees it). */
		if (geteuid() == 0)
			(void)uidalloc_release(UIDALLOC_SINGLE, uid, owner);
		dprintf(status_fd, "error: confining the gateway: %s\n", err);
		return 1;
	}
	dprintf(status_fd, "ready %d %u\n", (int)getpid(), uid);
	close(status_fd);
	gw_log(g, "serving as uid %u, no capabilities, seccomp (pid %d, %zu ports)", uid, (int)getpid(), g->n_ports);

	struct pollfd p[GW_MAX_PORTS + 4];
	for (size_t i = 0; i < nfds; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	p[nfds] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	for (;;) {
		/* Notes of suppressed events and spool lines wait for the next second at most. */
		int timeout = gw_log_tick(g) ? 1000 : -1;
		if (poll(p, nfds + 1, timeout) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (p[nfds].revents)
			break; /* the sandbox is gone: so is its network */
		for (size_t i = 0; i < g->n_ports; i++)
			if (p[i].revents & POLLIN)
				accept_one(g, p[i].fd);
		if (p[g->n_ports].revents & POLLIN)
			serve_dns(g, p[g->n_ports].fd);
		if (p[g->n_ports + 1].revents & POLLIN) {
			uint8_t frame[2048];
			struct sockaddr_ll from;
			socklen_t fl = sizeof(from);
			for (int k = 0; k < 64; k++) {
				ssize_t n = recvfrom(p[g->n_ports + 1].fd, frame, sizeof(frame), 0, (struct sockaddr *)&from, &fl);
				if (n <= 0)
					break;
				watch_packet(g, frame, (size_t)n, &from);
				fl = sizeof(from);
			}
		}
	}
	gw_log(g, "sandbox ended; exiting");
	(void)gw_log_tick(g);
	return 0;
}

int main(int argc, char **argv)
{
	static struct gw g = { .lock = PTHREAD_MUTEX_INITIALIZER, .ev_lock = PTHREAD_MUTEX_INITIALIZER };
	const char *netns_pid = NULL, *log_old = NULL, *events = NULL;
	if (argc == 2 && !strcmp(argv[1], "--describe-sandbox"))
		return gw_describe_sandbox();
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--state"))
			g.state_dir = argv[i + 1];
		else if (!strcmp(argv[i], "--sandbox"))
			g.sandbox_id = argv[i + 1];
		else if (!strcmp(argv[i], "--netns-pid"))
			netns_pid = argv[i + 1];
		else if (!strcmp(argv[i], "--tap"))
			g.tap = argv[i + 1];
		else if (!strcmp(argv[i], "--log-old-fd"))
			log_old = argv[i + 1];
		else if (!strcmp(argv[i], "--events-fd"))
			events = argv[i + 1];
	}
	uint64_t pid = 0;
	int status_fd = 3;
	if (fcntl(status_fd, F_GETFD) < 0)
		status_fd = 1;
	if (!g.state_dir || !g.sandbox_id || !netns_pid || util_parse_uint(netns_pid, 1, INT32_MAX, &pid) < 0) {
		dprintf(status_fd, "error: usage: space-gateway --state DIR --sandbox ID --netns-pid PID [--tap TAP] "
				   "[--log-old-fd N] [--events-fd N] < config.json\n");
		return 2;
	}
	int log_old_fd = log_old ? fd_arg(log_old) : -1, events_fd = events ? fd_arg(events) : -1;
	if (log_old_fd == -EBADF || events_fd == -EBADF) {
		dprintf(status_fd, "error: --log-old-fd / --events-fd: not an open descriptor\n");
		return 2;
	}
	if (gw_log_init(&g, STDERR_FILENO, log_old_fd, events_fd) < 0) {
		dprintf(status_fd, "error: out of memory\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	char *text = NULL;
	size_t len = 0;
	/* Not /dev/stdin: a minimal /dev (devtmpfs alone) has no such link. */
	if (util_read_file("/proc/self/fd/0", 1 << 20, &text, &len) < 0) {
		dprintf(status_fd, "error: read the configuration on stdin\n");
		return 2;
	}
	cJSON *cfg = cJSON_Parse(text);
	explicit_bzero(text, len);
	free(text);
	char err[512] = "";
	int r = cfg ? load_config(&g, cfg, err, sizeof(err)) : -EINVAL;
	if (r < 0) {
		dprintf(status_fd, "error: configuration: %s\n", err[0] ? err : strerror(-r));
		return 2;
	}
	inet_pton(AF_INET, NETCFG_GUEST_ADDR, &g.guest_addr);
	inet_pton(AF_INET, NETCFG_GW_ADDR, &g.gw_addr);
	g.names = calloc(GW_MAX_NAMES, sizeof(*g.names));
	const char *ca_file = cJSON_GetStringValue(cJSON_GetObjectItem(cfg, "ca_file"));
	if (!g.names || gw_tls_init(&g, ca_file, err, sizeof(err)) < 0) {
		dprintf(status_fd, "error: %s\n", err[0] ? err : "out of memory");
		return 1;
	}
	/* The configuration's copies of the secrets: gone before serving (g.inject keeps the values). */
	const cJSON *rule;
	cJSON_ArrayForEach(rule, cJSON_GetObjectItem(cfg, "inject")) {
		char *v = cJSON_GetStringValue(cJSON_GetObjectItem(rule, "value"));
		if (v)
			explicit_bzero(v, strlen(v));
	}
	cJSON_Delete(cfg);
	return run(&g, (pid_t)pid, status_fd);
}
