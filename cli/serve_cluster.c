/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve --cluster`: this host as one of several sharing a control plane in PostgreSQL
 * (cli/cluster_store.c; docs/cluster.md).
 *
 * - A thread registers the host, heartbeats its report (capacity, what it holds, warm-pool stock), marks
 *   hosts that stopped heartbeating lost (any host may; the statement is idempotent), publishes the
 *   hashes of this host's API keys, and reconciles this host's sandboxes with their rows.
 * - A create is placed (cluster_place) and made here or forwarded to the chosen host.
 * - A request for a sandbox another host owns is forwarded there as it came (its body streamed), and the
 *   answer streamed back. The forwarding host authenticates the caller's API key; the owner accepts a
 *   forwarded request as authenticated only with a valid signature of the forwarding host (HMAC-SHA256
 *   under that host's key, from the cluster store, over method, target, time and both names). envd and
 *   port requests are authenticated by the owner itself (their access token lives there).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "serve.h"
#include "serve_e2b.h"
#include "cluster_store.h"
#include "util/escape.h"
#include "util/util.h"

#define CLUSTER_SIG_SKEW_S 60         /* a signed request's time may be this far off */
#define CLUSTER_PEER_KEY_TTL_NS (30ull * 1000000000ull)
#define CLUSTER_CONNECT_TIMEOUT_MS 3000
#define CLUSTER_PEERS_MAX 32

struct peer_key {
	char name[CLUSTER_NAME_MAX];
	char key[CLUSTER_KEY_HEX + 1];
	uint64_t at_ns;
};

struct serve_cluster {
	struct cluster_store *cs;
	struct serve *srv;
	char name[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
	char key[CLUSTER_KEY_HEX + 1];
	char isolations[16];
	struct cluster_tls *tls;
	struct sockaddr_in listen;
	uint64_t incarnation;
	uint32_t capacity;
	unsigned heartbeat_s, lost_after_s;

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool unreachable;             /* the last heartbeat could not reach the store (said once) */
	atomic_bool taken_over;       /* another server registered this host's name: this one stands aside */
	atomic_bool joined;           /* registered: it may place, forward and be forwarded to */

	pthread_mutex_t peers_lock;
	struct peer_key peers[CLUSTER_PEERS_MAX];
};

/* --- what this host reports ------------------------------------------------------------------------------ */

struct report {
	struct cluster_host_report h;
	char **templates;
	char *stock;
};

static void report_free(struct report *rp)
{
	for (size_t i = 0; rp->templates && rp->templates[i]; i++)
		free(rp->templates[i]);
	free(rp->templates);
	free(rp->stock);
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
	return 0;
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
static int publish_checkpoints(struct serve_cluster *c, space_ctx *ctx)
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
	return e < 0 ? e : publish_checkpoints(c, ctx);
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

/* --- signatures ------------------------------------------------------------------------------------------ */

static void sign(const char *key, const char *method, const char *target, const char *time_s, const char *from,
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

/* A request that says it comes from a host of the cluster: 1 when its signature holds, else answered. */
static int verify_peer(struct serve_req *r, const char *from)
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
			return serve_reply_error(r, 503, "cluster_unavailable", "%s", cluster_errmsg()), -1;
		if (e < 0)
			break;
		sign(key, r->method, target, ts, from, c->name, want);
		OPENSSL_cleanse(key, sizeof(key));
		if (CRYPTO_memcmp(want, sig, 64) == 0) {
			r->cluster_peer = true;
			return 1;
		}
	}
	return serve_reply_error(r, 401, "unauthorized", "a cluster signature that does not hold"), -1;
}

/* --- forwarding ------------------------------------------------------------------------------------------ */

/* Our headers of a forwarded request: who signs it for whom, and (a create) the placement's claim. */
static int sign_headers(struct serve_cluster *c, struct serve_req *r, const char *target, const char *to,
			const char *claim, char *out, size_t n)
{
	char ts[24], sig[65];
	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	sign(c->key, r->method, target, ts, c->name, to, sig);
	int k = snprintf(out, n, "X-Space-Cluster-From: %s\r\nX-Space-Cluster-Time: %s\r\nX-Space-Cluster-Signature: %s\r\n%s%s%s",
			 c->name, ts, sig, claim ? "X-Space-Cluster-Claim: " : "", claim ? claim : "", claim ? "\r\n" : "");
	return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

struct fwd {
	int fd;
	char host[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
	bool head_sent;               /* streamed: the head went with the client's Content-Length */
};

static void fwd_free(struct serve_req *r)
{
	struct fwd *f = r->state;
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	free(f);
	r->state = NULL;
	r->state_free = NULL;
}

static enum MHD_Result host_error(struct serve_req *r, const char *host, int e)
{
	return serve_reply_error(r, 502, "host_unreachable", "host %s of the cluster did not answer: %s", host,
				 space_strerror(e));
}

/* Connects to the owner and sends the head (now, with the client's Content-Length, when there is one). */
static int fwd_open(struct serve_req *r, struct fwd *f, const char *claim, long long length)
{
	struct serve_cluster *c = r->srv->cluster;
	_cleanup_free_ char *target = serve_fwd_target(r);
	if (!target)
		return -ENOMEM;
	char extra[512];
	int e = sign_headers(c, r, target, f->host, claim, extra, sizeof(extra));
	if (e < 0)
		return e;
	f->fd = cluster_tls_connect(c->tls, f->url, f->host);
	if (f->fd < 0)
		return f->fd;
	return serve_fwd_head(r, f->fd, target, false, extra, length);
}

static int fwd_sink(struct serve_req *r, const char *data, size_t len)
{
	struct fwd *f = r->state;
	if (!f->head_sent) {
		/* No Content-Length: the body is collected (a JSON-size body at most) and sent at the end. */
		if (r->body_len + len > SERVE_JSON_BODY_MAX)
			return -EFBIG;
		char *nb = realloc(r->body, r->body_len + len + 1);
		if (!nb)
			return -ENOMEM;
		memcpy(nb + r->body_len, data, len);
		r->body = nb;
		r->body_len += len;
		r->body[r->body_len] = '\0';
		return 0;
	}
	return serve_fwd_send(f->fd, data, len);
}

static enum MHD_Result fwd_start(struct serve_req *r)
{
	struct fwd *f = r->state;
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t len;
	r->sink = fwd_sink;
	if (!cl || util_parse_uint(cl, 0, (uint64_t)1 << 62, &len) < 0)
		return MHD_YES; /* sent at the end */
	int e = fwd_open(r, f, NULL, (long long)len);
	if (e < 0) {
		host_error(r, f->host, e);
		fwd_free(r);
		return MHD_YES;
	}
	f->head_sent = true;
	return MHD_YES;
}

static enum MHD_Result fwd_run(struct serve_req *r)
{
	struct fwd *f = r->state;
	if (r->sink_error)
		return r->sink_error == -EFBIG
			       ? serve_reply_error(r, 413, "too_large", "a body without Content-Length is over %u bytes",
						   SERVE_JSON_BODY_MAX)
			       : host_error(r, f->host, r->sink_error);
	int e = 0;
	if (!f->head_sent) {
		e = fwd_open(r, f, NULL, -1);
		if (e == 0 && r->body_len)
			e = serve_fwd_send(f->fd, r->body, r->body_len);
	}
	if (e < 0)
		return host_error(r, f->host, e);
	int fd = f->fd;
	f->fd = -1;
	char what[96];
	snprintf(what, sizeof(what), "host %s of the cluster", f->host);
	fwd_free(r);
	return serve_fwd_answer(r, fd, true, what);
}

/* Forwarded requests: the caller's key is checked here (KEY), or by the owner (envd, ports: their token). */
static const struct serve_route fwd_key_route = { "*", "(cluster: forwarded)", SERVE_AUTH_KEY, true, fwd_start, fwd_run };
static const struct serve_route fwd_open_route = { "*", "(cluster: forwarded)", SERVE_AUTH_NONE, true, fwd_start, fwd_run };

static const struct serve_route lost_open_route;

static enum MHD_Result lost_run(struct serve_req *r)
{
	struct serve_cluster *c = r->srv->cluster;
	const char *id = r->params[0];
	const char *host = r->params[1];
	bool del = !strcmp(r->method, "DELETE") && r->cluster_delete;
	if (del) {
		int e = cluster_sandbox_give_up(c->cs, id);
		if (e == 0) {
			fprintf(stderr, "space serve: cluster: sandbox %s on lost host %s given up on: its host destroys it when "
					"it is back\n", id, host);
			cJSON *j = cJSON_CreateObject();
			cJSON_AddStringToObject(j, "id", id);
			cJSON_AddStringToObject(j, "state", "destroyed");
			cJSON_AddStringToObject(j, "host", host);
			return serve_reply_json(r, 202, j);
		}
		if (e == -EHOSTUNREACH)
			return serve_reply_error(r, 503, "cluster_unavailable", "%s", cluster_errmsg());
	}
	if (r->route == &lost_open_route) /* not authenticated: the sandbox's token lives on that host */
		return serve_reply_error(r, 503, "host_lost", "sandbox %s is on a host that is lost", id);
	return serve_reply_error(r, 503, "host_lost", "%s %s is on host %s, which is lost (no heartbeat for %u s or more)",
				 !strncmp(id, "cp-", 3) ? "checkpoint" : "sandbox", id, host, c->lost_after_s);
}

static const struct serve_route lost_key_route = { "*", "(cluster: lost host)", SERVE_AUTH_KEY, false, NULL, lost_run };
static const struct serve_route lost_open_route = { "*", "(cluster: lost host)", SERVE_AUTH_NONE, false, NULL,
						    lost_run };

/* The sandbox a path names: /v1/sandboxes/ID..., /sandboxes/ID..., /v2/sandboxes/ID... */
static bool path_sandbox(const char *path, char id[CLUSTER_ID_MAX], bool *ret_whole)
{
	static const char *const prefixes[] = { "/v1/sandboxes/", "/v2/sandboxes/", "/sandboxes/" };
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);
		if (strncmp(path, prefixes[i], pl))
			continue;
		const char *s = path + pl;
		size_t n = strcspn(s, "/");
		if (n == 0 || n >= CLUSTER_ID_MAX)
			return false;
		memcpy(id, s, n);
		id[n] = '\0';
		*ret_whole = s[n] == '\0';
		return true;
	}
	return false;
}

/* The checkpoint a path names: /v1/checkpoints/ID... */
static bool path_checkpoint(const char *path, char id[CLUSTER_ID_MAX])
{
	static const char prefix[] = "/v1/checkpoints/";
	if (strncmp(path, prefix, sizeof(prefix) - 1))
		return false;
	const char *s = path + sizeof(prefix) - 1;
	size_t n = strcspn(s, "/");
	if (n == 0 || n >= CLUSTER_ID_MAX)
		return false;
	memcpy(id, s, n);
	id[n] = '\0';
	return true;
}

static bool local_checkpoint(struct serve_req *r, const char *id)
{
	space_ctx *ctx = serve_req_ctx(r);
	struct space_checkpoint_info *info = NULL;
	if (!ctx || space_checkpoint_get(ctx, id, &info) < 0)
		return false;
	space_checkpoint_info_free(info);
	return true;
}

static bool local_alive(struct serve_req *r, const char *id)
{
	space_ctx *ctx = serve_req_ctx(r);
	enum space_sandbox_status st;
	if (!ctx)
		return false;
	return space_sandbox_get_status(ctx, id, &st) == 0 && st != SPACE_SANDBOX_DESTROYED;
}

int serve_cluster_dispatch(struct serve_req *r)
{
	struct serve_cluster *c = r->srv->cluster;
	const char *from = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Space-Cluster-From");
	r->cluster_create = c && !strcmp(r->method, "POST") &&
			    (!strcmp(r->path, "/v1/sandboxes") || !strcmp(r->path, "/sandboxes") ||
			     !strcmp(r->path, "/v2/sandboxes"));
	if (from)
		return verify_peer(r, from) < 0 ? -1 : 0; /* handled here: never forwarded again */
	char peer[CLUSTER_NAME_MAX];
	if (serve_cluster_conn_peer(r->srv, r->conn, peer)) {
		serve_reply_error(r, 401, "unauthorized", "a request of host %s without its signature", peer);
		return -1;
	}
	if (!c || r->cluster_create)
		return 0;
	bool joined = atomic_load(&c->joined) && !atomic_load(&c->taken_over);
	char id[CLUSTER_ID_MAX];
	bool by_token = serve_port_sandbox(r, id), whole = false, checkpoint = false;
	if (!by_token && !path_sandbox(r->path, id, &whole) && !(checkpoint = path_checkpoint(r->path, id)))
		return 0;
	if (checkpoint ? local_checkpoint(r, id) : local_alive(r, id))
		return 0;
	if (!joined) {
		serve_reply_error(r, 503, "cluster_unavailable", "this host has not joined the cluster (yet): it cannot reach "
								 "sandbox %s elsewhere", id);
		return -1;
	}
	struct cluster_sandbox s;
	int e = checkpoint ? cluster_checkpoint_get(c->cs, id, &s) : cluster_sandbox_get(c->cs, id, &s);
	if (e == -ENOENT || (e == 0 && (!strcmp(s.host, c->name) || s.state == CLUSTER_SANDBOX_DESTROYED)))
		return 0; /* answered here, as any unknown sandbox */
	if (e < 0) {
		serve_reply_error(r, 503, "cluster_unavailable", "where %s lives: %s", id, cluster_errmsg());
		return -1;
	}
	snprintf(r->params[0], sizeof(r->params[0]), "%s", id);
	snprintf(r->params[1], sizeof(r->params[1]), "%s", s.host);
	if (s.state == CLUSTER_SANDBOX_LOST) {
		r->cluster_delete = whole && !by_token;
		r->route = by_token ? &lost_open_route : &lost_key_route;
		return 1;
	}
	struct fwd *f = calloc(1, sizeof(*f));
	if (!f) {
		serve_reply_error(r, 500, "internal", "out of memory");
		return -1;
	}
	f->fd = -1;
	snprintf(f->host, sizeof(f->host), "%s", s.host);
	snprintf(f->url, sizeof(f->url), "%s", s.url);
	r->state = f;
	r->state_free = fwd_free;
	r->route = by_token ? &fwd_open_route : &fwd_key_route;
	return 1;
}

/* --- creates --------------------------------------------------------------------------------------------- */

static enum MHD_Result create_error(struct serve_req *r, bool e2b, unsigned status, const char *code, const char *msg)
{
	if (e2b)
		return e2b_api_error(r, status, "%s", msg);
	return serve_reply_error(r, status, code, "%s", msg);
}

/* Runs the create here and records the sandbox (with the claim that placed it here, if any). */
static enum MHD_Result create_here(struct serve_req *r, const char *template, const char *claim)
{
	enum MHD_Result ret = r->route->run(r);
	struct serve_cluster *c = r->srv->cluster;
	if (c && claim && r->status != 201)
		cluster_claim_drop(c->cs, claim);
	if (c && r->status == 201 && r->sb) {
		int e = cluster_sandbox_add(c->cs, space_sandbox_id(r->sb), c->name, template, claim);
		if (e < 0) /* the heartbeat's reconciliation adds it */
			fprintf(stderr, "space serve: cluster: record sandbox %s: %s\n", space_sandbox_id(r->sb), cluster_errmsg());
	}
	return ret;
}

enum MHD_Result serve_cluster_create(struct serve_req *r)
{
	struct serve_cluster *c = r->srv->cluster;
	bool e2b = strncmp(r->path, "/v1/", 4) != 0;
	/* What placement needs of the body; the create's own checks answer anything else. */
	cJSON *j = cJSON_ParseWithLength(r->body ? r->body : "", r->body_len);
	const char *tpl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, e2b ? "templateID" : "template"));
	const char *iso = e2b ? NULL : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "isolation"));
	char template[64] = "", isolation[8] = "";
	/* (no template: "base", the library's default, on either plane) */
	snprintf(template, sizeof(template), "%s", tpl ? tpl : "base");
	snprintf(isolation, sizeof(isolation), "%s", iso && (!strcmp(iso, "vm") || !strcmp(iso, "jail")) ? iso : "");
	bool placeable = j && cJSON_IsObject(j) && strlen(template) < sizeof(template) - 1;
	cJSON_Delete(j);
	if (r->cluster_peer || !c || !placeable) /* the claim of the host that placed it here */
		return create_here(r, template, r->cluster_peer ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
											      "X-Space-Cluster-Claim") : NULL);
	if (atomic_load(&c->taken_over))
		return create_error(r, e2b, 503, "cluster_unavailable",
				    "this server no longer serves for the cluster: another server took over its host name");
	if (!atomic_load(&c->joined))
		return create_error(r, e2b, 503, "cluster_unavailable", "this host has not joined the cluster yet");
	char host[CLUSTER_NAME_MAX], url[CLUSTER_URL_MAX], claim[33], avoid[CLUSTER_NAME_MAX] = "";
	/* A host that does not take the connection (gone, not yet lost) is avoided once: placed again. */
	for (int attempt = 0;; attempt++) {
		uint64_t t0 = util_now_ns();
		int e = cluster_place(c->cs, template, isolation, c->lost_after_s, avoid, host, url, claim);
		r->cluster_place_ns += util_now_ns() - t0;
		if (e < 0) {
			char msg[600];
			snprintf(msg, sizeof(msg), "place a sandbox of template '%s': %s", template, cluster_errmsg());
			if (e == -ENOENT)
				return create_error(r, e2b, 404, "not_found", msg);
			return create_error(r, e2b, 503,
					    e == -ENOSPC ? "no_capacity" : e == -EHOSTDOWN ? "no_host" : "cluster_unavailable", msg);
		}
		if (!strcmp(host, c->name))
			return create_here(r, template, claim);
		/* Placed on another host: the request goes there as it came, with the claim. */
		struct fwd f = { .fd = -1 };
		snprintf(f.host, sizeof(f.host), "%s", host);
		snprintf(f.url, sizeof(f.url), "%s", url);
		e = fwd_open(r, &f, claim, (long long)r->body_len);
		if (f.fd < 0 && attempt == 0) {
			fprintf(stderr, "space serve: cluster: host %s did not take a create (%s): placing it again\n", host,
				space_strerror(e));
			cluster_claim_drop(c->cs, claim);
			snprintf(avoid, sizeof(avoid), "%s", host);
			continue;
		}
		if (e == 0 && r->body_len)
			e = serve_fwd_send(f.fd, r->body, r->body_len);
		if (e < 0) {
			if (f.fd >= 0)
				close(f.fd);
			cluster_claim_drop(c->cs, claim);
			return host_error(r, host, e);
		}
		char what[96];
		snprintf(what, sizeof(what), "host %s of the cluster", host);
		enum MHD_Result ret = serve_fwd_answer(r, f.fd, true, what);
		if (r->status != 201) /* not made there: its claim holds no capacity any longer */
			cluster_claim_drop(c->cs, claim);
		return ret;
	}
}

/* --- listings across the hosts --------------------------------------------------------------------------- */

#define CLUSTER_LIST_ANSWER_MAX (64u << 20)
#define CLUSTER_LIST_TIMEOUT_S 10

bool serve_cluster_list_wanted(struct serve_req *r)
{
	return r->srv->cluster && !r->cluster_peer && !strcmp(r->method, "GET") &&
	       (!strcmp(r->path, "/v1/sandboxes") || !strcmp(r->path, "/sandboxes") || !strcmp(r->path, "/v2/sandboxes"));
}

struct host_ref {
	char name[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
};

struct host_refs {
	struct host_ref v[CLUSTER_PEERS_MAX];
	size_t n;
	bool too_many;
};

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

/* The request, signed, to host h; its whole answer: status, body (*ret_body, NUL-terminated, the caller's)
 * and its X-Next-Token (into next, "" when none). -errno when it could not be had. */
static int fetch_page(struct serve_cluster *c, struct serve_req *r, const char *target, const struct host_ref *h,
		      unsigned *ret_status, char **ret_body, char next[96])
{
	char extra[512];
	int e = sign_headers(c, r, target, h->name, NULL, extra, sizeof(extra));
	if (e < 0)
		return e;
	int fd = cluster_tls_connect(c->tls, h->url, h->name);
	if (fd < 0)
		return fd;
	struct timeval tv = { .tv_sec = CLUSTER_LIST_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	e = serve_fwd_head(r, fd, target, false, extra, -1);
	size_t len = 0, cap = 64 << 10;
	char *buf = e == 0 ? malloc(cap + 1) : NULL;
	if (e == 0 && !buf)
		e = -ENOMEM;
	while (e == 0) {
		if (len == cap) {
			char *nb = cap < CLUSTER_LIST_ANSWER_MAX ? realloc(buf, 2 * cap + 1) : NULL;
			if (!nb) {
				e = -EMSGSIZE;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t n = recv(fd, buf + len, cap - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			e = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (e < 0) {
		free(buf);
		return e;
	}
	buf[len] = '\0';
	char *end = strstr(buf, "\r\n\r\n");
	unsigned st = 0;
	if (!end || sscanf(buf, "HTTP/1.%*1[01] %3u", &st) != 1) {
		free(buf);
		return -EBADMSG;
	}
	*end = '\0';
	next[0] = '\0';
	for (char *line = strstr(buf, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
		if (!strncasecmp(line + 2, "X-Next-Token:", 13)) {
			const char *v = line + 15;
			while (*v == ' ')
				v++;
			snprintf(next, 96, "%.*s", (int)strcspn(v, "\r"), v);
		}
	}
	memmove(buf, end + 4, len - (size_t)(end + 4 - buf) + 1);
	*ret_status = st;
	*ret_body = buf;
	return 0;
}

struct listed {
	cJSON *item;
	long long created_ms;
	const char *id;
};

static int listed_cmp(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

enum MHD_Result serve_cluster_list(struct serve_req *r)
{
	struct serve_cluster *c = r->srv->cluster;
	bool native = !strncmp(r->path, "/v1/", 4);
	uint64_t limit = native ? SERVE_V1_LIST_LIMIT_DEFAULT : UINT32_MAX;
	const char *ls = serve_query(r, "limit");
	if (ls && util_parse_uint(ls, 1, UINT32_MAX, &limit) < 0)
		limit = 1; /* each host refuses it, and so is the answer */
	struct host_refs hs = { 0 };
	int e = atomic_load(&c->joined) ? cluster_host_list(c->cs, up_host, &hs) : -EHOSTUNREACH;
	if (e < 0)
		return serve_reply_error(r, 503, "cluster_unavailable", "list the hosts of the cluster: %s",
					 atomic_load(&c->joined) ? cluster_errmsg() : "this host has not joined the cluster yet");
	_cleanup_free_ char *target = serve_fwd_target(r);
	cJSON *pages = cJSON_CreateArray();
	struct listed *v = NULL;
	size_t n = 0, cap = 0;
	bool more = hs.too_many;
	char missing[512] = "";
	for (size_t i = 0; target && pages && i < hs.n; i++) {
		unsigned st = 0;
		char *body = NULL, next[96];
		e = fetch_page(c, r, target, &hs.v[i], &st, &body, next);
		if (e == 0 && st >= 400 && st < 500) {
			/* The caller's mistake (a bad limit or cursor): every host says the same; this one's answer. */
			cJSON *err = cJSON_Parse(body);
			free(body);
			free(v);
			cJSON_Delete(pages);
			return err ? serve_reply_json(r, st, err) : serve_reply_error(r, st, "invalid", "refused by host %s",
											 hs.v[i].name);
		}
		cJSON *page = e == 0 && st == 200 ? cJSON_Parse(body) : NULL;
		free(body);
		cJSON *arr = native ? cJSON_GetObjectItemCaseSensitive(page, "sandboxes") : page;
		if (!cJSON_IsArray(arr)) {
			fprintf(stderr, "space serve: cluster: list the sandboxes of host %s: %s\n", hs.v[i].name,
				e < 0 ? space_strerror(e) : st != 200 ? "it did not answer 200" : "not a listing");
			size_t ml = strlen(missing);
			snprintf(missing + ml, sizeof(missing) - ml, "%s%s", ml ? "," : "", hs.v[i].name);
			cJSON_Delete(page);
			continue;
		}
		more = more || *next || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(page, "next_cursor"));
		cJSON_AddItemToArray(pages, page); /* owns the items the vector points at */
		cJSON *item;
		cJSON_ArrayForEach(item, arr) {
			const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(item, native ? "id" : "sandboxID"));
			cJSON *ms = cJSON_GetObjectItemCaseSensitive(item, native ? "created_ms" : SERVE_CLUSTER_ORDER_FIELD);
			if (!id || !cJSON_IsNumber(ms))
				continue;
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 256;
				struct listed *nv = realloc(v, nc * sizeof(*v));
				if (!nv)
					break;
				v = nv;
				cap = nc;
			}
			v[n++] = (struct listed){ item, (long long)ms->valuedouble, id };
		}
	}
	if (!target || !pages) {
		free(v);
		cJSON_Delete(pages);
		return serve_reply_error(r, 500, "internal", "out of memory");
	}
	if (n)
		qsort(v, n, sizeof(*v), listed_cmp);
	size_t taken = n < limit ? n : (size_t)limit;
	more = more || n > taken;
	char cursor[96] = "";
	if (more && taken)
		snprintf(cursor, sizeof(cursor), "%lld_%s", v[taken - 1].created_ms, v[taken - 1].id);
	cJSON *out = cJSON_CreateArray();
	for (size_t i = 0; out && i < taken; i++) {
		cJSON *copy = cJSON_Duplicate(v[i].item, true);
		cJSON_DeleteItemFromObjectCaseSensitive(copy, SERVE_CLUSTER_ORDER_FIELD);
		cJSON_AddItemToArray(out, copy);
	}
	free(v);
	cJSON_Delete(pages);
	if (!out)
		return serve_reply_error(r, 500, "internal", "out of memory");
	struct MHD_Response *resp;
	if (native) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddItemToObject(j, "sandboxes", out);
		if (*cursor)
			cJSON_AddStringToObject(j, "next_cursor", cursor);
		else
			cJSON_AddNullToObject(j, "next_cursor");
		out = j;
	}
	char *text = cJSON_PrintUnformatted(out);
	cJSON_Delete(out);
	if (!text)
		return serve_reply_error(r, 500, "internal", "out of memory");
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (!native && *cursor)
		MHD_add_response_header(resp, "X-Next-Token", cursor);
	if (*missing)
		MHD_add_response_header(resp, "X-Space-Cluster-Missing", missing);
	return serve_reply(r, 200, resp);
}

void serve_cluster_after(struct serve_req *r)
{
	struct serve_cluster *c = r->srv->cluster;
	if (!c || r->status / 100 != 2 || !r->route)
		return;
	/* A checkpoint made or removed here: published now, for a fork through another host right after. */
	if ((!strcmp(r->method, "POST") && !strcmp(r->route->pattern, "/v1/sandboxes/{id}/checkpoints")) ||
	    (!strcmp(r->method, "DELETE") && !strcmp(r->route->pattern, "/v1/checkpoints/{id}"))) {
		int e = r->ctx ? publish_checkpoints(c, r->ctx) : -EINVAL;
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
	if (e < 0 && e != -EACCES)
		fprintf(stderr, "space serve: cluster: check an API key: %s\n", cluster_errmsg());
	return e;
}
