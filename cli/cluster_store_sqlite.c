/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster store in SQLite (cluster_store_int.h): the same rows as in PostgreSQL, for servers on one
 * machine sharing a file ("sqlite:/ABSOLUTE/PATH"). SQLite serializes writers, so a placement's transaction
 * (BEGIN IMMEDIATE) does what FOR UPDATE SKIP LOCKED does in PostgreSQL: two placements never claim the same
 * room. Times are Unix seconds (REAL); arrays (isolations, templates) are JSON arrays.
 *
 * A small pool of connections per store (a thread takes one for a call), so that one thread waiting for
 * the write lock holds up no other; a write lock another connection holds is waited for at most 5 s (then
 * the call fails with -EHOSTUNREACH, as an unreachable PostgreSQL does). The file holds the hosts' keys:
 * it is made 0600, and refused on a network file system (SQLite's locks do not hold there).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cluster_store_int.h"
#include "util/cleanup.h"

#define seterr cluster_seterr
#define BUSY_MS 5000
#define POOL_MAX 8                 /* connections per store */
#define NOW "((julianday('now') - 2440587.5) * 86400.0)"

struct sqlite_store {
	struct cluster_store base;
	char *path;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	sqlite3 *idle[POOL_MAX];
	unsigned n_idle, n_open; /* never 0 open once the store is: a connection is never dropped */
};

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

static int conn_open(const char *path, sqlite3 **ret);

/* A connection of the pool: an idle one, a new one, or (none can be opened) the next one given back. */
static sqlite3 *take(struct cluster_store *cs)
{
	struct sqlite_store *ss = (struct sqlite_store *)cs;
	pthread_mutex_lock(&ss->lock);
	for (;;) {
		if (ss->n_idle) {
			sqlite3 *db = ss->idle[--ss->n_idle];
			pthread_mutex_unlock(&ss->lock);
			return db;
		}
		if (ss->n_open < POOL_MAX) {
			ss->n_open++;
			pthread_mutex_unlock(&ss->lock);
			sqlite3 *db = NULL;
			if (conn_open(ss->path, &db) == 0)
				return db;
			pthread_mutex_lock(&ss->lock);
			ss->n_open--;
		}
		pthread_cond_wait(&ss->cond, &ss->lock);
	}
}

static void give(struct cluster_store *cs, sqlite3 *db)
{
	struct sqlite_store *ss = (struct sqlite_store *)cs;
	pthread_mutex_lock(&ss->lock);
	ss->idle[ss->n_idle++] = db;
	pthread_cond_signal(&ss->cond);
	pthread_mutex_unlock(&ss->lock);
}

/* -errno and the message of SQLite's last error: a lock another process held past the wait is the store
 * being unavailable (-EHOSTUNREACH), anything else -EIO. */
static int db_err(sqlite3 *db, const char *what)
{
	int rc = sqlite3_errcode(db);
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return seterr(-EHOSTUNREACH, "cluster store busy: another process held it for %d s (%s)", BUSY_MS / 1000, what);
	return seterr(-EIO, "cluster store: %s: %s", what, sqlite3_errmsg(db));
}

/* Migrations: entry i takes the schema from version i to i + 1, as in PostgreSQL (cluster_store_pg.c). */
static const char *const migrations[] = {
	"CREATE TABLE space_hosts ("
	"  name TEXT PRIMARY KEY,"
	"  url TEXT NOT NULL,"
	"  incarnation INTEGER NOT NULL DEFAULT 1,"
	"  state TEXT NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'lost')),"
	"  serving INTEGER NOT NULL DEFAULT 1,"
	"  heartbeat REAL NOT NULL,"
	"  capacity INTEGER NOT NULL CHECK (capacity >= 0),"
	"  cpus INTEGER NOT NULL DEFAULT 0,"
	"  mem_total INTEGER NOT NULL DEFAULT 0,"
	"  mem_available INTEGER NOT NULL DEFAULT 0,"
	"  pool_free INTEGER NOT NULL DEFAULT 0,"
	"  isolations TEXT NOT NULL DEFAULT '[]' CHECK (json_type(isolations) = 'array'),"
	"  templates TEXT NOT NULL DEFAULT '[]' CHECK (json_type(templates) = 'array'),"
	"  pool_stock TEXT NOT NULL DEFAULT '{}' CHECK (json_type(pool_stock) = 'object'),"
	"  key TEXT NOT NULL,"
	"  version TEXT NOT NULL DEFAULT '');"
	"CREATE TABLE space_sandboxes ("
	"  id TEXT PRIMARY KEY,"
	"  host TEXT NOT NULL REFERENCES space_hosts(name),"
	"  state TEXT NOT NULL CHECK (state IN ('running', 'lost', 'destroyed')),"
	"  template TEXT NOT NULL DEFAULT '',"
	"  created REAL NOT NULL,"
	"  changed REAL NOT NULL);"
	"CREATE INDEX space_sandboxes_host ON space_sandboxes (host, state);"
	"CREATE TABLE space_placements ("
	"  token TEXT PRIMARY KEY,"
	"  host TEXT NOT NULL REFERENCES space_hosts(name),"
	"  expires REAL NOT NULL);"
	"CREATE TABLE space_api_keys ("
	"  hash TEXT NOT NULL,"
	"  host TEXT NOT NULL,"
	"  PRIMARY KEY (hash, host));",
	/* 1 -> 2: which host holds which checkpoint */
	"CREATE TABLE space_checkpoints ("
	"  id TEXT PRIMARY KEY,"
	"  host TEXT NOT NULL REFERENCES space_hosts(name),"
	"  sandbox TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX space_checkpoints_host ON space_checkpoints (host);",
	/* 2 -> 3: the names of each host's registered secrets */
	"ALTER TABLE space_hosts ADD COLUMN secrets TEXT NOT NULL DEFAULT '[]' CHECK (json_type(secrets) = 'array');",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == CLUSTER_SCHEMA_VERSION, "one migration per version");

/* --- statements ------------------------------------------------------------------------------------------ */

/* A bound value: text (s), an integer (i, when s is NULL and !is_real) or a real (r). */
struct val {
	const char *s;
	long long i;
	double r;
	bool is_real;
};
#define T(x) ((struct val){ .s = (x) })
#define I(x) ((struct val){ .i = (long long)(x) })
#define R(x) ((struct val){ .r = (x), .is_real = true })

static int prep(sqlite3 *db, sqlite3_stmt **st, const char *sql, const struct val *v, int n)
{
	if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK)
		return db_err(db, "prepare");
	for (int k = 0; k < n; k++) {
		int rc = v[k].s ? sqlite3_bind_text(*st, k + 1, v[k].s, -1, SQLITE_STATIC)
			 : v[k].is_real ? sqlite3_bind_double(*st, k + 1, v[k].r)
					: sqlite3_bind_int64(*st, k + 1, v[k].i);
		if (rc != SQLITE_OK)
			return db_err(db, "bind");
	}
	return 0;
}

/* One statement run to its end; *ret_changes (may be NULL): rows it changed. The caller holds the lock. */
static int exec_locked(sqlite3 *db, const char *sql, const struct val *v, int n, long *ret_changes)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int e = prep(db, &st, sql, v, n), rc;
	if (e < 0)
		return e;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		return db_err(db, "statement");
	if (ret_changes)
		*ret_changes = sqlite3_changes(db);
	return 0;
}

static int exec1(struct cluster_store *cs, const char *sql, const struct val *v, int n, long *ret_changes)
{
	sqlite3 *db = take(cs);
	int e = exec_locked(db, sql, v, n, ret_changes);
	give(cs, db);
	return e;
}

static int begin(sqlite3 *db) { return exec_locked(db, "BEGIN IMMEDIATE", NULL, 0, NULL); }

/* Commits when e is 0 (returning a failed commit's error), rolls back otherwise (returning e). */
static int end(sqlite3 *db, int e)
{
	if (e == 0)
		return exec_locked(db, "COMMIT", NULL, 0, NULL);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return e;
}

/* Two statements in one write transaction: both or neither. */
static int exec_pair(struct cluster_store *cs, const char *sql1, const struct val *v1, int n1, const char *sql2,
		     const struct val *v2, int n2)
{
	sqlite3 *db = take(cs);
	int e = begin(db);
	if (e == 0) {
		e = exec_locked(db, sql1, v1, n1, NULL);
		if (e == 0)
			e = exec_locked(db, sql2, v2, n2, NULL);
		e = end(db, e);
	}
	give(cs, db);
	return e;
}

static const char *col(sqlite3_stmt *st, int i)
{
	const char *s = (const char *)sqlite3_column_text(st, i);
	return s ? s : "";
}

/* A JSON array of NULL-terminated strings; NULL (message set) when out of memory. */
static char *json_strings(const char *const *v)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && v && v[i]; i++) {
		cJSON *s = cJSON_CreateString(v[i]);
		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			cJSON_Delete(a);
			a = NULL;
		}
	}
	char *out = a ? cJSON_PrintUnformatted(a) : NULL;
	cJSON_Delete(a);
	if (!out)
		seterr(-ENOMEM, "out of memory");
	return out;
}

/* --- open ------------------------------------------------------------------------------------------------ */

/* File systems SQLite's locks do not hold on (another machine would not see them). */
static bool network_fs(long type)
{
	static const unsigned types[] = { NFS_SUPER_MAGIC, SMB_SUPER_MAGIC, CIFS_SUPER_MAGIC, SMB2_SUPER_MAGIC,
					  V9FS_MAGIC, CEPH_SUPER_MAGIC, AFS_SUPER_MAGIC, CODA_SUPER_MAGIC,
					  0x0BD00BD0 /* lustre */ };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if ((unsigned)type == types[i])
			return true;
	return false;
}

/* The file, made 0600 when it is new: it must be a regular file of this machine's own file system. */
static int file_check(const char *path)
{
	if (path[0] != '/')
		return seterr(-EINVAL, "sqlite: wants an absolute path (sqlite:/var/lib/space/cluster.db), not '%s'", path);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0)
		return seterr(-errno, "cluster store %s: %s%s", path, strerror(errno),
			      errno == ENOENT ? " (its directory must exist)" : "");
	struct stat stb;
	struct statfs sf;
	int e = 0;
	if (fstat(fd, &stb) < 0 || fstatfs(fd, &sf) < 0)
		e = seterr(-errno, "cluster store %s: %s", path, strerror(errno));
	else if (!S_ISREG(stb.st_mode))
		e = seterr(-EINVAL, "cluster store %s: not a regular file", path);
	else if (network_fs((long)sf.f_type))
		e = seterr(-EOPNOTSUPP, "cluster store %s: on a network file system, where SQLite's locks do not hold "
				     "(hosts on several machines share a PostgreSQL store)", path);
	else if (stb.st_mode & 077)
		e = seterr(-EPERM, "cluster store %s: readable by others (mode %04o; it holds the hosts' keys: chmod 600)",
			   path, (unsigned)(stb.st_mode & 07777));
	close(fd);
	return e;
}

static int migrate(sqlite3 *db)
{
	int e = begin(db);
	if (e < 0)
		return e;
	e = exec_locked(db, "CREATE TABLE IF NOT EXISTS space_cluster_schema (version INTEGER NOT NULL)", NULL, 0, NULL);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int v = 0;
	if (e == 0 && (e = prep(db, &st, "SELECT coalesce(max(version), 0) FROM space_cluster_schema", NULL, 0)) == 0) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int(st, 0);
		else
			e = db_err(db, "read the schema version");
	}
	/* A newer schema than ours only added: this build works on it, as during a rolling upgrade. */
	for (; e == 0 && v < CLUSTER_SCHEMA_VERSION; v++) {
		if (sqlite3_exec(db, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
			e = seterr(-EIO, "cluster store: migrate the schema to version %d: %s", v + 1, sqlite3_errmsg(db));
			break;
		}
		e = exec_locked(db, "DELETE FROM space_cluster_schema", NULL, 0, NULL);
		struct val p[1] = { I(v + 1) };
		if (e == 0)
			e = exec_locked(db, "INSERT INTO space_cluster_schema VALUES (?1)", p, 1, NULL);
	}
	return end(db, e);
}

/* A connection: waits for another's write lock, WAL (readers never wait for the writer), foreign keys (the
 * rows' references hold, as in PostgreSQL). */
static int conn_open(const char *path, sqlite3 **ret)
{
	sqlite3 *db = NULL;
	int e = 0;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK)
		e = seterr(-EIO, "cluster store %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
	else if (sqlite3_busy_timeout(db, BUSY_MS) != SQLITE_OK ||
		 sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", NULL,
			      NULL, NULL) != SQLITE_OK)
		e = db_err(db, "set up the connection");
	if (e < 0) {
		sqlite3_close(db);
		return e;
	}
	*ret = db;
	return 0;
}

static void sqlite_close(struct cluster_store *base);
static const struct cluster_store_ops sqlite_ops;

int cluster_sqlite_open(const char *path, struct cluster_store **ret)
{
	int e = file_check(path);
	if (e < 0)
		return e;
	struct sqlite_store *ss = calloc(1, sizeof(*ss));
	if (!ss || !(ss->path = strdup(path))) {
		free(ss);
		return seterr(-ENOMEM, "out of memory");
	}
	ss->base.ops = &sqlite_ops;
	pthread_mutex_init(&ss->lock, NULL);
	pthread_cond_init(&ss->cond, NULL);
	sqlite3 *db = NULL;
	if ((e = conn_open(path, &db)) == 0) {
		ss->idle[ss->n_idle++] = db;
		ss->n_open = 1;
		e = migrate(db);
	}
	if (e < 0) {
		sqlite_close(&ss->base);
		return e;
	}
	*ret = &ss->base;
	return 0;
}

static void sqlite_close(struct cluster_store *base)
{
	struct sqlite_store *ss = (struct sqlite_store *)base;
	for (unsigned i = 0; i < ss->n_idle; i++)
		sqlite3_close(ss->idle[i]);
	pthread_mutex_destroy(&ss->lock);
	pthread_cond_destroy(&ss->cond);
	free(ss->path);
	free(ss);
}

/* --- hosts ------------------------------------------------------------------------------------------------ */

/* The report's columns as values ?2..?12 (?1 is the name): url, capacity, cpus, mem_total, mem_available,
 * pool_free, isolations, templates, pool_stock, version, secrets. */
#define REPORT_VALS 12
struct report_vals {
	char *isol, *tpl, *sec;
	struct val v[REPORT_VALS + 2];
};

static void report_vals_free(struct report_vals *rv)
{
	free(rv->isol);
	free(rv->tpl);
	free(rv->sec);
}

static int report_vals(const struct cluster_host_report *h, struct report_vals *rv)
{
	const char *iso[4];
	char buf[64];
	cluster_isolations_split(h->isolations, iso, buf, sizeof(buf));
	rv->isol = json_strings(iso);
	rv->tpl = json_strings(h->templates);
	rv->sec = json_strings(h->secrets);
	if (!rv->isol || !rv->tpl || !rv->sec) {
		report_vals_free(rv);
		return -ENOMEM;
	}
	const struct val v[REPORT_VALS] = { T(h->name), T(h->url), I(h->capacity), I(h->cpus), I(h->mem_total),
					    I(h->mem_available), I(h->pool_free), T(rv->isol), T(rv->tpl),
					    T(h->pool_stock_json ? h->pool_stock_json : "{}"), T(h->version ? h->version : ""),
					    T(rv->sec) };
	memcpy(rv->v, v, sizeof(v));
	return 0;
}

static int sqlite_host_register(struct cluster_store *cs, const struct cluster_host_report *h, unsigned stale_s,
				const char *key, uint64_t *ret_incarnation, unsigned *ret_age_s)
{
	struct report_vals rv;
	int e = report_vals(h, &rv);
	if (e < 0)
		return e;
	rv.v[REPORT_VALS] = T(key);
	rv.v[REPORT_VALS + 1] = I(stale_s);
	/* The name is taken over unless another server still serves it (heartbeat younger than stale_s). */
	static const char sql[] =
		"INSERT INTO space_hosts (name, url, capacity, cpus, mem_total, mem_available, pool_free, isolations,"
		"  templates, pool_stock, version, secrets, key, heartbeat)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, json(?10), ?11, ?12, ?13, " NOW ")"
		" ON CONFLICT (name) DO UPDATE SET url = excluded.url, capacity = excluded.capacity, cpus = excluded.cpus,"
		"  mem_total = excluded.mem_total, mem_available = excluded.mem_available, pool_free = excluded.pool_free,"
		"  isolations = excluded.isolations, templates = excluded.templates, pool_stock = excluded.pool_stock,"
		"  version = excluded.version, secrets = excluded.secrets, key = excluded.key,"
		"  incarnation = space_hosts.incarnation + 1, serving = 1, heartbeat = excluded.heartbeat, state = 'up'"
		" WHERE NOT space_hosts.serving OR space_hosts.heartbeat < " NOW " - ?14"
		" RETURNING incarnation";
	sqlite3 *db = take(cs);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if ((e = prep(db, &st, sql, rv.v, REPORT_VALS + 2)) == 0) {
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			*ret_incarnation = (uint64_t)sqlite3_column_int64(st, 0);
		else if (rc == SQLITE_DONE)
			e = -EBUSY;
		else
			e = db_err(db, "register the host");
	}
	if (e == -EBUSY) {
		sqlite3_finalize(st);
		st = NULL;
		struct val p[1] = { T(h->name) };
		if (prep(db, &st, "SELECT CAST(" NOW " - heartbeat AS INTEGER) FROM space_hosts WHERE name = ?1", p, 1) == 0 &&
		    sqlite3_step(st) == SQLITE_ROW)
			*ret_age_s = (unsigned)sqlite3_column_int(st, 0);
	}
	give(cs, db);
	report_vals_free(&rv);
	return e;
}

static int sqlite_host_heartbeat(struct cluster_store *cs, const struct cluster_host_report *h, uint64_t incarnation,
				 bool *ret_was_lost)
{
	struct report_vals rv;
	int e = report_vals(h, &rv);
	if (e < 0)
		return e;
	rv.v[REPORT_VALS] = I(incarnation);
	sqlite3 *db = take(cs);
	if ((e = begin(db)) == 0) {
		_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
		struct val p[2] = { T(h->name), I(incarnation) };
		if ((e = prep(db, &st, "SELECT state FROM space_hosts WHERE name = ?1 AND incarnation = ?2", p, 2)) == 0) {
			int rc = sqlite3_step(st);
			if (rc == SQLITE_ROW)
				*ret_was_lost = !strcmp(col(st, 0), "lost");
			else
				e = rc == SQLITE_DONE ? -ESTALE : db_err(db, "heartbeat");
		}
		if (e == 0)
			e = exec_locked(db,
					"UPDATE space_hosts SET url = ?2, capacity = ?3, cpus = ?4, mem_total = ?5,"
					"  mem_available = ?6, pool_free = ?7, isolations = ?8, templates = ?9,"
					"  pool_stock = json(?10), version = ?11, secrets = ?12, heartbeat = " NOW ","
					"  state = 'up', serving = 1 WHERE name = ?1 AND incarnation = ?13",
					rv.v, REPORT_VALS + 1, NULL);
		e = end(db, e);
	}
	give(cs, db);
	report_vals_free(&rv);
	return e;
}

static int sqlite_host_stop(struct cluster_store *cs, const char *name, uint64_t incarnation)
{
	struct val p[2] = { T(name), I(incarnation) };
	return exec1(cs, "UPDATE space_hosts SET serving = 0 WHERE name = ?1 AND incarnation = ?2", p, 2, NULL);
}

struct lost_host {
	char name[CLUSTER_NAME_MAX];
	unsigned sandboxes;
};

static int sqlite_sweep(struct cluster_store *cs, unsigned lost_after_s,
			void (*fn)(const char *host, unsigned sandboxes, void *arg), void *arg)
{
	struct lost_host *lost = NULL;
	size_t n = 0;
	sqlite3 *db = take(cs);
	int e = begin(db);
	if (e == 0) {
		_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
		struct val p[1] = { I(lost_after_s) };
		e = prep(db, &st, "SELECT name FROM space_hosts WHERE state = 'up' AND heartbeat < " NOW " - ?1", p, 1);
		int rc = SQLITE_DONE;
		while (e == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			struct lost_host *l = realloc(lost, (n + 1) * sizeof(*lost));
			if (!l) {
				e = seterr(-ENOMEM, "out of memory");
				break;
			}
			lost = l;
			snprintf(lost[n].name, sizeof(lost[n].name), "%s", col(st, 0));
			lost[n++].sandboxes = 0;
		}
		if (e == 0 && rc != SQLITE_DONE)
			e = db_err(db, "sweep");
		for (size_t i = 0; e == 0 && i < n; i++) {
			struct val q[1] = { T(lost[i].name) };
			long changed = 0;
			e = exec_locked(db, "UPDATE space_hosts SET state = 'lost' WHERE name = ?1", q, 1, NULL);
			if (e == 0)
				e = exec_locked(db,
						"UPDATE space_sandboxes SET state = 'lost', changed = " NOW
						" WHERE state = 'running' AND host = ?1",
						q, 1, &changed);
			lost[i].sandboxes = (unsigned)changed;
		}
		/* Housekeeping: expired claims, and destroyed rows past their time of hosts that are up (a lost
		 * host that comes back must still find the sandboxes given up on). */
		struct val keep[1] = { I(CLUSTER_DESTROYED_KEEP_S) };
		if (e == 0)
			e = exec_locked(db, "DELETE FROM space_placements WHERE expires < " NOW, NULL, 0, NULL);
		if (e == 0)
			e = exec_locked(db,
					"DELETE FROM space_sandboxes WHERE state = 'destroyed' AND changed < " NOW " - ?1"
					" AND host IN (SELECT name FROM space_hosts WHERE state = 'up')",
					keep, 1, NULL);
		e = end(db, e);
	}
	give(cs, db);
	for (size_t i = 0; e == 0 && fn && i < n; i++)
		fn(lost[i].name, lost[i].sandboxes, arg);
	free(lost);
	return e < 0 ? e : (int)n;
}

static int sqlite_host_key(struct cluster_store *cs, const char *name, char ret_key[CLUSTER_KEY_HEX + 1])
{
	sqlite3 *db = take(cs);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	struct val p[1] = { T(name) };
	int e = prep(db, &st, "SELECT key FROM space_hosts WHERE name = ?1", p, 1);
	if (e == 0) {
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW && strlen(col(st, 0)) == CLUSTER_KEY_HEX)
			memcpy(ret_key, col(st, 0), CLUSTER_KEY_HEX + 1);
		else
			e = rc == SQLITE_ROW ? -EBADMSG : rc == SQLITE_DONE ? -ENOENT : db_err(db, "read a host's key");
	}
	give(cs, db);
	return e;
}

/* Rows are read whole under the lock, then handed to the caller's function without it (which may call the
 * store again). */
static int rows_collect(struct cluster_store *cs, const char *sql, const struct val *v, int n, size_t size,
			void (*row)(sqlite3_stmt *st, void *out), void **ret, size_t *ret_n)
{
	sqlite3 *db = take(cs);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	char *out = NULL;
	size_t k = 0;
	int e = prep(db, &st, sql, v, n), rc = SQLITE_DONE;
	while (e == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		char *o = realloc(out, (k + 1) * size);
		if (!o) {
			e = seterr(-ENOMEM, "out of memory");
			break;
		}
		out = o;
		memset(out + k * size, 0, size);
		row(st, out + k++ * size);
	}
	if (e == 0 && rc != SQLITE_DONE)
		e = db_err(db, "read rows");
	give(cs, db);
	if (e < 0) {
		free(out);
		return e;
	}
	*ret = out;
	*ret_n = k;
	return 0;
}

static void host_row(sqlite3_stmt *st, void *out)
{
	struct cluster_host_row *h = out;
	snprintf(h->name, sizeof(h->name), "%s", col(st, 0));
	snprintf(h->url, sizeof(h->url), "%s", col(st, 1));
	h->up = !strcmp(col(st, 2), "up");
	h->serving = sqlite3_column_int(st, 3) != 0;
	h->capacity = (uint32_t)sqlite3_column_int64(st, 4);
	h->live = (uint32_t)sqlite3_column_int64(st, 5);
	h->heartbeat_age_s = sqlite3_column_double(st, 6);
	h->incarnation = (uint64_t)sqlite3_column_int64(st, 7);
	snprintf(h->version, sizeof(h->version), "%s", col(st, 8));
}

static int sqlite_host_list(struct cluster_store *cs, int (*fn)(const struct cluster_host_row *h, void *arg), void *arg)
{
	static const char sql[] =
		"SELECT h.name, h.url, h.state, h.serving, h.capacity,"
		"  (SELECT count(*) FROM space_sandboxes s WHERE s.host = h.name AND s.state = 'running'),"
		"  " NOW " - h.heartbeat, h.incarnation, h.version"
		" FROM space_hosts h ORDER BY h.name";
	void *all = NULL;
	size_t n = 0;
	int e = rows_collect(cs, sql, NULL, 0, sizeof(struct cluster_host_row), host_row, &all, &n);
	const struct cluster_host_row *rows = all;
	for (size_t i = 0; e == 0 && i < n; i++)
		e = fn(&rows[i], arg);
	free(all);
	return e;
}

/* --- placement ------------------------------------------------------------------------------------------- */

/* ?1 template, ?2 isolation ('' any), ?3 fresh seconds: the hosts up, heartbeating within ?3; ?5 the
 * secrets needed (a JSON array). */
#define HOSTS_UP "state = 'up' AND serving AND heartbeat > " NOW " - ?3"
#define HOLDS                                                                                                \
	"EXISTS (SELECT 1 FROM json_each(templates) WHERE value = ?1)"                                        \
	" AND (?2 = '' OR EXISTS (SELECT 1 FROM json_each(isolations) WHERE value = ?2))"
#define HAS_SECRETS "NOT EXISTS (SELECT 1 FROM json_each(?5) n WHERE n.value NOT IN (SELECT value FROM json_each(secrets)))"

#define LOAD_N                                                                                               \
	"(SELECT count(*) FROM space_sandboxes s WHERE s.host = h.name AND s.state = 'running') +"             \
	"   (SELECT count(*) FROM space_placements p WHERE p.host = h.name AND p.expires > " NOW ")"
#define PLACE_FROM(cond)                                                                                     \
	"WITH load AS (SELECT name, url, capacity, pool_stock, " LOAD_N " AS n"                                  \
	"  FROM space_hosts h WHERE " HOSTS_UP " AND " cond " AND " HAS_SECRETS " AND name <> ?4)"               \
	" SELECT name, url FROM load WHERE n < capacity"                                                       \
	" ORDER BY coalesce((SELECT value FROM json_each(pool_stock) WHERE key = ?1), 0) > 0 DESC,"            \
	"   CAST(n AS REAL) / capacity, random() LIMIT 1"

static int sqlite_place(struct cluster_store *cs, const char *template, const char *isolation,
			const char *const *secrets, unsigned fresh_s, const char *avoid, bool pull, const char *token,
			char ret_host[CLUSTER_NAME_MAX], char ret_url[CLUSTER_URL_MAX])
{
	/* ?4 a host to avoid ('' none). Warm-pool stock first, then the lowest live/capacity ratio; writers are
	 * serialized, so the claim made in the same transaction is never made twice. A pull: the hosts that
	 * do not hold the template (for the isolation). */
	static const char held[] = PLACE_FROM(HOLDS);
	static const char not_held[] = PLACE_FROM(
		"NOT EXISTS (SELECT 1 FROM json_each(templates) WHERE value = ?1)"
		" AND (?2 = '' OR EXISTS (SELECT 1 FROM json_each(isolations) WHERE value = ?2))");
	const char *sql = pull ? not_held : held;
	_cleanup_free_ char *sec = json_strings(secrets);
	if (!sec)
		return -ENOMEM;
	struct val p[5] = { T(template), T(isolation), I(fresh_s), T(avoid), T(sec) };
	sqlite3 *db = take(cs);
	int e = begin(db);
	if (e == 0) {
		_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
		if ((e = prep(db, &st, sql, p, 5)) == 0) {
			int rc = sqlite3_step(st);
			if (rc == SQLITE_ROW) {
				snprintf(ret_host, CLUSTER_NAME_MAX, "%s", col(st, 0));
				snprintf(ret_url, CLUSTER_URL_MAX, "%s", col(st, 1));
			} else {
				e = rc == SQLITE_DONE ? -EAGAIN : db_err(db, "place");
			}
		}
		struct val c[3] = { T(token), T(ret_host), I(CLUSTER_CLAIM_S) };
		if (e == 0)
			e = exec_locked(db, "INSERT INTO space_placements (token, host, expires) VALUES (?1, ?2, " NOW " + ?3)",
					c, 3, NULL);
		e = end(db, e);
	}
	give(cs, db);
	return e;
}

static int sqlite_holder(struct cluster_store *cs, const char *template, unsigned fresh_s,
			 char ret_host[CLUSTER_NAME_MAX])
{
	static const char sql[] = "SELECT name FROM space_hosts h WHERE " HOSTS_UP
				  " AND EXISTS (SELECT 1 FROM json_each(templates) WHERE value = ?1)"
				  " ORDER BY CAST(" LOAD_N " AS REAL) / capacity, random() LIMIT 1";
	struct val p[3] = { T(template), T(""), I(fresh_s) };
	sqlite3 *db = take(cs);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int e = prep(db, &st, sql, p, 3);
	if (e == 0) {
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			snprintf(ret_host, CLUSTER_NAME_MAX, "%s", col(st, 0));
		else
			e = rc == SQLITE_DONE ? -ENOENT : db_err(db, "find a holder");
	}
	give(cs, db);
	return e;
}

static int sqlite_place_counts(struct cluster_store *cs, const char *template, const char *isolation,
			       const char *const *secrets, unsigned fresh_s, long *ret_up, long *ret_holding,
			       long *ret_with_secrets)
{
	static const char sql[] = "SELECT coalesce(sum(up), 0), coalesce(sum(up AND held), 0),"
				  " coalesce(sum(up AND held AND has), 0) FROM (SELECT (" HOSTS_UP ") AS up,"
				  " (" HOLDS ") AS held, (" HAS_SECRETS ") AS has FROM space_hosts)";
	_cleanup_free_ char *sec = json_strings(secrets);
	if (!sec)
		return -ENOMEM;
	struct val p[5] = { T(template), T(isolation), I(fresh_s), T(""), T(sec) };
	sqlite3 *db = take(cs);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int e = prep(db, &st, sql, p, 5);
	if (e == 0) {
		if (sqlite3_step(st) == SQLITE_ROW) {
			*ret_up = (long)sqlite3_column_int64(st, 0);
			*ret_holding = (long)sqlite3_column_int64(st, 1);
			*ret_with_secrets = (long)sqlite3_column_int64(st, 2);
		} else {
			e = db_err(db, "count hosts");
		}
	}
	give(cs, db);
	return e;
}

static int sqlite_claim_drop(struct cluster_store *cs, const char *token)
{
	struct val p[1] = { T(token) };
	return exec1(cs, "DELETE FROM space_placements WHERE token = ?1", p, 1, NULL);
}

/* --- sandboxes ------------------------------------------------------------------------------------------- */

static int sqlite_sandbox_add(struct cluster_store *cs, const char *id, const char *host, const char *template,
			      const char *token)
{
	struct val p[3] = { T(id), T(host), T(template) }, t[1] = { T(token) };
	return exec_pair(cs, "DELETE FROM space_placements WHERE token = ?1", t, 1,
			 "INSERT INTO space_sandboxes (id, host, state, template, created, changed)"
			 " VALUES (?1, ?2, 'running', ?3, " NOW ", " NOW ")"
			 " ON CONFLICT (id) DO UPDATE SET host = excluded.host, state = 'running', changed = excluded.changed",
			 p, 3);
}

#define SANDBOX_SELECT "SELECT s.id, s.host, h.url, s.template, s.state, h.state FROM space_sandboxes s" \
		       " JOIN space_hosts h ON h.name = s.host"

static void sandbox_row(sqlite3_stmt *st, void *out)
{
	struct cluster_sandbox *s = out;
	snprintf(s->id, sizeof(s->id), "%s", col(st, 0));
	snprintf(s->host, sizeof(s->host), "%s", col(st, 1));
	snprintf(s->url, sizeof(s->url), "%s", col(st, 2));
	snprintf(s->template, sizeof(s->template), "%s", col(st, 3));
	s->state = cluster_state_parse(col(st, 4));
	s->host_up = !strcmp(col(st, 5), "up");
}

/* The one row sql (with one text value) returns into ret; -ENOENT when none. */
static int one_row(struct cluster_store *cs, const char *sql, const char *id, void (*row)(sqlite3_stmt *st, void *out),
		   void *ret, size_t size)
{
	struct val p[1] = { T(id) };
	void *rows = NULL;
	size_t n = 0;
	int e = rows_collect(cs, sql, p, 1, size, row, &rows, &n);
	if (e == 0 && n != 1)
		e = -ENOENT;
	if (e == 0)
		memcpy(ret, rows, size);
	free(rows);
	return e;
}

static int sqlite_sandbox_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret)
{
	return one_row(cs, SANDBOX_SELECT " WHERE s.id = ?1", id, sandbox_row, ret, sizeof(*ret));
}

static int sqlite_sandbox_list(struct cluster_store *cs, const char *host, bool destroyed,
			       int (*fn)(const struct cluster_sandbox *s, void *arg), void *arg)
{
	struct val p[2] = { T(host), I(destroyed) };
	void *all = NULL;
	size_t n = 0;
	int e = rows_collect(cs, SANDBOX_SELECT " WHERE (?1 = '' OR s.host = ?1) AND (?2 OR s.state <> 'destroyed')"
						" ORDER BY s.id",
			     p, 2, sizeof(struct cluster_sandbox), sandbox_row, &all, &n);
	const struct cluster_sandbox *rows = all;
	for (size_t i = 0; e == 0 && i < n; i++)
		e = fn(&rows[i], arg);
	free(all);
	return e;
}

static int sqlite_sandbox_give_up(struct cluster_store *cs, const char *id)
{
	struct val p[1] = { T(id) };
	long n = 0;
	int e = exec1(cs, "UPDATE space_sandboxes SET state = 'destroyed', changed = " NOW " WHERE id = ?1 AND state = 'lost'",
		      p, 1, &n);
	return e == 0 && n != 1 ? -ENOENT : e;
}

static int sqlite_sandbox_set(struct cluster_store *cs, const char *id, const char *host, enum cluster_sandbox_state st)
{
	struct val p[3] = { T(id), T(host), T(cluster_sandbox_state_name(st)) };
	return exec1(cs, "UPDATE space_sandboxes SET state = ?3, changed = " NOW " WHERE id = ?1 AND host = ?2", p, 3, NULL);
}

/* --- checkpoints and API keys ---------------------------------------------------------------------------- */

/* The whole set, every heartbeat: rows that did not change are not written again. */
static int sqlite_checkpoints_publish(struct cluster_store *cs, const char *host, const char *const *ids,
				      const char *const *sandboxes)
{
	_cleanup_free_ char *ia = json_strings(ids), *sa = json_strings(sandboxes);
	if (!ia || !sa)
		return -ENOMEM;
	struct val p[3] = { T(host), T(ia), T(sa) };
	/* WHERE true: an upsert after a SELECT needs it (SQLite's grammar) */
	return exec_pair(cs, "DELETE FROM space_checkpoints WHERE host = ?1 AND id NOT IN (SELECT value FROM json_each(?2))",
			 p, 2,
			 "INSERT INTO space_checkpoints (id, host, sandbox)"
			 " SELECT i.value, ?1, s.value FROM json_each(?2) i JOIN json_each(?3) s ON s.key = i.key"
			 " WHERE true"
			 " ON CONFLICT (id) DO UPDATE SET host = excluded.host, sandbox = excluded.sandbox"
			 " WHERE space_checkpoints.host <> excluded.host OR space_checkpoints.sandbox <> excluded.sandbox",
			 p, 3);
}

static void checkpoint_row(sqlite3_stmt *st, void *out)
{
	struct cluster_sandbox *s = out;
	snprintf(s->id, sizeof(s->id), "%s", col(st, 0));
	snprintf(s->host, sizeof(s->host), "%s", col(st, 1));
	snprintf(s->url, sizeof(s->url), "%s", col(st, 2));
	s->host_up = !strcmp(col(st, 3), "up");
	s->state = s->host_up ? CLUSTER_SANDBOX_RUNNING : CLUSTER_SANDBOX_LOST;
}

static int sqlite_checkpoint_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret)
{
	return one_row(cs,
		       "SELECT k.id, k.host, h.url, h.state FROM space_checkpoints k JOIN space_hosts h ON h.name = k.host"
		       " WHERE k.id = ?1",
		       id, checkpoint_row, ret, sizeof(*ret));
}

static int sqlite_apikeys_publish(struct cluster_store *cs, const char *host, const char *const *hex_hashes)
{
	_cleanup_free_ char *arr = json_strings(hex_hashes);
	if (!arr)
		return -ENOMEM;
	struct val p[2] = { T(host), T(arr) };
	return exec_pair(cs, "DELETE FROM space_api_keys WHERE host = ?1 AND hash NOT IN (SELECT value FROM json_each(?2))",
			 p, 2, "INSERT OR IGNORE INTO space_api_keys (hash, host) SELECT value, ?1 FROM json_each(?2)", p, 2);
}

static int sqlite_apikey_check(struct cluster_store *cs, const char *hex_hash)
{
	struct val p[1] = { T(hex_hash) };
	sqlite3 *db = take(cs);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int e = prep(db, &st, "SELECT 1 FROM space_api_keys WHERE hash = ?1 LIMIT 1", p, 1);
	if (e == 0) {
		int rc = sqlite3_step(st);
		e = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -EACCES : db_err(db, "check an API key");
	}
	give(cs, db);
	return e;
}

static const struct cluster_store_ops sqlite_ops = {
	.name = "sqlite",
	.close = sqlite_close,
	.host_register = sqlite_host_register,
	.host_heartbeat = sqlite_host_heartbeat,
	.host_stop = sqlite_host_stop,
	.sweep = sqlite_sweep,
	.host_key = sqlite_host_key,
	.host_list = sqlite_host_list,
	.place = sqlite_place,
	.holder = sqlite_holder,
	.place_counts = sqlite_place_counts,
	.claim_drop = sqlite_claim_drop,
	.sandbox_add = sqlite_sandbox_add,
	.sandbox_get = sqlite_sandbox_get,
	.sandbox_give_up = sqlite_sandbox_give_up,
	.sandbox_list = sqlite_sandbox_list,
	.sandbox_set = sqlite_sandbox_set,
	.checkpoints_publish = sqlite_checkpoints_publish,
	.checkpoint_get = sqlite_checkpoint_get,
	.apikeys_publish = sqlite_apikeys_publish,
	.apikey_check = sqlite_apikey_check,
};
