/* SPDX-License-Identifier: Apache-2.0 */
/* Template rows (store/templates.h). */
#include "store/templates.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

static const char TEMPLATE_SELECT[] =
	"SELECT t.name, t.path, t.rootfs_bytes, t.kernel IS NOT NULL, t.initrd IS NOT NULL, t.created_ms,"
	" coalesce(t.image_digest, ''),"
	" (SELECT count(*) FROM sandboxes s WHERE s.template = t.name AND s.status != 'destroyed'"
	"  AND s.pool IS NULL),"
	" (SELECT count(*) FROM checkpoints c WHERE c.template = t.name)"
	" FROM templates t";

static void template_row(sqlite3_stmt *st, struct store_template *t)
{
	memset(t, 0, sizeof(*t));
	const char *name = (const char *)sqlite3_column_text(st, 0), *path = (const char *)sqlite3_column_text(st, 1);
	snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
	snprintf(t->path, sizeof(t->path), "%s", path ? path : "");
	t->rootfs_bytes = (uint64_t)sqlite3_column_int64(st, 2);
	t->has_kernel = sqlite3_column_int(st, 3);
	t->has_initrd = sqlite3_column_int(st, 4);
	t->created_ms = sqlite3_column_int64(st, 5);
	const char *dg = (const char *)sqlite3_column_text(st, 6);
	snprintf(t->image_digest, sizeof(t->image_digest), "%s", dg ? dg : "");
	t->sandboxes = (uint32_t)sqlite3_column_int(st, 7);
	t->checkpoints = (uint32_t)sqlite3_column_int(st, 8);
}

int store_template_get(struct store *s, const char *name, struct store_template *ret)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	char sql[sizeof(TEMPLATE_SELECT) + 32];
	snprintf(sql, sizeof(sql), "%s WHERE t.name = ?1", TEMPLATE_SELECT);
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	template_row(st, ret);
	return 0;
}

int store_template_list(struct store *s, struct store_template **ret, size_t *ret_n)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	char sql[sizeof(TEMPLATE_SELECT) + 32];
	snprintf(sql, sizeof(sql), "%s ORDER BY t.name", TEMPLATE_SELECT);
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	struct store_template *list = NULL;
	size_t n = 0, cap = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			struct store_template *nl = reallocarray(list, ncap, sizeof(*list));
			if (!nl) {
				free(list);
				return -ENOMEM;
			}
			list = nl;
			cap = ncap;
		}
		template_row(st, &list[n++]);
	}
	if (rc != SQLITE_DONE) {
		free(list);
		return store_errno(rc);
	}
	*ret = list;
	*ret_n = n;
	return 0;
}

int store_template_exists(struct store *s, const char *name)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), "SELECT 1 FROM templates WHERE name = ?1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : store_errno(rc);
}

int store_template_insert(struct store *s, const struct store_template *t)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s),
				    "INSERT INTO templates(name, path, rootfs_bytes, kernel, initrd, created_ms, image_digest,"
				    " image_config) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, t->path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)t->rootfs_bytes);
	/* The file names inside the subvolume, as older stores have them. */
	if (t->has_kernel)
		sqlite3_bind_text(st, 4, "kernel", -1, SQLITE_STATIC);
	if (t->has_initrd)
		sqlite3_bind_text(st, 5, "initrd", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, t->created_ms);
	if (t->image_digest[0])
		sqlite3_bind_text(st, 7, t->image_digest, -1, SQLITE_STATIC);
	if (t->image_config)
		sqlite3_bind_text(st, 8, t->image_config, -1, SQLITE_STATIC);
	return store_errno(sqlite3_step(st));
}

int store_template_get_image_config(struct store *s, const char *name, char **ret)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), "SELECT image_config FROM templates WHERE name = ?1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	const char *v = (const char *)sqlite3_column_text(st, 0);
	char *copy = v ? strdup(v) : NULL;
	if (v && !copy)
		return -ENOMEM;
	*ret = copy;
	return 0;
}

int store_template_find_image(struct store *s, const char *digest, char name[64])
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s),
				    "SELECT name FROM templates WHERE image_digest = ?1 ORDER BY created_ms, name LIMIT 1", -1,
				    &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, digest, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	const char *v = (const char *)sqlite3_column_text(st, 0);
	snprintf(name, 64, "%s", v ? v : "");
	return 0;
}

int store_template_delete(struct store *s, const char *name)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), "DELETE FROM templates WHERE name = ?1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	return store_errno(sqlite3_step(st));
}
