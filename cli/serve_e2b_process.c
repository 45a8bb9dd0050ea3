/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: envd's process.Process service over the Connect protocol (JSON codec). Start is a
 * server stream of enveloped messages (a flags byte, a big-endian length, the JSON): the start event
 * with the pid, data events with base64 output, the end event, then the end-of-stream envelope. While a
 * process runs it is in a registry, so SendInput, SendSignal, CloseStdin and List reach it; those are
 * queued to the thread that owns the process and applied there.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define ARGV_MAX 4096
#define ENVELOPE_MAX (1u << 20)
#define KEEPALIVE_DEFAULT_S 50

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

enum op_kind { OP_STDIN, OP_CLOSE, OP_SIGNAL };

struct op {
	enum op_kind kind;
	int sig;
	unsigned char *data;
	size_t len;
	struct op *next;
};

/* A running process, owned by its Start stream's thread. */
struct proc {
	char sandbox[32];
	uint32_t pid;
	cJSON *config;                /* {"cmd", "args", "envs", "cwd"} as started, for List */
	char *tag;
	int wake[2];                  /* a byte on wake[1]: ops are queued */
	struct op *ops, **ops_tail;   /* under reg_lock */
	struct proc *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct proc *reg;

struct start {
	cJSON *json;                  /* the request; owns the strings below */
	const char **argv;
	char **env;
	const char *cwd;
	bool stdin_open;
	bool pty;
	uint16_t rows, cols;
	uint32_t timeout_ms;
	unsigned keepalive_s;
	char sandbox[32];
	struct proc *proc;
	int fd;                       /* the stream */
};

static void proc_unregister(struct proc *p);

static void start_free(void *arg)
{
	struct start *s = arg;
	if (!s)
		return;
	if (s->proc)
		proc_unregister(s->proc);
	cJSON_Delete(s->json);
	free(s->argv);
	if (s->env)
		for (size_t i = 0; s->env[i]; i++)
			free(s->env[i]);
	free(s->env);
	free(s);
}

/* One envelope (a flags byte, the big-endian length, the JSON of j; takes j) in a new buffer of
 * *ret_len bytes, or NULL. */
static char *envelope_build(unsigned flags, cJSON *j, size_t *ret_len)
{
	_cleanup_free_ char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	size_t n = s ? strlen(s) : 0;
	char *buf = s ? malloc(n + 5) : NULL;
	if (!buf)
		return NULL;
	buf[0] = (char)flags;
	buf[1] = (char)(n >> 24), buf[2] = (char)(n >> 16), buf[3] = (char)(n >> 8), buf[4] = (char)n;
	memcpy(buf + 5, s, n);
	*ret_len = n + 5;
	return buf;
}

static int envelope(int fd, unsigned flags, cJSON *j)
{
	size_t len;
	_cleanup_free_ char *buf = envelope_build(flags, j, &len);
	return buf ? util_write_all(fd, buf, len) : -ENOMEM;
}

/* {"event": {name: inner}} as a data envelope. */
static int event(int fd, const char *name, cJSON *inner)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *ev = cJSON_AddObjectToObject(j, "event");
	cJSON_AddItemToObject(ev, name, inner ? inner : cJSON_CreateObject());
	return envelope(fd, 0, j);
}

/* The end-of-stream envelope, with an error when code is not NULL. */
static int end_stream(int fd, const char *code, const char *message)
{
	cJSON *j = cJSON_CreateObject();
	if (code) {
		cJSON *err = cJSON_AddObjectToObject(j, "error");
		cJSON_AddStringToObject(err, "code", code);
		cJSON_AddStringToObject(err, "message", message ? message : "");
	}
	return envelope(fd, 2, j);
}

static int stream_output(int stream, const void *data, size_t len, void *userdata)
{
	struct start *s = userdata;
	if (!len)
		return 0;
	_cleanup_free_ char *b64 = e2b_base64_encode(data, len);
	if (!b64)
		return -ENOMEM;
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, s->pty ? "pty" : stream == 2 ? "stderr" : "stdout", b64);
	/* A failed write means the client went away: the process is then killed. */
	return event(s->fd, "data", d) < 0 ? -EPIPE : 0;
}

static void proc_unregister(struct proc *p)
{
	pthread_mutex_lock(&reg_lock);
	for (struct proc **pp = &reg; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	struct op *o = p->ops;
	pthread_mutex_unlock(&reg_lock);
	while (o) {
		struct op *next = o->next;
		free(o->data);
		free(o);
		o = next;
	}
	close(p->wake[0]);
	close(p->wake[1]);
	free(p->tag);
	cJSON_Delete(p->config);
	free(p);
}

/* Applies the queued ops to the process. */
static void run_ops(struct proc *p, space_process *sp)
{
	char buf[64];
	while (read(p->wake[0], buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&reg_lock);
	struct op *o = p->ops;
	p->ops = NULL;
	p->ops_tail = &p->ops;
	pthread_mutex_unlock(&reg_lock);
	while (o) {
		struct op *next = o->next;
		if (o->kind == OP_STDIN && o->len)
			space_process_write_stdin(sp, o->data, o->len);
		else if (o->kind == OP_CLOSE)
			space_process_write_stdin(sp, NULL, 0);
		else if (o->kind == OP_SIGNAL)
			space_process_signal(sp, o->sig);
		free(o->data);
		free(o);
		o = next;
	}
}

static void end_event(int fd, const struct space_exec_result *res)
{
	cJSON *end = cJSON_CreateObject();
	char status[64];
	if (res->exited) {
		snprintf(status, sizeof(status), "exit status %d", res->exit_code);
		cJSON_AddNumberToObject(end, "exitCode", res->exit_code);
		cJSON_AddBoolToObject(end, "exited", true);
	} else {
		snprintf(status, sizeof(status), "signal: %s",
			 res->timed_out ? "killed (timeout)" : res->oom_killed ? "killed (out of memory)" : strsignal(res->signal));
		cJSON_AddNumberToObject(end, "exitCode", -1);
		cJSON_AddBoolToObject(end, "exited", false);
	}
	cJSON_AddStringToObject(end, "status", status);
	if (!res->exited || res->exit_code)
		cJSON_AddStringToObject(end, "error", status);
	event(fd, "end", end);
}

static void start_producer(struct serve_producer *pr)
{
	struct start *s = pr->arg;
	struct proc *p = TAKE_PTR(s->proc);
	s->fd = pr->fd;
	struct space_exec_options o = SPACE_EXEC_OPTIONS_INIT;
	o.argv = s->argv;
	o.env = (const char *const *)s->env;
	o.cwd = s->cwd;
	o.pty = s->pty;
	o.rows = s->rows;
	o.cols = s->cols;
	o.timeout_ms = s->timeout_ms;
	o.stdin_fd = -1;
	o.flags = s->stdin_open ? SPACE_EXEC_STDIN : 0; /* fed through space_process_write_stdin */
	o.output = stream_output;
	o.userdata = s;
	space_process *sp = NULL;
	int e = space_process_start(pr->sb, &o, &sp);
	if (e < 0) {
		const char *msg = space_ctx_last_error(pr->ctx);
		end_stream(pr->fd, e2b_rpc_code(e), msg && *msg ? msg : space_strerror(e));
		proc_unregister(p);
		return;
	}
	/* Registered before the client learns the pid, so its next call finds the process. */
	pthread_mutex_lock(&reg_lock);
	p->pid = (uint32_t)space_process_pid(sp);
	p->next = reg;
	reg = p;
	pthread_mutex_unlock(&reg_lock);
	cJSON *st = cJSON_CreateObject();
	cJSON_AddNumberToObject(st, "pid", p->pid);
	event(pr->fd, "start", st);

	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	for (;;) {
		struct pollfd pf[2] = { { .fd = space_process_fd(sp), .events = POLLIN },
					{ .fd = p->wake[0], .events = POLLIN } };
		int n = poll(pf, 2, space_process_pending(sp) ? 0 : (int)s->keepalive_s * 1000);
		if (n < 0 && errno != EINTR)
			break;
		if (n == 0 && !space_process_pending(sp)) {
			if (event(pr->fd, "keepalive", NULL) < 0)
				break;
			continue;
		}
		if (pf[1].revents)
			run_ops(p, sp);
		if (pf[0].revents || space_process_pending(sp)) {
			e = space_process_pump(sp, &res);
			if (e != 0)
				break;
		}
	}
	if (e == 1) {
		end_event(pr->fd, &res);
		end_stream(pr->fd, NULL, NULL);
	} else {
		const char *msg = space_ctx_last_error(pr->ctx);
		end_stream(pr->fd, "internal", msg && *msg ? msg : "the process stream failed");
	}
	space_process_free(sp);
	proc_unregister(p);
}

/* A complete stream that only carries an error (the answer to a bad Start). */
static enum MHD_Result stream_error(struct serve_req *r, const char *code, const char *message)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *err = cJSON_AddObjectToObject(j, "error");
	cJSON_AddStringToObject(err, "code", code);
	cJSON_AddStringToObject(err, "message", message);
	size_t len;
	char *buf = envelope_build(2, j, &len);
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

/* The JSON message of an enveloped request body; NULL with *why set. */
static cJSON *unwrap(struct serve_req *r, const char **why)
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
	if (n > ENVELOPE_MAX || n > r->body_len - 5)
		return NULL;
	cJSON *j = cJSON_ParseWithLength(r->body + 5, n);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* Parses the StartRequest into s; an error message or NULL. */
static const char *start_parse(struct start *s, space_sandbox *sb)
{
	const cJSON *proc = cJSON_GetObjectItemCaseSensitive(s->json, "process");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(proc, "cmd");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(proc, "args");
	const cJSON *envs = cJSON_GetObjectItemCaseSensitive(proc, "envs");
	const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(proc, "cwd");
	const cJSON *pty = cJSON_GetObjectItemCaseSensitive(s->json, "pty");
	int argc = cJSON_GetArraySize(args);
	if (!cJSON_IsString(cmd) || !cmd->valuestring[0])
		return "'process.cmd' must be a non-empty string";
	if ((args && !cJSON_IsArray(args)) || argc >= ARGV_MAX)
		return "'process.args' must be an array of strings";
	if ((envs && !cJSON_IsObject(envs)) || (cwd && !cJSON_IsString(cwd)))
		return "'process.envs' must be an object, 'process.cwd' a string";
	s->argv = calloc((size_t)argc + 2, sizeof(char *));
	s->env = calloc((size_t)cJSON_GetArraySize(envs) + 1, sizeof(char *));
	if (!s->argv || !s->env)
		return "out of memory";
	s->argv[0] = cmd->valuestring;
	/* Templates without bash (busybox) run the SDK's `/bin/bash -l -c CMD` with /bin/sh. */
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	if (!strcmp(cmd->valuestring, "/bin/bash") && space_sandbox_stat(sb, "/bin/bash", &st) == -ENOENT)
		s->argv[0] = "/bin/sh";
	int i = 1;
	for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
		if (!cJSON_IsString(a))
			return "'process.args' must be an array of strings";
		s->argv[i++] = a->valuestring;
	}
	i = 0;
	for (const cJSON *v = envs ? envs->child : NULL; v; v = v->next) {
		if (!cJSON_IsString(v) || !v->string[0] || strchr(v->string, '='))
			return "'process.envs' must map names (without '=') to strings";
		if (asprintf(&s->env[i++], "%s=%s", v->string, v->valuestring) < 0) {
			s->env[--i] = NULL;
			return "out of memory";
		}
	}
	s->cwd = cwd ? cwd->valuestring : NULL;
	s->stdin_open = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s->json, "stdin"));
	if (pty && cJSON_IsObject(pty)) {
		const cJSON *size = cJSON_GetObjectItemCaseSensitive(pty, "size");
		double c = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(size, "cols"));
		double rw = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(size, "rows"));
		s->pty = true;
		s->stdin_open = true;     /* a terminal's input comes through SendInput */
		s->cols = c >= 1 && c <= 65535 ? (uint16_t)c : 80;
		s->rows = rw >= 1 && rw <= 65535 ? (uint16_t)rw : 24;
	}
	return NULL;
}

enum MHD_Result e2b_proc_start(struct serve_req *r)
{
	const char *why;
	cJSON *j = unwrap(r, &why);
	if (!j)
		return stream_error(r, "invalid_argument", why);
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb) {
		cJSON_Delete(j);
		return MHD_YES;
	}
	struct start *s = calloc(1, sizeof(*s));
	struct proc *p = calloc(1, sizeof(*p));
	if (!s || !p) {
		free(s);
		free(p);
		cJSON_Delete(j);
		return stream_error(r, "internal", "out of memory");
	}
	s->json = j;
	p->wake[0] = p->wake[1] = -1;
	const char *err = start_parse(s, sb);
	if (!err && pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		err = "cannot make a pipe";
	const cJSON *proc = cJSON_GetObjectItemCaseSensitive(j, "process");
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(j, "tag");
	if (!err && (!(p->config = cJSON_Duplicate(proc, true)) || (cJSON_IsString(tag) && !(p->tag = strdup(tag->valuestring)))))
		err = "out of memory";
	if (err) {
		start_free(s);
		if (p->wake[0] >= 0) {
			close(p->wake[0]);
			close(p->wake[1]);
		}
		cJSON_Delete(p->config);
		free(p);
		return stream_error(r, "invalid_argument", err);
	}
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", space_sandbox_id(sb));
	p->ops_tail = &p->ops;
	s->proc = p;
	uint64_t v;
	const char *t = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	if (t && util_parse_uint(t, 0, UINT32_MAX, &v) == 0)
		s->timeout_ms = (uint32_t)v;
	const char *ka = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
	s->keepalive_s = ka && util_parse_uint(ka, 1, 3600, &v) == 0 ? (unsigned)v : KEEPALIVE_DEFAULT_S;
	serve_metrics_exec(r->srv);
	return serve_reply_stream(r, 200, "application/connect+json", start_producer, s, start_free);
}

/* --- unary calls on running processes --- */

/* The registered process the request's "process" selector names (pid or tag) in the request's
 * sandbox; called with reg_lock held. */
static struct proc *proc_find(const char *sandbox, const cJSON *sel)
{
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(sel, "pid");
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(sel, "tag");
	for (struct proc *p = reg; p; p = p->next) {
		if (strcmp(p->sandbox, sandbox))
			continue;
		if (cJSON_IsNumber(pid) && pid->valuedouble == (double)p->pid)
			return p;
		if (cJSON_IsString(tag) && p->tag && !strcmp(tag->valuestring, p->tag))
			return p;
	}
	return NULL;
}

/* Queues an op (takes data) for the process the body selects; answers. */
static enum MHD_Result queue_op(struct serve_req *r, cJSON *j, enum op_kind kind, int sig, unsigned char *data,
				size_t len)
{
	space_sandbox *sb = e2b_sandbox(r);
	struct op *o = sb ? calloc(1, sizeof(*o)) : NULL;
	if (!o) {
		free(data);
		return sb ? e2b_rpc_error(r, "internal", "out of memory") : MHD_YES;
	}
	o->kind = kind;
	o->sig = sig;
	o->data = data;
	o->len = len;
	pthread_mutex_lock(&reg_lock);
	struct proc *p = proc_find(space_sandbox_id(sb), cJSON_GetObjectItemCaseSensitive(j, "process"));
	if (p) {
		*p->ops_tail = o;
		p->ops_tail = &o->next;
		if (write(p->wake[1], "", 1) < 0) {
			/* The pipe is full: a wake-up is already pending. */
		}
	}
	pthread_mutex_unlock(&reg_lock);
	if (!p) {
		free(data);
		free(o);
		return e2b_rpc_error(r, "not_found", "no such process");
	}
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
	return queue_op(r, j, OP_STDIN, 0, data, len);
}

enum MHD_Result e2b_proc_close_stdin(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	return j ? queue_op(r, j, OP_CLOSE, 0, NULL, 0) : MHD_YES;
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
	return queue_op(r, j, OP_SIGNAL, sig, NULL, 0);
}

enum MHD_Result e2b_proc_list(struct serve_req *r)
{
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return MHD_YES;
	cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "processes");
	pthread_mutex_lock(&reg_lock);
	for (struct proc *p = reg; p && a; p = p->next) {
		if (strcmp(p->sandbox, space_sandbox_id(sb)))
			continue;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "pid", p->pid);
		cJSON_AddItemToObject(e, "config", cJSON_Duplicate(p->config, true));
		if (p->tag)
			cJSON_AddStringToObject(e, "tag", p->tag);
		cJSON_AddItemToArray(a, e);
	}
	pthread_mutex_unlock(&reg_lock);
	return e2b_rpc_reply(r, j);
}
