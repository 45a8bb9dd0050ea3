/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox rows (store/sandboxes.h): the state machine's compare-and-set, typed columns, the listing
 * filters; the per-sandbox lock (store/lock.h) between two processes; liveness from another pid
 * namespace (util/procstat.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/internal.h"
#include "store/checkpoints.h"
#include "store/db.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "store/templates.h"
#include "util/procstat.h"
#include "util/util.h"

#include "check.h"


static char dir[] = "/tmp/space-test-sandboxes-XXXXXX";

static struct store *open_store(void)
{
	char p[256], err[256];
	snprintf(p, sizeof(p), "%s/space.db", dir);
	struct store *s = NULL;
	if (store_open(p, true, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "store_open: %s\n", err);
		exit(1);
	}
	return s;
}

static void insert(struct store *s, const char *id, int64_t created, const char *meta)
{
	static struct store_sandbox b;
	memset(&b, 0, sizeof(b));
	snprintf(b.id, sizeof(b.id), "%s", id);
	snprintf(b.template_name, sizeof(b.template_name), "t");
	snprintf(b.isolation, sizeof(b.isolation), "jail");
	b.proc = (struct store_proc){ getpid(), util_proc_start_time(getpid()), util_pidns_self() };
	b.cpus = 2;
	b.memory_mib = 256;
	snprintf(b.path, sizeof(b.path), "/pool/sandboxes/%s", id);
	snprintf(b.runtime_dir, sizeof(b.runtime_dir), "/state/run/%s", id);
	b.created_ms = created;
	b.uid_base = 1065536;
	b.metadata = (char *)meta;
	CHECK(store_sandbox_insert(s, &b) == 0);
}

static void test_state_machine(void)
{
	/* The table in store/sandboxes.h. */
	CHECK(store_status_allowed(STORE_CREATING, STORE_RUNNING));
	CHECK(store_status_allowed(STORE_RUNNING, STORE_RUNNING));
	CHECK(store_status_allowed(STORE_PAUSED, STORE_RUNNING));
	CHECK(store_status_allowed(STORE_FAILED, STORE_DESTROYED));
	CHECK(!store_status_allowed(STORE_DESTROYED, STORE_FAILED));
	CHECK(!store_status_allowed(STORE_DESTROYED, STORE_RUNNING));
	CHECK(!store_status_allowed(STORE_FAILED, STORE_RUNNING));
	CHECK(!store_status_allowed(STORE_RUNNING, STORE_CREATING));
	CHECK(!store_status_allowed(STORE_DESTROYED, STORE_DESTROYED));
	for (int i = 0; i < STORE_STATUS_COUNT; i++)
		CHECK(store_status_parse(store_status_name(i)) == i);
	CHECK(store_status_parse("zombie") == -EINVAL);
	CHECK(store_status_name(STORE_STATUS_COUNT) == NULL);

	struct store *s = open_store();
	insert(s, "sb-sm", 10, "{\"env\":[\"A=1\"]}");
	struct store_sandbox *b = calloc(1, sizeof(*b));
	CHECK(store_sandbox_get(s, "sb-sm", b) == 0);
	CHECK(b->status == STORE_CREATING && b->uid_base == 1065536 && b->proc.pid == getpid());
	CHECK(b->proc.pidns == util_pidns_self() && b->proc.start_time == util_proc_start_time(getpid()));
	CHECK(b->metadata && !strcmp(b->metadata, "{\"env\":[\"A=1\"]}"));
	CHECK(!strcmp(b->path, "/pool/sandboxes/sb-sm") && b->cpus == 2 && b->pool[0] == '\0');
	store_sandbox_clear(b);

	struct store_proc p = { 4242, 77, 0xabc };
	CHECK(store_sandbox_transition_proc(s, "sb-sm", STORE_ST(STORE_CREATING), STORE_RUNNING, &p, "/cg/x", 7) == 0);
	CHECK(store_sandbox_get(s, "sb-sm", b) == 0);
	CHECK(b->status == STORE_RUNNING && b->proc.pid == 4242 && b->proc.start_time == 77 && b->proc.pidns == 0xabc);
	CHECK(!strcmp(b->cgroup, "/cg/x") && b->uid_base == 7);
	store_sandbox_clear(b);
	/* Creating is reached by insert only. */
	enum store_status cur = STORE_STATUS_COUNT;
	CHECK(store_sandbox_transition(s, "sb-sm", 0, STORE_CREATING, NULL, &cur) == -ESTALE && cur == STORE_RUNNING);
	/* A CAS whose expected status is not the row's changes nothing. */
	CHECK(store_sandbox_transition(s, "sb-sm", STORE_ST(STORE_PAUSED), STORE_RUNNING, NULL, &cur) == -ESTALE);
	CHECK(store_sandbox_transition(s, "sb-sm", 0, STORE_PAUSED, NULL, NULL) == 0);
	CHECK(store_sandbox_transition(s, "sb-sm", 0, STORE_DESTROYED, "gone", NULL) == 0);
	/* The regression of issue 15: a late "failed" (a listing, a reap) never revives a destroyed row. */
	cur = STORE_STATUS_COUNT;
	CHECK(store_sandbox_transition(s, "sb-sm", 0, STORE_FAILED, "process died", &cur) == -ESTALE);
	CHECK(cur == STORE_DESTROYED);
	CHECK(store_sandbox_get(s, "sb-sm", b) == 0);
	CHECK(b->status == STORE_DESTROYED && !strcmp(b->reason, "gone"));
	store_sandbox_clear(b);
	CHECK(store_sandbox_transition(s, "sb-none", 0, STORE_FAILED, NULL, NULL) == -ENOENT);
	/* Inside a transaction too (the caller's event goes with it). */
	insert(s, "sb-tx", 11, NULL);
	CHECK(store_begin(s) == 0);
	CHECK(store_sandbox_transition(s, "sb-tx", 0, STORE_FAILED, "x", NULL) == 0);
	store_rollback(s);
	enum store_status st;
	CHECK(store_sandbox_status(s, "sb-tx", &st) == 0 && st == STORE_CREATING);
	/* Columns guarded by status: a lifetime changes only while running. */
	CHECK(store_sandbox_set_expires(s, "sb-tx", STORE_ST(STORE_RUNNING), 5) == -ESTALE);
	CHECK(store_sandbox_set_expires(s, "sb-nope", STORE_ST(STORE_RUNNING), 5) == -ENOENT);
	CHECK(store_sandbox_set_host_uid(s, "sb-tx", 900000) == 0);
	struct store_proc h = { 555, 66, 0xdef };
	CHECK(store_sandbox_set_helper(s, "sb-tx", &h) == 0);
	CHECK(store_sandbox_get(s, "sb-tx", b) == 0);
	CHECK(b->host_uid == 900000 && b->helper.pid == 555 && b->helper.start_time == 66 && b->helper.pidns == 0xdef);
	CHECK(b->metadata == NULL);
	store_sandbox_clear(b);
	CHECK(store_sandbox_set_helper(s, "sb-tx", NULL) == 0);
	CHECK(store_sandbox_get(s, "sb-tx", b) == 0 && b->helper.pid == 0);
	store_sandbox_clear(b);
	free(b);
	store_close(s);
}

static void test_list_and_pool(void)
{
	struct store *s = open_store();
	insert(s, "sb-l1", 100, NULL);
	insert(s, "sb-l2", 101, NULL);
	insert(s, "sb-l3", 102, NULL);
	CHECK(store_sandbox_transition(s, "sb-l1", 0, STORE_RUNNING, NULL, NULL) == 0);
	CHECK(store_sandbox_transition(s, "sb-l2", 0, STORE_PAUSED, NULL, NULL) == 0);
	CHECK(store_sandbox_set_pool(s, "sb-l2", "t") == 0);
	CHECK(store_sandbox_transition(s, "sb-l1", 0, STORE_RUNNING, NULL, NULL) == 0);
	CHECK(store_sandbox_set_expires(s, "sb-l1", STORE_ST(STORE_RUNNING), 50) == 0);

	struct store_sandbox *list = NULL;
	size_t n = 0;
	struct store_sandbox_filter f = { .statuses = STORE_ST_LIVE };
	CHECK(store_sandbox_list(s, &f, &list, &n) == 0);
	/* Oldest first (sb-tx of the previous test), the pooled one left out. */
	CHECK(n == 3 && !strcmp(list[0].id, "sb-tx") && !strcmp(list[1].id, "sb-l1") && !strcmp(list[2].id, "sb-l3"));
	store_sandbox_list_free(list, n);
	f = (struct store_sandbox_filter){ .pooled = true, .pool = "t" };
	CHECK(store_sandbox_list(s, &f, &list, &n) == 0 && n == 1 && !strcmp(list[0].pool, "t"));
	store_sandbox_list_free(list, n);
	f = (struct store_sandbox_filter){ .expired_at = 60 };
	CHECK(store_sandbox_list(s, &f, &list, &n) == 0 && n == 1 && !strcmp(list[0].id, "sb-l1"));
	store_sandbox_list_free(list, n);
	f = (struct store_sandbox_filter){ .statuses = STORE_ST_LIVE, .max = 1 };
	CHECK(store_sandbox_list(s, &f, &list, &n) == 0 && n == 1);
	store_sandbox_list_free(list, n);
	CHECK(store_sandbox_count(s, STORE_ST_LIVE) >= 3);

	/* Checkpoint rows. */
	struct store_checkpoint *c = calloc(1, sizeof(*c)), *cl = NULL;
	snprintf(c->id, sizeof(c->id), "cp-1");
	snprintf(c->sandbox_id, sizeof(c->sandbox_id), "sb-l1");
	snprintf(c->template_name, sizeof(c->template_name), "t");
	snprintf(c->kind, sizeof(c->kind), "disk");
	snprintf(c->path, sizeof(c->path), "/pool/checkpoints/cp-1");
	c->created_ms = 5;
	CHECK(store_checkpoint_insert(s, c) == 0 && store_checkpoint_insert(s, c) == -EEXIST);
	snprintf(c->id, sizeof(c->id), "cp-2");
	snprintf(c->name, sizeof(c->name), "named");
	snprintf(c->sandbox_id, sizeof(c->sandbox_id), "sb-l3");
	CHECK(store_checkpoint_insert(s, c) == 0);
	CHECK(store_checkpoint_list(s, "sb-l1", &cl, &n) == 0 && n == 1 && !strcmp(cl[0].id, "cp-1") && !cl[0].name[0]);
	free(cl);
	CHECK(store_checkpoint_list(s, NULL, &cl, &n) == 0 && n == 2);
	free(cl);
	memset(c, 0, sizeof(*c));
	CHECK(store_checkpoint_get(s, "cp-2", c) == 0 && !strcmp(c->name, "named") && c->created_ms == 5);
	CHECK(store_checkpoint_get(s, "cp-3", c) == -ENOENT);

	/* Taking from the pool claims one row once. */
	char id[32];
	CHECK(store_sandbox_pool_take(s, "t", "vm", id, sizeof(id)) == 0);
	CHECK(store_sandbox_pool_take(s, "t", "jail", id, sizeof(id)) == 1 && !strcmp(id, "sb-l2"));
	CHECK(store_sandbox_pool_take(s, "t", "jail", id, sizeof(id)) == 0);

	/* Templates count user sandboxes only. */
	struct store_template *t = calloc(1, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "t");
	snprintf(t->path, sizeof(t->path), "/pool/templates/t");
	t->has_kernel = true;
	CHECK(store_template_insert(s, t) == 0);
	CHECK(store_template_insert(s, t) == -EEXIST);
	CHECK(store_template_exists(s, "t") == 1 && store_template_exists(s, "u") == 0);
	CHECK(store_sandbox_set_pool(s, "sb-l3", "t") == 0);
	memset(t, 0, sizeof(*t));
	CHECK(store_template_get(s, "t", t) == 0 && t->has_kernel && !t->has_initrd);
	/* sb-tx (creating) from the previous test, sb-l1, sb-l2 (taken); sb-l3 is pooled. */
	CHECK(t->sandboxes == 3 && t->checkpoints == 2);
	CHECK(store_checkpoint_delete(s, "cp-1") == 0 && store_checkpoint_delete(s, "cp-2") == 0);
	CHECK(store_template_get(s, "t", t) == 0 && t->checkpoints == 0);
	free(c);
	CHECK(store_template_delete(s, "t") == 0 && store_template_get(s, "t", t) == -ENOENT);
	/* The meta table. */
	char *v = NULL;
	CHECK(store_meta_set(s, "pool_size.t", "3") == 0 && store_meta_delete(s, "pool_size.t") == 0);
	CHECK(store_meta_get(s, "pool_size.t", &v) == -ENOENT && store_meta_delete(s, "pool_size.t") == 0);
	free(t);
	store_close(s);
}

static int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Two processes: one holds the lock, the other waits a bounded time and gets -EBUSY, then gets it once
 * the holder ends (killed: the kernel drops the lock); a spawned program never inherits it. */
static void test_lock(void)
{
	CHECK(store_lock_take(dir, "../x", 10) == -EINVAL);
	CHECK(store_lock_take(dir, "", 10) == -EINVAL);
	CHECK(store_lock_take(dir, "SB-UPPER", 10) == -EINVAL);
	int pipefd[2];
	CHECK(pipe2(pipefd, O_CLOEXEC) == 0);
	pid_t child = fork();
	if (child == 0) {
		int fd = store_lock_take(dir, "sb-lock", 1000);
		char c = fd >= 0 ? 'y' : 'n';
		(void)!write(pipefd[1], &c, 1);
		pause();
		_exit(0);
	}
	char c = 0;
	CHECK(read(pipefd[0], &c, 1) == 1 && c == 'y');
	int64_t t0 = mono_ms();
	CHECK(store_lock_take(dir, "sb-lock", 300) == -EBUSY);
	int64_t waited = mono_ms() - t0;
	CHECK(waited >= 290 && waited < 3000);
	/* Another sandbox's lock is independent. */
	int other = store_lock_take(dir, "sb-other", 100);
	CHECK(other >= 0);
	/* O_CLOEXEC: a program started while it is held does not keep it. */
	CHECK(other >= 0 && (fcntl(other, F_GETFD) & FD_CLOEXEC));
	store_lock_release(other);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	int fd = store_lock_take(dir, "sb-lock", 1000);
	CHECK(fd >= 0);
	/* Threads or handles of one process exclude each other too (each take is its own description). */
	CHECK(store_lock_take(dir, "sb-lock", 50) == -EBUSY);
	/* Removed by its holder (destroy): a waiter does not end up holding the unlinked file. */
	child = fork();
	if (child == 0) {
		int f2 = store_lock_take(dir, "sb-lock", 5000);
		char p[512];
		struct stat a, b2;
		bool ok = f2 >= 0 && store_lock_path(dir, "sb-lock", p, sizeof(p)) == 0 && fstat(f2, &a) == 0 &&
			  stat(p, &b2) == 0 && a.st_ino == b2.st_ino;
		_exit(ok ? 0 : 1);
	}
	struct timespec nap = { 0, 100 * 1000000L };
	nanosleep(&nap, NULL);
	store_lock_remove(dir, "sb-lock", fd);
	store_lock_release(fd);
	int st = 0;
	waitpid(child, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* Liveness: this process alive, a reaped child dead, a recycled pid (wrong start time) dead, a zombie
 * dead, and any pid recorded in another pid namespace unknown. */
static void test_liveness(void)
{
	uint64_t ns = util_pidns_self(), me = util_proc_start_time(getpid());
	CHECK(ns != 0 && me != 0);
	CHECK(util_proc_liveness(getpid(), me, ns) == UTIL_PROC_ALIVE);
	CHECK(util_proc_liveness(getpid(), me, 0) == UTIL_PROC_ALIVE);
	CHECK(util_proc_liveness(getpid(), me + 1, ns) == UTIL_PROC_DEAD);
	CHECK(util_proc_liveness(getpid(), me, ns + 1) == UTIL_PROC_UNKNOWN);
	CHECK(util_proc_liveness(0, 0, ns) == UTIL_PROC_DEAD);
	struct util_proc_stat ps;
	CHECK(util_proc_stat(getpid(), &ps) == 0 && ps.start_time == me && ps.state == 'R');
	CHECK(util_proc_stat(-1, &ps) == -ESRCH);
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	/* A zombie until collected: already dead. */
	for (int i = 0; i < 200 && util_proc_stat(child, &ps) == 0 && ps.state != 'Z'; i++)
		usleep(5000);
	CHECK(util_proc_liveness(child, 0, ns) == UTIL_PROC_DEAD);
	waitpid(child, NULL, 0);
	CHECK(util_proc_liveness(child, 0, ns) == UTIL_PROC_DEAD);
	CHECK(util_proc_stat(child, &ps) == -ESRCH);

	/* From a new pid namespace, a pid recorded out here is not judged, even one that does not exist there.
	 * The namespace is made in a child of ours: after unshare(CLONE_NEWPID) a process cannot fork again
	 * once its first child (that namespace's pid 1) is gone, and the leak checker forks at exit. */
	child = fork();
	if (child == 0) {
		if (unshare(CLONE_NEWPID) < 0) {
			fprintf(stderr, "no pid namespace (%s): skipping that part\n", strerror(errno));
			_exit(0);
		}
		pid_t inner_pid = fork();
		if (inner_pid == 0) {
			/* pid 1 of the new namespace; /proc still shows the outer one, so compare namespaces by
			 * the inode of our own ns link, which is the new one. */
			uint64_t inner = util_pidns_self();
			int bad = inner == ns;
			bad |= util_proc_liveness(424242, 1, ns) != UTIL_PROC_UNKNOWN;
			_exit(bad);
		}
		int ist = 0;
		_exit(inner_pid > 0 && waitpid(inner_pid, &ist, 0) == inner_pid && WIFEXITED(ist) ? WEXITSTATUS(ist) : 1);
	}
	int st = 0;
	CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int count_rows(struct store *s, const char *sql)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
	sqlite3_finalize(st);
	return n;
}

/* The library's side: status changes are compare-and-set (a destroyed sandbox is never marked failed),
 * and space_sandbox_list writes nothing: it shows a dead sandbox as failed, expired ones not at all,
 * and core_sandbox_reap_dead is what records the failure. */
static void test_core(void)
{
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = dir;
	space_ctx *ctx = NULL;
	CHECK(space_ctx_new(&o, &ctx) == 0);
	if (!ctx)
		return;
	struct store *s = NULL;
	CHECK(ctx_store(ctx, &s) == 0);
	if (!s)
		goto out;
	insert(s, "sb-c1", 1000, NULL);
	CHECK(core_sandbox_set_status(ctx, "sb-c1", SPACE_SANDBOX_DESTROYED, "removed") == 0);
	CHECK(core_sandbox_set_status(ctx, "sb-c1", SPACE_SANDBOX_FAILED, "late") == -ESTALE);
	CHECK(strstr(space_ctx_last_error(ctx), "destroyed") != NULL);
	enum store_status st;
	CHECK(store_sandbox_status(s, "sb-c1", &st) == 0 && st == STORE_DESTROYED);

	/* A running sandbox whose process is gone (a reaped child's pid, same namespace). */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	insert(s, "sb-dead", 1001, NULL);
	struct store_proc dead = { child, 1, util_pidns_self() };
	CHECK(store_sandbox_transition_proc(s, "sb-dead", 0, STORE_RUNNING, &dead, NULL, 0) == 0);
	/* Another whose pid was recorded in another pid namespace: not judged from here. */
	insert(s, "sb-far", 1002, NULL);
	struct store_proc far = { child, 1, util_pidns_self() + 1 };
	CHECK(store_sandbox_transition_proc(s, "sb-far", 0, STORE_RUNNING, &far, NULL, 0) == 0);
	/* And one past its lifetime. */
	insert(s, "sb-old", 1003, NULL);
	CHECK(store_sandbox_transition(s, "sb-old", 0, STORE_RUNNING, NULL, NULL) == 0);
	CHECK(store_sandbox_set_expires(s, "sb-old", 0, 1) == 0);
	int events = count_rows(s, "SELECT count(*) FROM events");
	int64_t updated = count_rows(s, "SELECT sum(updated_ms) % 1000000007 FROM sandboxes");

	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	CHECK(space_sandbox_list(ctx, &list, &n) == 0);
	bool saw_dead = false, saw_far = false, saw_old = false;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(list[i]->id, "sb-dead"))
			saw_dead = list[i]->status == SPACE_SANDBOX_FAILED && strstr(list[i]->reason, "exited");
		if (!strcmp(list[i]->id, "sb-far"))
			saw_far = list[i]->status == SPACE_SANDBOX_RUNNING;
		saw_old |= !strcmp(list[i]->id, "sb-old");
		CHECK(strcmp(list[i]->id, "sb-c1") != 0);
	}
	space_sandbox_info_list_free(list);
	CHECK(saw_dead && saw_far && !saw_old);
	/* Nothing written by the listing. */
	CHECK(store_sandbox_status(s, "sb-dead", &st) == 0 && st == STORE_RUNNING);
	CHECK(count_rows(s, "SELECT count(*) FROM events") == events);
	CHECK(count_rows(s, "SELECT sum(updated_ms) % 1000000007 FROM sandboxes") == updated);

	/* The explicit reap records it, with its event; the far one stays running. */
	CHECK(core_sandbox_reap_dead(ctx) == 1);
	CHECK(store_sandbox_status(s, "sb-dead", &st) == 0 && st == STORE_FAILED);
	CHECK(store_sandbox_status(s, "sb-far", &st) == 0 && st == STORE_RUNNING);
	CHECK(count_rows(s, "SELECT count(*) FROM events WHERE sandbox_id = 'sb-dead' AND kind = 'failed'") == 1);
	CHECK(core_sandbox_reap_dead(ctx) == 0);

	/* The lock wrapper (its -EBUSY after the wait: test_lock, with a short wait). */
	int fd = -1;
	CHECK(core_sandbox_lock(ctx, "sb-far", &fd) == 0 && fd >= 0);
	store_lock_release(fd);
	CHECK(core_sandbox_lock(ctx, "../etc", &fd) == -EINVAL);
out:
	space_ctx_free(ctx);
}

/* Another state directory's store read without migrating or writing it (core/uids.c's reclaim). */
static void test_peek(void)
{
	struct store *s = open_store();
	insert(s, "sb-peek", 2000, NULL);
	CHECK(store_sandbox_transition(s, "sb-peek", 0, STORE_DESTROYED, "gone", NULL) == 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/space.db", dir);
	enum store_status st = STORE_RUNNING;
	CHECK(store_sandbox_status_peek(p, "sb-peek", &st) == 0 && st == STORE_DESTROYED);
	CHECK(store_sandbox_status_peek(p, "sb-none", &st) == -ENOENT);
	/* A file that is no store says nothing either way (its slot is kept), and is not turned into one. */
	char q[256];
	snprintf(q, sizeof(q), "%s/not-a-store", dir);
	FILE *f = fopen(q, "w");
	CHECK(f && fputs("not sqlite", f) >= 0 && fclose(f) == 0);
	int r = store_sandbox_status_peek(q, "sb-peek", &st);
	CHECK(r < 0 && r != -ENOENT);
	snprintf(q, sizeof(q), "%s/absent.db", dir);
	CHECK(store_sandbox_status_peek(q, "sb-peek", &st) < 0 && access(q, F_OK) < 0);
	store_close(s);
}

/* The public status names are the store's (one table), and the helper's pid is its column: a "pid" in the
 * metadata JSON is the caller's text, never read as the helper (core/autosnap.c). */
static void test_names_and_helper(void)
{
	for (int i = 0; i < STORE_STATUS_COUNT; i++)
		CHECK(!strcmp(space_sandbox_status_name((enum space_sandbox_status)i), store_status_name(i)));
	CHECK(!strcmp(space_sandbox_status_name((enum space_sandbox_status)STORE_STATUS_COUNT), "unknown"));
	CHECK(core_status_parse("paused") == SPACE_SANDBOX_PAUSED && core_status_parse("nope") == -EINVAL &&
	      core_status_parse(NULL) == -EINVAL);

	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = dir;
	space_ctx *ctx = NULL;
	CHECK(space_ctx_new(&o, &ctx) == 0);
	struct store *s = NULL;
	if (!ctx || ctx_store(ctx, &s) < 0)
		goto out;
	insert(s, "sb-snap", 3000, "{\"snapshots\":{\"every\":30,\"keep\":4,\"pid\":4242,\"pid_start\":9}}");
	struct store_proc helper = { 31337, 77, util_pidns_self() };
	CHECK(store_sandbox_set_helper(s, "sb-snap", &helper) == 0);
	struct space_snapshot_policy p;
	uint64_t start = 0;
	CHECK(autosnap_policy_load(ctx, "sb-snap", &p, &start) == 0);
	CHECK(p.every_s == 30 && p.keep == 4 && p.pid == 31337 && start == 77);
	CHECK(autosnap_policy_load(ctx, "sb-nosuch", &p, &start) == -ENOENT);
	/* A helper that is not running shows as none in the public call (which takes a record: size set). */
	p = (struct space_snapshot_policy)SPACE_SNAPSHOT_POLICY_INIT;
	CHECK(space_sandbox_get_snapshot_policy(ctx, "sb-snap", &p) == 0 && p.every_s == 30 && p.pid == 0);
out:
	space_ctx_free(ctx);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_state_machine();
	test_list_and_pool();
	test_lock();
	test_core();
	test_liveness();
	test_peek();
	test_names_and_helper();
	return check_exit("sandboxes", dir);
}
