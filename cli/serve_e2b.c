/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: the E2B-compatible control plane (/sandboxes, /v2/sandboxes) and the helpers the envd
 * routes share. See docs/e2b.md. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define E2B_TIMEOUT_DEFAULT_S 300
#define E2B_TIMEOUT_MAX_S SPACE_TIMEOUT_MAX_S /* the longest lifetime a sandbox takes (one limit everywhere) */
#define E2B_ENV_MAX 1024

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* --- errors and bodies --- */

static cJSON *error_body(cJSON *code, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	_cleanup_free_ char *clean = serve_utf8_clean(msg, strlen(msg), NULL, NULL);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "code", code);
	cJSON_AddStringToObject(j, "message", clean ? clean : "");
	return j;
}

enum MHD_Result e2b_api_error(struct serve_req *r, unsigned status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cJSON *j = error_body(cJSON_CreateNumber(status), fmt, ap);
	va_end(ap);
	return serve_reply_json(r, status, j);
}

static const struct {
	const char *code;
	unsigned status;
} rpc_codes[] = {
	{ "invalid_argument", 400 }, { "unauthenticated", 401 }, { "permission_denied", 403 },
	{ "not_found", 404 },        { "already_exists", 409 },  { "failed_precondition", 412 },
	{ "resource_exhausted", 429 }, { "unimplemented", 501 }, { "unavailable", 503 },
	{ "deadline_exceeded", 504 },
};

enum MHD_Result e2b_rpc_error(struct serve_req *r, const char *code, const char *fmt, ...)
{
	unsigned status = 500;
	for (size_t i = 0; i < ARRAY_SIZE(rpc_codes); i++)
		if (!strcmp(rpc_codes[i].code, code))
			status = rpc_codes[i].status;
	va_list ap;
	va_start(ap, fmt);
	cJSON *j = error_body(cJSON_CreateString(code), fmt, ap);
	va_end(ap);
	return serve_reply_json(r, status, j);
}

const char *e2b_rpc_code(int err)
{
	switch (err) {
	case -ENOENT:
		return "not_found";
	case -EEXIST:
		return "already_exists";
	case -EINVAL:
	case -ENOTDIR:
	case -EISDIR:
	case -ENAMETOOLONG:
	case -ENOTEMPTY:
		return "invalid_argument";
	case -EACCES:
	case -EPERM:
		return "permission_denied";
	case -ENOSPC:
	case -EDQUOT:
		return "resource_exhausted";
	case -ESRCH:
	case -ENODEV:
		return "unavailable";
	default:
		return "internal";
	}
}

cJSON *e2b_rpc_body(struct serve_req *r)
{
	cJSON *j = r->body_len ? cJSON_ParseWithLength(r->body, r->body_len) : cJSON_CreateObject();
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		e2b_rpc_error(r, "invalid_argument", "the request body must be a JSON object");
		return NULL;
	}
	return j;
}

enum MHD_Result e2b_rpc_reply(struct serve_req *r, cJSON *j)
{
	return serve_reply_json(r, 200, j ? j : cJSON_CreateObject());
}

enum MHD_Result e2b_unimplemented(struct serve_req *r)
{
	return e2b_rpc_error(r, "unimplemented", "%s is not implemented by space serve", r->path);
}

bool e2b_path(const char *home, const char *in, char *out, size_t size)
{
	int n;
	if (!in || !*in || !strcmp(in, "~"))
		n = snprintf(out, size, "%s", home);
	else if (in[0] == '/')
		n = snprintf(out, size, "%s", in);
	else if (!strncmp(in, "~/", 2))
		n = snprintf(out, size, "%s/%s", home, in + 2);
	else
		n = snprintf(out, size, "%s/%s", home, in);
	return n > 0 && (size_t)n < size;
}

/* --- Connect server streams --- */

char *e2b_envelope(unsigned flags, cJSON *j, size_t *ret_len)
{
	_cleanup_free_ char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	size_t n = s ? strlen(s) : 0;
	char *buf = s && n <= UINT32_MAX ? malloc(n + 5) : NULL;
	if (!buf)
		return NULL;
	buf[0] = (char)flags;
	buf[1] = (char)(n >> 24), buf[2] = (char)(n >> 16), buf[3] = (char)(n >> 8), buf[4] = (char)n;
	memcpy(buf + 5, s, n);
	*ret_len = n + 5;
	return buf;
}

int e2b_envelope_write(int fd, unsigned flags, cJSON *j)
{
	size_t len;
	_cleanup_free_ char *buf = e2b_envelope(flags, j, &len);
	return buf ? util_write_all(fd, buf, len) : -ENOMEM;
}

/* The end-of-stream message, with {"error": {code, message}} when code is not NULL. */
static cJSON *end_message(const char *code, const char *message)
{
	cJSON *j = cJSON_CreateObject();
	if (j && code) {
		_cleanup_free_ char *clean = serve_utf8_clean(message ? message : "", strlen(message ? message : ""), NULL, NULL);
		cJSON *err = cJSON_AddObjectToObject(j, "error");
		cJSON_AddStringToObject(err, "code", code);
		cJSON_AddStringToObject(err, "message", clean ? clean : "");
	}
	return j;
}

int e2b_stream_end(int fd, const char *code, const char *fmt, ...)
{
	char msg[1024] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	}
	return e2b_envelope_write(fd, 2, end_message(code, msg));
}

enum MHD_Result e2b_stream_error(struct serve_req *r, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t len;
	char *buf = e2b_envelope(2, end_message(code, msg), &len);
	if (!buf)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/connect+json");
	return serve_reply(r, 200, resp);
}

cJSON *e2b_stream_request(struct serve_req *r, const char **why)
{
	const unsigned char *b = (const unsigned char *)r->body;
	*why = "the body must be one enveloped JSON message";
	if (r->body_len < 5)
		return NULL;
	uint32_t n = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
	if (b[0] & 1) {
		*why = "compressed messages are not supported";
		return NULL;
	}
	if (n > r->body_len - 5)
		return NULL;
	cJSON *j = cJSON_ParseWithLength(r->body + 5, n);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* --- base64 --- */

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *e2b_base64_encode(const void *data, size_t len)
{
	const unsigned char *d = data;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < len ? (uint32_t)d[i + 1] << 8 : 0) |
			     (i + 2 < len ? d[i + 2] : 0);
		*o++ = b64_chars[v >> 18 & 63];
		*o++ = b64_chars[v >> 12 & 63];
		*o++ = i + 1 < len ? b64_chars[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64_chars[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(char c)
{
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	const char *p = c ? strchr(b64_chars, c) : NULL;
	return p ? (int)(p - b64_chars) : -1;
}

int e2b_base64_decode(const char *s, unsigned char **ret, size_t *ret_len)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == '=')
		n--;
	unsigned char *out = malloc(n / 4 * 3 + 3);
	if (!out)
		return -ENOMEM;
	size_t len = 0;
	uint32_t acc = 0;
	unsigned bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value(s[i]);
		if (v < 0) {
			free(out);
			return -EINVAL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (unsigned char)(acc >> bits);
		}
	}
	*ret = out;
	*ret_len = len;
	return 0;
}

/* --- envd authentication --- */

bool e2b_envd_authenticate(struct serve_req *r)
{
	const char *token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token");
	const char *id = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	bool rest = !strcmp(r->path, "/files");
	if (!token || !*token) {
		if (rest)
			e2b_api_error(r, 401, "an access token is required (X-Access-Token)");
		else
			e2b_rpc_error(r, "unauthenticated", "an access token is required (X-Access-Token)");
		return false;
	}
	char owner[32];
	pthread_mutex_lock(&r->srv->store_lock);
	int e = serve_token_check(r->srv->store, token, owner);
	pthread_mutex_unlock(&r->srv->store_lock);
	if (e < 0 && e != -EACCES) {
		e2b_api_error(r, 500, "check access token: %s", space_strerror(e));
		return false;
	}
	/* A token opens its own sandbox only; without E2b-Sandbox-Id (SDKs before 2.15 on /files) it also
	 * says which sandbox is meant. */
	if (e == -EACCES || (id && *id && strcmp(id, owner))) {
		if (rest)
			e2b_api_error(r, 401, "invalid access token");
		else
			e2b_rpc_error(r, "unauthenticated", "invalid access token");
		return false;
	}
	snprintf(r->envd_sandbox, sizeof(r->envd_sandbox), "%s", owner);
	return true;
}

/* --- sandboxes --- */

space_sandbox *e2b_sandbox(struct serve_req *r)
{
	if (r->sb)
		return r->sb;
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return NULL;
	int e = space_sandbox_open(ctx, r->envd_sandbox, &r->sb);
	if (e < 0) {
		e2b_api_error(r, 502, "sandbox '%s' is not running: %s", r->envd_sandbox, space_strerror(e));
		return NULL;
	}
	return r->sb;
}

static void add_time(cJSON *j, const char *name, int64_t ms)
{
	char buf[40];
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(j, name, buf);
}

/* Sandbox JSON; detail adds the SandboxDetail/ListedSandbox fields; token (may be NULL) is its
 * envdAccessToken. */
static cJSON *sandbox_json(struct serve_req *r, const struct space_sandbox_info *b, bool detail, const char *token)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "sandboxID", b->id);
	cJSON_AddStringToObject(j, "templateID", b->template_name);
	cJSON_AddStringToObject(j, "alias", b->template_name);
	cJSON_AddStringToObject(j, "clientID", "local");
	cJSON_AddStringToObject(j, "envdVersion", E2B_ENVD_VERSION);
	/* The SDK sends it as X-Access-Token on every envd call. */
	if (token)
		cJSON_AddStringToObject(j, "envdAccessToken", token);
	/* ... and as E2B-Traffic-Access-Token on calls to the sandbox's ports (the code interpreter's
	 * contexts send only that one); the same token opens both (serve_ports.c). */
	if (token)
		cJSON_AddStringToObject(j, "trafficAccessToken", token);
	/* getHost(port) answers PORT-ID.DOMAIN, the Host serve_ports.c routes, when --domain names it. */
	if (r->srv->domain && *r->srv->domain)
		cJSON_AddStringToObject(j, "domain", r->srv->domain);
	else
		cJSON_AddNullToObject(j, "domain");
	if (!detail)
		return j;
	add_time(j, "startedAt", b->created_ms);
	add_time(j, "endAt", b->expires_ms ? b->expires_ms : b->created_ms + 86400000LL * 365);
	cJSON_AddStringToObject(j, "state", b->status == SPACE_SANDBOX_PAUSED ? "paused" : "running");
	cJSON_AddNumberToObject(j, "cpuCount", b->cpus);
	cJSON_AddNumberToObject(j, "memoryMB", b->memory_mib);
	cJSON_AddNumberToObject(j, "diskSizeMB", 0);
	pthread_mutex_lock(&r->srv->store_lock);
	_cleanup_free_ char *meta = serve_metadata_get(r->srv->store, b->id);
	pthread_mutex_unlock(&r->srv->store_lock);
	cJSON *m = meta ? cJSON_Parse(meta) : NULL;
	cJSON_AddItemToObject(j, "metadata", m ? m : cJSON_CreateObject());
	return j;
}

/* Answers status with the Sandbox JSON of r->sb and a new access token for it. */
static enum MHD_Result reply_with_token(struct serve_req *r, unsigned status)
{
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	int e = space_sandbox_get_info(r->sb, &info);
	if (e < 0)
		return e2b_api_error(r, 500, "sandbox info: %s", space_strerror(e));
	char token[SERVE_TOKEN_SIZE];
	pthread_mutex_lock(&r->srv->store_lock);
	e = serve_token_create(r->srv->store, info->id, token);
	pthread_mutex_unlock(&r->srv->store_lock);
	if (e < 0)
		return e2b_api_error(r, 500, "access token: %s", space_strerror(e));
	enum MHD_Result ret = serve_reply_json(r, status, sandbox_json(r, info, false, token));
	explicit_bzero(token, sizeof(token));
	return ret;
}

/* {"A": "1"} -> NULL-terminated "A=1" list in one allocation; NULL with *err set on bad input. */
static char **env_list(const cJSON *vars, const char **err)
{
	int n = cJSON_GetArraySize(vars);
	*err = NULL;
	if (!cJSON_IsObject(vars) || n > E2B_ENV_MAX) {
		*err = "'envVars' must be an object of strings";
		return NULL;
	}
	size_t bytes = ((size_t)n + 1) * sizeof(char *);
	for (const cJSON *it = vars->child; it; it = it->next) {
		if (!cJSON_IsString(it) || !it->string[0] || strchr(it->string, '=')) {
			*err = "'envVars' must map names (without '=') to strings";
			return NULL;
		}
		bytes += strlen(it->string) + strlen(it->valuestring) + 2;
	}
	char **list = malloc(bytes);
	if (!list) {
		*err = "out of memory";
		return NULL;
	}
	char *p = (char *)(list + n + 1);
	int i = 0;
	for (const cJSON *it = vars->child; it; it = it->next) {
		list[i++] = p;
		p += sprintf(p, "%s=%s", it->string, it->valuestring) + 1;
	}
	list[i] = NULL;
	return list;
}

/* The "timeout" member of a control-plane body (seconds) into *ret, def when absent; false after
 * answering 400. An absent or empty body counts as {}. */
static bool body_timeout(struct serve_req *r, cJSON **ret_body, uint32_t def, uint32_t *ret)
{
	cJSON *j = r->body_len ? cJSON_ParseWithLength(r->body, r->body_len) : cJSON_CreateObject();
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		e2b_api_error(r, 400, "the body must be a JSON object");
		return false;
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "timeout");
	if (t && !cJSON_IsNull(t) &&
	    (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > E2B_TIMEOUT_MAX_S)) {
		cJSON_Delete(j);
		e2b_api_error(r, 400, "'timeout' must be a number of seconds from 0 to %u", E2B_TIMEOUT_MAX_S);
		return false;
	}
	*ret = t && cJSON_IsNumber(t) ? (uint32_t)t->valuedouble : def;
	if (ret_body)
		*ret_body = j;
	else
		cJSON_Delete(j);
	return true;
}

static enum MHD_Result sandbox_create(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	uint32_t timeout;
	if (!body_timeout(r, &j, E2B_TIMEOUT_DEFAULT_S, &timeout))
		return MHD_YES;
	const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(j, "templateID");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	const cJSON *vars = cJSON_GetObjectItemCaseSensitive(j, "envVars");
	if (tpl && !cJSON_IsString(tpl))
		return e2b_api_error(r, 400, "'templateID' must be a string");
	if (meta && !cJSON_IsNull(meta) && !cJSON_IsObject(meta))
		return e2b_api_error(r, 400, "'metadata' must be an object");
	/* Ports open without the access token: allowPublicTraffic, at the top or in "network" (E2B's place);
	 * our default is private. */
	const cJSON *net = cJSON_GetObjectItemCaseSensitive(j, "network");
	const cJSON *pub = cJSON_GetObjectItemCaseSensitive(j, "allowPublicTraffic");
	if (net && !cJSON_IsNull(net) && !cJSON_IsObject(net))
		return e2b_api_error(r, 400, "'network' must be an object");
	if (!pub && cJSON_IsObject(net))
		pub = cJSON_GetObjectItemCaseSensitive(net, "allowPublicTraffic");
	if (pub && !cJSON_IsNull(pub) && !cJSON_IsBool(pub))
		return e2b_api_error(r, 400, "'allowPublicTraffic' must be a boolean");
	_cleanup_free_ char **env = NULL;
	if (vars && !cJSON_IsNull(vars)) {
		const char *err;
		env = env_list(vars, &err);
		if (!env)
			return e2b_api_error(r, 400, "%s", err);
	}
	struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
	o.template_name = tpl ? tpl->valuestring : "base";
	o.timeout_s = timeout;
	o.env = (const char *const *)env;
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	uint64_t t0 = util_now_ns();
	int e = space_sandbox_create(ctx, &o, &r->sb);
	serve_metrics_create(r->srv, util_now_ns() - t0, e >= 0);
	if (e < 0)
		return e2b_api_error(r, e == -ENOENT ? 404 : e == -ENODEV ? 503 : 500, "create sandbox from '%s': %s",
				     o.template_name, space_ctx_last_error(ctx));
	if (cJSON_IsObject(meta)) {
		_cleanup_free_ char *m = cJSON_PrintUnformatted(meta);
		pthread_mutex_lock(&r->srv->store_lock);
		e = m ? serve_metadata_set(r->srv->store, space_sandbox_id(r->sb), m) : -ENOMEM;
		pthread_mutex_unlock(&r->srv->store_lock);
		if (e < 0) {
			space_sandbox_destroy(r->sb);
			return e2b_api_error(r, 500, "store metadata: %s", space_strerror(e));
		}
	}
	if (cJSON_IsTrue(pub)) {
		pthread_mutex_lock(&r->srv->store_lock);
		e = serve_public_set(r->srv->store, space_sandbox_id(r->sb));
		pthread_mutex_unlock(&r->srv->store_lock);
		if (e < 0) {
			space_sandbox_destroy(r->sb);
			return e2b_api_error(r, 500, "store allowPublicTraffic: %s", space_strerror(e));
		}
	}
	enum MHD_Result ret = reply_with_token(r, 201);
	if (r->status != 201)
		space_sandbox_destroy(r->sb);
	return ret;
}

/* The sandbox of params[0] from the listing, running or paused, into *ret (the caller frees it); false
 * after answering 404. */
static bool find_sandbox(struct serve_req *r, struct space_sandbox_info **ret)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return false;
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	int e = space_sandbox_list(ctx, &list, &n);
	if (e < 0) {
		e2b_api_error(r, 500, "list sandboxes: %s", space_strerror(e));
		return false;
	}
	bool found = false;
	for (size_t i = 0; i < n && !found; i++)
		if (!strcmp(list[i]->id, r->params[0]) &&
		    (list[i]->status == SPACE_SANDBOX_RUNNING || list[i]->status == SPACE_SANDBOX_PAUSED)) {
			/* Taken out of the list, whose last element fills its place. */
			*ret = list[i];
			list[i] = list[n - 1];
			list[n - 1] = NULL;
			found = true;
		}
	space_sandbox_info_list_free(list);
	if (!found)
		e2b_api_error(r, 404, "sandbox \"%s\" not found", r->params[0]);
	return found;
}

/* find_sandbox, then a handle on it in r->sb; false after answering. */
static bool open_sandbox(struct serve_req *r, struct space_sandbox_info **ret)
{
	if (!find_sandbox(r, ret))
		return false;
	int e = space_sandbox_open(r->ctx, r->params[0], &r->sb);
	if (e == -ENOENT || e == -ESRCH)
		e2b_api_error(r, 404, "sandbox \"%s\" not found", r->params[0]);
	else if (e < 0)
		e2b_api_error(r, 500, "open sandbox: %s", space_ctx_last_error(r->ctx));
	return e == 0;
}

/* An error of the library on r->sb, as the control plane answers it. */
static enum MHD_Result sandbox_error(struct serve_req *r, int e, const char *what)
{
	unsigned status = e == -ESRCH || e == -ENOENT ? 404 : e == -EBUSY ? 409 : e == -EOPNOTSUPP ? 501 : 500;
	return e2b_api_error(r, status, "%s: %s", what, space_ctx_last_error(r->ctx));
}

/* Resumes a paused sandbox (E2B resumes on connect) and gives it timeout_s to live; a paused one has
 * none (see sandbox_pause). */
static int resume_for(struct serve_req *r, uint32_t timeout_s)
{
	int e = space_sandbox_resume(r->sb);
	if (e == 0)
		e = space_sandbox_set_timeout(r->sb, timeout_s);
	return e;
}

static enum MHD_Result sandbox_get(struct serve_req *r)
{
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	if (!find_sandbox(r, &info))
		return MHD_YES;
	return serve_reply_json(r, 200, sandbox_json(r, info, true, NULL));
}

/* connect: 200 for a running sandbox (its lifetime is extended to timeout, never shortened), 201 for a
 * paused one, which is resumed. Either way a new access token. */
static enum MHD_Result sandbox_connect(struct serve_req *r)
{
	uint32_t timeout;
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	if (!body_timeout(r, NULL, E2B_TIMEOUT_DEFAULT_S, &timeout) || !open_sandbox(r, &info))
		return MHD_YES;
	int e = 0;
	if (info->status == SPACE_SANDBOX_PAUSED) {
		e = resume_for(r, timeout);
	} else if (info->expires_ms && timeout &&
		   info->expires_ms < util_wall_ms() + (int64_t)timeout * 1000) {
		e = space_sandbox_set_timeout(r->sb, timeout);
	}
	if (e < 0)
		return sandbox_error(r, e, "connect");
	return reply_with_token(r, info->status == SPACE_SANDBOX_PAUSED ? 201 : 200);
}

/* resume (SDKs before connect existed): 201 for a paused sandbox, 409 for a running one. */
static enum MHD_Result sandbox_resume(struct serve_req *r)
{
	uint32_t timeout;
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	if (!body_timeout(r, NULL, E2B_TIMEOUT_DEFAULT_S, &timeout) || !open_sandbox(r, &info))
		return MHD_YES;
	if (info->status != SPACE_SANDBOX_PAUSED)
		return e2b_api_error(r, 409, "sandbox \"%s\" is already running", info->id);
	int e = resume_for(r, timeout);
	if (e < 0)
		return sandbox_error(r, e, "resume");
	return reply_with_token(r, 201);
}

static enum MHD_Result sandbox_timeout(struct serve_req *r)
{
	uint32_t timeout;
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	if (!body_timeout(r, NULL, UINT32_MAX, &timeout))
		return MHD_YES;
	if (timeout == UINT32_MAX)
		return e2b_api_error(r, 400, "'timeout' (seconds) is required");
	if (!open_sandbox(r, &info))
		return MHD_YES;
	int e = space_sandbox_set_timeout(r->sb, timeout);
	if (e < 0)
		return sandbox_error(r, e, "set timeout");
	return serve_reply_empty(r, 204);
}

/* pause: E2B keeps paused sandboxes until they are resumed or killed, so the lifetime is lifted first
 * (and given back if the pause fails); resuming sets a new one. */
static enum MHD_Result sandbox_pause(struct serve_req *r)
{
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	if (!open_sandbox(r, &info))
		return MHD_YES;
	if (info->status == SPACE_SANDBOX_PAUSED)
		return e2b_api_error(r, 409, "sandbox \"%s\" is already paused", info->id);
	int e = space_sandbox_set_timeout(r->sb, 0);
	if (e < 0)
		return sandbox_error(r, e, "pause");
	e = space_sandbox_pause(r->sb);
	if (e < 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", space_ctx_last_error(r->ctx));
		if (info->expires_ms) {
			int64_t left = (info->expires_ms - util_wall_ms() + 999) / 1000;
			(void)space_sandbox_set_timeout(r->sb, left > 0 ? (uint32_t)left : 1);
		}
		return e2b_api_error(r, e == -EOPNOTSUPP ? 501 : 500, "pause: %s", msg);
	}
	return serve_reply_empty(r, 204);
}

static enum MHD_Result sandbox_kill(struct serve_req *r)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	int e = space_sandbox_remove(ctx, r->params[0]);
	if (e == -ENOENT)
		return e2b_api_error(r, 404, "sandbox \"%s\" not found", r->params[0]);
	if (e < 0)
		return e2b_api_error(r, 500, "kill sandbox: %s", space_ctx_last_error(ctx));
	e2b_procs_sandbox_gone(r->srv->e2b_procs, r->params[0]);
	pthread_mutex_lock(&r->srv->store_lock);
	serve_metadata_set(r->srv->store, r->params[0], NULL);
	pthread_mutex_unlock(&r->srv->store_lock);
	return serve_reply_empty(r, 204);
}

/* True when b comes after the page token "<created_ms>_<id>" (the list is oldest first). */
static bool after_token(const struct space_sandbox_info *b, const char *token)
{
	long long ms;
	char id[32];
	if (sscanf(token, "%lld_%31s", &ms, id) != 2)
		return true;
	return b->created_ms > ms || (b->created_ms == ms && strcmp(b->id, id) > 0);
}

/* GET /v2/sandboxes: running and paused sandboxes (state= "running", "paused" or both, comma-joined),
 * template= filters; pages of limit= with the X-Next-Token header. */
static enum MHD_Result sandbox_list(struct serve_req *r)
{
	const char *state = serve_query(r, "state"), *tmpl = serve_query(r, "template");
	const char *limit_s = serve_query(r, "limit"), *token = serve_query(r, "nextToken");
	uint64_t limit = UINT32_MAX;
	if (limit_s && util_parse_uint(limit_s, 1, UINT32_MAX, &limit) < 0)
		return e2b_api_error(r, 400, "'limit' must be a positive integer");
	bool running = !state || strstr(state, "running"), paused = !state || strstr(state, "paused");
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	int e = space_sandbox_list(ctx, &list, &n);
	if (e < 0)
		return e2b_api_error(r, 500, "list sandboxes: %s", space_strerror(e));
	cJSON *a = cJSON_CreateArray();
	char next[64] = "";
	uint64_t taken = 0;
	const struct space_sandbox_info *last = NULL;
	for (size_t i = 0; i < n && a; i++) {
		const struct space_sandbox_info *b = list[i];
		bool wanted = (b->status == SPACE_SANDBOX_RUNNING && running) || (b->status == SPACE_SANDBOX_PAUSED && paused);
		if (!wanted || (tmpl && strcmp(tmpl, b->template_name)) ||
		    (token && !after_token(b, token)))
			continue;
		if (taken == limit) {
			snprintf(next, sizeof(next), "%lld_%s", (long long)last->created_ms, last->id);
			break;
		}
		cJSON *item = sandbox_json(r, b, true, NULL);
		/* For the host of the cluster that merges the hosts' pages (serve_cluster.c): the order's key. */
		if (item && r->cluster_peer)
			cJSON_AddNumberToObject(item, SERVE_CLUSTER_ORDER_FIELD, (double)b->created_ms);
		cJSON_AddItemToArray(a, item);
		last = b;
		taken++;
	}
	space_sandbox_info_list_free(list);
	_cleanup_free_ char *text = a ? cJSON_PrintUnformatted(a) : NULL;
	cJSON_Delete(a);
	if (!text)
		return e2b_api_error(r, 500, "out of memory");
	size_t len = strlen(text);
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp)
		return MHD_NO;
	text = NULL;              /* the response owns it */
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (*next)
		MHD_add_response_header(resp, "X-Next-Token", next);
	return serve_reply(r, 200, resp);
}

#define KEY SERVE_AUTH_KEY
#define ENVD SERVE_AUTH_ENVD
static const struct serve_route e2b_routes[] = {
	/* control plane */
	{ "POST", "/v2/sandboxes", KEY, false, NULL, sandbox_create },
	{ "POST", "/sandboxes", KEY, false, NULL, sandbox_create },
	{ "GET", "/v2/sandboxes", KEY, false, NULL, sandbox_list },
	{ "GET", "/sandboxes", KEY, false, NULL, sandbox_list },
	{ "GET", "/sandboxes/{id}", KEY, false, NULL, sandbox_get },
	{ "DELETE", "/sandboxes/{id}", KEY, false, NULL, sandbox_kill },
	{ "POST", "/v2/sandboxes/{id}/connect", KEY, false, NULL, sandbox_connect },
	{ "POST", "/sandboxes/{id}/connect", KEY, false, NULL, sandbox_connect },
	{ "POST", "/sandboxes/{id}/resume", KEY, false, NULL, sandbox_resume },
	{ "POST", "/sandboxes/{id}/timeout", KEY, false, NULL, sandbox_timeout },
	{ "POST", "/sandboxes/{id}/pause", KEY, false, NULL, sandbox_pause },
	{ "GET", "/sandboxes/{id}/metrics", KEY, false, NULL, e2b_sandbox_metrics },
	/* envd: the sandbox's access token, not an API key */
	{ "GET", "/files", ENVD, false, NULL, e2b_files_get },
	{ "POST", "/files", ENVD, true, e2b_files_post_start, e2b_files_post },
	{ "POST", "/process.Process/Start", ENVD, false, NULL, e2b_proc_start },
	{ "POST", "/process.Process/List", ENVD, false, NULL, e2b_proc_list },
	{ "POST", "/process.Process/SendInput", ENVD, false, NULL, e2b_proc_send_input },
	{ "POST", "/process.Process/SendSignal", ENVD, false, NULL, e2b_proc_send_signal },
	{ "POST", "/process.Process/CloseStdin", ENVD, false, NULL, e2b_proc_close_stdin },
	{ "POST", "/process.Process/Connect", ENVD, false, NULL, e2b_proc_connect },
	{ "POST", "/process.Process/Update", ENVD, false, NULL, e2b_proc_update },
	{ "POST", "/filesystem.Filesystem/ListDir", ENVD, false, NULL, e2b_fs_list_dir },
	{ "POST", "/filesystem.Filesystem/MakeDir", ENVD, false, NULL, e2b_fs_make_dir },
	{ "POST", "/filesystem.Filesystem/Remove", ENVD, false, NULL, e2b_fs_remove },
	{ "POST", "/filesystem.Filesystem/Stat", ENVD, false, NULL, e2b_fs_stat },
	{ "POST", "/filesystem.Filesystem/Move", ENVD, false, NULL, e2b_fs_move },
	{ "POST", "/filesystem.Filesystem/WatchDir", ENVD, false, NULL, e2b_fs_watch_dir },
	{ "POST", "/filesystem.Filesystem/CreateWatcher", ENVD, false, NULL, e2b_fs_create_watcher },
	{ "POST", "/filesystem.Filesystem/GetWatcherEvents", ENVD, false, NULL, e2b_fs_get_watcher_events },
	{ "POST", "/filesystem.Filesystem/RemoveWatcher", ENVD, false, NULL, e2b_fs_remove_watcher },
};
#undef KEY
#undef ENVD

const struct serve_plane serve_e2b_plane = { "/", e2b_routes, ARRAY_SIZE(e2b_routes) };
