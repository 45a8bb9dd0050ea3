/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernels and boot assets as public calls (`space kernel ls|fetch|prepare` and any other client): thin
 * wrappers over kernel.c's discovery, fetching and initramfs cache that hand out size-versioned structs
 * the library allocates (one allocation each: the struct, then its strings).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/vm_assets.h"

/* Allocates a struct of head bytes (its first field the uint32_t size, set to head) followed by copies of
 * the 4 strings, the struct's 4 consecutive string pointers from offset first pointing at them. One
 * allocation: free() releases it all. */
static int kernel_api_pack(space_ctx *ctx, const char *what, size_t head, size_t first, const char *const strs[4],
			   void **ret)
{
	size_t total = head;
	for (size_t i = 0; i < 4; i++)
		total += strlen(strs[i]) + 1;
	char *p = calloc(1, total);
	if (!p)
		return ctx_error(ctx, -ENOMEM, "%s", what);
	uint32_t size = (uint32_t)head;
	memcpy(p, &size, sizeof(size));
	char *at = p + head;
	for (size_t i = 0; i < 4; i++) {
		size_t l = strlen(strs[i]) + 1;
		memcpy(at, strs[i], l);
		memcpy(p + first + i * sizeof(char *), &at, sizeof(char *));
		at += l;
	}
	*ret = p;
	return 0;
}

struct kernel_api_list {
	space_kernel_fn fn;
	void *userdata;
	int stopped; /* the caller's callback stopped the listing with this */
};

static int kernel_api_one(const char *kind, const char *kernel, const char *moddir, const char *kver, void *userdata)
{
	struct kernel_api_list *l = userdata;
	struct space_kernel_info k = {
		.size = sizeof(k), .kind = kind, .kernel = kernel, .modules = moddir, .release = kver,
	};
	int r = l->fn(&k, l->userdata);
	if (r < 0)
		l->stopped = r;
	return r;
}

SPACE_API int space_kernel_list(space_ctx *ctx, space_kernel_fn fn, void *userdata)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	if (!fn)
		return ctx_error_msg(ctx, -EINVAL, "list kernels: no callback");
	struct kernel_api_list l = { fn, userdata, 0 };
	int r = vm_kernel_list(ctx, kernel_api_one, &l);
	if ((r == -EACCES || r == -EPERM) && r != l.stopped) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/kernels", ctx->state_dir);
		return ctx_error_needs_root(ctx, r, dir);
	}
	if (r < 0 && r != l.stopped)
		return ctx_error(ctx, r, "list kernels under %s/kernels", ctx->state_dir);
	return r;
}

SPACE_API int space_kernel_fetch(space_ctx *ctx, struct space_kernel_info **ret_kernel)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	if (!ret_kernel)
		return ctx_error_msg(ctx, -EINVAL, "fetch a kernel: no result pointer");
	char kernel[PATH_MAX], moddir[PATH_MAX], kver[128];
	int r = vm_kernel_fetch(ctx, kernel, moddir, kver);
	if (r < 0)
		return r; /* vm_kernel_fetch says what failed */
	const char *strs[] = { "fetched", kernel, moddir, kver };
	return kernel_api_pack(ctx, "fetch a kernel", sizeof(**ret_kernel), offsetof(struct space_kernel_info, kind),
			       strs, (void **)ret_kernel);
}

SPACE_API void space_kernel_info_free(struct space_kernel_info *kernel)
{
	free(kernel);
}

SPACE_API int space_kernel_prepare(space_ctx *ctx, const char *template_name, struct space_boot_assets **ret_assets)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	if (!ret_assets)
		return ctx_error_msg(ctx, -EINVAL, "prepare boot assets: no result pointer");
	char path[PATH_MAX] = "";
	if (template_name && strchr(template_name, '/')) {
		if (strlen(template_name) >= sizeof(path))
			return ctx_error(ctx, -ENAMETOOLONG, "template directory");
		strcpy(path, template_name);
	} else if (template_name) {
		struct template_info t;
		int r = core_template_get(ctx, template_name, &t);
		if (r < 0)
			return r;
		snprintf(path, sizeof(path), "%s", t.path);
	}
	struct vm_assets a;
	int r = vm_assets_prepare(ctx, *path ? path : NULL, &a);
	if (r < 0)
		return r; /* vm_assets_prepare says what failed */
	const char *strs[] = { a.kernel, a.initrd, a.cmdline, a.kver };
	return kernel_api_pack(ctx, "prepare boot assets", sizeof(**ret_assets),
			       offsetof(struct space_boot_assets, kernel), strs, (void **)ret_assets);
}

SPACE_API void space_boot_assets_free(struct space_boot_assets *assets)
{
	free(assets);
}
