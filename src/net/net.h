/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox networking, library side: every sandbox gets a network namespace whose only peer is a
 * space-gateway process (one per sandbox) that enforces the sandbox's egress policy (docs/network.md).
 * Private to libspace.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
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
 * Secrets named by the policy are read here (env:, file:) and handed to the gateway through a pipe: they
 * are never written to disk. The gateway outlives the caller and ends with the sandbox's process or on
 * net_sandbox_detach(). On failure nothing is left running and ctx's last error says why.
 * Without a policy and without a space-gateway to run (a build that lacks it), or when netns_pid has no
 * network namespace of its own (a VMM run outside its jail), logs a warning and returns 0: the sandbox
 * then has no egress either, but attempts are not recorded.
 */
int net_sandbox_attach(space_ctx *ctx, const char *sandbox_id, pid_t netns_pid, const char *tap,
		       const char *policy_json, const char *agent_addr);

/* Stops the sandbox's gateway (its namespace, veth pair and sockets go with it). Fine when there is none. */
int net_sandbox_detach(space_ctx *ctx, const char *sandbox_id);

/*
 * Checks a policy document and resolves its secrets: returns (malloc'd, in *ret_config) the gateway's
 * configuration JSON, in which injected header values are final. Errors name the offending entry in
 * err. Exposed for tests and the gateway's own checks.
 */
int net_policy_compile(const char *policy_json, char **ret_config, char *err, size_t errlen);

/* True if host (lowercase, no trailing dot) matches pattern: exactly, or "*.suffix" for any name
 * strictly below suffix. */
bool net_host_match(const char *pattern, const char *host);

/* True for a syntactically valid DNS name (letters, digits, '-', '.', 1..253 chars, labels 1..63). */
bool net_host_valid(const char *host);
