/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's egress policy and its trust (docs/network.md, "Who may write a policy"): checked before
 * anything of a sandbox is made, stored in its row's metadata with the trust it was given, and given to
 * net_sandbox_attach() with that trust at creation and whenever it is applied again (rollback, fork).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/sandbox.h"
#include "net/net.h"

int sandbox_policy_trust(space_ctx *ctx, bool trusted, const char *const *allow_resolve, struct net_policy_trust *t,
			 char *dir, size_t dlen)
{
	int r = ctx_state_path(ctx, NET_SECRETS_DIR, dir, dlen);
	if (r < 0)
		return ctx_error(ctx, r, "state dir %s", ctx->state_dir);
	*t = (struct net_policy_trust){ .trusted = trusted, .secrets_dir = dir, .allow_resolve = allow_resolve };
	return 0;
}

int sandbox_policy_check(space_ctx *ctx, const struct space_sandbox_options *o)
{
	size_t n = 0;
	for (const char *const *c = o->network_allow_resolve; c && *c; c++)
		n++;
	if (!o->network_policy && !n)
		return 0;
	char dir[PATH_MAX], why[512] = "";
	struct net_policy_trust t;
	int r = sandbox_policy_trust(ctx, o->network_policy_trusted, o->network_allow_resolve, &t, dir, sizeof(dir));
	if (r < 0)
		return r;
	/* Compiled once here, thrown away, and again by the gateway's attach: a refusal costs no disk clone or
	 * boot, and an API caller gets 400 with the reason. */
	char *config = NULL;
	r = net_policy_compile(o->network_policy, &t, &config, why, sizeof(why));
	if (config) {
		explicit_bzero(config, strlen(config));
		free(config);
	}
	if (r < 0)
		return ctx_error_msg(ctx, r == -ENOMEM ? r : -EINVAL, "network policy: %s",
				     why[0] ? why : space_strerror(r));
	return 0;
}

int sandbox_policy_to_meta(cJSON *meta, const struct space_sandbox_options *o)
{
	if (!o->network_policy)
		return 0;
	/* Absent means untrusted: a row written before trust was stored is re-applied as an API caller's. */
	if (o->network_policy_trusted && !cJSON_AddTrueToObject(meta, "network_trusted"))
		return -ENOMEM;
	if (!o->network_allow_resolve || !o->network_allow_resolve[0])
		return 0;
	cJSON *a = cJSON_AddArrayToObject(meta, "network_allow_resolve");
	if (!a)
		return -ENOMEM;
	for (const char *const *c = o->network_allow_resolve; *c; c++) {
		cJSON *s = cJSON_CreateString(*c);
		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			return -ENOMEM;
		}
	}
	return 0;
}

int sandbox_policy_from_meta(const cJSON *meta, bool *ret_trusted, char ***ret_allow_resolve)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(meta, "network_allow_resolve");
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0, k = 0;
	if (n > NET_ALLOW_RESOLVE_MAX)
		n = NET_ALLOW_RESOLVE_MAX; /* a create with more was refused */
	char **v = calloc((size_t)n + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	const cJSON *e;
	cJSON_ArrayForEach(e, a) {
		if (k == n)
			break;
		if (cJSON_IsString(e) && !(v[k++] = strdup(e->valuestring))) {
			sandbox_strv_free(v);
			return -ENOMEM;
		}
	}
	*ret_trusted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "network_trusted"));
	*ret_allow_resolve = v;
	return 0;
}
