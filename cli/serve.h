/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: an HTTP server over libspace (libmicrohttpd, one thread per connection).
 *
 * A request goes through serve.c: it is authenticated, matched against the route table of the plane its
 * path prefix selects (the native /v1 API lives in serve_v1.c), its body is collected (JSON bodies, up to
 * a limit) or handed to the route's sink as it arrives (uploads), then the route's handler answers with
 * the helpers below. Every request owns its own space_ctx (a context is single-threaded and cheap).
 */
#pragma once

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>

#include "space.h"
#include "util/cleanup.h"

/* _cleanup_ for the library's objects (space.h frees them with their own *_free). */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct space_sandbox_info, space_sandbox_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct space_checkpoint_info, space_checkpoint_info_free)
#define _cleanup_sandbox_info_ _cleanup_(space_sandbox_info_freep)
#define _cleanup_checkpoint_info_ _cleanup_(space_checkpoint_info_freep)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct space_sandbox_info *, space_sandbox_info_list_free)
#define _cleanup_sandbox_info_list_ _cleanup_(space_sandbox_info_list_freep)

struct serve_store;

#define SERVE_JSON_BODY_MAX (1u << 20)            /* JSON request bodies */
#define SERVE_UPLOAD_MAX_DEFAULT (1ull << 30)     /* file uploads (--max-upload) */
#define SERVE_IMAGE_MAX_DEFAULT (4ull << 30)      /* container image uploads (--max-image-upload) */
#define SERVE_DOWNLOAD_MAX_DEFAULT (256ull << 20) /* file downloads (--max-download) */
#define SERVE_EXEC_CAPTURE_MAX (16u << 20)        /* per stream, non-streaming exec */
#define SERVE_REQUEST_TIMEOUT_DEFAULT_S 600       /* whole body, from the request's start (--request-timeout) */

#define SERVE_V1_LIST_LIMIT_DEFAULT 100       /* GET /v1/sandboxes without limit= */
#define SERVE_METRICS_BUCKETS 11
#define SERVE_ALLOW_RESOLVE_MAX 64                /* --allow-resolve ranges (NET_ALLOW_RESOLVE_MAX) */

/* Counters behind GET /v1/metrics (serve_metrics.c). */
struct serve_metrics {
	pthread_mutex_t lock;
	uint64_t create_buckets[SERVE_METRICS_BUCKETS]; /* cumulative: creates at most that many seconds */
	uint64_t create_count, create_errors, exec_count;
	double create_sum_s;
};

struct serve {
	const char *state_dir;        /* NULL: the library's default */
	uint64_t upload_max;
	uint64_t image_upload_max;    /* a template's image archive (POST /v1/templates/{name}/image) */
	uint64_t download_max;        /* a file over this is not downloaded (413); the stream is cut there too */
	uint64_t request_timeout_ns;  /* a request's body must have arrived this long after its start */
	/* --allow-resolve: IPv4 CIDRs API callers' policies may point resolve entries into although they are
	 * local (docs/network.md); NULL-terminated. API callers' policies are always untrusted. */
	const char *allow_resolve[SERVE_ALLOW_RESOLVE_MAX + 1];
	pthread_mutex_t store_lock;   /* guards store (API keys, tokens, sandbox metadata) */
	struct serve_store *store;    /* <state_dir>/serve.db (serve_store.c) */
	const char *domain;           /* --domain: Host "PORT-ID.DOMAIN" reaches a sandbox's port; NULL: none */
	struct serve_metrics metrics;
	struct e2b_procs *e2b_procs; /* the processes of the E2B plane (serve_e2b_runner.c) */
	struct serve_cluster *cluster; /* --cluster: this host's part in a cluster (serve_cluster.c); NULL: none */
	const char *cluster_host;     /* its name there (every answer says it: X-Space-Cluster-Host) */
	struct MHD_Daemon *cluster_daemon; /* serves the connections of the cluster's TLS listener */
};

struct serve_req;

/* A handler answers a request: it queues a response with serve_reply*() and returns its result. */
typedef enum MHD_Result (*serve_handler_fn)(struct serve_req *r);
/* Receives an upload's bytes as they arrive (len 0 never happens). Returns 0 or -errno (the upload is
 * then abandoned and the handler answers). */
typedef int (*serve_sink_fn)(struct serve_req *r, const char *data, size_t len);

/* What a route's caller must show before anything else happens. */
enum serve_auth {
	SERVE_AUTH_NONE = 0,
	SERVE_AUTH_KEY,               /* an API key: X-API-Key or Authorization: Bearer */
	SERVE_AUTH_ENVD,              /* E2B envd: the sandbox's access token in X-Access-Token */
};

struct serve_route {
	const char *method;
	const char *pattern;          /* "/v1/sandboxes/{id}/exec": "{...}" matches one path segment */
	enum serve_auth auth;
	bool upload;                  /* the body goes to start's sink, up to --max-upload (else: JSON, 1 MiB) */
	serve_handler_fn start;       /* optional, before the body: may install a sink; may answer early */
	serve_handler_fn run;         /* after the whole body */
	bool image;                   /* an upload capped by --max-image-upload instead (images, build contexts) */
};

/* A set of routes under one path prefix (the native API; later the E2B planes on the same port). */
struct serve_plane {
	const char *prefix;
	const struct serve_route *routes;
	size_t n_routes;
};

#define SERVE_MAX_PARAMS 2
#define SERVE_DRAIN_MAX (1u << 20) /* body bytes read and dropped after an early answer before closing */
#define SERVE_APIKEY_ID_SIZE 32       /* "key-" + 10 hex digits, with room */

struct serve_req {
	struct serve *srv;
	struct MHD_Connection *conn;
	const char *method;
	const char *path;
	const struct serve_route *route;
	char params[SERVE_MAX_PARAMS][128]; /* the "{...}" segments, in order */
	bool answered;                /* a response was queued (or held: see held) */
	bool first_call;              /* in the call with the headers, before any of the body */
	bool answer_now;              /* queue the next answer even there (the connection then closes) */
	struct MHD_Response *held;    /* an answer given before the body, queued once the body is drained */
	unsigned held_status;
	uint64_t drained;             /* body bytes dropped after an answer */

	char *body;                   /* collected body (NUL-terminated), when there is no sink */
	size_t body_len;
	uint64_t body_seen;           /* bytes received, sink or not */
	bool body_too_large;

	serve_sink_fn sink;
	int sink_error;               /* first error of the sink */
	void *state;                  /* the route's own state ... */
	void (*state_free)(struct serve_req *r); /* ... and how to release it (also on client abort) */

	char envd_sandbox[32];        /* SERVE_AUTH_ENVD: the sandbox the access token belongs to */
	uint16_t port;                /* a port request (serve_ports.c): the sandbox's port */

	space_ctx *ctx;               /* serve_req_ctx(), freed with the request */
	space_sandbox *sb;            /* serve_req_sandbox(), freed with the request */
	uint64_t started_ns;
	unsigned status;              /* the status sent, for the access log */
	bool by_uid;                  /* authorized as the key granted to peer_uid (a --unix connection) */
	uint32_t peer_uid;
	char key_id[SERVE_APIKEY_ID_SIZE]; /* the key the request acts with, for the access log */
	bool cluster_peer;            /* forwarded by a host of the cluster, its signature checked */
	bool cluster_create;          /* a create, placed by serve_cluster_create */
	bool cluster_delete;          /* a DELETE of a whole sandbox (given up on when its host is lost) */
	uint64_t cluster_place_ns;    /* a create: the time its placement took */
	char cluster_pull_from[64];   /* a create: the host its template was pulled from first ("" none) */
	uint64_t cluster_pull_ns;     /* and the time that took */
};

/* --- serve_ports.c: requests for a port of a sandbox, proxied through its agent --- */
/* Whether the request is for a sandbox's port (E2b-Sandbox-Id + E2b-Sandbox-Port other than envd's, or
 * Host PORT-ID.DOMAIN): 1 when it is, and its access token opens that sandbox (r->envd_sandbox and
 * r->port set); 0 when it is not; -1 after answering (400, 401, 403). */
int serve_port_match(struct serve_req *r);
/* The route's handler: connects to the port through the agent, forwards the request, streams the answer
 * (or relays both ways after a 101). 404 / 409 (paused) / 502 (not listening, not running) otherwise. */
enum MHD_Result serve_port_proxy(struct serve_req *r);

/* The sandbox a request for a port or for envd names (E2b-Sandbox-Id, or Host PORT-ID.DOMAIN) into id,
 * without checking its token; false when it names none. */
bool serve_port_sandbox(struct serve_req *r, char id[32]);

/* Forwarding a request as it came (serve_ports.c; the port proxy and the cluster's forwarding). */
/* The request's target as sent on: path and query, percent-encoded again; NULL when out of memory. */
char *serve_fwd_target(struct serve_req *r);
/* Sends the request's head over fd: method, target, its headers but the hop-by-hop ones (with port, also
 * the sandbox's access tokens and routing headers) and any X-Space-Cluster-* a client sent, then extra
 * (whole header lines, or NULL), then Content-Length: content_length (< 0: r->body_len when the method
 * has a body). HTTP/1.0 (the answer ends with the connection), HTTP/1.1 with Upgrade, or with keep_alive
 * (the connection is kept for another request: serve_fwd_answer with a serve_fwd_keep). */
int serve_fwd_head(struct serve_req *r, int fd, const char *target, bool port, const char *extra,
		   long long content_length, bool keep_alive);
int serve_fwd_send(int fd, const char *p, size_t n);
/* Where a kept connection goes once its answer was read whole: give(arg, peer, fd); give NULL: nowhere (the
 * answer is still read by its framing, then the connection closed). */
struct serve_fwd_keep {
	void (*give)(void *arg, const char *peer, int fd);
	void *arg;
	const char *peer;
};
/* Reads the answer's head from fd and queues it as the request's answer, its body streamed as it comes (a
 * 101 makes the connection a relay both ways). Takes fd. cluster: the far side is a host of the cluster
 * (its X-Space-Cluster-Host is kept). what names the far side in a 502. keep (the request was sent with
 * keep_alive; NULL: it was not): the answer is read by its framing (Content-Length or chunks, decoded) and
 * the connection given to keep->give when read whole; an answer that ends its connection closes it. */
enum MHD_Result serve_fwd_answer(struct serve_req *r, int fd, bool cluster, const char *what,
				 const struct serve_fwd_keep *keep);

/* --- serve_cluster.c: `space serve --cluster` (docs/cluster.md) --- */
struct serve_cluster_options {
	const char *conninfo;         /* libpq keyword string or URI */
	const char *name;             /* this host's name in the cluster */
	const char *url;              /* where the other hosts reach this server's cluster listener: https://HOST:PORT */
	const char *tls_dir;          /* ca.pem, host.pem, host.key (`space cluster cert`) */
	struct sockaddr_in listen;    /* the cluster listener (TLS) */
	uint32_t capacity;            /* live sandboxes placed here at most */
	unsigned heartbeat_s, lost_after_s;
};
/* Prepares this host's part: its certificate (it must name the host and hold against the CA) and the
 * cluster store (schema). srv->cluster is set; nothing is registered yet. */
int serve_cluster_start(struct serve *srv, space_ctx *ctx, const struct serve_cluster_options *o, char *err,
			size_t errlen);
/* Listens for the other hosts (TLS, each connection then served by daemon, an MHD daemon without a listening
 * socket of its own), then joins: registration (waiting for a server of the same name to go stale), API
 * keys, reconciliation, the heartbeat thread. */
int serve_cluster_join(struct serve *srv, space_ctx *ctx, struct MHD_Daemon *daemon, char *err, size_t errlen);
/* Stops taking the other hosts' connections (a handshake under way ends first). Before the daemons stop. */
void serve_cluster_quiesce(struct serve *srv);
/* Stops the heartbeat, says the server stops serving and frees the cluster's state: after the daemons have
 * stopped (no request may use it any longer). */
void serve_cluster_stop(struct serve *srv);
/* Whether conn came over the cluster's TLS listener (its verified host into name). */
bool serve_cluster_conn_peer(struct serve *srv, struct MHD_Connection *conn, char name[64]);

/* --- serve_cluster_tls.c: TLS 1.3 between the hosts of a cluster, both sides with a certificate of the
 * cluster's CA naming their host --- */
struct cluster_tls;
/* Loads DIR/ca.pem, DIR/host.pem and DIR/host.key; host.pem must name host and hold against ca.pem. */
int cluster_tls_load(const char *dir, const char *host, struct cluster_tls **ret, char *err, size_t errlen);
void cluster_tls_free(struct cluster_tls *t);
/* Listens on sa: a connection whose certificate holds becomes a connection of daemon d, its client address
 * naming the host (cluster_tls_conn_peer). */
int cluster_tls_listen(struct cluster_tls *t, const struct sockaddr_in *sa, struct MHD_Daemon *d, char *err,
		       size_t errlen);
/* Stops listening (connections being relayed end with their requests). */
void cluster_tls_stop(struct cluster_tls *t);
/* The verified host of a connection cluster_tls_listen handed over; false for any other connection. */
bool cluster_tls_conn_peer(struct MHD_Connection *conn, char name[64]);
/* A plain socket relayed over TLS to url (https://HOST:PORT) whose certificate names peer; -EPERM when it
 * names another host or does not hold, other -errno when it cannot be reached. */
int cluster_tls_connect(struct cluster_tls *t, const char *url, const char *peer);
/* The same, but a kept connection to peer at url when the pool has one that is still open (idle for
 * less than a few seconds); cluster_tls_give (a serve_fwd_keep's give, arg t) puts one back. */
int cluster_tls_take(struct cluster_tls *t, const char *url, const char *peer);
void cluster_tls_give(void *t, const char *peer, int fd);
/* First look at a request: checks a host's signature (a forwarded request: r->cluster_peer), marks
 * creates, and routes a request for another host's sandbox (r->route becomes a forwarding or lost-host
 * route). 0: go on as usual; 1: go on with the new route; -1: answered. */
int serve_cluster_dispatch(struct serve_req *r);
/* A create (after the body): placed here or forwarded to the chosen host. */
enum MHD_Result serve_cluster_create(struct serve_req *r);
/* A listing of sandboxes (native GET /v1/sandboxes, E2B GET /sandboxes, /v2/sandboxes) sent to a host of a
 * cluster: the same request to every host that is up (this one included, over its own listener), their
 * pages merged in the listing's order (created, then id), limited and given the next cursor as one host
 * would. A host that does not answer is named in X-Space-Cluster-Missing. */
bool serve_cluster_list_wanted(struct serve_req *r);
enum MHD_Result serve_cluster_list(struct serve_req *r);
/* The member E2B list items carry in a page for the merging host: their creation time in ms. */
#define SERVE_CLUSTER_ORDER_FIELD "spaceCreatedMs"

/* POST /v1/templates/{name}/push {"to": HOST}: this host's template, exported (an OCI archive, as
 * space_template_export makes it) and streamed to HOST's POST /v1/templates/{name}/image over the cluster's
 * TLS, signed and with the caller's key, where it is imported (confined, verified) as any uploaded image.
 * POST /v1/templates/{name}/pull {"from": HOST}: the same, asked of HOST for this host. 201 with the
 * receiving host's answer; 400 outside a cluster. */
enum MHD_Result serve_cluster_template_push(struct serve_req *r);
enum MHD_Result serve_cluster_template_pull(struct serve_req *r);
/* Has host from push template name to this host (a create placed here by a pull), with the caller's key;
 * sets r's cluster_pull_from and cluster_pull_ns. 0 (a template of that name made meanwhile counts), or
 * -errno with err. */
int serve_cluster_fetch_template(struct serve_req *r, const char *from, const char *name, char *err, size_t errlen);

/* After a request ran here: a sandbox removed (DELETE of the native or E2B plane) gets its row destroyed at
 * once, not at the next reconciliation. */
void serve_cluster_after(struct serve_req *r);
/* 0 when some host of the cluster published key's hash, -EACCES otherwise (-EACCES outside a cluster). */
int serve_cluster_apikey_check(struct serve *srv, const char *key);

/* --- serve_unix.c: `space serve --unix PATH` --- */
/* A listening unix socket at path with the given mode (a stale socket there is replaced; anything else is
 * refused), or -errno with a message in err. Call it before the process starts threads: it borrows the
 * umask. */
int serve_unix_listen(const char *path, mode_t mode, char *err, size_t errlen);
/* The uid the kernel recorded for the connection's peer; -EAFNOSUPPORT when it is not a unix socket. */
int serve_unix_peer_uid(struct MHD_Connection *conn, uint32_t *ret_uid);

/* --- serve_metrics.c --- */
/* Records one sandbox creation through the server (either plane) and how long it took. */
void serve_metrics_create(struct serve *srv, uint64_t ns, bool ok);
/* Counts one process started through the server. */
void serve_metrics_exec(struct serve *srv);
/* GET /v1/metrics: Prometheus text format. */
enum MHD_Result serve_metrics_handler(struct serve_req *r);

/* --- serve_usage.c: what sandboxes use over time (E2B getMetrics, GET /v1/sandboxes/{id}/metrics) --- */
#define SERVE_USAGE_EVERY_S 5         /* how often the sampler runs (the reaper's pace) */
/* Reads the usage of every running sandbox of ctx into its ring (the reaper's thread calls it), and drops
 * the rings of sandboxes that are gone. */
void serve_usage_sample_all(space_ctx *ctx);
/* Frees every ring (at the server's exit). */
void serve_usage_cleanup(void);
/* GET /v1/sandboxes/{id}/metrics: {"samples": [...]}, start= and end= in seconds since the epoch. */
enum MHD_Result serve_v1_metrics(struct serve_req *r);

/* --- serve_http.c: responses and request helpers (shared by every plane) --- */

/* Queues a JSON response (takes ownership of j; NULL = out of memory, answered 500). */
enum MHD_Result serve_reply_json(struct serve_req *r, unsigned status, cJSON *j);
/* {"error": {"code": code, "message": ...}}. */
enum MHD_Result serve_reply_error(struct serve_req *r, unsigned status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The error for a libspace failure: status from the code (-ENOENT 404, -ENODEV 503, ...), message from
 * the context's last error. what names the operation. */
enum MHD_Result serve_reply_space_error(struct serve_req *r, int err, const char *what);
/* Queues a prepared response with status, adding the common headers; destroys it. */
enum MHD_Result serve_reply(struct serve_req *r, unsigned status, struct MHD_Response *resp);

/* The API key of the request: X-API-Key or Authorization: Bearer; NULL when none. (X-Access-Token is the
 * envd plane's per-sandbox token, never an API key.) */
const char *serve_request_key(struct serve_req *r);
/* A query argument, or NULL. */
const char *serve_query(struct serve_req *r, const char *name);
/* A boolean query argument: "1"/"true" is true, absent is def. */
bool serve_query_bool(struct serve_req *r, const char *name, bool def);

/* Parses the body as a JSON object. On failure answers 400 and returns NULL. */
cJSON *serve_body_object(struct serve_req *r);
/* Returns the name of the first member of obj not in allowed (NULL-terminated), or NULL. */
const char *serve_json_unknown_field(const cJSON *obj, const char *const *allowed);
/* serve_body_object, refusing (400 unknown_field) members not in allowed. */
cJSON *serve_body_fields(struct serve_req *r, const char *const *allowed);
/* A JSON integer member in [0, max], or def when absent or null; false (after answering 400) otherwise. */
bool serve_json_uint(struct serve_req *r, const cJSON *o, const char *name, uint64_t max, uint64_t def,
		     uint64_t *ret);
/* A JSON string member, or NULL when absent or null; false (after answering 400) when not a string. */
bool serve_json_str(struct serve_req *r, const cJSON *o, const char *name, const char **ret);
/* Queues an empty answer (204). */
enum MHD_Result serve_reply_empty(struct serve_req *r, unsigned status);

/* Copies s (len bytes, NULs allowed) into a new NUL-terminated string with invalid UTF-8 replaced by
 * U+FFFD; *ret_len (if not NULL) gets its length. With carry (3 bytes + a length byte), an incomplete
 * sequence at the end is kept for the next call instead of being replaced. */
char *serve_utf8_clean(const char *s, size_t len, unsigned char carry[4], size_t *ret_len);
/* Like serve_utf8_clean, but returns a quoted JSON string literal (for cJSON_CreateRaw), so bytes that a
 * C string cannot hold (NUL) survive as \u0000. */
char *serve_json_quote(const char *s, size_t len, unsigned char carry[4]);

/* The request's context (created on first use) or NULL after answering 500. */
space_ctx *serve_req_ctx(struct serve_req *r);
/* Opens the sandbox named by params[0]; on failure answers (404, 409, ...) and returns NULL. */
space_sandbox *serve_req_sandbox(struct serve_req *r);

/*
 * A response fed by a producer thread through a pipe: fn runs on its own thread with the write end
 * (closed when it returns); the response streams what it writes, chunked. The request's ctx and sandbox
 * move to the producer (fn reads them from r_ctx/r_sb in its argument). Answers 500 on failure.
 */
struct serve_producer {
	int fd;                       /* write end */
	space_ctx *ctx;
	space_sandbox *sb;
	bool failed;                  /* set by fn: the response ends with an error, not a clean end */
	void *arg;                    /* the route's */
	void (*arg_free)(void *arg);
};
enum MHD_Result serve_reply_stream(struct serve_req *r, unsigned status, const char *content_type,
				   void (*fn)(struct serve_producer *p), void *arg, void (*arg_free)(void *arg));

/* --- serve_v1.c: the native API; serve_v1_files.c: its file routes; serve_v1_ops.c: pause, resume,
 * lifetimes, checkpoints, events --- */
extern const struct serve_plane serve_v1_plane;
/* A sandbox as the native API shows it (no host paths, with its metadata). */
cJSON *serve_v1_sandbox_json(struct serve_req *r, const struct space_sandbox_info *b);
enum MHD_Result serve_v1_pause(struct serve_req *r);
enum MHD_Result serve_v1_resume(struct serve_req *r);
enum MHD_Result serve_v1_timeout(struct serve_req *r);
enum MHD_Result serve_v1_checkpoint_create(struct serve_req *r);
enum MHD_Result serve_v1_checkpoint_list(struct serve_req *r);
enum MHD_Result serve_v1_checkpoint_get(struct serve_req *r);
enum MHD_Result serve_v1_checkpoint_delete(struct serve_req *r);
enum MHD_Result serve_v1_rollback(struct serve_req *r);
enum MHD_Result serve_v1_fork(struct serve_req *r);
enum MHD_Result serve_v1_events(struct serve_req *r);
enum MHD_Result serve_v1_upload_start(struct serve_req *r);
/* --- serve_v1_templates.c: a template from an uploaded image --- */
enum MHD_Result serve_v1_template_image_start(struct serve_req *r);
enum MHD_Result serve_v1_template_image(struct serve_req *r);
enum MHD_Result serve_v1_template_stream(struct serve_req *r);
enum MHD_Result serve_v1_template_build(struct serve_req *r); /* after serve_v1_template_image_start */
enum MHD_Result serve_v1_upload(struct serve_req *r);
enum MHD_Result serve_v1_download(struct serve_req *r);
enum MHD_Result serve_v1_file_remove(struct serve_req *r);
enum MHD_Result serve_v1_file_stat(struct serve_req *r);
enum MHD_Result serve_v1_file_list(struct serve_req *r);
enum MHD_Result serve_v1_mkdir(struct serve_req *r);

/* --- serve_store.c: the server's own store, <state_dir>/serve.db (0600) --- */

/* Opens (creating and migrating) the server's store of ctx's state directory; on first creation, imports
 * the server's rows an older space.db holds. -ENOENT when the state directory is not initialized. On
 * failure a message is left in err. */
int serve_store_open(space_ctx *ctx, struct serve_store **ret, char *err, size_t errlen);
void serve_store_close(struct serve_store *s);
struct sqlite3;
struct sqlite3 *serve_store_db(struct serve_store *s);
const char *serve_store_errmsg(struct serve_store *s);
/* An SQLite result code as -errno (SQLITE_BUSY -> -EBUSY, ...). */
int serve_store_errno(int rc);

/* --- serve_apikey.c: API keys --- */

/* 0 if key is a known API key (updates its last use), -EACCES if not, other -errno on store errors. */
int serve_apikey_check(struct serve_store *s, const char *key);

/* The key granted to local uid (`space apikey create|grant --uid`): its id into ret_id (updates its last
 * use); -EACCES when no key is granted to uid, other -errno on store errors. */
int serve_apikey_for_uid(struct serve_store *s, uint32_t uid, char ret_id[SERVE_APIKEY_ID_SIZE]);

/* The SHA-256 of key in hex, as the cluster store keeps it. */
void serve_apikey_hash_hex(const char *key, char out[65]);
/* The hashes (hex) of every key, a NULL-terminated array the caller frees (each string and the array). */
int serve_apikey_hashes(struct serve_store *s, char ***ret);

/* How many API keys exist, or -errno. */
int serve_apikey_count(struct serve_store *s);

/* Client metadata of sandboxes (JSON object text) kept by the server. set with json NULL deletes; get:
 * NULL when none; prune drops the metadata of sandboxes that are destroyed or gone, and the tokens of
 * those whose row is gone (asking ctx, the library, which sandboxes exist). */
int serve_metadata_set(struct serve_store *s, const char *id, const char *json);
char *serve_metadata_get(struct serve_store *s, const char *id);
int serve_metadata_prune(struct serve_store *s, space_ctx *ctx);

/* Sandboxes created with allowPublicTraffic: their ports take requests without the access token (our
 * default is private). set records one (pruned with its metadata); get: whether id is one. */
int serve_public_set(struct serve_store *s, const char *id);
bool serve_public_get(struct serve_store *s, const char *id);

/* E2B envd access tokens: random, handed out once (at create or connect), kept as SHA-256 hashes, each
 * valid for one sandbox only. */
#define SERVE_TOKEN_SIZE 72           /* "sbt_" + 64 hex digits + NUL */
/* A new token for sandbox id into ret. */
int serve_token_create(struct serve_store *s, const char *id, char ret[SERVE_TOKEN_SIZE]);
/* The sandbox the token belongs to into ret_id; -EACCES for an unknown token. */
int serve_token_check(struct serve_store *s, const char *token, char ret_id[32]);
