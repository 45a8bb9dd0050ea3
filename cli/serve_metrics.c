/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/metrics: Prometheus text exposition of the server and the state it serves. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "util/cleanup.h"

/* Upper bounds (seconds) of the create latency histogram's buckets; +Inf is implied. */
static const double create_bounds[SERVE_METRICS_BUCKETS] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120 };

void serve_metrics_create(struct serve *srv, uint64_t ns, bool ok)
{
	struct serve_metrics *m = &srv->metrics;
	double s = (double)ns / 1e9;
	pthread_mutex_lock(&m->lock);
	if (ok) {
		for (size_t i = 0; i < SERVE_METRICS_BUCKETS; i++)
			if (s <= create_bounds[i])
				m->create_buckets[i]++;
		m->create_count++;
		m->create_sum_s += s;
	} else {
		m->create_errors++;
	}
	pthread_mutex_unlock(&m->lock);
}

void serve_metrics_exec(struct serve *srv)
{
	pthread_mutex_lock(&srv->metrics.lock);
	srv->metrics.exec_count++;
	pthread_mutex_unlock(&srv->metrics.lock);
}

/* A growing text buffer; on allocation failure it stops growing and ok turns false. */
struct text {
	char *buf;
	size_t len, cap;
	bool ok;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(struct text *t, const char *fmt, ...)
{
	if (!t->ok)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->ok = false;
			return;
		}
		if (t->buf && (size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = (t->cap ? t->cap * 2 : 4096) + (size_t)n;
		char *nb = realloc(t->buf, cap);
		if (!nb) {
			t->ok = false;
			return;
		}
		t->buf = nb;
		t->cap = cap;
	}
}

/* Gateway events of one kind in the state directory's event log, or -1 when it cannot be read. */
static int64_t count_events(space_ctx *ctx, const char *kind)
{
	struct space_event_query q = SPACE_EVENT_QUERY_INIT;
	q.kind = kind;
	uint64_t n;
	return space_event_count(ctx, &q, &n) < 0 ? -1 : (int64_t)n;
}

enum MHD_Result serve_metrics_handler(struct serve_req *r)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	_cleanup_sandbox_info_list_ struct space_sandbox_info **list = NULL;
	size_t n = 0;
	int e = space_sandbox_list(ctx, &list, &n);
	if (e < 0)
		return serve_reply_space_error(r, e, "list sandboxes");

	struct text t = { .ok = true };
	text_add(&t, "# HELP space_sandboxes Sandboxes in the state directory (not destroyed), by state.\n"
		     "# TYPE space_sandboxes gauge\n");
	for (int s = SPACE_SANDBOX_CREATING; s < SPACE_SANDBOX_DESTROYED; s++) {
		uint64_t k = 0;
		for (size_t i = 0; i < n; i++)
			k += list[i]->status == (enum space_sandbox_status)s;
		text_add(&t, "space_sandboxes{state=\"%s\"} %llu\n",
			 space_sandbox_status_name((enum space_sandbox_status)s), (unsigned long long)k);
	}

	struct serve_metrics m;
	pthread_mutex_lock(&r->srv->metrics.lock);
	m = r->srv->metrics;
	pthread_mutex_unlock(&r->srv->metrics.lock);
	text_add(&t, "# HELP space_create_seconds Time to create a sandbox through this server.\n"
		     "# TYPE space_create_seconds histogram\n");
	for (size_t i = 0; i < SERVE_METRICS_BUCKETS; i++)
		text_add(&t, "space_create_seconds_bucket{le=\"%g\"} %llu\n", create_bounds[i],
			 (unsigned long long)m.create_buckets[i]);
	text_add(&t, "space_create_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)m.create_count);
	text_add(&t, "space_create_seconds_sum %.6f\nspace_create_seconds_count %llu\n", m.create_sum_s,
		 (unsigned long long)m.create_count);
	text_add(&t, "# HELP space_create_errors_total Sandbox creations that failed.\n"
		     "# TYPE space_create_errors_total counter\nspace_create_errors_total %llu\n",
		 (unsigned long long)m.create_errors);
	text_add(&t, "# HELP space_exec_total Processes started through this server.\n"
		     "# TYPE space_exec_total counter\nspace_exec_total %llu\n",
		 (unsigned long long)m.exec_count);
	int64_t denied = count_events(ctx, "egress-denied");
	text_add(&t, "# HELP space_gateway_denials_total Egress attempts the gateways refused (all sandboxes).\n"
		     "# TYPE space_gateway_denials_total counter\nspace_gateway_denials_total %lld\n",
		 (long long)(denied < 0 ? 0 : denied));
	if (!t.ok) {
		free(t.buf);
		return serve_reply_error(r, 500, "internal", "out of memory");
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(t.len, t.buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(t.buf);
		return serve_reply_error(r, 500, "internal", "out of memory");
	}
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	return serve_reply(r, 200, resp);
}
