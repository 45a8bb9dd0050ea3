/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: the native API (/v1) — sandboxes, exec, templates. Files are in serve_v1_files.c. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "serve.h"
#include "util/cleanup.h"
#include "util/util.h"

#define LIST_LIMIT_DEFAULT SERVE_V1_LIST_LIMIT_DEFAULT
#define LIST_LIMIT_MAX 1000
#define EXEC_ARGV_MAX 4096
#define ENV_MAX 1024

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

cJSON *serve_v1_sandbox_json(struct serve_req *r, const struct space_sandbox_info *b)
{
	cJSON *j = cli_sandbox_json(b);
	if (!j)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(j, "path");
	pthread_mutex_lock(&r->srv->store_lock);
	_cleanup_free_ char *meta = serve_metadata_get(r->srv->store, b->id);
	pthread_mutex_unlock(&r->srv->store_lock);
	cJSON *m = meta ? cJSON_Parse(meta) : NULL;
	cJSON_AddItemToObject(j, "metadata", m ? m : cJSON_CreateObject());
	return j;
}

bool serve_json_uint(struct serve_req *r, const cJSON *o, const char *name, uint64_t max, uint64_t def,
		     uint64_t *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	*ret = def;
	if (!v || cJSON_IsNull(v))
		return true;
	double d = cJSON_GetNumberValue(v);
	if (!cJSON_IsNumber(v) || d < 0 || d > (double)max || d != (double)(uint64_t)d) {
		serve_reply_error(r, 400, "invalid", "'%s' must be an integer from 0 to %llu", name,
				  (unsigned long long)max);
		return false;
	}
	*ret = (uint64_t)d;
	return true;
}

bool serve_json_str(struct serve_req *r, const cJSON *o, const char *name, const char **ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	*ret = NULL;
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsString(v)) {
		serve_reply_error(r, 400, "invalid", "'%s' must be a string", name);
		return false;
	}
	*ret = v->valuestring;
	return true;
}

/* {"K": "V", ...} -> NULL-terminated "K=V" list (malloc'd, one allocation per entry). */
static bool json_env(struct serve_req *r, const cJSON *o, char ***ret)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "env");
	*ret = NULL;
	if (!env || cJSON_IsNull(env))
		return true;
	int n = cJSON_GetArraySize(env);
	if (!cJSON_IsObject(env) || n > ENV_MAX) {
		serve_reply_error(r, 400, "invalid", "'env' must be an object of at most %d strings", ENV_MAX);
		return false;
	}
	char **list = calloc((size_t)n + 1, sizeof(char *));
	if (!list) {
		serve_reply_error(r, 500, "internal", "out of memory");
		return false;
	}
	int i = 0;
	for (const cJSON *it = env->child; it; it = it->next, i++) {
		if (!cJSON_IsString(it) || !it->string[0] || strchr(it->string, '=') ||
		    asprintf(&list[i], "%s=%s", it->string, it->valuestring) < 0) {
			list[i] = NULL;
			for (int k = 0; k < i; k++)
				free(list[k]);
			free(list);
			serve_reply_error(r, 400, "invalid", "'env' entries must be NAME: \"string\" (NAME without '=')");
			return false;
		}
	}
	*ret = list;
	return true;
}

static void env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

static enum MHD_Result sandbox_create(struct serve_req *r)
{
	static const char *const fields[] = { "template", "isolation", "cpus", "memory_mib", "env", "timeout_s",
					      "metadata", "hostname", "network", "snapshots", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = serve_body_fields(r, fields);
	if (!j)
		return MHD_YES;
	struct space_sandbox_options o = SPACE_SANDBOX_OPTIONS_INIT;
	/* The egress policy (docs/network.md), passed to the library as JSON and always untrusted: it may
	 * only name registered secrets (secret:NAME), never the server's environment or files, no ca_file, and
	 * resolve only to public addresses or the operator's --allow-resolve ranges. A refusal is -EINVAL:
	 * 400 with the library's reason, which names the entry and nothing of the host. */
	o.network_policy_trusted = false;
	o.network_allow_resolve = r->srv->allow_resolve;
	const cJSON *net = cJSON_GetObjectItemCaseSensitive(j, "network");
	_cleanup_free_ char *policy = NULL;
	if (net && !cJSON_IsNull(net)) {
		if (!cJSON_IsObject(net))
			return serve_reply_error(r, 400, "invalid", "'network' must be a policy object (docs/network.md)");
		if (!(policy = cJSON_PrintUnformatted(net)))
			return serve_reply_error(r, 500, "internal", "out of memory");
		o.network_policy = policy;
	}
	uint64_t cpus, mem, timeout;
	if (!serve_json_str(r, j, "template", &o.template_name) || !serve_json_str(r, j, "isolation", &o.isolation) ||
	    !serve_json_str(r, j, "hostname", &o.hostname) || !serve_json_uint(r, j, "cpus", 256, 0, &cpus) ||
	    !serve_json_uint(r, j, "memory_mib", 1u << 20, 0, &mem) ||
	    !serve_json_uint(r, j, "timeout_s", SPACE_TIMEOUT_MAX_S, 0, &timeout))
		return MHD_YES;
	/* periodic file snapshots: {"every": SECONDS, "keep": K} */
	const cJSON *snaps = cJSON_GetObjectItemCaseSensitive(j, "snapshots");
	uint64_t every = 0, keep = 0;
	if (snaps && !cJSON_IsNull(snaps) &&
	    (!cJSON_IsObject(snaps) || !serve_json_uint(r, snaps, "every", 7u * 24 * 3600, 0, &every) ||
	     !serve_json_uint(r, snaps, "keep", 100, 0, &keep)))
		return cJSON_IsObject(snaps) ? MHD_YES
					     : serve_reply_error(r, 400, "invalid", "'snapshots' must be {\"every\": "
										    "SECONDS, \"keep\": K}");
	o.snapshot_every_s = (uint32_t)every;
	o.snapshot_keep = (uint32_t)keep;
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	if (meta && !cJSON_IsNull(meta) && !cJSON_IsObject(meta))
		return serve_reply_error(r, 400, "invalid", "'metadata' must be an object");
	if (o.isolation && strcmp(o.isolation, "vm") && strcmp(o.isolation, "jail"))
		return serve_reply_error(r, 400, "invalid", "'isolation' must be \"vm\" or \"jail\"");
	char **env = NULL;
	if (!json_env(r, j, &env))
		return MHD_YES;
	o.cpus = (uint32_t)cpus;
	o.memory_mib = (uint32_t)mem;
	o.timeout_s = (uint32_t)timeout;
	o.env = (const char *const *)env;
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx) {
		env_free(env);
		return MHD_YES;
	}
	uint64_t t0 = util_now_ns();
	int e = space_sandbox_create(ctx, &o, &r->sb);
	serve_metrics_create(r->srv, util_now_ns() - t0, e >= 0);
	env_free(env);
	if (e < 0)
		return serve_reply_space_error(r, e, "create sandbox");
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	e = space_sandbox_get_info(r->sb, &info);
	if (e < 0)
		return serve_reply_space_error(r, e, "sandbox info");
	if (meta && cJSON_IsObject(meta)) {
		_cleanup_free_ char *m = cJSON_PrintUnformatted(meta);
		pthread_mutex_lock(&r->srv->store_lock);
		e = m ? serve_metadata_set(r->srv->store, info->id, m) : -ENOMEM;
		pthread_mutex_unlock(&r->srv->store_lock);
		if (e < 0) {
			space_sandbox_destroy(r->sb);
			return serve_reply_error(r, 500, "internal", "store metadata: %s", space_strerror(e));
		}
	}
	return serve_reply_json(r, 201, serve_v1_sandbox_json(r, info));
}

static int info_cmp(const void *a, const void *b)
{
	const struct space_sandbox_info *x = *(const struct space_sandbox_info *const *)a;
	const struct space_sandbox_info *y = *(const struct space_sandbox_info *const *)b;
	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* All sandboxes, ordered by (created_ms, id); false after answering on failure. */
static bool sandboxes(struct serve_req *r, struct space_sandbox_info ***ret_list, size_t *ret_n)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return false;
	int e = space_sandbox_list(ctx, ret_list, ret_n);
	if (e < 0) {
		serve_reply_space_error(r, e, "list sandboxes");
		return false;
	}
	if (*ret_n)
		qsort(*ret_list, *ret_n, sizeof(**ret_list), info_cmp);
	return true;
}

/* Pages are ordered by (created_ms, id); the cursor is the last item's "<created_ms>_<id>". */
static enum MHD_Result sandbox_list(struct serve_req *r)
{
	const char *status = serve_query(r, "status"), *tmpl = serve_query(r, "template");
	const char *limit_s = serve_query(r, "limit"), *cursor = serve_query(r, "cursor");
	uint64_t limit = LIST_LIMIT_DEFAULT, cur_ms = 0;
	char cur_id[32] = "";
	if (limit_s && util_parse_uint(limit_s, 1, LIST_LIMIT_MAX, &limit) < 0)
		return serve_reply_error(r, 400, "invalid", "'limit' must be from 1 to %d", LIST_LIMIT_MAX);
	if (cursor) {
		const char *us = strchr(cursor, '_');
		char ms[24];
		if (!us || (size_t)(us - cursor) >= sizeof(ms) || strlen(us + 1) >= sizeof(cur_id))
			return serve_reply_error(r, 400, "invalid", "bad 'cursor'");
		memcpy(ms, cursor, (size_t)(us - cursor));
		ms[us - cursor] = '\0';
		if (util_parse_uint(ms, 0, INT64_MAX, &cur_ms) < 0)
			return serve_reply_error(r, 400, "invalid", "bad 'cursor'");
		strcpy(cur_id, us + 1);
	}
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	if (!sandboxes(r, &list, &n))
		return MHD_YES;
	cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "sandboxes");
	size_t taken = 0;
	const struct space_sandbox_info *last = NULL;
	bool more = false;
	for (size_t i = 0; i < n && a; i++) {
		const struct space_sandbox_info *b = list[i];
		if (cursor && ((uint64_t)b->created_ms < cur_ms ||
			       ((uint64_t)b->created_ms == cur_ms && strcmp(b->id, cur_id) <= 0)))
			continue;
		if ((status && strcmp(status, space_sandbox_status_name(b->status))) ||
		    (tmpl && strcmp(tmpl, b->template_name)))
			continue;
		if (taken == limit) {
			more = true;
			break;
		}
		cJSON_AddItemToArray(a, serve_v1_sandbox_json(r, b));
		last = b;
		taken++;
	}
	if (more && last) {
		char next[64];
		snprintf(next, sizeof(next), "%lld_%s", (long long)last->created_ms, last->id);
		cJSON_AddStringToObject(j, "next_cursor", next);
	} else {
		cJSON_AddNullToObject(j, "next_cursor");
	}
	space_sandbox_info_list_free(list);
	return serve_reply_json(r, 200, j);
}

static enum MHD_Result sandbox_get(struct serve_req *r)
{
	/* A failed sandbox has no live handle; the listing still knows it. */
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	if (!sandboxes(r, &list, &n))
		return MHD_YES;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(list[i]->id, r->params[0])) {
			cJSON *j = serve_v1_sandbox_json(r, list[i]);
			space_sandbox_info_list_free(list);
			return serve_reply_json(r, 200, j);
		}
	}
	space_sandbox_info_list_free(list);
	return serve_reply_error(r, 404, "not_found", "no sandbox '%s'", r->params[0]);
}

static enum MHD_Result sandbox_delete(struct serve_req *r)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	int e = space_sandbox_remove(ctx, r->params[0]);
	if (e == -ENOENT)
		return serve_reply_error(r, 404, "not_found", "no sandbox '%s'", r->params[0]);
	if (e < 0)
		return serve_reply_space_error(r, e, "destroy sandbox");
	pthread_mutex_lock(&r->srv->store_lock);
	serve_metadata_set(r->srv->store, r->params[0], NULL);
	pthread_mutex_unlock(&r->srv->store_lock);
	return serve_reply_empty(r, 204);
}

static enum MHD_Result template_list(struct serve_req *r)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	struct space_template_info **list = NULL;
	size_t n = 0;
	int e = space_template_list(ctx, &list, &n);
	if (e < 0)
		return serve_reply_space_error(r, e, "list templates");
	bool ids = true;
#if HAVE_TEST_SWITCHES
	/* test builds only: list templates as a host of the version before template streams did (no ids), so
	 * that a test can see hosts of two versions work together (a push to such a host goes as an image) */
	ids = getenv("SPACE_TEST_CLUSTER_LIST_NO_IDS") == NULL;
#endif
	cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "templates");
	for (size_t i = 0; i < n && a; i++) {
		cJSON *t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "name", list[i]->name);
		cJSON_AddNumberToObject(t, "rootfs_bytes", (double)list[i]->rootfs_bytes);
		cJSON_AddBoolToObject(t, "has_kernel", list[i]->has_kernel);
		cJSON_AddNumberToObject(t, "created_ms", (double)list[i]->created_ms);
		cJSON_AddNumberToObject(t, "sandboxes", list[i]->sandboxes);
		if (list[i]->size >= offsetof(struct space_template_info, image_digest) + sizeof(list[i]->image_digest) &&
		    list[i]->image_digest[0])
			cJSON_AddStringToObject(t, "image_digest", list[i]->image_digest);
		if (ids && list[i]->size >= offsetof(struct space_template_info, id) + sizeof(list[i]->id) && list[i]->id[0])
			cJSON_AddStringToObject(t, "id", list[i]->id);
		cJSON_AddItemToArray(a, t);
	}
	space_template_info_list_free(list);
	return serve_reply_json(r, 200, j);
}

/* --- exec --- */

struct exec_req {
	cJSON *json;                  /* owns the strings below */
	const char **argv;
	char **env;
	const char *cwd;
	uint32_t timeout_ms;
	int stdin_fd;
};

static void exec_req_free(void *arg)
{
	struct exec_req *x = arg;
	if (!x)
		return;
	cJSON_Delete(x->json);
	free(x->argv);
	env_free(x->env);
	if (x->stdin_fd >= 0)
		close(x->stdin_fd);
	free(x);
}

/* Parses the exec body; NULL after answering on failure. */
static struct exec_req *exec_parse(struct serve_req *r)
{
	static const char *const fields[] = { "argv", "env", "cwd", "timeout_ms", "stdin", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = serve_body_fields(r, fields);
	if (!j)
		return NULL;
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(j, "argv");
	int argc = cJSON_GetArraySize(argv);
	if (!cJSON_IsArray(argv) || argc < 1 || argc > EXEC_ARGV_MAX) {
		serve_reply_error(r, 400, "invalid", "'argv' must be an array of 1 to %d strings", EXEC_ARGV_MAX);
		return NULL;
	}
	struct exec_req *x = calloc(1, sizeof(*x));
	if (!x || !(x->argv = calloc((size_t)argc + 1, sizeof(char *)))) {
		free(x);
		serve_reply_error(r, 500, "internal", "out of memory");
		return NULL;
	}
	x->stdin_fd = -1;
	int i = 0;
	for (const cJSON *it = argv->child; it; it = it->next) {
		if (!cJSON_IsString(it)) {
			exec_req_free(x);
			serve_reply_error(r, 400, "invalid", "'argv' must be an array of strings");
			return NULL;
		}
		x->argv[i++] = it->valuestring;
	}
	uint64_t timeout;
	const char *in = NULL;
	if (!serve_json_str(r, j, "cwd", &x->cwd) || !serve_json_str(r, j, "stdin", &in) ||
	    !serve_json_uint(r, j, "timeout_ms", UINT32_MAX, 0, &timeout) || !json_env(r, j, &x->env)) {
		exec_req_free(x);
		return NULL;
	}
	x->timeout_ms = (uint32_t)timeout;
	if (in) {
		/* The library reads stdin to EOF from an fd: a memfd holds it without a writer thread. */
		x->stdin_fd = memfd_create("space-serve-stdin", MFD_CLOEXEC);
		if (x->stdin_fd < 0 || util_write_all(x->stdin_fd, in, strlen(in)) < 0 ||
		    lseek(x->stdin_fd, 0, SEEK_SET) < 0) {
			exec_req_free(x);
			serve_reply_error(r, 500, "internal", "stdin: %s", strerror(errno));
			return NULL;
		}
	}
	x->json = TAKE_PTR(j);
	return x;
}

static void exec_options(struct exec_req *x, space_output_fn output, void *userdata, struct space_exec_options *o)
{
	o->output = output;
	o->userdata = userdata;
	o->argv = x->argv;
	o->env = (const char *const *)x->env;
	o->cwd = x->cwd;
	o->timeout_ms = x->timeout_ms;
	o->stdin_fd = x->stdin_fd;
	o->flags = x->stdin_fd >= 0 ? SPACE_EXEC_STDIN : 0;
}

static void result_json(cJSON *j, const struct space_exec_result *res)
{
	if (res->exited)
		cJSON_AddNumberToObject(j, "exit_code", res->exit_code);
	else
		cJSON_AddNullToObject(j, "exit_code");
	if (res->exited)
		cJSON_AddNullToObject(j, "signal");
	else
		cJSON_AddNumberToObject(j, "signal", res->signal);
	cJSON_AddBoolToObject(j, "timed_out", res->timed_out);
	cJSON_AddBoolToObject(j, "oom_killed", res->oom_killed); /* killed at the sandbox's memory limit */
}

struct capture {
	char *buf[2];
	size_t len[2];
	bool truncated[2];
};

static int capture_output(int stream, const void *data, size_t len, void *userdata)
{
	struct capture *c = userdata;
	int s = stream == 2 ? 1 : 0;
	size_t room = SERVE_EXEC_CAPTURE_MAX - c->len[s];
	if (len > room) {
		c->truncated[s] = true;
		len = room;
	}
	if (!len)
		return 0;
	char *nb = realloc(c->buf[s], c->len[s] + len);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + c->len[s], data, len);
	c->buf[s] = nb;
	c->len[s] += len;
	return 0;
}

/* Writes one NDJSON line (takes j). */
static int ndjson_line(int fd, cJSON *j)
{
	_cleanup_free_ char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	s[n] = '\n';
	return util_write_all(fd, s, n + 1);
}

struct exec_stream {
	int fd;
	unsigned char carry[2][4];    /* incomplete UTF-8 at the end of the last chunk, per stream */
};

static int stream_output(int stream, const void *data, size_t len, void *userdata)
{
	struct exec_stream *es = userdata;
	int s = stream == 2 ? 1 : 0;
	_cleanup_free_ char *text = serve_json_quote(data, len, es->carry[s]);
	if (!text)
		return -ENOMEM;
	if (!strcmp(text, "\"\""))
		return 0;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "stream", s ? "stderr" : "stdout");
	cJSON_AddRawToObject(j, "data", text);
	/* A failed write means the client went away: the process is then killed. */
	return ndjson_line(es->fd, j) < 0 ? -EPIPE : 0;
}

static void exec_producer(struct serve_producer *p)
{
	struct exec_req *x = p->arg;
	struct exec_stream es = { .fd = p->fd };
	struct space_exec_options o = SPACE_EXEC_OPTIONS_INIT;
	exec_options(x, stream_output, &es, &o);
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	int e = space_sandbox_exec(p->sb, &o, &res);
	/* Flush what an incomplete UTF-8 sequence held back (it is invalid now: no more bytes come). */
	for (int s = 0; s < 2; s++) {
		unsigned char held[4];
		memcpy(held, es.carry[s], sizeof(held));
		es.carry[s][3] = 0;
		if (held[3])
			stream_output(s + 1, held, held[3], &es);
	}
	cJSON *j = cJSON_CreateObject();
	if (e < 0) {
		cJSON *err = cJSON_AddObjectToObject(j, "error");
		const char *detail = space_ctx_last_error(p->ctx);
		cJSON_AddStringToObject(err, "code", e == -ENOENT ? "command_not_found" : "exec_failed");
		cJSON_AddStringToObject(err, "message", detail && *detail ? detail : space_strerror(e));
	} else {
		result_json(j, &res);
	}
	ndjson_line(p->fd, j);
}

static enum MHD_Result sandbox_exec(struct serve_req *r)
{
	struct exec_req *x = exec_parse(r);
	if (!x)
		return MHD_YES;
	if (!serve_req_sandbox(r)) {
		exec_req_free(x);
		return MHD_YES;
	}
	const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	serve_metrics_exec(r->srv);
	if (serve_query_bool(r, "stream", false) || (accept && strstr(accept, "application/x-ndjson")))
		return serve_reply_stream(r, 200, "application/x-ndjson", exec_producer, x, exec_req_free);

	struct capture c = { 0 };
	struct space_exec_options o = SPACE_EXEC_OPTIONS_INIT;
	exec_options(x, capture_output, &c, &o);
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	int e = space_sandbox_exec(r->sb, &o, &res);
	exec_req_free(x);
	enum MHD_Result ret;
	if (e == -ENOENT) {
		ret = serve_reply_error(r, 400, "command_not_found", "%s", space_ctx_last_error(r->ctx));
	} else if (e < 0) {
		ret = serve_reply_space_error(r, e, "exec");
	} else {
		cJSON *j = cJSON_CreateObject();
		result_json(j, &res);
		static const char *const names[2] = { "stdout", "stderr" };
		for (int s = 0; s < 2; s++) {
			_cleanup_free_ char *text = serve_json_quote(c.buf[s] ? c.buf[s] : "", c.len[s], NULL);
			if (!text) {
				cJSON_Delete(j);
				j = NULL;
				break;
			}
			cJSON_AddRawToObject(j, names[s], text);
		}
		if (j) {
			cJSON_AddBoolToObject(j, "stdout_truncated", c.truncated[0]);
			cJSON_AddBoolToObject(j, "stderr_truncated", c.truncated[1]);
		}
		ret = serve_reply_json(r, 200, j);
	}
	free(c.buf[0]);
	free(c.buf[1]);
	return ret;
}

#define KEY SERVE_AUTH_KEY
static const struct serve_route v1_routes[] = {
	{ "POST", "/v1/sandboxes", KEY, false, NULL, sandbox_create },
	{ "GET", "/v1/sandboxes", KEY, false, NULL, sandbox_list },
	{ "GET", "/v1/sandboxes/{id}", KEY, false, NULL, sandbox_get },
	{ "GET", "/v1/sandboxes/{id}/metrics", KEY, false, NULL, serve_v1_metrics },
	{ "DELETE", "/v1/sandboxes/{id}", KEY, false, NULL, sandbox_delete },
	{ "POST", "/v1/sandboxes/{id}/exec", KEY, false, NULL, sandbox_exec },
	{ "PUT", "/v1/sandboxes/{id}/files", KEY, true, serve_v1_upload_start, serve_v1_upload },
	{ "GET", "/v1/sandboxes/{id}/files", KEY, false, NULL, serve_v1_download },
	{ "DELETE", "/v1/sandboxes/{id}/files", KEY, false, NULL, serve_v1_file_remove },
	{ "GET", "/v1/sandboxes/{id}/files/stat", KEY, false, NULL, serve_v1_file_stat },
	{ "GET", "/v1/sandboxes/{id}/files/list", KEY, false, NULL, serve_v1_file_list },
	{ "POST", "/v1/sandboxes/{id}/files/mkdir", KEY, false, NULL, serve_v1_mkdir },
	{ "POST", "/v1/sandboxes/{id}/pause", KEY, false, NULL, serve_v1_pause },
	{ "POST", "/v1/sandboxes/{id}/resume", KEY, false, NULL, serve_v1_resume },
	{ "POST", "/v1/sandboxes/{id}/timeout", KEY, false, NULL, serve_v1_timeout },
	{ "GET", "/v1/sandboxes/{id}/checkpoints", KEY, false, NULL, serve_v1_checkpoint_list },
	{ "POST", "/v1/sandboxes/{id}/checkpoints", KEY, false, NULL, serve_v1_checkpoint_create },
	{ "POST", "/v1/sandboxes/{id}/rollback", KEY, false, NULL, serve_v1_rollback },
	{ "GET", "/v1/checkpoints/{id}", KEY, false, NULL, serve_v1_checkpoint_get },
	{ "DELETE", "/v1/checkpoints/{id}", KEY, false, NULL, serve_v1_checkpoint_delete },
	{ "POST", "/v1/checkpoints/{id}/fork", KEY, false, NULL, serve_v1_fork },
	{ "GET", "/v1/events", KEY, false, NULL, serve_v1_events },
	{ "GET", "/v1/metrics", KEY, false, NULL, serve_metrics_handler },
	{ "GET", "/v1/templates", KEY, false, NULL, template_list },
	{ "POST", "/v1/templates/{name}/image", KEY, true, serve_v1_template_image_start, serve_v1_template_image, true },
	{ "POST", "/v1/templates/{name}/stream", KEY, true, serve_v1_template_image_start, serve_v1_template_stream, true },
	/* a cluster's hosts (docs/cluster.md): this host's template to another, or another's to this one */
	{ "POST", "/v1/templates/{name}/push", KEY, false, NULL, serve_cluster_template_push },
	{ "POST", "/v1/templates/{name}/pull", KEY, false, NULL, serve_cluster_template_pull },
	{ "POST", "/v1/templates/{name}/build", KEY, true, serve_v1_template_image_start, serve_v1_template_build, true },
};
#undef KEY

const struct serve_plane serve_v1_plane = { "/v1/", v1_routes, ARRAY_SIZE(v1_routes) };
