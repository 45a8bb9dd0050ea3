/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: response and request helpers shared by every API plane. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve.h"
#include "util/cleanup.h"
#include "util/escape.h"

const char *serve_request_key(struct serve_req *r)
{
	const char *k = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-API-Key");
	if (k && *k)
		return k;
	const char *a = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (a && !strncasecmp(a, "Bearer ", 7)) {
		a += 7;
		while (*a == ' ')
			a++;
		return *a ? a : NULL;
	}
	return NULL;
}

static bool expects_continue(struct serve_req *r)
{
	const char *e = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
	return e && !strcasecmp(e, "100-continue");
}

enum MHD_Result serve_reply(struct serve_req *r, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (r->srv && r->srv->cluster_host)
		MHD_add_response_header(resp, "X-Space-Cluster-Host", r->srv->cluster_host);
	if (r->cluster_pull_from[0]) {
		/* a create whose template was pulled here first: from where, and what it added to the create */
		char v[112];
		snprintf(v, sizeof(v), "%s; ms=%llu", r->cluster_pull_from, (unsigned long long)(r->cluster_pull_ns / 1000000));
		MHD_add_response_header(resp, "X-Space-Cluster-Pull", v);
	}
	r->answered = true;
	r->status = status;
	if (r->first_call && !r->answer_now && !expects_continue(r)) {
		/* An answer before the body (a refusal): queued once the body is read and dropped. Queued now, it
		 * would close the connection under a client still sending, which then sees EPIPE, not the answer.
		 * A client that asked "Expect: 100-continue" waits for it before sending: answered at once. */
		r->held = resp;
		r->held_status = status;
		return MHD_YES;
	}
	enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result serve_reply_json(struct serve_req *r, unsigned status, cJSON *j)
{
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!s) {
		static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
		struct MHD_Response *resp =
			MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
		if (resp)
			MHD_add_response_header(resp, "Content-Type", "application/json");
		return serve_reply(r, 500, resp);
	}
	/* Strings may carry sandbox-made text (event details, file names): valid UTF-8, and no DEL or C1
	 * control raw, so that even `curl` to a terminal shows them inert (util/escape.h). */
	size_t n = strlen(s);
	char *safe = util_json_terminal_safe(s, n);
	free(s);
	if (!safe)
		return MHD_NO;
	s = safe;
	n = strlen(s);
	/* A trailing newline, so answers read well in a terminal (curl). */
	char *nl = realloc(s, n + 2);
	if (!nl) {
		free(s);
		return MHD_NO;
	}
	s = nl;
	s[n++] = '\n';
	s[n] = '\0';
	struct MHD_Response *resp = MHD_create_response_from_buffer(n, s, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return serve_reply(r, status, resp);
}

enum MHD_Result serve_reply_error(struct serve_req *r, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	_cleanup_free_ char *clean = serve_utf8_clean(msg, strlen(msg), NULL, NULL);
	cJSON *j = cJSON_CreateObject();
	cJSON *e = cJSON_AddObjectToObject(j, "error");
	if (e) {
		cJSON_AddStringToObject(e, "code", code);
		cJSON_AddStringToObject(e, "message", clean ? clean : "");
	}
	return serve_reply_json(r, status, j);
}

enum MHD_Result serve_reply_space_error(struct serve_req *r, int err, const char *what)
{
	const char *detail = r->ctx ? space_ctx_last_error(r->ctx) : "";
	if (!detail || !*detail)
		detail = space_strerror(err);
	static const struct {
		int err;
		unsigned status;
		const char *code;
	} map[] = {
		{ -ENOENT, 404, "not_found" },    { -ESRCH, 409, "not_running" },
		{ -EEXIST, 409, "exists" },       { -EBUSY, 409, "busy" },
		{ -EINVAL, 400, "invalid" },      { -ENAMETOOLONG, 400, "invalid" },
		{ -ENOTDIR, 400, "invalid" },     { -EISDIR, 400, "invalid" },
		{ -ENOTEMPTY, 400, "invalid" },   { -EACCES, 403, "forbidden" },
		{ -EPERM, 403, "forbidden" },     { -ENODEV, 503, "isolation_unavailable" },
		{ -ENOMEDIUM, 503, "not_initialized" }, { -ENOSPC, 507, "no_space" },
		{ -EOPNOTSUPP, 501, "not_supported" },
		{ -ENOEXEC, 400, "invalid" },     { -EBADMSG, 400, "invalid" },
	};
	unsigned status = 500;
	const char *code = "internal";
	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (map[i].err == err)
			status = map[i].status, code = map[i].code;
	/* The context's message already names the operation and the object. */
	if (r->ctx && *space_ctx_last_error(r->ctx))
		return serve_reply_error(r, status, code, "%s", detail);
	return serve_reply_error(r, status, code, "%s: %s", what, detail);
}

const char *serve_query(struct serve_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool serve_query_bool(struct serve_req *r, const char *name, bool def)
{
	const char *v = serve_query(r, name);
	if (!v)
		return def;
	return !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !*v;
}

cJSON *serve_body_object(struct serve_req *r)
{
	if (!r->body || !r->body_len) {
		serve_reply_error(r, 400, "bad_json", "a JSON object body is required");
		return NULL;
	}
	if (memchr(r->body, '\0', r->body_len)) {
		serve_reply_error(r, 400, "bad_json", "request body contains a NUL byte");
		return NULL;
	}
	const char *end = NULL;
	/* The length includes the terminating NUL (the body is kept NUL-terminated), so that text after
	 * the value is refused. */
	cJSON *j = cJSON_ParseWithLengthOpts(r->body, r->body_len + 1, &end, true);
	if (!j) {
		serve_reply_error(r, 400, "bad_json", "request body is not valid JSON (near byte %zu)",
				  end ? (size_t)(end - r->body) : (size_t)0);
		return NULL;
	}
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		serve_reply_error(r, 400, "bad_json", "request body must be a JSON object");
		return NULL;
	}
	return j;
}

cJSON *serve_body_fields(struct serve_req *r, const char *const *allowed)
{
	cJSON *j = serve_body_object(r);
	const char *bad = j ? serve_json_unknown_field(j, allowed) : NULL;
	if (bad) {
		serve_reply_error(r, 400, "unknown_field", "unknown field '%s'", bad);
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

enum MHD_Result serve_reply_empty(struct serve_req *r, unsigned status)
{
	return serve_reply(r, status, MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
}

const char *serve_json_unknown_field(const cJSON *obj, const char *const *allowed)
{
	for (const cJSON *it = obj ? obj->child : NULL; it; it = it->next) {
		bool ok = false;
		for (size_t i = 0; allowed[i] && !ok; i++)
			ok = it->string && !strcmp(it->string, allowed[i]);
		if (!ok)
			return it->string ? it->string : "";
	}
	return NULL;
}

/* Length of a valid UTF-8 sequence at s (n bytes available): >0 valid, 0 incomplete, -1 invalid. */
static int utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	int len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return -1;
	unsigned cp = c & (0x3f >> (len - 1));
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return 0;
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	return len;
}

char *serve_utf8_clean(const char *s, size_t len, unsigned char carry[4], size_t *ret_len)
{
	size_t held = carry ? carry[3] : 0;
	size_t total = held + len;
	_cleanup_free_ unsigned char *in = malloc(total + 1);
	/* Worst case every byte becomes U+FFFD (3 bytes). */
	_cleanup_free_ char *out = total <= (SIZE_MAX - 1) / 3 ? malloc(total * 3 + 1) : NULL;
	if (!in || !out)
		return NULL;
	if (held)
		memcpy(in, carry, held);
	if (len)
		memcpy(in + held, s, len);
	size_t i = 0, o = 0;
	if (carry)
		carry[3] = 0;
	while (i < total) {
		int n = utf8_seq(in + i, total - i);
		if (n == 0 && carry && total - i <= 3) {
			memcpy(carry, in + i, total - i);
			carry[3] = (unsigned char)(total - i);
			break;
		}
		if (n <= 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(out + o, in + i, (size_t)n);
		o += (size_t)n;
		i += (size_t)n;
	}
	out[o] = '\0';
	if (ret_len)
		*ret_len = o;
	return TAKE_PTR(out);
}

char *serve_json_quote(const char *s, size_t len, unsigned char carry[4])
{
	size_t n;
	_cleanup_free_ char *clean = serve_utf8_clean(s, len, carry, &n);
	/* Worst case every byte becomes "\u00XX" (6 bytes), plus the quotes. */
	char *out = clean && n <= (SIZE_MAX - 3) / 6 ? malloc(n * 6 + 3) : NULL;
	if (!out)
		return NULL;
	size_t o = 0;
	out[o++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)clean[i];
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)sprintf(out + o, "\\u%04x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

space_ctx *serve_req_ctx(struct serve_req *r)
{
	if (r->ctx)
		return r->ctx;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = r->srv->state_dir;
	int e = space_ctx_new(&o, &r->ctx);
	if (e < 0) {
		serve_reply_error(r, 500, "internal", "create context: %s", space_strerror(e));
		return NULL;
	}
	return r->ctx;
}

space_sandbox *serve_req_sandbox(struct serve_req *r)
{
	if (r->sb)
		return r->sb;
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return NULL;
	int e = space_sandbox_open(ctx, r->params[0], &r->sb);
	if (e < 0) {
		if (e == -ENOENT)
			serve_reply_error(r, 404, "not_found", "no sandbox '%s'", r->params[0]);
		else
			serve_reply_space_error(r, e, "open sandbox");
		return NULL;
	}
	return r->sb;
}

/* --- Streamed responses: a producer thread writes into a pipe, the response reads it. --- */

struct stream {
	struct serve_producer p;
	int rfd;
	pthread_t thread;
	bool started;
	void (*fn)(struct serve_producer *p);
};

static void *stream_thread(void *arg)
{
	struct stream *st = arg;
	st->fn(&st->p);
	close(st->p.fd);
	st->p.fd = -1;
	return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	(void)pos;
	for (;;) {
		ssize_t n = read(st->rfd, buf, max);
		if (n > 0)
			return n;
		if (n == 0)
			return st->p.failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		if (errno != EINTR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	/* Closing the read end makes the producer's next write fail (EPIPE), so it stops early when the
	 * client went away. */
	if (st->rfd >= 0)
		close(st->rfd);
	if (st->started)
		pthread_join(st->thread, NULL);
	if (st->p.fd >= 0)
		close(st->p.fd);
	if (st->p.arg_free)
		st->p.arg_free(st->p.arg);
	space_sandbox_free(st->p.sb);
	space_ctx_free(st->p.ctx);
	free(st);
}

enum MHD_Result serve_reply_stream(struct serve_req *r, unsigned status, const char *content_type,
				   void (*fn)(struct serve_producer *p), void *arg, void (*arg_free)(void *arg))
{
	struct stream *st = calloc(1, sizeof(*st));
	int fds[2];
	if (!st || pipe2(fds, O_CLOEXEC) < 0) {
		free(st);
		if (arg_free)
			arg_free(arg);
		return serve_reply_error(r, 500, "internal", "stream: %s", strerror(errno));
	}
	st->rfd = fds[0];
	st->p.fd = fds[1];
	st->p.arg = arg;
	st->p.arg_free = arg_free;
	st->p.ctx = TAKE_PTR(r->ctx);
	st->p.sb = TAKE_PTR(r->sb);
	st->fn = fn;
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st,
								      stream_free);
	if (!resp) {
		stream_free(st);
		return MHD_NO;
	}
	if (pthread_create(&st->thread, NULL, stream_thread, st) != 0) {
		MHD_destroy_response(resp);
		return serve_reply_error(r, 500, "internal", "stream: cannot start a thread");
	}
	st->started = true;
	MHD_add_response_header(resp, "Content-Type", content_type);
	return serve_reply(r, status, resp);
}
