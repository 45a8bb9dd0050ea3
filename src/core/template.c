/* SPDX-License-Identifier: Apache-2.0 */
/* Templates: a rootfs.ext4 (plus optional kernel and initrd) in a subvolume of the pool: their work
 * subvolumes, listing and removal (imports: template_import.c, template_image.c). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/initramfs.h"
#include "core/internal.h"
#include "core/vm_assets.h"
#include "core/warm_pool.h"
#include "store/btrfs.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/escape.h"
#include "util/util.h"

/*
 * A work subvolume under the pool's .tmp, named after its owner ("tpl-<id>.<pid>-<start time>"), so that
 * what a killed import or template snapshot left there can be told from another process's work in progress
 * and removed (core_pool_tmp_sweep).
 */
int core_pool_tmp_path(space_ctx *ctx, const char *root, char *buf, size_t len)
{
	char id[32];
	int r = core_new_id("tpl-", id, sizeof(id));
	if (r < 0)
		return ctx_error(ctx, r, "random id");
	pid_t me = getpid();
	if ((size_t)snprintf(buf, len, "%s/.tmp/%s.%d-%llu", root, id, (int)me,
			     (unsigned long long)core_process_start_time(me)) >= len)
		return ctx_error_msg(ctx, -ENAMETOOLONG, "pool path %s too long", root);
	return 0;
}

/* Removes the work subvolumes under .tmp whose owner process is gone. Returns how many. */
int core_pool_tmp_sweep(space_ctx *ctx, const char *root)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/.tmp", root);
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *dot = strchr(e->d_name, '.');
		int pid;
		unsigned long long start;
		char end;
		if (strncmp(e->d_name, "tpl-", 4) || !dot || sscanf(dot + 1, "%d-%llu%c", &pid, &start, &end) != 2 ||
		    pid <= 0 || core_process_alive(pid, start))
			continue;
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (store_btrfs_subvolume_delete(path) == 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "removed %s, left by an interrupted template operation", path);
			n++;
		}
	}
	return n;
}

static void template_info(const struct store_template *t, struct template_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", t->name);
	snprintf(ret->path, sizeof(ret->path), "%s", t->path);
	ret->rootfs_bytes = t->rootfs_bytes;
	ret->has_kernel = t->has_kernel;
	ret->has_initrd = t->has_initrd;
	ret->created_ms = t->created_ms;
	ret->sandboxes = t->sandboxes;
	ret->checkpoints = t->checkpoints;
	snprintf(ret->image_digest, sizeof(ret->image_digest), "%s", t->image_digest);
}

int core_template_list(space_ctx *ctx, struct template_info **ret_list, size_t *ret_count)
{
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	/* A store whose pool is mounted: paths in answers must exist. */
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	struct store_template *rows = NULL;
	size_t n = 0;
	r = store_template_list(ctx->store, &rows, &n);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	struct template_info *list = n ? calloc(n, sizeof(*list)) : NULL;
	if (n && !list) {
		free(rows);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		template_info(&rows[i], &list[i]);
	free(rows);
	*ret_list = list;
	*ret_count = n;
	return 0;
}

int core_template_get(space_ctx *ctx, const char *name, struct template_info *ret)
{
	if (!ctx || !name || !ret)
		return -EINVAL;
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	_cleanup_free_ struct store_template *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	r = store_template_get(ctx->store, name, t);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, -ENOENT, "no template named %s (see `space template ls`)", name);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	template_info(t, ret);
	return 0;
}

int core_template_image_config(space_ctx *ctx, const char *name, char **ret)
{
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	*ret = NULL;
	r = store_template_get_image_config(ctx->store, name, ret);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, -ENOENT, "no template named %s (see `space template ls`)", name);
	return r < 0 ? ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store)) : 0;
}

#define TEMPLATE_CPS_SHOWN 5

/* "(ID NAME, ID, ...)" of the checkpoints that depend on template name into buf (len >= 512; "" if none or
 * unknown), so a refusal says which. Names are the API caller's text: shown on one line, escaped, cut. */
static void template_checkpoints_of(space_ctx *ctx, const char *name, char *buf, size_t len)
{
	_cleanup_free_ struct checkpoint_info *list = NULL;
	size_t n = 0, used = 0, shown = 0;
	buf[0] = 0;
	if (core_checkpoint_list(ctx, NULL, &list, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(list[i].template_name, name))
			continue;
		if (shown++ == TEMPLATE_CPS_SHOWN) {
			used += (size_t)snprintf(buf + used, len - used, ", ...");
			break;
		}
		char nm[41]; /* 5 x (", " + id + " " + 40) fits 512 */
		util_text_one_line(list[i].name, nm, sizeof(nm));
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", used ? ", " : "(", list[i].id,
					 nm[0] ? " " : "", nm);
	}
	if (used)
		snprintf(buf + used, len - used, ")");
}

SPACE_API int space_template_remove(space_ctx *ctx, const char *name, bool force)
{
	CTX_ENTER(ctx);
	struct template_info t;
	int r = core_template_get(ctx, name, &t);
	if (r < 0)
		return r;
	if (!force && (t.sandboxes || t.checkpoints)) {
		char cps[512];
		template_checkpoints_of(ctx, name, cps, sizeof(cps));
		return ctx_error_msg(ctx, -EBUSY,
				     "template %s is used by %u sandbox(es) and %u checkpoint(s)%s%s: remove them first "
				     "(`space rm --with-checkpoints ID`, `space checkpoint rm ID`), or pass --force",
				     name, t.sandboxes, t.checkpoints, cps[0] ? " " : "", cps);
	}
	const char *root;
	r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	/* Its warm pool goes with it, no filler running meanwhile. */
	_cleanup_close_ int lock = warm_pool_lock(ctx);
	if (lock < 0)
		return lock;
	r = warm_pool_drain(ctx, name);
	if (r < 0)
		return r;
	r = warm_pool_forget(ctx, name);
	if (r < 0)
		return r;
	r = store_btrfs_subvolume_delete(t.path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", t.path);
	struct store *s = ctx->store;
	r = store_begin(s);
	if (r == 0)
		r = store_template_delete(s, name);
	return ctx_store_finish(ctx, s, r, NULL, force ? "template.remove.force" : "template.remove", name);
}

