/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's own store: <state_dir>/serve.db (SQLite, WAL, mode 0600), holding what only `space serve`
 * and `space apikey` use: API keys, envd access tokens, the metadata clients attach to sandboxes. The
 * library's space.db is not touched, but once: when serve.db is created, the rows of those tables in
 * space.db (where libspace kept them before the server had its own store) are copied over, so an upgraded
 * host keeps its keys. The schema is versioned by PRAGMA user_version, one transaction per migration.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"

struct serve_store {
	sqlite3 *db;
};

/* Migrations: entry i takes the schema from version i to i + 1. */
static const char *const serve_store_migrations[] = {
	/* 0 -> 1: the tables libspace's schema 3 and 4 held for the server, as they were. */
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  hash BLOB NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  last_used_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE sandbox_metadata ("
	"  sandbox_id TEXT PRIMARY KEY,"
	"  metadata TEXT NOT NULL);"
	"CREATE TABLE sandbox_tokens ("
	"  hash BLOB PRIMARY KEY,"
	"  sandbox_id TEXT NOT NULL,"
	"  created_ms INTEGER NOT NULL);"
	"CREATE INDEX sandbox_tokens_sandbox ON sandbox_tokens(sandbox_id);",
	/* 1 -> 2: sandboxes whose ports take requests without their access token (allowPublicTraffic). */
	"CREATE TABLE sandbox_public (sandbox_id TEXT PRIMARY KEY);",
	/* 2 -> 3: the local user a key is granted to (`space serve --unix`: the peer's uid is the key);
	 * at most one key per uid. */
	"ALTER TABLE api_keys ADD COLUMN uid INTEGER;"
	"CREATE UNIQUE INDEX api_keys_uid ON api_keys(uid) WHERE uid IS NOT NULL;",
};
#define SERVE_STORE_VERSION ((int)(sizeof(serve_store_migrations) / sizeof(serve_store_migrations[0])))

/* The tables copied from space.db on first open, with their columns (the same on both sides). */
static const struct {
	const char *table, *columns, *params;
} serve_store_imports[] = {
	{ "api_keys", "id, name, hash, created_ms, last_used_ms", "?, ?, ?, ?, ?" },
	{ "sandbox_metadata", "sandbox_id, metadata", "?, ?" },
	{ "sandbox_tokens", "hash, sandbox_id, created_ms", "?, ?, ?" },
};

int serve_store_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW: return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH: return -EACCES;
	case SQLITE_CONSTRAINT: return -EEXIST;
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_CANTOPEN: return -ENOENT;
	default: return -EIO;
	}
}

sqlite3 *serve_store_db(struct serve_store *s)
{
	return s->db;
}

const char *serve_store_errmsg(struct serve_store *s)
{
	return sqlite3_errmsg(s->db);
}

static int serve_store_exec(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		snprintf(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return serve_store_errno(rc);
}

/* Copies one table's rows from the library's store (attached read-only as "lib"), if it has that table. */
static int serve_store_import_table(sqlite3 *db, sqlite3 *lib, size_t i, char *err, size_t errlen)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s", serve_store_imports[i].columns, serve_store_imports[i].table);
	sqlite3_stmt *from = NULL, *to = NULL;
	if (sqlite3_prepare_v2(lib, sql, -1, &from, NULL) != SQLITE_OK)
		return 0; /* a library store without the table (a newer one dropped it): nothing to import */
	snprintf(sql, sizeof(sql), "INSERT OR IGNORE INTO %s (%s) VALUES (%s)", serve_store_imports[i].table,
		 serve_store_imports[i].columns, serve_store_imports[i].params);
	int rc = sqlite3_prepare_v2(db, sql, -1, &to, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(from)) == SQLITE_ROW) {
		for (int c = 0; c < sqlite3_column_count(from); c++)
			sqlite3_bind_value(to, c + 1, sqlite3_column_value(from, c));
		rc = sqlite3_step(to);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		sqlite3_reset(to);
		sqlite3_clear_bindings(to);
	}
	if (rc != SQLITE_DONE)
		snprintf(err, errlen, "import %s from space.db: %s", serve_store_imports[i].table, sqlite3_errstr(rc));
	sqlite3_finalize(from);
	sqlite3_finalize(to);
	return rc == SQLITE_DONE ? 0 : serve_store_errno(rc);
}

/* The server's rows of an older space.db (read-only, its own connection: nothing is written there). */
static int serve_store_import(sqlite3 *db, const char *lib_path, char *err, size_t errlen)
{
	sqlite3 *lib = NULL;
	int rc = sqlite3_open_v2(lib_path, &lib, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "open %s to import the server's rows: %s", lib_path, sqlite3_errstr(rc));
		sqlite3_close(lib);
		return serve_store_errno(rc);
	}
	sqlite3_busy_timeout(lib, 5000);
	int r = 0;
	for (size_t i = 0; r == 0 && i < sizeof(serve_store_imports) / sizeof(serve_store_imports[0]); i++)
		r = serve_store_import_table(db, lib, i, err, errlen);
	sqlite3_close(lib);
	return r;
}

static int serve_store_version(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int v = -EIO;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Brings the schema up to SERVE_STORE_VERSION, each step one transaction (taken up front, so two
 * processes opening a new store do not both migrate it). */
static int serve_store_migrate(sqlite3 *db, const char *lib_path, char *err, size_t errlen)
{
	for (;;) {
		int r = serve_store_exec(db, "BEGIN IMMEDIATE", err, errlen);
		if (r < 0)
			return r;
		int v = serve_store_version(db);
		if (v < 0 || v > SERVE_STORE_VERSION) {
			serve_store_exec(db, "ROLLBACK", err, 0);
			if (v < 0)
				snprintf(err, errlen, "read the schema version of the server's store");
			else
				snprintf(err, errlen, "the server's store was written by a newer space (schema %d)", v);
			return v < 0 ? v : -EPROTO;
		}
		if (v == SERVE_STORE_VERSION)
			return serve_store_exec(db, "COMMIT", err, errlen);
		char set[64];
		snprintf(set, sizeof(set), "PRAGMA user_version = %d", v + 1);
		r = serve_store_exec(db, serve_store_migrations[v], err, errlen);
		if (r == 0 && v == 0)
			r = serve_store_import(db, lib_path, err, errlen);
		if (r == 0)
			r = serve_store_exec(db, set, err, errlen);
		if (r == 0)
			r = serve_store_exec(db, "COMMIT", err, errlen);
		if (r < 0) {
			char ignored[8];
			serve_store_exec(db, "ROLLBACK", ignored, sizeof(ignored));
			return r;
		}
	}
}

int serve_store_open(space_ctx *ctx, struct serve_store **ret, char *err, size_t errlen)
{
	const char *dir = space_ctx_state_dir(ctx);
	char lib[PATH_MAX], path[PATH_MAX];
	if ((size_t)snprintf(lib, sizeof(lib), "%s/space.db", dir) >= sizeof(lib) ||
	    (size_t)snprintf(path, sizeof(path), "%s/serve.db", dir) >= sizeof(path)) {
		snprintf(err, errlen, "state directory path too long");
		return -ENAMETOOLONG;
	}
	/* A closed store is not a missing one: the library's words (core/ctx.c, ctx_error_needs_root). */
	if (faccessat(AT_FDCWD, lib, R_OK | W_OK, AT_EACCESS) < 0 && (errno == EACCES || errno == EPERM)) {
		int e = -errno;
		snprintf(err, errlen, "%s: %s: the state directory %s is root's alone; this needs root", lib,
			 strerror(-e), dir);
		return e;
	}
	if (access(lib, F_OK) < 0) {
		snprintf(err, errlen, "%s is not initialized (run `space init --state %s`)", dir, dir);
		return -ENOENT;
	}
	/* Created 0600 by us, not by SQLite under the process umask: it holds the key hashes. SQLite gives its
	 * -wal and -shm files the database file's mode. An existing store is brought back to 0600. The fd is
	 * closed before SQLite opens the file: closing any fd of it later would drop SQLite's POSIX locks. */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0) {
		int e = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "open %s: %s", path, strerror(-e));
		return e;
	}
	close(fd);
	struct serve_store *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL);
	int r = serve_store_errno(rc);
	if (rc != SQLITE_OK)
		snprintf(err, errlen, "open %s: %s", path, sqlite3_errstr(rc));
	if (r == 0) {
		sqlite3_busy_timeout(s->db, 5000);
		r = serve_store_exec(s->db, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON", err, errlen);
	}
	if (r == 0)
		r = serve_store_migrate(s->db, lib, err, errlen);
	if (r < 0) {
		serve_store_close(s);
		return r;
	}
	*ret = s;
	return 0;
}

void serve_store_close(struct serve_store *s)
{
	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
}
