/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-agent internals. One thread, one epoll loop: every fd the agent waits on is a `struct watch`
 * embedded in the object that owns it (connection, process). Objects are never freed while an epoll
 * batch may still name them: they are marked dead and freed after the batch.
 */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "proto/proto.h"

/* Flow-control bounds per connection. */
#define AGENT_OUT_HIGH (1u << 20)    /* stop producing (pipes, file reads) above this much unsent */
#define AGENT_STDIN_HIGH (256u << 10) /* stop reading the socket while this much stdin is unwritten */
#define AGENT_PIPE_SIZE (256u << 10) /* stdio pipe capacity and read size */
#define AGENT_MAX_CONNS 1024
#define AGENT_MAX_PROCS 1024

enum watch_kind { W_LISTEN, W_SIGNAL, W_CONN, W_PROC_OUT, W_PROC_ERR, W_PROC_IN, W_PROC_TIMER, W_PORT };

struct watch {
	int fd;
	enum watch_kind kind;
	uint32_t events; /* as registered; 0 = not in the epoll set */
	void *obj;
};

enum conn_state {
	C_HELLO,      /* waiting for the client's HELLO */
	C_REQUEST,    /* waiting for the request */
	C_EXEC,       /* an exec runs; STDIN/SIGNAL/RESIZE accepted */
	C_FILE_WRITE, /* DATA* END into a temp file */
	C_DISCARD,    /* a failed FILE_WRITE: DATA ignored until END */
	C_FILE_READ,  /* streaming a file out */
	C_CLOSING,    /* reply queued: close once flushed */
	C_TETHER,     /* a tether (PROTO_TETHER_ARM): nothing more is expected; its closing ends the sandbox */
	C_PORT_CONNECTING, /* PORT_CONNECT: the connect to the sandbox's loopback is under way */
	C_PORT,            /* PORT_CONNECT answered OK: raw bytes both ways between the client and port.up */
};

/* A PORT_CONNECT forward (port.c). Client bytes for the port wait in the connection's rbuf. */
struct port_fwd {
	struct watch up;  /* the socket to 127.0.0.1 (or ::1) inside the sandbox; fd -1 when none */
	uint16_t port;
	bool v6;          /* the ::1 attempt is under way (127.0.0.1 refused) */
	bool up_eof;      /* the port's side ended its output */
	bool up_shut;     /* shutdown(SHUT_WR) sent to the port: the client ended its output */
	bool client_shut; /* shutdown(SHUT_WR) sent to the client */
};

struct agent;
struct proc;

struct conn {
	struct watch w;
	struct agent *a;
	struct conn *next;
	bool dead;
	enum conn_state state;
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct proto_buf out;
	uint16_t peer_minor; /* the client's protocol minor version (its HELLO) */
	struct proc *proc; /* C_EXEC */
	int file_fd;       /* C_FILE_WRITE / C_FILE_READ */
	char *tmp_path;    /* C_FILE_WRITE: temp file, renamed to final_path at END */
	char *final_path;
	bool shutdown_after; /* SHUTDOWN acknowledged: quit once flushed */
	bool rd_eof;         /* the client half-closed: stop reading */
	bool tether_held;    /* C_TETHER under PROTO_TETHER_HOLD: its closing ends nothing */
	struct port_fwd port; /* C_PORT_CONNECTING / C_PORT */
};

struct proc {
	struct agent *a;
	struct proc *next;
	bool dead;
	pid_t pid;
	struct conn *conn; /* NULL once the client went away */
	struct watch out, err, in, timer;
	bool pty;
	uint8_t *inbuf; /* stdin bytes not yet taken by the process */
	size_t inlen, incap;
	bool in_eof;    /* close stdin once inbuf is drained */
	bool exited;
	int status;
	bool timed_out;
	uint64_t oom_before; /* VM mode: the guest's OOM kills when it started (/proc/vmstat oom_kill) */
	char **argv; /* copy for LIST_PROCS; one allocation */
};

struct agent {
	int epfd;
	bool vm;   /* VM mode: vsock, poweroff on shutdown */
	bool jail; /* jail mode: exit on shutdown */
	bool quit;
	bool listen_paused; /* out of fds: accept again once a connection is gone */
	bool reap_more;     /* proc_reap stopped at its batch: children may be left to reap */
	struct rlimit nofile; /* as the agent found it: what its children get */
	int child_nice;       /* its children's nice level (the agent runs AGENT_PRIORITY_BOOST above it) */
	bool child_cpus_set;  /* children's CPU affinity (--cpus in a jail); the agent keeps all CPUs */
	cpu_set_t child_cpus;
	struct watch listen, sig;
	struct conn *conns;
	struct proc *procs;
	unsigned nconns, nprocs;
	char hostname[PROTO_MAX_IDENT + 1];
};

void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* epoll bookkeeping: sets the watch's events (0 removes it). */
int watch_set(struct agent *a, struct watch *w, uint32_t events);
void watch_close(struct agent *a, struct watch *w);

/* conn.c */
void conn_accept(struct agent *a);
void conn_event(struct conn *c, uint32_t events);
/* Sends what the socket takes, closes a finished connection, resumes producers. */
void conn_flush(struct conn *c);
void conn_update(struct conn *c);
void conn_close(struct conn *c);
/* Frees dead connections and processes (after an epoll batch). */
void agent_reap_dead(struct agent *a);

/* exec.c */
/* The kernel's count of OOM kills (/proc/vmstat oom_kill; 0 if unreadable). */
uint64_t oom_kills_now(void);
/* 0: started and attached to c; 1: started detached (STARTED queued, c is done); -errno: ERR queued. */
int exec_start(struct conn *c, const struct proto_exec *x);
void exec_frame(struct conn *c, const struct proto_frame *f);
void proc_event(struct watch *w, uint32_t events);
/* Reaps exited children, at most AGENT_REAP_BATCH; true when there may be more. */
#define AGENT_REAP_BATCH 128
bool proc_reap(struct agent *a);
/* The connection has room again: resume reading the process's output. */
void proc_resume(struct proc *p);
/* The connection is gone: kill the process group, keep reaping it. */
void proc_detach(struct proc *p);
void proc_kill_all(struct agent *a);
int exec_signal_pid(struct agent *a, uint32_t pid, uint32_t sig);
void exec_list(struct conn *c);
bool proc_stdin_full(const struct proc *p);

/* files.c */
void files_request(struct conn *c, const struct proto_frame *f);
void files_write_frame(struct conn *c, const struct proto_frame *f);
void files_read_more(struct conn *c);
void files_abort(struct conn *c);

/* port.c */
/* PORT_CONNECT: connects to the port on the sandbox's own loopback without blocking; OK then raw bytes, or
 * ERR (ECONNREFUSED: "port N is not listening"). */
void port_request(struct conn *c, const struct proto_frame *f);
/* Events on the port's socket (W_PORT) and on the client's socket of a C_PORT connection. */
void port_event(struct conn *c, uint32_t events);
void port_conn_event(struct conn *c, uint32_t events);
/* Registers the events both sockets of a forward wait for; closes the connection once both ways ended. */
void port_update(struct conn *c);
static inline bool port_active(const struct conn *c) { return c->state == C_PORT_CONNECTING || c->state == C_PORT; }
void port_abort(struct conn *c);

/* system.c */
/*
 * Jail mode, first thing: makes the agent not dumpable and makes sure no capability set holds
 * CAP_SYS_PTRACE (the jail dropped it from the bounding set before the exec), so the jail's processes can
 * reach neither its memory nor its host-opened descriptors through /proc/1. Fails when either cannot be
 * ensured: the agent must not serve then.
 */
int system_harden_jail(void);
/* Jail mode: mounts what is missing (a jail of ours mounted all of it before its seccomp filter, which
 * refuses mounts; a hand-made one may not have), and the host name. */
int system_setup_jail(const char *hostname);
/* Jail mode: narrows the agent's CPU affinity, which every process of the sandbox inherits, to n of the CPUs
 * it may run on, so `nproc` (sched_getaffinity) inside says n as in a VM of n vCPUs. The CPU quota of the
 * jail's cgroup stays the limit: a process may widen its own affinity again and gain nothing by it. The n
 * CPUs start at a random one, so that many small jails spread over the host. Nothing to do when n is 0 or
 * not below the CPUs allowed. */
int system_child_cpus(unsigned n, cpu_set_t *ret);
int system_setup_vm(void);
void system_request(struct conn *c, const struct proto_frame *f);
void system_final(struct agent *a);
