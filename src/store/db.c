/* SPDX-License-Identifier: Apache-2.0 */
#include "store/db.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

struct store {
	sqlite3 *db;
	struct store_events_retention keep;
};

/* How long a writer waits for the store's lock. Hundreds of sandboxes created at once on a loaded host
 * (each change one short transaction) queue for it longer than ten seconds. */
#define BUSY_TIMEOUT_MS 60000

/* Schema 7's move of values out of the metadata JSON (j: the JSON, p: the path, dflt: the value when the
 * key is absent or not of its type). Values are the library's own, still checked for their range. */
#define STORE_V7_HAS(j, p) "(json_valid(" j ") AND json_type(" j ", '" p "') IS NOT NULL)"
#define STORE_V7_U32(j, p, dflt)                                                                          \
	"(CASE WHEN json_type(" j ", '" p "') IN ('integer', 'real') AND json_extract(" j ", '" p "')"    \
	" BETWEEN 0 AND 4294967295 THEN CAST(json_extract(" j ", '" p "') AS INTEGER) ELSE " dflt " END)"
#define STORE_V7_U64(j, p, dflt)                                                                          \
	"(CASE WHEN json_type(" j ", '" p "') IN ('integer', 'real') AND json_extract(" j ", '" p "') >= 0" \
	" THEN CAST(json_extract(" j ", '" p "') AS INTEGER) ELSE " dflt " END)"
#define STORE_V7_POOL(j, dflt)                                                                            \
	"(CASE WHEN json_type(" j ", '$.pool') = 'text' THEN json_extract(" j ", '$.pool') ELSE " dflt " END)"

/*
 * Migrations: index i takes the schema from version i to i + 1. Append only; never edit a released step,
 * since stores in the field are at every earlier version.
 */
static const char *const migrations[] = {
	/* 0 -> 1: the base schema. */
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY,"
	"  value TEXT NOT NULL);"
	"CREATE TABLE templates ("
	"  name TEXT PRIMARY KEY,"
	"  path TEXT NOT NULL,"
	"  rootfs_bytes INTEGER NOT NULL,"
	"  kernel TEXT,"
	"  initrd TEXT,"
	"  created_ms INTEGER NOT NULL);"
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY,"
	"  template TEXT NOT NULL,"
	"  isolation TEXT NOT NULL CHECK (isolation IN ('vm', 'jail')),"
	"  status TEXT NOT NULL CHECK (status IN"
	"    ('creating', 'running', 'paused', 'stopped', 'failed', 'destroyed')),"
	"  reason TEXT,"
	"  pid INTEGER,"
	"  pid_start INTEGER,"
	"  cpus INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  path TEXT NOT NULL,"
	"  runtime_dir TEXT NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  updated_ms INTEGER NOT NULL);"
	"CREATE INDEX sandboxes_status ON sandboxes(status);"
	"CREATE TABLE checkpoints ("
	"  id TEXT PRIMARY KEY,"
	"  sandbox_id TEXT NOT NULL,"
	"  template TEXT NOT NULL,"
	"  name TEXT,"
	"  kind TEXT NOT NULL CHECK (kind IN ('disk', 'full')),"
	"  path TEXT NOT NULL,"
	"  created_ms INTEGER NOT NULL);"
	"CREATE TABLE events ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  ts_ms INTEGER NOT NULL,"
	"  sandbox_id TEXT,"
	"  kind TEXT NOT NULL,"
	"  detail TEXT);",

	/* 1 -> 2: lifetimes, isolation details and metadata on sandboxes; events by sandbox. */
	"ALTER TABLE sandboxes ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN cgroup TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN metadata TEXT;"
	"CREATE INDEX events_sandbox ON events(sandbox_id, seq);",

	/* 2 -> 3: `space serve`: API keys (SHA-256 of the key, never the key) and the metadata clients
	 * attach to sandboxes. */
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  hash BLOB NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  last_used_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE sandbox_metadata ("
	"  sandbox_id TEXT PRIMARY KEY,"
	"  metadata TEXT NOT NULL);",

	/* 3 -> 4: `space serve`: per-sandbox access tokens of the E2B envd plane (SHA-256 of the token,
	 * never the token; a sandbox may have several, one per create or connect). */
	"CREATE TABLE sandbox_tokens ("
	"  hash BLOB PRIMARY KEY,"
	"  sandbox_id TEXT NOT NULL,"
	"  created_ms INTEGER NOT NULL);"
	"CREATE INDEX sandbox_tokens_sandbox ON sandbox_tokens(sandbox_id);",

	/* 4 -> 5: the machine-wide uid slot a sandbox holds (src/util/uidalloc.h: a jail's range, a VMM's
	 * uid); 0 = none. Kept across restarts, released when the sandbox is destroyed. */
	"ALTER TABLE sandboxes ADD COLUMN host_uid INTEGER NOT NULL DEFAULT 0;",

	/* 5 -> 6: the event log's retention by age (store_events_prune) finds old rows without a scan. */
	"CREATE INDEX events_ts ON events(ts_ms);",

	/* 6 -> 7: typed columns for what the library reads back (store/sandboxes.h), until now kept in the
	 * metadata JSON and read back as doubles: the jail's uid_base, warm-pool membership ("pool"), the
	 * snapshot helper's pid and start time ("snapshots.pid", "snapshots.pid_start"); and the pid namespace
	 * each pid was recorded in (util/procstat.h), 0 for pids recorded before.
	 * Existing values move into the columns. Writers not yet on store/sandboxes.h still put those keys in
	 * the JSON and readers still read them there: the two triggers copy every such write into the
	 * columns, so the columns are true whoever wrote. A later step drops the triggers and the keys once
	 * every writer and reader uses the columns. The third trigger records the writer's pid namespace
	 * (space_pid_ns(), registered by store_open) with a pid written without one. */
	"ALTER TABLE sandboxes ADD COLUMN pid_ns INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN uid_base INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN pool TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN helper_pid INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN helper_pid_start INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN helper_pid_ns INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX sandboxes_pool ON sandboxes(pool, status) WHERE pool IS NOT NULL;"
	"UPDATE sandboxes SET"
	"  uid_base = " STORE_V7_U32("metadata", "$.uid_base", "uid_base") ","
	"  pool = " STORE_V7_POOL("metadata", "NULL") ","
	"  helper_pid = " STORE_V7_U32("metadata", "$.snapshots.pid", "0") ","
	"  helper_pid_start = " STORE_V7_U64("metadata", "$.snapshots.pid_start", "0")
	" WHERE json_valid(metadata);"
	"CREATE TRIGGER sandboxes_v6_meta_insert AFTER INSERT ON sandboxes WHEN json_valid(NEW.metadata) BEGIN"
	"  UPDATE sandboxes SET"
	"    uid_base = " STORE_V7_U32("NEW.metadata", "$.uid_base", "uid_base") ","
	"    pool = " STORE_V7_POOL("NEW.metadata", "pool") ","
	"    helper_pid = " STORE_V7_U32("NEW.metadata", "$.snapshots.pid", "helper_pid") ","
	"    helper_pid_start = " STORE_V7_U64("NEW.metadata", "$.snapshots.pid_start", "helper_pid_start")
	"  WHERE id = NEW.id;"
	" END;"
	"CREATE TRIGGER sandboxes_v6_meta_update AFTER UPDATE OF metadata ON sandboxes"
	"  WHEN NEW.metadata IS NOT OLD.metadata BEGIN"
	"  UPDATE sandboxes SET"
	"    uid_base = " STORE_V7_U32("NEW.metadata", "$.uid_base", "uid_base") ","
	/* A key removed (a pooled sandbox handed out, a snapshot helper stopped) clears its column. */
	"    pool = " STORE_V7_POOL("NEW.metadata",
				   "CASE WHEN " STORE_V7_HAS("OLD.metadata", "$.pool") " THEN NULL ELSE pool END") ","
	"    helper_pid = " STORE_V7_U32("NEW.metadata", "$.snapshots.pid",
					"CASE WHEN " STORE_V7_HAS("OLD.metadata", "$.snapshots.pid")
					" THEN 0 ELSE helper_pid END") ","
	"    helper_pid_start = " STORE_V7_U64("NEW.metadata", "$.snapshots.pid_start",
					      "CASE WHEN " STORE_V7_HAS("OLD.metadata", "$.snapshots.pid_start")
					      " THEN 0 ELSE helper_pid_start END")
	"  WHERE id = NEW.id;"
	" END;"
	"CREATE TRIGGER sandboxes_pid_ns AFTER UPDATE OF pid ON sandboxes"
	"  WHEN NEW.pid_ns IS OLD.pid_ns AND NEW.pid IS NOT OLD.pid BEGIN"
	"  UPDATE sandboxes SET pid_ns = CASE WHEN NEW.pid > 0 THEN space_pid_ns() ELSE 0 END WHERE id = NEW.id;"
	" END;"
	"CREATE TRIGGER sandboxes_pid_ns_insert AFTER INSERT ON sandboxes"
	"  WHEN NEW.pid > 0 AND NEW.pid_ns = 0 BEGIN"
	"  UPDATE sandboxes SET pid_ns = space_pid_ns() WHERE id = NEW.id;"
	" END;",

	/* 7 -> 8: every writer and reader now uses schema 7's columns (store/sandboxes.h): the transitional
	 * triggers go, and the keys they copied leave the metadata JSON, which from here on holds only what
	 * the caller chose. The columns already hold those values (moved by 6 -> 7, kept true since by the
	 * triggers), so nothing is lost; the triggers go first, so the UPDATE below does not clear them. */
	"DROP TRIGGER IF EXISTS sandboxes_v6_meta_insert;"
	"DROP TRIGGER IF EXISTS sandboxes_v6_meta_update;"
	"UPDATE sandboxes SET metadata = json_remove(metadata, '$.uid_base', '$.pool', '$.snapshots.pid',"
	"  '$.snapshots.pid_start')"
	" WHERE json_valid(metadata) AND (" STORE_V7_HAS("metadata", "$.uid_base") " OR "
	STORE_V7_HAS("metadata", "$.pool") " OR " STORE_V7_HAS("metadata", "$.snapshots.pid") " OR "
	STORE_V7_HAS("metadata", "$.snapshots.pid_start") ");",

	/* 8 -> 9: templates made from container images: the image config's digest (its identity: importing it
	 * again reuses the template's disk) and what the config gives processes (env, working directory, user,
	 * entrypoint, command, labels) as JSON. Older templates have neither. */
	"ALTER TABLE templates ADD COLUMN image_digest TEXT;"
	"ALTER TABLE templates ADD COLUMN image_config TEXT;"
	"CREATE INDEX templates_image ON templates(image_digest) WHERE image_digest IS NOT NULL;",

	/* 9 -> 10: a template's live sandboxes are counted on every create (store/templates.c): through this
	 * index, not by a scan of every sandbox ever destroyed, whose rows stay (so the time and the SQLite
	 * page cache a create takes no longer grow with the store's history). */
	"CREATE INDEX sandboxes_live_template ON sandboxes(template) WHERE status != 'destroyed';",
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == STORE_SCHEMA_VERSION,
	       "one migration per schema version");

int store_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EUCLEAN;
	case SQLITE_IOERR:
		return -EIO;
	default:
		return -EPROTO;
	}
}

static void sql_pid_ns(sqlite3_context *c, int argc, sqlite3_value **argv)
{
	(void)argc;
	(void)argv;
	sqlite3_result_int64(c, (sqlite3_int64)util_pidns_self());
}

int store_schema_version(sqlite3 *db)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return store_errno(sqlite3_errcode(db));
	int rc = sqlite3_step(st);
	int v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : store_errno(rc);
	sqlite3_finalize(st);
	return v;
}

/*
 * Before a store with rows in it is migrated: a copy of it as it is, "<store>.bak-schema-<version>" (0600,
 * through SQLite's online backup, so it is a consistent database even with other writers), made once per
 * version. A migration that goes wrong, or a libspace that has to be downgraded, has it to go back to.
 */
static int backup_before_migration(sqlite3 *db, int version, char *errbuf, size_t errlen)
{
	const char *path = sqlite3_db_filename(db, "main");
	if (!path || !*path)
		return 0; /* in memory */
	char dst[PATH_MAX], tmp[PATH_MAX];
	if ((size_t)snprintf(dst, sizeof(dst), "%s.bak-schema-%d", path, version) >= sizeof(dst) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%d", dst, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	if (access(dst, F_OK) == 0)
		return 0;
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(errbuf, errlen, "back up the store before its migration: %s: %s", tmp, strerror(-r));
		return r;
	}
	close(fd);
	sqlite3 *out = NULL;
	int rc = sqlite3_open_v2(tmp, &out, SQLITE_OPEN_READWRITE, NULL);
	sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(out, "main", db, "main") : NULL;
	if (b) {
		rc = sqlite3_backup_step(b, -1);
		int f = sqlite3_backup_finish(b);
		rc = rc == SQLITE_DONE ? f : rc;
	} else if (rc == SQLITE_OK) {
		rc = sqlite3_errcode(out);
	}
	if (rc != SQLITE_OK)
		snprintf(errbuf, errlen, "back up the store before its migration into %s: %s", tmp,
			 out ? sqlite3_errmsg(out) : "out of memory");
	sqlite3_close(out);
	if (rc == SQLITE_OK && rename(tmp, dst) < 0) {
		snprintf(errbuf, errlen, "back up the store: rename %s: %s", tmp, strerror(errno));
		rc = SQLITE_IOERR;
	}
	if (rc != SQLITE_OK) {
		unlink(tmp);
		return store_errno(rc) < 0 ? store_errno(rc) : -EIO;
	}
	return 0;
}

int store_migrate(sqlite3 *db, int target, char *errbuf, size_t errlen)
{
	if (target > STORE_SCHEMA_VERSION)
		target = STORE_SCHEMA_VERSION;
	/* Most opens find the store current: a plain read says so without taking the write lock, which
	 * many processes and threads opening the store at once would otherwise queue for. */
	int cur = store_schema_version(db);
	if (cur >= target && cur <= STORE_SCHEMA_VERSION)
		return 0;
	if (cur > 0 && cur < target) {
		int r = backup_before_migration(db, cur, errbuf, errlen);
		if (r < 0)
			return r;
	}
	for (;;) {
		/* Take the write lock before reading the version so two processes never run one step twice. */
		int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			snprintf(errbuf, errlen, "begin migration: %s", sqlite3_errmsg(db));
			return store_errno(rc);
		}
		int v = store_schema_version(db);
		if (v < 0) {
			snprintf(errbuf, errlen, "read schema version: %s", sqlite3_errmsg(db));
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return v;
		}
		if (v > STORE_SCHEMA_VERSION) {
			snprintf(errbuf, errlen,
				 "store schema version %d is newer than this libspace supports (%d): upgrade libspace",
				 v, STORE_SCHEMA_VERSION);
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return -EPROTO;
		}
		if (v >= target) {
			sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
			return 0;
		}
		char *msg = NULL;
		rc = sqlite3_exec(db, migrations[v], NULL, NULL, &msg);
		if (rc == SQLITE_OK) {
			char pragma[64];
			snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
			rc = sqlite3_exec(db, pragma, NULL, NULL, &msg);
		}
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
		if (rc != SQLITE_OK) {
			snprintf(errbuf, errlen, "migrate schema %d -> %d: %s", v, v + 1,
				 msg ? msg : sqlite3_errmsg(db));
			sqlite3_free(msg);
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return store_errno(rc);
		}
	}
}

static bool retention_valid(const struct store_events_retention *r)
{
	return r->per_sandbox >= 1 && r->per_sandbox <= 10000000 && r->total >= 1 && r->total <= 100000000 &&
	       r->max_age_days >= 1 && r->max_age_days <= 3650;
}

/* The defaults, or the operator's settings (store/db.h). A bad value is refused: never "no limit". */
static int retention_from_env(struct store_events_retention *r, char *errbuf, size_t errlen)
{
	static const struct {
		const char *name;
		size_t off;
		uint64_t max;
	} vars[] = {
		{ "SPACE_EVENTS_KEEP_PER_SANDBOX", offsetof(struct store_events_retention, per_sandbox), 10000000 },
		{ "SPACE_EVENTS_KEEP", offsetof(struct store_events_retention, total), 100000000 },
		{ "SPACE_EVENTS_KEEP_DAYS", offsetof(struct store_events_retention, max_age_days), 3650 },
	};
	*r = (struct store_events_retention){ STORE_EVENTS_PER_SANDBOX_DEFAULT, STORE_EVENTS_TOTAL_DEFAULT,
					      STORE_EVENTS_MAX_AGE_DAYS_DEFAULT };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = secure_getenv(vars[i].name);
		uint64_t n;
		if (!v)
			continue;
		if (util_parse_uint(v, 1, vars[i].max, &n) < 0) {
			snprintf(errbuf, errlen, "%s=%s: not a number from 1 to %llu", vars[i].name, v,
				 (unsigned long long)vars[i].max);
			return -EINVAL;
		}
		*(uint32_t *)((char *)r + vars[i].off) = (uint32_t)n;
	}
	return 0;
}

/* A store SQLite finds damaged (not a database, malformed, truncated) is refused with what to do. */
static void damaged_hint(const char *path, char *errbuf, size_t errlen)
{
	char why[256];
	snprintf(why, sizeof(why), "%s", errbuf);
	snprintf(errbuf, errlen,
		 "the store %s is damaged (%s): nothing was changed. Restore a copy (%s.bak-schema-N is the one "
		 "made before the last schema migration), or recover its rows with `sqlite3 %s .recover | "
		 "sqlite3 NEW.db` and put NEW.db in its place (mode 0600)",
		 path, why, path, path);
}

int store_open(const char *path, bool create, struct store **ret, char *errbuf, size_t errlen)
{
	if (!create && access(path, F_OK) < 0) {
		int r = -errno;
		snprintf(errbuf, errlen, "open store %s: %s", path, strerror(errno));
		return r;
	}
	sqlite3 *db = NULL;
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
	/* The store holds paths and host state: keep it private to root (or whoever owns the state dir). The
	 * file is made 0600 here, not under a changed umask: the umask is the whole process's, and another
	 * thread of the caller would create its files with ours. SQLite gives its -wal and -shm files the
	 * database file's mode. */
	if (create) {
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST) {
			int r = -errno;
			snprintf(errbuf, errlen, "create store %s: %s", path, strerror(errno));
			return r;
		}
		if (fd >= 0 && fchmod(fd, 0600) < 0) { /* exactly 0600, whatever the umask took away */
			int r = -errno;
			close(fd);
			unlink(path);
			snprintf(errbuf, errlen, "create store %s: %s", path, strerror(-r));
			return r;
		}
		if (fd >= 0)
			close(fd);
	}
	int rc = sqlite3_open_v2(path, &db, flags, NULL);
	if (rc != SQLITE_OK) {
		snprintf(errbuf, errlen, "open store %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return store_errno(rc);
	}
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	/* Schema 7's trigger records the writer's pid namespace with a pid written without one. */
	sqlite3_create_function(db, "space_pid_ns", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, NULL, sql_pid_ns, NULL, NULL);
	sqlite3_extended_result_codes(db, 0);
	char *msg = NULL;
	rc = sqlite3_exec(db,
			  "PRAGMA journal_mode = WAL;"
			  "PRAGMA synchronous = NORMAL;"
			  "PRAGMA foreign_keys = ON;",
			  NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		snprintf(errbuf, errlen, "configure store %s: %s", path, msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		sqlite3_close(db);
		if (store_errno(rc) == -EUCLEAN)
			damaged_hint(path, errbuf, errlen);
		return store_errno(rc);
	}
	int r = store_migrate(db, STORE_SCHEMA_VERSION, errbuf, errlen);
	if (r < 0) {
		sqlite3_close(db);
		if (r == -EUCLEAN)
			damaged_hint(path, errbuf, errlen);
		return r;
	}
	struct store_events_retention keep;
	if ((r = retention_from_env(&keep, errbuf, errlen)) < 0) {
		sqlite3_close(db);
		return r;
	}
	struct store *s = calloc(1, sizeof(*s));
	if (!s) {
		sqlite3_close(db);
		return -ENOMEM;
	}
	s->db = db;
	s->keep = keep;
	*ret = s;
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
}

sqlite3 *store_db(struct store *s)
{
	return s->db;
}

const char *store_errmsg(struct store *s)
{
	return sqlite3_errmsg(s->db);
}

int store_exec(struct store *s, const char *sql)
{
	return store_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

int store_begin(struct store *s)
{
	return store_exec(s, "BEGIN IMMEDIATE");
}

int store_commit(struct store *s)
{
	return store_exec(s, "COMMIT");
}

void store_rollback(struct store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int store_meta_get(struct store *s, const char *key, char **ret)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	int r;
	if (rc == SQLITE_ROW) {
		char *v = strdup((const char *)sqlite3_column_text(st, 0));
		r = v ? 0 : -ENOMEM;
		if (v)
			*ret = v;
	} else {
		r = rc == SQLITE_DONE ? -ENOENT : store_errno(rc);
	}
	sqlite3_finalize(st);
	return r;
}

int store_meta_set(struct store *s, const char *key, const char *value)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db,
				    "INSERT INTO meta(key, value) VALUES (?, ?)"
				    " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_errno(rc);
}

int store_meta_delete(struct store *s, const char *key)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, "DELETE FROM meta WHERE key = ?", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_errno(rc);
}

void store_events_retention(struct store *s, struct store_events_retention *ret)
{
	*ret = s->keep;
}

int store_events_set_retention(struct store *s, const struct store_events_retention *r)
{
	if (!retention_valid(r))
		return -EINVAL;
	s->keep = *r;
	return 0;
}

int store_event(struct store *s, const char *sandbox_id, const char *kind, const char *detail)
{
	return store_event_at(s, sandbox_id, kind, detail, util_wall_ms());
}

/* text cut to at most max bytes on a UTF-8 character boundary, with "..." when cut, in buf (max + 4). */
static const char *cut_text(const char *text, size_t max, char *buf)
{
	size_t n = strnlen(text, max + 1);
	if (n <= max)
		return text;
	n = max - 3;
	while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
		n--; /* not inside a multi-byte character */
	memcpy(buf, text, n);
	memcpy(buf + n, "...", 4);
	return buf;
}

int store_event_at(struct store *s, const char *sandbox_id, const char *kind, const char *detail, int64_t ts_ms)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db,
				    "INSERT INTO events(ts_ms, sandbox_id, kind, detail) VALUES (?, ?, ?, ?)",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	char kbuf[STORE_EVENT_KIND_MAX + 4], dbuf[STORE_EVENT_DETAIL_MAX + 4];
	sqlite3_bind_int64(st, 1, ts_ms);
	if (sandbox_id)
		sqlite3_bind_text(st, 2, sandbox_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, cut_text(kind, STORE_EVENT_KIND_MAX, kbuf), -1, SQLITE_STATIC);
	if (detail)
		sqlite3_bind_text(st, 4, cut_text(detail, STORE_EVENT_DETAIL_MAX, dbuf), -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store_errno(rc);
	/* Every Nth row by seq, whichever process adds it: the log stays near its bounds at a small cost. */
	if (sqlite3_last_insert_rowid(s->db) % STORE_EVENTS_PRUNE_EVERY == 0) {
		int r = store_events_prune(s, sandbox_id);
		return r < 0 ? r : 0;
	}
	return 0;
}


/* Runs sql (one statement) with up to two text and two integer parameters (?1 ?2 text, ?3 ?4 integers);
 * returns the number of rows it changed, or -errno. */
static int events_delete(struct store *s, const char *sql, const char *t1, int64_t i3, int64_t i4)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	if (t1)
		sqlite3_bind_text(st, 1, t1, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, i3);
	sqlite3_bind_int64(st, 4, i4);
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? sqlite3_changes(s->db) : store_errno(rc);
}

/* The rows of one sandbox beyond its newest per_sandbox (an index walk of events_sandbox). */
static int prune_sandbox(struct store *s, const char *sandbox_id)
{
	return events_delete(s,
			     "DELETE FROM events WHERE sandbox_id = ?1 AND seq <= (SELECT seq FROM events"
			     " WHERE sandbox_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?3)",
			     sandbox_id, s->keep.per_sandbox, 0);
}

int store_events_prune(struct store *s, const char *sandbox_id)
{
	int r, n = 0;
	if (sandbox_id) {
		if ((r = prune_sandbox(s, sandbox_id)) < 0)
			return r;
		n += r;
	} else {
		/* Every sandbox over its share; the ids first, the deletes after (no table changed under a read). */
		_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
		int rc = sqlite3_prepare_v2(s->db,
					    "SELECT sandbox_id FROM events WHERE sandbox_id IS NOT NULL"
					    " GROUP BY sandbox_id HAVING count(*) > ?",
					    -1, &st, NULL);
		if (rc != SQLITE_OK)
			return store_errno(rc);
		sqlite3_bind_int64(st, 1, s->keep.per_sandbox);
		size_t cnt = 0, cap = 0;
		char **ids = NULL;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			if (cnt == cap) {
				char **nids = realloc(ids, (cap = cap ? 2 * cap : 16) * sizeof(*ids));
				if (!nids) {
					rc = SQLITE_NOMEM;
					break;
				}
				ids = nids;
			}
			if (!(ids[cnt] = strdup((const char *)sqlite3_column_text(st, 0)))) {
				rc = SQLITE_NOMEM;
				break;
			}
			cnt++;
		}
		r = rc == SQLITE_DONE ? 0 : store_errno(rc);
		for (size_t i = 0; i < cnt; i++) {
			if (r >= 0 && (r = prune_sandbox(s, ids[i])) >= 0)
				n += r;
			free(ids[i]);
		}
		free(ids);
		if (r < 0)
			return r;
	}
	if ((r = events_delete(s, "DELETE FROM events WHERE seq <= (SELECT seq FROM events ORDER BY seq DESC"
				  " LIMIT 1 OFFSET ?3)",
			       NULL, s->keep.total, 0)) < 0)
		return r;
	n += r;
	int64_t cutoff = util_wall_ms() - (int64_t)s->keep.max_age_days * 24 * 3600 * 1000;
	if ((r = events_delete(s, "DELETE FROM events WHERE ts_ms < ?3", NULL, cutoff, 0)) < 0)
		return r;
	return n + r;
}

int store_events_remove(struct store *s, const char *sandbox_id)
{
	if (!sandbox_id)
		return -EINVAL;
	return events_delete(s, "DELETE FROM events WHERE sandbox_id = ?1", sandbox_id, 0, 0);
}
