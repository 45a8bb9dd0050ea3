/* SPDX-License-Identifier: Apache-2.0 */
/* The isolation back-end choice: names to tables, and the few helpers shared around them (backend.h). */
#include "core/backend.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sandbox.h"
#include "core/vm_backend.h"
#include "util/cleanup.h"

/* Indexed by enum backend_kind. */
static const struct backend_ops *const backends[] = {
	[BACKEND_VM] = &backend_vm_ops,
	[BACKEND_JAIL] = &backend_jail_ops,
};

int backend_kind_parse(const char *name, enum backend_kind *ret)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(name, backends[i]->name)) {
			*ret = backends[i]->kind;
			return 0;
		}
	return -EINVAL;
}

const struct backend_ops *backend_of(enum backend_kind kind)
{
	return backends[kind];
}

int backend_by_name(space_ctx *ctx, const char *name, const struct backend_ops **ret)
{
	enum backend_kind kind;
	if (backend_kind_parse(name, &kind) < 0)
		return ctx_error_msg(ctx, -EINVAL, "unknown isolation '%s': use vm or jail", name ? name : "");
	*ret = backend_of(kind);
	return 0;
}

int backend_for_row(space_ctx *ctx, const struct sandbox_row *row, const struct backend_ops **ret)
{
	enum backend_kind kind;
	/* A row is never taken for one of the known isolations: it may run something else entirely. */
	if (backend_kind_parse(row->info.isolation, &kind) < 0)
		return ctx_error_msg(ctx, -EINVAL, "sandbox %s has an unknown isolation '%s' (a newer libspace's?): "
						   "this build cannot run, stop or remove it",
				     row->info.id, row->info.isolation);
	*ret = backend_of(kind);
	return 0;
}

const struct backend_ops *backend_for_info(const struct sandbox_info *b)
{
	enum backend_kind kind;
	return backend_kind_parse(b->isolation, &kind) == 0 ? backend_of(kind) : NULL;
}

int backend_default(space_ctx *ctx, struct store *s, const struct backend_ops **ret)
{
	_cleanup_free_ char *name = NULL;
	if (store_meta_get(s, "isolation", &name) < 0) {
		*ret = backend_of(BACKEND_DEFAULT);
		return 0;
	}
	return backend_by_name(ctx, name, ret);
}

const struct backend_ops *backend_for_checkpoint_kind(const char *kind)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(kind, backends[i]->checkpoint_kind))
			return backends[i];
	return NULL;
}

void backend_snapshot_files_drop(const char *dir)
{
	char f[PATH_MAX];
	snprintf(f, sizeof(f), "%s/%s", dir, VM_SNAPSHOT_FILE);
	(void)unlink(f);
	snprintf(f, sizeof(f), "%s/%s", dir, VM_SNAPSHOT_META);
	(void)unlink(f);
}

void backend_stop_started(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row,
			  const struct backend_proc *proc)
{
	struct sandbox_row tmp = *row;
	tmp.metadata = NULL;
	tmp.info.pid = proc->pid;
	tmp.pid_start = proc->start_time;
	snprintf(tmp.cgroup, sizeof(tmp.cgroup), "%s", proc->cgroup);
	(void)ops->stop(ctx, &tmp);
}

int backend_disk_image_usage(const struct sandbox_row *row, uint64_t *ret_used, uint64_t *ret_total)
{
	char image[PATH_MAX];
	struct stat st;
	if ((size_t)snprintf(image, sizeof(image), "%s/rootfs.ext4", row->info.path) >= sizeof(image))
		return -ENAMETOOLONG;
	if (stat(image, &st) < 0)
		return -errno;
	*ret_used = (uint64_t)st.st_blocks * 512;
	*ret_total = (uint64_t)st.st_size;
	return 0;
}
