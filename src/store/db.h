/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The state store: <state_dir>/space.db, SQLite in WAL mode with a busy timeout, schema versioned by
 * PRAGMA user_version and brought up to date by an ordered list of migrations, each one transaction.
 * Several processes may use one store at once: writers take the lock up front (BEGIN IMMEDIATE) and
 * wait up to the busy timeout for each other.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

struct store;

/* The schema version this build writes. */
#define STORE_SCHEMA_VERSION 10

/*
 * Opens (with create: creates) the store at path and migrates it to STORE_SCHEMA_VERSION.
 * -ENOENT if it does not exist and create is false; -EPROTO for a store written by a newer libspace.
 * On failure a message is left in errbuf.
 */
int store_open(const char *path, bool create, struct store **ret, char *errbuf, size_t errlen);
void store_close(struct store *s);
sqlite3 *store_db(struct store *s);

/*
 * Applies migrations to db until its user_version reaches target (at most STORE_SCHEMA_VERSION).
 * Each step is one transaction; a failed step leaves the db at the previous version.
 */
int store_migrate(sqlite3 *db, int target, char *errbuf, size_t errlen);

/* Current user_version, or -errno. */
int store_schema_version(sqlite3 *db);

/* Write transaction (BEGIN IMMEDIATE: takes the write lock now, waiting up to the busy timeout). */
int store_begin(struct store *s);
int store_commit(struct store *s);
void store_rollback(struct store *s);

/* Runs one statement without results. */
int store_exec(struct store *s, const char *sql);

/* Key/value settings. get: -ENOENT when missing; *ret is malloc'd. */
int store_meta_get(struct store *s, const char *key, char **ret);
int store_meta_set(struct store *s, const char *key, const char *value);
/* Removes a setting (none: 0 all the same). */
int store_meta_delete(struct store *s, const char *key);

/*
 * The event log. A sandbox makes rows in it (its gateway's refusals, its lifecycle), so it is bounded:
 * at most per_sandbox rows per sandbox and total rows in all, the newest kept, and none older than
 * max_age_days. Pruned in the transaction of every STORE_EVENTS_PRUNE_EVERY-th insert (by the rows' seq,
 * so across processes), and by store_events_prune; a sandbox's rows go with it (store_events_remove).
 * Defaults, or the operator's settings $SPACE_EVENTS_KEEP_PER_SANDBOX, $SPACE_EVENTS_KEEP and
 * $SPACE_EVENTS_KEEP_DAYS, read by store_open (which refuses a value that does not parse or is out of
 * range, rather than run unbounded).
 */
#define STORE_EVENTS_PER_SANDBOX_DEFAULT 10000u
#define STORE_EVENTS_TOTAL_DEFAULT 100000u
#define STORE_EVENTS_MAX_AGE_DAYS_DEFAULT 30u
#define STORE_EVENTS_PRUNE_EVERY 128
#define STORE_EVENT_KIND_MAX 64     /* bytes kept of an event's kind */
#define STORE_EVENT_DETAIL_MAX 1024 /* bytes kept of its detail (cut on a UTF-8 boundary, "..." appended) */

struct store_events_retention {
	uint32_t per_sandbox;  /* 1..10,000,000 */
	uint32_t total;        /* 1..100,000,000 */
	uint32_t max_age_days; /* 1..3650 */
};

/* The retention in force on s; set replaces it (-EINVAL for a value out of the ranges above). */
void store_events_retention(struct store *s, struct store_events_retention *ret);
int store_events_set_retention(struct store *s, const struct store_events_retention *r);

/* Appends to the event log (inside or outside a transaction). sandbox_id may be NULL. kind and detail are
 * cut to STORE_EVENT_KIND_MAX and STORE_EVENT_DETAIL_MAX bytes. */
int store_event(struct store *s, const char *sandbox_id, const char *kind, const char *detail);
/* The same with the time it happened (an event collected later, e.g. from the gateway's spool). */
int store_event_at(struct store *s, const char *sandbox_id, const char *kind, const char *detail, int64_t ts_ms);

/* Applies the retention now: to sandbox_id's rows (NULL: to every sandbox's), then the total and the age.
 * Inside or outside a transaction. Returns the number of rows deleted, or -errno. */
int store_events_prune(struct store *s, const char *sandbox_id);

/* Deletes every event of sandbox_id (the sandbox is removed). Returns the number of rows, or -errno. */
int store_events_remove(struct store *s, const char *sandbox_id);

/* --- events_query.c: read-only queries behind the public event calls (space_event_list/count) --- */
struct store_events_filter {
	const char *sandbox_id;       /* NULL: every sandbox */
	const char *kind;             /* NULL: every kind */
	int64_t after_seq;            /* rows with seq > this */
	uint32_t limit;               /* 0: no limit (store_events_count ignores it) */
};
/* One row; its strings (cut to the caps above, sandbox_id/detail NULL when the row has none) are valid
 * during the callback only. */
struct store_event_row {
	int64_t seq, ts_ms;
	const char *sandbox_id, *kind, *detail;
};
typedef int (*store_event_fn)(const struct store_event_row *row, void *userdata);
/* Calls fn for each matching row, by seq; a negative return from fn stops with it. */
int store_events_query(struct store *s, const struct store_events_filter *f, store_event_fn fn, void *userdata);
int store_events_count(struct store *s, const struct store_events_filter *f, uint64_t *ret);

/* The last SQLite error message of this connection. */
const char *store_errmsg(struct store *s);

/* Maps an SQLite result code to -errno (SQLITE_BUSY -> -EBUSY, SQLITE_CONSTRAINT -> -EEXIST, ...). */
int store_errno(int rc);
