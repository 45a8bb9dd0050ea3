/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The isolation back-end choice (src/core/backend.h; issue 15, step 1), without privileges:
 *   names    "vm" and "jail" parse to their kinds and back; any other name (case, spaces, prefixes, empty,
 *            NULL) is -EINVAL
 *   tables   every back-end fills every operation it must; what differs between them is a field, not a
 *            name compared somewhere (uid slot kind, checkpoint kind, memory snapshots)
 *   refusal  a sandbox row whose isolation this build does not know is refused (-EINVAL, "unknown
 *            isolation") by open and remove and left as it was: before, remove "killed" it with success
 *            and marked it destroyed; an unknown isolation is refused by space_init and, stored as the
 *            state directory's default, by the default choice
 * Ends with "backend: N checks".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../vmm/check.h"
#include "core/backend.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "util/util.h"

static void test_names(void)
{
	enum backend_kind k = BACKEND_JAIL;
	CHECK(backend_kind_parse("vm", &k) == 0 && k == BACKEND_VM, "vm");
	CHECK(backend_kind_parse("jail", &k) == 0 && k == BACKEND_JAIL, "jail");
	const char *bad[] = { "", "VM", "Jail", "vmm", "kvm", "jail ", " vm", "vm\n", "none", "container" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		k = BACKEND_JAIL;
		CHECK(backend_kind_parse(bad[i], &k) == -EINVAL && k == BACKEND_JAIL, "'%s' accepted", bad[i]);
	}
	CHECK(backend_kind_parse(NULL, &k) == -EINVAL, "NULL accepted");
	struct sandbox_info b = { .id = "sb-x" };
	snprintf(b.isolation, sizeof(b.isolation), "bogus");
	CHECK(backend_for_info(&b) == NULL, "unknown isolation of a listed sandbox has a back-end");
	snprintf(b.isolation, sizeof(b.isolation), "jail");
	CHECK(backend_for_info(&b) == backend_of(BACKEND_JAIL), "jail listed");
}

static void test_tables(void)
{
	const enum backend_kind kinds[] = { BACKEND_VM, BACKEND_JAIL };
	for (size_t i = 0; i < 2; i++) {
		const struct backend_ops *o = backend_of(kinds[i]);
		enum backend_kind k;
		CHECK(o && o->kind == kinds[i] && backend_kind_parse(o->name, &k) == 0 && k == kinds[i], "kind %zu", i);
		CHECK(o->available && o->start && o->stop && o->pause && o->alive && o->refresh_identity &&
			  o->agent_addr && o->attach_network && o->death_reason,
		  "%s: an operation is missing", o->name);
		CHECK(o->proc_name && o->uid_owner && o->uid_what && o->checkpoint_kind, "%s: a name is missing", o->name);
		/* Memory snapshots come with a way to find them, and checkpoints say so. */
		CHECK(!o->snapshot == !o->snapshot_find, "%s: snapshot without snapshot_find", o->name);
		CHECK(backend_for_checkpoint_kind(o->checkpoint_kind) == o, "%s: checkpoint kind %s", o->name,
		      o->checkpoint_kind);
		char addr[256];
		o->agent_addr("/run/x", addr, sizeof(addr));
		CHECK(strstr(addr, "/run/x/") != NULL, "%s: agent address '%s'", o->name, addr);
	}
	const struct backend_ops *vm = backend_of(BACKEND_VM), *jail = backend_of(BACKEND_JAIL);
	CHECK(vm->uid_kind == UIDALLOC_SINGLE && jail->uid_kind == UIDALLOC_RANGE, "uid slot kinds");
	CHECK(vm->snapshot && !jail->snapshot, "memory snapshots: vm only");
	CHECK(!strcmp(vm->checkpoint_kind, "full") && !strcmp(jail->checkpoint_kind, "disk"), "checkpoint kinds");
	CHECK(BACKEND_DEFAULT == BACKEND_VM, "the default is the hardware boundary");
	CHECK(backend_for_checkpoint_kind("memory") == NULL, "unknown checkpoint kind");
}

static int row_status(struct store *s, const char *id, char *buf, size_t len)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(store_db(s), "SELECT status FROM sandboxes WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	int r = -ENOENT;
	if (sqlite3_step(st) == SQLITE_ROW) {
		snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
		r = 0;
	}
	sqlite3_finalize(st);
	return r;
}

static void test_unknown_row(void)
{
	char state[] = "/tmp/space-test-backend-XXXXXX";
	CHECK(mkdtemp(state) != NULL, "mkdtemp");
	struct space_ctx_options co = { .version = 1, .state_dir = state };
	space_ctx *ctx = NULL;
	int r = space_ctx_new(&co, &ctx);
	CHECK(r == 0, "ctx: %s", strerror(-r));
	if (r < 0)
		return;
	char db[128], msg[256];
	snprintf(db, sizeof(db), "%s/space.db", state);
	struct store *s;
	r = store_open(db, true, &s, msg, sizeof(msg));
	CHECK(r == 0, "store: %s", msg);
	if (r == 0)
		store_close(s);
	r = ctx_store(ctx, &s);
	CHECK(r == 0, "ctx store: %s", space_ctx_last_error(ctx));
	if (r < 0)
		goto out;
	/* A running sandbox of an isolation some other build knows (its schema allows it; ours does not, so
	 * the check is lifted for this one insert): no process, no disk of ours. */
	CHECK(store_exec(s, "PRAGMA ignore_check_constraints = ON") == 0, "pragma: %s", store_errmsg(s));
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "INSERT INTO sandboxes(id, template, isolation, status, pid, pid_start, cpus, memory_mib, path,"
		 " runtime_dir, created_ms, updated_ms) VALUES ('sb-bogusbogusbogus0', 't', 'bogus', 'running', 0, 0, 1,"
		 " 64, '%s/nowhere', '%s/run/sb-bogusbogusbogus0', 0, 0)",
		 state, state);
	CHECK(store_exec(s, sql) == 0, "insert: %s", store_errmsg(s));
	CHECK(store_exec(s, "PRAGMA ignore_check_constraints = OFF") == 0, "pragma: %s", store_errmsg(s));

	r = space_sandbox_remove(ctx, "sb-bogusbogusbogus0");
	CHECK(r == -EINVAL, "remove of an unknown isolation: %d (%s), wanted -EINVAL", r, space_ctx_last_error(ctx));
	CHECK(strstr(space_ctx_last_error(ctx), "unknown isolation 'bogus'") != NULL, "remove said '%s'",
	      space_ctx_last_error(ctx));
	char st[32] = "";
	CHECK(row_status(s, "sb-bogusbogusbogus0", st, sizeof(st)) == 0 && !strcmp(st, "running"),
	      "the row is now '%s', not left as it was", st);
	space_sandbox *sb = NULL;
	r = space_sandbox_open(ctx, "sb-bogusbogusbogus0", &sb);
	CHECK(r == -EINVAL && !sb, "open of an unknown isolation: %d", r);
	space_sandbox_free(sb);
	CHECK(row_status(s, "sb-bogusbogusbogus0", st, sizeof(st)) == 0 && !strcmp(st, "running"),
	      "open changed the row to '%s'", st);

	/* The state directory's default, stored by an older or newer build. */
	const struct backend_ops *ops = NULL;
	CHECK(backend_default(ctx, s, &ops) == 0 && ops == backend_of(BACKEND_DEFAULT), "default without a choice");
	CHECK(store_meta_set(s, "isolation", "jail") == 0 && backend_default(ctx, s, &ops) == 0 &&
		  ops == backend_of(BACKEND_JAIL),
	      "stored default jail");
	CHECK(store_meta_set(s, "isolation", "bogus") == 0 && backend_default(ctx, s, &ops) == -EINVAL &&
		  strstr(space_ctx_last_error(ctx), "unknown isolation 'bogus'"),
	      "stored default bogus: '%s'", space_ctx_last_error(ctx));

	struct space_init_options io = { .version = 1, .isolation = "bogus" };
	r = space_init(ctx, &io);
	CHECK(r == -EINVAL && strstr(space_ctx_last_error(ctx), "unknown isolation"), "init with bogus: %d %s", r,
	      space_ctx_last_error(ctx));
out:
	space_ctx_free(ctx);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state);
	CHECK(system(cmd) == 0, "clean up %s", state);
}

int main(void)
{
	test_names();
	test_tables();
	test_unknown_row();
	printf("backend: %d checks\n", check_count);
	return check_exit();
}
