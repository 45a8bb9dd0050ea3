/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve --cluster`: what asks several hosts at once or moves things between them: listings of every
 * host's sandboxes, merged into one page; templates pushed to and pulled from another host.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"
#include "serve_cluster_int.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* --- listings across the hosts --------------------------------------------------------------------------- */

#define CLUSTER_LIST_ANSWER_MAX (64u << 20)
#define CLUSTER_LIST_TIMEOUT_S 10

bool serve_cluster_list_wanted(struct serve_req *r)
{
	return r->srv->cluster && !r->cluster_peer && !strcmp(r->method, "GET") &&
	       (!strcmp(r->path, "/v1/sandboxes") || !strcmp(r->path, "/sandboxes") || !strcmp(r->path, "/v2/sandboxes"));
}

/* The whole answer on fd, up to max bytes (-EMSGSIZE over it): its status, and *ret_buf (the caller's, NUL-
 * terminated) holding the head, NUL-terminated at its end, then the body at *ret_body. -EBADMSG when it is
 * not HTTP. */
static int read_answer(int fd, size_t max, unsigned *ret_status, char **ret_buf, char **ret_body)
{
	size_t len = 0, cap = 64 << 10;
	char *buf = malloc(cap + 1);
	int e = buf ? 0 : -ENOMEM;
	while (e == 0) {
		if (len == cap) {
			char *nb = cap < max ? realloc(buf, 2 * cap + 1) : NULL;
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
	char *end = e == 0 ? (buf[len] = '\0', strstr(buf, "\r\n\r\n")) : NULL;
	unsigned st = 0;
	if (e == 0 && (!end || sscanf(buf, "HTTP/1.%*1[01] %3u", &st) != 1))
		e = -EBADMSG;
	if (e < 0) {
		free(buf);
		return e;
	}
	*end = '\0';
	*ret_status = st;
	*ret_buf = buf;
	*ret_body = end + 4;
	return 0;
}

/* The request, signed, to host h; its whole answer: status, body (*ret_body, NUL-terminated, the caller's)
 * and its X-Next-Token (into next, "" when none). -errno when it could not be had. */
static int fetch_page(struct serve_cluster *c, struct serve_req *r, const char *target, const struct host_ref *h,
		      unsigned *ret_status, char **ret_body, char next[96])
{
	char extra[512];
	int e = cluster_sign_headers(c, r->method, target, h->name, NULL, extra, sizeof(extra));
	if (e < 0)
		return e;
	int fd = cluster_tls_connect(c->tls, h->url, h->name);
	if (fd < 0)
		return fd;
	struct timeval tv = { .tv_sec = CLUSTER_LIST_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	e = serve_fwd_head(r, fd, target, false, extra, -1, false);
	char *buf = NULL, *body = NULL;
	if (e == 0)
		e = read_answer(fd, CLUSTER_LIST_ANSWER_MAX, ret_status, &buf, &body);
	close(fd);
	if (e < 0)
		return e;
	next[0] = '\0';
	for (char *line = strstr(buf, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
		if (!strncasecmp(line + 2, "X-Next-Token:", 13)) {
			const char *v = line + 15;
			while (*v == ' ')
				v++;
			snprintf(next, 96, "%.*s", (int)strcspn(v, "\r"), v);
		}
	}
	memmove(buf, body, strlen(body) + 1);
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
	int e = atomic_load(&c->joined) ? cluster_up_hosts(c, &hs) : -EHOSTUNREACH;
	if (e < 0)
		return serve_reply_error(r, 503, "cluster_unavailable", "list the hosts of the cluster: %s",
					 atomic_load(&c->joined) ? cluster_caller_errmsg(e) : "this host has not joined the cluster yet");
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

/* --- templates between hosts ----------------------------------------------------------------------------- */

#define CLUSTER_TEMPLATE_ANSWER_MAX (1u << 20)

/* The URL of host name, which must be up and serving. */
static int host_url(struct serve_cluster *c, const char *name, char url[CLUSTER_URL_MAX])
{
	struct host_refs hs = { 0 };
	int e = cluster_up_hosts(c, &hs);
	if (e < 0)
		return e;
	for (size_t i = 0; i < hs.n; i++)
		if (!strcmp(hs.v[i].name, name)) {
			snprintf(url, CLUSTER_URL_MAX, "%s", hs.v[i].url);
			return 0;
		}
	return -ENOENT;
}

/* A request of ours to host to over the cluster's TLS: signed, with the caller's key; its head sent. */
static int peer_request(struct serve_cluster *c, const char *to, const char *method, const char *target,
			const char *key, const char *more_headers, int *ret_fd)
{
	char url[CLUSTER_URL_MAX];
	int e = host_url(c, to, url);
	if (e < 0)
		return e;
	char sig[512];
	if ((e = cluster_sign_headers(c, method, target, to, NULL, sig, sizeof(sig))) < 0)
		return e;
	int fd = cluster_tls_connect(c->tls, url, to);
	if (fd < 0)
		return fd;
	char head[2048];
	int n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: %s\r\nX-API-Key: %s\r\n%s%sConnection: close\r\n\r\n",
			 method, target, to, key, sig, more_headers ? more_headers : "");
	e = n < 0 || (size_t)n >= sizeof(head) ? -ENAMETOOLONG : serve_fwd_send(fd, head, (size_t)n);
	if (e < 0) {
		close(fd);
		return e;
	}
	*ret_fd = fd;
	return 0;
}

/* peer_request's failure, answered: 404 for a host that is not up, 503 without the store, else 502. */
static enum MHD_Result peer_request_error(struct serve_req *r, const char *host, int e)
{
	if (e == -ENOENT)
		return serve_reply_error(r, 404, "not_found", "no host '%s' is up in the cluster", host);
	if (e == -EIO || e == -EHOSTUNREACH)
		return serve_reply_error(r, 503, "cluster_unavailable", "%s", cluster_caller_errmsg(e));
	return cluster_host_error(r, host, e);
}

/* Host host's answer on fd (a JSON body, as our server gives; closed here): its body on 201 into *ret_body
 * (the caller's; NULL when it is not JSON); false after relaying any other answer (its status and body),
 * or 502 when there is none. */
static bool peer_created(struct serve_req *r, const char *host, int fd, cJSON **ret_body)
{
	unsigned st = 0;
	char *buf = NULL, *body = NULL;
	int e = read_answer(fd, CLUSTER_TEMPLATE_ANSWER_MAX, &st, &buf, &body);
	close(fd);
	if (e < 0) {
		cluster_host_error(r, host, e);
		return false;
	}
	cJSON *j = cJSON_Parse(body);
	free(buf);
	if (st == 201) {
		*ret_body = j;
		return true;
	}
	if (j)
		serve_reply_json(r, st >= 400 && st < 600 ? st : 502, j);
	else
		serve_reply_error(r, 502, "bad_gateway", "host %s answered %u", host, st);
	return false;
}

/* A template moved, as the answer says: the other host, the archive's bytes, the time, and the template as
 * that host has it (taken). */
static enum MHD_Result template_moved(struct serve_req *r, const char *host, double bytes, uint64_t t0,
				      cJSON *template, const char *as, const char *parent)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "host", host);
	if (bytes > 0)
		cJSON_AddNumberToObject(j, "bytes", bytes);
	/* how it went: "stream" (against parent, a template the other host had), "whole stream", or "image"
	 * (to a host before template streams) */
	if (as)
		cJSON_AddStringToObject(j, "as", as);
	if (parent && parent[0])
		cJSON_AddStringToObject(j, "parent", parent);
	else
		cJSON_AddNullToObject(j, "parent");
	cJSON_AddNumberToObject(j, "seconds", (double)((util_now_ns() - t0) / 1000000) / 1000.0);
	cJSON_AddItemToObject(j, "template", template ? template : cJSON_CreateNull());
	return serve_reply_json(r, 201, j);
}

/* What a push sends, made on a thread of its own with a context of its own into a pipe: a template stream
 * (against the receiver's templates where one shares data) or, to a host that predates streams, an OCI
 * image archive. */
struct export_job {
	space_ctx *ctx;
	const char *name;
	int fd;
	bool stream;
	const char *const *receiver_ids;
	struct space_template_send_info sent;
	int result;
};

static void *export_main(void *arg)
{
	struct export_job *j = arg;
	if (j->stream) {
		struct space_template_send_options o = SPACE_TEMPLATE_SEND_OPTIONS_INIT;
		o.fd = j->fd;
		o.receiver_ids = j->receiver_ids;
		j->result = space_template_send(j->ctx, j->name, &o, &j->sent);
	} else {
		struct space_template_export_options o = SPACE_TEMPLATE_EXPORT_OPTIONS_INIT;
		o.fd = j->fd;
		o.format = "oci";
		j->result = space_template_export(j->ctx, j->name, &o);
	}
	close(j->fd); /* the end of the archive */
	return NULL;
}

/* Checks a push or pull: the cluster, the host named by field, the caller's key; false after answering. */
static bool template_call(struct serve_req *r, const char *field, const char **ret_host, const char **ret_key,
			  cJSON **ret_j)
{
	struct serve_cluster *c = r->srv->cluster;
	if (!c) {
		serve_reply_error(r, 400, "not_clustered", "this server is not a host of a cluster (space serve --cluster)");
		return false;
	}
	if (!atomic_load(&c->joined)) {
		serve_reply_error(r, 503, "cluster_unavailable", "this host has not joined the cluster yet");
		return false;
	}
	const char *const fields[] = { field, NULL };
	cJSON *j = serve_body_fields(r, fields);
	if (!j)
		return false;
	const char *host = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, field));
	if (!host || !cluster_name_ok(host) || !strcmp(host, c->name) || !util_name_valid(r->params[0])) {
		serve_reply_error(r, 400, "invalid", "'%s' must name another host of the cluster, and the template be valid",
				  field);
		cJSON_Delete(j);
		return false;
	}
	*ret_key = serve_request_key(r);
	if (!*ret_key) {
		serve_reply_error(r, 400, "invalid", "a template goes between hosts with the caller's API key: send "
						     "X-API-Key (a key granted to a uid acts on its own host only)");
		cJSON_Delete(j);
		return false;
	}
	*ret_host = host;
	*ret_j = j;
	return true;
}

/* The ids of host to's templates (GET /v1/templates there), NULL-terminated in *ret (free_ids); *ret_streams
 * false for a host whose listing has no ids (one before template streams). */
static int receiver_ids(struct serve_cluster *c, const char *to, const char *key, char ***ret, bool *ret_streams)
{
	int fd = -1;
	int e = peer_request(c, to, "GET", "/v1/templates", key, NULL, &fd);
	if (e < 0)
		return e;
	unsigned st = 0;
	char *buf = NULL, *body = NULL;
	e = read_answer(fd, CLUSTER_TEMPLATE_ANSWER_MAX, &st, &buf, &body);
	close(fd);
	if (e < 0)
		return e;
	_cleanup_(cJSON_Deletep) cJSON *j = st == 200 ? cJSON_Parse(body) : NULL;
	free(buf);
	if (!j)
		return -EBADMSG;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "templates"), *t;
	size_t n = 0, cap = (size_t)cJSON_GetArraySize(a) + 1;
	char **ids = calloc(cap, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	bool streams = true;
	cJSON_ArrayForEach(t, a) {
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "id"));
		if (!id) {
			streams = false;
			continue;
		}
		if (n + 1 < cap && strlen(id) == 36 && (ids[n] = strdup(id)))
			n++;
	}
	*ret = ids;
	*ret_streams = streams;
	return 0;
}

static void free_ids(char **ids)
{
	for (size_t i = 0; ids && ids[i]; i++)
		free(ids[i]);
	free(ids);
}

/* One upload of the job's output to host to (chunked, signed, the caller's key); 0 with the answer's
 * status and JSON body (NULL when none), or an answer already sent (1). */
static int upload(struct serve_req *r, const char *to, const char *key, const char *target, const char *type,
		  struct export_job *job, uint64_t *ret_bytes, unsigned *ret_status, cJSON **ret_body)
{
	struct serve_cluster *c = r->srv->cluster;
	char more[128];
	snprintf(more, sizeof(more), "Content-Type: %s\r\nTransfer-Encoding: chunked\r\n", type);
	int fd = -1;
	int e = peer_request(c, to, "POST", target, key, more, &fd);
	if (e < 0) {
		peer_request_error(r, to, e);
		return 1;
	}
	int p[2];
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = r->srv->state_dir;
	job->result = -EIO;
	job->ctx = NULL;
	if (pipe2(p, O_CLOEXEC) < 0) {
		close(fd);
		serve_reply_error(r, 500, "internal", "pipe: %s", strerror(errno));
		return 1;
	}
	job->fd = p[1];
	pthread_t th;
	if ((e = space_ctx_new(&co, &job->ctx)) < 0 || pthread_create(&th, NULL, export_main, job) != 0) {
		space_ctx_free(job->ctx);
		close(p[0]);
		close(p[1]);
		close(fd);
		serve_reply_error(r, 500, "internal", "start the export: %s", space_strerror(e < 0 ? e : -EAGAIN));
		return 1;
	}
	char buf[64 << 10], hdr[24];
	uint64_t bytes = 0;
	int se = 0;
	for (;;) {
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		int hl = snprintf(hdr, sizeof(hdr), "%zx\r\n", (size_t)n);
		if (!se)
			se = serve_fwd_send(fd, hdr, (size_t)hl);
		if (!se)
			se = serve_fwd_send(fd, buf, (size_t)n);
		if (!se)
			se = serve_fwd_send(fd, "\r\n", 2);
		bytes += (size_t)n;
	}
	close(p[0]);
	pthread_join(th, NULL);
	space_ctx_free(job->ctx);
	job->ctx = NULL;
	if (job->result < 0 || se) {
		close(fd); /* the upload ends unfinished: the receiver drops it */
		if (job->result < 0)
			serve_reply_error(r, 500, "export_failed", "%s template '%s': %s", job->stream ? "send" : "export",
					  job->name, space_strerror(job->result));
		else
			cluster_host_error(r, to, se);
		return 1;
	}
	if ((se = serve_fwd_send(fd, "0\r\n\r\n", 5)) < 0) {
		close(fd);
		cluster_host_error(r, to, se);
		return 1;
	}
	char *abuf = NULL, *body = NULL;
	unsigned st = 0;
	e = read_answer(fd, CLUSTER_TEMPLATE_ANSWER_MAX, &st, &abuf, &body);
	close(fd);
	if (e < 0) {
		cluster_host_error(r, to, e);
		return 1;
	}
	*ret_body = cJSON_Parse(body);
	free(abuf);
	*ret_status = st;
	*ret_bytes = bytes;
	return 0;
}

/* An answer of host that is not 201, relayed (its status and body), or 502 when it has none. */
static enum MHD_Result relay_failure(struct serve_req *r, const char *host, unsigned st, cJSON *body)
{
	if (body)
		return serve_reply_json(r, st >= 400 && st < 600 ? st : 502, body);
	return serve_reply_error(r, 502, "bad_gateway", "host %s answered %u", host, st);
}

enum MHD_Result serve_cluster_template_push(struct serve_req *r)
{
	const char *to, *key;
	cJSON *j;
	if (!template_call(r, "to", &to, &key, &j))
		return MHD_YES;
	_cleanup_(cJSON_Deletep) cJSON *body = j;
	struct serve_cluster *c = r->srv->cluster;
	const char *name = r->params[0];
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	struct space_template_info *t = NULL;
	int e = space_template_get(ctx, name, &t);
	if (e < 0)
		return serve_reply_space_error(r, e, "template");
	space_template_info_free(t);
	uint64_t t0 = util_now_ns();
	char **ids = NULL;
	bool streams = false;
	if ((e = receiver_ids(c, to, key, &ids, &streams)) < 0)
		return e == -EBADMSG ? serve_reply_error(r, 502, "bad_gateway", "host %s did not list its templates", to) :
				       peer_request_error(r, to, e);
	char target[128];
	struct export_job job = { .name = name, .stream = streams, .receiver_ids = (const char *const *)ids };
	snprintf(target, sizeof(target), "/v1/templates/%s/%s", name, streams ? "stream" : "image");
	uint64_t bytes = 0;
	unsigned st = 0;
	cJSON *answer = NULL;
	int u = upload(r, to, key, target, streams ? "application/octet-stream" : "application/x-tar", &job, &bytes, &st,
		       &answer);
	char against[64];
	snprintf(against, sizeof(against), "%s", job.sent.parent);
	if (u == 0 && st != 201 && job.sent.parent[0] && (st == 404 || st == 400)) {
		/* Its copy of the parent is not ours after all (gone since it listed it, or changed): whole, once. */
		fprintf(stderr, "space serve: cluster: template %s against %s refused by host %s (%u): sending it whole\n",
			name, against, to, st);
		cJSON_Delete(answer);
		answer = NULL;
		job.receiver_ids = NULL;
		against[0] = '\0';
		u = upload(r, to, key, target, "application/octet-stream", &job, &bytes, &st, &answer);
	}
	free_ids(ids);
	if (u)
		return MHD_YES;
	_cleanup_(cJSON_Deletep) cJSON *a = answer;
	if (st != 201)
		return relay_failure(r, to, st, TAKE_PTR(a));
	fprintf(stderr, "space serve: cluster: template %s pushed to host %s (%llu bytes%s%s)\n", name, to,
		(unsigned long long)bytes, against[0] ? ", against " : (streams ? ", whole" : ", as an image"), against);
	/* A stream's answer is {template, parent, ...}; an image's the template itself. */
	cJSON *made = streams ? cJSON_DetachItemFromObjectCaseSensitive(a, "template") : TAKE_PTR(a);
	return template_moved(r, to, (double)bytes, t0, made,
			      !streams ? "image" : against[0] ? "stream" : "whole stream", against);
}

/* Asks host from to push template name to this host (a pull), with the caller's key: 0 with the connection
 * whose answer is to be read, or -errno; *ret_connected tells a failure of the request's head (the host
 * not up, not reached) from one after it. */
static int ask_push(struct serve_cluster *c, const char *from, const char *name, const char *key, int *ret_fd,
		    bool *ret_connected)
{
	char target[128], push[160], more[96];
	snprintf(target, sizeof(target), "/v1/templates/%s/push", name);
	int n = snprintf(push, sizeof(push), "{\"to\":\"%s\"}", c->name);
	snprintf(more, sizeof(more), "Content-Type: application/json\r\nContent-Length: %d\r\n", n);
	*ret_connected = false;
	int fd = -1;
	int e = peer_request(c, from, "POST", target, key, more, &fd);
	if (e < 0)
		return e;
	*ret_connected = true;
	if ((e = serve_fwd_send(fd, push, (size_t)n)) < 0) {
		close(fd);
		return e;
	}
	*ret_fd = fd;
	return 0;
}

int serve_cluster_fetch_template(struct serve_req *r, const char *from, const char *name, char *err, size_t errlen)
{
	struct serve_cluster *c = r->srv->cluster;
	const char *key = serve_request_key(r);
	if (!key) {
		snprintf(err, errlen, "template '%s' is pulled from host %s first, which takes the caller's API key "
				      "(X-API-Key; a key granted to a uid acts on its own host only)", name, from);
		return -EACCES;
	}
	uint64_t t0 = util_now_ns();
	int fd = -1;
	bool connected;
	int e = ask_push(c, from, name, key, &fd, &connected);
	unsigned st = 0;
	char *buf = NULL, *body = NULL;
	if (e == 0) {
		e = read_answer(fd, CLUSTER_TEMPLATE_ANSWER_MAX, &st, &buf, &body);
		close(fd);
	}
	if (e < 0) {
		snprintf(err, errlen, "pull template '%s' from host %s: %s", name, from, cluster_caller_errmsg(e));
		return e;
	}
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(body);
	free(buf);
	r->cluster_pull_ns = util_now_ns() - t0;
	snprintf(r->cluster_pull_from, sizeof(r->cluster_pull_from), "%s", from);
	const cJSON *er = cJSON_GetObjectItemCaseSensitive(j, "error");
	const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(er, "code"));
	/* made here meanwhile (another create's pull): as good */
	if (st == 201 || (st == 409 && code && !strcmp(code, "exists")))
		return 0;
	const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(er, "message"));
	snprintf(err, errlen, "pull template '%s' from host %s: %u %s", name, from, st, msg ? msg : "(no message)");
	return -EIO;
}

enum MHD_Result serve_cluster_template_pull(struct serve_req *r)
{
	const char *from, *key;
	cJSON *j;
	if (!template_call(r, "from", &from, &key, &j))
		return MHD_YES;
	_cleanup_(cJSON_Deletep) cJSON *body = j;
	/* Asked of the host that has it: a push to this one. */
	uint64_t t0 = util_now_ns();
	int fd = -1;
	bool connected;
	int e = ask_push(r->srv->cluster, from, r->params[0], key, &fd, &connected);
	if (e < 0)
		return connected ? cluster_host_error(r, from, e) : peer_request_error(r, from, e);
	cJSON *answer = NULL;
	if (!peer_created(r, from, fd, &answer))
		return MHD_YES;
	/* Its answer holds this host's: the template as imported here. */
	cJSON *bytes = cJSON_GetObjectItemCaseSensitive(answer, "bytes");
	enum MHD_Result ret = template_moved(r, from, cJSON_IsNumber(bytes) ? bytes->valuedouble : 0, t0,
					     cJSON_DetachItemFromObjectCaseSensitive(answer, "template"),
					     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(answer, "as")),
					     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(answer, "parent")));
	cJSON_Delete(answer);
	return ret;
}

