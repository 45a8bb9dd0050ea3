/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint rows: the only code that reads or writes the checkpoints table. Private. */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

struct store;

struct store_checkpoint {
	char id[32];
	char sandbox_id[32];
	char template_name[64];
	char name[64];       /* "" = none */
	char kind[8];        /* "disk" or "full" */
	char path[PATH_MAX]; /* its read-only subvolume */
	int64_t created_ms;
};

/* One row; -ENOENT when there is none. */
int store_checkpoint_get(struct store *s, const char *id, struct store_checkpoint *ret);

/* The checkpoints of sandbox_id (NULL: every one), oldest first. *ret is one allocation (NULL when none):
 * free() it. */
int store_checkpoint_list(struct store *s, const char *sandbox_id, struct store_checkpoint **ret, size_t *ret_n);

/* Inserts c; -EEXIST when its id is taken. Inside or outside a transaction. */
int store_checkpoint_insert(struct store *s, const struct store_checkpoint *c);

/* Deletes the row of id (none: 0 all the same). */
int store_checkpoint_delete(struct store *s, const char *id);
