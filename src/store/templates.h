/* SPDX-License-Identifier: Apache-2.0 */
/* Template rows: the only code that reads or writes the templates table. Private. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

struct store_template {
	char name[64];
	char path[PATH_MAX]; /* its subvolume */
	uint64_t rootfs_bytes;
	bool has_kernel;
	bool has_initrd;
	int64_t created_ms;
	char image_digest[80]; /* the image config's digest, "" for a template not made from an image */
	const char *image_config; /* insert only: what the image gives processes (JSON), or NULL */
	uint32_t sandboxes;   /* read only: user sandboxes (not destroyed, not in a warm pool) made from it */
	uint32_t checkpoints; /* read only: checkpoints that depend on it */
};

/* One row; -ENOENT when there is none of that name. */
int store_template_get(struct store *s, const char *name, struct store_template *ret);

/* Every row, by name. *ret is one allocation (NULL when none): free() it. */
int store_template_list(struct store *s, struct store_template **ret, size_t *ret_n);

/* 1 when a template of that name exists, 0 when not, or -errno. */
int store_template_exists(struct store *s, const char *name);

/* Inserts t (name, path, rootfs_bytes, has_kernel, has_initrd, created_ms, image_digest, image_config);
 * -EEXIST when the name is taken. Inside or outside a transaction. */
int store_template_insert(struct store *s, const struct store_template *t);

/* Deletes the row of name (none: 0 all the same). */
int store_template_delete(struct store *s, const char *name);

/* The image config JSON of template name into *ret (malloc'd; NULL when it has none). -ENOENT: no template. */
int store_template_get_image_config(struct store *s, const char *name, char **ret);

/* The name of a template made from the image with config digest (the oldest, if several), into name
 * (64 bytes). 0, or -ENOENT when there is none. */
int store_template_find_image(struct store *s, const char *digest, char name[64]);
