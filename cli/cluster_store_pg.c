/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster store in PostgreSQL (cluster_store_int.h): schema, migrations, and every statement the hosts
 * run. Hosts on several machines share it; PostgreSQL's replication and failover are the distributed engine. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_store_int.h"
#include "util/cleanup.h"

#define CLUSTER_POOL_MAX 8            /* connections per process */
#define CLUSTER_MIGRATE_LOCK 0x73706163 /* pg_advisory_xact_lock key of the migrations ("spac") */
#define STR_(x) #x
#define STR(x) STR_(x)

#define seterr cluster_seterr

struct pg_store {
	struct cluster_store base;
	char *conninfo;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	PGconn *idle[CLUSTER_POOL_MAX];
	unsigned n_idle, n_open;
};

/* Migrations: entry i takes the schema from version i to i + 1 (every statement in one transaction). Hosts
 * of two adjacent versions run side by side during an upgrade: a migration only adds. */
static const char *const migrations[] = {
	"CREATE TABLE space_hosts ("
	"  name text PRIMARY KEY,"
	"  url text NOT NULL,"
	"  incarnation bigint NOT NULL DEFAULT 1,"
	"  state text NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'lost')),"
	"  serving boolean NOT NULL DEFAULT true,"
	"  heartbeat timestamptz NOT NULL DEFAULT now(),"
	"  capacity integer NOT NULL CHECK (capacity >= 0),"
	"  cpus integer NOT NULL DEFAULT 0,"
	"  mem_total bigint NOT NULL DEFAULT 0,"
	"  mem_available bigint NOT NULL DEFAULT 0,"
	"  pool_free bigint NOT NULL DEFAULT 0,"
	"  isolations text[] NOT NULL DEFAULT '{}',"
	"  templates text[] NOT NULL DEFAULT '{}',"
	"  pool_stock jsonb NOT NULL DEFAULT '{}',"
	"  key text NOT NULL,"
	"  version text NOT NULL DEFAULT '');"
	"CREATE TABLE space_sandboxes ("
	"  id text PRIMARY KEY,"
	"  host text NOT NULL REFERENCES space_hosts(name),"
	"  state text NOT NULL CHECK (state IN ('running', 'lost', 'destroyed')),"
	"  template text NOT NULL DEFAULT '',"
	"  created timestamptz NOT NULL DEFAULT now(),"
	"  changed timestamptz NOT NULL DEFAULT now());"
	"CREATE INDEX space_sandboxes_host ON space_sandboxes (host, state);"
	"CREATE TABLE space_placements ("
	"  token text PRIMARY KEY,"
	"  host text NOT NULL REFERENCES space_hosts(name),"
	"  expires timestamptz NOT NULL);"
	"CREATE TABLE space_api_keys ("
	"  hash text NOT NULL,"
	"  host text NOT NULL,"
	"  PRIMARY KEY (hash, host));",
	/* 1 -> 2: which host holds which checkpoint (calls by checkpoint id reach it). */
	"CREATE TABLE space_checkpoints ("
	"  id text PRIMARY KEY,"
	"  host text NOT NULL REFERENCES space_hosts(name),"
	"  sandbox text NOT NULL DEFAULT '');"
	"CREATE INDEX space_checkpoints_host ON space_checkpoints (host);",
	/* 2 -> 3: the names of each host's registered secrets (placement of creates that name them) */
	"ALTER TABLE space_hosts ADD COLUMN secrets text[] NOT NULL DEFAULT '{}';",
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == CLUSTER_SCHEMA_VERSION, "one migration per version");

/* --- connections ----------------------------------------------------------------------------------------- */

static PGconn *conn_new(const char *conninfo)
{
	/* Ours first: what the conninfo says overrides them (expand_dbname). */
	/* tcp_user_timeout: a statement in flight when the network goes silent fails too, not after TCP's retries. */
	const char *const keys[] = { "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
				     "keepalives_count", "tcp_user_timeout", "options", "application_name", "dbname", NULL };
	const char *const vals[] = { "3", "1", "5", "2", "3", "3000", "-c statement_timeout=5000", "space-serve", conninfo,
				     NULL };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	if (!c) {
		seterr(-ENOMEM, "out of memory");
		return NULL;
	}
	if (PQstatus(c) != CONNECTION_OK) {
		seterr(-EHOSTUNREACH, "cluster store unreachable: %s", PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	return c;
}

static void quiet_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

static PGconn *take(struct cluster_store *base)
{
	struct pg_store *cs = (struct pg_store *)base;
	pthread_mutex_lock(&cs->lock);
	for (;;) {
		if (cs->n_idle) {
			PGconn *c = cs->idle[--cs->n_idle];
			/* One the server closed meanwhile (a restart, a failover) is dropped, not used once more. */
			if (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK) {
				PQfinish(c);
				cs->n_open--;
				continue;
			}
			pthread_mutex_unlock(&cs->lock);
			return c;
		}
		if (cs->n_open < CLUSTER_POOL_MAX)
			break;
		pthread_cond_wait(&cs->cond, &cs->lock);
	}
	cs->n_open++;
	pthread_mutex_unlock(&cs->lock);
	PGconn *c = conn_new(cs->conninfo);
	if (c) {
		/* Notices (a CREATE ... IF NOT EXISTS) are not ours to print. */
		PQsetNoticeProcessor(c, quiet_notice, NULL);
		return c;
	}
	pthread_mutex_lock(&cs->lock);
	cs->n_open--;
	pthread_cond_signal(&cs->cond);
	pthread_mutex_unlock(&cs->lock);
	return NULL;
}

/* Back to the pool; a broken connection is dropped (the next call makes a new one). */
static void give(struct cluster_store *base, PGconn *c)
{
	struct pg_store *cs = (struct pg_store *)base;
	pthread_mutex_lock(&cs->lock);
	if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) == PQTRANS_IDLE) {
		cs->idle[cs->n_idle++] = c;
	} else {
		PQfinish(c);
		cs->n_open--;
	}
	pthread_cond_signal(&cs->cond);
	pthread_mutex_unlock(&cs->lock);
}

/* Runs sql with text parameters; NULL (message set) unless it returned want. */
static PGresult *run(PGconn *c, ExecStatusType want, const char *sql, int n, const char *const *params)
{
	PGresult *res = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	if (res && PQresultStatus(res) == want)
		return res;
	if (PQstatus(c) != CONNECTION_OK)
		seterr(-EHOSTUNREACH, "cluster store unreachable: %s", PQerrorMessage(c));
	else
		seterr(-EIO, "cluster store: %s", res ? PQresultErrorMessage(res) : PQerrorMessage(c));
	PQclear(res);
	return NULL;
}

static int err_of(PGconn *c) { return PQstatus(c) != CONNECTION_OK ? -EHOSTUNREACH : -EIO; }

/* One statement that returns nothing the caller needs: 0 or -errno; *ret_rows: rows it touched. */
static int exec1(struct cluster_store *cs, const char *sql, int n, const char *const *params, long *ret_rows)
{
	PGconn *c = take(cs);
	if (!c)
		return -EHOSTUNREACH;
	PGresult *res = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	int e = 0;
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		e = err_of(c);
		seterr(e, "cluster store%s: %s", e == -EHOSTUNREACH ? " unreachable" : "",
		       res ? PQresultErrorMessage(res) : PQerrorMessage(c));
	} else if (ret_rows) {
		const char *t = PQcmdTuples(res);
		*ret_rows = t && *t ? atol(t) : PQntuples(res);
	}
	PQclear(res);
	give(cs, c);
	return e;
}

/* A query: fn(res, row, arg) for each row it returns, until fn returns non-zero (which is returned). Returns
 * 0 when every row was seen, -errno when the query failed; *ret_rows (may be NULL): how many rows. */
static int query(struct cluster_store *cs, const char *sql, int n, const char *const *params,
		 int (*fn)(PGresult *res, int row, void *arg), void *arg, int *ret_rows)
{
	PGconn *c = take(cs);
	if (!c)
		return -EHOSTUNREACH;
	PGresult *res = run(c, PGRES_TUPLES_OK, sql, n, params);
	int e = res ? 0 : err_of(c);
	if (ret_rows)
		*ret_rows = res ? PQntuples(res) : 0;
	for (int i = 0; res && i < PQntuples(res) && e == 0; i++)
		e = fn(res, i, arg);
	PQclear(res);
	give(cs, c);
	return e;
}

static int migrate(PGconn *c)
{
	char lock[64];
	snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%d)", CLUSTER_MIGRATE_LOCK);
	PGresult *res = run(c, PGRES_COMMAND_OK, "BEGIN", 0, NULL);
	if (!res)
		return err_of(c);
	PQclear(res);
	int e = 0;
	if (!(res = run(c, PGRES_TUPLES_OK, lock, 0, NULL)))
		goto fail;
	PQclear(res);
	if (!(res = run(c, PGRES_COMMAND_OK, "CREATE TABLE IF NOT EXISTS space_cluster_schema (version integer NOT NULL)",
			0, NULL)))
		goto fail;
	PQclear(res);
	if (!(res = run(c, PGRES_TUPLES_OK, "SELECT coalesce(max(version), 0) FROM space_cluster_schema", 0, NULL)))
		goto fail;
	int v = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	/* A newer schema than ours only added: this build works on it, as during a rolling upgrade. */
	for (; v < CLUSTER_SCHEMA_VERSION; v++) {
		/* a simple query: the migration may hold several statements */
		res = PQexec(c, migrations[v]);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			seterr(err_of(c), "cluster store: migrate the schema to version %d: %s", v + 1,
			       res ? PQresultErrorMessage(res) : PQerrorMessage(c));
			PQclear(res);
			goto fail;
		}
		PQclear(res);
		char set[96];
		snprintf(set, sizeof(set), "DELETE FROM space_cluster_schema; INSERT INTO space_cluster_schema VALUES (%d)", v + 1);
		res = PQexec(c, set);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			seterr(err_of(c), "cluster store: record schema version %d: %s", v + 1, PQerrorMessage(c));
			PQclear(res);
			goto fail;
		}
		PQclear(res);
	}
	if (!(res = run(c, PGRES_COMMAND_OK, "COMMIT", 0, NULL)))
		return err_of(c);
	PQclear(res);
	return 0;
fail:
	e = err_of(c);
	PQclear(PQexec(c, "ROLLBACK"));
	return e;
}

static void pg_close(struct cluster_store *base);
static const struct cluster_store_ops pg_ops;

int cluster_pg_open(const char *conninfo, struct cluster_store **ret)
{
	struct pg_store *cs = calloc(1, sizeof(*cs));
	if (!cs || !(cs->conninfo = strdup(conninfo))) {
		free(cs);
		return seterr(-ENOMEM, "out of memory");
	}
	cs->base.ops = &pg_ops;
	pthread_mutex_init(&cs->lock, NULL);
	pthread_cond_init(&cs->cond, NULL);
	PGconn *c = take(&cs->base);
	int e = c ? migrate(c) : -EHOSTUNREACH;
	if (c)
		give(&cs->base, c);
	if (e < 0) {
		pg_close(&cs->base);
		return e;
	}
	*ret = &cs->base;
	return 0;
}

static void pg_close(struct cluster_store *base)
{
	struct pg_store *cs = (struct pg_store *)base;
	for (unsigned i = 0; i < cs->n_idle; i++)
		PQfinish(cs->idle[i]);
	pthread_mutex_destroy(&cs->lock);
	pthread_cond_destroy(&cs->cond);
	free(cs->conninfo);
	free(cs);
}

/* --- hosts ------------------------------------------------------------------------------------------------ */

/* A text[] literal of NULL-terminated strings ({"a","b"}); NULL when out of memory. Names are checked
 * by the caller's source (template names), but quote and escape anyway. */
static char *array_literal(const char *const *v)
{
	size_t len = 3;
	for (size_t i = 0; v && v[i]; i++)
		len += 2 * strlen(v[i]) + 3;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	*p++ = '{';
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			*p++ = ',';
		*p++ = '"';
		for (const char *q = v[i]; *q; q++) {
			if (*q == '"' || *q == '\\')
				*p++ = '\\';
			*p++ = *q;
		}
		*p++ = '"';
	}
	*p++ = '}';
	*p = '\0';
	return s;
}

/* The report's columns as parameters $2.. ($1 is the name): url, capacity, cpus, mem_total, mem_available,
 * pool_free, isolations, templates, pool_stock, version, secrets. */
#define REPORT_PARAMS 12
struct report_params {
	char cap[16], cpus[16], mt[24], ma[24], pf[24];
	char *isol, *tpl, *sec;
	const char *p[REPORT_PARAMS];
};

static void report_params_free(struct report_params *rp)
{
	free(rp->isol);
	free(rp->tpl);
	free(rp->sec);
}

static int report_params(const struct cluster_host_report *h, struct report_params *rp)
{
	snprintf(rp->cap, sizeof(rp->cap), "%u", h->capacity);
	snprintf(rp->cpus, sizeof(rp->cpus), "%u", h->cpus);
	snprintf(rp->mt, sizeof(rp->mt), "%llu", (unsigned long long)h->mem_total);
	snprintf(rp->ma, sizeof(rp->ma), "%llu", (unsigned long long)h->mem_available);
	snprintf(rp->pf, sizeof(rp->pf), "%llu", (unsigned long long)h->pool_free);
	const char *iso[4];
	char buf[64];
	cluster_isolations_split(h->isolations, iso, buf, sizeof(buf));
	rp->isol = array_literal(iso);
	rp->tpl = array_literal(h->templates);
	rp->sec = array_literal(h->secrets);
	if (!rp->isol || !rp->tpl || !rp->sec) {
		report_params_free(rp);
		return seterr(-ENOMEM, "out of memory");
	}
	const char *p[REPORT_PARAMS] = { h->name, h->url, rp->cap, rp->cpus, rp->mt, rp->ma, rp->pf, rp->isol, rp->tpl,
					 h->pool_stock_json ? h->pool_stock_json : "{}", h->version ? h->version : "",
					 rp->sec };
	memcpy(rp->p, p, sizeof(p));
	return 0;
}

/* Runs sql (returning rows) with the report's parameters and extra ones after them. On success the
 * connection stays taken (*ret_c) with the result in *ret_res; on failure -errno, message set. */
static int report_run(struct cluster_store *cs, const struct cluster_host_report *h, const char *const *extra,
		      int n_extra, const char *sql, PGconn **ret_c, PGresult **ret_res)
{
	struct report_params rp;
	int e = report_params(h, &rp);
	if (e < 0)
		return e;
	const char *p[REPORT_PARAMS + 4];
	memcpy(p, rp.p, sizeof(rp.p));
	memcpy(p + REPORT_PARAMS, extra, (size_t)n_extra * sizeof(*extra));
	PGconn *c = take(cs);
	if (!c) {
		report_params_free(&rp);
		return -EHOSTUNREACH;
	}
	PGresult *res = run(c, PGRES_TUPLES_OK, sql, REPORT_PARAMS + n_extra, p);
	report_params_free(&rp);
	if (!res) {
		e = err_of(c);
		give(cs, c);
		return e;
	}
	*ret_c = c;
	*ret_res = res;
	return 0;
}

static int pg_host_register(struct cluster_store *cs, const struct cluster_host_report *h, unsigned stale_s,
			    const char *key, uint64_t *ret_incarnation, unsigned *ret_age_s)
{
	int e;
	char stale[16];
	snprintf(stale, sizeof(stale), "%u", stale_s);
	const char *extra[2] = { key, stale };
	/* The name is taken over unless another server still serves it (heartbeat younger than stale_s). */
	static const char sql[] =
		"INSERT INTO space_hosts AS h (name, url, capacity, cpus, mem_total, mem_available, pool_free, isolations,"
		"  templates, pool_stock, version, secrets, key)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13)"
		" ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, capacity = EXCLUDED.capacity, cpus = EXCLUDED.cpus,"
		"  mem_total = EXCLUDED.mem_total, mem_available = EXCLUDED.mem_available, pool_free = EXCLUDED.pool_free,"
		"  isolations = EXCLUDED.isolations, templates = EXCLUDED.templates, pool_stock = EXCLUDED.pool_stock,"
		"  version = EXCLUDED.version, secrets = EXCLUDED.secrets, key = EXCLUDED.key, incarnation = h.incarnation + 1,"
		"  serving = true, heartbeat = now(), state = 'up'"
		" WHERE NOT h.serving OR h.heartbeat < now() - make_interval(secs => $14::int)"
		" RETURNING incarnation";
	PGconn *c;
	PGresult *res;
	if ((e = report_run(cs, h, extra, 2, sql, &c, &res)) < 0)
		return e;
	if (PQntuples(res) == 1) {
		*ret_incarnation = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		give(cs, c);
		return 0;
	}
	PQclear(res);
	const char *p1[1] = { h->name };
	res = run(c, PGRES_TUPLES_OK, "SELECT extract(epoch FROM now() - heartbeat)::int FROM space_hosts WHERE name = $1",
		  1, p1);
	*ret_age_s = res && PQntuples(res) == 1 ? (unsigned)atoi(PQgetvalue(res, 0, 0)) : 0;
	PQclear(res);
	give(cs, c);
	return -EBUSY;
}

static int pg_host_heartbeat(struct cluster_store *cs, const struct cluster_host_report *h, uint64_t incarnation,
			     bool *ret_was_lost)
{
	char inc[24];
	snprintf(inc, sizeof(inc), "%llu", (unsigned long long)incarnation);
	const char *extra[1] = { inc };
	static const char sql[] =
		"UPDATE space_hosts AS h SET url = $2, capacity = $3, cpus = $4, mem_total = $5, mem_available = $6,"
		"  pool_free = $7, isolations = $8, templates = $9, pool_stock = $10::jsonb, version = $11, secrets = $12,"
		"  heartbeat = now(), state = 'up', serving = true"
		" FROM (SELECT name, state FROM space_hosts WHERE name = $1 AND incarnation = $13 FOR UPDATE) o"
		" WHERE h.name = o.name RETURNING o.state";
	PGconn *c;
	PGresult *res;
	int e = report_run(cs, h, extra, 1, sql, &c, &res);
	if (e < 0)
		return e;
	if (PQntuples(res) != 1)
		e = -ESTALE;
	else
		*ret_was_lost = !strcmp(PQgetvalue(res, 0, 0), "lost");
	PQclear(res);
	give(cs, c);
	return e;
}

static int pg_host_stop(struct cluster_store *cs, const char *name, uint64_t incarnation)
{
	char inc[24];
	snprintf(inc, sizeof(inc), "%llu", (unsigned long long)incarnation);
	const char *p[2] = { name, inc };
	return exec1(cs, "UPDATE space_hosts SET serving = false WHERE name = $1 AND incarnation = $2", 2, p, NULL);
}

static int pg_sweep(struct cluster_store *cs, unsigned lost_after_s,
		    void (*fn)(const char *host, unsigned sandboxes, void *arg), void *arg)
{
	char secs[16];
	snprintf(secs, sizeof(secs), "%u", lost_after_s);
	const char *p[1] = { secs };
	static const char sql[] =
		"WITH lost AS (UPDATE space_hosts SET state = 'lost'"
		"   WHERE state = 'up' AND heartbeat < now() - make_interval(secs => $1::int) RETURNING name),"
		" sb AS (UPDATE space_sandboxes SET state = 'lost', changed = now()"
		"   WHERE state = 'running' AND host IN (SELECT name FROM lost) RETURNING host)"
		" SELECT lost.name, (SELECT count(*) FROM sb WHERE sb.host = lost.name) FROM lost";
	PGconn *c = take(cs);
	if (!c)
		return -EHOSTUNREACH;
	PGresult *res = run(c, PGRES_TUPLES_OK, sql, 1, p);
	if (!res) {
		int e = err_of(c);
		give(cs, c);
		return e;
	}
	int n = PQntuples(res);
	for (int i = 0; i < n && fn; i++)
		fn(PQgetvalue(res, i, 0), (unsigned)atoi(PQgetvalue(res, i, 1)), arg);
	PQclear(res);
	/* Housekeeping: expired claims, and destroyed rows past their time, but only of hosts that are up (and
	 * so have reconciled): a lost host that comes back must still find the sandboxes given up on. */
	PQclear(PQexec(c, "DELETE FROM space_placements WHERE expires < now();"
			  "DELETE FROM space_sandboxes WHERE state = 'destroyed' AND changed < now() - interval '"
			  STR(CLUSTER_DESTROYED_KEEP_S) " seconds' AND host IN (SELECT name FROM space_hosts WHERE state = 'up')"));
	give(cs, c);
	return n;
}

static int key_row(PGresult *res, int row, void *arg)
{
	if (strlen(PQgetvalue(res, row, 0)) != CLUSTER_KEY_HEX)
		return -EBADMSG;
	memcpy(arg, PQgetvalue(res, row, 0), CLUSTER_KEY_HEX + 1);
	return 0;
}

static int pg_host_key(struct cluster_store *cs, const char *name, char ret_key[CLUSTER_KEY_HEX + 1])
{
	const char *p[1] = { name };
	int rows = 0;
	int e = query(cs, "SELECT key FROM space_hosts WHERE name = $1", 1, p, key_row, ret_key, &rows);
	return e == 0 && rows != 1 ? -ENOENT : e;
}

struct host_rows {
	int (*fn)(const struct cluster_host_row *h, void *arg);
	void *arg;
};

static int host_row(PGresult *res, int i, void *arg)
{
	struct host_rows *hr = arg;
	struct cluster_host_row h = { 0 };
	snprintf(h.name, sizeof(h.name), "%s", PQgetvalue(res, i, 0));
	snprintf(h.url, sizeof(h.url), "%s", PQgetvalue(res, i, 1));
	h.up = !strcmp(PQgetvalue(res, i, 2), "up");
	h.serving = !strcmp(PQgetvalue(res, i, 3), "t");
	h.capacity = (uint32_t)strtoul(PQgetvalue(res, i, 4), NULL, 10);
	h.live = (uint32_t)strtoul(PQgetvalue(res, i, 5), NULL, 10);
	h.heartbeat_age_s = strtod(PQgetvalue(res, i, 6), NULL);
	h.incarnation = strtoull(PQgetvalue(res, i, 7), NULL, 10);
	snprintf(h.version, sizeof(h.version), "%s", PQgetvalue(res, i, 8));
	return hr->fn(&h, hr->arg);
}

static int pg_host_list(struct cluster_store *cs, int (*fn)(const struct cluster_host_row *h, void *arg), void *arg)
{
	static const char sql[] =
		"SELECT h.name, h.url, h.state, h.serving, h.capacity,"
		"  (SELECT count(*) FROM space_sandboxes s WHERE s.host = h.name AND s.state = 'running'),"
		"  extract(epoch FROM now() - h.heartbeat)::float8, h.incarnation, h.version"
		" FROM space_hosts h ORDER BY h.name";
	struct host_rows hr = { fn, arg };
	return query(cs, sql, 0, NULL, host_row, &hr, NULL);
}

/* --- placement ------------------------------------------------------------------------------------------- */

/* $1 template, $2 isolation ('' any), $3 fresh seconds, $4 claim token, $5 a host to avoid ('' none), $6
 * the secrets it needs (text[]); the first %s: "" (the hosts holding the template) or "NOT" (those that do
 * not: a pull), the second SKIP LOCKED or nothing. */
#define PLACE_SQL                                                                                                  \
	"WITH live AS (SELECT host, count(*) AS n FROM space_sandboxes WHERE state = 'running' GROUP BY host),"    \
	" pend AS (SELECT host, count(*) AS n FROM space_placements WHERE expires > now() GROUP BY host),"        \
	" pick AS (SELECT h.name, h.url FROM space_hosts h"                                                         \
	"   LEFT JOIN live ON live.host = h.name LEFT JOIN pend ON pend.host = h.name"                              \
	"   WHERE h.state = 'up' AND h.serving AND h.heartbeat > now() - make_interval(secs => $3::int)"            \
	"     AND %s ($1 = ANY (h.templates)) AND ($2 = '' OR $2 = ANY (h.isolations)) AND h.name <> $5"          \
	"     AND h.secrets @> $6::text[]"                                                                          \
	"     AND coalesce(live.n, 0) + coalesce(pend.n, 0) < h.capacity"                                           \
	"   ORDER BY coalesce((h.pool_stock ->> $1)::int, 0) > 0 DESC,"                                             \
	"     (coalesce(live.n, 0) + coalesce(pend.n, 0))::float8 / h.capacity, random()"                           \
	"   LIMIT 1 FOR UPDATE OF h %s)"                                                                           \
	" INSERT INTO space_placements (token, host, expires)"                                                      \
	"   SELECT $4, name, now() + interval '" STR(CLUSTER_CLAIM_S) " seconds' FROM pick RETURNING host,"          \
	"   (SELECT url FROM pick)"

static int pg_place_counts(struct cluster_store *cs, const char *template, const char *isolation,
			   const char *const *secrets, unsigned fresh_s, long *ret_up, long *ret_holding,
			   long *ret_with_secrets)
{
	char fresh[16];
	snprintf(fresh, sizeof(fresh), "%u", fresh_s);
	_cleanup_free_ char *sec = array_literal(secrets);
	if (!sec)
		return seterr(-ENOMEM, "out of memory");
	const char *p[4] = { template, isolation, fresh, sec };
	static const char sql[] =
		"SELECT count(*) FILTER (WHERE up), count(*) FILTER (WHERE up AND held),"
		"  count(*) FILTER (WHERE up AND held AND secrets @> $4::text[])"
		" FROM (SELECT state = 'up' AND serving AND heartbeat > now() - make_interval(secs => $3::int) AS up,"
		"   $1 = ANY (templates) AND ($2 = '' OR $2 = ANY (isolations)) AS held, secrets FROM space_hosts) h";
	PGconn *c = take(cs);
	if (!c)
		return -EHOSTUNREACH;
	PGresult *res = run(c, PGRES_TUPLES_OK, sql, 4, p);
	int e = res ? 0 : err_of(c);
	if (res) {
		*ret_up = atol(PQgetvalue(res, 0, 0));
		*ret_holding = atol(PQgetvalue(res, 0, 1));
		*ret_with_secrets = atol(PQgetvalue(res, 0, 2));
	}
	PQclear(res);
	give(cs, c);
	return e;
}

static int pg_place(struct cluster_store *cs, const char *template, const char *isolation, const char *const *secrets,
		    unsigned fresh_s, const char *avoid, bool pull, const char *token, char ret_host[CLUSTER_NAME_MAX],
		    char ret_url[CLUSTER_URL_MAX])
{
	int e;
	char fresh[16];
	snprintf(fresh, sizeof(fresh), "%u", fresh_s);
	_cleanup_free_ char *sec = array_literal(secrets);
	if (!sec)
		return seterr(-ENOMEM, "out of memory");
	const char *p[6] = { template, isolation, fresh, token, avoid, sec };
	PGconn *c = take(cs);
	if (!c)
		return -EHOSTUNREACH;
	/* Hosts another placement has locked are skipped; when that leaves none, wait for them instead. */
	char sql[2048];
	PGresult *res = NULL;
	bool failed = false;
	for (int pass = 0; pass < 2 && !res; pass++) {
		snprintf(sql, sizeof(sql), PLACE_SQL, pull ? "NOT" : "", pass == 0 ? "SKIP LOCKED" : "");
		res = run(c, PGRES_TUPLES_OK, sql, 6, p);
		if (!res) {
			failed = true;
			break;
		}
		if (PQntuples(res) != 1) {
			PQclear(res);
			res = NULL;
		}
	}
	if (res) {
		snprintf(ret_host, CLUSTER_NAME_MAX, "%s", PQgetvalue(res, 0, 0));
		snprintf(ret_url, CLUSTER_URL_MAX, "%s", PQgetvalue(res, 0, 1));
		e = 0;
	} else {
		e = failed ? err_of(c) : -EAGAIN;
	}
	PQclear(res);
	give(cs, c);
	return e;
}

static int pg_holder(struct cluster_store *cs, const char *template, unsigned fresh_s, char ret_host[CLUSTER_NAME_MAX])
{
	char fresh[16];
	snprintf(fresh, sizeof(fresh), "%u", fresh_s);
	const char *p[2] = { template, fresh };
	static const char sql[] =
		"SELECT h.name FROM space_hosts h WHERE h.state = 'up' AND h.serving"
		"   AND h.heartbeat > now() - make_interval(secs => $2::int) AND $1 = ANY (h.templates)"
		" ORDER BY ((SELECT count(*) FROM space_sandboxes s WHERE s.host = h.name AND s.state = 'running') +"
		"   (SELECT count(*) FROM space_placements p WHERE p.host = h.name AND p.expires > now()))::float8"
		"   / h.capacity, random() LIMIT 1";
	PGconn *c = take(cs);
	if (!c)
		return -EHOSTUNREACH;
	PGresult *res = run(c, PGRES_TUPLES_OK, sql, 2, p);
	int e = res ? 0 : err_of(c);
	if (res && PQntuples(res) == 1)
		snprintf(ret_host, CLUSTER_NAME_MAX, "%s", PQgetvalue(res, 0, 0));
	else if (res)
		e = -ENOENT;
	PQclear(res);
	give(cs, c);
	return e;
}

static int pg_claim_drop(struct cluster_store *cs, const char *token)
{
	const char *p[1] = { token };
	return exec1(cs, "DELETE FROM space_placements WHERE token = $1", 1, p, NULL);
}

/* --- sandboxes ------------------------------------------------------------------------------------------- */

static int pg_sandbox_add(struct cluster_store *cs, const char *id, const char *host, const char *template,
			  const char *token)
{
	const char *p[4] = { id, host, template, token };
	return exec1(cs,
		     "WITH claim AS (DELETE FROM space_placements WHERE token = $4)"
		     " INSERT INTO space_sandboxes (id, host, state, template) VALUES ($1, $2, 'running', $3)"
		     " ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, state = 'running', changed = now()",
		     4, p, NULL);
}

static void sandbox_row(PGresult *res, int i, struct cluster_sandbox *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", PQgetvalue(res, i, 0));
	snprintf(s->host, sizeof(s->host), "%s", PQgetvalue(res, i, 1));
	snprintf(s->url, sizeof(s->url), "%s", PQgetvalue(res, i, 2));
	snprintf(s->template, sizeof(s->template), "%s", PQgetvalue(res, i, 3));
	s->state = cluster_state_parse(PQgetvalue(res, i, 4));
	s->host_up = !strcmp(PQgetvalue(res, i, 5), "up");
}

#define SANDBOX_SELECT "SELECT s.id, s.host, h.url, s.template, s.state, h.state FROM space_sandboxes s" \
		       " JOIN space_hosts h ON h.name = s.host"

static int sandbox_one(PGresult *res, int i, void *arg)
{
	sandbox_row(res, i, arg);
	return 0;
}

static int pg_sandbox_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret)
{
	const char *p[1] = { id };
	int rows = 0;
	int e = query(cs, SANDBOX_SELECT " WHERE s.id = $1", 1, p, sandbox_one, ret, &rows);
	return e == 0 && rows != 1 ? -ENOENT : e;
}

struct sandbox_rows {
	int (*fn)(const struct cluster_sandbox *s, void *arg);
	void *arg;
};

static int sandbox_each(PGresult *res, int i, void *arg)
{
	struct sandbox_rows *sr = arg;
	struct cluster_sandbox s;
	sandbox_row(res, i, &s);
	return sr->fn(&s, sr->arg);
}

static int pg_sandbox_list(struct cluster_store *cs, const char *host, bool destroyed,
			   int (*fn)(const struct cluster_sandbox *s, void *arg), void *arg)
{
	const char *p[2] = { host, destroyed ? "t" : "f" };
	struct sandbox_rows sr = { fn, arg };
	return query(cs, SANDBOX_SELECT " WHERE ($1 = '' OR s.host = $1) AND ($2::boolean OR s.state <> 'destroyed')"
				       " ORDER BY s.id",
		     2, p, sandbox_each, &sr, NULL);
}

static int pg_sandbox_give_up(struct cluster_store *cs, const char *id)
{
	const char *p[1] = { id };
	long n = 0;
	int e = exec1(cs, "UPDATE space_sandboxes SET state = 'destroyed', changed = now() WHERE id = $1 AND state = 'lost'",
		      1, p, &n);
	return e == 0 && n != 1 ? -ENOENT : e;
}

static int pg_sandbox_set(struct cluster_store *cs, const char *id, const char *host, enum cluster_sandbox_state st)
{
	const char *p[3] = { id, host, cluster_sandbox_state_name(st) };
	return exec1(cs, "UPDATE space_sandboxes SET state = $3, changed = now() WHERE id = $1 AND host = $2", 3, p, NULL);
}

/* --- checkpoints ------------------------------------------------------------------------------------------ */

/* Every heartbeat publishes the whole set: rows that did not change are not written again. */
static int pg_checkpoints_publish(struct cluster_store *cs, const char *host, const char *const *ids,
				  const char *const *sandboxes)
{
	_cleanup_free_ char *ia = array_literal(ids), *sa = array_literal(sandboxes);
	if (!ia || !sa)
		return seterr(-ENOMEM, "out of memory");
	const char *p[3] = { host, ia, sa };
	return exec1(cs,
		     "WITH gone AS (DELETE FROM space_checkpoints WHERE host = $1 AND NOT id = ANY ($2::text[]))"
		     " INSERT INTO space_checkpoints (id, host, sandbox)"
		     "   SELECT i, $1, s FROM unnest($2::text[], $3::text[]) AS t(i, s)"
		     " ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, sandbox = EXCLUDED.sandbox"
		     " WHERE space_checkpoints.host <> EXCLUDED.host OR space_checkpoints.sandbox <> EXCLUDED.sandbox",
		     3, p, NULL);
}

static int checkpoint_one(PGresult *res, int i, void *arg)
{
	struct cluster_sandbox *s = arg;
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", PQgetvalue(res, i, 0));
	snprintf(s->host, sizeof(s->host), "%s", PQgetvalue(res, i, 1));
	snprintf(s->url, sizeof(s->url), "%s", PQgetvalue(res, i, 2));
	s->host_up = !strcmp(PQgetvalue(res, i, 3), "up");
	s->state = s->host_up ? CLUSTER_SANDBOX_RUNNING : CLUSTER_SANDBOX_LOST;
	return 0;
}

static int pg_checkpoint_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret)
{
	const char *p[1] = { id };
	int rows = 0;
	int e = query(cs,
		      "SELECT k.id, k.host, h.url, h.state FROM space_checkpoints k JOIN space_hosts h ON h.name = k.host"
		      " WHERE k.id = $1",
		      1, p, checkpoint_one, ret, &rows);
	return e == 0 && rows != 1 ? -ENOENT : e;
}

/* --- API keys -------------------------------------------------------------------------------------------- */

static int pg_apikeys_publish(struct cluster_store *cs, const char *host, const char *const *hex_hashes)
{
	_cleanup_free_ char *arr = array_literal(hex_hashes);
	if (!arr)
		return seterr(-ENOMEM, "out of memory");
	const char *p[2] = { host, arr };
	return exec1(cs,
		     "WITH gone AS (DELETE FROM space_api_keys WHERE host = $1 AND NOT hash = ANY ($2::text[]))"
		     " INSERT INTO space_api_keys (hash, host) SELECT unnest($2::text[]), $1 ON CONFLICT DO NOTHING",
		     2, p, NULL);
}

static int pg_apikey_check(struct cluster_store *cs, const char *hex_hash)
{
	const char *p[1] = { hex_hash };
	long n = 0;
	int e = exec1(cs, "SELECT 1 FROM space_api_keys WHERE hash = $1 LIMIT 1", 1, p, &n);
	return e < 0 ? e : n ? 0 : -EACCES;
}

static const struct cluster_store_ops pg_ops = {
	.name = "postgresql",
	.close = pg_close,
	.host_register = pg_host_register,
	.host_heartbeat = pg_host_heartbeat,
	.host_stop = pg_host_stop,
	.sweep = pg_sweep,
	.host_key = pg_host_key,
	.host_list = pg_host_list,
	.place = pg_place,
	.holder = pg_holder,
	.place_counts = pg_place_counts,
	.claim_drop = pg_claim_drop,
	.sandbox_add = pg_sandbox_add,
	.sandbox_get = pg_sandbox_get,
	.sandbox_give_up = pg_sandbox_give_up,
	.sandbox_list = pg_sandbox_list,
	.sandbox_set = pg_sandbox_set,
	.checkpoints_publish = pg_checkpoints_publish,
	.checkpoint_get = pg_checkpoint_get,
	.apikeys_publish = pg_apikeys_publish,
	.apikey_check = pg_apikey_check,
};
