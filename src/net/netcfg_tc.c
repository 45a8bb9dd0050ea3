/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire between a VM's TAP and its gateway link, inside the VMM's network namespace (see netcfg.h,
 * netcfg_vm_wire): two ingress hooks with tc, built as rtnetlink messages through libnl-3.
 *
 *   TAP ingress:  a classic BPF guard (direct action) passes only frames from the guest's MAC carrying
 *                 IPv4 from the guest's address, or ARP whose sender is that MAC and address; everything
 *                 else (a spoofed MAC or address, IPv6, any other ethertype) is dropped there. What
 *                 passes is redirected out of the gateway link by the next filter.
 *   link ingress: every frame from the gateway -> redirected out of the TAP.
 *
 * The namespace's own stack never sees a frame, has no address and forwards nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <string.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>

#include "net/netcfg.h"
#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_sock, nl_socket_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_msg, nlmsg_free)

#define INGRESS_PARENT 0xffff0000u /* the ingress qdisc's handle ffff: */

static int tc_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return 0;
	case NLE_EXIST: return -EEXIST;
	case NLE_NOMEM: return -ENOMEM;
	case NLE_PERM: return -EPERM;
	case NLE_NODEV: return -ENODEV;
	case NLE_OBJ_NOTFOUND: return -ENOENT;
	case NLE_OPNOTSUPP: return -EOPNOTSUPP;
	default: return -EINVAL;
	}
}

/* Sends msg and waits for the kernel's acknowledgement. */
static int tc_send(struct nl_msg *msg)
{
	_cleanup_(nl_socket_freep) struct nl_sock *s = nl_socket_alloc();
	if (!s)
		return -ENOMEM;
	int r = nl_connect(s, NETLINK_ROUTE);
	if (r >= 0)
		r = nl_send_auto(s, msg);
	if (r >= 0)
		r = nl_wait_for_ack(s);
	return r < 0 ? tc_errno(r) : 0;
}

static struct nl_msg *tc_msg(int type, int ifindex, uint32_t handle, uint32_t parent, uint32_t info)
{
	struct nl_msg *msg = nlmsg_alloc_simple(type, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex, .tcm_handle = handle,
			     .tcm_parent = parent, .tcm_info = info };
	if (msg && nlmsg_append(msg, &tcm, sizeof(tcm), NLMSG_ALIGNTO) < 0) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

static int add_ingress_qdisc(int ifindex)
{
	_cleanup_(nlmsg_freep) struct nl_msg *msg = tc_msg(RTM_NEWQDISC, ifindex, INGRESS_PARENT, TC_H_INGRESS, 0);
	if (!msg || nla_put_string(msg, TCA_KIND, "ingress") < 0)
		return -ENOMEM;
	return tc_send(msg);
}

/* A cls_bpf filter at ingress of ifindex running prog. redirect_to > 0: a frame prog matches (returns
 * non-zero) is redirected out of that link. 0: prog's result is the tc verdict itself (direct action:
 * TC_ACT_SHOT drops, TC_ACT_UNSPEC goes on to the next filter). */
static int add_filter(int ifindex, uint16_t prio, const struct sock_filter *prog, uint16_t len, int redirect_to)
{
	_cleanup_(nlmsg_freep) struct nl_msg *msg =
		tc_msg(RTM_NEWTFILTER, ifindex, 0, INGRESS_PARENT, TC_H_MAKE((uint32_t)prio << 16, htons(ETH_P_ALL)));
	if (!msg || nla_put_string(msg, TCA_KIND, "bpf") < 0)
		return -ENOMEM;
	struct nlattr *opts = nla_nest_start(msg, TCA_OPTIONS);
	if (!opts || nla_put_u16(msg, TCA_BPF_OPS_LEN, len) < 0 ||
	    nla_put(msg, TCA_BPF_OPS, (int)(len * sizeof(*prog)), prog) < 0)
		return -ENOMEM;
	if (redirect_to) {
		struct tc_mirred m = { .action = TC_ACT_STOLEN, .eaction = TCA_EGRESS_REDIR,
				       .ifindex = (uint32_t)redirect_to };
		struct nlattr *acts = nla_nest_start(msg, TCA_BPF_ACT);
		struct nlattr *act = acts ? nla_nest_start(msg, 1) : NULL;
		struct nlattr *aopts = NULL;
		if (!act || nla_put_string(msg, TCA_ACT_KIND, "mirred") < 0 ||
		    !(aopts = nla_nest_start(msg, TCA_ACT_OPTIONS)) || nla_put(msg, TCA_MIRRED_PARMS, sizeof(m), &m) < 0)
			return -ENOMEM;
		nla_nest_end(msg, aopts);
		nla_nest_end(msg, act);
		nla_nest_end(msg, acts);
	} else if (nla_put_u32(msg, TCA_BPF_FLAGS, TCA_BPF_FLAG_ACT_DIRECT) < 0) {
		return -ENOMEM;
	}
	nla_nest_end(msg, opts);
	return tc_send(msg);
}

static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int netcfg_vm_wire(const char *tap, const char *link, const uint8_t mac[6], const char *guest_addr)
{
	int tap_idx = (int)if_nametoindex(tap), link_idx = (int)if_nametoindex(link);
	if (!tap_idx || !link_idx)
		return -ENODEV;
	struct in_addr a;
	if (inet_pton(AF_INET, guest_addr, &a) != 1)
		return -EINVAL;
	uint32_t ip = ntohl(a.s_addr), m_hi = be32_at(mac), m_lo = (uint32_t)mac[4] << 8 | mac[5];
	/* Offsets are from the Ethernet header (cls_bpf pushes it back at ingress). Jumps land on PASS or
	 * DROP, the last two instructions. */
	const struct sock_filter guard[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 6),                     /* source MAC */
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, m_hi, 0, 16),
		/* 2 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 10),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, m_lo, 0, 14),
		/* 4 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                    /* ethertype */
		/* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 4),
		/* 6 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 14),                    /* IPv4, and its source */
		/* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x45, 0, 10),
		/* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 26),
		/* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip, 7, 8),
		/* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_ARP, 0, 7),
		/* 11 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 22),                   /* ARP sender MAC */
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, m_hi, 0, 5),
		/* 13 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 26),
		/* 14 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, m_lo, 0, 3),
		/* 15 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 28),                   /* ARP sender address */
		/* 16 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip, 0, 1),
		/* 17 */ BPF_STMT(BPF_RET | BPF_K, (uint32_t)TC_ACT_UNSPEC),        /* PASS: on to the next filter */
		/* 18 */ BPF_STMT(BPF_RET | BPF_K, TC_ACT_SHOT),                   /* DROP */
	};
	static const struct sock_filter all[] = { BPF_STMT(BPF_RET | BPF_K, 0xffffffffu) };
	int r;
	if ((r = add_ingress_qdisc(tap_idx)) < 0 || (r = add_ingress_qdisc(link_idx)) < 0)
		return r;
	/* Filters run by priority: the guard drops (counted in the ingress qdisc's statistics) what it does
	 * not pass; what it passes is redirected next. Only cls_bpf and act_mirred are needed. */
	if ((r = add_filter(tap_idx, 1, guard, ARRAY_SIZE(guard), 0)) < 0 ||
	    (r = add_filter(tap_idx, 2, all, ARRAY_SIZE(all), link_idx)) < 0)
		return r;
	return add_filter(link_idx, 1, all, ARRAY_SIZE(all), tap_idx);
}
