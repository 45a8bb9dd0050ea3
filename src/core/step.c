/* SPDX-License-Identifier: Apache-2.0 */
/* space_sandbox_exec_step: an exec guarded by the sandbox's checkpoints (automatic rollback on failure). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "util/cleanup.h"

static bool step_failed(const struct space_exec_result *res)
{
	return !res->exited || res->exit_code != 0 || res->timed_out;
}

/* The id of the sandbox's newest checkpoint into id; -ENOENT with a message when it has none. */
static int latest_checkpoint(space_sandbox *sb, char id[SPACE_CHECKPOINT_ID_MAX])
{
	space_ctx *ctx = sandbox_ctx(sb);
	_cleanup_free_ struct checkpoint_info *list = NULL;
	size_t n = 0;
	int r = core_checkpoint_list(ctx, space_sandbox_id(sb), &list, &n);
	if (r < 0)
		return r;
	if (n == 0)
		return ctx_error_msg(ctx, -ENOENT,
				     "the step failed and sandbox %s has no checkpoint to roll back to: take one first "
				     "(space_checkpoint_create, or SPACE_STEP_CHECKPOINT_FIRST)",
				     space_sandbox_id(sb));
	/* Oldest first; several taken within one millisecond keep their insertion order. */
	snprintf(id, SPACE_CHECKPOINT_ID_MAX, "%s", list[n - 1].id);
	return 0;
}

int core_sandbox_exec_step(space_sandbox *sb, const struct space_exec_options *opts, unsigned flags,
			   struct space_exec_result *ret_result, char ret_rolled_back[SPACE_CHECKPOINT_ID_MAX])
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !opts || !ret_result || (flags & ~SPACE_STEP_CHECKPOINT_FIRST))
		return -EINVAL;
	space_ctx *ctx = sandbox_ctx(sb);
	char cp[SPACE_CHECKPOINT_ID_MAX] = "";
	int r;
	if (flags & SPACE_STEP_CHECKPOINT_FIRST) {
		r = space_checkpoint_create(sb, "before-step", cp);
		if (r < 0)
			return r;
	}
	struct space_exec_result res;
	r = core_sandbox_exec(sb, opts, &res);
	if (r < 0)
		return r;
	if (step_failed(&res)) {
		if (!cp[0] && (r = latest_checkpoint(sb, cp)) < 0)
			return r;
		ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: the step failed; rolling back to %s", space_sandbox_id(sb), cp);
		r = space_sandbox_rollback(sb, cp);
		if (r < 0)
			return r;
	} else if (cp[0]) {
		/* Nothing kept unless asked: the step's own checkpoint has served once the step succeeded (one per
		 * step would pile up for ever). A failure to drop it does not undo the step. */
		r = space_checkpoint_remove(ctx, cp);
		if (r < 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: the step succeeded but its checkpoint %s stays: %s",
				space_sandbox_id(sb), cp, space_ctx_last_error(ctx));
		cp[0] = 0;
	}
	*ret_result = res;
	if (ret_rolled_back)
		memcpy(ret_rolled_back, cp, SPACE_CHECKPOINT_ID_MAX);
	return 0;
}
