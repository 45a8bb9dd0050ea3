/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-only queries of the event log behind the public calls its clients use (the CLI, `space serve`):
 * by sandbox, kind and cursor, and counts. Nothing here writes.
 */
#include <errno.h>
#include <string.h>

#include "store/db.h"
#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

/* Copies a column's text into buf (at most max bytes: rows of older stores were not cut). */
static const char *events_query_text(sqlite3_stmt *st, int col, char *buf, size_t max)
{
	const char *v = (const char *)sqlite3_column_text(st, col);
	if (!v)
		return NULL;
	size_t n = strnlen(v, max);
	memcpy(buf, v, n);
	buf[n] = '\0';
	return buf;
}

#define EVENTS_QUERY_WHERE " WHERE seq > ?1 AND (?2 IS NULL OR sandbox_id = ?2) AND (?3 IS NULL OR kind = ?3)"

/* Prepares select (which ends with EVENTS_QUERY_WHERE, then maybe ?4) and binds the filter's ?1..?3. */
static int events_query_prepare(struct store *s, const char *select, const struct store_events_filter *f,
				sqlite3_stmt **ret)
{
	int rc = sqlite3_prepare_v2(store_db(s), select, -1, ret, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_int64(*ret, 1, f->after_seq);
	if (f->sandbox_id)
		sqlite3_bind_text(*ret, 2, f->sandbox_id, -1, SQLITE_STATIC);
	if (f->kind)
		sqlite3_bind_text(*ret, 3, f->kind, -1, SQLITE_STATIC);
	return 0;
}

int store_events_query(struct store *s, const struct store_events_filter *f, store_event_fn fn, void *userdata)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int r = events_query_prepare(s, "SELECT seq, ts_ms, sandbox_id, kind, detail FROM events" EVENTS_QUERY_WHERE
				     " ORDER BY seq LIMIT ?4", f, &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 4, f->limit ? (int64_t)f->limit : -1); /* LIMIT -1: no limit */
	char id[64], kind[STORE_EVENT_KIND_MAX + 1], detail[STORE_EVENT_DETAIL_MAX + 1];
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_event_row row = {
			.seq = sqlite3_column_int64(st, 0),
			.ts_ms = sqlite3_column_int64(st, 1),
			.sandbox_id = events_query_text(st, 2, id, sizeof(id) - 1),
			.kind = events_query_text(st, 3, kind, STORE_EVENT_KIND_MAX),
			.detail = events_query_text(st, 4, detail, STORE_EVENT_DETAIL_MAX),
		};
		r = fn(&row, userdata);
		if (r < 0)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store_errno(rc);
}

int store_events_count(struct store *s, const struct store_events_filter *f, uint64_t *ret)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int r = events_query_prepare(s, "SELECT count(*) FROM events" EVENTS_QUERY_WHERE, f, &st);
	if (r < 0)
		return r;
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	*ret = (uint64_t)sqlite3_column_int64(st, 0);
	return 0;
}
