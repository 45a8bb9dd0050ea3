/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A jail's log (docs/jail.md, "The sandbox's log"). The agent's stdout/stderr and the jail's start lines go
 * through a pipe to space-logcap (src/logcap), which stores them in <runtime dir>/sandbox.log and
 * sandbox.log.1, logcap_max_bytes() in all, as its own uid under a seccomp allowlist: no host file is ever
 * open inside the sandbox, and what the sandbox writes cannot outgrow the cap. Private.
 *
 * The log writer's uid is a UIDALLOC_SINGLE slot whose owner is "<state dir> <sandbox id> logcap": taken
 * at the jail's first start (again at each restart, the same slot while the sandbox holds it), freed by
 * logcap_release() when the sandbox is destroyed, and reclaimed by uids_reap_stale() after a crash (the
 * owner names a sandbox that is gone).
 */
#pragma once

#include "core/internal.h"
#include "util/cgroup.h"
#include "util/spawn.h"

#define LOGCAP_LOG "sandbox.log"
#define LOGCAP_LOG_OLD "sandbox.log.1"
#define LOGCAP_FIFO "log.fifo" /* the jail's end of it is its only way to the log */
#define LOGCAP_PID "logcap.pid" /* "PID START-TIME UID" of the running writer */

/*
 * The pipe of sandbox_id's log: a FIFO in runtime_dir, made anew, which only root reaches on the host (so
 * that a new writer can take over the jail's end: logcap_restart). Its write end in *ret_fd (close-on-exec;
 * the caller hands it to jail_config.log_fd and closes it once the jail started: EOF, which ends the writer,
 * comes when the last holder is gone), its read end in *ret_read_fd, for logcap_spawn(). What the jail writes
 * before the writer runs waits in the pipe.
 */
int logcap_open(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir, int *ret_fd, int *ret_read_fd);

/*
 * Starts the log writer of sandbox_id on runtime_dir's log files (created 0600 if missing, kept otherwise),
 * reading read_fd (the caller closes its copy), and returns its status pipe in *ret_status_fd, without
 * waiting: the writer reads the pipe only once confined, and logcap_wait_ready() must say so before the
 * sandbox counts as started (else the jail is stopped: fail closed). fresh: a sandbox being created, whose
 * writer holds no uid yet (a restart reuses the one it holds). On failure nothing runs and ctx's last error
 * says why.
 */
int logcap_spawn(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir, bool fresh, int read_fd,
		 int *ret_status_fd);

/*
 * logcap_spawn() in three parts, so that the writer's process can start on another thread while the
 * caller starts the jail (core/backend_jail.c): logcap_prepare() opens the log files, takes the uid and
 * makes the helpers' cgroup (ctx's last error says why it failed; nothing is left open then);
 * logcap_start_run() only starts the process (system calls, no ctx: any thread, once); and
 * logcap_start_finish(), back on the caller's thread, reports the start's failure or records the writer's
 * pid and returns its status pipe as logcap_spawn() does. Every prepared start is finished, run or not
 * (s->r is -ECANCELED until it runs). read_fd stays the caller's and must stay open until the run is done.
 */
struct logcap_start {
	char path[PATH_MAX], uid_arg[16], max_arg[24], cgroup[UTIL_CGROUP_SPEC_MAX];
	const char *argv[6];
	int fds[5];
	int logfd, oldfd, null, sread, swrite;
	struct util_child child;
	uint32_t uid;
	int r;
};
int logcap_prepare(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir, bool fresh, int read_fd,
		   struct logcap_start *s);
void logcap_start_run(struct logcap_start *s);
int logcap_start_finish(space_ctx *ctx, const char *runtime_dir, struct logcap_start *s, int *ret_status_fd);

/* A new log writer for a running jail whose writer died (a kill -9, an OOM kill): it reads the FIFO the
 * jail still writes to. What the jail wrote while there was none is lost (its writes failed at once:
 * the agent ignores SIGPIPE). Waits until it is confined; -errno with ctx's last error otherwise. */
int logcap_restart(space_ctx *ctx, const char *sandbox_id, const char *runtime_dir);

/* 1 when runtime_dir's log writer (recorded by logcap_start/restart) is gone, 0 when it runs or none was
 * recorded (a VM). */
int logcap_dead(const char *runtime_dir);

/* Waits (up to a few seconds) for the writer started by logcap_start to report that it is confined, then
 * the caller closes status_fd. -errno with ctx's last error when it did not. */
int logcap_wait_ready(space_ctx *ctx, int status_fd);

/* The cap of a sandbox's log (sandbox.log and sandbox.log.1 together), for the jail's log writer and the
 * VMM's console alike: $SPACE_SANDBOX_LOG_MAX (an operator setting, 8K..1T), else 8 MiB. A value that
 * does not parse is refused with ctx's last error, never ignored. */
int logcap_max_bytes(space_ctx *ctx, uint64_t *ret);

/* The uid slot the log writer recorded in runtime_dir (logcap.pid), for logcap_release(); 0 when none is
 * recorded (no writer started, or one recorded by an older version). Read before runtime_dir goes. */
uint32_t logcap_recorded_uid(const char *runtime_dir);

/* Frees the uid slot of sandbox_id's log writer (the sandbox is destroyed). Fine when there is none.
 * recorded_uid (logcap_recorded_uid(), 0: unknown) is freed when it is still this writer's slot, without
 * listing every slot on the machine (thousands with as many live sandboxes); else they are listed. */
void logcap_release(space_ctx *ctx, const char *sandbox_id, uint32_t recorded_uid);

/* Writes runtime_dir's sandbox.log.1 (if any) then sandbox.log to dst_fd: the log in order. -ENOENT (with
 * ctx's last error) when there is no sandbox.log. */
int logcap_read(space_ctx *ctx, const char *runtime_dir, int dst_fd);
