/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox network's links, addresses, routes and rules through libnl-3 (see netcfg.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "net/netcfg.h"
#include "util/cleanup.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_sock, nl_socket_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_link, rtnl_link_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_addr, rtnl_addr_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_route, rtnl_route_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_addr, nl_addr_put)

/* libnl's own error codes, mapped to the errno values callers can act on. */
static int nl_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return 0;
	case NLE_EXIST: return -EEXIST;
	case NLE_NOMEM: return -ENOMEM;
	case NLE_PERM: return -EPERM;
	case NLE_NODEV: return -ENODEV;
	case NLE_OBJ_NOTFOUND: return -ENOENT;
	case NLE_INVAL: return -EINVAL;
	case NLE_OPNOTSUPP: return -EOPNOTSUPP;
	default: return -EIO;
	}
}

static int route_sock(struct nl_sock **ret)
{
	struct nl_sock *s = nl_socket_alloc();
	if (!s)
		return -ENOMEM;
	int r = nl_connect(s, NETLINK_ROUTE);
	if (r < 0) {
		nl_socket_free(s);
		return nl_errno(r);
	}
	*ret = s;
	return 0;
}

static int ifindex_of(const char *name)
{
	unsigned idx = if_nametoindex(name);
	return idx ? (int)idx : -ENODEV;
}

int netcfg_veth_create(const char *name, const char *peer, pid_t peer_pid)
{
	_cleanup_(nl_socket_freep) struct nl_sock *s = NULL;
	int r = route_sock(&s);
	if (r < 0)
		return r;
	_cleanup_(rtnl_link_putp) struct rtnl_link *link = rtnl_link_veth_alloc();
	if (!link)
		return -ENOMEM;
	rtnl_link_set_name(link, name);
	struct rtnl_link *p = rtnl_link_veth_get_peer(link);
	rtnl_link_set_name(p, peer);
	rtnl_link_set_ns_pid(p, peer_pid);
	rtnl_link_put(p);
	return nl_errno(rtnl_link_add(s, link, NLM_F_CREATE | NLM_F_EXCL));
}

int netcfg_link_up(const char *name)
{
	_cleanup_(nl_socket_freep) struct nl_sock *s = NULL;
	int r = route_sock(&s);
	if (r < 0)
		return r;
	_cleanup_(rtnl_link_putp) struct rtnl_link *cur = NULL;
	r = nl_errno(rtnl_link_get_kernel(s, 0, name, &cur));
	if (r < 0)
		return r;
	_cleanup_(rtnl_link_putp) struct rtnl_link *chg = rtnl_link_alloc();
	if (!chg)
		return -ENOMEM;
	rtnl_link_set_flags(chg, IFF_UP);
	return nl_errno(rtnl_link_change(s, cur, chg, 0));
}

static int parse_v4(const char *addr, int prefix, struct nl_addr **ret)
{
	struct in_addr a;
	if (inet_pton(AF_INET, addr, &a) != 1)
		return -EINVAL;
	struct nl_addr *n = nl_addr_build(AF_INET, &a, sizeof(a));
	if (!n)
		return -ENOMEM;
	nl_addr_set_prefixlen(n, prefix);
	*ret = n;
	return 0;
}

int netcfg_addr_add(const char *name, const char *addr, int prefix)
{
	int idx = ifindex_of(name);
	if (idx < 0)
		return idx;
	_cleanup_(nl_socket_freep) struct nl_sock *s = NULL;
	int r = route_sock(&s);
	if (r < 0)
		return r;
	_cleanup_(nl_addr_putp) struct nl_addr *local = NULL;
	r = parse_v4(addr, prefix, &local);
	if (r < 0)
		return r;
	_cleanup_(rtnl_addr_putp) struct rtnl_addr *a = rtnl_addr_alloc();
	if (!a)
		return -ENOMEM;
	rtnl_addr_set_ifindex(a, idx);
	rtnl_addr_set_family(a, AF_INET);
	r = nl_errno(rtnl_addr_set_local(a, local));
	if (r < 0)
		return r;
	return nl_errno(rtnl_addr_add(s, a, 0));
}

/* A unicast or local route to dst (all of IPv4 when dst is NULL) through one next hop. */
static int route_add(int type, int table, const char *gw, int ifindex)
{
	_cleanup_(nl_socket_freep) struct nl_sock *s = NULL;
	int r = route_sock(&s);
	if (r < 0)
		return r;
	_cleanup_(rtnl_route_putp) struct rtnl_route *rt = rtnl_route_alloc();
	_cleanup_(nl_addr_putp) struct nl_addr *any = NULL;
	if (!rt)
		return -ENOMEM;
	r = parse_v4("0.0.0.0", 0, &any);
	if (r < 0)
		return r;
	rtnl_route_set_family(rt, AF_INET);
	rtnl_route_set_type(rt, type);
	rtnl_route_set_table(rt, table);
	rtnl_route_set_scope(rt, type == RTN_LOCAL ? RT_SCOPE_HOST : RT_SCOPE_UNIVERSE);
	r = nl_errno(rtnl_route_set_dst(rt, any));
	if (r < 0)
		return r;
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	if (!nh)
		return -ENOMEM;
	rtnl_route_nh_set_ifindex(nh, ifindex);
	if (gw) {
		struct nl_addr *g = NULL;
		r = parse_v4(gw, 32, &g);
		if (r < 0) {
			rtnl_route_nh_free(nh);
			return r;
		}
		rtnl_route_nh_set_gateway(nh, g);
		nl_addr_put(g);
	}
	rtnl_route_add_nexthop(rt, nh); /* owned by rt now */
	return nl_errno(rtnl_route_add(s, rt, NLM_F_CREATE | NLM_F_EXCL));
}

int netcfg_default_route(const char *name, const char *gw)
{
	int idx = ifindex_of(name);
	if (idx < 0)
		return idx;
	return route_add(RTN_UNICAST, RT_TABLE_MAIN, gw, idx);
}

int netcfg_anyip(void)
{
	int lo = ifindex_of("lo");
	if (lo < 0)
		return lo;
	/* In the local table: replies must find their source address local too (a local route in another
	 * table would accept the SYN but leave the SYN-ACK without a source). */
	return route_add(RTN_LOCAL, RT_TABLE_LOCAL, NULL, lo);
}

int netcfg_link_mac(const char *name, uint8_t mac[6])
{
	struct ifreq ifr = { 0 };
	if (strlen(name) >= sizeof(ifr.ifr_name))
		return -ENAMETOOLONG;
	strcpy(ifr.ifr_name, name);
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		return -errno;
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	return 0;
}

int netcfg_link_set_mac(const char *name, const uint8_t mac[6])
{
	struct ifreq ifr = { 0 };
	if (strlen(name) >= sizeof(ifr.ifr_name))
		return -ENAMETOOLONG;
	strcpy(ifr.ifr_name, name);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	return ioctl(fd, SIOCSIFHWADDR, &ifr) < 0 ? -errno : 0;
}

int netcfg_sysctl(const char *path, const char *value)
{
	char full[256];
	int n = snprintf(full, sizeof(full), "/proc/sys/%s", path);
	if (n < 0 || (size_t)n >= sizeof(full))
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = open(full, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return util_write_all(fd, value, strlen(value));
}

int netcfg_in_netns_of(pid_t pid, int (*fn)(void *arg), void *arg)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int target = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || target < 0)
		return -errno;
	if (setns(target, CLONE_NEWNET) < 0)
		return -errno;
	int r = fn(arg);
	if (setns(self, CLONE_NEWNET) < 0 && r >= 0)
		r = -errno;
	return r;
}
