/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve --cluster`: a request's first look (a host's signed request, or one for another host's
 * sandbox or checkpoint), its forwarding to the owning host over the cluster's TLS (body and answer
 * streamed), the answers for a lost host, and creates: placed, then made here or forwarded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"
#include "serve_e2b.h"
#include "serve_cluster_int.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* --- forwarding ------------------------------------------------------------------------------------------ */

int cluster_sign_headers(struct serve_cluster *c, const char *method, const char *target, const char *to,
			const char *claim, char *out, size_t n)
{
	char ts[24], sig[65];
	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	cluster_sign(c->key, method, target, ts, c->name, to, sig);
	int k = snprintf(out, n, "X-Space-Cluster-From: %s\r\nX-Space-Cluster-Time: %s\r\nX-Space-Cluster-Signature: %s\r\n%s%s%s",
			 c->name, ts, sig, claim ? "X-Space-Cluster-Claim: " : "", claim ? claim : "", claim ? "\r\n" : "");
	return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

struct fwd {
	int fd;
	char host[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
	bool head_sent;               /* streamed: the head went with the client's Content-Length */
	char pull_from[CLUSTER_NAME_MAX]; /* a create: the host its owner pulls the template from first */
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

enum MHD_Result cluster_host_error(struct serve_req *r, const char *host, int e)
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
	char extra[640];
	int e = cluster_sign_headers(c, r->method, target, f->host, claim, extra, sizeof(extra));
	if (e < 0)
		return e;
	if (f->pull_from[0]) {
		/* a create placed on a host that pulls its template first (over this authenticated connection) */
		size_t at = strlen(extra);
		if ((size_t)snprintf(extra + at, sizeof(extra) - at, "X-Space-Cluster-Pull: %s\r\n", f->pull_from) >=
		    sizeof(extra) - at)
			return -ENAMETOOLONG;
	}
	f->fd = cluster_tls_take(c->tls, f->url, f->host);
	if (f->fd < 0)
		return f->fd;
	return serve_fwd_head(r, f->fd, target, false, extra, length, true);
}

/* The owner's answer; its connection is kept for the next request to that host once read whole, unless
 * the request's body was streamed (an owner that answered before reading all of it may still be reading). */
static enum MHD_Result fwd_answer(struct serve_req *r, int fd, const char *host, bool streamed)
{
	char what[96];
	snprintf(what, sizeof(what), "host %s of the cluster", host);
	const struct serve_fwd_keep keep = { streamed ? NULL : cluster_tls_give, r->srv->cluster->tls, host };
	return serve_fwd_answer(r, fd, true, what, &keep);
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
		cluster_host_error(r, f->host, e);
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
			       : cluster_host_error(r, f->host, r->sink_error);
	int e = 0;
	if (!f->head_sent) {
		e = fwd_open(r, f, NULL, -1);
		if (e == 0 && r->body_len)
			e = serve_fwd_send(f->fd, r->body, r->body_len);
	}
	if (e < 0)
		return cluster_host_error(r, f->host, e);
	int fd = f->fd;
	f->fd = -1;
	char host[CLUSTER_NAME_MAX];
	snprintf(host, sizeof(host), "%s", f->host);
	bool streamed = f->head_sent;
	fwd_free(r);
	return fwd_answer(r, fd, host, streamed);
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
			return serve_reply_error(r, 503, "cluster_unavailable", "%s", cluster_caller_errmsg(e));
	}
	if (r->route == &lost_open_route) /* not authenticated: the sandbox's token lives on that host */
		return serve_reply_error(r, 503, "host_lost", "sandbox %s is on a host that is lost", id);
	return serve_reply_error(r, 503, "host_lost", "%s %s is on host %s, which is lost (no heartbeat for %u s or more)",
				 !strncmp(id, "cp-", 3) ? "checkpoint" : "sandbox", id, host, c->lost_after_s);
}

static const struct serve_route lost_key_route = { "*", "(cluster: lost host)", SERVE_AUTH_KEY, false, NULL, lost_run };
static const struct serve_route lost_open_route = { "*", "(cluster: lost host)", SERVE_AUTH_NONE, false, NULL,
						    lost_run };

/* The id a path names after one of prefixes (NULL-terminated): the segment that follows, into id; *ret_whole:
 * nothing follows it. */
static bool path_id(const char *path, const char *const *prefixes, char id[CLUSTER_ID_MAX], bool *ret_whole)
{
	for (size_t i = 0; prefixes[i]; i++) {
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

/* The sandbox a path names: /v1/sandboxes/ID..., /sandboxes/ID..., /v2/sandboxes/ID... */
static bool path_sandbox(const char *path, char id[CLUSTER_ID_MAX], bool *ret_whole)
{
	static const char *const prefixes[] = { "/v1/sandboxes/", "/v2/sandboxes/", "/sandboxes/", NULL };
	return path_id(path, prefixes, id, ret_whole);
}

/* The checkpoint a path names: /v1/checkpoints/ID... */
static bool path_checkpoint(const char *path, char id[CLUSTER_ID_MAX])
{
	static const char *const prefixes[] = { "/v1/checkpoints/", NULL };
	bool whole;
	return path_id(path, prefixes, id, &whole);
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
		return cluster_verify_peer(r, from) < 0 ? -1 : 0; /* handled here: never forwarded again */
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
		serve_reply_error(r, 503, "cluster_unavailable", "where %s lives: %s", id, cluster_caller_errmsg(e));
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
static enum MHD_Result create_here(struct serve_req *r, const char *template, const char *claim, const char *pull_from)
{
	struct serve_cluster *c = r->srv->cluster;
	if (c && pull_from && pull_from[0] && cluster_name_ok(pull_from) && strcmp(pull_from, c->name)) {
		/* placed here to pull the template first: every host holding it is full */
		space_ctx *ctx = serve_req_ctx(r);
		struct space_template_info *t = NULL;
		if (!ctx)
			return MHD_YES;
		if (space_template_get(ctx, template, &t) == 0) {
			space_template_info_free(t);
		} else {
			char err[600];
			int e = serve_cluster_fetch_template(r, pull_from, template, err, sizeof(err));
			fprintf(stderr, "space serve: cluster: template %s pulled from host %s for a create: %s (%llu ms)\n",
				template, pull_from, e < 0 ? err : "done", (unsigned long long)(r->cluster_pull_ns / 1000000));
			if (e < 0) {
				if (claim)
					cluster_claim_drop(c->cs, claim);
				bool e2b = strncmp(r->path, "/v1/", 4) != 0;
				return create_error(r, e2b, e == -EACCES ? 400 : 503, e == -EACCES ? "invalid" : "template_pull_failed",
						    err);
			}
		}
	}
	enum MHD_Result ret = r->route->run(r);
	if (c && claim && r->status != 201)
		cluster_claim_drop(c->cs, claim);
	if (c && r->status == 201 && r->sb) {
		int e = cluster_sandbox_add(c->cs, space_sandbox_id(r->sb), c->name, template, claim);
		if (e < 0) /* the heartbeat's reconciliation adds it */
			fprintf(stderr, "space serve: cluster: record sandbox %s: %s\n", space_sandbox_id(r->sb), cluster_errmsg());
	}
	return ret;
}

/* The registered secrets a create's policy names ("secret:NAME" values of network.secrets), each once, into
 * names (NULL-terminated); false when there are more than CLUSTER_PLACE_SECRETS_MAX. Other values are the
 * create's own to refuse. */
static bool create_secrets(const cJSON *j, const char *names[CLUSTER_PLACE_SECRETS_MAX + 1])
{
	size_t n = 0;
	names[0] = NULL;
	const cJSON *net = cJSON_GetObjectItemCaseSensitive(j, "network");
	const cJSON *sec = cJSON_IsObject(net) ? cJSON_GetObjectItemCaseSensitive(net, "secrets") : NULL, *it;
	if (!cJSON_IsObject(sec))
		return true;
	cJSON_ArrayForEach(it, sec) {
		const char *v = cJSON_GetStringValue(it);
		if (!v || strncmp(v, "secret:", 7))
			continue;
		bool dup = false;
		for (size_t i = 0; i < n && !dup; i++)
			dup = !strcmp(names[i], v + 7);
		if (dup)
			continue;
		if (n == CLUSTER_PLACE_SECRETS_MAX)
			return false;
		names[n++] = v + 7;
		names[n] = NULL;
	}
	return true;
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
	const char *secrets[CLUSTER_PLACE_SECRETS_MAX + 1];
	bool placeable = j && cJSON_IsObject(j) && strlen(template) < sizeof(template) - 1;
	if (placeable && !create_secrets(j, secrets)) {
		cJSON_Delete(j);
		char msg[96];
		snprintf(msg, sizeof(msg), "the policy names over %d registered secrets", CLUSTER_PLACE_SECRETS_MAX);
		return create_error(r, e2b, 400, "invalid", msg);
	}
	if (r->cluster_peer || !c || !placeable) { /* the claim of the host that placed it here */
		cJSON_Delete(j);
		return create_here(r, template,
				   r->cluster_peer ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Space-Cluster-Claim") : NULL,
				   r->cluster_peer ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Space-Cluster-Pull") : NULL);
	}
	/* j holds the secrets' names until placement is done */
	_cleanup_(cJSON_Deletep) cJSON *body = j;
	if (atomic_load(&c->taken_over))
		return create_error(r, e2b, 503, "cluster_unavailable",
				    "this server no longer serves for the cluster: another server took over its host name");
	if (!atomic_load(&c->joined))
		return create_error(r, e2b, 503, "cluster_unavailable", "this host has not joined the cluster yet");
	char host[CLUSTER_NAME_MAX], url[CLUSTER_URL_MAX], claim[33], avoid[CLUSTER_NAME_MAX] = "", from[CLUSTER_NAME_MAX];
	/* A host that does not take the connection (gone, not yet lost) is avoided once: placed again. */
	for (int attempt = 0;; attempt++) {
		uint64_t t0 = util_now_ns();
		int e = cluster_place(c->cs, template, isolation, secrets, c->lost_after_s, avoid, host, url, claim, from);
		r->cluster_place_ns += util_now_ns() - t0;
		if (e < 0) {
			char msg[600];
			snprintf(msg, sizeof(msg), "place a sandbox of template '%s': %s", template, cluster_caller_errmsg(e));
			if (e == -ENOENT)
				return create_error(r, e2b, 404, "not_found", msg);
			return create_error(r, e2b, 503,
					    e == -ENOSPC ? "no_capacity" : e == -EHOSTDOWN ? "no_host" : "cluster_unavailable", msg);
		}
		if (!strcmp(host, c->name))
			return create_here(r, template, claim, from);
		/* Placed on another host: the request goes there as it came, with the claim (and the host to pull
		 * the template from first, when it has none). */
		struct fwd f = { .fd = -1 };
		snprintf(f.pull_from, sizeof(f.pull_from), "%s", from);
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
			return cluster_host_error(r, host, e);
		}
		enum MHD_Result ret = fwd_answer(r, f.fd, host, false);
		if (r->status != 201) /* not made there: its claim holds no capacity any longer */
			cluster_claim_drop(c->cs, claim);
		return ret;
	}
}

