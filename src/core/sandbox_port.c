/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ports: a stream to a TCP port a sandbox listens on, through its agent (PORT_CONNECT). The host never
 * routes into the sandbox and the sandbox's egress policy is not involved: the agent connects to its own
 * loopback, for a jail and a VM alike.
 */
#include <errno.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "proto/agent_client.h"

SPACE_API int space_sandbox_port_connect(space_sandbox *sb, uint16_t port, int *ret_fd)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !ret_fd)
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	const char *id = space_sandbox_id(sb);
	if (port == 0)
		return ctx_error_msg(ctx, -EINVAL, "port 0 is not a port");
	int r = sandbox_usable(sb);
	if (r < 0)
		return r;
	struct agent_error aerr;
	int fd = -1;
	r = agent_port_connect(sandbox_addr(sb), port, &fd, &aerr);
	if (r == -ECONNREFUSED)
		return ctx_error_msg(ctx, r, "sandbox %s: port %u is not listening", id, port);
	if (r < 0)
		return ctx_error_msg(ctx, r, "sandbox %s: connect to port %u: %s%s", id, port,
				     aerr.msg[0] ? aerr.msg : space_strerror(r),
				     r == -EOPNOTSUPP ? " (make a new template snapshot with this version's agent)" : "");
	*ret_fd = fd;
	return 0;
}
