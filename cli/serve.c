/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: the HTTP server — listening, authentication, routing, request bodies, the reaper. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"
#include "serve_pool.h"
#include "serve_e2b.h"
#include "cluster_store.h"
#include "util/cidr.h"
#include "util/cleanup.h"
#include "util/util.h"

#define SERVE_CONNECTION_LIMIT 512
#define SERVE_CONNECTION_TIMEOUT_S 60
#define SERVE_REAP_INTERVAL_S SERVE_USAGE_EVERY_S /* it samples the sandboxes' usage as well */

static enum MHD_Result health(struct serve_req *r)
{
	/* envd's /health as the SDK's isRunning() asks it: with E2b-Sandbox-Id, the answer is about that
	 * sandbox (502 when it does not run, like E2B's proxy). */
	const char *id = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	if (id && *id && strcmp(r->path, "/v1/health")) {
		space_ctx *ctx = serve_req_ctx(r);
		if (!ctx)
			return MHD_YES;
		if (space_sandbox_open(ctx, id, &r->sb) < 0)
			return e2b_api_error(r, 502, "sandbox '%s' is not running", id);
		return serve_reply_empty(r, 204);
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "status", "ok");
	cJSON_AddStringToObject(j, "version", space_version());
	return serve_reply_json(r, 200, j);
}

/* Requests for a sandbox's port (serve_ports.c): any method, any path. */
static const struct serve_route port_route = { "*", "(sandbox port)", SERVE_AUTH_NONE, false, NULL, serve_port_proxy };

static const struct serve_route health_routes[] = {
	{ "GET", "/v1/health", SERVE_AUTH_NONE, false, NULL, health },
};

/* Planes by path prefix, longest first. */
static const struct serve_plane *const planes[] = {
	&serve_v1_plane,
	&serve_e2b_plane,             /* "/": /sandboxes, /v2/sandboxes, /files, process.Process, ... */
};

/* Matches path against pattern, filling params. */
static bool route_match(const char *pattern, const char *path, struct serve_req *r)
{
	int np = 0;
	while (*pattern && *path) {
		if (*pattern == '{') {
			const char *pe = strchr(pattern, '}');
			size_t n = strcspn(path, "/");
			if (!pe || n == 0 || n >= sizeof(r->params[0]) || np >= SERVE_MAX_PARAMS)
				return false;
			memcpy(r->params[np], path, n);
			r->params[np++][n] = '\0';
			pattern = pe + 1;
			path += n;
			continue;
		}
		if (*pattern != *path)
			return false;
		pattern++, path++;
	}
	return !*pattern && !*path;
}

/* Finds the route; answers 404/405 and returns false when there is none. */
static bool route_find(struct serve_req *r)
{
	if (!strcmp(r->path, health_routes[0].pattern) || !strcmp(r->path, "/health")) {
		if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
			serve_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s", r->method, r->path);
			return false;
		}
		r->route = &health_routes[0];
		return true;
	}
	bool path_known = false;
	for (size_t p = 0; p < ARRAY_SIZE(planes); p++) {
		if (strncmp(r->path, planes[p]->prefix, strlen(planes[p]->prefix)))
			continue;
		for (size_t i = 0; i < planes[p]->n_routes; i++) {
			const struct serve_route *rt = &planes[p]->routes[i];
			if (!route_match(rt->pattern, r->path, r))
				continue;
			path_known = true;
			if (!strcmp(rt->method, r->method)) {
				r->route = rt;
				return true;
			}
		}
	}
	if (path_known)
		serve_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s", r->method, r->path);
	else
		serve_reply_error(r, 404, "not_found", "no such endpoint: %s %s", r->method, r->path);
	return false;
}

/* A request without a key on the unix socket: the key the operator granted the caller's uid, if any. */
static bool authenticate_peer(struct serve_req *r, uint32_t uid)
{
	pthread_mutex_lock(&r->srv->store_lock);
	int e = serve_apikey_for_uid(r->srv->store, uid, r->key_id);
	pthread_mutex_unlock(&r->srv->store_lock);
	if (e == -EACCES) {
		serve_reply_error(r, 403, "forbidden",
				  "uid %u has no API key: the operator must grant it one (`space apikey grant ID --uid %u`, "
				  "or `space apikey create --uid %u`), or send X-API-Key",
				  uid, uid, uid);
		return false;
	}
	if (e < 0) {
		serve_reply_error(r, 500, "internal", "look up the key of uid %u: %s", uid, space_strerror(e));
		return false;
	}
	r->by_uid = true;
	r->peer_uid = uid;
	return true;
}

static bool authenticate(struct serve_req *r)
{
	const char *key = serve_request_key(r);
	uint32_t uid;
	char peer[64];
	/* (The cluster's connections are unix socket pairs too: their "peer" is this very process.) */
	if (!key && !serve_cluster_conn_peer(r->srv, r->conn, peer) && serve_unix_peer_uid(r->conn, &uid) == 0)
		return authenticate_peer(r, uid);
	if (!key) {
		serve_reply_error(r, 401, "unauthorized", "an API key is required (X-API-Key or Authorization: Bearer)");
		return false;
	}
	pthread_mutex_lock(&r->srv->store_lock);
	int e = serve_apikey_check(r->srv->store, key);
	pthread_mutex_unlock(&r->srv->store_lock);
	if (e == -EACCES && r->srv->cluster)
		e = serve_cluster_apikey_check(r->srv, key); /* a key another host of the cluster published */
	if (e == -EACCES) {
		serve_reply_error(r, 401, "unauthorized", "invalid API key");
		return false;
	}
	if (e == -EHOSTUNREACH) {
		serve_reply_error(r, 503, "cluster_unavailable", "a key of another host of the cluster cannot be checked: "
								  "the cluster store is unreachable");
		return false;
	}
	if (e < 0) {
		serve_reply_error(r, 500, "internal", "check API key: %s", space_strerror(e));
		return false;
	}
	return true;
}

/* The most a route's body may be: an upload's cap, else a JSON body's. */
static uint64_t body_limit(const struct serve_req *r)
{
	if (!r->route->upload)
		return SERVE_JSON_BODY_MAX;
	return r->route->image ? r->srv->image_upload_max : r->srv->upload_max;
}

/* Content-Length above the route's limit: refuse before reading the body. */
static bool body_limit_ok(struct serve_req *r)
{
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!cl)
		return true;
	uint64_t len;
	uint64_t limit = body_limit(r);
	if (util_parse_uint(cl, 0, UINT64_MAX, &len) < 0 || len <= limit)
		return true;
	r->answer_now = true; /* not worth reading: the connection closes after the answer */
	serve_reply_error(r, 413, "too_large", "request body of %llu bytes is over the limit of %llu",
			  (unsigned long long)len, (unsigned long long)limit);
	return false;
}

static void body_append(struct serve_req *r, const char *data, size_t len)
{
	uint64_t limit = body_limit(r);
	r->body_seen += len;
	if (r->body_too_large || r->body_seen > limit) {
		r->body_too_large = true;
		return;
	}
	if (r->sink) {
		if (!r->sink_error)
			r->sink_error = r->sink(r, data, len);
		return;
	}
	char *nb = realloc(r->body, r->body_len + len + 1);
	if (!nb) {
		r->body_too_large = true;
		return;
	}
	memcpy(nb + r->body_len, data, len);
	r->body = nb;
	r->body_len += len;
	r->body[r->body_len] = '\0';
}

/* The call with the request's headers: its route, the caller's key, the body's limit, the route's start. */
static enum MHD_Result request_begin(struct serve_req *r)
{
	/* A cluster host's signed request, or a request for another host's sandbox (serve_cluster.c). */
	int cd = serve_cluster_dispatch(r);
	if (cd < 0)
		return MHD_YES;
	int pm = cd > 0 ? 0 : serve_port_match(r);
	if (pm < 0)
		return MHD_YES;
	if (pm > 0)
		r->route = &port_route;
	else if (cd == 0 && !route_find(r))
		return MHD_YES;
	/* A forwarded request's key is checked here again (the host that forwarded it vouches for nothing but
	 * itself): local keys, or those another host of the cluster published. */
	if (r->route->auth == SERVE_AUTH_KEY && !authenticate(r))
		return MHD_YES;
	if (r->route->auth == SERVE_AUTH_ENVD && !e2b_envd_authenticate(r))
		return MHD_YES;
	if (!body_limit_ok(r))
		return MHD_YES;
	if (r->route->start && r->route->start(r) != MHD_YES)
		return MHD_NO;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct serve *srv = cls;
	struct serve_req *r = *con_cls;
	(void)version;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->srv = srv;
		r->conn = conn;
		r->method = method;
		r->path = url;
		r->started_ns = util_now_ns();
		*con_cls = r;
		r->first_call = true;
		enum MHD_Result ret = request_begin(r);
		r->first_call = false;
		return ret;
	}
	if (*upload_data_size) {
		/* A body that trickles in (a byte now and then keeps the idle timeout away) holds a thread:
		 * past the request deadline the connection is closed. */
		if (util_now_ns() - r->started_ns > srv->request_timeout_ns) {
			fprintf(stderr, "space serve: %s %s: body not complete after %llu s: connection closed\n", r->method,
				r->path, (unsigned long long)(srv->request_timeout_ns / 1000000000ull));
			return MHD_NO;
		}
		/* After an early answer the rest of the body is read and dropped, up to SERVE_DRAIN_MAX. */
		if (!r->answered)
			body_append(r, upload_data, *upload_data_size);
		else if ((r->drained += *upload_data_size) > SERVE_DRAIN_MAX && r->held)
			return MHD_NO;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->held) {
		enum MHD_Result ret = MHD_queue_response(r->conn, r->held_status, r->held);
		MHD_destroy_response(r->held);
		r->held = NULL;
		return ret;
	}
	if (r->answered)
		return MHD_YES;
	if (r->body_too_large) {
		/* Undo what the route started (a partial upload) before the client hears of it. */
		if (r->state_free)
			r->state_free(r);
		r->state_free = NULL;
		return serve_reply_error(r, 413, "too_large", "request body is over the limit of %llu bytes",
					 (unsigned long long)body_limit(r));
	}
	if (r->cluster_create)
		return serve_cluster_create(r);
	if (serve_cluster_list_wanted(r))
		return serve_cluster_list(r);
	enum MHD_Result ret = r->route->run(r);
	if (r->srv->cluster)
		serve_cluster_after(r);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct serve_req *r = *con_cls;
	(void)cls;
	if (!r)
		return;
	if (r->held)
		MHD_destroy_response(r->held); /* the client went before its body ended */
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char addr[INET6_ADDRSTRLEN] = "-";
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, addr, sizeof(addr));
	/* Access log: one JSON line per request on stdout (built with cJSON: method and path are the
	 * client's bytes). */
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "ts_ms", (double)util_wall_ms());
	char peer[64], shown[80];
	if (serve_cluster_conn_peer(r->srv, conn, peer)) {
		snprintf(shown, sizeof(shown), "cluster:%s", peer);
		cJSON_AddStringToObject(j, "remote", shown);
	} else {
		cJSON_AddStringToObject(j, "remote",
					ci && ci->client_addr && ci->client_addr->sa_family == AF_UNIX ? "unix" : addr);
	}
	if (r->by_uid) {
		cJSON_AddNumberToObject(j, "uid", r->peer_uid);
		cJSON_AddStringToObject(j, "key", r->key_id);
	}
	cJSON_AddStringToObject(j, "method", r->method);
	cJSON_AddStringToObject(j, "route", r->route ? r->route->pattern : "-");
	if (r->params[0][0] && r->route && strchr(r->route->pattern, '{'))
		cJSON_AddStringToObject(j, "sandbox", r->params[0]);
	if (r->route && !strncmp(r->route->pattern, "(cluster", 8)) {
		/* forwarded to (or lost with) the sandbox's host */
		cJSON_AddStringToObject(j, "sandbox", r->params[0]);
		cJSON_AddStringToObject(j, "host", r->params[1]);
	}
	if (r->cluster_peer)
		cJSON_AddBoolToObject(j, "forwarded", true);
	if (r->cluster_place_ns)
		cJSON_AddNumberToObject(j, "place_ms", (double)(r->cluster_place_ns / 10000) / 100.0);
	if (r->cluster_pull_from[0]) {
		cJSON_AddStringToObject(j, "pulled_from", r->cluster_pull_from);
		cJSON_AddNumberToObject(j, "pull_ms", (double)(r->cluster_pull_ns / 10000) / 100.0);
	}
	cJSON_AddNumberToObject(j, "status", r->status);
	cJSON_AddNumberToObject(j, "ms", (double)((util_now_ns() - r->started_ns) / 100000) / 10.0);
	cJSON_AddBoolToObject(j, "completed", toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
	char *line = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (line) {
		_cleanup_free_ char *clean = serve_utf8_clean(line, strlen(line), NULL, NULL);
		fprintf(stdout, "%s\n", clean ? clean : line);
		fflush(stdout);
		free(line);
	}
	if (r->state_free)
		r->state_free(r);
	space_sandbox_free(r->sb);
	space_ctx_free(r->ctx);
	free(r->body);
	free(r);
	*con_cls = NULL;
}

/* --- The reaper: ends sandboxes whose lifetime is over, and samples what the others use. --- */

struct reaper {
	struct serve *srv;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

static void *reaper_thread(void *arg)
{
	struct reaper *rp = arg;
	pthread_mutex_lock(&rp->lock);
	while (!rp->stop) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += SERVE_REAP_INTERVAL_S;
		pthread_cond_timedwait(&rp->cond, &rp->lock, &t);
		if (rp->stop)
			break;
		pthread_mutex_unlock(&rp->lock);
		struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
		o.state_dir = rp->srv->state_dir;
		space_ctx *ctx = NULL;
		if (space_ctx_new(&o, &ctx) == 0) {
			int n = space_sandbox_reap(ctx);
			if (n > 0)
				fprintf(stderr, "space serve: reaped %d expired sandbox%s\n", n, n == 1 ? "" : "es");
			pthread_mutex_lock(&rp->srv->store_lock);
			serve_metadata_prune(rp->srv->store, ctx);
			pthread_mutex_unlock(&rp->srv->store_lock);
			serve_usage_sample_all(ctx);
			space_ctx_free(ctx);
		}
		pthread_mutex_lock(&rp->lock);
	}
	pthread_mutex_unlock(&rp->lock);
	return NULL;
}

static int parse_listen(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	uint64_t port;
	if (!colon || (size_t)(colon - s) >= sizeof(host) || util_parse_uint(colon + 1, 0, 65535, &port) < 0)
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (!*host)
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

/* One MHD daemon: on the TCP address sa, or on the listening socket fd (>= 0; MHD closes it when stopped), or
 * (sa NULL, fd -1) without one: the cluster's, whose connections the TLS listener adds. */
static struct MHD_Daemon *daemon_start(struct serve *srv, const struct sockaddr_in *sa, int fd, unsigned conn_limit,
				       unsigned conn_timeout)
{
	const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
			       MHD_ALLOW_UPGRADE; /* WebSockets to a sandbox's port (serve_ports.c) */
	/* (Without its error log: MHD takes the socket pairs the TLS listener hands it for TCP sockets, and would
	 * say so on every answer.) */
	if (!sa && fd < 0)
		return MHD_start_daemon((flags & ~(unsigned)MHD_USE_ERROR_LOG) | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC, 0,
					NULL, NULL, on_request, srv,
					MHD_OPTION_CONNECTION_LIMIT, conn_limit, MHD_OPTION_CONNECTION_TIMEOUT, conn_timeout,
					MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
	if (fd >= 0)
		return MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
					MHD_OPTION_CONNECTION_LIMIT, conn_limit, MHD_OPTION_CONNECTION_TIMEOUT, conn_timeout,
					MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)sa,
				MHD_OPTION_CONNECTION_LIMIT, conn_limit, MHD_OPTION_CONNECTION_TIMEOUT, conn_timeout,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
				MHD_OPTION_END);
}

int cmd_serve(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("serve");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *listen = "127.0.0.1:8080", *unix_path = NULL;
	bool listen_given = false;
	uint64_t unix_mode = 0666;
	uint64_t upload_max = SERVE_UPLOAD_MAX_DEFAULT, image_max = SERVE_IMAGE_MAX_DEFAULT;
	uint32_t conn_timeout = SERVE_CONNECTION_TIMEOUT_S, req_timeout = SERVE_REQUEST_TIMEOUT_DEFAULT_S;
	uint64_t download_max = SERVE_DOWNLOAD_MAX_DEFAULT;
	uint64_t conn_limit = SERVE_CONNECTION_LIMIT;
	const char *allow_resolve[SERVE_ALLOW_RESOLVE_MAX + 1] = { NULL };
	size_t n_allow = 0;
	const char *domain = NULL;
	struct serve_cluster_options co = { .heartbeat_s = 2, .lost_after_s = 10 };
	char hostname[CLUSTER_NAME_MAX] = "";
	uint64_t capacity = 0;
	bool cluster_listen = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc)
			listen = argv[++i], listen_given = true;
		else if (!strcmp(argv[i], "--domain") && i + 1 < argc) {
			domain = argv[++i];
			if (!*domain || strspn(domain, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
						strlen(domain))
				return cli_usage_error(cmd, "bad --domain '%s' (want a DNS name)", domain);
		}
		else if (!strncmp(argv[i], "--listen=", 9))
			listen = argv[i] + 9, listen_given = true;
		else if (!strcmp(argv[i], "--unix") && i + 1 < argc)
			unix_path = argv[++i];
		else if (!strcmp(argv[i], "--unix-mode") && i + 1 < argc) {
			char *end = NULL;
			errno = 0;
			unix_mode = strtoull(argv[++i], &end, 8);
			if (errno || !end || *end || end == argv[i] || unix_mode > 0777)
				return cli_usage_error(cmd, "bad --unix-mode '%s' (octal, at most 0777)", argv[i]);
		} else if (!strcmp(argv[i], "--max-upload") && i + 1 < argc) {
			if (util_parse_size(argv[++i], &upload_max) < 0 || !upload_max)
				return cli_usage_error(cmd, "bad --max-upload '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--max-image-upload") && i + 1 < argc) {
			if (util_parse_size(argv[++i], &image_max) < 0 || !image_max)
				return cli_usage_error(cmd, "bad --max-image-upload '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--max-download") && i + 1 < argc) {
			if (util_parse_size(argv[++i], &download_max) < 0 || !download_max)
				return cli_usage_error(cmd, "bad --max-download '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--connection-timeout") && i + 1 < argc) {
			if (cli_parse_duration(cmd, "--connection-timeout", argv[++i], 1, 3600, &conn_timeout) < 0)
				return EXIT_USAGE;
		} else if (!strcmp(argv[i], "--request-timeout") && i + 1 < argc) {
			if (cli_parse_duration(cmd, "--request-timeout", argv[++i], 1, 86400, &req_timeout) < 0)
				return EXIT_USAGE;
		} else if (!strcmp(argv[i], "--max-connections") && i + 1 < argc) {
			if (util_parse_uint(argv[++i], 1, 65536, &conn_limit) < 0)
				return cli_usage_error(cmd, "bad --max-connections '%s' (1..65536)", argv[i]);
		} else if (!strcmp(argv[i], "--allow-resolve") && i + 1 < argc) {
			/* a local range API callers' policies may point names at (docs/network.md) */
			uint32_t net, mask;
			if (util_cidr4_parse(argv[++i], &net, &mask) < 0)
				return cli_usage_error(cmd, "bad --allow-resolve '%s' (want an IPv4 CIDR, A.B.C.D/N)", argv[i]);
			if (n_allow == SERVE_ALLOW_RESOLVE_MAX)
				return cli_usage_error(cmd, "too many --allow-resolve (at most %d)", SERVE_ALLOW_RESOLVE_MAX);
			allow_resolve[n_allow++] = argv[i];
		} else if (!strcmp(argv[i], "--cluster") && i + 1 < argc) {
			co.conninfo = argv[++i];
		} else if (!strcmp(argv[i], "--cluster-host") && i + 1 < argc) {
			co.name = argv[++i];
		} else if (!strcmp(argv[i], "--cluster-url") && i + 1 < argc) {
			co.url = argv[++i];
			if (strncmp(co.url, "https://", 8) || strlen(co.url) < 9 || strlen(co.url) >= CLUSTER_URL_MAX)
				return cli_usage_error(cmd, "bad --cluster-url '%s' (want https://HOST:PORT: the cluster listener)",
						       co.url);
		} else if (!strcmp(argv[i], "--cluster-tls") && i + 1 < argc) {
			co.tls_dir = argv[++i];
		} else if (!strcmp(argv[i], "--cluster-listen") && i + 1 < argc) {
			if (parse_listen(argv[++i], &co.listen) < 0)
				return cli_usage_error(cmd, "bad --cluster-listen '%s' (want IPV4:PORT)", argv[i]);
			cluster_listen = true;
		} else if (!strcmp(argv[i], "--cluster-capacity") && i + 1 < argc) {
			if (util_parse_uint(argv[++i], 1, 1000000, &capacity) < 0)
				return cli_usage_error(cmd, "bad --cluster-capacity '%s' (1..1000000 sandboxes)", argv[i]);
		} else if (!strcmp(argv[i], "--cluster-heartbeat") && i + 1 < argc) {
			if (cli_parse_duration(cmd, "--cluster-heartbeat", argv[++i], 1, 60, &co.heartbeat_s) < 0)
				return EXIT_USAGE;
		} else if (!strcmp(argv[i], "--cluster-lost-after") && i + 1 < argc) {
			if (cli_parse_duration(cmd, "--cluster-lost-after", argv[++i], 2, 3600, &co.lost_after_s) < 0)
				return EXIT_USAGE;
		} else
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	if (!co.conninfo && (co.name || co.url || capacity || co.tls_dir || cluster_listen))
		return cli_usage_error(cmd, "--cluster-host, --cluster-url, --cluster-listen, --cluster-tls and "
					    "--cluster-capacity need --cluster");
	if (co.conninfo) {
		if (!co.url || !co.tls_dir || !cluster_listen)
			return cli_usage_error(cmd, "--cluster needs --cluster-listen IP:PORT (TLS, for the other hosts), "
						    "--cluster-url https://HOST:PORT (where they reach it) and --cluster-tls DIR "
						    "(`space cluster cert`)");
		if (co.lost_after_s <= co.heartbeat_s)
			return cli_usage_error(cmd, "--cluster-lost-after (%u s) must be longer than --cluster-heartbeat (%u s)",
					       co.lost_after_s, co.heartbeat_s);
		if (!co.name) {
			if (gethostname(hostname, sizeof(hostname)) < 0)
				return cli_error(-errno, "serve: this machine's name: %s", strerror(errno));
			hostname[sizeof(hostname) - 1] = '\0';
			co.name = hostname;
		}
		co.capacity = (uint32_t)capacity;
		if (!co.capacity) {
			/* One sandbox per 256 MiB of memory by default (docs/cluster.md, capacity planning). */
			long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
			uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
			co.capacity = mem >> 28 ? (uint32_t)(mem >> 28) : 1;
		}
	}
	struct sockaddr_in sa;
	if (parse_listen(listen, &sa) < 0)
		return cli_usage_error(cmd, "bad --listen '%s' (want IPV4:PORT)", listen);

	space_ctx *ctx = cli_ctx(cli);
	struct serve srv = { .state_dir = cli->state_dir, .upload_max = upload_max, .image_upload_max = image_max, .download_max = download_max,
			     .request_timeout_ns = req_timeout * 1000000000ull, .domain = domain };
	memcpy(srv.allow_resolve, allow_resolve, sizeof(allow_resolve));
	char err[512];
	int e = serve_store_open(ctx, &srv.store, err, sizeof(err));
	if (e < 0) {
		return cli_error(e, "serve: %s", err);
	}
	pthread_mutex_init(&srv.store_lock, NULL);
	pthread_mutex_init(&srv.metrics.lock, NULL);
	srv.e2b_procs = e2b_procs_new(srv.state_dir);
	if (!srv.e2b_procs) {
		serve_store_close(srv.store);
		return cli_error(-ENOMEM, "serve: out of memory");
	}
	/* The cluster's certificate and store first (a bad one refuses to start); the host joins once the
	 * daemons listen (serve_cluster_join), and until then answers what needs the cluster with 503. */
	if (co.conninfo && (e = serve_cluster_start(&srv, ctx, &co, err, sizeof(err))) < 0) {
		serve_store_close(srv.store);
		e2b_procs_free(srv.e2b_procs);
		return cli_error(e, "serve: cluster: %s", err);
	}

	/* Signals: SIGPIPE off (a client that goes away must not end the server), SIGINT/SIGTERM taken
	 * with sigwait below, blocked before any thread starts so every thread inherits the mask. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	/* TCP unless only --unix was asked for; both when both were. The unix socket is made first: its mode
	 * comes from a borrowed umask, before any thread of ours runs. */
	struct MHD_Daemon *d = NULL, *du = NULL;
	int ufd = -1;
	if (unix_path && (ufd = serve_unix_listen(unix_path, (mode_t)unix_mode, err, sizeof(err))) < 0) {
		serve_cluster_stop(&srv);
		serve_store_close(srv.store);
		e2b_procs_free(srv.e2b_procs);
		return cli_error(ufd, "serve: %s", err);
	}
	if (!unix_path || listen_given) {
		d = daemon_start(&srv, &sa, -1, (unsigned)conn_limit, (unsigned)conn_timeout);
		if (!d) {
			int r = -errno;
			if (ufd >= 0) {
				close(ufd);
				unlink(unix_path);
			}
			serve_cluster_stop(&srv);
			serve_store_close(srv.store);
			e2b_procs_free(srv.e2b_procs);
			return cli_error(r, "serve: cannot listen on %s: %s", listen, strerror(-r));
		}
		const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
		char shown[96];
		inet_ntop(AF_INET, &sa.sin_addr, shown, sizeof(shown));
		fprintf(stderr, "space serve: listening on http://%s:%u (state %s)\n", shown,
			di ? di->port : ntohs(sa.sin_port), space_ctx_state_dir(ctx));
	}
	if (unix_path) {
		du = daemon_start(&srv, NULL, ufd, (unsigned)conn_limit, (unsigned)conn_timeout);
		if (!du) {
			int r = -errno;
			close(ufd);
			unlink(unix_path);
			if (d)
				MHD_stop_daemon(d);
			serve_cluster_stop(&srv);
			serve_store_close(srv.store);
			e2b_procs_free(srv.e2b_procs);
			return cli_error(r, "serve: serve the unix socket %s: %s", unix_path, strerror(-r));
		}
		fprintf(stderr, "space serve: listening on unix:%s (mode %04o; callers act with the key granted to their uid) (state %s)\n",
			unix_path, (unsigned)unix_mode, space_ctx_state_dir(ctx));
	}

	if (srv.cluster) {
		/* The other hosts' connections: TLS, then served like any other. */
		srv.cluster_daemon = daemon_start(&srv, NULL, -1, (unsigned)conn_limit, (unsigned)conn_timeout);
		e = srv.cluster_daemon ? serve_cluster_join(&srv, ctx, srv.cluster_daemon, err, sizeof(err)) : -errno;
		if (e < 0) {
			if (!srv.cluster_daemon)
				snprintf(err, sizeof(err), "cannot start the daemon of the cluster's connections");
			serve_cluster_quiesce(&srv);
			if (srv.cluster_daemon)
				MHD_stop_daemon(srv.cluster_daemon);
			if (d)
				MHD_stop_daemon(d);
			if (du) {
				MHD_stop_daemon(du);
				unlink(unix_path);
			}
			serve_cluster_stop(&srv);
			serve_store_close(srv.store);
			e2b_procs_free(srv.e2b_procs);
			return cli_error(e, "serve: cluster: %s", err);
		}
	}

	if (serve_apikey_count(srv.store) == 0 && srv.cluster)
		fprintf(stderr, "space serve: no API keys of this host: calls need a key another host of the cluster published "
				"(`space apikey create` there, or `--state %s` here)\n", space_ctx_state_dir(ctx));
	else if (serve_apikey_count(srv.store) == 0)
		fprintf(stderr, "space serve: no API keys yet: every /v1 call will get 401 until you run "
				"`space apikey create --state %s`\n", space_ctx_state_dir(ctx));

	struct reaper rp = { .srv = &srv };
	pthread_mutex_init(&rp.lock, NULL);
	pthread_cond_init(&rp.cond, NULL);
	pthread_t reaper;
	bool reaping = pthread_create(&reaper, NULL, reaper_thread, &rp) == 0;
	/* warm pools (cli/serve_pool.c) */
	struct serve_pool *pool = NULL;
	if (serve_pool_start(srv.state_dir, &pool) < 0)
		fprintf(stderr, "space serve: cannot start the warm pool thread: warm pools are not refilled\n");

	int sig = 0;
	sigwait(&set, &sig);
	fprintf(stderr, "space serve: %s: stopping (sandboxes keep running)\n", strsignal(sig));

	if (reaping) {
		pthread_mutex_lock(&rp.lock);
		rp.stop = true;
		pthread_cond_signal(&rp.cond);
		pthread_mutex_unlock(&rp.lock);
		pthread_join(reaper, NULL);
	}
	serve_pool_stop(pool);
	/* No new connections of other hosts; the cluster's state goes once no request can use it. */
	serve_cluster_quiesce(&srv);
	/* The E2B plane's processes end first: their streams then end, so the daemons' connections can. */
	bool procs_ended = e2b_procs_stop(srv.e2b_procs);
	if (!procs_ended)
		fprintf(stderr, "space serve: some processes did not end in time\n");
	if (d)
		MHD_stop_daemon(d);
	if (du) {
		MHD_stop_daemon(du);
		unlink(unix_path);
	}
	if (srv.cluster_daemon)
		MHD_stop_daemon(srv.cluster_daemon);
	serve_cluster_stop(&srv);
	e2b_watch_cleanup();
	serve_usage_cleanup();
	if (procs_ended)
		e2b_procs_free(srv.e2b_procs); /* else a late runner still holds it */
	serve_store_close(srv.store);
	pthread_mutex_destroy(&srv.store_lock);
	pthread_mutex_destroy(&srv.metrics.lock);
	return EXIT_OK;
}
