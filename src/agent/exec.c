/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Processes started for EXEC requests: fork/exec with pipes or a pty, streaming output under flow
 * control, stdin, signals, timeouts, and exit statuses collected by the one waitpid(-1) loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/agent.h"
#include "util/cleanup.h"

extern char **environ;

static const char *const default_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
};

/* The request's environment plus the defaults it does not set. In the child: leaking is fine. */
static char **child_env(char **env)
{
	size_t n = 0;
	while (env[n])
		n++;
	char **out = calloc(n + ARRAY_SIZE(default_env) + 1, sizeof(char *));
	if (!out)
		return env;
	memcpy(out, env, n * sizeof(char *));
	size_t m = n;
	for (size_t d = 0; d < ARRAY_SIZE(default_env); d++) {
		size_t klen = (size_t)(strchr(default_env[d], '=') - default_env[d]) + 1;
		bool have = false;
		for (size_t i = 0; i < n && !have; i++)
			have = strncmp(env[i], default_env[d], klen) == 0;
		if (!have)
			out[m++] = (char *)default_env[d];
	}
	return out;
}

bool proc_stdin_full(const struct proc *p) { return p->inlen >= AGENT_STDIN_HIGH; }

static struct proc *proc_find(struct agent *a, pid_t pid)
{
	for (struct proc *p = a->procs; p; p = p->next)
		if (!p->dead && p->pid == pid)
			return p;
	return NULL;
}

/* ---- the child side ------------------------------------------------------------------------------ */

struct child_setup {
	const struct proto_exec *x;
	int in, out, err; /* become 0, 1, 2 */
	int pty_slave;    /* >= 0: becomes 0, 1, 2 and the controlling terminal */
	int report;       /* CLOEXEC pipe: (stage, errno) on failure */
	struct rlimit nofile;
	int nice;
	const cpu_set_t *cpus; /* NULL: the agent's */
};

static _Noreturn void child_fail(int report, int stage, int err)
{
	int v[2] = { stage, err };
	if (write(report, v, sizeof(v)) < 0) { /* nothing left to tell */ }
	_exit(127);
}

enum { STAGE_SETUP = 1, STAGE_CWD, STAGE_IDS, STAGE_EXEC };

static _Noreturn void child_run(const struct child_setup *s)
{
	const struct proto_exec *x = s->x;
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* Ignored dispositions survive exec: whatever the agent ignores or inherited ignored (a jail started
	 * from a background job has SIGINT ignored), the process must start with the defaults, or a shell
	 * in it could not even trap SIGINT. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	/* The agent raised its own fd limit; programs expect the usual one (some loop over all fds). */
	setrlimit(RLIMIT_NOFILE, &s->nofile);
	/* Back to the sandbox's priority (always allowed: it is lower than the agent's) and its CPUs. */
	if (setpriority(PRIO_PROCESS, 0, s->nice) < 0 ||
	    (s->cpus && sched_setaffinity(0, sizeof(*s->cpus), s->cpus) < 0))
		child_fail(s->report, STAGE_SETUP, errno);
	if (setsid() < 0)
		child_fail(s->report, STAGE_SETUP, errno);
	/* Move the report pipe out of the way of 0..2, then put the stdio fds in place. */
	int report = fcntl(s->report, F_DUPFD_CLOEXEC, 3);
	if (report < 0)
		child_fail(s->report, STAGE_SETUP, errno);
	if (s->pty_slave >= 0) {
		if (ioctl(s->pty_slave, TIOCSCTTY, 0) < 0)
			child_fail(report, STAGE_SETUP, errno);
		for (int i = 0; i < 3; i++)
			if (dup2(s->pty_slave, i) < 0)
				child_fail(report, STAGE_SETUP, errno);
	} else {
		int fds[3] = { s->in, s->out, s->err };
		/* dup above 2 first, so no source fd is overwritten by an earlier dup2. */
		for (int i = 0; i < 3; i++)
			if ((fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0)
				child_fail(report, STAGE_SETUP, errno);
		for (int i = 0; i < 3; i++)
			if (dup2(fds[i], i) < 0)
				child_fail(report, STAGE_SETUP, errno);
	}
	/* Everything but stdio and the report pipe (CLOEXEC) goes. */
	if (report > 3 && syscall(SYS_close_range, 3u, (unsigned)report - 1, 0) < 0)
		for (int fd = 3; fd < report; fd++)
			close(fd);
	if (syscall(SYS_close_range, (unsigned)report + 1, ~0u, 0) < 0)
		child_fail(report, STAGE_SETUP, errno);

	const char *cwd = x->cwd;
	if (!cwd)
		cwd = access("/root", X_OK) == 0 ? "/root" : "/";
	if (chdir(cwd) < 0)
		child_fail(report, STAGE_CWD, errno);
	if (x->gid != PROTO_ID_INHERIT && x->gid != getegid()) {
		if (setgroups(0, NULL) < 0 && errno != EPERM)
			child_fail(report, STAGE_IDS, errno);
		if (setgid(x->gid) < 0)
			child_fail(report, STAGE_IDS, errno);
	}
	if (x->uid != PROTO_ID_INHERIT && x->uid != geteuid() && setuid(x->uid) < 0)
		child_fail(report, STAGE_IDS, errno);
	environ = child_env(x->env);
	execvp(x->argv[0], x->argv);
	child_fail(report, STAGE_EXEC, errno);
}

/* ---- the agent side ------------------------------------------------------------------------------ */

static int set_nonblock(int fd) { return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static int open_pty(const struct proto_exec *x, int *ret_master, int *ret_slave)
{
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (m < 0)
		return -errno;
	int unlock = 0;
	struct winsize ws = { .ws_row = x->rows ? x->rows : 24, .ws_col = x->cols ? x->cols : 80 };
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0) {
		int r = -errno;
		close(m);
		return r;
	}
	/* TIOCGPTPEER opens the slave through the master: no /dev/pts path lookup in someone's mount ns. */
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		int r = -errno;
		close(m);
		return r;
	}
	*ret_master = m;
	*ret_slave = s;
	return 0;
}

static char **argv_copy(char *const *argv)
{
	size_t n = 0, bytes = 0;
	for (; argv[n]; n++)
		bytes += strlen(argv[n]) + 1;
	char **v = malloc((n + 1) * sizeof(char *) + bytes);
	if (!v)
		return NULL;
	char *area = (char *)(v + n + 1);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(argv[i]) + 1;
		v[i] = memcpy(area, argv[i], l);
		area += l;
	}
	v[n] = NULL;
	return v;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

static const char *const stage_names[] = { "", "setup", "chdir", "set uid/gid", "exec" };

int exec_start(struct conn *c, const struct proto_exec *x)
{
	struct agent *a = c->a;
	if ((x->flags & PROTO_EXEC_DETACH) && (x->flags & (PROTO_EXEC_STDIN | PROTO_EXEC_PTY))) {
		proto_put_err(&c->out, EINVAL, "a detached process has no stdin and no terminal");
		return -EINVAL;
	}
	if (a->nprocs >= AGENT_MAX_PROCS) {
		proto_put_err(&c->out, EAGAIN, "too many processes");
		return -EAGAIN;
	}
	struct proc *p = calloc(1, sizeof(*p));
	char **argv = argv_copy(x->argv);
	if (!p || !argv) {
		free(p);
		free(argv);
		proto_put_err(&c->out, ENOMEM, "out of memory");
		return -ENOMEM;
	}
	p->argv = argv;
	p->pty = x->flags & PROTO_EXEC_PTY;
	p->oom_before = a->vm ? oom_kills_now() : 0; /* before it runs: it may be killed at once */
	/* fds: [0] stdin read, [1] stdin write, [2] out read, [3] out write, [4] err read, [5] err write,
	 * [6] pty master, [7] pty slave, [8] report read, [9] report write */
	int fd[10];
	for (size_t i = 0; i < 10; i++)
		fd[i] = -1;
	int r = 0;
	if (p->pty)
		r = open_pty(x, &fd[6], &fd[7]);
	else if (pipe2(fd, O_CLOEXEC) < 0 || pipe2(fd + 2, O_CLOEXEC) < 0 || pipe2(fd + 4, O_CLOEXEC) < 0)
		r = -errno;
	if (r == 0 && pipe2(fd + 8, O_CLOEXEC) < 0)
		r = -errno;
	if (r < 0) {
		close_fds(fd, 10);
		free(argv);
		free(p);
		proto_put_err(&c->out, -r, "cannot set up stdio: %s", strerror(-r));
		return r;
	}
	struct child_setup s = { .x = x, .in = fd[0], .out = fd[3], .err = fd[5], .pty_slave = fd[7],
				 .report = fd[9], .nofile = a->nofile, .nice = a->child_nice,
				 .cpus = a->child_cpus_set ? &a->child_cpus : NULL };
	pid_t pid = fork();
	if (pid == 0)
		child_run(&s);
	int fork_errno = errno;
	close(fd[9]);
	fd[9] = -1;
	int v[2] = { 0, 0 };
	ssize_t n = pid < 0 ? 0 : read(fd[8], v, sizeof(v)); /* returns 0 at exec (CLOEXEC) */
	if (pid < 0 || n == (ssize_t)sizeof(v)) {
		int e = pid < 0 ? fork_errno : v[1];
		if (e <= 0 || e > 4095)
			e = EIO;
		if (pid > 0)
			waitpid(pid, NULL, 0); /* exits at once; the SIGCHLD loop will not see it */
		const char *what = v[0] == STAGE_CWD && x->cwd ? x->cwd : x->argv[0];
		if (pid < 0 || v[0] <= 0 || v[0] > STAGE_EXEC)
			proto_put_err(&c->out, e, "fork: %s", strerror(e));
		else
			proto_put_err(&c->out, e, "%s %s: %s", stage_names[v[0]], what, strerror(e));
		close_fds(fd, 10);
		free(argv);
		free(p);
		return -e;
	}
	/* Keep the parent's ends: stdin write, output reads (or the pty master twice: out and in). */
	int in = p->pty ? fcntl(fd[6], F_DUPFD_CLOEXEC, 3) : fd[1];
	int out = p->pty ? fd[6] : fd[2];
	int err = p->pty ? -1 : fd[4];
	if (p->pty)
		fd[6] = -1;
	else
		fd[1] = fd[2] = fd[4] = -1;
	close_fds(fd, 10);
	if (!(x->flags & (PROTO_EXEC_STDIN | PROTO_EXEC_PTY)) && in >= 0) {
		close(in);
		in = -1;
	}
	p->a = a;
	p->pid = pid;
	p->conn = c;
	p->out = (struct watch){ .fd = out, .kind = W_PROC_OUT, .obj = p };
	p->err = (struct watch){ .fd = err, .kind = W_PROC_ERR, .obj = p };
	p->in = (struct watch){ .fd = in, .kind = W_PROC_IN, .obj = p };
	p->timer = (struct watch){ .fd = -1, .kind = W_PROC_TIMER, .obj = p };
	if (x->timeout_ms) {
		p->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		struct itimerspec its = { .it_value = { x->timeout_ms / 1000, (long)(x->timeout_ms % 1000) * 1000000 } };
		if (p->timer.fd >= 0)
			timerfd_settime(p->timer.fd, 0, &its, NULL);
		watch_set(a, &p->timer, EPOLLIN);
	}
	struct watch *ws[] = { &p->out, &p->err, &p->in };
	for (size_t i = 0; i < 3; i++)
		if (ws[i]->fd >= 0) {
			set_nonblock(ws[i]->fd);
			/* Bigger pipes: fewer wakeups per MiB for chatty processes (best effort). */
			if (!p->pty)
				fcntl(ws[i]->fd, F_SETPIPE_SZ, AGENT_PIPE_SIZE);
		}
	watch_set(a, &p->out, EPOLLIN);
	if (err >= 0)
		watch_set(a, &p->err, EPOLLIN);
	p->next = a->procs;
	a->procs = p;
	a->nprocs++;
	c->proc = p;
	proto_put_u32_msg(&c->out, PROTO_STARTED, (uint32_t)pid);
	if (x->flags & PROTO_EXEC_DETACH) {
		/* It runs on without the connection: its output is read and dropped until it exits. */
		p->conn = NULL;
		c->proc = NULL;
		return 1;
	}
	return 0;
}

/* ---- running processes --------------------------------------------------------------------------- */

uint64_t oom_kills_now(void)
{
	char buf[8192];
	int fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *k = strstr(buf, "\noom_kill ");
	return k ? strtoull(k + 10, NULL, 10) : 0;
}

static void proc_finish_if_done(struct proc *p)
{
	if (p->dead || !p->exited || p->out.fd >= 0 || p->err.fd >= 0)
		return;
	struct conn *c = p->conn;
	if (c && !c->dead) {
		struct proto_exit e = { .timed_out = p->timed_out };
		bool killed = WIFSIGNALED(p->status) ? WTERMSIG(p->status) == SIGKILL
						      : WIFEXITED(p->status) && WEXITSTATUS(p->status) == 128 + SIGKILL;
		/* A VM's OOM killer is the guest's: the host cannot see it, so the agent says it. */
		e.oom_killed = p->a->vm && killed && !p->timed_out && oom_kills_now() > p->oom_before;
		if (WIFEXITED(p->status)) {
			e.exited = true;
			e.code = WEXITSTATUS(p->status);
		} else if (WIFSIGNALED(p->status)) {
			e.signal = WTERMSIG(p->status);
		}
		proto_put_exit(&c->out, &e, c->peer_minor >= 5);
		c->proc = NULL;
		c->state = C_CLOSING;
	}
	p->conn = NULL;
	watch_close(p->a, &p->in);
	watch_close(p->a, &p->timer);
	p->dead = true;
}

/*
 * Moves output from one pipe (or the pty master) to the connection, at most until the connection's
 * buffer is full. Once the process has exited, "nothing more to read right now" means its output is
 * complete: what a leftover grandchild writes later is not waited for.
 */
static void proc_pump(struct proc *p, struct watch *w)
{
	static uint8_t buf[AGENT_PIPE_SIZE];
	uint8_t type = w->kind == W_PROC_ERR ? PROTO_STDERR : PROTO_STDOUT;
	while (w->fd >= 0) {
		struct conn *c = p->conn && !p->conn->dead ? p->conn : NULL;
		if (c && proto_buf_pending(&c->out) >= AGENT_OUT_HIGH) {
			watch_set(p->a, w, 0);
			return;
		}
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			if (c)
				proto_put_bytes(&c->out, type, buf, (size_t)n); /* only -ENOMEM: dropped */
			continue;
		}
		if (n < 0 && errno == EAGAIN && !p->exited) {
			watch_set(p->a, w, EPOLLIN);
			return;
		}
		/* EOF, EIO (pty: no slave left), EAGAIN after exit, or a real error: this stream is done. */
		watch_close(p->a, w);
	}
	proc_finish_if_done(p);
}

void proc_resume(struct proc *p)
{
	if (p->out.fd >= 0)
		proc_pump(p, &p->out);
	if (!p->dead && p->err.fd >= 0)
		proc_pump(p, &p->err);
	proc_finish_if_done(p);
}

static void stdin_close(struct proc *p)
{
	watch_close(p->a, &p->in);
	free(p->inbuf);
	p->inbuf = NULL;
	p->inlen = p->incap = 0;
}

static void proc_write_stdin(struct proc *p)
{
	bool was_full = proc_stdin_full(p);
	size_t done = 0;
	while (p->in.fd >= 0 && done < p->inlen) {
		ssize_t n = write(p->in.fd, p->inbuf + done, p->inlen - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			/* EPIPE: the process closed its stdin; the rest is dropped. */
			stdin_close(p);
			done = 0;
			break;
		}
		done += (size_t)n;
	}
	if (p->in.fd < 0)
		return;
	memmove(p->inbuf, p->inbuf + done, p->inlen - done);
	p->inlen -= done;
	if (p->inlen == 0 && p->in_eof)
		stdin_close(p);
	else
		watch_set(p->a, &p->in, p->inlen ? EPOLLOUT : 0);
	if (was_full && !proc_stdin_full(p) && p->conn)
		conn_update(p->conn);
}

static void proc_stdin_append(struct proc *p, const void *data, size_t len)
{
	if (p->in.fd < 0 || len == 0)
		return; /* stdin is closed: as if the process had read and ignored it */
	if (p->inlen + len > p->incap) {
		size_t cap = p->incap ? p->incap : 4096;
		while (cap < p->inlen + len)
			cap *= 2;
		uint8_t *b = realloc(p->inbuf, cap);
		if (!b) {
			stdin_close(p);
			return;
		}
		p->inbuf = b;
		p->incap = cap;
	}
	memcpy(p->inbuf + p->inlen, data, len);
	p->inlen += len;
	proc_write_stdin(p);
}

void exec_frame(struct conn *c, const struct proto_frame *f)
{
	struct proc *p = c->proc;
	uint32_t sig;
	uint16_t rows, cols;
	if (!p) {
		conn_close(c);
		return;
	}
	switch (f->type) {
	case PROTO_STDIN:
		proc_stdin_append(p, f->payload, f->len);
		return;
	case PROTO_STDIN_EOF:
		if (proto_get_empty(f) < 0)
			break;
		if (p->pty) {
			/* A terminal has no end of file, only the line discipline's EOF character. */
			static const uint8_t veof = 4;
			proc_stdin_append(p, &veof, 1);
		} else {
			p->in_eof = true;
			if (p->in.fd >= 0)
				proc_write_stdin(p);
		}
		return;
	case PROTO_SIGNAL:
		if (f->type != PROTO_SIGNAL || proto_get_u32(f, &sig) < 0 || sig == 0 || sig > 64)
			break;
		if (!p->exited)
			kill(p->pid, (int)sig);
		return;
	case PROTO_RESIZE:
		if (proto_get_resize(f, &rows, &cols) < 0)
			break;
		if (p->pty && p->out.fd >= 0) {
			struct winsize ws = { .ws_row = rows, .ws_col = cols };
			ioctl(p->out.fd, TIOCSWINSZ, &ws);
		}
		return;
	default:
		break;
	}
	conn_close(c); /* a malformed or out-of-place frame */
}

void proc_event(struct watch *w, uint32_t events)
{
	struct proc *p = w->obj;
	if (p->dead)
		return;
	struct conn *c = p->conn;
	switch (w->kind) {
	case W_PROC_OUT:
	case W_PROC_ERR:
		proc_pump(p, w);
		break;
	case W_PROC_IN:
		proc_write_stdin(p);
		break;
	case W_PROC_TIMER: {
		uint64_t ticks;
		if (read(w->fd, &ticks, sizeof(ticks)) < 0) { /* level-triggered: closing it below is enough */ }
		watch_close(p->a, w);
		if (!p->exited) {
			p->timed_out = true;
			kill(-p->pid, SIGKILL);
			kill(p->pid, SIGKILL);
		}
		break;
	}
	default:
		break;
	}
	if (c && !c->dead)
		conn_flush(c);
}

bool proc_reap(struct agent *a)
{
	/* Bounded: as PID 1 we reap the sandbox's orphans too, and a fork bomb makes them faster than one
	 * loop ends; the caller comes back for the rest after its other events (timeouts, kills). */
	for (unsigned n = 0; n < AGENT_REAP_BATCH; n++) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return false;
		struct proc *p = proc_find(a, pid);
		if (!p)
			continue; /* an orphan re-parented to us (PID 1) or an exec that failed early */
		p->exited = true;
		p->status = status;
		struct conn *c = p->conn;
		stdin_close(p);
		watch_close(a, &p->timer);
		proc_resume(p);
		if (c && !c->dead)
			conn_flush(c);
	}
	return true;
}

void proc_detach(struct proc *p)
{
	p->conn = NULL;
	stdin_close(p);
	if (!p->exited) {
		kill(-p->pid, SIGKILL);
		kill(p->pid, SIGKILL);
	}
	/* Its pipes are drained (and dropped) until the exit is reaped. */
	proc_resume(p);
}

void proc_kill_all(struct agent *a)
{
	for (struct proc *p = a->procs; p; p = p->next)
		if (!p->exited) {
			kill(-p->pid, SIGKILL);
			kill(p->pid, SIGKILL);
		}
}

int exec_signal_pid(struct agent *a, uint32_t pid, uint32_t sig)
{
	if (sig > 64)
		return -EINVAL;
	struct proc *p = pid > 0 && pid <= INT32_MAX ? proc_find(a, (pid_t)pid) : NULL;
	if (!p || p->exited)
		return -ESRCH;
	return kill(p->pid, (int)sig) < 0 ? -errno : 0;
}

void exec_list(struct conn *c)
{
	for (struct proc *p = c->a->procs; p; p = p->next)
		if (!p->dead && !p->exited)
			proto_put_proc(&c->out, (uint32_t)p->pid, (const char *const *)p->argv);
	proto_put_empty(&c->out, PROTO_END);
}
