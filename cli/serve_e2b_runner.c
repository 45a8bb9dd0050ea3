/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: the processes envd's process.Process service runs (serve_e2b_process.c has the calls).
 *
 * Each process has a runner: a detached thread with its own context and sandbox handle that starts the
 * process, applies the operations queued to it (input, signals, terminal size) in order, pumps its
 * output and sends every event to the streams attached to it (subscribers: the Start stream, then any
 * Connect stream). A subscriber is a queue of envelopes that its own stream's producer thread writes to
 * its client, with its own keepalives; a client that goes away drops only its subscriber. The process
 * ends when it exits, is signalled, hits its timeout, when its sandbox is killed, or when the server
 * stops; its end event and end-of-stream are queued to every subscriber before it leaves the registry,
 * so whoever saw it listed also sees its end.
 *
 * Output produced while no subscriber is attached is dropped (nothing holds it for later): a background
 * process's output reaches only streams attached when it is produced.
 *
 * One lock (the registry's) guards the registry, every runner's queue and subscriber list, and every
 * subscriber's queue: the work under it is list surgery and no I/O.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define SUB_QUEUE_MAX (8u << 20)  /* bytes queued for a client that does not read: then it is dropped */
#define STOP_WAIT_S 20            /* how long the server's stop waits for runners to end */
_Static_assert(E2B_PROCS_PER_SANDBOX == 64 && E2B_PROCS_TOTAL == 1024, "the messages of e2b_runner_start name the caps");

struct item {
	struct item *next;
	size_t len;
	char buf[];
};

struct e2b_sub {
	struct e2b_procs *ps;
	struct e2b_runner *rn;        /* NULL once detached (the process ended, or the client left) */
	int wake;                     /* eventfd: items were queued */
	struct item *head, **tail;
	size_t queued;
	bool done;                    /* the last item (the end-of-stream) is queued */
	unsigned keepalive_s;
	struct e2b_sub *next;         /* in rn->subs */
};

struct op {
	enum e2b_op_kind kind;
	int sig;
	uint16_t rows, cols;
	unsigned char *data;
	size_t len;
	struct op *next;
};

struct e2b_runner {
	struct e2b_procs *ps;
	char sandbox[32];
	uint32_t pid;                 /* 0 until the process started */
	struct e2b_exec *x;
	cJSON *config;                /* {"cmd", "args", "envs", "cwd"} as started, for List */
	char *tag;
	int wake;                     /* eventfd: ops are queued, or stop is set */
	struct op *ops, **ops_tail;
	const char *stop;             /* why the process must end now (a static string), or NULL */
	struct e2b_sub *subs;
	struct e2b_runner *next;
};

struct e2b_procs {
	pthread_mutex_t lock;
	pthread_cond_t idle;          /* signalled when live drops to 0 */
	char *state_dir;              /* NULL: the library's default */
	struct e2b_runner *list;      /* registered runners, live or not yet started */
	unsigned live;                /* runner threads that have not finished */
	bool stopping;
};

/* --- envelopes (e2b_envelope: serve_e2b.c) --- */

/* An envelope as a queue item (takes j), or NULL. */
static struct item *item_new(unsigned flags, cJSON *j)
{
	size_t len;
	_cleanup_free_ char *buf = e2b_envelope(flags, j, &len);
	struct item *it = buf ? malloc(sizeof(*it) + len) : NULL;
	if (!it)
		return NULL;
	it->next = NULL;
	it->len = len;
	memcpy(it->buf, buf, len);
	return it;
}

/* {"event": {name: inner}} (takes inner; NULL: {}). */
static struct item *event_item(const char *name, cJSON *inner)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *ev = cJSON_AddObjectToObject(j, "event");
	cJSON_AddItemToObject(ev, name, inner ? inner : cJSON_CreateObject());
	return item_new(0, j);
}

/* The end-of-stream envelope, with an error when code is not NULL. */
static struct item *end_item(const char *code, const char *message)
{
	cJSON *j = cJSON_CreateObject();
	if (code) {
		cJSON *err = cJSON_AddObjectToObject(j, "error");
		cJSON_AddStringToObject(err, "code", code);
		cJSON_AddStringToObject(err, "message", message ? message : "");
	}
	return item_new(2, j);
}

static void items_free(struct item *it)
{
	while (it) {
		struct item *next = it->next;
		free(it);
		it = next;
	}
}

static struct item *item_dup(const struct item *it)
{
	struct item *c = it ? malloc(sizeof(*c) + it->len) : NULL;
	if (c) {
		memcpy(c, it, sizeof(*c) + it->len);
		c->next = NULL;
	}
	return c;
}

/* --- subscribers --- */

static void wake(int fd)
{
	uint64_t one = 1;
	if (write(fd, &one, sizeof(one)) < 0) {
		/* The counter is full: a wake-up is pending anyway. */
	}
}

/* Removes s from its runner's list; with ps->lock held. */
static void sub_detach(struct e2b_sub *s)
{
	if (!s->rn)
		return;
	for (struct e2b_sub **pp = &s->rn->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->rn = NULL;
	s->next = NULL;
}

/* Queues it (taken; NULL is out of memory) to s; with ps->lock held. A client that let SUB_QUEUE_MAX
 * bytes pile up is dropped: its stream ends with an error. last: the end-of-stream. */
static void sub_push(struct e2b_sub *s, struct item *it, bool last)
{
	if (s->done) {
		free(it);
		return;
	}
	if (!it || s->queued + it->len > SUB_QUEUE_MAX) {
		free(it);
		items_free(s->head);
		s->head = NULL;
		s->tail = &s->head;
		s->queued = 0;
		it = end_item(!it ? "internal" : "resource_exhausted",
			      !it ? "out of memory" : "the client did not read the process's output; it was dropped");
		last = true;
		sub_detach(s);
	}
	if (it) {
		*s->tail = it;
		s->tail = &it->next;
		s->queued += it->len;
	}
	if (last)
		s->done = true;
	wake(s->wake);
}

static struct e2b_sub *sub_new(struct e2b_procs *ps, unsigned keepalive_s)
{
	struct e2b_sub *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->ps = ps;
	s->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wake < 0) {
		free(s);
		return NULL;
	}
	s->tail = &s->head;
	s->keepalive_s = keepalive_s;
	return s;
}

/* Attaches s to rn (with ps->lock held): it gets the start event first when the process already runs. */
static void sub_attach(struct e2b_runner *rn, struct e2b_sub *s)
{
	s->rn = rn;
	s->next = rn->subs;
	rn->subs = s;
	if (rn->pid) {
		cJSON *st = cJSON_CreateObject();
		cJSON_AddNumberToObject(st, "pid", rn->pid);
		sub_push(s, event_item("start", st), false);
	}
}

void e2b_sub_free(void *arg)
{
	struct e2b_sub *s = arg;
	if (!s)
		return;
	pthread_mutex_lock(&s->ps->lock);
	sub_detach(s);
	pthread_mutex_unlock(&s->ps->lock);
	items_free(s->head);
	close(s->wake);
	free(s);
}

void e2b_sub_producer(struct serve_producer *p)
{
	struct e2b_sub *s = p->arg;
	struct e2b_procs *ps = s->ps;
	for (;;) {
		struct item *it;
		bool done;
		pthread_mutex_lock(&ps->lock);
		it = s->head;
		s->head = NULL;
		s->tail = &s->head;
		s->queued = 0;
		done = s->done;
		pthread_mutex_unlock(&ps->lock);
		bool failed = false;
		for (struct item *i = it; i && !failed; i = i->next)
			failed = util_write_all(p->fd, i->buf, i->len) < 0;
		items_free(it);
		if (done && !failed)
			return;
		if (!it && !failed) {
			/* Nothing queued: wait for items, the client's leaving (the reader of our pipe closes it:
			 * POLLERR), or the keepalive's time. */
			struct pollfd pf[2] = { { .fd = s->wake, .events = POLLIN }, { .fd = p->fd, .events = 0 } };
			int n = poll(pf, 2, (int)s->keepalive_s * 1000);
			if (n < 0 && errno != EINTR)
				failed = true;
			else if (pf[1].revents)
				failed = true;
			else if (n == 0) {
				struct item *k = event_item("keepalive", NULL);
				failed = !k || util_write_all(p->fd, k->buf, k->len) < 0;
				free(k);
			} else if (pf[0].revents) {
				uint64_t v;
				if (read(s->wake, &v, sizeof(v)) < 0) {
					/* EAGAIN: another read took it. */
				}
			}
		}
		if (failed) {
			/* The client went away: the process goes on without this subscriber. */
			pthread_mutex_lock(&ps->lock);
			sub_detach(s);
			pthread_mutex_unlock(&ps->lock);
			p->failed = true;
			return;
		}
	}
}

/* --- the runner --- */

void e2b_exec_free(struct e2b_exec *x)
{
	if (!x)
		return;
	cJSON_Delete(x->json);
	free(x->argv);
	if (x->env)
		for (size_t i = 0; x->env[i]; i++)
			free(x->env[i]);
	free(x->env);
	free(x->cwd_owned);
	free(x);
}

static void ops_free(struct op *o)
{
	while (o) {
		struct op *next = o->next;
		free(o->data);
		free(o);
		o = next;
	}
}

static void runner_free(struct e2b_runner *rn)
{
	if (!rn)
		return;
	ops_free(rn->ops);
	if (rn->wake >= 0)
		close(rn->wake);
	e2b_exec_free(rn->x);
	cJSON_Delete(rn->config);
	free(rn->tag);
	free(rn);
}

/* Queues it to every subscriber (with ps->lock held); takes it. */
static void broadcast(struct e2b_runner *rn, struct item *it, bool last)
{
	for (struct e2b_sub *s = rn->subs, *next; s; s = next) {
		next = s->next;
		sub_push(s, item_dup(it), last);
	}
	free(it);
}

static int runner_output(int stream, const void *data, size_t len, void *userdata)
{
	struct e2b_runner *rn = userdata;
	if (!len)
		return 0;
	pthread_mutex_lock(&rn->ps->lock);
	bool anyone = rn->subs != NULL;
	pthread_mutex_unlock(&rn->ps->lock);
	if (!anyone)
		return 0; /* no one attached: the output is dropped (see the top of the file) */
	_cleanup_free_ char *b64 = e2b_base64_encode(data, len);
	if (!b64)
		return -ENOMEM;
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, rn->x->pty ? "pty" : stream == 2 ? "stderr" : "stdout", b64);
	struct item *it = event_item("data", d);
	pthread_mutex_lock(&rn->ps->lock);
	broadcast(rn, it, false);
	pthread_mutex_unlock(&rn->ps->lock);
	return 0;
}

/* Takes the queued ops and the stop reason; applies the ops. Returns the stop reason or NULL. */
static const char *runner_ops(struct e2b_runner *rn, space_process *sp)
{
	uint64_t v;
	if (read(rn->wake, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing new since the last read. */
	}
	pthread_mutex_lock(&rn->ps->lock);
	struct op *o = rn->ops;
	rn->ops = NULL;
	rn->ops_tail = &rn->ops;
	const char *stop = rn->stop;
	pthread_mutex_unlock(&rn->ps->lock);
	for (struct op *i = o; i && sp; i = i->next) {
		if (i->kind == E2B_OP_STDIN && i->len)
			space_process_write_stdin(sp, i->data, i->len);
		else if (i->kind == E2B_OP_CLOSE)
			space_process_write_stdin(sp, NULL, 0);
		else if (i->kind == E2B_OP_SIGNAL)
			space_process_signal(sp, i->sig);
		else if (i->kind == E2B_OP_RESIZE)
			space_process_resize(sp, i->rows, i->cols);
	}
	ops_free(o);
	return stop;
}

static struct item *end_event_item(const struct space_exec_result *res, const char *why)
{
	cJSON *end = cJSON_CreateObject();
	char status[64];
	if (res && res->exited) {
		snprintf(status, sizeof(status), "exit status %d", res->exit_code);
		cJSON_AddNumberToObject(end, "exitCode", res->exit_code);
		cJSON_AddBoolToObject(end, "exited", true);
	} else {
		snprintf(status, sizeof(status), "signal: %s",
			 !res ? "killed" : res->timed_out ? "killed (timeout)" : res->oom_killed ? "killed (out of memory)" :
			 strsignal(res->signal));
		cJSON_AddNumberToObject(end, "exitCode", -1);
		cJSON_AddBoolToObject(end, "exited", false);
	}
	cJSON_AddStringToObject(end, "status", status);
	if (why)
		cJSON_AddStringToObject(end, "error", why);
	else if (!res->exited || res->exit_code)
		cJSON_AddStringToObject(end, "error", status);
	return event_item("end", end);
}

/* The end: the last events go to every subscriber, then the runner leaves the registry (one step under
 * the lock, so no call finds the process after its end was queued, nor misses it before). */
static void runner_finish(struct e2b_runner *rn, struct item *end, struct item *eos)
{
	struct e2b_procs *ps = rn->ps;
	pthread_mutex_lock(&ps->lock);
	if (end)
		broadcast(rn, end, false);
	broadcast(rn, eos, true);
	while (rn->subs)
		sub_detach(rn->subs);
	for (struct e2b_runner **pp = &ps->list; *pp; pp = &(*pp)->next)
		if (*pp == rn) {
			*pp = rn->next;
			break;
		}
	pthread_mutex_unlock(&ps->lock);
	runner_free(rn);
}

static void *runner_thread(void *arg)
{
	struct e2b_runner *rn = arg;
	struct e2b_procs *ps = rn->ps;
	space_ctx *ctx = NULL;
	space_sandbox *sb = NULL;
	space_process *sp = NULL;
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = ps->state_dir;
	int e = space_ctx_new(&co, &ctx);
	if (e >= 0)
		e = space_sandbox_open(ctx, rn->sandbox, &sb);
	if (e >= 0) {
		struct e2b_exec *x = rn->x;
		struct space_exec_options o = SPACE_EXEC_OPTIONS_INIT;
		o.argv = x->argv;
		o.env = (const char *const *)x->env;
		o.cwd = x->cwd;
		o.pty = x->pty;
		o.rows = x->rows;
		o.cols = x->cols;
		o.timeout_ms = x->timeout_ms;
		o.uid = x->uid;
		o.gid = x->gid;
		o.flags = (x->stdin_open ? SPACE_EXEC_STDIN : 0) | (x->as_user ? SPACE_EXEC_USER : 0);
		o.output = runner_output;
		o.userdata = rn;
		e = space_process_start(sb, &o, &sp);
	}
	if (e < 0) {
		const char *msg = ctx ? space_ctx_last_error(ctx) : NULL;
		runner_finish(rn, NULL, end_item(e2b_rpc_code(e), msg && *msg ? msg : space_strerror(e)));
		goto out;
	}
	/* The pid becomes visible (List, selectors) with the start event queued, before any output. */
	pthread_mutex_lock(&ps->lock);
	rn->pid = (uint32_t)space_process_pid(sp);
	for (struct e2b_sub *s = rn->subs; s; s = s->next) {
		cJSON *st = cJSON_CreateObject();
		cJSON_AddNumberToObject(st, "pid", rn->pid);
		sub_push(s, event_item("start", st), false);
	}
	pthread_mutex_unlock(&ps->lock);

	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	const char *stop = NULL;
	e = 0;
	/* Ops queued before the start (input sent at once, by tag) are applied now: the wake counter is
	 * still set. */
	for (;;) {
		struct pollfd pf[2] = { { .fd = space_process_fd(sp), .events = POLLIN },
					{ .fd = rn->wake, .events = POLLIN } };
		int n = poll(pf, 2, space_process_pending(sp) ? 0 : -1);
		if (n < 0 && errno != EINTR) {
			e = -errno;
			break;
		}
		if (n > 0 && pf[1].revents && (stop = runner_ops(rn, sp)))
			break;
		if (pf[0].revents || space_process_pending(sp)) {
			e = space_process_pump(sp, &res);
			if (e != 0)
				break;
		}
	}
	if (stop) {
		space_process_signal(sp, SIGKILL);
		runner_finish(rn, end_event_item(NULL, stop), end_item(NULL, NULL));
	} else if (e == 1) {
		runner_finish(rn, end_event_item(&res, NULL), end_item(NULL, NULL));
	} else {
		const char *msg = space_ctx_last_error(ctx);
		runner_finish(rn, NULL, end_item("internal", msg && *msg ? msg : "the process stream failed"));
	}
out:
	space_process_free(sp);
	space_sandbox_free(sb);
	space_ctx_free(ctx);
	pthread_mutex_lock(&ps->lock);
	if (--ps->live == 0)
		pthread_cond_broadcast(&ps->idle);
	pthread_mutex_unlock(&ps->lock);
	return NULL;
}

/* --- the registry --- */

struct e2b_procs *e2b_procs_new(const char *state_dir)
{
	struct e2b_procs *ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	if (state_dir && !(ps->state_dir = strdup(state_dir))) {
		free(ps);
		return NULL;
	}
	pthread_mutex_init(&ps->lock, NULL);
	pthread_cond_init(&ps->idle, NULL);
	return ps;
}

/* Asks every runner of sandbox (NULL: all) to end with why; with ps->lock held. */
static void stop_runners(struct e2b_procs *ps, const char *sandbox, const char *why)
{
	for (struct e2b_runner *rn = ps->list; rn; rn = rn->next)
		if (!sandbox || !strcmp(rn->sandbox, sandbox)) {
			if (!rn->stop)
				rn->stop = why;
			wake(rn->wake);
		}
}

bool e2b_procs_stop(struct e2b_procs *ps)
{
	if (!ps)
		return true;
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += STOP_WAIT_S;
	pthread_mutex_lock(&ps->lock);
	ps->stopping = true;
	stop_runners(ps, NULL, "the server is stopping");
	int e = 0;
	while (ps->live && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&ps->idle, &ps->lock, &t);
	bool idle = ps->live == 0;
	pthread_mutex_unlock(&ps->lock);
	return idle;
}

void e2b_procs_free(struct e2b_procs *ps)
{
	if (!ps)
		return;
	pthread_mutex_destroy(&ps->lock);
	pthread_cond_destroy(&ps->idle);
	free(ps->state_dir);
	free(ps);
}

void e2b_procs_sandbox_gone(struct e2b_procs *ps, const char *sandbox)
{
	if (!ps)
		return;
	pthread_mutex_lock(&ps->lock);
	stop_runners(ps, sandbox, "the sandbox was killed");
	pthread_mutex_unlock(&ps->lock);
}

int e2b_runner_start(struct e2b_procs *ps, const char *sandbox, struct e2b_exec *x, cJSON *config, const char *tag,
		     unsigned keepalive_s, struct e2b_sub **ret_sub, const char **ret_why)
{
	struct e2b_runner *rn = calloc(1, sizeof(*rn));
	struct e2b_sub *s = sub_new(ps, keepalive_s);
	*ret_why = "out of memory";
	if (!rn || !s || (tag && !(rn->tag = strdup(tag)))) {
		free(rn);
		e2b_sub_free(s);
		e2b_exec_free(x);
		cJSON_Delete(config);
		return -ENOMEM;
	}
	rn->ps = ps;
	rn->x = x;
	rn->config = config;
	rn->ops_tail = &rn->ops;
	snprintf(rn->sandbox, sizeof(rn->sandbox), "%s", sandbox);
	rn->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int e = rn->wake < 0 ? -errno : 0;
	pthread_mutex_lock(&ps->lock);
	unsigned here = 0, all = 0;
	for (struct e2b_runner *i = ps->list; i; i = i->next, all++)
		here += !strcmp(i->sandbox, sandbox);
	if (e < 0) {
		*ret_why = "cannot make an eventfd";
	} else if (ps->stopping) {
		e = -ESHUTDOWN;
		*ret_why = "the server is stopping";
	} else if (here >= E2B_PROCS_PER_SANDBOX) {
		e = -EAGAIN;
		*ret_why = "this sandbox already runs 64 processes started through the API, the most at once: wait "
			   "for one to end or kill one";
	} else if (all >= E2B_PROCS_TOTAL) {
		e = -EAGAIN;
		*ret_why = "the server already runs 1024 processes started through the API, the most at once: wait "
			   "for one to end or kill one";
	} else {
		pthread_attr_t attr;
		pthread_t t;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		sub_attach(rn, s);
		rn->next = ps->list;
		ps->list = rn;
		/* Started under the lock, so the thread's first step (which takes it) comes after this one. */
		e = -pthread_create(&t, &attr, runner_thread, rn);
		pthread_attr_destroy(&attr);
		if (e < 0) {
			ps->list = rn->next;
			sub_detach(s);
			*ret_why = "cannot start a thread";
		} else {
			ps->live++;
		}
	}
	pthread_mutex_unlock(&ps->lock);
	if (e < 0) {
		e2b_sub_free(s);
		runner_free(rn);
		return e;
	}
	*ret_sub = s;
	return 0;
}

/* The registered runner the selector {"pid": N} or {"tag": "T"} names in sandbox; with ps->lock held. */
static struct e2b_runner *runner_find(struct e2b_procs *ps, const char *sandbox, const cJSON *sel)
{
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(sel, "pid");
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(sel, "tag");
	for (struct e2b_runner *rn = ps->list; rn; rn = rn->next) {
		if (strcmp(rn->sandbox, sandbox) || rn->stop)
			continue;
		if (cJSON_IsNumber(pid) && rn->pid && pid->valuedouble == (double)rn->pid)
			return rn;
		if (cJSON_IsString(tag) && rn->tag && !strcmp(tag->valuestring, rn->tag))
			return rn;
	}
	return NULL;
}

int e2b_runner_attach(struct e2b_procs *ps, const char *sandbox, const cJSON *sel, unsigned keepalive_s,
		      struct e2b_sub **ret_sub)
{
	struct e2b_sub *s = sub_new(ps, keepalive_s);
	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&ps->lock);
	struct e2b_runner *rn = runner_find(ps, sandbox, sel);
	if (rn)
		sub_attach(rn, s);
	pthread_mutex_unlock(&ps->lock);
	if (!rn) {
		e2b_sub_free(s);
		return -ENOENT;
	}
	*ret_sub = s;
	return 0;
}

int e2b_runner_op(struct e2b_procs *ps, const char *sandbox, const cJSON *sel, enum e2b_op_kind kind, int sig,
		  uint16_t rows, uint16_t cols, unsigned char *data, size_t len)
{
	struct op *o = calloc(1, sizeof(*o));
	if (!o) {
		free(data);
		return -ENOMEM;
	}
	*o = (struct op){ .kind = kind, .sig = sig, .rows = rows, .cols = cols, .data = data, .len = len };
	int e = 0;
	pthread_mutex_lock(&ps->lock);
	struct e2b_runner *rn = runner_find(ps, sandbox, sel);
	if (!rn)
		e = -ENOENT;
	else if (kind == E2B_OP_RESIZE && !rn->x->pty)
		e = -ENOTTY;
	if (e == 0) {
		*rn->ops_tail = o;
		rn->ops_tail = &o->next;
		wake(rn->wake);
	}
	pthread_mutex_unlock(&ps->lock);
	if (e < 0)
		ops_free(o);
	return e;
}

cJSON *e2b_runner_list(struct e2b_procs *ps, const char *sandbox)
{
	cJSON *a = cJSON_CreateArray();
	pthread_mutex_lock(&ps->lock);
	for (struct e2b_runner *rn = ps->list; rn && a; rn = rn->next) {
		if (strcmp(rn->sandbox, sandbox) || !rn->pid || rn->stop)
			continue;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "pid", rn->pid);
		cJSON_AddItemToObject(e, "config", cJSON_Duplicate(rn->config, true));
		if (rn->tag)
			cJSON_AddStringToObject(e, "tag", rn->tag);
		cJSON_AddItemToArray(a, e);
	}
	pthread_mutex_unlock(&ps->lock);
	return a;
}
