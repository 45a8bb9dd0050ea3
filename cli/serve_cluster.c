/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve --cluster`: this host as one of several sharing a control plane in PostgreSQL
 * (cli/cluster_store.c; docs/cluster.md). This file: membership and trust.
 *
 * - A thread registers the host, heartbeats its report (capacity, what it holds, warm-pool stock), marks
 *   hosts that stopped heartbeating lost (any host may; the statement is idempotent), publishes the
 *   hashes of this host's API keys and the ids of its checkpoints, and reconciles this host's sandboxes
 *   with their rows.
 * - Requests between hosts travel over TLS (serve_cluster_tls.c) and carry a signature of the sending host
 *   (HMAC-SHA256 under its key, from the cluster store, over method, target, time and both names), which
 *   the receiver checks against the host the TLS certificate names. A signature says which host sent a
 *   request, nothing of its caller: the caller's key is checked again where the request is answered.
 * - serve_cluster_fwd.c routes requests to the owning host and places creates; serve_cluster_ops.c merges
 *   listings and moves templates.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "serve.h"
#include "serve_cluster_int.h"
#include "util/escape.h"
#include "util/util.h"

#define CLUSTER_SIG_SKEW_S 60         /* a signed request's time may be this far off */
#define CLUSTER_PEER_KEY_TTL_NS (30ull * 1000000000ull)

/* --- what this host reports ------------------------------------------------------------------------------ */

struct report {
	struct cluster_host_report h;
	char **templates, **secrets;
	char *stock;
};

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void report_free(struct report *rp)
{
	strv_free(rp->templates);
	strv_free(rp->secrets);
	free(rp->stock);
}

/* The names of the registered secrets (never a value): placement sends a create whose policy names some
 * only to a host that has them all. */
static int report_secrets(space_ctx *ctx, struct report *rp)
{
	struct space_secret_info **list = NULL;
	size_t n = 0;
	/* secrets that cannot be listed are reported as none: no create that needs one is placed here */
	int e = 0;
	if (space_secret_list(ctx, &list, &n) < 0) {
		list = NULL;
		n = 0;
	}
	if (n > CLUSTER_SECRETS_MAX)
		n = CLUSTER_SECRETS_MAX;
	rp->secrets = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; rp->secrets && i < n; i++)
		if (!(rp->secrets[i] = strdup(list[i]->name)))
			e = -ENOMEM;
	if (!rp->secrets)
		e = -ENOMEM;
	space_secret_info_list_free(list);
	rp->h.secrets = (const char *const *)rp->secrets;
	return e;
}

static void meminfo(uint64_t *total, uint64_t *avail)
{
	*total = *avail = 0;
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return;
	char line[128];
	unsigned long long v;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			*total = v * 1024;
		else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			*avail = v * 1024;
	}
	fclose(f);
}

static int report_make(struct serve_cluster *c, space_ctx *ctx, struct report *rp)
{
	memset(rp, 0, sizeof(*rp));
	rp->h.name = c->name;
	rp->h.url = c->url;
	rp->h.capacity = c->capacity;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	rp->h.cpus = n > 0 ? (uint32_t)n : 0;
	meminfo(&rp->h.mem_total, &rp->h.mem_available);
	rp->h.isolations = c->isolations;
	rp->h.version = space_version();
	struct space_pool_info *pi = NULL;
	if (space_pool_get_info(ctx, &pi) == 0) {
		rp->h.pool_free = pi->free_bytes;
		space_pool_info_free(pi);
	}
	struct space_template_info **list = NULL;
	size_t nt = 0;
	int e = space_template_list(ctx, &list, &nt);
	if (e < 0)
		return e;
	if (nt > CLUSTER_TEMPLATES_MAX)
		nt = CLUSTER_TEMPLATES_MAX;
	rp->templates = calloc(nt + 1, sizeof(char *));
	cJSON *stock = cJSON_CreateObject();
	for (size_t i = 0; rp->templates && stock && i < nt; i++) {
		rp->templates[i] = strdup(list[i]->name);
		struct space_template_warm_info w = SPACE_TEMPLATE_WARM_INFO_INIT;
		if (space_template_get_warm_info(ctx, list[i]->name, &w) == 0 && w.warm_pool_ready)
			cJSON_AddNumberToObject(stock, list[i]->name, w.warm_pool_ready);
	}
	for (size_t i = 0; i < nt; i++)
		space_template_info_free(list[i]);
	free(list);
	rp->stock = stock ? cJSON_PrintUnformatted(stock) : NULL;
	cJSON_Delete(stock);
	bool ok = rp->templates && rp->stock;
	for (size_t i = 0; ok && i < nt; i++)
		ok = rp->templates[i] != NULL;
	if (!ok) {
		report_free(rp);
		return -ENOMEM;
	}
	rp->h.templates = (const char *const *)rp->templates;
	rp->h.pool_stock_json = rp->stock;
	if ((e = report_secrets(ctx, rp)) < 0)
		report_free(rp);
	return e;
}

/* --- reconciliation: this host's sandboxes against their rows ------------------------------------------- */

struct recon {
	struct serve_cluster *c;
	space_ctx *ctx;
	struct space_sandbox_info **local;
	size_t n_local;
	bool *seen;
};

static bool alive(const struct space_sandbox_info *b)
{
	return b->status == SPACE_SANDBOX_CREATING || b->status == SPACE_SANDBOX_RUNNING ||
	       b->status == SPACE_SANDBOX_PAUSED;
}

static void recon_row(struct recon *rc, const struct cluster_sandbox *s)
{
	struct space_sandbox_info *b = NULL;
	for (size_t i = 0; i < rc->n_local && !b; i++)
		if (!strcmp(rc->local[i]->id, s->id)) {
			b = rc->local[i];
			rc->seen[i] = true;
		}
	bool here = b && alive(b);
	if (here && s->state == CLUSTER_SANDBOX_LOST) {
		if (cluster_sandbox_set(rc->c->cs, s->id, rc->c->name, CLUSTER_SANDBOX_RUNNING) == 0)
			fprintf(stderr, "space serve: cluster: sandbox %s runs here again (it was lost)\n", s->id);
	} else if (here && s->state == CLUSTER_SANDBOX_DESTROYED) {
		/* The cluster gave up on it while this host was lost. */
		space_sandbox *sb = NULL;
		int e = space_sandbox_open(rc->ctx, s->id, &sb);
		if (e == 0) {
			e = space_sandbox_destroy(sb);
			space_sandbox_free(sb);
		}
		fprintf(stderr, "space serve: cluster: sandbox %s was given up on while this host was lost: %s\n", s->id,
			e == 0 ? "destroyed" : space_strerror(e));
	} else if (!here && s->state != CLUSTER_SANDBOX_DESTROYED) {
		cluster_sandbox_set(rc->c->cs, s->id, rc->c->name, CLUSTER_SANDBOX_DESTROYED);
	}
}

struct rows {
	struct cluster_sandbox *v;
	size_t n, cap;
};

static int collect(const struct cluster_sandbox *s, void *arg)
{
	struct rows *rs = arg;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		struct cluster_sandbox *v = realloc(rs->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		rs->v = v;
		rs->cap = cap;
	}
	rs->v[rs->n++] = *s;
	return 0;
}

/* The checkpoints this host holds, for calls by checkpoint id through other hosts. */
int cluster_publish_checkpoints(struct serve_cluster *c, space_ctx *ctx)
{
	struct space_checkpoint_info **list = NULL;
	size_t n = 0;
	int e = space_checkpoint_list(ctx, NULL, &list, &n);
	if (e < 0)
		return e;
	const char **ids = calloc(n + 1, sizeof(char *)), **sbs = calloc(n + 1, sizeof(char *));
	if (ids && sbs) {
		for (size_t i = 0; i < n; i++) {
			ids[i] = list[i]->id;
			sbs[i] = list[i]->sandbox_id;
		}
		e = cluster_checkpoints_publish(c->cs, c->name, ids, sbs);
	} else {
		e = -ENOMEM;
	}
	free(ids);
	free(sbs);
	for (size_t i = 0; i < n; i++)
		space_checkpoint_info_free(list[i]);
	free(list);
	return e;
}

/* Rows first, then the local list: a sandbox made in between is in the list and gets its row (the other
 * order would find a fresh row without its sandbox and call it gone). */
static int reconcile(struct serve_cluster *c, space_ctx *ctx)
{
	struct rows rs = { 0 };
	int e = cluster_sandbox_list(c->cs, c->name, true, collect, &rs);
	struct recon rc = { .c = c, .ctx = ctx };
	if (e == 0) {
		space_sandbox_reap(ctx);
		e = space_sandbox_list(ctx, &rc.local, &rc.n_local);
	}
	if (e == 0 && !(rc.seen = calloc(rc.n_local + 1, sizeof(bool))))
		e = -ENOMEM;
	for (size_t i = 0; e == 0 && i < rs.n; i++)
		recon_row(&rc, &rs.v[i]);
	for (size_t i = 0; e == 0 && i < rc.n_local; i++) {
		if (rc.seen[i] || !alive(rc.local[i]))
			continue;
		/* Made here without a row (by `space create` on this host, or a create whose row failed). */
		e = cluster_sandbox_add(c->cs, rc.local[i]->id, c->name, rc.local[i]->template_name, NULL);
	}
	free(rc.seen);
	if (rc.local)
		space_sandbox_info_list_free(rc.local);
	free(rs.v);
	return e < 0 ? e : cluster_publish_checkpoints(c, ctx);
}

/* --- the heartbeat thread -------------------------------------------------------------------------------- */

static void on_lost(const char *host, unsigned sandboxes, void *arg)
{
	struct serve_cluster *c = arg;
	_cleanup_free_ char *h = util_escape_dup(host, 0);
	fprintf(stderr, "space serve: cluster: host %s is lost (no heartbeat for %u s): %u sandbox%s lost with it\n",
		h ? h : "?", c->lost_after_s, sandboxes, sandboxes == 1 ? "" : "es");
}

static void publish_keys(struct serve_cluster *c)
{
	char **hashes = NULL;
	pthread_mutex_lock(&c->srv->store_lock);
	int e = serve_apikey_hashes(c->srv->store, &hashes);
	pthread_mutex_unlock(&c->srv->store_lock);
	if (e < 0)
		return;
	cluster_apikeys_publish(c->cs, c->name, (const char *const *)hashes);
	for (size_t i = 0; hashes[i]; i++)
		free(hashes[i]);
	free(hashes);
}

/* One beat: 0, or -errno with the store's message. */
static int beat(struct serve_cluster *c, space_ctx *ctx)
{
	struct report rp;
	int e = report_make(c, ctx, &rp);
	if (e < 0)
		return e;
	bool was_lost = false;
	e = cluster_host_heartbeat(c->cs, &rp.h, c->incarnation, &was_lost);
	report_free(&rp);
	if (e == -ESTALE) {
		if (!atomic_exchange(&c->taken_over, true))
			fprintf(stderr, "space serve: cluster: %s: this server no longer places or serves for the cluster\n",
				cluster_errmsg());
		return e;
	}
	if (e < 0)
		return e;
	if (was_lost)
		fprintf(stderr, "space serve: cluster: this host had been marked lost: reconciling its sandboxes\n");
	if ((e = cluster_sweep(c->cs, c->lost_after_s, on_lost, c)) < 0)
		return e;
	publish_keys(c);
	return reconcile(c, ctx);
}

static void *cluster_thread(void *arg)
{
	struct serve_cluster *c = arg;
	pthread_mutex_lock(&c->lock);
	while (!c->stop && !atomic_load(&c->taken_over)) {
		pthread_mutex_unlock(&c->lock);
		struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
		o.state_dir = c->srv->state_dir;
		space_ctx *ctx = NULL;
		int e = space_ctx_new(&o, &ctx);
		if (e == 0) {
			e = beat(c, ctx);
			space_ctx_free(ctx);
		}
		if (e == -EHOSTUNREACH && !c->unreachable)
			fprintf(stderr, "space serve: cluster: %s: running sandboxes keep running; creates fail until it is back\n",
				cluster_errmsg());
		else if (e == 0 && c->unreachable)
			fprintf(stderr, "space serve: cluster: the cluster store is reachable again\n");
		else if (e < 0 && e != -EHOSTUNREACH && e != -ESTALE)
			fprintf(stderr, "space serve: cluster: heartbeat: %s\n", e == -EIO ? cluster_errmsg() : space_strerror(e));
		c->unreachable = e == -EHOSTUNREACH;
		pthread_mutex_lock(&c->lock);
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += c->heartbeat_s;
		if (!c->stop)
			pthread_cond_timedwait(&c->cond, &c->lock, &t);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* The isolations `space doctor` finds usable here. */
static void isolations_of(space_ctx *ctx, char *out, size_t n)
{
	snprintf(out, n, "jail");
	char *json = NULL;
	if (space_doctor(ctx, 0, &json) < 0)
		return;
	cJSON *j = cJSON_Parse(json);
	free(json);
	if (cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "vm"), "usable")))
		snprintf(out, n, "jail,vm");
	if (!cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "jail"), "usable")))
		snprintf(out, n, "%s", strstr(out, "vm") ? "vm" : "");
	cJSON_Delete(j);
}

int serve_cluster_start(struct serve *srv, space_ctx *ctx, const struct serve_cluster_options *o, char *err, size_t errlen)
{
	if (!cluster_name_ok(o->name)) {
		snprintf(err, errlen, "bad --cluster-host '%s' (want 1-63 of a-z, 0-9, -)", o->name);
		return -EINVAL;
	}
	struct serve_cluster *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->srv = srv;
	snprintf(c->name, sizeof(c->name), "%s", o->name);
	snprintf(c->url, sizeof(c->url), "%s", o->url);
	c->listen = o->listen;
	c->capacity = o->capacity;
	c->heartbeat_s = o->heartbeat_s;
	c->lost_after_s = o->lost_after_s;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_mutex_init(&c->peers_lock, NULL);
	int e = cluster_tls_load(o->tls_dir, c->name, &c->tls, err, errlen);
	if (e == 0)
		e = cluster_open(o->conninfo, &c->cs, err, errlen);
	if (e < 0) {
		cluster_tls_free(c->tls);
		free(c);
		return e;
	}
	isolations_of(ctx, c->isolations, sizeof(c->isolations));
	srv->cluster = c;
	srv->cluster_host = c->name;
	return 0;
}

int serve_cluster_join(struct serve *srv, space_ctx *ctx, struct MHD_Daemon *daemon, char *err, size_t errlen)
{
	struct serve_cluster *c = srv->cluster;
	int e = cluster_tls_listen(c->tls, &c->listen, daemon, err, errlen);
	if (e < 0)
		return e;
	struct report rp;
	if ((e = report_make(c, ctx, &rp)) < 0) {
		snprintf(err, errlen, "what this host holds: %s", space_strerror(e));
		return e;
	}
	/* A server of this name that still heartbeats is waited for, up to the time that makes it lost. */
	for (unsigned waited = 0;; waited++) {
		unsigned age = 0;
		e = cluster_host_register(c->cs, &rp.h, c->lost_after_s, &c->incarnation, c->key, &age);
		if (e != -EBUSY || waited > c->lost_after_s + 2)
			break;
		if (waited == 0)
			fprintf(stderr, "space serve: cluster: %s; waiting until it is %u s old\n", cluster_errmsg(),
				c->lost_after_s);
		sleep(1);
	}
	report_free(&rp);
	if (e < 0) {
		snprintf(err, errlen, "register host %s: %s", c->name, cluster_errmsg());
		return e;
	}
	atomic_store(&c->joined, true);
	publish_keys(c);
	if ((e = reconcile(c, ctx)) < 0)
		fprintf(stderr, "space serve: cluster: reconcile: %s\n",
			e == -EIO || e == -EHOSTUNREACH ? cluster_errmsg() : space_strerror(e));
	if (pthread_create(&c->thread, NULL, cluster_thread, c) != 0) {
		snprintf(err, errlen, "cannot start the heartbeat thread");
		return -EAGAIN;
	}
	c->thread_started = true;
	char shown[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &c->listen.sin_addr, shown, sizeof(shown));
	fprintf(stderr, "space serve: cluster: host %s (%s; TLS on %s:%u), capacity %u, isolations %s, incarnation %llu; "
			"heartbeat every %u s, lost after %u s\n",
		c->name, c->url, shown, ntohs(c->listen.sin_port), c->capacity, c->isolations,
		(unsigned long long)c->incarnation, c->heartbeat_s, c->lost_after_s);
	return 0;
}

bool serve_cluster_conn_peer(struct serve *srv, struct MHD_Connection *conn, char name[64])
{
	if (!srv->cluster || !srv->cluster_daemon)
		return false;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
	return ci && ci->daemon == srv->cluster_daemon && cluster_tls_conn_peer(conn, name);
}

void serve_cluster_quiesce(struct serve *srv)
{
	if (srv->cluster)
		cluster_tls_stop(srv->cluster->tls);
}

void serve_cluster_stop(struct serve *srv)
{
	struct serve_cluster *c = srv->cluster;
	if (!c)
		return;
	if (c->thread_started) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
	}
	cluster_tls_stop(c->tls);
	if (c->incarnation && !atomic_load(&c->taken_over))
		cluster_host_stop(c->cs, c->name, c->incarnation);
	srv->cluster = NULL;
	srv->cluster_host = NULL;
	cluster_close(c->cs);
	cluster_tls_free(c->tls);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->peers_lock);
	free(c);
}

static int up_host(const struct cluster_host_row *h, void *arg)
{
	struct host_refs *hs = arg;
	if (!h->up || !h->serving)
		return 0;
	if (hs->n == CLUSTER_PEERS_MAX) {
		hs->too_many = true;
		return 0;
	}
	snprintf(hs->v[hs->n].name, sizeof(hs->v[0].name), "%s", h->name);
	snprintf(hs->v[hs->n].url, sizeof(hs->v[0].url), "%s", h->url);
	hs->n++;
	return 0;
}

int cluster_up_hosts(struct serve_cluster *c, struct host_refs *ret)
{
	memset(ret, 0, sizeof(*ret));
	return cluster_host_list(c->cs, up_host, ret);
}

const char *cluster_caller_errmsg(int e)
{
	if (e == -EHOSTUNREACH)
		return "the cluster store is unreachable";
	if (e == -EIO)
		return "the cluster store failed";
	return cluster_errmsg();
}

/* --- signatures ------------------------------------------------------------------------------------------ */

void cluster_sign(const char *key, const char *method, const char *target, const char *time_s, const char *from,
		 const char *to, char out[65])
{
	char msg[8192];
	int n = snprintf(msg, sizeof(msg), "space-cluster-v1\n%s\n%s\n%s\n%s\n%s", method, target, time_s, from, to);
	unsigned char mac[32];
	unsigned len = 0;
	if (n < 0 || (size_t)n >= sizeof(msg) ||
	    !HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)msg, (size_t)n, mac, &len) || len != 32) {
		memset(out, 0, 65); /* matches no signature */
		return;
	}
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* The key of peer (cached; refresh re-reads it after a mismatch: the peer may have registered again). */
static int peer_key(struct serve_cluster *c, const char *peer, bool refresh, char key[CLUSTER_KEY_HEX + 1])
{
	uint64_t now = util_now_ns();
	pthread_mutex_lock(&c->peers_lock);
	struct peer_key *slot = NULL, *oldest = &c->peers[0];
	for (size_t i = 0; i < CLUSTER_PEERS_MAX && !slot; i++) {
		if (!strcmp(c->peers[i].name, peer))
			slot = &c->peers[i];
		else if (c->peers[i].at_ns < oldest->at_ns)
			oldest = &c->peers[i];
	}
	if (slot && !refresh && now - slot->at_ns < CLUSTER_PEER_KEY_TTL_NS) {
		memcpy(key, slot->key, sizeof(slot->key));
		pthread_mutex_unlock(&c->peers_lock);
		return 0;
	}
	pthread_mutex_unlock(&c->peers_lock);
	int e = cluster_host_key(c->cs, peer, key);
	if (e < 0)
		return e;
	pthread_mutex_lock(&c->peers_lock);
	if (!slot)
		slot = oldest;
	snprintf(slot->name, sizeof(slot->name), "%s", peer);
	memcpy(slot->key, key, sizeof(slot->key));
	slot->at_ns = now;
	pthread_mutex_unlock(&c->peers_lock);
	return 0;
}

int cluster_verify_peer(struct serve_req *r, const char *from)
{
	struct serve_cluster *c = r->srv->cluster;
	if (!c)
		return serve_reply_error(r, 401, "unauthorized", "this server is not a cluster host"), -1;
	/* Only over the cluster's TLS listener, from the host its certificate names. */
	char peer[CLUSTER_NAME_MAX];
	if (!serve_cluster_conn_peer(r->srv, r->conn, peer))
		return serve_reply_error(r, 401, "unauthorized", "requests of cluster hosts come over the cluster's TLS "
								"listener"), -1;
	if (strcmp(peer, from))
		return serve_reply_error(r, 401, "unauthorized", "a request said to come from another host over the "
								"connection of host %s", peer), -1;
	const char *ts = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Space-Cluster-Time");
	const char *sig = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Space-Cluster-Signature");
	uint64_t t;
	if (!cluster_name_ok(from) || !ts || !sig || strlen(sig) != 64 || util_parse_uint(ts, 0, UINT64_MAX, &t) < 0)
		return serve_reply_error(r, 401, "unauthorized", "a malformed cluster signature"), -1;
	int64_t skew = (int64_t)t - (int64_t)time(NULL);
	if (skew > CLUSTER_SIG_SKEW_S || skew < -CLUSTER_SIG_SKEW_S)
		return serve_reply_error(r, 401, "unauthorized", "a cluster signature %lld s off this host's clock",
					 (long long)skew), -1;
	_cleanup_free_ char *target = serve_fwd_target(r);
	if (!target)
		return serve_reply_error(r, 500, "internal", "out of memory"), -1;
	for (int pass = 0; pass < 2; pass++) {
		char key[CLUSTER_KEY_HEX + 1], want[65];
		int e = peer_key(c, from, pass == 1, key);
		if (e == -EHOSTUNREACH)
			return serve_reply_error(r, 503, "cluster_unavailable", "%s", cluster_caller_errmsg(e)), -1;
		if (e < 0)
			break;
		cluster_sign(key, r->method, target, ts, from, c->name, want);
		OPENSSL_cleanse(key, sizeof(key));
		if (CRYPTO_memcmp(want, sig, 64) == 0) {
			r->cluster_peer = true;
			return 1;
		}
	}
	return serve_reply_error(r, 401, "unauthorized", "a cluster signature that does not hold"), -1;
}

void serve_cluster_after(struct serve_req *r)
{
	struct serve_cluster *c = r->srv->cluster;
	if (!c || r->status / 100 != 2 || !r->route)
		return;
	/* A checkpoint made or removed here: published now, for a fork through another host right after. */
	if ((!strcmp(r->method, "POST") && !strcmp(r->route->pattern, "/v1/sandboxes/{id}/checkpoints")) ||
	    (!strcmp(r->method, "DELETE") && !strcmp(r->route->pattern, "/v1/checkpoints/{id}"))) {
		int e = r->ctx ? cluster_publish_checkpoints(c, r->ctx) : -EINVAL;
		if (e < 0) /* the next heartbeat publishes them */
			fprintf(stderr, "space serve: cluster: publish this host's checkpoints: %s\n",
				e == -EIO || e == -EHOSTUNREACH ? cluster_errmsg() : space_strerror(e));
		return;
	}
	if (strcmp(r->method, "DELETE") ||
	    (strcmp(r->route->pattern, "/v1/sandboxes/{id}") && strcmp(r->route->pattern, "/sandboxes/{id}")))
		return;
	if (cluster_sandbox_set(c->cs, r->params[0], c->name, CLUSTER_SANDBOX_DESTROYED) < 0) /* reconciliation will */
		fprintf(stderr, "space serve: cluster: record the removal of %s: %s\n", r->params[0], cluster_errmsg());
}

int serve_cluster_apikey_check(struct serve *srv, const char *key)
{
	if (!srv->cluster)
		return -EACCES;
	char hash[65];
	serve_apikey_hash_hex(key, hash);
	int e = cluster_apikey_check(srv->cluster->cs, hash);
	/* (An unreachable store is logged once by the heartbeat, not once per caller's request.) */
	if (e < 0 && e != -EACCES && e != -EHOSTUNREACH)
		fprintf(stderr, "space serve: cluster: check an API key: %s\n", cluster_errmsg());
	return e;
}
