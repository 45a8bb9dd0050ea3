/* SPDX-License-Identifier: Apache-2.0 */
/* What template_import.c and template_image.c share: staging a template and committing it. Private. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/internal.h"

void template_progress(const struct space_template_import_options *o, const char *stage);

/* Copies a file, sharing extents when both sides are on one btrfs (FICLONE). dst must not exist. */
int template_copy_file(const char *src, const char *dst, mode_t mode);

/* The kernel, initrd and modules of o into the staging subvolume tmp; kver: the kernel's release or "". */
int template_stage_boot_files(space_ctx *ctx, const struct space_template_import_options *o, const char *tmp,
			      char *kver, size_t kver_len);

/* tmp/template.json: what the template is made of (image_digest, image_config: NULL unless an image). */
int template_write_manifest(const char *dir, const struct space_template_import_options *o, const char *source,
			    const char *kver, const char *image_digest, const char *image_config);

/* Makes the staged subvolume tmp template o->name with its row, in one step (fault points 2..4). On failure
 * tmp is still the caller's to remove. */
int template_commit(space_ctx *ctx, const struct space_template_import_options *o, const char *root,
		    const char *tmp, const char *image_digest, const char *image_config);

/* The image path of space_template_import (o->image set; name, kernel and modules checked). */
int template_import_image(space_ctx *ctx, const struct space_template_import_options *o, const char *root);
