/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox networking, library side: every sandbox gets a network namespace whose only peer is a
 * space-gateway process (one per sandbox) that enforces the sandbox's egress policy (docs/network.md).
 * Private to libspace.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/netcfg.h" /* NETCFG_VM_TAP, NETCFG_VM_CMDLINE: a VM sandbox's fixed network */
#include "space.h"

/*
 * Gives the sandbox `sandbox_id`, whose network namespace is that of process netns_pid (the jail's PID 1;
 * for a VM, the jailed VMM), its network: spawns space-gateway with the policy (policy_json: NULL = no
 * egress at all), which creates the veth pair, configures both sides and serves DNS and TCP; then installs
 * the gateway's CA certificate and a resolv.conf in the sandbox through its agent at agent_addr
 * ("unix:...", "vsock-uds:..."; NULL: the jail agent's socket in the sandbox's runtime directory).
 * tap: NULL for a jail (the veth end becomes its eth0); for a VM the name of the TAP in the VMM's
 * namespace that the guest's virtio-net eth0 sits behind (NETCFG_VM_TAP): the veth end is wired to it
 * and only the guest's own MAC and address pass (the guest sets them from NETCFG_VM_CMDLINE).
 * The policy is compiled with trust (net_policy_compile; NULL: untrusted). Secrets named by it are read
 * here (registered ones; env:, file: for a trusted policy) and handed to the gateway through a pipe: they
 * are never written to disk. The gateway outlives the caller and ends with the sandbox's process or on
 * net_sandbox_detach(). On failure nothing is left running and ctx's last error says why.
 * policy_json NULL: no egress, so nothing is started and the sandbox's namespace keeps only lo (its
 * attempts are not recorded; an empty policy "{}" gets a gateway that records them). A policy for a
 * sandbox without a network namespace of its own (a VMM run outside its jail) is -EOPNOTSUPP.
 */
struct net_policy_trust;
int net_sandbox_attach(space_ctx *ctx, const char *sandbox_id, pid_t netns_pid, const char *tap,
		       const char *policy_json, const struct net_policy_trust *trust, const char *agent_addr);

/* Stops the sandbox's gateway (its namespace, veth pair and sockets go with it), collects the events it
 * spooled (net_events_ingest) and frees its uid slot. Fine when there is none. */
int net_sandbox_detach(space_ctx *ctx, const char *sandbox_id);

/* 1 when the sandbox's gateway was started and has died since (its egress then fails closed: the veth
 * pair went with the gateway's namespace), 0 when it runs or there is none, -errno if its pid file cannot
 * be read. */
int net_gateway_dead(space_ctx *ctx, const char *sandbox_id);

/*
 * The gateway's events reach the store through a spool (docs/network.md, "The gateway process"): the
 * gateway runs without root and never opens space.db; it appends one JSON object per line
 * ({"ts_ms":N,"kind":"egress-...","detail":"..."}) to <state>/run/<id>/events.jsonl, which the library
 * opened for it, and stops at NET_EVENTS_SPOOL_MAX bytes (noting how many it dropped once there is room).
 * Both sides flock() the file while they touch it.
 */
#define NET_EVENTS_SPOOL "events.jsonl"
#define NET_EVENTS_SPOOL_MAX (1u << 20)
#define NET_EVENT_DETAIL_MAX 480 /* bytes of an event's detail (escaped text) */
#define NET_EVENTS_INGEST_MAX 4096 /* rows one collection adds at most */

/*
 * Moves the events spooled by sandbox_id's gateway into the store's event log, under that sandbox's id
 * whatever the file says. The spool is hostile input (the gateway parses sandbox traffic): only kinds
 * "egress-..." are taken, details are escaped when they are not printable UTF-8 and capped, times are
 * clamped to now. Emptied only once its rows are committed. A spool that stays locked (a stuck gateway)
 * is left for the next call. Called by net_sandbox_detach() and net_events_ingest_all(); 0 when there
 * is nothing to collect.
 */
int net_events_ingest(space_ctx *ctx, const char *sandbox_id);

/* net_events_ingest() for every sandbox with a non-empty spool under <state>/run; errors are logged.
 * Called by space_sandbox_reap(), so by every listing and by `space serve` every few seconds. */
void net_events_ingest_all(space_ctx *ctx);

/*
 * Who wrote a policy, and so what it may name (docs/network.md, "Who may write a policy").
 * Trusted: the operator's (the CLI, or a library caller that says so): secrets may also be env:NAME and
 * file:PATH, read by this process; ca_file may name a host file; resolve may point anywhere.
 * Untrusted (the default, and always for `space serve`): secrets only name registered secrets
 * (secret:NAME), no ca_file, and resolve targets must be public addresses that are not this host's own,
 * unless they lie in one of allow_resolve's ranges (the operator's).
 */
struct net_policy_trust {
	bool trusted;
	const char *secrets_dir;           /* registered secrets (<state>/secrets); NULL: none */
	const char *const *allow_resolve;  /* NULL-terminated IPv4 CIDRs ("10.1.0.0/16"); may be NULL */
};
#define NET_ALLOW_RESOLVE_MAX 64 /* CIDRs in allow_resolve */

/*
 * Checks a policy document and resolves its secrets: returns (malloc'd, in *ret_config) the gateway's
 * configuration JSON, in which injected header values are final. trust NULL: untrusted, without
 * registered secrets or allowed ranges. Errors name the offending entry in err, but never a secret's
 * value nor, for an untrusted policy, anything of the host (paths, the secrets directory). -EINVAL for
 * a policy that is refused, -ENOMEM. Exposed for tests and the gateway's own checks.
 */
int net_policy_compile(const char *policy_json, const struct net_policy_trust *trust, char **ret_config, char *err,
		       size_t errlen);

/* Parses "A.B.C.D/N" (N 0..32) or "A.B.C.D" (/32) into a host-order address and mask; -EINVAL otherwise. */
int net_cidr4_parse(const char *s, uint32_t *ret_addr, uint32_t *ret_mask);

/*
 * Registered secrets (src/net/secrets.c; the public calls are space_secret_*): one file per secret
 * under <state>/NET_SECRETS_DIR (directory 0700, files 0600), named by util_name_valid names, values of
 * 1..NET_SECRET_MAX bytes without NUL or line breaks (they become header values).
 */
#define NET_SECRETS_DIR "secrets"
#define NET_SECRET_MAX 8192
/* Reads secret name from dir into *ret (malloc'd, NUL-terminated; the caller wipes and frees it):
 * -ENOENT when there is none, -EINVAL for a bad name, -EFBIG above NET_SECRET_MAX. */
int net_secret_read(const char *dir, const char *name, char **ret, size_t *ret_len);

/* True if host (lowercase, no trailing dot) matches pattern: exactly, or "*.suffix" for any name
 * strictly below suffix. */
bool net_host_match(const char *pattern, const char *host);

/* True for a syntactically valid DNS name (letters, digits, '-', '.', 1..253 chars, labels 1..63). */
bool net_host_valid(const char *host);
