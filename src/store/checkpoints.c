/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint rows (store/checkpoints.h). */
#include "store/checkpoints.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

#define CP_SELECT "SELECT id, sandbox_id, template, coalesce(name, ''), kind, path, created_ms FROM checkpoints"

static void cp_row(sqlite3_stmt *st, struct store_checkpoint *c)
{
	memset(c, 0, sizeof(*c));
	const char *f[6];
	for (int i = 0; i < 6; i++) {
		f[i] = (const char *)sqlite3_column_text(st, i);
		if (!f[i])
			f[i] = "";
	}
	snprintf(c->id, sizeof(c->id), "%s", f[0]);
	snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", f[1]);
	snprintf(c->template_name, sizeof(c->template_name), "%s", f[2]);
	snprintf(c->name, sizeof(c->name), "%s", f[3]);
	snprintf(c->kind, sizeof(c->kind), "%s", f[4]);
	snprintf(c->path, sizeof(c->path), "%s", f[5]);
	c->created_ms = sqlite3_column_int64(st, 6);
}

/* Rows matching "WHERE <col> = arg" (all when col is NULL), oldest first. */
static int cp_query(struct store *s, const char *col, const char *arg, struct store_checkpoint **ret, size_t *ret_n)
{
	char sql[256];
	snprintf(sql, sizeof(sql), CP_SELECT "%s%s%s ORDER BY created_ms, rowid", col ? " WHERE " : "", col ? col : "",
		 col ? " = ?1" : "");
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	if (col)
		sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
	struct store_checkpoint *list = NULL;
	size_t n = 0, cap = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct store_checkpoint *nl = reallocarray(list, ncap, sizeof(*list));
			if (!nl) {
				free(list);
				return -ENOMEM;
			}
			list = nl;
			cap = ncap;
		}
		cp_row(st, &list[n++]);
	}
	if (rc != SQLITE_DONE) {
		free(list);
		return store_errno(rc);
	}
	*ret = list;
	*ret_n = n;
	return 0;
}

int store_checkpoint_list(struct store *s, const char *sandbox_id, struct store_checkpoint **ret, size_t *ret_n)
{
	return cp_query(s, sandbox_id ? "sandbox_id" : NULL, sandbox_id, ret, ret_n);
}

int store_checkpoint_get(struct store *s, const char *id, struct store_checkpoint *ret)
{
	if (!id)
		return -EINVAL;
	struct store_checkpoint *list = NULL;
	size_t n = 0;
	int r = cp_query(s, "id", id, &list, &n);
	if (r < 0)
		return r;
	if (n == 0)
		r = -ENOENT;
	else
		*ret = list[0];
	free(list);
	return r;
}

int store_checkpoint_insert(struct store *s, const struct store_checkpoint *c)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s),
				    "INSERT INTO checkpoints(id, sandbox_id, template, name, kind, path, created_ms)"
				    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, c->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, c->sandbox_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, c->template_name, -1, SQLITE_STATIC);
	if (c->name[0])
		sqlite3_bind_text(st, 4, c->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, c->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, c->path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, c->created_ms);
	return store_errno(sqlite3_step(st));
}

int store_checkpoint_delete(struct store *s, const char *id)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), "DELETE FROM checkpoints WHERE id = ?1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return store_errno(sqlite3_step(st));
}
