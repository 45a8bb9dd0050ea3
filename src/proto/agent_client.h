/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-side client of space-agent (protocol: proto.h, docs/agent-protocol.md).
 *
 * Addresses are strings:
 *   "unix:/path/to/sock"                the agent listens on a unix socket (jail mode, tests)
 *   "vsock-uds:/path/to/vsock.sock:PORT" Firecracker-style vsock: connect to the VMM's unix socket,
 *                                        send "CONNECT PORT\n", expect "OK <n>\n"
 *   "fd:N"                              an already connected stream socket; the client works on a
 *                                        dup() of N, the caller keeps N
 * Every call opens its own connection (the agent serves many at once), sends HELLO and the request,
 * and checks the agent's HELLO (-EPROTONOSUPPORT on a different major version).
 *
 * All functions return 0 (or the documented positive value) or -errno. A failure the agent reports
 * comes back as its errno (-ENOENT for a missing file...) and, when err is non-NULL, its message in
 * err->msg. Transport failures are local errnos (-ECONNREFUSED, -EPIPE, ...); a reply that breaks the
 * protocol (malformed frame, wrong frame type, a length beyond the limits) is -EBADMSG. Everything the
 * agent sends is treated as hostile. Outputs (ret_*) are written only on success.
 *
 * Only agent_hello() has a time limit; the other calls wait for the agent as long as the connection
 * lives (a sandbox's agent is expected to answer; destroying the sandbox breaks the connection).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

struct agent_error {
	int code;      /* positive errno; 0 when no error was recorded */
	char msg[256]; /* the agent's message, or a local description */
};

struct agent_info {
	uint16_t major, minor;   /* agent protocol version */
	uint64_t caps;           /* PROTO_CAP_* */
	char version[PROTO_MAX_IDENT + 1];
	char hostname[PROTO_MAX_IDENT + 1];
};

/* Connects and exchanges HELLO; retries connecting until timeout_ms has passed (the agent may still be
 * starting), and bounds the wait for the reply by the same deadline (-ETIMEDOUT). */
int agent_hello(const char *addr, int timeout_ms, struct agent_info *ret, struct agent_error *err);

struct agent_exec_req {
	const char *const *argv;  /* argv[0] looked up in PATH (of env) by the agent */
	const char *const *env;   /* NULL: PATH and HOME defaults */
	const char *cwd;          /* NULL: /root if it exists, else / */
	uint32_t uid, gid;        /* PROTO_ID_INHERIT or equal to the agent's: no change */
	bool stdin_pipe;          /* stdin fed with agent_exec_write_stdin(); else /dev/null */
	bool pty;                 /* run on a new pty (output all arrives as stream 1) */
	uint16_t rows, cols;      /* pty size (0: agent default 24x80) */
	uint32_t timeout_ms;      /* 0 = none; else the process group is SIGKILLed at the deadline */
	bool detach;              /* the process outlives the connection (no stdin, no pty, output dropped):
	                             agent_exec_start returns once it started; -EOPNOTSUPP from older agents */
};

struct agent_exit {
	bool exited;    /* normal exit: code valid */
	int code;
	int signal;     /* !exited: the signal that killed it */
	bool timed_out; /* the agent killed it at timeout_ms */
	bool oom_killed; /* VM: the guest's OOM killer ended it (agents from protocol 1.5 on) */
};

/* Receives output as it is produced; stream 1 = stdout, 2 = stderr. A negative return aborts the pump
 * with that value. */
typedef int (*agent_output_fn)(int stream, const void *buf, size_t len, void *userdata);

struct agent_exec;

/* Starts a process; returns once the agent reported STARTED (pid) or an error (e.g. -ENOENT when
 * argv[0] was not found, with the agent's message). Caller owns *ret (agent_exec_free). */
int agent_exec_start(const char *addr, const struct agent_exec_req *req, struct agent_exec **ret,
		     struct agent_error *err);
/* The connection's fd, for poll(POLLIN) before agent_exec_pump(). Owned by x. */
int agent_exec_fd(struct agent_exec *x);
/* The process id inside the sandbox. */
int agent_exec_pid(struct agent_exec *x);
/* Sends stdin bytes; len 0 sends EOF. Blocks until the bytes are handed to the socket; the agent stops
 * reading while the process does not consume its stdin, so a caller feeding much input to a process
 * that also writes much output must interleave agent_exec_pump() (or use agent_exec_run()). */
int agent_exec_write_stdin(struct agent_exec *x, const void *buf, size_t len);
int agent_exec_signal(struct agent_exec *x, int sig);
int agent_exec_resize(struct agent_exec *x, uint16_t rows, uint16_t cols);
/* Handles what is readable now, blocking for at least one read when nothing is buffered: output goes to
 * out (may be NULL). Returns 1 once EXIT arrived (*ret filled), 0 when more is to come, or -errno
 * (-EPIPE if the agent hung up before EXIT). */
int agent_exec_pump(struct agent_exec *x, agent_output_fn out, void *userdata, struct agent_exit *ret);
/* True when frames are already buffered: call agent_exec_pump() before polling agent_exec_fd() again,
 * since the fd will not poll readable for them. */
bool agent_exec_pending(struct agent_exec *x);
/* Closes the connection; if the process still runs, the agent kills its process group. NULL is fine. */
void agent_exec_free(struct agent_exec *x);

/* Convenience: start, feed stdin_fd (-1: no stdin) to EOF, pump output to out until EXIT. */
int agent_exec_run(const char *addr, const struct agent_exec_req *req, int stdin_fd, agent_output_fn out,
		   void *userdata, struct agent_exit *ret, struct agent_error *err);

struct agent_stat {
	uint32_t mode; /* st_mode */
	uint32_t uid, gid;
	uint64_t size;
	int64_t mtime_ns;
};

/* Streams src_fd to its EOF into path (created with mode, parents created when mkdir_p). The agent
 * writes a temporary file in the same directory and renames it at the end, so an interrupted transfer
 * leaves no partial file at path. */
int agent_file_write(const char *addr, const char *path, uint32_t mode, bool mkdir_p, int src_fd,
		     struct agent_error *err);
/* The cap of agent_file_read(): no caller gets an unbounded copy without asking for one. */
#define AGENT_READ_MAX_DEFAULT (1ull << 30)

struct agent_read_opts {
	uint64_t max_bytes; /* the most bytes the stream may carry (UINT64_MAX: no cap); a file whose announced
	                       size is larger is refused before any byte, a stream that goes past it is cut */
	/* After each chunk: done bytes so far, total the announced size (a hint from the sandbox). */
	void (*progress)(uint64_t done, uint64_t total, void *userdata);
	void *userdata;
};

/* Streams path into dst_fd, at most o->max_bytes (-EFBIG beyond, with a message naming the cap); *ret_st
 * (may be NULL) gets its stat as the agent announced it, except that size is the count of bytes
 * streamed. A regular dst_fd written at or past its end keeps zero runs as holes (proto/file_sink.h).
 * On failure, what was written to dst_fd so far stays there: the caller discards it. */
int agent_file_read_opts(const char *addr, const char *path, int dst_fd, const struct agent_read_opts *o,
			 struct agent_stat *ret_st, struct agent_error *err);
/* agent_file_read_opts() capped at AGENT_READ_MAX_DEFAULT. */
int agent_file_read(const char *addr, const char *path, int dst_fd, struct agent_stat *ret_st,
		    struct agent_error *err);
/* stat (follow = true) or lstat. */
int agent_stat(const char *addr, const char *path, bool follow, struct agent_stat *ret, struct agent_error *err);

/* One directory entry (not "." or ".."); a negative return stops the listing with that value. */
typedef int (*agent_dirent_fn)(const char *name, const struct agent_stat *st, void *userdata);
int agent_list_dir(const char *addr, const char *path, agent_dirent_fn fn, void *userdata,
		   struct agent_error *err);

int agent_mkdir(const char *addr, const char *path, uint32_t mode, bool parents, struct agent_error *err);
int agent_remove(const char *addr, const char *path, bool recursive, struct agent_error *err);
int agent_rename(const char *addr, const char *from, const char *to, struct agent_error *err);
int agent_sync(const char *addr, struct agent_error *err);
/*
 * Connects addr's transport and returns the connected descriptor (O_CLOEXEC, caller owns it) before any
 * byte of the agent protocol: "unix:" is a plain connect; "vsock-uds:" includes the CONNECT handshake,
 * whose one-line answer comes from the VMM, not from the sandbox. For a privileged process that hands the
 * descriptor to a confined one, which then talks to the agent through the address "fd:N". One attempt.
 */
int agent_connect(const char *addr, int *ret_fd, struct agent_error *err);
/* Sets CLOCK_REALTIME in the sandbox (VM mode; in jail mode the agent answers -EPERM). */
int agent_set_time(const char *addr, int64_t unix_ns, struct agent_error *err);
/* Credits len (<= PROTO_MAX_RESEED) bytes to the sandbox's entropy pool. */
int agent_reseed(const char *addr, const void *buf, size_t len, struct agent_error *err);
/* Re-arms the sandbox's lifetime: the agent shuts down seconds (<= PROTO_MAX_LIFETIME) from now; 0 means
 * never. -EOPNOTSUPP from an agent without PROTO_CAP_LIFETIME (it is not sent the request). */
int agent_set_lifetime(const char *addr, uint32_t seconds, struct agent_error *err);
/* SET_HOSTNAME: the sandbox's new name (a fork or restore of a snapshot). -EOPNOTSUPP from an agent
 * without PROTO_CAP_HOSTNAME. */
int agent_set_hostname(const char *addr, const char *hostname, struct agent_error *err);
/*
 * TETHER ARM: returns the open connection (O_CLOEXEC, caller owns it); the agent shuts the sandbox down
 * when it closes, which the kernel does however the owning process ends. -EOPNOTSUPP (with a message)
 * from an agent without PROTO_CAP_TETHER: it is not sent the request.
 */
int agent_tether(const char *addr, int *ret_fd, struct agent_error *err);
/* TETHER HOLD (hold) / RELEASE: the tethers open now stop / start again ending the sandbox when they
 * close. -EOPNOTSUPP from an agent without PROTO_CAP_TETHER (which holds no tether). */
int agent_tether_hold(const char *addr, bool hold, struct agent_error *err);
/*
 * PORT_CONNECT: a stream to TCP port (1..65535) on the sandbox's own loopback (127.0.0.1, else ::1).
 * Returns the connection (O_CLOEXEC, blocking, caller owns it) once the agent answered OK: from then on
 * its bytes are the port's, both ways, and shutdown(SHUT_WR) reaches the port as a half-close. Not one
 * byte past the answer is read. -ECONNREFUSED ("port N is not listening") when nothing listens there;
 * -EOPNOTSUPP (not sent) from an agent without PROTO_CAP_PORT.
 */
int agent_port_connect(const char *addr, uint16_t port, int *ret_fd, struct agent_error *err);
/* Asks the agent to power off (VM) or exit (jail); returns after the agent acknowledged. */
int agent_shutdown(const char *addr, struct agent_error *err);
/* Signals a process the agent started (any connection's); -ESRCH for others. */
int agent_signal_pid(const char *addr, int pid, int sig, struct agent_error *err);

/* One running exec: pid and argv. A negative return stops the listing with that value. */
typedef int (*agent_proc_fn)(int pid, const char *const *argv, void *userdata);
int agent_list_procs(const char *addr, agent_proc_fn fn, void *userdata, struct agent_error *err);
