/* SPDX-License-Identifier: Apache-2.0 */
/* bench/fleet's load phases: a burst of creates at once, sustained loops from N clients, K live sandboxes. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet.h"
#include "util/util.h"

/* Threads that wait at a gate, so that all start together; the start time is taken as the gate opens. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	uint64_t t0;
	unsigned arrived;
};

static void gate_init(struct gate *g)
{
	*g = (struct gate){ .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
}

static void gate_wait(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->arrived++;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

/* Waits for n arrivals, then opens the gate. */
static void gate_open(struct gate *g, unsigned n)
{
	pthread_mutex_lock(&g->lock);
	while (g->arrived < n)
		pthread_cond_wait(&g->cond, &g->lock);
	g->t0 = util_now_ns();
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

struct worker {
	struct fleet *f;
	const char *state;
	struct gate *go, *done;   /* done: the burst's second gate (destroy after all are interactive) */
	unsigned index;
	bool peer;
	uint16_t port;            /* the HTTP burst: space serve's port and key */
	const char *key;
	uint64_t deadline;        /* sustained: loop until then */
	double ms;                /* burst: time from the gate to interactive; -1 on error */
	struct bu_series lat;     /* sustained: per-cycle latency */
	unsigned cycles, errors;
	uint64_t end;             /* when its last cycle finished */
};

static space_ctx *worker_ctx(struct worker *w)
{
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = w->state;
	space_ctx *ctx = NULL;
	if (!w->peer && space_ctx_new(&co, &ctx) < 0)
		fleet_error(w->f, "context");
	return ctx;
}

static int start_threads(struct worker *w, unsigned n, void *(*fn)(void *), pthread_t *t)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 << 10);
	unsigned started = 0;
	for (; started < n; started++)
		if (pthread_create(&t[started], &attr, fn, &w[started]) != 0)
			break;
	pthread_attr_destroy(&attr);
	if (started < n) {
		/* The gates wait for every thread: a phase that cannot start them all cannot run. */
		fprintf(stderr, "fleet: only %u of %u threads started\n", started, n);
		exit(1);
	}
	return 0;
}

/* ---- burst ----------------------------------------------------------------------------------------- */

static void *burst_thread(void *arg)
{
	struct worker *w = arg;
	space_ctx *ctx = worker_ctx(w);
	space_sandbox *sb = NULL;
	gate_wait(w->go);
	w->ms = -1;
	if (w->peer) {
		double tti;
		if (bu_peer_run(&w->f->peer, w->index, &tti, NULL) == 0)
			w->ms = bu_ms_since(w->go->t0);
		else
			w->errors++;
	} else if (ctx && fleet_cycle(w->f, ctx, false, NULL, NULL, NULL, &sb) == 0)
		w->ms = bu_ms_since(w->go->t0);
	else
		w->errors++;
	gate_wait(w->done);
	if (sb && space_sandbox_destroy(sb) < 0)
		fleet_error(w->f, "burst destroy: %s", space_ctx_last_error(ctx));
	space_sandbox_free(sb);
	space_ctx_free(ctx);
	return NULL;
}

/* f->burst threads of fn (a worker each, made from proto) released at once; each one's time from the gate
 * until interactive into out. */
static int burst_pass(struct fleet *f, const struct worker *proto, void *(*fn)(void *), struct bu_series *out,
		      unsigned *errors)
{
	unsigned n = f->burst;
	struct worker *w = calloc(n, sizeof(*w));
	pthread_t *t = calloc(n, sizeof(*t));
	struct gate go, done;
	if (!w || !t) {
		free(w);
		free(t);
		return -ENOMEM;
	}
	gate_init(&go);
	gate_init(&done);
	for (unsigned i = 0; i < n; i++) {
		w[i] = *proto;
		w[i].go = &go, w[i].done = &done, w[i].index = i;
	}
	start_threads(w, n, fn, t);
	gate_open(&go, n);
	gate_open(&done, n);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		if (w[i].ms >= 0)
			bu_series_add(out, w[i].ms);
		*errors += w[i].errors;
	}
	free(w);
	free(t);
	return 0;
}

int fleet_run_burst(struct fleet *f, const char *state, struct fleet_burst *ret)
{
	struct worker proto = { .f = f, .state = state };
	int r = burst_pass(f, &proto, burst_thread, &ret->lib, &ret->lib_errors);
	proto.peer = true;
	if (r == 0 && f->have_peer)
		r = burst_pass(f, &proto, burst_thread, &ret->peer, &ret->peer_errors);
	return r;
}

/* ---- burst over HTTP, through `space serve` ------------------------------------------------------- */

/* POST /v1/sandboxes, then exec `true` in it; the id into id[32]. */
static int http_create_exec(struct worker *w, char id[32])
{
	char body[160], path[96];
	char *reply = NULL;
	snprintf(body, sizeof(body), "{\"template\":\"%s\",\"isolation\":\"%s\"}", w->f->template_name, w->f->isolation);
	int st = bu_http(w->port, w->key, "POST", "/v1/sandboxes", body, &reply);
	cJSON *j = st == 201 ? cJSON_Parse(reply) : NULL;
	const char *sid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
	if (!sid || strlen(sid) >= 32) {
		fleet_error(w->f, "http create: %d %.300s", st, reply ? reply : "");
		cJSON_Delete(j);
		free(reply);
		return -EIO;
	}
	snprintf(id, 32, "%s", sid);
	cJSON_Delete(j);
	free(reply);
	reply = NULL;
	fleet_note_id(w->f, id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	st = bu_http(w->port, w->key, "POST", path, "{\"argv\":[\"true\"]}", &reply);
	int r = st == 200 && reply && strstr(reply, "\"exit_code\":0") ? 0 : -EIO;
	if (r < 0)
		fleet_error(w->f, "http exec in %s: %d %.300s", id, st, reply ? reply : "");
	free(reply);
	return r;
}

static void *http_burst_thread(void *arg)
{
	struct worker *w = arg;
	char id[32] = "";
	gate_wait(w->go);
	w->ms = -1;
	if (http_create_exec(w, id) == 0)
		w->ms = bu_ms_since(w->go->t0);
	else
		w->errors++;
	gate_wait(w->done);
	if (id[0]) {
		char path[64];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
		int st = bu_http(w->port, w->key, "DELETE", path, NULL, NULL);
		if (st != 204)
			fleet_error(w->f, "http destroy %s: %d", id, st);
	}
	return NULL;
}

/* The key of `space apikey create --json` into key[80] and its id into key_id[32]. */
static int make_key(const char *cli, const char *state, char key[80], char key_id[32], char *why, size_t len)
{
	const char *const argv[] = { cli, "apikey", "create", "--name", "fleet-bench", "--json", "--state", state, NULL };
	char *out = NULL;
	int r = util_run(argv, &out);
	cJSON *j = r == 0 && out ? cJSON_Parse(out) : NULL;
	const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "key"));
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
	if (!k || !id || strlen(k) >= 80 || strlen(id) >= 32)
		r = util_errf(why, len, -EIO, "space apikey create failed: %.200s", out ? out : "");
	else {
		snprintf(key, 80, "%s", k);
		snprintf(key_id, 32, "%s", id);
	}
	cJSON_Delete(j);
	free(out);
	return r;
}

int fleet_run_burst_http(struct fleet *f, const char *state, const char *cli, struct bu_series *out, unsigned *errors,
			 char *why, size_t len)
{
	char key[80], key_id[32], log[96], listen[48], conns[16];
	if (!cli || access(cli, X_OK) < 0)
		return util_errf(why, len, -ENOENT, "no space CLI to run `space serve` (set SPACE_CLI)");
	int r = make_key(cli, state, key, key_id, why, len);
	if (r < 0)
		return r;
	uint16_t port = bu_free_port();
	snprintf(log, sizeof(log), "/tmp/space-bench-fleet-serve-%d.log", (int)getpid());
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
	snprintf(conns, sizeof(conns), "%u", 2 * f->burst + 16);
	const char *const serve[] = { cli, "serve", "--listen", listen, "--state", state, "--max-connections", conns, NULL };
	pid_t server = 0;
	if (!port || (r = bu_spawn_logged(serve, log, &server)) < 0) {
		r = util_errf(why, len, r < 0 ? r : -EADDRNOTAVAIL, "cannot start space serve");
		goto out;
	}
	int st = 0;
	for (int i = 0; i < 100 && (st = bu_http(port, key, "GET", "/v1/health", NULL, NULL)) != 200; i++)
		util_sleep_ms(100);
	if (st != 200) {
		r = util_errf(why, len, -ECONNREFUSED, "space serve did not answer (built without libmicrohttpd?)");
		goto out;
	}
	struct worker proto = { .f = f, .state = state, .port = port, .key = key };
	r = burst_pass(f, &proto, http_burst_thread, out, errors);
out:
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
	}
	const char *const rm[] = { cli, "apikey", "rm", key_id, "--state", state, NULL };
	if (util_run(rm, NULL) < 0)
		fleet_error(f, "space apikey rm %s failed", key_id);
	unlink(log);
	return r;
}

/* ---- sustained ------------------------------------------------------------------------------------- */

static void *sustained_thread(void *arg)
{
	struct worker *w = arg;
	space_ctx *ctx = worker_ctx(w);
	gate_wait(w->go);
	while (util_now_ns() < w->deadline) {
		uint64_t t0 = util_now_ns();
		double tti, destroy;
		int r = w->peer ? bu_peer_run(&w->f->peer, w->index, &tti, &destroy)
				: ctx ? fleet_cycle(w->f, ctx, true, NULL, NULL, NULL, NULL) : -EINVAL;
		if (r < 0) {
			w->errors++;
			if (w->peer)
				fleet_error(w->f, "peer run: %s", strerror(-r));
			if (!ctx && !w->peer)
				break;
			continue;
		}
		bu_series_add(&w->lat, bu_ms_since(t0));
		w->cycles++;
	}
	w->end = util_now_ns();
	space_ctx_free(ctx);
	return NULL;
}

static int sustained_pass(struct fleet *f, const char *state, unsigned n, unsigned seconds, bool peer,
			  double *cycles_sum, double *secs_sum, struct bu_series *lat, unsigned *errors)
{
	struct worker *w = calloc(n, sizeof(*w));
	pthread_t *t = calloc(n, sizeof(*t));
	struct gate go;
	if (!w || !t) {
		free(w);
		free(t);
		return -ENOMEM;
	}
	gate_init(&go);
	fleet_settle(f);
	for (unsigned i = 0; i < n; i++)
		w[i] = (struct worker){ .f = f, .state = state, .go = &go, .index = i, .peer = peer };
	start_threads(w, n, sustained_thread, t);
	/* The deadline counts from the gate; a cycle begun before it runs to its end and counts. */
	uint64_t deadline = util_now_ns() + (uint64_t)seconds * 1000000000ull;
	for (unsigned i = 0; i < n; i++)
		w[i].deadline = deadline;
	gate_open(&go, n);
	uint64_t end = go.t0, cycles = 0;
	for (unsigned i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		for (size_t k = 0; k < w[i].lat.n; k++)
			bu_series_add(lat, w[i].lat.ms[k]);
		bu_series_free(&w[i].lat);
		cycles += w[i].cycles;
		*errors += w[i].errors;
		if (w[i].end > end)
			end = w[i].end;
	}
	*cycles_sum += (double)cycles;
	*secs_sum += end > go.t0 ? (double)(end - go.t0) / 1e9 : 0;
	free(w);
	free(t);
	return 0;
}

int fleet_run_sustained(struct fleet *f, const char *state, unsigned seconds, struct fleet_sustained *ret)
{
	int r = sustained_pass(f, state, ret->clients, seconds, false, &ret->cycles, &ret->secs, &ret->lib,
			       &ret->errors);
	if (r == 0 && f->have_peer)
		r = sustained_pass(f, state, ret->clients, seconds, true, &ret->peer_cycles, &ret->peer_secs,
				   &ret->peer, &ret->peer_errors);
	ret->rate = ret->secs > 0 ? ret->cycles / ret->secs : 0;
	ret->peer_rate = ret->peer_secs > 0 ? ret->peer_cycles / ret->peer_secs : 0;
	return r;
}

/* ---- density --------------------------------------------------------------------------------------- */

struct maker {
	struct fleet *f;
	const char *state;
	char (*ids)[32];          /* "" where a create failed */
	unsigned from, to;
	bool destroy;
	unsigned errors;
};

/* Makes (or destroys) sandboxes [from, to) of the array, with a context of its own. */
static void *maker_thread(void *arg)
{
	struct maker *m = arg;
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = m->state;
	space_ctx *ctx = NULL;
	if (space_ctx_new(&co, &ctx) < 0) {
		m->errors++;
		return NULL;
	}
	for (unsigned i = m->from; i < m->to; i++) {
		space_sandbox *sb = NULL;
		if (m->destroy) {
			if (!m->ids[i][0])
				continue;
			if (space_sandbox_open(ctx, m->ids[i], &sb) < 0 || space_sandbox_destroy(sb) < 0) {
				fleet_error(m->f, "density destroy: %s", space_ctx_last_error(ctx));
				m->errors++;
			}
		} else if (fleet_cycle(m->f, ctx, false, NULL, NULL, NULL, &sb) == 0)
			snprintf(m->ids[i], sizeof(m->ids[i]), "%s", space_sandbox_id(sb));
		else
			m->errors++;
		space_sandbox_free(sb); /* a handle is a reference: the sandbox lives on */
	}
	space_ctx_free(ctx);
	return NULL;
}

#define MAKERS 4

static void run_makers(struct fleet *f, const char *state, char (*ids)[32], unsigned n, bool destroy)
{
	struct maker m[MAKERS];
	pthread_t t[MAKERS];
	for (unsigned i = 0; i < MAKERS; i++) {
		m[i] = (struct maker){ .f = f, .state = state, .ids = ids, .from = n * i / MAKERS,
				       .to = n * (i + 1) / MAKERS, .destroy = destroy };
		if (pthread_create(&t[i], NULL, maker_thread, &m[i]) != 0)
			maker_thread(&m[i]), t[i] = 0;
	}
	for (unsigned i = 0; i < MAKERS; i++)
		if (t[i])
			pthread_join(t[i], NULL);
}

int fleet_run_density(struct fleet *f, const char *state, struct fleet_density *ret)
{
	unsigned k = f->live;
	char (*ids)[32] = calloc(k ? k : 1, 32), (*live_ids)[32] = calloc(k ? k : 1, 32);
	if (!ids || !live_ids) {
		free(ids);
		free(live_ids);
		return -ENOMEM;
	}
	util_sleep_ms(500);
	uint64_t mem0 = bu_mem_available_kib(), t0 = util_now_ns();
	run_makers(f, state, ids, k, false);
	ret->create_s = (double)(util_now_ns() - t0) / 1e9;
	util_sleep_ms(1000); /* let the agents and helpers settle into idle */
	uint64_t mem1 = bu_mem_available_kib();
	unsigned live = 0;
	for (unsigned i = 0; i < k; i++)
		if (ids[i][0])
			memcpy(live_ids[live++], ids[i], 32);
	ret->live = live;
	if (live) {
		struct bu_scan s;
		bu_ids_sort(live_ids, live);
		bu_scan(live_ids, live, NULL, &s);
		ret->rss_mib_per_sb = (double)s.rss_kib / 1024.0 / live;
		ret->pss_mib_per_sb = (double)s.pss_kib / 1024.0 / live;
		ret->procs_per_sb = (double)s.procs / live;
		ret->scan = s;
	}
	/* TTI of one more while they live. */
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = state;
	space_ctx *ctx = NULL;
	if (space_ctx_new(&co, &ctx) == 0) {
		unsigned n = f->runs < 50 ? f->runs : 50;
		printf("  [%s] TTI at %u live, %u runs (and the peer)...\n", f->isolation, live, n);
		for (unsigned i = 0; i < n; i++) {
			double tti;
			/* As settled as each cold TTI run at 0 live: only the live ones are left. */
			fleet_settle_keep(f, live);
			f->steps = &ret->steps;
			if (fleet_cycle(f, ctx, true, &tti, NULL, NULL, NULL) == 0)
				bu_series_add(&ret->tti, tti);
			f->steps = NULL;
			/* The peer on the same host with them live: how much of the slowdown is the host's. */
			if (f->have_peer) {
				double ptti;
				fleet_settle_keep(f, live);
				int pr = bu_peer_run(&f->peer, 0, &ptti, NULL);
				if (pr == 0)
					bu_series_add(&ret->peer_tti, ptti);
				else
					fleet_error(f, "peer run at %u live: %s", live, strerror(-pr));
			}
		}
		space_ctx_free(ctx);
	}
	t0 = util_now_ns();
	run_makers(f, state, ids, k, true);
	ret->destroy_s = (double)(util_now_ns() - t0) / 1e9;
	/* Against the mean of before and after (other work on the host drifts MemAvailable both ways). */
	util_sleep_ms(1000);
	uint64_t mem2 = bu_mem_available_kib();
	if (live)
		ret->mem_mib_per_sb = (((double)mem0 + (double)mem2) / 2 - (double)mem1) / 1024.0 / live;
	free(ids);
	free(live_ids);
	return 0;
}
