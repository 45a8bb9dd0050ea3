/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: what sandboxes use over time, for E2B's getMetrics (GET /sandboxes/{id}/metrics) and the
 * native GET /v1/sandboxes/{id}/metrics. The reaper's thread reads every running sandbox's usage
 * (space_sandbox_get_usage) every few seconds into a ring per sandbox (the last hour); a request gets the
 * ring's samples in its time range and one read on the spot. The CPU share of a sample is its CPU time
 * since the sample before over the wall time between them, of all the sandbox's CPUs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"
#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define USAGE_SAMPLES 720             /* an hour at one every SERVE_USAGE_EVERY_S */
#define USAGE_SANDBOXES 256           /* sandboxes sampled; more are read on request only */
#define USAGE_GAP_MS 60000            /* a sample further than this from the one before has no CPU share */
#define USAGE_PAIR_MS 200             /* two reads this far apart give a CPU share when none is recent */

struct usage_point {
	struct space_sandbox_usage u;
	double cpu_pct;               /* -1: not known */
};

struct track {
	char id[32];
	struct usage_point ring[USAGE_SAMPLES];
	unsigned head, n;             /* the next slot; how many are filled */
	bool seen;                    /* listed by the sampler's last pass */
	struct track *next;
};

static pthread_mutex_t usage_lock = PTHREAD_MUTEX_INITIALIZER;
static struct track *tracks;
static unsigned n_tracks;

/* The CPU share of b after a, in percent of all the sandbox's CPUs; -1 when they are too far apart. */
static double cpu_pct(const struct space_sandbox_usage *a, const struct space_sandbox_usage *b)
{
	int64_t dt = b->time_ms - a->time_ms;
	if (dt <= 0 || dt > USAGE_GAP_MS || b->cpu_ns < a->cpu_ns)
		return -1;
	double pct = (double)(b->cpu_ns - a->cpu_ns) / ((double)dt * 1e6 * (b->cpus ? b->cpus : 1)) * 100;
	return pct > 100 ? 100 : pct;
}

static const struct usage_point *track_last(const struct track *t)
{
	return t->n ? &t->ring[(t->head + USAGE_SAMPLES - 1) % USAGE_SAMPLES] : NULL;
}

static void track_add(struct track *t, const struct space_sandbox_usage *u)
{
	const struct usage_point *last = track_last(t);
	struct usage_point p = { *u, last ? cpu_pct(&last->u, u) : -1 };
	t->ring[t->head] = p;
	t->head = (t->head + 1) % USAGE_SAMPLES;
	if (t->n < USAGE_SAMPLES)
		t->n++;
}

/* The track of id, made when create and there is room; called with usage_lock held. */
static struct track *track_find(const char *id, bool create)
{
	for (struct track *t = tracks; t; t = t->next)
		if (!strcmp(t->id, id))
			return t;
	if (!create || n_tracks >= USAGE_SANDBOXES)
		return NULL;
	struct track *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->next = tracks;
	tracks = t;
	n_tracks++;
	return t;
}

void serve_usage_sample_all(space_ctx *ctx)
{
	_cleanup_sandbox_info_list_ struct space_sandbox_info **list = NULL;
	size_t n = 0;
	if (space_sandbox_list(ctx, &list, &n) < 0)
		return;
	pthread_mutex_lock(&usage_lock);
	for (struct track *t = tracks; t; t = t->next)
		t->seen = false;
	pthread_mutex_unlock(&usage_lock);
	for (size_t i = 0; i < n; i++) {
		if (list[i]->status != SPACE_SANDBOX_RUNNING && list[i]->status != SPACE_SANDBOX_PAUSED)
			continue;
		pthread_mutex_lock(&usage_lock);
		struct track *t = track_find(list[i]->id, true);
		if (t)
			t->seen = true;
		pthread_mutex_unlock(&usage_lock);
		/* A paused sandbox uses no CPU and keeps its memory: its last sample stands. */
		if (!t || list[i]->status != SPACE_SANDBOX_RUNNING)
			continue;
		space_sandbox *sb = NULL;
		struct space_sandbox_usage u = SPACE_SANDBOX_USAGE_INIT;
		if (space_sandbox_open(ctx, list[i]->id, &sb) == 0 && space_sandbox_get_usage(sb, &u) == 0) {
			pthread_mutex_lock(&usage_lock);
			if ((t = track_find(list[i]->id, false)))
				track_add(t, &u);
			pthread_mutex_unlock(&usage_lock);
		}
		space_sandbox_free(sb);
	}
	/* Sandboxes that are gone take their samples with them. */
	pthread_mutex_lock(&usage_lock);
	for (struct track **pp = &tracks; *pp;) {
		struct track *t = *pp;
		if (t->seen) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		n_tracks--;
		free(t);
	}
	pthread_mutex_unlock(&usage_lock);
}

void serve_usage_cleanup(void)
{
	pthread_mutex_lock(&usage_lock);
	while (tracks) {
		struct track *t = tracks;
		tracks = t->next;
		free(t);
	}
	n_tracks = 0;
	pthread_mutex_unlock(&usage_lock);
}

/*
 * The samples of sb from from_ms to to_ms (0: no bound), oldest first, then one read now (when now is in
 * the range) into a new array of *ret_n points (the caller frees it). -errno from the read, with the
 * context's message.
 */
static int usage_series(space_sandbox *sb, int64_t from_ms, int64_t to_ms, struct usage_point **ret, size_t *ret_n)
{
	struct space_sandbox_usage now = SPACE_SANDBOX_USAGE_INIT;
	int e = space_sandbox_get_usage(sb, &now);
	if (e < 0)
		return e;
	struct usage_point *out = malloc((USAGE_SAMPLES + 1) * sizeof(*out));
	if (!out)
		return -ENOMEM;
	size_t n = 0;
	struct space_sandbox_usage prev = { 0 };
	bool have_prev = false;
	pthread_mutex_lock(&usage_lock);
	struct track *t = track_find(space_sandbox_id(sb), true);
	for (unsigned i = 0; t && i < t->n; i++) {
		const struct usage_point *p = &t->ring[(t->head + USAGE_SAMPLES - t->n + i) % USAGE_SAMPLES];
		if ((!from_ms || p->u.time_ms >= from_ms) && (!to_ms || p->u.time_ms <= to_ms))
			out[n++] = *p;
	}
	const struct usage_point *last = t ? track_last(t) : NULL;
	if (last)
		prev = last->u, have_prev = true;
	pthread_mutex_unlock(&usage_lock);
	if (!have_prev || now.time_ms - prev.time_ms > USAGE_GAP_MS || now.time_ms - prev.time_ms < USAGE_PAIR_MS / 2) {
		/* Nothing recent to compare with (a sandbox just made, or one the sampler does not follow): a
		 * second read shortly after. */
		prev = now;
		usleep(USAGE_PAIR_MS * 1000);
		now.size = sizeof(now);
		if ((e = space_sandbox_get_usage(sb, &now)) < 0) {
			free(out);
			return e;
		}
	}
	if ((!from_ms || now.time_ms >= from_ms) && (!to_ms || now.time_ms <= to_ms))
		out[n++] = (struct usage_point){ now, cpu_pct(&prev, &now) };
	/* Kept too, unless the sampler took one a moment ago. */
	pthread_mutex_lock(&usage_lock);
	t = track_find(space_sandbox_id(sb), false);
	last = t ? track_last(t) : NULL;
	if (t && (!last || now.time_ms - last->u.time_ms >= SERVE_USAGE_EVERY_S * 1000 / 2))
		track_add(t, &now);
	pthread_mutex_unlock(&usage_lock);
	*ret = out;
	*ret_n = n;
	return 0;
}

/* A query bound in seconds since the epoch into *ret_ms (0 when absent); false after answering 400. */
static bool query_time(struct serve_req *r, const char *name, bool e2b, int64_t *ret_ms)
{
	const char *v = serve_query(r, name);
	uint64_t s = 0;
	if (v && util_parse_uint(v, 0, INT64_MAX / 1000, &s) < 0) {
		if (e2b)
			e2b_api_error(r, 400, "'%s' must be a time in seconds since the epoch", name);
		else
			serve_reply_error(r, 400, "invalid", "'%s' must be a time in seconds since the epoch", name);
		return false;
	}
	*ret_ms = (int64_t)s * 1000;
	return true;
}

static void iso_time(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
}

/* GET /sandboxes/{id}/metrics: E2B's SandboxMetric list; start= and end= in seconds. */
enum MHD_Result e2b_sandbox_metrics(struct serve_req *r)
{
	int64_t from, to;
	if (!query_time(r, "start", true, &from) || !query_time(r, "end", true, &to))
		return MHD_YES;
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	int e = space_sandbox_open(ctx, r->params[0], &r->sb);
	if (e == -ENOENT || e == -ESRCH)
		return e2b_api_error(r, 404, "sandbox \"%s\" not found", r->params[0]);
	if (e < 0)
		return e2b_api_error(r, 500, "open sandbox: %s", space_ctx_last_error(ctx));
	_cleanup_free_ struct usage_point *v = NULL;
	size_t n = 0;
	e = usage_series(r->sb, from, to ? to + 999 : 0, &v, &n);
	if (e == -ESRCH)
		return e2b_api_error(r, 404, "sandbox \"%s\" not found", r->params[0]);
	if (e < 0)
		return e2b_api_error(r, e == -EOPNOTSUPP ? 501 : 500, "metrics: %s", space_ctx_last_error(ctx));
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < n && a; i++) {
		const struct space_sandbox_usage *u = &v[i].u;
		cJSON *m = cJSON_CreateObject();
		char ts[40];
		iso_time(u->time_ms, ts, sizeof(ts));
		cJSON_AddStringToObject(m, "timestamp", ts);
		cJSON_AddNumberToObject(m, "timestampUnix", (double)(u->time_ms / 1000));
		cJSON_AddNumberToObject(m, "cpuCount", u->cpus);
		cJSON_AddNumberToObject(m, "cpuUsedPct", v[i].cpu_pct < 0 ? 0 : (double)(int)(v[i].cpu_pct * 100) / 100);
		cJSON_AddNumberToObject(m, "memUsed", (double)u->memory_bytes);
		cJSON_AddNumberToObject(m, "memCache", (double)u->memory_cache_bytes);
		cJSON_AddNumberToObject(m, "memTotal", (double)u->memory_limit_bytes);
		cJSON_AddNumberToObject(m, "diskUsed", (double)u->disk_used_bytes);
		cJSON_AddNumberToObject(m, "diskTotal", (double)u->disk_total_bytes);
		cJSON_AddItemToArray(a, m);
	}
	return serve_reply_json(r, 200, a);
}

/* GET /v1/sandboxes/{id}/metrics: the same samples, named as the native API names things. */
enum MHD_Result serve_v1_metrics(struct serve_req *r)
{
	int64_t from, to;
	if (!query_time(r, "start", false, &from) || !query_time(r, "end", false, &to))
		return MHD_YES;
	space_sandbox *sb = serve_req_sandbox(r);
	if (!sb)
		return MHD_YES;
	_cleanup_free_ struct usage_point *v = NULL;
	size_t n = 0;
	int e = usage_series(sb, from, to ? to + 999 : 0, &v, &n);
	if (e < 0)
		return serve_reply_space_error(r, e, "sandbox metrics");
	cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "samples");
	for (size_t i = 0; i < n && a; i++) {
		const struct space_sandbox_usage *u = &v[i].u;
		cJSON *m = cJSON_CreateObject();
		cJSON_AddNumberToObject(m, "time_ms", (double)u->time_ms);
		cJSON_AddNumberToObject(m, "cpus", u->cpus);
		if (v[i].cpu_pct >= 0)
			cJSON_AddNumberToObject(m, "cpu_pct", (double)(int)(v[i].cpu_pct * 100) / 100);
		else
			cJSON_AddNullToObject(m, "cpu_pct");
		cJSON_AddNumberToObject(m, "cpu_ns", (double)u->cpu_ns);
		cJSON_AddNumberToObject(m, "memory_bytes", (double)u->memory_bytes);
		cJSON_AddNumberToObject(m, "memory_cache_bytes", (double)u->memory_cache_bytes);
		cJSON_AddNumberToObject(m, "memory_limit_bytes", (double)u->memory_limit_bytes);
		cJSON_AddNumberToObject(m, "disk_used_bytes", (double)u->disk_used_bytes);
		cJSON_AddNumberToObject(m, "disk_total_bytes", (double)u->disk_total_bytes);
		cJSON_AddItemToArray(a, m);
	}
	return serve_reply_json(r, 200, j);
}
