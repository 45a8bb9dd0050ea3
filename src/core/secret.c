/* SPDX-License-Identifier: Apache-2.0 */
/* Registered secrets, the public calls (space.h); the store is src/net/secrets.c. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "net/net.h"
#include "net/secrets.h"
#include "util/util.h"

_Static_assert(SPACE_SECRET_VALUE_MAX == NET_SECRET_MAX, "one size limit for secrets");

/* <state>/secrets, once the state directory is initialized (its store opens). */
static int secrets_dir(space_ctx *ctx, char *buf, size_t len)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	r = ctx_state_path(ctx, NET_SECRETS_DIR, buf, len);
	return r < 0 ? ctx_error(ctx, r, "state dir %s", ctx->state_dir) : 0;
}

static int secret_error(space_ctx *ctx, int r, const char *name, const char *dir)
{
	switch (r) {
	case -EPERM:
		return ctx_error_msg(ctx, r, "%s is not owned by this user: refusing to use it for secrets", dir);
	case -ENOTDIR:
		return ctx_error_msg(ctx, r, "%s is not a directory (a symlink?): refusing to use it for secrets", dir);
	case -ENOENT:
		return ctx_error_msg(ctx, r, "no registered secret named '%s'", name);
	default:
		return ctx_error(ctx, r, "secret '%s'", name);
	}
}

SPACE_API int space_secret_set(space_ctx *ctx, const char *name, const void *value, size_t len)
{
	CTX_ENTER(ctx);
	if (!ctx || !name || (!value && len))
		return -EINVAL;
	if (!util_name_valid(name))
		return ctx_error_msg(ctx, -EINVAL, "invalid secret name '%s': 1..63 of A-Z a-z 0-9 . _ -, not starting "
						   "with '.' or '-'", name);
	if (!net_secret_value_valid(value, len))
		return ctx_error_msg(ctx, -EINVAL, "secret '%s': the value must be 1..%d bytes without NUL, CR or LF "
						   "(it is sent as a header value)", name, NET_SECRET_MAX);
	char dir[PATH_MAX];
	int r = secrets_dir(ctx, dir, sizeof(dir));
	if (r < 0)
		return r;
	r = net_secret_write(dir, name, value, len);
	if (r < 0)
		return secret_error(ctx, r, name, dir);
	ctx_log(ctx, SPACE_LOG_INFO, "secret %s set (%zu bytes)", name, len);
	return 0;
}

int core_secret_list(space_ctx *ctx, struct net_secret_info **ret_list, size_t *ret_count)
{
	CTX_ENTER(ctx);
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	char dir[PATH_MAX];
	int r = secrets_dir(ctx, dir, sizeof(dir));
	if (r < 0)
		return r;
	r = net_secret_list(dir, ret_list, ret_count);
	return r < 0 ? secret_error(ctx, r, "", dir) : 0;
}

SPACE_API int space_secret_remove(space_ctx *ctx, const char *name)
{
	CTX_ENTER(ctx);
	if (!ctx || !name)
		return -EINVAL;
	if (!util_name_valid(name))
		return ctx_error_msg(ctx, -EINVAL, "invalid secret name '%s'", name);
	char dir[PATH_MAX];
	int r = secrets_dir(ctx, dir, sizeof(dir));
	if (r < 0)
		return r;
	r = net_secret_remove(dir, name);
	if (r < 0)
		return secret_error(ctx, r, name, dir);
	ctx_log(ctx, SPACE_LOG_INFO, "secret %s removed", name);
	return 0;
}
