/* SPDX-License-Identifier: Apache-2.0 */
/* The state store: migrations from every version, concurrent writers, crashes mid-transaction, ids. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "store/db.h"
#include "store/sandboxes.h"
#include "store/templates.h"
#include "util/procstat.h"
#include "util/util.h"

#include "check.h"


static char dir[] = "/tmp/space-test-store-XXXXXX";

static void db_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static int count(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
	sqlite3_finalize(st);
	return n;
}

static void test_fresh(void)
{
	char p[256], err[256];
	db_path(p, sizeof(p), "fresh.db");
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == -ENOENT);
	CHECK(store_open(p, true, &s, err, sizeof(err)) == 0);
	CHECK(store_schema_version(store_db(s)) == STORE_SCHEMA_VERSION);
	sqlite3_stmt *st;
	sqlite3_prepare_v2(store_db(s), "PRAGMA journal_mode", -1, &st, NULL);
	CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), "wal"));
	sqlite3_finalize(st);
	CHECK(store_meta_set(s, "k", "v1") == 0);
	CHECK(store_meta_set(s, "k", "v2") == 0);
	char *v = NULL;
	CHECK(store_meta_get(s, "k", &v) == 0 && v && !strcmp(v, "v2"));
	free(v);
	CHECK(store_meta_get(s, "missing", &v) == -ENOENT);
	store_close(s);
}

/* Data written at each older version survives the migrations to the current one. */
static void raw_pid_ns_fn(sqlite3_context *c, int argc, sqlite3_value **argv)
{
	(void)argc;
	(void)argv;
	sqlite3_result_int64(c, (sqlite3_int64)util_pidns_self());
}

/* A connection of our own to a schema-7 store: its triggers name the SQL function store_open registers
 * (SQLite resolves it when a statement that fires them is prepared). */
static void raw_pid_ns(sqlite3 *db)
{
	sqlite3_create_function(db, "space_pid_ns", 0, SQLITE_UTF8, NULL, raw_pid_ns_fn, NULL, NULL);
}

/* A store at version (migrated from nothing through our own connection, with the SQL function its triggers
 * name) in the test directory as name; its path into p. */
static sqlite3 *store_at(char *p, size_t len, const char *name, int version)
{
	char err[256];
	sqlite3 *db = NULL;
	db_path(p, len, name);
	CHECK(sqlite3_open(p, &db) == SQLITE_OK);
	raw_pid_ns(db);
	CHECK(store_migrate(db, version, err, sizeof(err)) == 0);
	CHECK(store_schema_version(db) == version);
	return db;
}

static void test_migrations(void)
{
	for (int from = 0; from < STORE_SCHEMA_VERSION; from++) {
		char p[256], err[256], name[32];
		snprintf(name, sizeof(name), "mig%d.db", from);
		sqlite3 *db = store_at(p, sizeof(p), name, from);
		if (from >= 1) {
			CHECK(sqlite3_exec(db,
					   "INSERT INTO templates(name, path, rootfs_bytes, kernel, initrd, created_ms)"
					   " VALUES ('t', '/p', 1, NULL, NULL, 1);"
					   "INSERT INTO sandboxes(id, template, isolation, status, cpus, memory_mib, path,"
					   " runtime_dir, created_ms, updated_ms)"
					   " VALUES ('sb-x', 't', 'jail', 'running', 1, 256, '/p', '/r', 1, 1);",
					   NULL, NULL, NULL) == SQLITE_OK);
		}
		sqlite3_close(db);
		struct store *s;
		CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
		CHECK(store_schema_version(store_db(s)) == STORE_SCHEMA_VERSION);
		if (from >= 1) {
			CHECK(count(store_db(s), "SELECT count(*) FROM templates WHERE name = 't'") == 1);
			CHECK(count(store_db(s), "SELECT expires_ms FROM sandboxes WHERE id = 'sb-x'") == 0);
		}
		CHECK(count(store_db(s), "PRAGMA integrity_check") == 0 ||
		      count(store_db(s), "SELECT 1") == 1);
		store_close(s);
	}
}

/* 6 -> 8: values the library reads back move out of the metadata JSON into typed columns (7), and the
 * keys leave the JSON with the transitional triggers (8); a pid gets its namespace. */
static void test_migration_v7(void)
{
	char p[256], err[256];
	db_path(p, sizeof(p), "mig-v7.db");
	sqlite3 *db;
	CHECK(sqlite3_open(p, &db) == SQLITE_OK);
	CHECK(store_migrate(db, 6, err, sizeof(err)) == 0);
	CHECK(sqlite3_exec(db,
			   "INSERT INTO sandboxes(id, template, isolation, status, pid, cpus, memory_mib, path,"
			   " runtime_dir, created_ms, updated_ms, metadata) VALUES"
			   " ('sb-a', 't', 'jail', 'running', 4242, 1, 256, '/p', '/r', 1, 1,"
			   "  '{\"env\":[],\"uid_base\":1065536,\"snapshots\":{\"every\":60,\"keep\":5,"
			   "\"pid\":777,\"pid_start\":123456789012}}'),"
			   " ('sb-b', 't', 'jail', 'paused', 0, 1, 256, '/p', '/r', 2, 2,"
			   "  '{\"uid_base\":0,\"pool\":\"t\"}'),"
			   " ('sb-c', 't', 'jail', 'running', 0, 1, 256, '/p', '/r', 3, 3, 'not json'),"
			   " ('sb-d', 't', 'jail', 'running', 0, 1, 256, '/p', '/r', 4, 4,"
			   "  '{\"uid_base\":-5,\"pool\":7,\"snapshots\":{\"pid\":1e12}}');",
			   NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	CHECK(store_schema_version(store_db(s)) == STORE_SCHEMA_VERSION);
	sqlite3 *d = store_db(s);
	CHECK(count(d, "SELECT uid_base FROM sandboxes WHERE id = 'sb-a'") == 1065536);
	CHECK(count(d, "SELECT helper_pid FROM sandboxes WHERE id = 'sb-a'") == 777);
	CHECK(count(d, "SELECT helper_pid_start = 123456789012 FROM sandboxes WHERE id = 'sb-a'") == 1);
	CHECK(count(d, "SELECT pool IS NULL FROM sandboxes WHERE id = 'sb-a'") == 1);
	CHECK(count(d, "SELECT pool = 't' FROM sandboxes WHERE id = 'sb-b'") == 1);
	/* Not recorded before 7: the pid's namespace is unknown (0), never guessed. */
	CHECK(count(d, "SELECT pid_ns FROM sandboxes WHERE id = 'sb-a'") == 0);
	/* Rows whose JSON does not parse or holds values out of range get the defaults. */
	CHECK(count(d, "SELECT uid_base + helper_pid + (pool IS NOT NULL) FROM sandboxes WHERE id = 'sb-c'") == 0);
	CHECK(count(d, "SELECT uid_base + helper_pid + (pool IS NOT NULL) FROM sandboxes WHERE id = 'sb-d'") == 0);
	/* 8: the moved keys are gone from the JSON; the user's part of it is untouched. */
	CHECK(count(d, "SELECT json_extract(metadata, '$.snapshots.every') FROM sandboxes WHERE id = 'sb-a'") == 60);
	CHECK(count(d, "SELECT json_extract(metadata, '$.snapshots.keep') FROM sandboxes WHERE id = 'sb-a'") == 5);
	CHECK(count(d, "SELECT count(*) FROM sandboxes WHERE json_valid(metadata) AND (json_type(metadata,"
		       " '$.uid_base') IS NOT NULL OR json_type(metadata, '$.pool') IS NOT NULL OR json_type(metadata,"
		       " '$.snapshots.pid') IS NOT NULL OR json_type(metadata, '$.snapshots.pid_start') IS NOT NULL)") == 0);
	CHECK(count(d, "SELECT json_array_length(metadata, '$.env') = 0 FROM sandboxes WHERE id = 'sb-a'") == 1);
	CHECK(count(d, "SELECT metadata = 'not json' FROM sandboxes WHERE id = 'sb-c'") == 1);
	/* The transitional triggers are gone: a key written into the JSON is the caller's text, not a column. */
	CHECK(count(d, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'sandboxes_v6_%'") ==
	      0);
	CHECK(store_exec(s, "UPDATE sandboxes SET metadata = json_set(metadata, '$.pool', 'u') WHERE id = 'sb-b'") ==
	      0);
	CHECK(count(d, "SELECT pool = 't' FROM sandboxes WHERE id = 'sb-b'") == 1);
	CHECK(store_exec(s, "UPDATE sandboxes SET metadata = json_remove(metadata, '$.snapshots') WHERE id = 'sb-a'") ==
	      0);
	CHECK(count(d, "SELECT helper_pid FROM sandboxes WHERE id = 'sb-a'") == 777);
	CHECK(store_exec(s, "INSERT INTO sandboxes(id, template, isolation, status, pid, cpus, memory_mib, path,"
			    " runtime_dir, created_ms, updated_ms, metadata) VALUES ('sb-e', 't', 'vm', 'creating', 99,"
			    " 1, 256, '/p', '/r', 5, 5, '{\"uid_base\":70000,\"pool\":\"t\"}')") == 0);
	CHECK(count(d, "SELECT uid_base + (pool IS NOT NULL) FROM sandboxes WHERE id = 'sb-e'") == 0);
	/* A pid written without its namespace gets the writer's (that trigger stays). */
	char want[64];
	snprintf(want, sizeof(want), "%llu", (unsigned long long)util_pidns_self());
	sqlite3_stmt *st;
	CHECK(sqlite3_prepare_v2(d, "SELECT pid_ns FROM sandboxes WHERE id = 'sb-e'", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), want));
	sqlite3_finalize(st);
	CHECK(store_exec(s, "UPDATE sandboxes SET pid = 4343 WHERE id = 'sb-a'") == 0);
	CHECK(sqlite3_prepare_v2(d, "SELECT pid_ns FROM sandboxes WHERE id = 'sb-a'", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), want));
	sqlite3_finalize(st);
	CHECK(util_pidns_self() != 0);
	store_close(s);
}

/* 7 -> 8 of a store a schema-7 library wrote: the values its JSON writers put there (kept in the columns
 * by the triggers) stay in the columns when the keys and triggers go. */
static void test_migration_v8(void)
{
	char p[256], err[256];
	sqlite3 *db = store_at(p, sizeof(p), "mig-v8.db", 7);
	/* As schema-7 writers did: the keys in the JSON (pid 0 and a namespace given: no trigger needs the
	 * store's own SQL function here). */
	CHECK(sqlite3_exec(db,
			   "INSERT INTO sandboxes(id, template, isolation, status, pid, pid_ns, cpus, memory_mib, path,"
			   " runtime_dir, created_ms, updated_ms, metadata) VALUES"
			   " ('sb-j', 't', 'jail', 'running', 0, 1, 1, 256, '/p', '/r', 1, 1,"
			   "  '{\"env\":[\"A=1\"],\"hostname\":\"h\",\"uid_base\":2131072}'),"
			   " ('sb-p', 't', 'jail', 'paused', 0, 1, 1, 256, '/p', '/r', 2, 2, '{\"env\":[]}');"
			   "UPDATE sandboxes SET metadata = json_set(metadata, '$.pool', 't') WHERE id = 'sb-p';"
			   "UPDATE sandboxes SET metadata = json_set(metadata, '$.snapshots',"
			   "  json('{\"every\":9,\"keep\":2,\"pid\":555,\"pid_start\":66}')) WHERE id = 'sb-j';",
			   NULL, NULL, NULL) == SQLITE_OK);
	CHECK(count(db, "SELECT uid_base FROM sandboxes WHERE id = 'sb-j'") == 2131072);
	CHECK(count(db, "SELECT helper_pid FROM sandboxes WHERE id = 'sb-j'") == 555);
	CHECK(count(db, "SELECT pool = 't' FROM sandboxes WHERE id = 'sb-p'") == 1);
	sqlite3_close(db);
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	sqlite3 *d = store_db(s);
	CHECK(store_schema_version(d) == STORE_SCHEMA_VERSION);
	CHECK(count(d, "SELECT uid_base FROM sandboxes WHERE id = 'sb-j'") == 2131072);
	CHECK(count(d, "SELECT helper_pid + helper_pid_start FROM sandboxes WHERE id = 'sb-j'") == 555 + 66);
	CHECK(count(d, "SELECT pool = 't' FROM sandboxes WHERE id = 'sb-p'") == 1);
	CHECK(count(d, "SELECT metadata = '{\"env\":[\"A=1\"],\"hostname\":\"h\",\"snapshots\":{\"every\":9,"
		       "\"keep\":2}}' FROM sandboxes WHERE id = 'sb-j'") == 1);
	CHECK(count(d, "SELECT metadata = '{\"env\":[]}' FROM sandboxes WHERE id = 'sb-p'") == 1);
	/* Typed reads agree (store/sandboxes.h). */
	struct store_sandbox row = { .metadata = NULL };
	CHECK(store_sandbox_get(s, "sb-p", &row) == 0 && !strcmp(row.pool, "t") && row.status == STORE_PAUSED);
	store_sandbox_clear(&row);
	row.metadata = NULL;
	CHECK(store_sandbox_get(s, "sb-j", &row) == 0 && row.uid_base == 2131072 && row.helper.pid == 555 &&
	      row.helper.start_time == 66);
	store_sandbox_clear(&row);
	store_close(s);
}

/* 8 -> 9: templates of a store from before images keep their rows, with no image; new ones carry the
 * image config's digest and defaults, and are found by digest. */
static void test_migration_v9(void)
{
	char p[256], err[256];
	sqlite3 *db = store_at(p, sizeof(p), "mig-v9.db", 8);
	CHECK(sqlite3_exec(db, "INSERT INTO templates(name, path, rootfs_bytes, created_ms) VALUES ('old', '/p/old', 1, 1)",
			   NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	CHECK(store_schema_version(store_db(s)) == STORE_SCHEMA_VERSION);
	struct store_template *t = calloc(1, sizeof(*t));
	CHECK(t && store_template_get(s, "old", t) == 0 && t->image_digest[0] == '\0');
	char *cfg = (char *)1;
	CHECK(store_template_get_image_config(s, "old", &cfg) == 0 && cfg == NULL);
	CHECK(store_template_get_image_config(s, "none", &cfg) == -ENOENT);
	static const char dg[] = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char name[64];
	CHECK(store_template_find_image(s, dg, name) == -ENOENT);
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "img");
	snprintf(t->path, sizeof(t->path), "/p/img");
	snprintf(t->image_digest, sizeof(t->image_digest), "%s", dg);
	t->image_config = "{\"env\":[\"A=1\"]}";
	t->created_ms = 5;
	CHECK(store_template_insert(s, t) == 0);
	CHECK(store_template_find_image(s, dg, name) == 0 && !strcmp(name, "img"));
	CHECK(store_template_get_image_config(s, "img", &cfg) == 0 && cfg && !strcmp(cfg, "{\"env\":[\"A=1\"]}"));
	free(cfg);
	memset(t, 0, sizeof(*t));
	CHECK(store_template_get(s, "img", t) == 0 && !strcmp(t->image_digest, dg));
	free(t);
	store_close(s);
}

/* 9 -> 10: a template's live sandboxes are counted through an index, whatever the number of destroyed rows
 * the store keeps: the count is right (destroyed and pooled ones left out) and its plan names the index. */
static void test_migration_v10(void)
{
	char p[256], err[256];
	sqlite3 *db = store_at(p, sizeof(p), "mig-v10.db", 9);
	CHECK(sqlite3_exec(db,
			   "INSERT INTO templates(name, path, rootfs_bytes, created_ms) VALUES ('t', '/p/t', 1, 1);"
			   "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
			   " INSERT INTO sandboxes(id, template, isolation, status, cpus, memory_mib, path, runtime_dir,"
			   " created_ms, updated_ms) SELECT 'd' || i, 't', 'jail', 'destroyed', 1, 1, '/p', '/r', i, i FROM n;"
			   "INSERT INTO sandboxes(id, template, isolation, status, cpus, memory_mib, path, runtime_dir,"
			   " created_ms, updated_ms) VALUES ('a', 't', 'jail', 'running', 1, 1, '/p', '/r', 1, 1),"
			   " ('b', 't', 'vm', 'paused', 1, 1, '/p', '/r', 1, 1);"
			   "INSERT INTO sandboxes(id, template, isolation, status, cpus, memory_mib, path, runtime_dir,"
			   " created_ms, updated_ms, pool) VALUES ('c', 't', 'jail', 'paused', 1, 1, '/p', '/r', 1, 1, 't');",
			   NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	CHECK(store_schema_version(store_db(s)) == 10);
	struct store_template *t = calloc(1, sizeof(*t));
	CHECK(t && store_template_get(s, "t", t) == 0 && t->sandboxes == 2);
	free(t);
	sqlite3_stmt *st = NULL;
	bool indexed = false;
	CHECK(sqlite3_prepare_v2(store_db(s),
				 "EXPLAIN QUERY PLAN SELECT count(*) FROM sandboxes s WHERE s.template = 't'"
				 " AND s.status != 'destroyed' AND s.pool IS NULL",
				 -1, &st, NULL) == SQLITE_OK);
	while (st && sqlite3_step(st) == SQLITE_ROW) {
		const char *d = (const char *)sqlite3_column_text(st, 3);
		if (d && strstr(d, "sandboxes_live_template"))
			indexed = true;
	}
	sqlite3_finalize(st);
	CHECK(indexed);
	store_close(s);
}

static void test_newer_refused(void)
{
	char p[256], err[256];
	db_path(p, sizeof(p), "newer.db");
	sqlite3 *db;
	sqlite3_open(p, &db);
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", STORE_SCHEMA_VERSION + 1);
	sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == -EPROTO);
	CHECK(strstr(err, "newer") != NULL);
}

/* Several processes write at once: every transaction lands, none is lost to SQLITE_BUSY. */
static void test_concurrent_writers(void)
{
	char p[256], err[256];
	db_path(p, sizeof(p), "conc.db");
	struct store *s;
	CHECK(store_open(p, true, &s, err, sizeof(err)) == 0);
	store_close(s);
	enum { PROCS = 4, EACH = 150 };
	pid_t pids[PROCS];
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct store *c;
			if (store_open(p, false, &c, err, sizeof(err)) < 0)
				_exit(10);
			for (int k = 0; k < EACH; k++) {
				if (store_begin(c) < 0 || store_event(c, NULL, "test", "x") < 0 ||
				    store_commit(c) < 0)
					_exit(11);
			}
			store_close(c);
			_exit(0);
		}
	}
	for (int i = 0; i < PROCS; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	CHECK(count(store_db(s), "SELECT count(*) FROM events WHERE kind = 'test'") == PROCS * EACH);
	store_close(s);
}

/* A process killed in the middle of a transaction leaves the store as it was before it. */
static void test_crash_mid_transaction(void)
{
	char p[256], err[256];
	db_path(p, sizeof(p), "crash.db");
	struct store *s;
	CHECK(store_open(p, true, &s, err, sizeof(err)) == 0);
	CHECK(store_meta_set(s, "before", "1") == 0);
	store_close(s);
	int sync[2];
	CHECK(pipe(sync) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct store *c;
		if (store_open(p, false, &c, err, sizeof(err)) < 0)
			_exit(1);
		store_begin(c);
		store_meta_set(c, "during", "1");
		store_exec(c, "INSERT INTO templates VALUES ('half', '/x', 1, NULL, NULL, 1)");
		if (write(sync[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char b;
	CHECK(read(sync[0], &b, 1) == 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	char *v = NULL;
	CHECK(store_meta_get(s, "before", &v) == 0);
	free(v);
	CHECK(store_meta_get(s, "during", &v) == -ENOENT);
	CHECK(count(store_db(s), "SELECT count(*) FROM templates") == 0);
	sqlite3_stmt *st;
	sqlite3_prepare_v2(store_db(s), "PRAGMA integrity_check", -1, &st, NULL);
	CHECK(sqlite3_step(st) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), "ok"));
	sqlite3_finalize(st);
	/* And the writer lock it held is free again. */
	CHECK(store_begin(s) == 0 && store_commit(s) == 0);
	store_close(s);
	close(sync[0]);
	close(sync[1]);
}

static void test_ids(void)
{
	enum { N = 2000 };
	static char ids[N][32];
	for (int i = 0; i < N; i++) {
		CHECK(core_new_id("sb-", ids[i], sizeof(ids[i])) == 0);
		CHECK(strlen(ids[i]) == 19);
		for (const char *c = ids[i] + 3; *c; c++)
			CHECK((*c >= 'a' && *c <= 'z') || (*c >= '2' && *c <= '7'));
	}
	int dup = 0;
	for (int i = 0; i < N; i++)
		for (int k = i + 1; k < N; k++)
			dup += !strcmp(ids[i], ids[k]);
	CHECK(dup == 0);
	char small[8];
	CHECK(core_new_id("sb-", small, sizeof(small)) == -ENAMETOOLONG);
}

static void test_util(void)
{
	uint64_t v;
	CHECK(util_parse_size("4G", &v) == 0 && v == 4ull << 30);
	CHECK(util_parse_size("512M", &v) == 0 && v == 512ull << 20);
	CHECK(util_parse_size("1GiB", &v) == 0 && v == 1ull << 30);
	CHECK(util_parse_size("100", &v) == 0 && v == 100);
	CHECK(util_parse_size("-1G", &v) == -EINVAL);
	CHECK(util_parse_size("4X", &v) == -EINVAL);
	CHECK(util_parse_size("99999999999T", &v) == -ERANGE);
	CHECK(util_parse_uint("12", 1, 64, &v) == 0 && v == 12);
	CHECK(util_parse_uint("65", 1, 64, &v) == -ERANGE);
	CHECK(util_parse_uint("1x", 1, 64, &v) == -EINVAL);
	CHECK(util_name_valid("base"));
	CHECK(util_name_valid("py3.11_x-y"));
	CHECK(!util_name_valid("a/b"));
	CHECK(!util_name_valid(".."));
	CHECK(!util_name_valid("-x"));
	CHECK(!util_name_valid(""));
}

/* Before a store with rows is migrated, a consistent copy of it stays beside it (0600); a fresh one has none. */
static void test_migration_backup(void)
{
	char p[256], bak[300], err[256];
	db_path(p, sizeof(p), "backup.db");
	sqlite3 *db;
	CHECK(sqlite3_open(p, &db) == SQLITE_OK);
	raw_pid_ns(db);
	CHECK(store_migrate(db, 6, err, sizeof(err)) == 0);
	CHECK(sqlite3_exec(db, "INSERT INTO templates VALUES ('keep', '/p', 1, NULL, NULL, 1);", NULL, NULL, NULL) ==
	      SQLITE_OK);
	sqlite3_close(db);
	struct store *s;
	CHECK(store_open(p, false, &s, err, sizeof(err)) == 0);
	CHECK(store_schema_version(store_db(s)) == STORE_SCHEMA_VERSION);
	store_close(s);
	snprintf(bak, sizeof(bak), "%s.bak-schema-6", p);
	struct stat st;
	CHECK(stat(bak, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK(sqlite3_open_v2(bak, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	CHECK(store_schema_version(db) == 6);
	CHECK(count(db, "SELECT count(*) FROM templates WHERE name = 'keep'") == 1);
	sqlite3_close(db);

	db_path(p, sizeof(p), "fresh-nobak.db");
	CHECK(store_open(p, true, &s, err, sizeof(err)) == 0);
	store_close(s);
	snprintf(bak, sizeof(bak), "%s.bak-schema-0", p);
	CHECK(access(bak, F_OK) < 0);
}

/* A damaged store is refused with what to do, and left exactly as it was. */
static void test_damaged_refused(void)
{
	static const char junk[] = "this is not a database; it was overwritten by something else entirely.....";
	char p[256], err[512];
	db_path(p, sizeof(p), "damaged.db");
	FILE *f = fopen(p, "we");
	CHECK(f != NULL);
	for (int i = 0; f && i < 64; i++)
		fwrite(junk, 1, sizeof(junk) - 1, f);
	if (f)
		fclose(f);
	struct stat before, after;
	CHECK(stat(p, &before) == 0);
	struct store *s = NULL;
	err[0] = 0;
	int r = store_open(p, false, &s, err, sizeof(err));
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err, "is damaged") != NULL);
	CHECK(strstr(err, ".recover") != NULL && strstr(err, "bak-schema") != NULL);
	CHECK(stat(p, &after) == 0 && after.st_size == before.st_size && after.st_mtime == before.st_mtime);
	if (r == 0)
		store_close(s);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_fresh();
	test_migrations();
	test_migration_v7();
	test_migration_v8();
	test_migration_v9();
	test_migration_v10();
	test_newer_refused();
	test_migration_backup();
	test_damaged_refused();
	test_concurrent_writers();
	test_crash_mid_transaction();
	test_ids();
	test_util();
	return check_exit("store", dir);
}
