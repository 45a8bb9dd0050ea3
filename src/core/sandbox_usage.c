/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space_sandbox_get_usage: what a sandbox uses now. CPU time and memory come from its cgroup, where both
 * back-ends put everything of a sandbox (a jail's processes; a space-vmm with its vCPU threads); its disk
 * from its back-end (a jail's file system counts itself; a VM's image is seen from the host).
 */
#include <errno.h>
#include <string.h>

#include "core/backend.h"
#include "core/info.h"
#include "core/sandbox.h"
#include "util/cgroup.h"
#include "util/util.h"

int core_sandbox_get_usage(space_sandbox *sb, struct space_sandbox_usage *ret)
{
	space_ctx *ctx = sandbox_ctx(sb);
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, space_sandbox_id(sb), &row);
	if (r < 0)
		return r;
	const struct backend_ops *ops;
	struct util_cgroup_usage cu;
	struct space_sandbox_usage u = { .size = sizeof(u) };
	if ((r = backend_for_row(ctx, &row, &ops)) < 0)
		goto out;
	if ((row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED) || !ops->alive(&row)) {
		r = ctx_error_msg(ctx, -ESRCH, "sandbox %s is not running", row.info.id);
		goto out;
	}
	if (!row.cgroup[0]) {
		r = ctx_error_msg(ctx, -EOPNOTSUPP, "sandbox %s has no cgroup to read its usage from", row.info.id);
		goto out;
	}
	if ((r = util_cgroup_usage(row.cgroup, &cu)) < 0) {
		r = ctx_error(ctx, r, "usage of sandbox %s (cgroup %s)", row.info.id, row.cgroup);
		goto out;
	}
	/* Shared memory and tmpfs files sit in the page cache but cannot be dropped: they are in use. */
	uint64_t cache = cu.memory_file_bytes > cu.memory_shmem_bytes ? cu.memory_file_bytes - cu.memory_shmem_bytes : 0;
	u.cpus = row.info.cpus;
	u.cpu_ns = cu.cpu_ns;
	u.memory_cache_bytes = cache < cu.memory_bytes ? cache : cu.memory_bytes;
	u.memory_bytes = cu.memory_bytes - u.memory_cache_bytes;
	u.memory_limit_bytes = (uint64_t)row.info.memory_mib << 20;
	if ((r = ops->disk_usage(&row, &u.disk_used_bytes, &u.disk_total_bytes)) < 0) {
		r = ctx_error(ctx, r, "disk usage of sandbox %s", row.info.id);
		goto out;
	}
	u.time_ms = util_wall_ms();
	*ret = u;
out:
	sandbox_row_clear(&row);
	return r;
}
