/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A template from a container image (space_template_import with image): the image's documents read and
 * checked by the library (core/image_source.h), its layers applied by space-unpack (core/unpack.h), and the
 * config's process defaults kept with the template's row. An image whose config digest a template already
 * has reads no layer: the new template's rootfs.ext4 is a copy-on-write clone of that template's.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/image_source.h"
#include "core/template_import.h"
#include "core/unpack.h"
#include "store/btrfs.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/fault.h"
#include "util/util.h"

/* The defaults with the user as the image's /etc/passwd resolved it. */
static char *defaults_with_user(const char *defaults, const struct unpack_result *res)
{
	cJSON *j = cJSON_Parse(defaults);
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "uid", res->has_user ? res->uid : 0);
	cJSON_AddNumberToObject(j, "gid", res->has_user ? res->gid : 0);
	cJSON_AddStringToObject(j, "home", res->has_user ? res->home : "/root");
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* A template of the same image whose disk can be shared: one without a booted snapshot (a snapshot's disk
 * is the one a VM booted on, no longer the image's). 1 with its name, 0 when there is none. */
static int reusable(space_ctx *ctx, const char *digest, char name[64], char **ret_config)
{
	int r = store_template_find_image(ctx->store, digest, name);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	struct space_template_warm_info w = { .size = sizeof(w) };
	if (core_template_get_warm_info(ctx, name, &w) < 0 || w.has_snapshot)
		return 0;
	r = store_template_get_image_config(ctx->store, name, ret_config);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	return *ret_config ? 1 : 0;
}

static int stage(space_ctx *ctx, const struct space_template_import_options *o, struct image_plan *plan,
		 const char *root, const char *tmp, char **ret_config)
{
	char image[PATH_MAX], from[64];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", tmp);
	_cleanup_free_ char *shared = NULL;
	int r = reusable(ctx, plan->digest, from, &shared);
	if (r < 0)
		return r;
	if (r > 0) {
		char src[PATH_MAX];
		snprintf(src, sizeof(src), "%s/templates/%s/rootfs.ext4", root, from);
		template_progress(o, "share the disk of a template of the same image");
		if ((r = template_copy_file(src, image, 0644)) < 0)
			return ctx_error(ctx, r, "copy %s", src);
		ctx_log(ctx, SPACE_LOG_INFO, "image %s: template %s has it already; no layer read", plan->digest, from);
		*ret_config = TAKE_PTR(shared);
	} else {
		struct unpack_request req = {
			.layers = plan->layers, .n_layers = plan->n_layers, .fds = plan->fds, .n_fds = plan->n_fds,
			.user = plan->config.user, .workdir = plan->config.working_dir, .size_bytes = o->size_bytes, .what = "layer",
			.progress = o->progress, .progress_userdata = o->progress_userdata,
		};
		struct unpack_result res;
		if ((r = unpack_apply(ctx, &req, image, &res)) < 0)
			return r;
		if (!res.shell && !o->force) {
			_cleanup_free_ char *safe = util_escape_dup(o->image, 0);
			return ctx_error_msg(ctx, -EINVAL,
					     "image %s has no /bin/sh (a minimal image, such as a distroless one): sandboxes "
					     "run commands through it; import it anyway with --force",
					     safe ? safe : "?");
		}
		if (!(*ret_config = defaults_with_user(plan->defaults, &res)))
			return -ENOMEM;
	}
	char kver[128];
	if ((r = template_stage_boot_files(ctx, o, tmp, kver, sizeof(kver))) < 0)
		return r;
	r = template_write_manifest(tmp, o, o->image, kver, plan->digest, *ret_config);
	return r < 0 ? ctx_error(ctx, r, "write template.json") : 0;
}

int template_import_image(space_ctx *ctx, const struct space_template_import_options *o, const char *root)
{
	struct image_plan plan;
	template_progress(o, "read image");
	int r = image_plan_load(ctx, o->image, &plan);
	if (r < 0)
		return r;
	struct store *s = ctx->store;
	_cleanup_free_ struct store_template *t = calloc(1, sizeof(*t));
	if (!t) {
		image_plan_clear(&plan);
		return -ENOMEM;
	}
	r = store_template_get(s, o->name, t);
	if (r == 0) {
		/* The same image under the same name: nothing to do, as a script running twice expects. */
		if (!strcmp(t->image_digest, plan.digest)) {
			ctx_log(ctx, SPACE_LOG_INFO, "template %s already holds image %s", o->name, plan.digest);
			r = 0;
		} else {
			r = ctx_error_msg(ctx, -EEXIST,
					  "template %s already exists%s%s (remove it with `space template rm %s`)", o->name,
					  t->image_digest[0] ? ", made from image " : "", t->image_digest, o->name);
		}
		image_plan_clear(&plan);
		return r;
	}
	if (r != -ENOENT) {
		image_plan_clear(&plan);
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	}
	char tmp[PATH_MAX];
	(void)core_pool_tmp_sweep(ctx, root);
	if ((r = core_pool_tmp_path(ctx, root, tmp, sizeof(tmp))) < 0) {
		image_plan_clear(&plan);
		return r;
	}
	template_progress(o, "create subvolume");
	if ((r = store_btrfs_subvolume_create(tmp)) < 0) {
		image_plan_clear(&plan);
		return ctx_error(ctx, r, "create subvolume %s", tmp);
	}
	util_fault_point("template-import", 1);
	_cleanup_free_ char *config = NULL;
	r = stage(ctx, o, &plan, root, tmp, &config);
	if (r == 0)
		r = template_commit(ctx, o, root, tmp, plan.digest, config);
	if (r < 0)
		(void)store_btrfs_subvolume_delete(tmp);
	image_plan_clear(&plan);
	return r;
}
