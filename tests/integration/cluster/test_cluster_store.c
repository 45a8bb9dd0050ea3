/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster store (cli/cluster_store*.c) against each back-end, alike: a real PostgreSQL (conninfo in
 * argv[1], a throwaway server cluster_store.sh starts) or SQLite (argv[1] "sqlite:/PATH"): schema, registration and its refusal while a server of that name
 * serves, heartbeats and a takeover, the sweep that marks hosts and their sandboxes lost, placement
 * (capacity ratio, template, isolation, warm stock first, a host avoided, every reason it can fail),
 * concurrent placements spreading under SKIP LOCKED (PostgreSQL) or serialized writers (SQLite), give-up
 * only of lost sandboxes, API key hashes, checkpoints, and the migration from schema version 1. SQLite
 * also: the file's checks (an absolute path, mode 0600, a second process's store sees the rows).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../check.h"
#include "cluster_store.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *conninfo;
static bool is_sqlite;

/* sql on the store's database, outside the store (as an operator, or an older build, would); the first
 * column of the first row (an integer) when want_int, else 0; -1 on failure. */
static int raw(const char *sql, bool want_int)
{
	int v = 0;
	if (is_sqlite) {
		sqlite3 *db = NULL;
		sqlite3_stmt *st = NULL;
		if (sqlite3_open(conninfo + strlen("sqlite:"), &db) != SQLITE_OK)
			v = -1;
		else if (!want_int)
			v = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
		else if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int(st, 0);
		else
			v = -1;
		sqlite3_finalize(st);
		sqlite3_close(db);
		return v;
	}
	PGconn *c = PQconnectdb(conninfo);
	PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (st == PGRES_TUPLES_OK && want_int && PQntuples(r) == 1)
		v = atoi(PQgetvalue(r, 0, 0));
	else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		v = -1;
	PQclear(r);
	PQfinish(c);
	return v;
}

static struct cluster_host_report report(const char *name, uint32_t capacity, const char *const *templates,
					 const char *stock)
{
	static const char *const none[] = { NULL };
	return (struct cluster_host_report){ .name = name, .url = "https://127.0.0.1:1", .capacity = capacity, .cpus = 2,
					     .mem_total = 1 << 30, .isolations = "jail", .templates = templates ? templates : none,
					     .pool_stock_json = stock ? stock : "{}", .version = "test" };
}

struct count {
	int running, lost, destroyed, a, b, c;
};

static int count_row(const struct cluster_sandbox *s, void *arg)
{
	struct count *n = arg;
	n->running += s->state == CLUSTER_SANDBOX_RUNNING;
	n->lost += s->state == CLUSTER_SANDBOX_LOST;
	n->destroyed += s->state == CLUSTER_SANDBOX_DESTROYED;
	n->a += !strcmp(s->host, "a");
	n->b += !strcmp(s->host, "b");
	n->c += !strcmp(s->host, "c");
	return 0;
}

static int lost_hosts;
static void on_lost(const char *host, unsigned n, void *arg)
{
	(void)arg;
	(void)n;
	lost_hosts += !strcmp(host, "c");
}

struct placer {
	struct cluster_store *cs;
	int n, a, b, c, errors;
};

/* Places and records n sandboxes, as many placing threads would. */
static void *placer_main(void *arg)
{
	struct placer *p = arg;
	for (int i = 0; i < p->n; i++) {
		char host[CLUSTER_NAME_MAX], url[CLUSTER_URL_MAX], tok[33], id[CLUSTER_ID_MAX], from[CLUSTER_NAME_MAX];
		if (cluster_place(p->cs, "tiny", NULL, NULL, 30, NULL, host, url, tok, from) < 0) {
			p->errors++;
			continue;
		}
		snprintf(id, sizeof(id), "sb-t%lx%04d", (unsigned long)pthread_self() % 100000, i);
		if (cluster_sandbox_add(p->cs, id, host, "tiny", tok) < 0)
			p->errors++;
		p->a += !strcmp(host, "a");
		p->b += !strcmp(host, "b");
		p->c += !strcmp(host, "c");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_cluster_store CONNINFO\n");
		return 2;
	}
	conninfo = argv[1];
	is_sqlite = cluster_conninfo_sqlite(conninfo);
	const char *summary = is_sqlite ? "cluster-store sqlite" : "cluster-store postgresql";
	char err[600];
	struct cluster_store *cs = NULL;
	if (is_sqlite) {
		/* refused with the reason: a relative path, a directory that is not there, a file others read */
		CHECK(cluster_open("sqlite:cluster.db", &cs, err, sizeof(err)) == -EINVAL && strstr(err, "absolute"));
		CHECK(cluster_open("sqlite:/nonexistent-dir/cluster.db", &cs, err, sizeof(err)) == -ENOENT &&
		      strstr(err, "directory must exist"));
		char loose[4200];
		snprintf(loose, sizeof(loose), "%s.loose", conninfo + strlen("sqlite:"));
		FILE *f = fopen(loose, "w");
		CHECK(f && fchmod(fileno(f), 0644) == 0);
		if (f)
			fclose(f);
		char lc[4300];
		snprintf(lc, sizeof(lc), "sqlite:%s", loose);
		CHECK(cluster_open(lc, &cs, err, sizeof(err)) == -EPERM && strstr(err, "chmod 600"));
		unlink(loose);
	} else {
		/* unreachable: a refusal within the timeout, with the reason */
		CHECK(cluster_open("host=127.0.0.1 port=1 dbname=x connect_timeout=2", &cs, err, sizeof(err)) == -EHOSTUNREACH);
		CHECK(strstr(err, "unreachable") != NULL);
	}
	CHECK(cluster_open(conninfo, &cs, err, sizeof(err)) == 0);
	if (!cs) {
		fprintf(stderr, "cluster_open: %s\n", err);
		return check_summary(summary);
	}
	CHECK(!strcmp(cluster_backend(cs), is_sqlite ? "sqlite" : "postgresql"));
	struct stat stb;
	CHECK(!is_sqlite || (stat(conninfo + strlen("sqlite:"), &stb) == 0 && (stb.st_mode & 0777) == 0600));
	/* a second open finds the schema made */
	struct cluster_store *cs2 = NULL;
	CHECK(cluster_open(conninfo, &cs2, err, sizeof(err)) == 0);
	cluster_close(cs2);

	/* registration */
	static const char *const tiny[] = { "tiny", NULL }, *const both[] = { "tiny", "big", NULL };
	struct cluster_host_report ra = report("a", 40, both, "{}"), rb = report("b", 20, tiny, "{}"),
				   rc = report("c", 20, tiny, "{}"), bad = report("Bad_Name", 1, NULL, NULL);
	uint64_t ia = 0, ib = 0, ic = 0, ix = 0;
	char ka[CLUSTER_KEY_HEX + 1], kb[CLUSTER_KEY_HEX + 1], kc[CLUSTER_KEY_HEX + 1], kx[CLUSTER_KEY_HEX + 1];
	unsigned age = 0;
	CHECK(cluster_host_register(cs, &bad, 10, &ix, kx, &age) == -EINVAL);
	CHECK(cluster_host_register(cs, &ra, 10, &ia, ka, &age) == 0);
	CHECK(cluster_host_register(cs, &rb, 10, &ib, kb, &age) == 0);
	CHECK(cluster_host_register(cs, &rc, 10, &ic, kc, &age) == 0);
	CHECK(strlen(ka) == CLUSTER_KEY_HEX && strcmp(ka, kb));
	char got[CLUSTER_KEY_HEX + 1];
	CHECK(cluster_host_key(cs, "b", got) == 0 && !strcmp(got, kb));
	CHECK(cluster_host_key(cs, "nobody", got) == -ENOENT);
	/* a second server of a serving name is refused while it heartbeats */
	CHECK(cluster_host_register(cs, &rc, 10, &ix, kx, &age) == -EBUSY);
	CHECK(age <= 2);
	bool was_lost = true;
	CHECK(cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0 && !was_lost);
	/* after a clean stop, the name is taken at once: a new incarnation; the old server is told */
	CHECK(cluster_host_stop(cs, "c", ic) == 0);
	CHECK(cluster_host_register(cs, &rc, 10, &ix, kx, &age) == 0 && ix == ic + 1);
	CHECK(cluster_host_heartbeat(cs, &rc, ic, &was_lost) == -ESTALE);
	ic = ix;
	CHECK(cluster_host_key(cs, "c", got) == 0 && !strcmp(got, kx));

	/* placement: the lowest live/capacity ratio, so 40/20/20 spread 2:1:1 */
	int na = 0, nb = 0, nc = 0;
	for (int i = 0; i < 40; i++) {
		char host[CLUSTER_NAME_MAX], url[CLUSTER_URL_MAX], tok[33], id[CLUSTER_ID_MAX], from[CLUSTER_NAME_MAX];
		int e = cluster_place(cs, "tiny", NULL, NULL, 30, NULL, host, url, tok, from);
		CHECK(e == 0);
		if (e < 0)
			break;
		CHECK(!strcmp(url, "https://127.0.0.1:1"));
		snprintf(id, sizeof(id), "sb-seq%04d", i);
		CHECK(cluster_sandbox_add(cs, id, host, "tiny", tok) == 0);
		na += !strcmp(host, "a"), nb += !strcmp(host, "b"), nc += !strcmp(host, "c");
	}
	CHECK(na == 20 && nb == 10 && nc == 10);
	/* a template only a holds goes to a; one nobody holds is -ENOENT; an isolation nobody runs too */
	char host[CLUSTER_NAME_MAX], url[CLUSTER_URL_MAX], tok[33], from[CLUSTER_NAME_MAX];
	CHECK(cluster_place(cs, "big", NULL, NULL, 30, NULL, host, url, tok, from) == 0 && !strcmp(host, "a"));
	CHECK(cluster_place(cs, "nowhere", NULL, NULL, 30, NULL, host, url, tok, from) == -ENOENT);
	CHECK(strstr(cluster_errmsg(), "nowhere") != NULL);
	CHECK(cluster_place(cs, "tiny", "vm", NULL, 30, NULL, host, url, tok, from) == -ENOENT);
	/* a host avoided (did not take a connection) is not chosen */
	for (int i = 0; i < 5; i++) {
		CHECK(cluster_place(cs, "tiny", NULL, NULL, 30, "b", host, url, tok, from) == 0);
		CHECK(strcmp(host, "b") != 0);
	}
	/* warm-pool stock comes first: b reports stock and takes the next one although fuller */
	rb.pool_stock_json = "{\"tiny\": 3}";
	CHECK(cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0);
	CHECK(cluster_place(cs, "tiny", NULL, NULL, 30, NULL, host, url, tok, from) == 0 && !strcmp(host, "b"));
	rb.pool_stock_json = "{}";
	CHECK(cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0);

	/* registered secrets: a create whose policy names some goes only to a host that has them all (c has
	 * pypi and gh, b only pypi); one nobody has is -ENOENT naming them; the names only, never a value */
	static const char *const sec_b[] = { "pypi", NULL }, *const sec_c[] = { "pypi", "gh", NULL };
	rb.secrets = sec_b;
	rc.secrets = sec_c;
	CHECK(cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0 && cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0);
	int on_b = 0, on_c = 0;
	for (int i = 0; i < 6; i++) {
		CHECK(cluster_place(cs, "tiny", NULL, (const char *const[]){ "pypi", "gh", NULL }, 30, NULL, host, url, tok, from) == 0 &&
		      !strcmp(host, "c"));
		CHECK(cluster_claim_drop(cs, tok) == 0);
		CHECK(cluster_place(cs, "tiny", NULL, sec_b, 30, NULL, host, url, tok, from) == 0 && strcmp(host, "a"));
		on_b += !strcmp(host, "b"), on_c += !strcmp(host, "c");
		CHECK(cluster_claim_drop(cs, tok) == 0);
	}
	CHECK(on_b + on_c == 6);
	CHECK(cluster_place(cs, "tiny", NULL, (const char *const[]){ "gh", "aws", NULL }, 30, NULL, host, url, tok, from) == -ENOENT);
	CHECK(strstr(cluster_errmsg(), "'aws'") && strstr(cluster_errmsg(), "space secret set"));
	CHECK(cluster_place(cs, "tiny", NULL, (const char *const[]){ "gh", NULL }, 30, "c", host, url, tok, from) < 0);
	const char *many[CLUSTER_PLACE_SECRETS_MAX + 2];
	for (int i = 0; i <= CLUSTER_PLACE_SECRETS_MAX; i++)
		many[i] = "pypi";
	many[CLUSTER_PLACE_SECRETS_MAX + 1] = NULL;
	CHECK(cluster_place(cs, "tiny", NULL, many, 30, NULL, host, url, tok, from) == -E2BIG);
	rb.secrets = rc.secrets = NULL; /* withdrawn with the next heartbeat */
	CHECK(cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0 && cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0);
	CHECK(cluster_place(cs, "tiny", NULL, sec_b, 30, NULL, host, url, tok, from) == -ENOENT);

	/* concurrent placements (4 threads x 15): every one placed, spread over all three (room for them all:
	 * the claims above that no sandbox took still hold capacity) */
	ra.capacity = 400, rb.capacity = 200, rc.capacity = 200;
	CHECK(cluster_host_heartbeat(cs, &ra, ia, &was_lost) == 0 && cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0 &&
	      cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0);
	struct placer p[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		p[i] = (struct placer){ .cs = cs, .n = 15 };
		pthread_create(&th[i], NULL, placer_main, &p[i]);
	}
	int ta = 0, tb = 0, tc = 0, terr = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ta += p[i].a, tb += p[i].b, tc += p[i].c, terr += p[i].errors;
	}
	CHECK(terr == 0 && ta + tb + tc == 60);
	if (terr)
		fprintf(stderr, "concurrent placement: %d errors, last: %s\n", terr, cluster_errmsg());
	CHECK(ta > 0 && tb > 0 && tc > 0);

	/* full: capacity counts live rows and unexpired claims */
	struct cluster_host_report tiny1 = report("d", 1, tiny, "{}");
	uint64_t id_ = 0;
	char kd[CLUSTER_KEY_HEX + 1];
	CHECK(cluster_host_register(cs, &tiny1, 10, &id_, kd, &age) == 0);
	rb.capacity = rc.capacity = ra.capacity = 1; /* everyone else full */
	CHECK(cluster_host_heartbeat(cs, &ra, ia, &was_lost) == 0 && cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0 &&
	      cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0);
	CHECK(cluster_place(cs, "tiny", NULL, NULL, 30, NULL, host, url, tok, from) == 0 && !strcmp(host, "d"));
	CHECK(cluster_place(cs, "tiny", NULL, NULL, 30, NULL, host, url, tok, from) == -ENOSPC);
	CHECK(cluster_host_stop(cs, "d", id_) == 0);
	ra.capacity = 400, rb.capacity = 200, rc.capacity = 200;
	CHECK(cluster_host_heartbeat(cs, &ra, ia, &was_lost) == 0 && cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0 &&
	      cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0);
	/* a template only a holds, a full: placed on a host with room, the template pulled there from a first;
	 * a template held nowhere is still -ENOENT; a holder with room is placed as before, with no pull */
	CHECK(cluster_place(cs, "big", NULL, NULL, 30, NULL, host, url, tok, from) == 0 && !strcmp(host, "a") && !from[0]);
	CHECK(cluster_claim_drop(cs, tok) == 0);
	ra.capacity = 1;
	CHECK(cluster_host_heartbeat(cs, &ra, ia, &was_lost) == 0);
	for (int i = 0; i < 4; i++) {
		CHECK(cluster_place(cs, "big", NULL, NULL, 30, NULL, host, url, tok, from) == 0 && strcmp(host, "a") &&
		      !strcmp(from, "a"));
		CHECK(cluster_claim_drop(cs, tok) == 0);
	}
	CHECK(cluster_place(cs, "big", NULL, NULL, 30, "b", host, url, tok, from) == 0 && !strcmp(host, "c") &&
	      !strcmp(from, "a"));
	CHECK(cluster_claim_drop(cs, tok) == 0);
	CHECK(cluster_place(cs, "nowhere", NULL, NULL, 30, NULL, host, url, tok, from) == -ENOENT && !from[0]);
	ra.capacity = 400;
	CHECK(cluster_host_heartbeat(cs, &ra, ia, &was_lost) == 0);

	/* a lost host: c stops heartbeating; the sweep marks it and its running sandboxes */
	struct count before = { 0 };
	CHECK(cluster_sandbox_list(cs, "c", false, count_row, &before) == 0 && before.running > 0);
	sleep(3);
	CHECK(cluster_host_heartbeat(cs, &ra, ia, &was_lost) == 0 && cluster_host_heartbeat(cs, &rb, ib, &was_lost) == 0);
	CHECK(cluster_sweep(cs, 2, on_lost, NULL) >= 1 && lost_hosts == 1);
	CHECK(cluster_sweep(cs, 2, on_lost, NULL) == 0); /* once */
	struct count after = { 0 };
	CHECK(cluster_sandbox_list(cs, "c", false, count_row, &after) == 0);
	CHECK(after.lost == before.running && after.running == 0);
	/* creates avoid it */
	for (int i = 0; i < 5; i++)
		CHECK(cluster_place(cs, "tiny", NULL, NULL, 2, NULL, host, url, tok, from) == 0 && strcmp(host, "c"));
	/* give up: only a lost sandbox; a running one is refused */
	struct cluster_sandbox sb;
	CHECK(cluster_sandbox_get(cs, "sb-seq0000", &sb) == 0);
	CHECK(cluster_sandbox_get(cs, "sb-none", &sb) == -ENOENT);
	char lost_id[CLUSTER_ID_MAX] = "", running_id[CLUSTER_ID_MAX] = "";
	for (int i = 0; i < 40 && (!*lost_id || !*running_id); i++) {
		char id[CLUSTER_ID_MAX];
		snprintf(id, sizeof(id), "sb-seq%04d", i);
		if (cluster_sandbox_get(cs, id, &sb) == 0) {
			if (sb.state == CLUSTER_SANDBOX_LOST && !*lost_id)
				snprintf(lost_id, sizeof(lost_id), "%s", id);
			if (sb.state == CLUSTER_SANDBOX_RUNNING && !*running_id)
				snprintf(running_id, sizeof(running_id), "%s", id);
		}
	}
	CHECK(*lost_id && *running_id);
	CHECK(cluster_sandbox_give_up(cs, running_id) == -ENOENT);
	CHECK(cluster_sandbox_give_up(cs, lost_id) == 0);
	CHECK(cluster_sandbox_get(cs, lost_id, &sb) == 0 && sb.state == CLUSTER_SANDBOX_DESTROYED && !sb.host_up);
	/* c comes back: its heartbeat says it was lost; its reconciliation sets rows back */
	CHECK(cluster_host_heartbeat(cs, &rc, ic, &was_lost) == 0 && was_lost);
	CHECK(cluster_sandbox_set(cs, running_id, "wrong-host", CLUSTER_SANDBOX_LOST) == 0); /* no row of that host */
	CHECK(cluster_sandbox_get(cs, running_id, &sb) == 0 && sb.state == CLUSTER_SANDBOX_RUNNING);

	/* checkpoints: published per host, found by id, withdrawn when the host no longer holds them */
	const char *cps_b[] = { "cp-one", "cp-two", NULL }, *cps_b_sb[] = { "sb-x", "sb-y", NULL };
	const char *cps_b2[] = { "cp-two", NULL }, *cps_b2_sb[] = { "sb-y", NULL };
	CHECK(cluster_checkpoints_publish(cs, "b", cps_b, cps_b_sb) == 0);
	CHECK(cluster_checkpoint_get(cs, "cp-one", &sb) == 0 && !strcmp(sb.host, "b") && sb.host_up &&
	      !strcmp(sb.url, "https://127.0.0.1:1"));
	CHECK(cluster_checkpoints_publish(cs, "b", cps_b2, cps_b2_sb) == 0);
	CHECK(cluster_checkpoint_get(cs, "cp-one", &sb) == -ENOENT);
	CHECK(cluster_checkpoint_get(cs, "cp-two", &sb) == 0 && !strcmp(sb.host, "b"));
	CHECK(cluster_schema_version() == 3);

	/* API keys: published per host, withdrawn when the host no longer has them */
	const char *keys_a[] = { "aa00", "aa01", NULL }, *keys_a2[] = { "aa01", NULL }, *keys_b[] = { "aa00", NULL };
	CHECK(cluster_apikeys_publish(cs, "a", keys_a) == 0);
	CHECK(cluster_apikeys_publish(cs, "b", keys_b) == 0);
	CHECK(cluster_apikey_check(cs, "aa00") == 0 && cluster_apikey_check(cs, "aa01") == 0);
	CHECK(cluster_apikey_check(cs, "ffff") == -EACCES);
	CHECK(cluster_apikeys_publish(cs, "a", keys_a2) == 0);
	CHECK(cluster_apikey_check(cs, "aa00") == 0); /* b still has it */
	CHECK(cluster_apikeys_publish(cs, "b", (const char *const[]){ NULL }) == 0);
	CHECK(cluster_apikey_check(cs, "aa00") == -EACCES);

	/* another process's store sees the rows this one wrote, and its writes are seen here */
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		struct cluster_store *other = NULL;
		struct cluster_sandbox o;
		int ok = cluster_open(conninfo, &other, err, sizeof(err)) == 0 && cluster_sandbox_get(other, running_id, &o) == 0 &&
			 !strcmp(o.id, running_id) && cluster_apikeys_publish(other, "c", (const char *const[]){ "cc00", NULL }) == 0;
		cluster_close(other);
		_exit(ok ? 0 : 1);
	}
	int status = -1;
	CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(cluster_apikey_check(cs, "cc00") == 0);

	/* upgrades: a store of version 1 is migrated to 3 by the next host that opens it (the table and the
	 * column back, the rows of version 1 kept); one of a newer version than this build is used as it is */
	cluster_close(cs);
	CHECK(raw("DROP TABLE space_checkpoints", false) == 0 && raw("ALTER TABLE space_hosts DROP COLUMN secrets", false) == 0 &&
	      raw("UPDATE space_cluster_schema SET version = 1", false) == 0);
	CHECK(raw("SELECT version FROM space_cluster_schema", true) == 1);
	CHECK(cluster_open(conninfo, &cs2, err, sizeof(err)) == 0);
	CHECK(cs2 && cluster_checkpoint_get(cs2, "cp-two", &sb) == -ENOENT);
	CHECK(cs2 && cluster_sandbox_get(cs2, running_id, &sb) == 0);
	CHECK(cs2 && cluster_checkpoints_publish(cs2, "b", cps_b, cps_b_sb) == 0 && cluster_checkpoint_get(cs2, "cp-one", &sb) == 0);
	rb.secrets = sec_b;
	CHECK(cs2 && cluster_host_heartbeat(cs2, &rb, ib, &was_lost) == 0);
	CHECK(cs2 && cluster_place(cs2, "tiny", NULL, sec_b, 30, NULL, host, url, tok, from) == 0 && !strcmp(host, "b"));
	cluster_close(cs2);
	CHECK(raw("SELECT version FROM space_cluster_schema", true) == 3);
	CHECK(raw("UPDATE space_cluster_schema SET version = 99", false) == 0);
	CHECK(cluster_open(conninfo, &cs2, err, sizeof(err)) == 0);
	CHECK(cs2 && cluster_sandbox_get(cs2, running_id, &sb) == 0);
	cluster_close(cs2);
	return check_summary(summary);
}
