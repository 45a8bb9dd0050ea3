/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public calls the CLI and space serve use instead of the library's internals (issue 15): the event
 * log (filters, cursor, limit, a callback that stops, counts), a sandbox's recorded status, kernels and
 * boot assets; each call's error paths (bad arguments, query versions, an uninitialized state directory),
 * with a last error that says why.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "space.h"
#include "store/db.h"
#include "../../check.h"

static char dir[] = "/tmp/space-test-client-api-XXXXXX";

struct seen {
	int n;
	int64_t seqs[16];
	char kinds[16][SPACE_EVENT_KIND_MAX + 1];
	size_t detail_len[16];
	bool no_sandbox[16], no_detail[16], sizes_ok;
	int stop_after; /* return -ECANCELED after this many (0: never) */
};

static int collect(const struct space_event *ev, void *userdata)
{
	struct seen *s = userdata;
	if (s->n < 16) {
		s->seqs[s->n] = ev->seq;
		snprintf(s->kinds[s->n], sizeof(s->kinds[0]), "%s", ev->kind);
		s->detail_len[s->n] = ev->detail ? strlen(ev->detail) : 0;
		s->no_sandbox[s->n] = !ev->sandbox_id;
		s->no_detail[s->n] = !ev->detail;
	}
	s->sizes_ok = ev->size == sizeof(struct space_event);
	s->n++;
	return s->stop_after && s->n == s->stop_after ? -ECANCELED : 0;
}

static int list(space_ctx *ctx, const struct space_event_query *q, struct seen *s)
{
	int stop = s->stop_after;
	memset(s, 0, sizeof(*s));
	s->stop_after = stop;
	return space_event_list(ctx, q, collect, s);
}

static int count_kernels(const struct space_kernel_info *k, void *userdata)
{
	(*(int *)userdata) += k->size == sizeof(*k) && k->kind && k->kernel && k->modules && k->release;
	return 0;
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	space_ctx *ctx = NULL;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = dir;
	CHECK(space_ctx_new(&o, &ctx) == 0);

	/* Before the state directory is initialized: refused with the reason. */
	struct seen s = { 0 };
	uint64_t n = 0;
	enum space_sandbox_status st;
	CHECK(list(ctx, NULL, &s) == -ENOMEDIUM);
	CHECK(strstr(space_ctx_last_error(ctx), "space init") != NULL);
	CHECK(space_event_count(ctx, NULL, &n) == -ENOMEDIUM);
	CHECK(space_sandbox_get_status(ctx, "sb-x", &st) == -ENOMEDIUM);

	/* A store with events: three of sb-a, one of sb-b, one of no sandbox (no detail), one too long. */
	char p[256], err[256] = "";
	snprintf(p, sizeof(p), "%s/space.db", dir);
	struct store *db = NULL;
	CHECK(store_open(p, true, &db, err, sizeof(err)) == 0);
	if (!db) {
		fprintf(stderr, "store_open: %s\n", err);
		return 1;
	}
	char big[4 * SPACE_EVENT_DETAIL_MAX];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(store_event(db, "sb-a", "creating", "tiny") == 0);
	CHECK(store_event(db, "sb-b", "creating", "tiny") == 0);
	CHECK(store_event(db, "sb-a", "egress-denied", "dns evil.test") == 0);
	CHECK(store_event(db, NULL, "pool", NULL) == 0);
	CHECK(store_event(db, "sb-a", "egress-denied", big) == 0);
	CHECK(store_exec(db, "INSERT INTO sandboxes (id, template, isolation, status, cpus, memory_mib, path, "
			     "runtime_dir, created_ms, updated_ms) VALUES ('sb-dead', 't', 'jail', 'destroyed', 1, 1, "
			     "'/nonexistent', '/nonexistent', 1, 1)") == 0);

	/* Everything, oldest first, with size set; NULL for absent sandbox and detail. */
	CHECK(list(ctx, NULL, &s) == 0);
	CHECK(s.n == 5 && s.sizes_ok);
	for (int i = 1; i < s.n && i < 16; i++)
		CHECK(s.seqs[i] > s.seqs[i - 1]);
	CHECK(!strcmp(s.kinds[0], "creating") && !strcmp(s.kinds[3], "pool"));
	CHECK(s.no_sandbox[3] && s.no_detail[3] && !s.no_sandbox[0] && !s.no_detail[0]);
	CHECK(s.detail_len[4] > 0 && s.detail_len[4] <= SPACE_EVENT_DETAIL_MAX); /* capped */

	/* Filters, cursor and limit. */
	struct space_event_query q = SPACE_EVENT_QUERY_INIT;
	q.sandbox_id = "sb-a";
	CHECK(list(ctx, &q, &s) == 0 && s.n == 3);
	int64_t second = s.seqs[1];
	q.kind = "egress-denied";
	CHECK(list(ctx, &q, &s) == 0 && s.n == 2);
	CHECK(space_event_count(ctx, &q, &n) == 0 && n == 2);
	q.after_seq = second;
	CHECK(list(ctx, &q, &s) == 0 && s.n == 1 && s.seqs[0] > second);
	q = (struct space_event_query)SPACE_EVENT_QUERY_INIT;
	q.limit = 2;
	CHECK(list(ctx, &q, &s) == 0 && s.n == 2);
	q.after_seq = s.seqs[1]; /* the next page */
	CHECK(list(ctx, &q, &s) == 0 && s.n == 2 && !strcmp(s.kinds[0], "egress-denied"));
	q.kind = "egress-denied";
	q.limit = 0;
	q.after_seq = 0;
	CHECK(space_event_count(ctx, &q, &n) == 0 && n == 2);
	q.sandbox_id = "sb-none";
	CHECK(list(ctx, &q, &s) == 0 && s.n == 0);

	/* A callback that stops: its code comes back, no more calls. */
	s.stop_after = 2;
	CHECK(list(ctx, NULL, &s) == -ECANCELED && s.n == 2);
	s.stop_after = 0;

	/* The init function: the defaults of its version; refused for 0, a later one, NULL. */
	memset(&q, 0xff, sizeof(q));
	CHECK(space_event_query_init(&q, SPACE_EVENT_QUERY_VERSION) == 0);
	CHECK(q.version == SPACE_EVENT_QUERY_VERSION && !q.sandbox_id && !q.kind && !q.after_seq && !q.limit);
	CHECK(list(ctx, &q, &s) == 0 && s.n == 5);
	CHECK(space_event_query_init(&q, 0) == -EINVAL);
	CHECK(space_event_query_init(&q, SPACE_EVENT_QUERY_VERSION + 1) == -EINVAL);
	CHECK(space_event_query_init(NULL, SPACE_EVENT_QUERY_VERSION) == -EINVAL);

	/* Bad arguments and versions. */
	q = (struct space_event_query)SPACE_EVENT_QUERY_INIT;
	q.version = 0;
	CHECK(list(ctx, &q, &s) == -EINVAL && s.n == 0);
	CHECK(strstr(space_ctx_last_error(ctx), "version") != NULL);
	q.version = SPACE_EVENT_QUERY_VERSION + 1;
	CHECK(list(ctx, &q, &s) == -EINVAL);
	CHECK(space_event_count(ctx, &q, &n) == -EINVAL);
	q.version = SPACE_EVENT_QUERY_VERSION;
	q.after_seq = -1;
	CHECK(list(ctx, &q, &s) == -EINVAL);
	CHECK(space_event_list(ctx, NULL, NULL, NULL) == -EINVAL);
	CHECK(space_event_list(NULL, NULL, collect, &s) == -EINVAL);
	CHECK(space_event_count(ctx, NULL, NULL) == -EINVAL);

	/* Recorded status: destroyed rows too; none for an unknown id. */
	st = SPACE_SANDBOX_RUNNING;
	CHECK(space_sandbox_get_status(ctx, "sb-dead", &st) == 0 && st == SPACE_SANDBOX_DESTROYED);
	CHECK(space_sandbox_get_status(ctx, "sb-none", &st) == -ENOENT);
	CHECK(strstr(space_ctx_last_error(ctx), "sb-none") != NULL);
	CHECK(space_sandbox_get_status(ctx, NULL, &st) == -EINVAL);
	CHECK(space_sandbox_get_status(ctx, "sb-dead", NULL) == -EINVAL);

	/* Kernels: listing works without a pool; bad arguments; an unknown template. */
	int kernels = 0;
	CHECK(space_kernel_list(ctx, count_kernels, &kernels) == 0);
	CHECK(space_kernel_list(ctx, NULL, NULL) == -EINVAL);
	CHECK(space_kernel_fetch(ctx, NULL) == -EINVAL);
	struct space_boot_assets *a = NULL;
	CHECK(space_kernel_prepare(ctx, NULL, NULL) == -EINVAL);
	CHECK(space_kernel_prepare(ctx, "no-such-template", &a) < 0 && a == NULL); /* no pool here: -ENOMEDIUM */
	space_kernel_info_free(NULL);
	space_boot_assets_free(NULL);

	store_close(db);
	space_ctx_free(ctx);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return check_summary("client_api");
}
