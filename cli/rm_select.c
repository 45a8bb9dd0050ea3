/* SPDX-License-Identifier: Apache-2.0 */
/* Which sandboxes `space rm --all` and `space rm --older-than DURATION` remove. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_rm_select(struct cli *cli, int64_t older_than_s, struct cli_rm_selection *ret)
{
	space_ctx *ctx = cli_ctx(cli);
	/* Those past their lifetime, or whose tether holder is gone, are destroyed here and need no rm. */
	int r = space_sandbox_reap(ctx);
	if (r < 0)
		return r;
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	r = space_sandbox_list(ctx, &list, &n);
	if (r < 0)
		return r;
	char(*ids)[32] = n ? calloc(n, sizeof(*ids)) : NULL;
	if (n && !ids) {
		space_sandbox_info_list_free(list);
		return -ENOMEM;
	}
	int64_t cutoff = older_than_s >= 0 ? wall_ms() - older_than_s * 1000 : INT64_MAX;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (list[i]->status != SPACE_SANDBOX_DESTROYED && list[i]->created_ms <= cutoff)
			snprintf(ids[k++], sizeof(ids[0]), "%s", list[i]->id);
	space_sandbox_info_list_free(list);
	ret->ids = ids;
	ret->n = k;
	return 0;
}

void cli_rm_select_free(struct cli_rm_selection *sel)
{
	free(sel->ids);
	sel->ids = NULL;
	sel->n = 0;
}
