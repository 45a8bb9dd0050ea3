/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Changing a sandbox's lifetime after it started. Two parties keep the deadline: the store's expires_ms
 * (space_sandbox_reap destroys the sandbox once it has passed) and the agent's alarm (it shuts the
 * sandbox down even when no host process is running). Both move together: the agent first, then the
 * store in one transaction; when the store cannot be written, the agent gets its old deadline back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "proto/agent_client.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/util.h"

/* The agent's alarm for a deadline in the store (0: none); at least 1 s for one already due. */
static uint32_t seconds_until(int64_t expires_ms)
{
	if (!expires_ms)
		return 0;
	int64_t left = (expires_ms - util_wall_ms() + 999) / 1000;
	return left > 0 ? (uint32_t)(left < PROTO_MAX_LIFETIME ? left : PROTO_MAX_LIFETIME) : 1;
}

/* expires_ms of a running sandbox and its event, in one transaction; -ESRCH when it stopped meanwhile. */
static int store_expires(space_ctx *ctx, const char *id, int64_t expires_ms, const char *detail)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	r = store_sandbox_set_expires(s, id, STORE_ST(STORE_RUNNING), expires_ms);
	if (r == -ESTALE || r == -ENOENT) {
		store_rollback(s);
		return ctx_error_msg(ctx, -ESRCH, "sandbox %s stopped while its lifetime was being changed", id);
	}
	return ctx_store_finish(ctx, s, r, id, "lifetime", detail);
}

SPACE_API int space_sandbox_set_timeout(space_sandbox *sb, uint32_t seconds_from_now)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb)
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	const char *id = space_sandbox_id(sb);
	if (seconds_from_now > PROTO_MAX_LIFETIME)
		return ctx_error_msg(ctx, -EINVAL, "a lifetime of %u s is over the limit of %u s (366 days)",
				     seconds_from_now, PROTO_MAX_LIFETIME);
	int r = sandbox_usable(sb);
	if (r < 0)
		return r;
	struct sandbox_info info;
	r = core_sandbox_get_info(sb, &info);
	if (r < 0)
		return r;
	/* Past its deadline it is as good as gone (the next reap destroys it): no second life. */
	if (info.expires_ms && info.expires_ms <= util_wall_ms())
		return ctx_error_msg(ctx, -ESRCH, "sandbox %s: its lifetime has ended", id);

	int64_t expires_ms = seconds_from_now ? util_wall_ms() + (int64_t)seconds_from_now * 1000 : 0;
	struct agent_error aerr;
	r = agent_set_lifetime(sandbox_addr(sb), seconds_from_now, &aerr);
	if (r < 0)
		return ctx_error_msg(ctx, r, "set the lifetime of sandbox %s: %s", id, aerr.msg);

	char detail[64];
	if (seconds_from_now)
		snprintf(detail, sizeof(detail), "%u s from now", seconds_from_now);
	else
		snprintf(detail, sizeof(detail), "none");
	r = store_expires(ctx, id, expires_ms, detail);
	if (r < 0) {
		/* Keep the two deadlines equal: the agent goes back to the one the store still has. */
		(void)agent_set_lifetime(sandbox_addr(sb), seconds_until(info.expires_ms), NULL);
		return r;
	}
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: lifetime %s", id, detail);
	return 0;
}
