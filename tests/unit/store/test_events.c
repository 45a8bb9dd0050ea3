/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event log's bounds (store/db.h): per sandbox, in all, by age, the size of one event, a sandbox's rows
 * removed with it, and the operator's settings (a bad one refused, not read as "no limit").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/db.h"
#include "util/util.h"
#include "../../check.h"


static char dir[] = "/tmp/space-test-events-XXXXXX";

static struct store *open_store(const char *name)
{
	char p[256], err[256] = "";
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	struct store *s = NULL;
	int r = store_open(p, true, &s, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "store_open %s: %s\n", p, err);
	return s;
}

static long count(struct store *s, const char *where)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM events WHERE %s", where);
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	long n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	sqlite3_finalize(st);
	return n;
}

/* Whether the rows of sandbox id are exactly its newest n, numbered 0.. in their detail. */
static bool newest_kept(struct store *s, const char *id, int inserted, int n)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(store_db(s), "SELECT detail FROM events WHERE sandbox_id = ? ORDER BY seq", -1, &st,
			       NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	int want = inserted - n, got = 0;
	bool ok = true;
	while (sqlite3_step(st) == SQLITE_ROW) {
		ok = ok && atoi((const char *)sqlite3_column_text(st, 0)) == want++;
		got++;
	}
	sqlite3_finalize(st);
	return ok && got == n;
}

static void add(struct store *s, const char *id, int i)
{
	char d[16];
	snprintf(d, sizeof(d), "%d", i);
	CHECK(store_event(s, id, "egress-denied", d) == 0);
}

static void test_per_sandbox(void)
{
	struct store *s = open_store("per.db");
	CHECK(s != NULL);
	struct store_events_retention k;
	store_events_retention(s, &k);
	CHECK(k.per_sandbox == STORE_EVENTS_PER_SANDBOX_DEFAULT && k.total == STORE_EVENTS_TOTAL_DEFAULT &&
	      k.max_age_days == STORE_EVENTS_MAX_AGE_DAYS_DEFAULT);
	k.per_sandbox = 100;
	CHECK(store_events_set_retention(s, &k) == 0);
	/* A flood from one sandbox, a trickle from another: the flood stays near its share as it comes. */
	CHECK(store_begin(s) == 0);
	for (int i = 0; i < 5000; i++) {
		add(s, "sb-flood", i);
		if (i % 100 == 0)
			add(s, "sb-quiet", i / 100);
		CHECK(count(s, "sandbox_id = 'sb-flood'") <= 100 + 2 * STORE_EVENTS_PRUNE_EVERY);
	}
	CHECK(store_commit(s) == 0);
	CHECK(count(s, "sandbox_id = 'sb-quiet'") == 50); /* another sandbox's rows are not its share */
	CHECK(store_events_prune(s, NULL) >= 0);
	CHECK(newest_kept(s, "sb-flood", 5000, 100));
	CHECK(newest_kept(s, "sb-quiet", 50, 50));
	store_close(s);
}

static void test_total_and_age(void)
{
	struct store *s = open_store("total.db");
	struct store_events_retention k = { .per_sandbox = 1000, .total = 300, .max_age_days = 2 };
	CHECK(store_events_set_retention(s, &k) == 0);
	char id[32];
	for (int i = 0; i < 2000; i++) {
		snprintf(id, sizeof(id), "sb-%d", i % 37);
		add(s, id, i);
		CHECK(count(s, "1") <= 300 + STORE_EVENTS_PRUNE_EVERY);
	}
	CHECK(store_events_prune(s, NULL) >= 0);
	CHECK(count(s, "1") == 300);
	CHECK(count(s, "CAST(detail AS INTEGER) < 1700") == 0); /* the newest 300 */
	/* Older than the age limit: gone at the next prune, whatever the counts. */
	int64_t now = util_wall_ms(), day = 24 * 3600 * 1000LL;
	CHECK(store_event_at(s, "sb-old", "egress-denied", "old", now - 3 * day) == 0);
	CHECK(store_event_at(s, "sb-old", "egress-denied", "recent", now - day) == 0);
	CHECK(store_events_prune(s, "sb-old") >= 1);
	CHECK(count(s, "sandbox_id = 'sb-old'") == 1 && count(s, "detail = 'old'") == 0);
	/* Events of no sandbox (init, template imports) count in the total and the age too. */
	CHECK(store_event_at(s, NULL, "init", "x", now - 3 * day) == 0);
	CHECK(store_events_prune(s, NULL) >= 1 && count(s, "sandbox_id IS NULL") == 0);
	/* Out of range: refused. */
	struct store_events_retention bad = { 0, 10, 10 };
	CHECK(store_events_set_retention(s, &bad) == -EINVAL);
	bad = (struct store_events_retention){ 10, 10, 0 };
	CHECK(store_events_set_retention(s, &bad) == -EINVAL);
	store_close(s);
}

static void test_detail_cap(void)
{
	struct store *s = open_store("detail.db");
	/* 3000 two-byte characters: cut on a character boundary, marked. */
	static char big[6001];
	for (int i = 0; i < 3000; i++)
		memcpy(big + 2 * i, "\xc3\xa9", 2);
	big[6000] = '\0';
	CHECK(store_event(s, "sb-big", big, big) == 0);
	sqlite3_stmt *st;
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT kind, detail FROM events WHERE sandbox_id = 'sb-big'", -1, &st,
				 NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	const char *kind = (const char *)sqlite3_column_text(st, 0), *detail = (const char *)sqlite3_column_text(st, 1);
	size_t kl = strlen(kind), dl = strlen(detail);
	CHECK(kl <= STORE_EVENT_KIND_MAX && dl <= STORE_EVENT_DETAIL_MAX);
	CHECK(dl > STORE_EVENT_DETAIL_MAX - 8);
	CHECK(!strcmp(detail + dl - 3, "...") && !strcmp(kind + kl - 3, "..."));
	CHECK((dl - 3) % 2 == 0 && !memcmp(detail, big, dl - 3)); /* whole characters only */
	sqlite3_finalize(st);
	/* Short ones are stored as given. */
	CHECK(store_event(s, "sb-big", "egress-denied", "dns x.test: not allowed") == 0);
	CHECK(count(s, "detail = 'dns x.test: not allowed'") == 1);
	store_close(s);
}

static void test_remove(void)
{
	struct store *s = open_store("remove.db");
	for (int i = 0; i < 10; i++) {
		add(s, "sb-gone", i);
		add(s, "sb-stays", i);
	}
	CHECK(store_events_remove(s, "sb-gone") == 10);
	CHECK(count(s, "sandbox_id = 'sb-gone'") == 0 && count(s, "sandbox_id = 'sb-stays'") == 10);
	CHECK(store_events_remove(s, "sb-gone") == 0);
	CHECK(store_events_remove(s, NULL) == -EINVAL);
	store_close(s);
}

static void test_operator_settings(void)
{
	setenv("SPACE_EVENTS_KEEP_PER_SANDBOX", "25", 1);
	setenv("SPACE_EVENTS_KEEP", "2000", 1);
	setenv("SPACE_EVENTS_KEEP_DAYS", "7", 1);
	struct store *s = open_store("env.db");
	struct store_events_retention k = { 0 };
	if (s)
		store_events_retention(s, &k);
	CHECK(k.per_sandbox == 25 && k.total == 2000 && k.max_age_days == 7);
	store_close(s);
	/* A value that does not parse, or 0, is refused with its name: never "no limit". */
	static const char *const bad[] = { "abc", "0", "-5", "99999999999", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SPACE_EVENTS_KEEP", bad[i], 1);
		char p[256], err[256] = "";
		snprintf(p, sizeof(p), "%s/env.db", dir);
		struct store *t = NULL;
		CHECK(store_open(p, false, &t, err, sizeof(err)) == -EINVAL && strstr(err, "SPACE_EVENTS_KEEP"));
		store_close(t);
	}
	unsetenv("SPACE_EVENTS_KEEP_PER_SANDBOX");
	unsetenv("SPACE_EVENTS_KEEP");
	unsetenv("SPACE_EVENTS_KEEP_DAYS");
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_per_sandbox();
	test_total_and_age();
	test_detail_cap();
	test_remove();
	test_operator_settings();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return check_summary("events");
}
