/* SPDX-License-Identifier: Apache-2.0 */
/* Requests of the host-side agent client (contracts in agent_client.h). */
#include "proto/agent_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/agent_conn.h"
#include "proto/file_sink.h"
#include "util/cleanup.h"
#include "util/util.h"

static void conn_closep(struct agent_conn *c) { agent_conn_close(c); }
#define _cleanup_conn_ _cleanup_(conn_closep)

static void err_reset(struct agent_error *err)
{
	if (err)
		*err = (struct agent_error){ 0 };
}

int agent_hello(const char *addr, int timeout_ms, struct agent_info *ret, struct agent_error *err)
{
	err_reset(err);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	uint64_t deadline = util_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000;
	int r = agent_conn_request(&c, addr, timeout_ms, err);
	if (r < 0)
		return r;
	/* No request follows: the agent drops the connection when we close it. */
	return agent_conn_hello_reply(&c, deadline, ret, err);
}

/* ---- exec ---------------------------------------------------------------------------------------- */

struct agent_exec {
	struct agent_conn c;
	int pid;
	bool done;
};

int agent_exec_start(const char *addr, const struct agent_exec_req *req, struct agent_exec **ret,
		     struct agent_error *err)
{
	err_reset(err);
	if (!req || !req->argv || !req->argv[0])
		return agent_err(err, -EINVAL, "empty argv");
	_cleanup_free_ struct agent_exec *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->c = (struct agent_conn)AGENT_CONN_INIT;
	int r = agent_conn_request(&x->c, addr, 0, err);
	if (r >= 0) {
		uint32_t flags = (req->stdin_pipe ? PROTO_EXEC_STDIN : 0) | (req->pty ? PROTO_EXEC_PTY : 0) |
				 (req->detach ? PROTO_EXEC_DETACH : 0);
		r = proto_put_exec(&x->c.out, req->argv, req->env, req->cwd, req->uid, req->gid, flags, req->rows,
				   req->cols, req->timeout_ms);
		if (r < 0)
			agent_err(err, r, "exec request too large");
	}
	struct agent_info info;
	if (r >= 0)
		r = agent_conn_hello_reply(&x->c, 0, &info, err);
	/* An agent without it would run the process attached and kill it when we hang up. */
	if (r >= 0 && req->detach && !(info.caps & PROTO_CAP_DETACH))
		r = agent_err(err, -EOPNOTSUPP, "the sandbox's agent (%s) cannot leave a process running on its own",
			      info.version);
	struct proto_frame f;
	if (r >= 0) {
		r = agent_conn_next(&x->c, &f, 0);
		if (r < 0)
			agent_err(err, r, "no reply to EXEC: %s", strerror(-r));
	}
	if (r >= 0) {
		uint32_t pid;
		if (f.type != PROTO_STARTED)
			r = agent_conn_unexpected(&f, err);
		else if (proto_get_u32(&f, &pid) < 0 || pid == 0 || pid > INT32_MAX)
			r = agent_err(err, -EBADMSG, "malformed STARTED frame");
		else
			x->pid = (int)pid;
	}
	if (r < 0) {
		agent_conn_close(&x->c);
		return r;
	}
	*ret = TAKE_PTR(x);
	return 0;
}

int agent_exec_fd(struct agent_exec *x) { return x->c.fd; }
int agent_exec_pid(struct agent_exec *x) { return x->pid; }
bool agent_exec_pending(struct agent_exec *x) { return !x->done && agent_conn_has_frame(&x->c); }

int agent_exec_write_stdin(struct agent_exec *x, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	if (len == 0) {
		int r = proto_put_empty(&x->c.out, PROTO_STDIN_EOF);
		return r < 0 ? r : agent_conn_flush(&x->c);
	}
	while (len > 0) {
		size_t n = len < PROTO_CHUNK ? len : PROTO_CHUNK;
		int r = proto_put_bytes(&x->c.out, PROTO_STDIN, p, n);
		if (r >= 0)
			r = agent_conn_flush(&x->c);
		if (r < 0)
			return r;
		p += n;
		len -= n;
	}
	return 0;
}

int agent_exec_signal(struct agent_exec *x, int sig)
{
	if (sig <= 0 || sig > 64)
		return -EINVAL;
	int r = proto_put_u32_msg(&x->c.out, PROTO_SIGNAL, (uint32_t)sig);
	return r < 0 ? r : agent_conn_flush(&x->c);
}

int agent_exec_resize(struct agent_exec *x, uint16_t rows, uint16_t cols)
{
	int r = proto_put_resize(&x->c.out, rows, cols);
	return r < 0 ? r : agent_conn_flush(&x->c);
}

/* Handles one frame of a running exec: 1 on EXIT, 0 otherwise, or -errno. */
static int exec_handle(struct agent_exec *x, const struct proto_frame *f, agent_output_fn out, void *userdata,
		       struct agent_exit *ret)
{
	switch (f->type) {
	case PROTO_STDOUT:
	case PROTO_STDERR:
		if (out && f->len > 0)
			return out(f->type == PROTO_STDOUT ? 1 : 2, f->payload, f->len, userdata) < 0 ? -ECANCELED
												       : 0;
		return 0;
	case PROTO_EXIT: {
		struct proto_exit e;
		if (proto_get_exit(f, &e) < 0)
			return -EBADMSG;
		x->done = true;
		if (ret)
			*ret = (struct agent_exit){ .exited = e.exited, .code = e.code, .signal = e.signal,
						    .timed_out = e.timed_out, .oom_killed = e.oom_killed };
		return 1;
	}
	default:
		return agent_conn_unexpected(f, NULL);
	}
}

int agent_exec_pump(struct agent_exec *x, agent_output_fn out, void *userdata, struct agent_exit *ret)
{
	if (x->done)
		return -EALREADY;
	/* Blocks only when nothing is buffered: after the buffered frames, a read could wait for output that
	 * only comes once the caller has fed the process (a shell that asked its terminal something). */
	bool did_read = false, handled = false;
	for (;;) {
		if (!agent_conn_has_frame(&x->c)) {
			if (did_read || handled)
				return 0;
			int r = agent_conn_fill(&x->c);
			if (r < 0)
				return r;
			did_read = true;
			continue;
		}
		struct proto_frame f;
		int r = agent_conn_next(&x->c, &f, 0);
		if (r < 0)
			return r;
		r = exec_handle(x, &f, out, userdata, ret);
		if (r != 0)
			return r;
		handled = true;
	}
}

void agent_exec_free(struct agent_exec *x)
{
	if (!x)
		return;
	agent_conn_close(&x->c);
	free(x);
}

static void agent_exec_freep(struct agent_exec **x) { agent_exec_free(*x); }

int agent_exec_run(const char *addr, const struct agent_exec_req *req, int stdin_fd, agent_output_fn out,
		   void *userdata, struct agent_exit *ret, struct agent_error *err)
{
	struct agent_exec_req rq = *req;
	rq.stdin_pipe = stdin_fd >= 0;
	_cleanup_(agent_exec_freep) struct agent_exec *x = NULL;
	int r = agent_exec_start(addr, &rq, &x, err);
	if (r < 0)
		return r;
	/* One poll loop so feeding stdin never waits on a process that waits for us to read its output. */
	bool in_open = stdin_fd >= 0;
	_cleanup_free_ uint8_t *chunk = in_open ? malloc(PROTO_CHUNK) : NULL;
	if (in_open && !chunk)
		return -ENOMEM;
	for (;;) {
		bool backlog = proto_buf_pending(&x->c.out) > 0;
		struct pollfd p[2] = {
			{ .fd = x->c.fd, .events = POLLIN | (backlog ? POLLOUT : 0) },
			{ .fd = in_open && !backlog ? stdin_fd : -1, .events = POLLIN },
		};
		if (!agent_conn_has_frame(&x->c) && poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[1].revents) {
			ssize_t n = read(stdin_fd, chunk, PROTO_CHUNK);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				return agent_err(err, -errno, "reading stdin: %m");
			if (n == 0)
				in_open = false;
			if (n >= 0) {
				r = n > 0 ? proto_put_bytes(&x->c.out, PROTO_STDIN, chunk, (size_t)n)
					  : proto_put_empty(&x->c.out, PROTO_STDIN_EOF);
				if (r < 0)
					return r;
			}
		}
		r = agent_conn_flush_some(&x->c);
		if (r == -EPIPE) {
			/* The process may have exited without reading all of its input: that is fine. */
			in_open = false;
			proto_buf_consume(&x->c.out, proto_buf_pending(&x->c.out));
		} else if (r < 0) {
			return agent_err(err, r, "sending to agent: %s", strerror(-r));
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR) || agent_conn_has_frame(&x->c)) {
			r = agent_exec_pump(x, out, userdata, ret);
			if (r < 0)
				return agent_err(err, r, "exec stream: %s", strerror(-r));
			if (r == 1)
				return 0;
		}
	}
}

/* ---- files --------------------------------------------------------------------------------------- */

static void stat_from(struct agent_stat *st, const struct proto_stat *p)
{
	*st = (struct agent_stat){ .mode = p->mode, .uid = p->uid, .gid = p->gid, .size = p->size,
				   .mtime_ns = p->mtime_ns };
}

/* Opens a connection, sends HELLO + one path op, reads the agent's HELLO. */
static int path_request(struct agent_conn *c, const char *addr, uint8_t type, const char *path,
			const char *path2, uint32_t mode, uint32_t flags, struct agent_error *err)
{
	err_reset(err);
	int r = agent_conn_request(c, addr, 0, err);
	if (r < 0)
		return r;
	r = proto_put_path_op(&c->out, type, path, path2, mode, flags);
	if (r < 0)
		return agent_err(err, r, "invalid or too long path");
	return agent_conn_hello_reply(c, 0, NULL, err);
}

/* The same for a request with no or a fixed payload already queued by the caller. */
static int simple_request(const char *addr, int (*queue)(struct proto_buf *b, const void *arg), const void *arg,
			  struct agent_error *err)
{
	err_reset(err);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = agent_conn_request(&c, addr, 0, err);
	if (r < 0)
		return r;
	r = queue(&c.out, arg);
	if (r < 0)
		return agent_err(err, r, "invalid request");
	r = agent_conn_hello_reply(&c, 0, NULL, err);
	return r < 0 ? r : agent_conn_expect_ok(&c, err);
}

int agent_file_write(const char *addr, const char *path, uint32_t mode, bool mkdir_p, int src_fd,
		     struct agent_error *err)
{
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = path_request(&c, addr, PROTO_FILE_WRITE, path, NULL, mode, mkdir_p ? PROTO_F_MKDIR_P : 0, err);
	if (r < 0)
		return r;
	_cleanup_free_ uint8_t *chunk = malloc(PROTO_CHUNK);
	if (!chunk)
		return -ENOMEM;
	for (;;) {
		/* Stop early when the agent already answered (an ERR: it would only discard the rest). */
		struct pollfd pfd = { .fd = c.fd, .events = POLLIN };
		if (agent_conn_has_frame(&c) || poll(&pfd, 1, 0) > 0)
			break;
		ssize_t n = read(src_fd, chunk, PROTO_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return agent_err(err, -errno, "reading source: %m");
		r = n > 0 ? proto_put_bytes(&c.out, PROTO_DATA, chunk, (size_t)n) : proto_put_empty(&c.out, PROTO_END);
		if (r >= 0)
			r = agent_conn_flush(&c);
		if (r < 0 || n == 0)
			break; /* on a send failure, the reply says why */
	}
	return agent_conn_expect_ok(&c, err);
}

/* A path request whose first reply is STAT_REPLY (STAT, FILE_READ). */
static int stat_request(struct agent_conn *c, const char *addr, uint8_t type, const char *path, uint32_t flags,
			struct proto_stat *ret, struct agent_error *err)
{
	int r = path_request(c, addr, type, path, NULL, 0, flags, err);
	if (r < 0)
		return r;
	struct proto_frame f;
	r = agent_conn_next(c, &f, 0);
	if (r < 0)
		return agent_err(err, r, "reading agent reply: %s", strerror(-r));
	if (f.type != PROTO_STAT_REPLY)
		return agent_conn_unexpected(&f, err);
	if (proto_get_stat(&f, ret) < 0)
		return agent_err(err, -EBADMSG, "malformed STAT_REPLY");
	return 0;
}

/* Refuses a file over the cap; announced: the sandbox's stat said so (nothing was streamed yet). */
static int read_too_big(struct agent_error *err, uint64_t max, bool announced, uint64_t size)
{
	char cap[32], sz[32];
	util_format_size(max, cap, sizeof(cap));
	if (announced)
		return agent_err(err, -EFBIG, "file is larger than the copy limit of %s (its size is %s)", cap,
				 util_format_size(size, sz, sizeof(sz)));
	return agent_err(err, -EFBIG, "file is larger than the copy limit of %s (the sandbox sent more)", cap);
}

int agent_file_read_opts(const char *addr, const char *path, int dst_fd, const struct agent_read_opts *o,
			 struct agent_stat *ret_st, struct agent_error *err)
{
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	struct proto_frame f;
	struct proto_stat st;
	int r = stat_request(&c, addr, PROTO_FILE_READ, path, 0, &st, err);
	if (r < 0)
		return r;
	/* Closing the connection (on return) stops the agent's stream: nothing more is read. */
	if (st.size > o->max_bytes)
		return read_too_big(err, o->max_bytes, true, st.size);
	struct file_sink sink;
	file_sink_init(&sink, dst_fd, o->max_bytes);
	for (;;) {
		r = agent_conn_next(&c, &f, 0);
		if (r < 0)
			return agent_err(err, r, "file stream: %s", strerror(-r));
		if (f.type == PROTO_END && proto_get_empty(&f) == 0)
			break;
		if (f.type != PROTO_DATA)
			return agent_conn_unexpected(&f, err);
		r = file_sink_write(&sink, f.payload, f.len);
		if (r == -EFBIG)
			return read_too_big(err, o->max_bytes, false, 0);
		if (r < 0)
			return agent_err(err, r, "writing destination: %s", strerror(-r));
		if (o->progress)
			o->progress(sink.done, st.size, o->userdata);
	}
	r = file_sink_finish(&sink);
	if (r < 0)
		return agent_err(err, r, "writing destination: %s", strerror(-r));
	if (ret_st) {
		stat_from(ret_st, &st);
		ret_st->size = sink.done;
	}
	return 0;
}

int agent_file_read(const char *addr, const char *path, int dst_fd, struct agent_stat *ret_st,
		    struct agent_error *err)
{
	const struct agent_read_opts o = { .max_bytes = AGENT_READ_MAX_DEFAULT };
	return agent_file_read_opts(addr, path, dst_fd, &o, ret_st, err);
}

int agent_stat(const char *addr, const char *path, bool follow, struct agent_stat *ret, struct agent_error *err)
{
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	struct proto_stat st;
	int r = stat_request(&c, addr, PROTO_STAT, path, follow ? 0 : PROTO_F_NOFOLLOW, &st, err);
	if (r < 0)
		return r;
	if (ret)
		stat_from(ret, &st);
	return 0;
}

int agent_list_dir(const char *addr, const char *path, agent_dirent_fn fn, void *userdata,
		   struct agent_error *err)
{
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = path_request(&c, addr, PROTO_LIST_DIR, path, NULL, 0, 0, err);
	if (r < 0)
		return r;
	for (;;) {
		struct proto_frame f;
		struct proto_dirent d;
		r = agent_conn_next(&c, &f, 0);
		if (r < 0)
			return agent_err(err, r, "reading agent reply: %s", strerror(-r));
		if (f.type == PROTO_END && proto_get_empty(&f) == 0)
			return 0;
		if (f.type != PROTO_DIRENT)
			return agent_conn_unexpected(&f, err);
		if (proto_get_dirent(&f, &d) < 0)
			return agent_err(err, -EBADMSG, "malformed DIRENT");
		struct agent_stat st;
		stat_from(&st, &d.st);
		if (fn && (r = fn(d.name, &st, userdata)) < 0)
			return r;
	}
}

static int path_ok(const char *addr, uint8_t type, const char *path, const char *path2, uint32_t mode,
		   uint32_t flags, struct agent_error *err)
{
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = path_request(&c, addr, type, path, path2, mode, flags, err);
	return r < 0 ? r : agent_conn_expect_ok(&c, err);
}

int agent_mkdir(const char *addr, const char *path, uint32_t mode, bool parents, struct agent_error *err)
{
	return path_ok(addr, PROTO_MKDIR, path, NULL, mode, parents ? PROTO_F_PARENTS : 0, err);
}

int agent_remove(const char *addr, const char *path, bool recursive, struct agent_error *err)
{
	return path_ok(addr, PROTO_REMOVE, path, NULL, 0, recursive ? PROTO_F_RECURSIVE : 0, err);
}

int agent_rename(const char *addr, const char *from, const char *to, struct agent_error *err)
{
	if (!to || !*to)
		return agent_err(err, -EINVAL, "empty rename target");
	return path_ok(addr, PROTO_RENAME, from, to, 0, 0, err);
}

/* ---- system -------------------------------------------------------------------------------------- */

static int queue_empty(struct proto_buf *b, const void *arg) { return proto_put_empty(b, *(const uint8_t *)arg); }

int agent_sync(const char *addr, struct agent_error *err)
{
	static const uint8_t t = PROTO_SYNC;
	return simple_request(addr, queue_empty, &t, err);
}

int agent_connect(const char *addr, int *ret_fd, struct agent_error *err)
{
	err_reset(err);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = agent_conn_open(&c, addr, 0, err);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(c.fd);
	return 0;
}

int agent_shutdown(const char *addr, struct agent_error *err)
{
	static const uint8_t t = PROTO_SHUTDOWN;
	return simple_request(addr, queue_empty, &t, err);
}

static int queue_time(struct proto_buf *b, const void *arg) { return proto_put_set_time(b, *(const int64_t *)arg); }

int agent_set_time(const char *addr, int64_t unix_ns, struct agent_error *err)
{
	return simple_request(addr, queue_time, &unix_ns, err);
}

/* Connects and checks that the agent's HELLO offers cap (an older agent would close the connection on
 * a request it does not know). */
static int request_with_cap(struct agent_conn *c, const char *addr, uint32_t cap, const char *what,
			    struct agent_error *err)
{
	int r = agent_conn_request(c, addr, 0, err);
	if (r < 0)
		return r;
	struct agent_info info;
	r = agent_conn_hello_reply(c, 0, &info, err);
	if (r < 0)
		return r;
	if (!(info.caps & cap))
		return agent_err(err, -EOPNOTSUPP, "the sandbox's agent (%s) cannot %s", info.version, what);
	return 0;
}

static int send_expect_ok(struct agent_conn *c, int r, struct agent_error *err)
{
	if (r < 0)
		return agent_err(err, r, "invalid request");
	r = agent_conn_flush(c);
	if (r < 0)
		return agent_err(err, r, "sending to agent: %s", strerror(-r));
	return agent_conn_expect_ok(c, err);
}

int agent_set_lifetime(const char *addr, uint32_t seconds, struct agent_error *err)
{
	err_reset(err);
	if (seconds > PROTO_MAX_LIFETIME)
		return agent_err(err, -EINVAL, "lifetime of %u s is over the limit of %u s", seconds, PROTO_MAX_LIFETIME);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = request_with_cap(&c, addr, PROTO_CAP_LIFETIME, "change its lifetime", err);
	if (r < 0)
		return r;
	return send_expect_ok(&c, proto_put_u32_msg(&c.out, PROTO_SET_LIFETIME, seconds), err);
}

int agent_tether(const char *addr, int *ret_fd, struct agent_error *err)
{
	err_reset(err);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = request_with_cap(&c, addr, PROTO_CAP_TETHER, "end with its caller (no TETHER: an older agent)", err);
	if (r < 0)
		return r;
	r = send_expect_ok(&c, proto_put_u32_msg(&c.out, PROTO_TETHER, PROTO_TETHER_ARM), err);
	if (r < 0)
		return r;
	/* Nothing more is read: the agent sends nothing after OK, and the descriptor only has to stay open. */
	*ret_fd = c.fd;
	c.fd = -1;
	return 0;
}

int agent_tether_hold(const char *addr, bool hold, struct agent_error *err)
{
	err_reset(err);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = request_with_cap(&c, addr, PROTO_CAP_TETHER, "hold its tethers", err);
	if (r < 0)
		return r;
	return send_expect_ok(&c, proto_put_u32_msg(&c.out, PROTO_TETHER, hold ? PROTO_TETHER_HOLD : PROTO_TETHER_RELEASE),
			      err);
}

int agent_set_hostname(const char *addr, const char *hostname, struct agent_error *err)
{
	err_reset(err);
	size_t n = strlen(hostname);
	if (n == 0 || n > PROTO_MAX_IDENT)
		return agent_err(err, -EINVAL, "hostname '%s' is empty or longer than %u bytes", hostname,
				 PROTO_MAX_IDENT);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = request_with_cap(&c, addr, PROTO_CAP_HOSTNAME, "change its hostname", err);
	if (r < 0)
		return r;
	return send_expect_ok(&c, proto_put_bytes(&c.out, PROTO_SET_HOSTNAME, hostname, n), err);
}

struct bytes_arg {
	const void *p;
	size_t n;
};

static int queue_reseed(struct proto_buf *b, const void *arg)
{
	const struct bytes_arg *a = arg;
	return a->n > PROTO_MAX_RESEED ? -EMSGSIZE : proto_put_bytes(b, PROTO_RESEED, a->p, a->n);
}

int agent_reseed(const char *addr, const void *buf, size_t len, struct agent_error *err)
{
	struct bytes_arg a = { buf, len };
	return simple_request(addr, queue_reseed, &a, err);
}

static int queue_signal_pid(struct proto_buf *b, const void *arg)
{
	const int *v = arg;
	if (v[0] <= 0 || v[1] <= 0 || v[1] > 64)
		return -EINVAL;
	return proto_put_u32x2_msg(b, PROTO_SIGNAL_PID, (uint32_t)v[0], (uint32_t)v[1]);
}

int agent_signal_pid(const char *addr, int pid, int sig, struct agent_error *err)
{
	int v[2] = { pid, sig };
	return simple_request(addr, queue_signal_pid, v, err);
}

int agent_list_procs(const char *addr, agent_proc_fn fn, void *userdata, struct agent_error *err)
{
	err_reset(err);
	_cleanup_conn_ struct agent_conn c = AGENT_CONN_INIT;
	int r = agent_conn_request(&c, addr, 0, err);
	if (r >= 0)
		r = proto_put_empty(&c.out, PROTO_LIST_PROCS);
	if (r >= 0)
		r = agent_conn_hello_reply(&c, 0, NULL, err);
	if (r < 0)
		return r;
	for (;;) {
		struct proto_frame f;
		r = agent_conn_next(&c, &f, 0);
		if (r < 0)
			return agent_err(err, r, "reading agent reply: %s", strerror(-r));
		if (f.type == PROTO_END && proto_get_empty(&f) == 0)
			return 0;
		if (f.type != PROTO_PROC)
			return agent_conn_unexpected(&f, err);
		_cleanup_free_ struct proto_proc *p = NULL;
		if (proto_get_proc(&f, &p) < 0 || p->pid == 0 || p->pid > INT32_MAX)
			return agent_err(err, -EBADMSG, "malformed PROC");
		if (fn && (r = fn((int)p->pid, (const char *const *)p->argv, userdata)) < 0)
			return r;
	}
}
