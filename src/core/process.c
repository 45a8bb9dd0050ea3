/* SPDX-License-Identifier: Apache-2.0 */
/* Processes and files in a sandbox: the public face of the agent client. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/sandbox.h"
#include "proto/agent_client.h"
#include "store/db.h"
#include "util/cleanup.h"
#include "util/escape.h"

static const char *const default_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"TERM=xterm-256color",
	"LANG=C.UTF-8",
};

/* Records "<verb> <arg>: <the agent's message>" as the context's error. */
static int agent_fail(space_ctx *ctx, int r, const struct agent_error *e, const char *verb, const char *arg)
{
	char what[512];
	snprintf(what, sizeof(what), "%s %s", verb, arg);
	if (e && e->msg[0])
		return ctx_error_msg(ctx, r, "%s: %s", what, e->msg);
	return ctx_error(ctx, r, "%s", what);
}

static size_t key_len(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* defaults, then the sandbox's, then the call's: a later KEY replaces an earlier one. */
static const char **merge_env(char *const *sandbox, const char *const *call)
{
	size_t n = ARRAY_SIZE(default_env);
	for (char *const *e = sandbox; e && *e; e++)
		n++;
	for (const char *const *e = call; e && *e; e++)
		n++;
	const char **v = calloc(n + 1, sizeof(char *));
	if (!v)
		return NULL;
	size_t k = 0;
	const char *const *lists[3] = { default_env, (const char *const *)sandbox, call };
	size_t counts[3] = { ARRAY_SIZE(default_env), SIZE_MAX, SIZE_MAX };
	for (int l = 0; l < 3; l++) {
		for (size_t i = 0; lists[l] && i < counts[l] && lists[l][i]; i++) {
			const char *kv = lists[l][i];
			size_t kl = key_len(kv);
			size_t j;
			for (j = 0; j < k; j++)
				if (key_len(v[j]) == kl && !strncmp(v[j], kv, kl))
					break;
			v[j] = kv;
			if (j == k)
				k++;
		}
	}
	return v;
}

static struct agent_exec_req exec_req(const struct space_exec_options *o, const char **env)
{
	return (struct agent_exec_req){
		.argv = o->argv,
		.env = env,
		.cwd = o->cwd,
		.uid = o->uid,
		.gid = o->gid,
		.stdin_pipe = (o->flags & SPACE_EXEC_STDIN) != 0,
		.pty = o->pty,
		.rows = o->rows,
		.cols = o->cols,
		.timeout_ms = o->timeout_ms,
	};
}

/* Reads the caller's options (*o: the current version's layout, SPACE_EXEC_STDIN set exactly when there is
 * a stdin) and checks them and the sandbox's state; *ret_env: defaults, the sandbox's and the call's. */
static int exec_prepare(space_sandbox *sb, const struct space_exec_options *in, bool process,
			struct space_exec_options *o, const char ***ret_env)
{
	if (!sb || !in)
		return -EINVAL;
	int r = opts_exec_load(sandbox_ctx(sb), in, process, o);
	if (r < 0)
		return r;
	if (!o->argv || !o->argv[0])
		return -EINVAL;
	r = sandbox_usable(sb);
	if (r < 0)
		return r;
	/* What the template's image names, unless the call says otherwise (space.h: cwd, uid/gid). */
	const struct sandbox_defaults *d = sandbox_defaults(sb);
	if (!o->cwd && d->cwd[0])
		o->cwd = d->cwd;
	if (!(o->flags & SPACE_EXEC_USER) && !o->uid && !o->gid) {
		o->uid = d->uid;
		o->gid = d->gid;
	}
	*ret_env = merge_env(sandbox_env(sb), o->env);
	return *ret_env ? 0 : -ENOMEM;
}

/*
 * Out-of-memory kills of a jail's commands: the jail's cgroup counts the kills of its OOM killer, so a
 * command that ended by SIGKILL (not the agent's timeout), or with 137 (a shell passing on its child's
 * SIGKILL: `sh -c 'a | b'`), while the counter rose was killed for memory. Another process of the same
 * sandbox killed meanwhile can be mistaken for it; the exit status stays the truth either way. A VM's
 * commands are killed by the guest's own kernel, which the host does not see: its agent (protocol 1.5)
 * reads the guest's count (/proc/vmstat oom_kill) the same way and says so in EXIT.
 */
struct oom_watch {
	const struct backend_ops *ops; /* NULL: not armed */
	struct sandbox_row row;        /* a copy (no metadata): a process may outlive its sandbox handle */
	uint64_t before;
	char what[128]; /* argv[0], escaped: it goes into the event log */
};

static void oom_watch_begin(space_sandbox *sb, const char *argv0, struct oom_watch *w)
{
	const struct backend_ops *ops;
	w->ops = NULL;
	w->row = *sandbox_handle_row(sb);
	w->row.metadata = NULL;
	util_text_one_line(argv0, w->what, sizeof(w->what));
	if (backend_for_row(sandbox_ctx(sb), &w->row, &ops) < 0 || !ops->oom_kills ||
	    ops->oom_kills(&w->row, &w->before) < 0)
		return;
	w->ops = ops;
}

/* Sets ret->oom_killed when the OOM killer ended the command (a jail's cgroup counts its kills; a VM's
 * agent said so, its guest kernel being the one that kills), and records an "oom" event. */
static void oom_watch_end(space_ctx *ctx, const struct oom_watch *w, struct space_exec_result *ret)
{
	uint64_t after;
	bool killed = ret->exited ? ret->exit_code == 128 + SIGKILL : ret->signal == SIGKILL;
	if (!ret->oom_killed &&
	    (!w->ops || !killed || ret->timed_out || w->ops->oom_kills(&w->row, &after) < 0 || after <= w->before))
		return;
	ret->oom_killed = true;
	char detail[256];
	uint32_t limit = w->row.info.memory_mib;
	if (limit)
		snprintf(detail, sizeof(detail), "killed: out of memory (limit %u MiB): %s", limit, w->what);
	else
		snprintf(detail, sizeof(detail), "killed: out of memory: %s", w->what);
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: %s", w->row.info.id, detail);
	struct store *s;
	if (ctx_store(ctx, &s) == 0)
		(void)store_event(s, w->row.info.id, "oom", detail); /* the result says it whatever the log does */
}

static void result_from(const struct agent_exit *ex, struct space_exec_result *ret)
{
	*ret = (struct space_exec_result){
		.exited = ex->exited,
		.exit_code = ex->code,
		.signal = ex->signal,
		.timed_out = ex->timed_out,
		.oom_killed = ex->oom_killed,
	};
}

struct space_process {
	space_ctx *ctx;
	struct agent_exec *x;
	space_output_fn output;
	void *userdata;
	struct oom_watch oom;
};

static int deliver(int stream, const void *buf, size_t len, void *userdata)
{
	struct space_process *p = userdata;
	return p->output ? p->output(stream, buf, len, p->userdata) : 0;
}

SPACE_API int space_process_start(space_sandbox *sb, const struct space_exec_options *opts, space_process **ret)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!ret)
		return -EINVAL;
	_cleanup_free_ const char **env = NULL;
	struct space_exec_options o;
	int r = exec_prepare(sb, opts, true, &o, &env);
	if (r < 0)
		return r;
	space_ctx *ctx = sandbox_ctx(sb);
	struct agent_exec_req req = exec_req(&o, env);
	struct space_process *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->output = o.output;
	p->userdata = o.userdata;
	struct agent_error err = { 0 };
	oom_watch_begin(sb, o.argv[0], &p->oom);
	r = agent_exec_start(sandbox_addr(sb), &req, &p->x, &err);
	if (r < 0) {
		free(p);
		return agent_fail(ctx, r, &err, "run", o.argv[0]);
	}
	*ret = p;
	return 0;
}

SPACE_API int space_sandbox_spawn(space_sandbox *sb, const struct space_exec_options *opts, int *ret_pid)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	_cleanup_free_ const char **env = NULL;
	struct space_exec_options o;
	int r = exec_prepare(sb, opts, true, &o, &env);
	if (r < 0)
		return r;
	space_ctx *ctx = sandbox_ctx(sb);
	if ((o.flags & SPACE_EXEC_STDIN) || o.pty)
		return ctx_error_msg(ctx, -EINVAL, "a process left running on its own has no stdin and no terminal");
	struct agent_exec_req req = exec_req(&o, env);
	req.detach = true;
	struct agent_exec *x = NULL;
	struct agent_error err = { 0 };
	r = agent_exec_start(sandbox_addr(sb), &req, &x, &err);
	if (r < 0)
		return agent_fail(ctx, r, &err, "start", o.argv[0]);
	if (ret_pid)
		*ret_pid = agent_exec_pid(x);
	agent_exec_free(x); /* the agent ended the connection after STARTED; the process runs on */
	return 0;
}

SPACE_API int space_process_fd(space_process *p)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return -EINVAL;
	return agent_exec_fd(p->x);
}

SPACE_API bool space_process_pending(space_process *p)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return false;
	return agent_exec_pending(p->x);
}

SPACE_API int space_process_pid(space_process *p)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return -EINVAL;
	return agent_exec_pid(p->x);
}

SPACE_API int space_process_write_stdin(space_process *p, const void *data, size_t len)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return -EINVAL;
	int r = agent_exec_write_stdin(p->x, data, len);
	/* The end of the input to a process that already ended (the agent closed the connection after its
	 * exit): nothing is left to close. Data to it is still -EPIPE, as for a pipe. */
	if (len == 0 && (r == -EPIPE || r == -ECONNRESET))
		return 0;
	return r;
}

SPACE_API int space_process_signal(space_process *p, int sig)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return -EINVAL;
	return agent_exec_signal(p->x, sig);
}

SPACE_API int space_process_resize(space_process *p, uint16_t rows, uint16_t cols)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return -EINVAL;
	return agent_exec_resize(p->x, rows, cols);
}

int core_process_pump(space_process *p, struct space_exec_result *ret)
{
	CTX_ENTER(p ? p->ctx : NULL);
	if (!p)
		return -EINVAL;
	struct agent_exit ex;
	int r = agent_exec_pump(p->x, deliver, p, &ex);
	if (r < 0)
		return ctx_error(p->ctx, r, "process output");
	if (r == 1 && ret) {
		result_from(&ex, ret);
		oom_watch_end(p->ctx, &p->oom, ret);
	}
	return r;
}

SPACE_API void space_process_free(space_process *p)
{
	if (!p)
		return;
	agent_exec_free(p->x);
	free(p);
}

int core_sandbox_exec(space_sandbox *sb, const struct space_exec_options *opts, struct space_exec_result *ret)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	_cleanup_free_ const char **env = NULL;
	struct space_exec_options o;
	int r = exec_prepare(sb, opts, false, &o, &env);
	if (r < 0)
		return r;
	space_ctx *ctx = sandbox_ctx(sb);
	struct agent_exec_req req = exec_req(&o, env);
	struct space_process p = { .ctx = ctx, .output = o.output, .userdata = o.userdata };
	struct agent_exit ex;
	struct agent_error err = { 0 };
	int stdin_fd = o.flags & SPACE_EXEC_STDIN ? o.stdin_fd : -1;
	oom_watch_begin(sb, o.argv[0], &p.oom);
	r = agent_exec_run(sandbox_addr(sb), &req, stdin_fd, deliver, &p, &ex, &err);
	if (r < 0)
		return agent_fail(ctx, r, &err, "run", o.argv[0]);
	if (ret) {
		result_from(&ex, ret);
		oom_watch_end(ctx, &p.oom, ret);
	}
	return 0;
}

/* ---- files --------------------------------------------------------------------------------------- */

/* A paused sandbox's agent is frozen: a file call would wait for its answer for ever (and hold a server's
 * connection thread with it). Other states go to the agent, which answers or is not there. */
static int files_not_paused(space_sandbox *sb)
{
	struct sandbox_info info;
	if (core_sandbox_get_info(sb, &info) == 0 && info.status == SPACE_SANDBOX_PAUSED)
		return ctx_error_msg(sandbox_ctx(sb), -EBUSY, "sandbox %s is paused: `space resume %s` first", info.id,
				     info.id);
	return 0;
}

SPACE_API int space_sandbox_write_file(space_sandbox *sb, const char *path, int src_fd, uint32_t mode)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !path || src_fd < 0)
		return -EINVAL;
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	int r = agent_file_write(sandbox_addr(sb), path, mode, true, src_fd, &err);
	return r < 0 ? agent_fail(sandbox_ctx(sb), r, &err, "write", path) : 0;
}

static void stat_out(const struct agent_stat *a, struct space_file_stat *s)
{
	s->size = sizeof(*s);
	s->mode = a->mode;
	s->uid = a->uid;
	s->gid = a->gid;
	s->file_size = a->size;
	s->mtime_ns = a->mtime_ns;
}

struct read_progress {
	space_progress_fn fn;
	void *userdata;
};

static void read_progress(uint64_t done, uint64_t total, void *userdata)
{
	const struct read_progress *p = userdata;
	p->fn("copy", done, total, p->userdata);
}

int core_sandbox_read_file(space_sandbox *sb, const char *path, int dst_fd, const struct space_read_options *opts,
			   struct space_file_stat *ret_stat)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !path || dst_fd < 0)
		return -EINVAL;
	struct space_read_options o = SPACE_READ_OPTIONS_INIT;
	int r = opts ? opts_read_load(sandbox_ctx(sb), opts, &o) : 0;
	if (r < 0)
		return r;
	struct read_progress rp = { o.progress, o.progress_userdata };
	struct agent_read_opts ao = {
		.max_bytes = o.max_bytes ? o.max_bytes : SPACE_READ_MAX_DEFAULT,
		.progress = o.progress ? read_progress : NULL,
		.userdata = &rp,
	};
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	struct agent_stat st;
	r = agent_file_read_opts(sandbox_addr(sb), path, dst_fd, &ao, &st, &err);
	if (r < 0)
		return agent_fail(sandbox_ctx(sb), r, &err, "read", path);
	if (ret_stat)
		stat_out(&st, ret_stat);
	return 0;
}

SPACE_API int space_sandbox_read_file(space_sandbox *sb, const char *path, int dst_fd)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	return core_sandbox_read_file(sb, path, dst_fd, NULL, NULL);
}

int core_sandbox_stat(space_sandbox *sb, const char *path, struct space_file_stat *ret)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !path || !ret)
		return -EINVAL;
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	struct agent_stat st;
	int r = agent_stat(sandbox_addr(sb), path, true, &st, &err);
	if (r < 0)
		return agent_fail(sandbox_ctx(sb), r, &err, "stat", path);
	stat_out(&st, ret);
	return 0;
}

struct list_ctx {
	space_dirent_fn fn;
	void *userdata;
};

static int list_entry(const char *name, const struct agent_stat *st, void *userdata)
{
	struct list_ctx *l = userdata;
	struct space_file_stat s;
	stat_out(st, &s);
	return l->fn(name, &s, l->userdata);
}

SPACE_API int space_sandbox_list_dir(space_sandbox *sb, const char *path, space_dirent_fn fn, void *userdata)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !path || !fn)
		return -EINVAL;
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	struct list_ctx l = { fn, userdata };
	int r = agent_list_dir(sandbox_addr(sb), path, list_entry, &l, &err);
	return r < 0 ? agent_fail(sandbox_ctx(sb), r, &err, "list", path) : 0;
}

SPACE_API int space_sandbox_mkdir(space_sandbox *sb, const char *path, uint32_t mode, bool parents)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !path)
		return -EINVAL;
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	int r = agent_mkdir(sandbox_addr(sb), path, mode, parents, &err);
	return r < 0 ? agent_fail(sandbox_ctx(sb), r, &err, "mkdir", path) : 0;
}

SPACE_API int space_sandbox_remove_path(space_sandbox *sb, const char *path, bool recursive)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !path)
		return -EINVAL;
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	int r = agent_remove(sandbox_addr(sb), path, recursive, &err);
	return r < 0 ? agent_fail(sandbox_ctx(sb), r, &err, "remove", path) : 0;
}

SPACE_API int space_sandbox_rename(space_sandbox *sb, const char *from, const char *to)
{
	CTX_ENTER(sb ? sandbox_ctx(sb) : NULL);
	if (!sb || !from || !to)
		return -EINVAL;
	struct agent_error err = { 0 };
	int busy = files_not_paused(sb);
	if (busy < 0)
		return busy;
	int r = agent_rename(sandbox_addr(sb), from, to, &err);
	return r < 0 ? agent_fail(sandbox_ctx(sb), r, &err, "rename", from) : 0;
}

space_ctx *process_ctx(const space_process *p)
{
	return p->ctx;
}
