/* SPDX-License-Identifier: Apache-2.0 */
/*
 * 8 threads (each with its own context, as space.h's thread-safety rule asks) create, execute in and
 * destroy jail sandboxes on one state directory, while a 9th lists them over and over. Every create
 * succeeds or fails with a message; no id is handed out twice; the final listing holds exactly the
 * sandboxes the threads kept (none lost, none doubled, each running and answering); a listing never shows
 * an id twice. Then the kept ones are destroyed, in parallel too, and run.sh checks nothing is left.
 * usage: test_api_threads [THREADS [ITERATIONS]]   (default 8 4)
 */
#include <pthread.h>
#include <stdatomic.h>

#include "apitest.h"

#define MAX_THREADS 32
#define MAX_ITER 32

struct worker {
	int index, iterations;
	char created[MAX_ITER][32];
	bool kept[MAX_ITER];
	int ncreated, create_failures, unclear_failures, exec_failures, destroy_failures;
	char first_error[512];
};

static atomic_bool done;
static atomic_int listings, listing_dups, listing_errors;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	space_ctx *ctx = api_ctx(NULL);
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = api_template();
	so.isolation = "jail";
	for (int i = 0; i < w->iterations; i++) {
		space_sandbox *sb = NULL;
		int r = space_sandbox_create(ctx, &so, &sb);
		if (r < 0) {
			const char *e = space_ctx_last_error(ctx);
			w->create_failures++;
			if (!e || !*e)
				w->unclear_failures++;
			if (!w->first_error[0])
				snprintf(w->first_error, sizeof(w->first_error), "%s: %s", space_strerror(r), e ? e : "");
			continue;
		}
		int k = w->ncreated++;
		snprintf(w->created[k], sizeof(w->created[k]), "%s", space_sandbox_id(sb));
		pthread_mutex_lock(&print_lock);
		printf("sandbox %s\n", w->created[k]);
		pthread_mutex_unlock(&print_lock);
		char script[64], want[64];
		snprintf(script, sizeof(script), "echo t%d-%d", w->index, i);
		snprintf(want, sizeof(want), "t%d-%d\n", w->index, i);
		struct api_capture out;
		int code = -1;
		r = api_sh(sb, script, &out, &code);
		if (r < 0 || code != 0 || strcmp(out.out, want)) {
			w->exec_failures++;
			if (!w->first_error[0])
				snprintf(w->first_error, sizeof(w->first_error), "exec in %s: %s (exit %d, output '%s')",
					 w->created[k], r < 0 ? space_ctx_last_error(ctx) : "ok", code, out.out);
		}
		/* Every other one stays for the final listing. */
		w->kept[k] = i % 2 == 1;
		if (!w->kept[k] && space_sandbox_destroy(sb) < 0) {
			w->destroy_failures++;
			if (!w->first_error[0])
				snprintf(w->first_error, sizeof(w->first_error), "destroy %s: %s", w->created[k],
					 space_ctx_last_error(ctx));
		}
		space_sandbox_free(sb);
	}
	space_ctx_free(ctx);
	return NULL;
}

static bool has_dup(struct space_sandbox_info *const *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (!strcmp(l[i]->id, l[j]->id))
				return true;
	return false;
}

static void *lister_main(void *arg)
{
	(void)arg;
	space_ctx *ctx = api_ctx(NULL);
	while (!atomic_load(&done)) {
		struct space_sandbox_info **l = NULL;
		size_t n = 0;
		if (space_sandbox_list(ctx, &l, &n) < 0) {
			atomic_fetch_add(&listing_errors, 1);
			pthread_mutex_lock(&print_lock);
			printf("listing failed: %s\n", space_ctx_last_error(ctx));
			pthread_mutex_unlock(&print_lock);
		} else if (has_dup(l, n)) {
			atomic_fetch_add(&listing_dups, 1);
		}
		space_sandbox_info_list_free(l);
		atomic_fetch_add(&listings, 1);
		usleep(20000);
	}
	space_ctx_free(ctx);
	return NULL;
}

struct destroyer {
	const char *ids[MAX_ITER];
	int n, failures;
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;
	space_ctx *ctx = api_ctx(NULL);
	for (int i = 0; i < d->n; i++) {
		space_sandbox *sb = NULL;
		int r = space_sandbox_open(ctx, d->ids[i], &sb);
		if (r == 0) {
			struct api_capture out;
			int code = -1;
			r = api_sh(sb, "echo alive", &out, &code);
			if (r == 0 && (code != 0 || strcmp(out.out, "alive\n")))
				r = -EIO;
			if (space_sandbox_destroy(sb) < 0)
				r = -EIO;
			space_sandbox_free(sb);
		}
		if (r < 0) {
			d->failures++;
			pthread_mutex_lock(&print_lock);
			printf("kept sandbox %s: %s: %s\n", d->ids[i], space_strerror(r), space_ctx_last_error(ctx));
			pthread_mutex_unlock(&print_lock);
		}
	}
	space_ctx_free(ctx);
	return NULL;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int nthreads = argc > 1 ? atoi(argv[1]) : 8, iterations = argc > 2 ? atoi(argv[2]) : 4;
	if (nthreads < 1 || nthreads > MAX_THREADS || iterations < 1 || iterations > MAX_ITER) {
		fprintf(stderr, "usage: %s [THREADS (1..%d) [ITERATIONS (1..%d)]]\n", argv[0], MAX_THREADS, MAX_ITER);
		return 2;
	}
	static struct worker w[MAX_THREADS];
	pthread_t t[MAX_THREADS], lister;
	CHECK(pthread_create(&lister, NULL, lister_main, NULL) == 0);
	for (int i = 0; i < nthreads; i++) {
		w[i].index = i;
		w[i].iterations = iterations;
		CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	atomic_store(&done, true);
	pthread_join(lister, NULL);

	int created = 0, kept = 0, failed = 0;
	for (int i = 0; i < nthreads; i++) {
		created += w[i].ncreated;
		failed += w[i].create_failures;
		for (int k = 0; k < w[i].ncreated; k++)
			kept += w[i].kept[k];
		if (w[i].first_error[0])
			printf("thread %d: %s\n", i, w[i].first_error);
		CHECK(w[i].unclear_failures == 0);
		CHECK(w[i].exec_failures == 0);
		CHECK(w[i].destroy_failures == 0);
	}
	printf("%d threads x %d: %d created, %d create failures, %d kept; %d listings meanwhile\n", nthreads,
	       iterations, created, failed, kept, atomic_load(&listings));
	/* Failing with a clear error is allowed; but the point is concurrency, so most must succeed. */
	CHECK(created >= nthreads * iterations / 2);
	CHECK(atomic_load(&listing_dups) == 0);
	CHECK(atomic_load(&listing_errors) == 0);

	/* No id handed out twice. */
	int dups = 0;
	for (int i = 0; i < nthreads; i++)
		for (int k = 0; k < w[i].ncreated; k++)
			for (int j = i; j < nthreads; j++)
				for (int m = j == i ? k + 1 : 0; m < w[j].ncreated; m++)
					dups += !strcmp(w[i].created[k], w[j].created[m]);
	CHECK(dups == 0);

	/* The listing is exactly the kept ones, each running. */
	space_ctx *ctx = api_ctx(NULL);
	struct space_sandbox_info **l = NULL;
	size_t n = 0;
	CHECK(space_sandbox_list(ctx, &l, &n) == 0);
	CHECK(!has_dup(l, n));
	PENDING((int)n == kept, "the final listing holds exactly the kept sandboxes (compare-and-set status)");
	for (int i = 0; i < nthreads; i++)
		for (int k = 0; k < w[i].ncreated; k++) {
			const struct space_sandbox_info *found = NULL;
			for (size_t j = 0; j < n; j++)
				if (!strcmp(l[j]->id, w[i].created[k]))
					found = l[j];
			if (w[i].kept[k] && (!found || found->status != SPACE_SANDBOX_RUNNING)) {
				printf("LOST: %s (kept by thread %d) is %s\n", w[i].created[k], i,
				       found ? space_sandbox_status_name(found->status) : "missing");
				PENDING(false, "a kept sandbox is listed and running (compare-and-set status)");
			} else if (!w[i].kept[k] && found) {
				printf("UNDEAD: %s (destroyed by thread %d) is listed %s\n", w[i].created[k], i,
				       space_sandbox_status_name(found->status));
				/* Today a concurrent listing's liveness check marks a sandbox being destroyed
				 * "failed" after its destroy, and the row comes back (issue 15: status changes are
				 * compare-and-set; listing is read-only). */
				PENDING(false, "a destroyed sandbox stays destroyed while another thread lists");
			}
		}
	space_sandbox_info_list_free(l);

	/* Each thread's kept sandboxes answer and are destroyed, the threads in parallel. */
	static struct destroyer d[MAX_THREADS];
	for (int i = 0; i < nthreads; i++) {
		for (int k = 0; k < w[i].ncreated; k++)
			if (w[i].kept[k])
				d[i].ids[d[i].n++] = w[i].created[k];
		CHECK(pthread_create(&t[i], NULL, destroyer_main, &d[i]) == 0);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		CHECK(d[i].failures == 0);
	}
	/* What is left (rows a race brought back) is removable, as `space rm` would: then nothing is listed,
	 * and run.sh checks nothing is left on the host. */
	l = NULL;
	n = 0;
	CHECK(space_sandbox_list(ctx, &l, &n) == 0);
	PENDING(n == 0, "no sandbox left after every thread destroyed its own");
	for (size_t j = 0; l && j < n; j++) {
		printf("left: %s %s (%s); removing it\n", l[j]->id, space_sandbox_status_name(l[j]->status), l[j]->reason);
		CHECK(space_sandbox_remove(ctx, l[j]->id) == 0);
	}
	space_sandbox_info_list_free(l);
	l = NULL;
	n = 99;
	CHECK(space_sandbox_list(ctx, &l, &n) == 0 && n == 0);
	space_sandbox_info_list_free(l);
	space_ctx_free(ctx);
	return api_summary("api-threads");
}
