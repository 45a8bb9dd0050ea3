/* SPDX-License-Identifier: Apache-2.0 */
/* Periodic file snapshots without a pool: the policy in a row's metadata (hostile values included), which
 * checkpoint names are automatic, and the limits on a policy (src/core/autosnap.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/autosnap.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL: %s: ", #c); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); fails++; } } while (0)

static bool automatic(const char *name)
{
	/* The public call on a caller's own struct (size set, its name a plain pointer). */
	struct space_checkpoint_info c = { .size = sizeof(c), .name = name };
	return space_checkpoint_is_automatic(&c);
}

int main(void)
{
	struct space_snapshot_policy p;
	/* The helper's pid is the row's own column now (store/sandboxes.h): a "pid" in the JSON (an older
	 * libspace's, or anything else's) is never read as the helper. */
	autosnap_policy_parse("{\"env\":[],\"snapshots\":{\"every\":60,\"keep\":10,\"pid\":4242,\"pid_start\":987}}", &p);
	CHECK(p.every_s == 60 && p.keep == 10 && p.pid == 0, "%u %u %d", p.every_s, p.keep, p.pid);
	static const char *const none[] = {
		NULL, "", "not json", "[]", "{\"snapshots\":5}", "{\"snapshots\":null}", "{\"uid_base\":100000}",
	};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		autosnap_policy_parse(none[i], &p);
		CHECK(!p.every_s && !p.keep && !p.pid, "'%s' gave a policy", none[i] ? none[i] : "NULL");
	}
	/* Out-of-range or mistyped values read as absent, never as something else. */
	autosnap_policy_parse("{\"snapshots\":{\"every\":-1,\"keep\":1e30,\"pid\":\"1\",\"pid_start\":-5}}", &p);
	CHECK(!p.every_s && !p.keep && !p.pid, "hostile: %u %u %d", p.every_s, p.keep, p.pid);
	autosnap_policy_parse("{\"snapshots\":{\"every\":604801,\"keep\":101,\"pid\":2147483648}}", &p);
	CHECK(!p.every_s && !p.keep && !p.pid, "too big: %u %u %d", p.every_s, p.keep, p.pid);

	CHECK(automatic("auto-1796239572"), "auto-<digits>");
	CHECK(automatic("auto-0"), "auto-0");
	CHECK(!automatic("auto-"), "auto-");
	CHECK(!automatic("auto-12x"), "auto-12x");
	CHECK(!automatic("auto-123456789012345678901"), "21 digits");
	CHECK(!automatic("Auto-1"), "Auto-1");
	CHECK(!automatic("mine"), "mine");
	CHECK(!automatic(""), "unnamed");
	CHECK(!space_checkpoint_is_automatic(NULL), "NULL");

	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = "/nonexistent/space-test-autosnap";
	space_ctx *ctx;
	CHECK(space_ctx_new(&o, &ctx) == 0, "context");
	CHECK(autosnap_validate(ctx, 0, 0) == 0, "no policy");
	CHECK(autosnap_validate(ctx, 1, 0) == 0 && autosnap_validate(ctx, 604800, 100) == 0, "limits");
	CHECK(autosnap_validate(ctx, 604801, 5) == -EINVAL && strstr(space_ctx_last_error(ctx), "1..604800"),
	      "every: %s", space_ctx_last_error(ctx));
	CHECK(autosnap_validate(ctx, 5, 101) == -EINVAL && strstr(space_ctx_last_error(ctx), "1..100"), "keep: %s",
	      space_ctx_last_error(ctx));
	CHECK(autosnap_validate(ctx, 0, 3) == -EINVAL && strstr(space_ctx_last_error(ctx), "interval"),
	      "keep alone: %s", space_ctx_last_error(ctx));
	space_ctx_free(ctx);
	if (fails)
		return 1;
	printf("autosnap: ok\n");
	return 0;
}
