/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: envd's process.Process service over the Connect protocol (JSON codec). Start and Connect
 * are server streams of enveloped messages (a flags byte, a big-endian length, the JSON): the start event
 * with the pid, data events with base64 output, the end event, then the end-of-stream envelope. A process
 * belongs to its runner (serve_e2b_runner.c), not to the stream that started it: it goes on when that
 * stream's client goes away (a background command), until it exits, is signalled or times out. SendInput,
 * SendSignal, CloseStdin and Update are queued to its runner; Connect attaches another stream.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define ARGV_MAX 4096
#define KEEPALIVE_DEFAULT_S 50

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* Whether env (NULL-terminated "K=V") sets name. */
static bool env_has(char *const *env, size_t n, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < n && env[i]; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=')
			return true;
	return false;
}

/* Parses the StartRequest into x for user u; an error message or NULL. */
static const char *start_parse(struct e2b_exec *x, space_sandbox *sb, const struct e2b_user *u)
{
	const cJSON *proc = cJSON_GetObjectItemCaseSensitive(x->json, "process");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(proc, "cmd");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(proc, "args");
	const cJSON *envs = cJSON_GetObjectItemCaseSensitive(proc, "envs");
	const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(proc, "cwd");
	const cJSON *pty = cJSON_GetObjectItemCaseSensitive(x->json, "pty");
	int argc = cJSON_GetArraySize(args);
	if (!cJSON_IsString(cmd) || !cmd->valuestring[0])
		return "'process.cmd' must be a non-empty string";
	if ((args && !cJSON_IsArray(args)) || argc >= ARGV_MAX)
		return "'process.args' must be an array of strings";
	if ((envs && !cJSON_IsObject(envs)) || (cwd && !cJSON_IsString(cwd)))
		return "'process.envs' must be an object, 'process.cwd' a string";
	size_t n_env = (size_t)cJSON_GetArraySize(envs);
	x->argv = calloc((size_t)argc + 2, sizeof(char *));
	x->env = calloc(n_env + 4, sizeof(char *)); /* + HOME, USER, LOGNAME */
	if (!x->argv || !x->env)
		return "out of memory";
	x->argv[0] = cmd->valuestring;
	/* Templates without bash (busybox) run the SDK's `/bin/bash -l -c CMD` with /bin/sh. */
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	if (!strcmp(cmd->valuestring, "/bin/bash") && space_sandbox_stat(sb, "/bin/bash", &st) == -ENOENT)
		x->argv[0] = "/bin/sh";
	int i = 1;
	for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
		if (!cJSON_IsString(a))
			return "'process.args' must be an array of strings";
		x->argv[i++] = a->valuestring;
	}
	size_t k = 0;
	for (const cJSON *v = envs ? envs->child : NULL; v; v = v->next) {
		if (!cJSON_IsString(v) || !v->string[0] || strchr(v->string, '='))
			return "'process.envs' must map names (without '=') to strings";
		if (asprintf(&x->env[k++], "%s=%s", v->string, v->valuestring) < 0) {
			x->env[--k] = NULL;
			return "out of memory";
		}
	}
	x->cwd = cwd ? cwd->valuestring : NULL;
	if (u->given) {
		/* As envd does for a named user: its identity, its home as HOME and as the default directory;
		 * the request's own envs win. */
		x->as_user = true;
		x->uid = u->uid;
		x->gid = u->gid;
		static const char *const vars[] = { "HOME", "USER", "LOGNAME" };
		for (size_t v = 0; v < ARRAY_SIZE(vars); v++)
			if (!env_has(x->env, k, vars[v]) &&
			    asprintf(&x->env[k++], "%s=%s", vars[v], v ? u->name : u->home) < 0) {
				x->env[--k] = NULL;
				return "out of memory";
			}
		if (!x->cwd || !*x->cwd) {
			if (!(x->cwd_owned = strdup(u->home)))
				return "out of memory";
			x->cwd = x->cwd_owned;
		}
	}
	x->stdin_open = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x->json, "stdin"));
	if (pty && cJSON_IsObject(pty)) {
		const cJSON *size = cJSON_GetObjectItemCaseSensitive(pty, "size");
		double c = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(size, "cols"));
		double rw = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(size, "rows"));
		x->pty = true;
		x->stdin_open = true;     /* a terminal's input comes through SendInput */
		x->cols = c >= 1 && c <= 65535 ? (uint16_t)c : 80;
		x->rows = rw >= 1 && rw <= 65535 ? (uint16_t)rw : 24;
	}
	return NULL;
}

/* The Keepalive-Ping-Interval the client asks for, in seconds. */
static unsigned keepalive_s(struct serve_req *r)
{
	uint64_t v;
	const char *ka = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
	return ka && util_parse_uint(ka, 1, 3600, &v) == 0 ? (unsigned)v : KEEPALIVE_DEFAULT_S;
}

enum MHD_Result e2b_proc_start(struct serve_req *r)
{
	const char *why;
	cJSON *j = e2b_stream_request(r, &why);
	if (!j)
		return e2b_stream_error(r, "invalid_argument", "%s", why);
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb) {
		cJSON_Delete(j);
		return MHD_YES;
	}
	struct e2b_user u;
	char uerr[256];
	int e = e2b_request_user(r, sb, &u, uerr, sizeof(uerr));
	if (e < 0) {
		cJSON_Delete(j);
		return e2b_stream_error(r, e2b_rpc_code(e), "%s", uerr);
	}
	struct e2b_exec *x = calloc(1, sizeof(*x));
	if (!x) {
		cJSON_Delete(j);
		return e2b_stream_error(r, "internal", "%s", "out of memory");
	}
	x->json = j;
	const char *err = start_parse(x, sb, &u);
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(j, "tag");
	cJSON *config = err ? NULL : cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j, "process"), true);
	if (!err && !config)
		err = "out of memory";
	if (err) {
		e2b_exec_free(x);
		return e2b_stream_error(r, "invalid_argument", "%s", err);
	}
	uint64_t v;
	const char *t = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	if (t && util_parse_uint(t, 0, UINT32_MAX, &v) == 0)
		x->timeout_ms = (uint32_t)v;
	struct e2b_sub *sub;
	e = e2b_runner_start(r->srv->e2b_procs, space_sandbox_id(sb), x, config,
				 cJSON_IsString(tag) ? tag->valuestring : NULL, keepalive_s(r), &sub, &why);
	if (e < 0)
		return e2b_stream_error(r, e == -EAGAIN ? "resource_exhausted" : e == -ESHUTDOWN ? "unavailable" : "internal", "%s", why);
	serve_metrics_exec(r->srv);
	/* Should the stream fail, the process still runs, as a background one. */
	return serve_reply_stream(r, 200, "application/connect+json", e2b_sub_producer, sub, e2b_sub_free);
}

enum MHD_Result e2b_proc_connect(struct serve_req *r)
{
	const char *why;
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_stream_request(r, &why);
	if (!j)
		return e2b_stream_error(r, "invalid_argument", "%s", why);
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return MHD_YES;
	struct e2b_sub *sub;
	int e = e2b_runner_attach(r->srv->e2b_procs, space_sandbox_id(sb), cJSON_GetObjectItemCaseSensitive(j, "process"),
				  keepalive_s(r), &sub);
	if (e == -ENOENT)
		return e2b_stream_error(r, "not_found", "%s", "no such process");
	if (e < 0)
		return e2b_stream_error(r, "internal", "%s", "out of memory");
	return serve_reply_stream(r, 200, "application/connect+json", e2b_sub_producer, sub, e2b_sub_free);
}

/* --- unary calls on running processes --- */

/* Queues an op (takes data) for the process the body selects; answers. */
static enum MHD_Result queue_op(struct serve_req *r, cJSON *j, enum e2b_op_kind kind, int sig, uint16_t rows,
				uint16_t cols, unsigned char *data, size_t len)
{
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb) {
		free(data);
		return MHD_YES;
	}
	int e = e2b_runner_op(r->srv->e2b_procs, space_sandbox_id(sb), cJSON_GetObjectItemCaseSensitive(j, "process"), kind,
			      sig, rows, cols, data, len);
	if (e == -ENOENT)
		return e2b_rpc_error(r, "not_found", "no such process");
	if (e == -ENOTTY)
		return e2b_rpc_error(r, "invalid_argument", "the process has no terminal to resize");
	if (e < 0)
		return e2b_rpc_error(r, "internal", "out of memory");
	return e2b_rpc_reply(r, NULL);
}

enum MHD_Result e2b_proc_send_input(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	if (!j)
		return MHD_YES;
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "input");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(in, "stdin");
	if (!d)
		d = cJSON_GetObjectItemCaseSensitive(in, "pty");
	unsigned char *data = NULL;
	size_t len = 0;
	if (d && (!cJSON_IsString(d) || e2b_base64_decode(d->valuestring, &data, &len) < 0))
		return e2b_rpc_error(r, "invalid_argument", "'input' must hold base64 bytes");
	return queue_op(r, j, E2B_OP_STDIN, 0, 0, 0, data, len);
}

enum MHD_Result e2b_proc_close_stdin(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	return j ? queue_op(r, j, E2B_OP_CLOSE, 0, 0, 0, NULL, 0) : MHD_YES;
}

enum MHD_Result e2b_proc_send_signal(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	if (!j)
		return MHD_YES;
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "signal");
	int sig = 0;
	if (cJSON_IsString(s))
		sig = !strcmp(s->valuestring, "SIGNAL_SIGKILL") ? SIGKILL : !strcmp(s->valuestring, "SIGNAL_SIGTERM") ? SIGTERM : 0;
	else if (cJSON_IsNumber(s) && (s->valueint == SIGKILL || s->valueint == SIGTERM))
		sig = s->valueint;
	if (!sig)
		return e2b_rpc_error(r, "invalid_argument", "'signal' must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	return queue_op(r, j, E2B_OP_SIGNAL, sig, 0, 0, NULL, 0);
}

/* UpdateRequest: {"process": selector, "pty": {"size": {"cols", "rows"}}}; only a terminal's size
 * changes. */
enum MHD_Result e2b_proc_update(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	if (!j)
		return MHD_YES;
	const cJSON *pty = cJSON_GetObjectItemCaseSensitive(j, "pty");
	if (!pty)
		return e2b_rpc_reply(r, NULL); /* nothing to change */
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(pty, "size");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(size, "cols");
	const cJSON *rw = cJSON_GetObjectItemCaseSensitive(size, "rows");
	if (!cJSON_IsNumber(c) || !cJSON_IsNumber(rw) || c->valuedouble < 1 || c->valuedouble > 65535 ||
	    rw->valuedouble < 1 || rw->valuedouble > 65535 || c->valuedouble != (double)(int)c->valuedouble ||
	    rw->valuedouble != (double)(int)rw->valuedouble)
		return e2b_rpc_error(r, "invalid_argument", "'pty.size' must have 'cols' and 'rows' from 1 to 65535");
	return queue_op(r, j, E2B_OP_RESIZE, 0, (uint16_t)rw->valuedouble, (uint16_t)c->valuedouble, NULL, 0);
}

enum MHD_Result e2b_proc_list(struct serve_req *r)
{
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return MHD_YES;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "processes", e2b_runner_list(r->srv->e2b_procs, space_sandbox_id(sb)));
	return e2b_rpc_reply(r, j);
}
