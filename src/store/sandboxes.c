/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox rows and their state machine (store/sandboxes.h). */
#include "store/sandboxes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "util/cleanup.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

static const char *const status_names[STORE_STATUS_COUNT] = {
	[STORE_CREATING] = "creating", [STORE_RUNNING] = "running", [STORE_PAUSED] = "paused",
	[STORE_STOPPED] = "stopped",   [STORE_FAILED] = "failed",   [STORE_DESTROYED] = "destroyed",
};

/* The state machine (store/sandboxes.h): for each target, the statuses it may be reached from. */
static const unsigned predecessors[STORE_STATUS_COUNT] = {
	[STORE_CREATING] = 0, /* only by insert */
	[STORE_RUNNING] = STORE_ST(STORE_CREATING) | STORE_ST(STORE_RUNNING) | STORE_ST(STORE_PAUSED) |
			  STORE_ST(STORE_STOPPED),
	[STORE_PAUSED] = STORE_ST(STORE_CREATING) | STORE_ST(STORE_RUNNING) | STORE_ST(STORE_PAUSED),
	[STORE_STOPPED] = STORE_ST(STORE_RUNNING) | STORE_ST(STORE_PAUSED),
	[STORE_FAILED] = STORE_ST(STORE_CREATING) | STORE_ST(STORE_RUNNING) | STORE_ST(STORE_PAUSED) |
			 STORE_ST(STORE_STOPPED),
	[STORE_DESTROYED] = STORE_ST_ANY & ~STORE_ST(STORE_DESTROYED),
};

const char *store_status_name(enum store_status s)
{
	return (unsigned)s < STORE_STATUS_COUNT ? status_names[s] : NULL;
}

int store_status_parse(const char *name)
{
	for (int i = 0; name && i < STORE_STATUS_COUNT; i++)
		if (!strcmp(status_names[i], name))
			return i;
	return -EINVAL;
}

unsigned store_status_predecessors(enum store_status to)
{
	return (unsigned)to < STORE_STATUS_COUNT ? predecessors[to] : 0;
}

bool store_status_allowed(enum store_status from, enum store_status to)
{
	return (unsigned)from < STORE_STATUS_COUNT && (store_status_predecessors(to) & STORE_ST(from));
}

/* " AND status IN ('a', 'b')" for a set (names are ours, never a caller's text); "" for every status. */
static void status_clause(unsigned set, char *buf, size_t len)
{
	buf[0] = '\0';
	if (!set || (set & STORE_ST_ANY) == STORE_ST_ANY)
		return;
	size_t n = (size_t)snprintf(buf, len, " AND status IN (");
	const char *sep = "";
	for (int i = 0; i < STORE_STATUS_COUNT && n < len; i++)
		if (set & STORE_ST(i)) {
			n += (size_t)snprintf(buf + n, len - n, "%s'%s'", sep, status_names[i]);
			sep = ", ";
		}
	if (!*sep) /* an empty set matches nothing */
		snprintf(buf, len, " AND 0");
	else if (n < len)
		snprintf(buf + n, len - n, ")");
}

/* ---- rows ------------------------------------------------------------------------------------------ */

static const char SELECT_COLUMNS[] =
	"SELECT id, template, isolation, status, coalesce(reason, ''), coalesce(pid, 0), coalesce(pid_start, 0),"
	" pid_ns, helper_pid, helper_pid_start, helper_pid_ns, cpus, memory_mib, created_ms, updated_ms,"
	" expires_ms, host_uid, uid_base, coalesce(pool, ''), path, runtime_dir, coalesce(cgroup, ''), metadata"
	" FROM sandboxes";

static const char *text(sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	return t ? t : "";
}

/* A column that must fit 32 bits unsigned (written by us; 0 for anything else). */
static uint32_t u32(sqlite3_stmt *st, int col)
{
	int64_t v = sqlite3_column_int64(st, col);
	return v >= 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
}

static int row_read(sqlite3_stmt *st, struct store_sandbox *b)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->id, sizeof(b->id), "%s", text(st, 0));
	snprintf(b->template_name, sizeof(b->template_name), "%s", text(st, 1));
	snprintf(b->isolation, sizeof(b->isolation), "%s", text(st, 2));
	int status = store_status_parse(text(st, 3));
	b->status = status < 0 ? STORE_FAILED : (enum store_status)status;
	snprintf(b->reason, sizeof(b->reason), "%s", text(st, 4));
	b->proc.pid = (int32_t)u32(st, 5);
	b->proc.start_time = (uint64_t)sqlite3_column_int64(st, 6);
	b->proc.pidns = (uint64_t)sqlite3_column_int64(st, 7);
	b->helper.pid = (int32_t)u32(st, 8);
	b->helper.start_time = (uint64_t)sqlite3_column_int64(st, 9);
	b->helper.pidns = (uint64_t)sqlite3_column_int64(st, 10);
	if (b->proc.pid < 0)
		b->proc.pid = 0;
	if (b->helper.pid < 0)
		b->helper.pid = 0;
	b->cpus = u32(st, 11);
	b->memory_mib = u32(st, 12);
	b->created_ms = sqlite3_column_int64(st, 13);
	b->updated_ms = sqlite3_column_int64(st, 14);
	b->expires_ms = sqlite3_column_int64(st, 15);
	b->host_uid = u32(st, 16);
	b->uid_base = u32(st, 17);
	snprintf(b->pool, sizeof(b->pool), "%s", text(st, 18));
	snprintf(b->path, sizeof(b->path), "%s", text(st, 19));
	snprintf(b->runtime_dir, sizeof(b->runtime_dir), "%s", text(st, 20));
	snprintf(b->cgroup, sizeof(b->cgroup), "%s", text(st, 21));
	if (sqlite3_column_type(st, 22) != SQLITE_NULL && !(b->metadata = strdup(text(st, 22))))
		return -ENOMEM;
	return 0;
}

void store_sandbox_clear(struct store_sandbox *row)
{
	if (!row)
		return;
	free(row->metadata);
	row->metadata = NULL;
}

void store_sandbox_list_free(struct store_sandbox *list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		store_sandbox_clear(&list[i]);
	free(list);
}

int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *ret)
{
	if (!id)
		return -EINVAL;
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	char sql[sizeof(SELECT_COLUMNS) + 32];
	snprintf(sql, sizeof(sql), "%s WHERE id = ?1", SELECT_COLUMNS);
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	struct store_sandbox b;
	int r = row_read(st, &b);
	if (r < 0) {
		store_sandbox_clear(&b);
		return r;
	}
	*ret = b;
	return 0;
}

int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f, struct store_sandbox **ret,
		       size_t *ret_n)
{
	char where[512], sts[128];
	status_clause(f->statuses, sts, sizeof(sts));
	snprintf(where, sizeof(where), " WHERE 1%s AND %s%s%s%s ORDER BY created_ms, id%s", sts,
		 f->pooled ? "pool IS NOT NULL" : "pool IS NULL", f->pooled && f->pool ? " AND pool = ?1" : "",
		 f->template_name ? " AND template = ?2" : "",
		 f->expired_at > 0 ? " AND expires_ms > 0 AND expires_ms <= ?3" : "", f->max ? " LIMIT ?4" : "");
	char sql[sizeof(SELECT_COLUMNS) + sizeof(where)];
	snprintf(sql, sizeof(sql), "%s%s", SELECT_COLUMNS, where);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	if (f->pooled && f->pool)
		sqlite3_bind_text(st, 1, f->pool, -1, SQLITE_STATIC);
	if (f->template_name)
		sqlite3_bind_text(st, 2, f->template_name, -1, SQLITE_STATIC);
	if (f->expired_at > 0)
		sqlite3_bind_int64(st, 3, f->expired_at);
	if (f->max)
		sqlite3_bind_int64(st, 4, (sqlite3_int64)f->max);
	struct store_sandbox *list = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			struct store_sandbox *nl = reallocarray(list, ncap, sizeof(*list));
			if (!nl) {
				r = -ENOMEM;
				break;
			}
			list = nl;
			cap = ncap;
		}
		if ((r = row_read(st, &list[n++])) < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_errno(rc);
	if (r < 0) {
		store_sandbox_list_free(list, n);
		return r;
	}
	*ret = list;
	*ret_n = n;
	return 0;
}

int store_sandbox_count(struct store *s, unsigned statuses)
{
	char sql[256], sts[128];
	status_clause(statuses, sts, sizeof(sts));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM sandboxes WHERE 1%s", sts);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	rc = sqlite3_step(st);
	return rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : store_errno(rc);
}

int store_sandbox_status(struct store *s, const char *id, enum store_status *ret)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), "SELECT status FROM sandboxes WHERE id = ?1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	int v = store_status_parse(text(st, 0));
	*ret = v < 0 ? STORE_FAILED : (enum store_status)v;
	return 0;
}

int store_sandbox_insert(struct store *s, const struct store_sandbox *b)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s),
				    "INSERT INTO sandboxes(id, template, isolation, status, pid, pid_start, pid_ns, cpus,"
				    " memory_mib, path, runtime_dir, created_ms, updated_ms, expires_ms, uid_base,"
				    " metadata) VALUES (?1, ?2, ?3, 'creating', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11,"
				    " ?12, ?13, ?14)",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, b->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, b->template_name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, b->isolation, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, b->proc.pid);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)b->proc.start_time);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)b->proc.pidns);
	sqlite3_bind_int64(st, 7, b->cpus);
	sqlite3_bind_int64(st, 8, b->memory_mib);
	sqlite3_bind_text(st, 9, b->path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, b->runtime_dir, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 11, b->created_ms);
	sqlite3_bind_int64(st, 12, b->expires_ms);
	sqlite3_bind_int64(st, 13, b->uid_base);
	if (b->metadata)
		sqlite3_bind_text(st, 14, b->metadata, -1, SQLITE_STATIC);
	return store_errno(sqlite3_step(st));
}

/* After an UPDATE ... WHERE id = ? <condition> that changed nothing: -ENOENT or -ESTALE. */
static int why_unchanged(struct store *s, const char *id, enum store_status *ret_current)
{
	enum store_status cur;
	int r = store_sandbox_status(s, id, &cur);
	if (r < 0)
		return r;
	if (ret_current)
		*ret_current = cur;
	return -ESTALE;
}

/* Runs sql (a one-row UPDATE whose ?1 is the id, ?2 updated_ms) after bind; 0, or why nothing changed. */
static int update_one(struct store *s, const char *id, const char *sql, void (*bind)(sqlite3_stmt *, const void *),
		      const void *ud, enum store_status *ret_current)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, util_wall_ms());
	if (bind)
		bind(st, ud);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store_errno(rc);
	return sqlite3_changes(store_db(s)) == 1 ? 0 : why_unchanged(s, id, ret_current);
}

struct transition {
	enum store_status to;
	const char *reason;
	const struct store_proc *proc;
	const char *cgroup;
	uint32_t uid_base;
};

static void bind_transition(sqlite3_stmt *st, const void *ud)
{
	const struct transition *t = ud;
	sqlite3_bind_text(st, 3, status_names[t->to], -1, SQLITE_STATIC);
	if (t->reason && *t->reason)
		sqlite3_bind_text(st, 4, t->reason, -1, SQLITE_TRANSIENT);
	if (t->proc) {
		sqlite3_bind_int(st, 5, t->proc->pid);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)t->proc->start_time);
		sqlite3_bind_int64(st, 7, (sqlite3_int64)t->proc->pidns);
		if (t->cgroup)
			sqlite3_bind_text(st, 8, t->cgroup, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 9, t->uid_base);
	}
}

static int transition(struct store *s, const char *id, unsigned from, const struct transition *t,
		      enum store_status *ret_current)
{
	if (!id || (unsigned)t->to >= STORE_STATUS_COUNT)
		return -EINVAL;
	unsigned allowed = (from ? from : STORE_ST_ANY) & predecessors[t->to];
	if (!allowed) /* nothing may move there from the statuses asked for (e.g. back to creating) */
		return why_unchanged(s, id, ret_current);
	char sts[128], sql[512];
	status_clause(allowed, sts, sizeof(sts));
	snprintf(sql, sizeof(sql), "UPDATE sandboxes SET status = ?3, reason = ?4, updated_ms = ?2%s WHERE id = ?1%s",
		 t->proc ? ", pid = ?5, pid_start = ?6, pid_ns = ?7, cgroup = ?8, uid_base = ?9" : "", sts);
	return update_one(s, id, sql, bind_transition, t, ret_current);
}

int store_sandbox_transition(struct store *s, const char *id, unsigned from, enum store_status to,
			     const char *reason, enum store_status *ret_current)
{
	struct transition t = { .to = to, .reason = reason };
	return transition(s, id, from, &t, ret_current);
}

int store_sandbox_transition_proc(struct store *s, const char *id, unsigned from, enum store_status to,
				  const struct store_proc *proc, const char *cgroup, uint32_t uid_base)
{
	if (!proc)
		return -EINVAL;
	struct transition t = { .to = to, .proc = proc, .cgroup = cgroup, .uid_base = uid_base };
	return transition(s, id, from, &t, NULL);
}

/* ---- single columns -------------------------------------------------------------------------------- */

struct column_value {
	int64_t i;
	const char *t;
	const struct store_proc *p;
};

static void bind_value(sqlite3_stmt *st, const void *ud)
{
	const struct column_value *v = ud;
	if (v->p) {
		sqlite3_bind_int(st, 3, v->p->pid);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)v->p->start_time);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)v->p->pidns);
	} else if (v->t) {
		sqlite3_bind_text(st, 3, v->t, -1, SQLITE_STATIC);
	} else {
		sqlite3_bind_int64(st, 3, v->i);
	}
}

/* UPDATE of `set` (using ?3..?5) on one row whose status is in only_if (0: any). */
static int set_columns(struct store *s, const char *id, unsigned only_if, const char *set, const struct column_value *v)
{
	if (!id)
		return -EINVAL;
	char sts[128], sql[256];
	status_clause(only_if, sts, sizeof(sts));
	snprintf(sql, sizeof(sql), "UPDATE sandboxes SET %s, updated_ms = ?2 WHERE id = ?1%s", set, sts);
	return update_one(s, id, sql, bind_value, v, NULL);
}

int store_sandbox_set_expires(struct store *s, const char *id, unsigned only_if, int64_t expires_ms)
{
	return set_columns(s, id, only_if, "expires_ms = ?3", &(struct column_value){ .i = expires_ms });
}

int store_sandbox_set_host_uid(struct store *s, const char *id, uint32_t host_uid)
{
	return set_columns(s, id, 0, "host_uid = ?3", &(struct column_value){ .i = host_uid });
}

int store_sandbox_set_metadata(struct store *s, const char *id, const char *metadata)
{
	if (!metadata)
		return set_columns(s, id, 0, "metadata = NULL", &(struct column_value){ 0 });
	return set_columns(s, id, 0, "metadata = ?3", &(struct column_value){ .t = metadata });
}

int store_sandbox_set_helper(struct store *s, const char *id, const struct store_proc *helper)
{
	static const struct store_proc none;
	return set_columns(s, id, 0, "helper_pid = ?3, helper_pid_start = ?4, helper_pid_ns = ?5",
			   &(struct column_value){ .p = helper ? helper : &none });
}

int store_sandbox_set_pool(struct store *s, const char *id, const char *pool)
{
	if (!pool)
		return set_columns(s, id, 0, "pool = NULL", &(struct column_value){ 0 });
	return set_columns(s, id, 0, "pool = ?3", &(struct column_value){ .t = pool });
}

int store_sandbox_pool_take(struct store *s, const char *template_name, const char *iso, char *ret_id,
			    size_t idlen)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(store_db(s),
				    "UPDATE sandboxes SET pool = NULL, created_ms = ?1, updated_ms = ?1"
				    " WHERE id = (SELECT id FROM sandboxes WHERE pool = ?2 AND template = ?2"
				    "  AND status = 'paused' AND isolation = ?3 ORDER BY created_ms, id LIMIT 1)"
				    " RETURNING id",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_errno(rc);
	sqlite3_bind_int64(st, 1, util_wall_ms());
	sqlite3_bind_text(st, 2, template_name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, iso, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return store_errno(rc);
	snprintf(ret_id, idlen, "%s", text(st, 0));
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 1 : store_errno(rc);
}

int store_sandbox_status_peek(const char *db_path, const char *id, enum store_status *ret)
{
	if (!db_path || !id)
		return -EINVAL;
	sqlite3 *db = NULL;
	/* Read-only and without a migration: another state directory's store may be of an older or newer
	 * libspace; only its sandboxes table's id and status columns are read, which every schema has. */
	int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
	int r = store_errno(rc);
	if (r == 0) {
		sqlite3_busy_timeout(db, STORE_PEEK_BUSY_MS);
		sqlite3_stmt *st = NULL;
		rc = sqlite3_prepare_v2(db, "SELECT status FROM sandboxes WHERE id = ?1", -1, &st, NULL);
		if (rc == SQLITE_OK) {
			sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
			rc = sqlite3_step(st);
			if (rc == SQLITE_ROW) {
				int v = store_status_parse(text(st, 0));
				*ret = v < 0 ? STORE_FAILED : (enum store_status)v;
				r = 0;
			} else {
				r = rc == SQLITE_DONE ? -ENOENT : store_errno(rc);
			}
		} else {
			r = store_errno(rc);
		}
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return r;
}
