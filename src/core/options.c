/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Versioned option structs: their safe defaults (space_*_options_init) and how a caller's struct of any
 * version the library knows is read into the current layout (opts_*_load). Each struct's sizes by version
 * are listed once here, so adding a field is one line in its table.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "core/internal.h"
#include "util/cleanup.h"

/* The bytes a caller built against version v+1 of each struct has: the offset of the first field that the
 * next version added (never the sizeof of an older build, which may include tail padding we must not
 * read past), the whole struct for the current version. */
static const size_t ctx_sizes[] = { sizeof(struct space_ctx_options) };
static const size_t init_sizes[] = {
	offsetof(struct space_init_options, identity_map),
	sizeof(struct space_init_options),
};
static const size_t import_sizes[] = {
	offsetof(struct space_template_import_options, modules_dir),
	offsetof(struct space_template_import_options, image),
	sizeof(struct space_template_import_options),
};
static const size_t build_sizes[] = {
	sizeof(struct space_template_build_options),
};
static const size_t export_sizes[] = {
	sizeof(struct space_template_export_options),
};
static const size_t send_sizes[] = {
	sizeof(struct space_template_send_options),
};
static const size_t receive_sizes[] = {
	sizeof(struct space_template_receive_options),
};
static const size_t sandbox_sizes[] = {
	offsetof(struct space_sandbox_options, network_policy),
	offsetof(struct space_sandbox_options, snapshot_every_s),
	offsetof(struct space_sandbox_options, network_policy_trusted),
	sizeof(struct space_sandbox_options),
};
static const size_t exec_sizes[] = {
	offsetof(struct space_exec_options, flags),
	sizeof(struct space_exec_options),
};
static const size_t read_sizes[] = { sizeof(struct space_read_options) };
static const size_t fork_sizes[] = { sizeof(struct space_checkpoint_fork_options) };
static const size_t tsnap_sizes[] = { sizeof(struct space_template_snapshot_options) };

_Static_assert(ARRAY_SIZE(ctx_sizes) == SPACE_CTX_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(init_sizes) == SPACE_INIT_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(import_sizes) == SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(sandbox_sizes) == SPACE_SANDBOX_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(exec_sizes) == SPACE_EXEC_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(read_sizes) == SPACE_READ_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(fork_sizes) == SPACE_CHECKPOINT_FORK_OPTIONS_VERSION, "one size per version");
_Static_assert(ARRAY_SIZE(tsnap_sizes) == SPACE_TEMPLATE_SNAPSHOT_OPTIONS_VERSION, "one size per version");

/* Every options struct starts with its uint32_t version. */
static int version_known(space_ctx *ctx, const char *what, uint32_t version, size_t nsizes)
{
	if (version == 0 || version > nsizes) {
		/* 0 is a struct nobody initialized; a newer one may carry a field we would silently ignore. */
		if (ctx)
			return ctx_error_msg(ctx, -EINVAL,
					     "%s version %u: this library knows versions 1 to %zu (initialize the struct "
					     "with its _INIT macro or %s_init())",
					     what, version, nsizes, what);
		return -EINVAL;
	}
	return 0;
}

int opts_copy(space_ctx *ctx, const char *what, void *dst, size_t full, const void *src, const size_t *sizes,
	      size_t nsizes)
{
	if (!src)
		return -EINVAL;
	uint32_t version;
	memcpy(&version, src, sizeof(version));
	int r = version_known(ctx, what, version, nsizes);
	if (r < 0)
		return r;
	/* Fields of later versions read as zero: each one's zero is documented as its old behaviour. */
	memset(dst, 0, full);
	memcpy(dst, src, sizes[version - 1]);
	return 0;
}

static int opts_init(void *opts, uint32_t version, const size_t *sizes, size_t nsizes)
{
	if (!opts || version == 0 || version > nsizes)
		return -EINVAL;
	/* Only the bytes of that version: a caller built against an older header has a smaller struct. */
	memset(opts, 0, sizes[version - 1]);
	memcpy(opts, &version, sizeof(version));
	return 0;
}

SPACE_API int space_ctx_options_init(struct space_ctx_options *opts, uint32_t version)
{
	return opts_init(opts, version, ctx_sizes, ARRAY_SIZE(ctx_sizes));
}

SPACE_API int space_init_options_init(struct space_init_options *opts, uint32_t version)
{
	return opts_init(opts, version, init_sizes, ARRAY_SIZE(init_sizes));
}

SPACE_API int space_template_import_options_init(struct space_template_import_options *opts, uint32_t version)
{
	return opts_init(opts, version, import_sizes, ARRAY_SIZE(import_sizes));
}

SPACE_API int space_template_export_options_init(struct space_template_export_options *opts, uint32_t version)
{
	return opts_init(opts, version, export_sizes, ARRAY_SIZE(export_sizes));
}

SPACE_API int space_template_send_options_init(struct space_template_send_options *opts, uint32_t version)
{
	return opts_init(opts, version, send_sizes, ARRAY_SIZE(send_sizes));
}

SPACE_API int space_template_receive_options_init(struct space_template_receive_options *opts, uint32_t version)
{
	return opts_init(opts, version, receive_sizes, ARRAY_SIZE(receive_sizes));
}

int opts_template_send_load(space_ctx *ctx, const struct space_template_send_options *src,
			    struct space_template_send_options *dst)
{
	return opts_copy(ctx, "space_template_send_options", dst, sizeof(*dst), src, send_sizes, ARRAY_SIZE(send_sizes));
}

int opts_template_receive_load(space_ctx *ctx, const struct space_template_receive_options *src,
			       struct space_template_receive_options *dst)
{
	return opts_copy(ctx, "space_template_receive_options", dst, sizeof(*dst), src, receive_sizes,
			 ARRAY_SIZE(receive_sizes));
}

SPACE_API int space_template_build_options_init(struct space_template_build_options *opts, uint32_t version)
{
	return opts_init(opts, version, build_sizes, ARRAY_SIZE(build_sizes));
}

int opts_template_build_load(space_ctx *ctx, const struct space_template_build_options *src,
			     struct space_template_build_options *dst)
{
	return opts_copy(ctx, "space_template_build_options", dst, sizeof(*dst), src, build_sizes,
			 ARRAY_SIZE(build_sizes));
}

int opts_template_export_load(space_ctx *ctx, const struct space_template_export_options *src,
			      struct space_template_export_options *dst)
{
	return opts_copy(ctx, "space_template_export_options", dst, sizeof(*dst), src, export_sizes,
			 ARRAY_SIZE(export_sizes));
}

SPACE_API int space_sandbox_options_init(struct space_sandbox_options *opts, uint32_t version)
{
	return opts_init(opts, version, sandbox_sizes, ARRAY_SIZE(sandbox_sizes));
}

SPACE_API int space_exec_options_init(struct space_exec_options *opts, uint32_t version)
{
	int r = opts_init(opts, version, exec_sizes, ARRAY_SIZE(exec_sizes));
	if (r == 0)
		opts->stdin_fd = -1; /* version 1 reads stdin_fd 0 as the host's stdin */
	return r;
}

SPACE_API int space_read_options_init(struct space_read_options *opts, uint32_t version)
{
	return opts_init(opts, version, read_sizes, ARRAY_SIZE(read_sizes));
}

SPACE_API int space_checkpoint_fork_options_init(struct space_checkpoint_fork_options *opts, uint32_t version)
{
	return opts_init(opts, version, fork_sizes, ARRAY_SIZE(fork_sizes));
}

SPACE_API int space_template_snapshot_options_init(struct space_template_snapshot_options *opts, uint32_t version)
{
	return opts_init(opts, version, tsnap_sizes, ARRAY_SIZE(tsnap_sizes));
}

int opts_ctx_load(const struct space_ctx_options *src, struct space_ctx_options *dst)
{
	return opts_copy(NULL, "space_ctx_options", dst, sizeof(*dst), src, ctx_sizes, ARRAY_SIZE(ctx_sizes));
}

int opts_init_load(space_ctx *ctx, const struct space_init_options *src, struct space_init_options *dst)
{
	return opts_copy(ctx, "space_init_options", dst, sizeof(*dst), src, init_sizes, ARRAY_SIZE(init_sizes));
}

int opts_template_import_load(space_ctx *ctx, const struct space_template_import_options *src,
			      struct space_template_import_options *dst)
{
	return opts_copy(ctx, "space_template_import_options", dst, sizeof(*dst), src, import_sizes,
			 ARRAY_SIZE(import_sizes));
}

int opts_sandbox_load(space_ctx *ctx, const struct space_sandbox_options *src, struct space_sandbox_options *dst)
{
	return opts_copy(ctx, "space_sandbox_options", dst, sizeof(*dst), src, sandbox_sizes,
			 ARRAY_SIZE(sandbox_sizes));
}

int opts_read_load(space_ctx *ctx, const struct space_read_options *src, struct space_read_options *dst)
{
	return opts_copy(ctx, "space_read_options", dst, sizeof(*dst), src, read_sizes, ARRAY_SIZE(read_sizes));
}

int opts_exec_load(space_ctx *ctx, const struct space_exec_options *src, bool process, struct space_exec_options *dst)
{
	int r = opts_copy(ctx, "space_exec_options", dst, sizeof(*dst), src, exec_sizes, ARRAY_SIZE(exec_sizes));
	if (r < 0)
		return r;
	if (dst->version == 1) {
		/* Version 1 keeps its meaning: any stdin_fd >= 0, 0 included, is a stdin. */
		dst->flags = dst->stdin_fd >= 0 ? SPACE_EXEC_STDIN : 0;
		return 0;
	}
	if (dst->flags & ~(SPACE_EXEC_STDIN | SPACE_EXEC_USER))
		return ctx_error_msg(ctx, -EINVAL, "unknown space_exec_options flags %#x",
				     (unsigned)(dst->flags & ~(SPACE_EXEC_STDIN | SPACE_EXEC_USER)));
	/* A descriptor given without the flag is a caller who meant a stdin: refuse rather than drop it.
	 * stdin_fd 0 without the flag is the zero-filled struct, which means no stdin. */
	if (!(dst->flags & SPACE_EXEC_STDIN) && dst->stdin_fd > 0)
		return ctx_error_msg(ctx, -EINVAL,
				     "space_exec_options: stdin_fd %d given without SPACE_EXEC_STDIN in flags",
				     dst->stdin_fd);
	if ((dst->flags & SPACE_EXEC_STDIN) && !process && dst->stdin_fd < 0)
		return ctx_error_msg(ctx, -EINVAL, "space_exec_options: SPACE_EXEC_STDIN needs a stdin_fd");
	return 0;
}

/* The calls whose positional arguments became options (ABI 1): the options read, the core call made. */

SPACE_API int space_checkpoint_fork(space_ctx *ctx, const char *checkpoint_id,
				    const struct space_checkpoint_fork_options *opts, space_sandbox **ret_sandboxes)
{
	CTX_ENTER(ctx);
	struct space_checkpoint_fork_options o = SPACE_CHECKPOINT_FORK_OPTIONS_INIT;
	int r = opts ? opts_copy(ctx, "space_checkpoint_fork_options", &o, sizeof(o), opts, fork_sizes,
				 ARRAY_SIZE(fork_sizes))
		     : 0;
	return r < 0 ? r : core_checkpoint_fork(ctx, checkpoint_id, o.count ? o.count : 1, o.timeout_s, ret_sandboxes);
}

SPACE_API int space_template_snapshot(space_ctx *ctx, const char *name,
				      const struct space_template_snapshot_options *opts)
{
	CTX_ENTER(ctx);
	struct space_template_snapshot_options o = SPACE_TEMPLATE_SNAPSHOT_OPTIONS_INIT;
	int r = opts ? opts_copy(ctx, "space_template_snapshot_options", &o, sizeof(o), opts, tsnap_sizes,
				 ARRAY_SIZE(tsnap_sizes))
		     : 0;
	return r < 0 ? r : core_template_snapshot(ctx, name, o.cpus, o.memory_mib);
}
