/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netcfg: the links, addresses, routes and rules of a sandbox's network, set up with libnl-3 in the
 * calling thread's current network namespace. Private to libspace and space-gateway.
 *
 * Layout (the same in every sandbox: each pair lives in two private namespaces, so nothing collides):
 *   sandbox netns:  eth0 NETCFG_GUEST_ADDR/30, default route via NETCFG_GW_ADDR
 *   gateway netns:  gw0  NETCFG_GW_ADDR/30, lo, every address local (netcfg_anyip), no forwarding: the only things the sandbox reaches are the gateway's own sockets.
 * All functions return 0 or -errno.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NETCFG_GW_ADDR "10.201.0.1"
#define NETCFG_GUEST_ADDR "10.201.0.2"
#define NETCFG_PREFIX 30
#define NETCFG_GW_IF "gw0"
/* gw0's MAC, the same in every gateway: a guest restored from a snapshot (fork, rollback, template
 * snapshot) keeps its ARP entry for NETCFG_GW_ADDR, which must still be right behind its new gateway. */
#define NETCFG_GW_MAC { 0x02, 0x00, 0x0a, 0xc9, 0x00, 0x01 }
#define NETCFG_GUEST_IF "eth0"

/*
 * A VM sandbox: the guest's virtio-net eth0 has the sandbox address above, this fixed MAC and MTU (the
 * same in every VM, so a memory snapshot restored into another sandbox keeps a valid network); its TAP
 * NETCFG_VM_TAP and the veth end NETCFG_GUEST_IF sit in the VMM's network namespace, joined by
 * netcfg_vm_wire(). NETCFG_VM_CMDLINE is the agent's space.net= kernel parameter:
 * ADDR/PREFIX,GATEWAY,MAC,MTU.
 */
#define NETCFG_VM_TAP "tap0"
#define NETCFG_VM_MAC { 0x02, 0x00, 0x0a, 0xc9, 0x00, 0x02 }
#define NETCFG_VM_MAC_STR "02:00:0a:c9:00:02"
#define NETCFG_VM_MTU "1500"
#define NETCFG_VM_CMDLINE NETCFG_GUEST_ADDR "/30," NETCFG_GW_ADDR "," NETCFG_VM_MAC_STR "," NETCFG_VM_MTU

/* Creates a veth pair: `name` in the current netns, `peer` directly in the netns of process peer_pid. */
int netcfg_veth_create(const char *name, const char *peer, pid_t peer_pid);

/* Sets a link up. */
int netcfg_link_up(const char *name);

/* Adds an IPv4 address "a.b.c.d" with the prefix length to a link. */
int netcfg_addr_add(const char *name, const char *addr, int prefix);

/* Adds a default route via gw on link name. */
int netcfg_default_route(const char *name, const char *gw);

/* Makes every IPv4 destination local in the current namespace (`local 0.0.0.0/0 dev lo` in the local
 * table), so sockets bound to 0.0.0.0 accept connections to any address and getsockname() tells the
 * original destination. Only for a namespace that holds nothing but the gateway's sockets. */
int netcfg_anyip(void);

/* The link's MAC address. */
int netcfg_link_mac(const char *name, uint8_t mac[6]);
/* Sets the MAC address of a link that is down. */
int netcfg_link_set_mac(const char *name, const uint8_t mac[6]);

/* In the current namespace (a VMM's), wires TAP tap to link: frames from the guest pass only with source
 * MAC mac and, for IPv4 and ARP, source address guest_addr (others are dropped); frames from link all go
 * to the guest. tc ingress hooks, no bridge, no address, no forwarding (netcfg_tc.c). */
int netcfg_vm_wire(const char *tap, const char *link, const uint8_t mac[6], const char *guest_addr);

/* Writes value to /proc/sys/<path> of the current network namespace. */
int netcfg_sysctl(const char *path, const char *value);

/* Runs fn(arg) with the calling thread switched into the network namespace of pid, then switches back.
 * Returns fn's result, or -errno if the switch failed. */
int netcfg_in_netns_of(pid_t pid, int (*fn)(void *arg), void *arg);
