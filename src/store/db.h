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
#define STORE_SCHEMA_VERSION 4

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

/* Appends to the event log (inside or outside a transaction). sandbox_id may be NULL. */
int store_event(struct store *s, const char *sandbox_id, const char *kind, const char *detail);

/* The last SQLite error message of this connection. */
const char *store_errmsg(struct store *s);

/* Maps an SQLite result code to -errno (SQLITE_BUSY -> -EBUSY, SQLITE_CONSTRAINT -> -EEXIST, ...). */
int store_errno(int rc);
