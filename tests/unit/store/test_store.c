/* SPDX-License-Identifier: Apache-2.0 */
/* The state store: migrations from every version, concurrent writers, crashes mid-transaction, ids. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "store/db.h"
#include "util/util.h"

static int failures;
#define CHECK(cond)                                                                                 \
	do {                                                                                        \
		if (!(cond)) {                                                                      \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
			failures++;                                                                 \
		}                                                                                   \
	} while (0)

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
static void test_migrations(void)
{
	for (int from = 0; from < STORE_SCHEMA_VERSION; from++) {
		char p[256], err[256], name[32];
		snprintf(name, sizeof(name), "mig%d.db", from);
		db_path(p, sizeof(p), name);
		sqlite3 *db;
		CHECK(sqlite3_open(p, &db) == SQLITE_OK);
		CHECK(store_migrate(db, from, err, sizeof(err)) == 0);
		CHECK(store_schema_version(db) == from);
		if (from >= 1) {
			CHECK(sqlite3_exec(db,
					   "INSERT INTO templates VALUES ('t', '/p', 1, NULL, NULL, 1);"
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

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_fresh();
	test_migrations();
	test_newer_refused();
	test_concurrent_writers();
	test_crash_mid_transaction();
	test_ids();
	test_util();
	util_rm_rf(dir);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("store: all checks passed\n");
	return 0;
}
