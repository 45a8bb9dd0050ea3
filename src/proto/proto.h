/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The space-agent wire protocol, shared by the host client (agent_client.c) and the agent itself.
 * Self-contained: libc only, so it links into the static agent. docs/agent-protocol.md is the prose
 * version of this header.
 *
 * A connection carries frames: u32 payload length (little-endian, header excluded) | u8 type | payload.
 * Payload fields are fixed per type, little-endian, strings are u32 length + bytes (no NUL on the wire,
 * no NUL allowed inside). Every decoder here is safe on arbitrary bytes: it checks each length against
 * the bytes present and against the limits below, and returns -EBADMSG on anything else.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC 0x47415053u /* "SPAG" little-endian */
#define PROTO_VERSION_MAJOR 1
#define PROTO_VERSION_MINOR 5

/* Limits (all enforced by the decoders). */
#define PROTO_HEADER_SIZE 5u
#define PROTO_MAX_PAYLOAD (1u << 20)   /* one frame's payload */
#define PROTO_MAX_ARGS 4096u           /* argv or env entries of one EXEC, argv of one PROC */
#define PROTO_MAX_ARG_LEN (128u << 10) /* one argv/env string (Linux MAX_ARG_STRLEN) */
#define PROTO_MAX_PATH 4095u           /* PATH_MAX - 1: a path's bytes */
#define PROTO_MAX_NAME 255u            /* a directory entry's name */
#define PROTO_MAX_ERRMSG 255u          /* ERR message */
#define PROTO_MAX_IDENT 64u            /* agent version string, hostname */
#define PROTO_MAX_RESEED 4096u         /* RESEED bytes */
#define PROTO_MAX_LIFETIME (366u * 24 * 3600) /* SET_LIFETIME seconds (the agent's --lifetime limit) */
/* Nice levels the agent runs above the sandbox's processes, so that a sandbox saturating its CPUs (a fork
 * bomb) cannot starve the agent's answers to the host: its exec timeouts, kills and shutdown. */
#define AGENT_PRIORITY_BOOST 10
#define PROTO_CHUNK (64u << 10)        /* data chunk size senders use (receivers accept up to a frame) */

/* Frame types. 0x0_ to 0x4_ are sent by the client, 0x8_..0xa_ by the agent; DATA and END both. */
enum proto_type {
	PROTO_HELLO = 0x01,      /* both directions, first frame of every connection */
	PROTO_EXEC = 0x10,       /* exec request (struct proto_exec) */
	PROTO_STDIN = 0x11,      /* raw bytes for the exec's stdin */
	PROTO_STDIN_EOF = 0x12,  /* empty: close the exec's stdin */
	PROTO_SIGNAL = 0x13,     /* u32 signal: to the exec of this connection */
	PROTO_RESIZE = 0x14,     /* u16 rows, u16 cols: the exec's pty */
	PROTO_SIGNAL_PID = 0x20, /* u32 pid, u32 signal: to an exec started by any connection */
	PROTO_LIST_PROCS = 0x21, /* empty -> PROC* END */
	PROTO_FILE_WRITE = 0x30, /* path op (path, mode, flags: MKDIR_P) then DATA* END -> OK | ERR */
	PROTO_DATA = 0x31,       /* raw bytes of a file stream */
	PROTO_END = 0x32,        /* empty: end of a stream */
	PROTO_FILE_READ = 0x33,  /* path op (path) -> STAT_REPLY DATA* END | ERR */
	PROTO_STAT = 0x34,       /* path op (path; flags: NOFOLLOW) -> STAT_REPLY | ERR */
	PROTO_LIST_DIR = 0x35,   /* path op (path) -> DIRENT* END | ERR */
	PROTO_MKDIR = 0x36,      /* path op (path, mode, flags: PARENTS) -> OK | ERR */
	PROTO_REMOVE = 0x37,     /* path op (path, flags: RECURSIVE) -> OK | ERR */
	PROTO_RENAME = 0x38,     /* path op (path, path2) -> OK | ERR */
	PROTO_SYNC = 0x39,       /* empty -> OK */
	PROTO_SET_TIME = 0x3a,   /* i64 unix time in ns -> OK | ERR */
	PROTO_RESEED = 0x3b,     /* raw entropy bytes -> OK | ERR */
	PROTO_SHUTDOWN = 0x3c,   /* empty -> OK, then the agent powers off / exits */
	PROTO_SET_LIFETIME = 0x3d, /* u32 seconds from now (0: none) -> OK | ERR (minor 1, CAP_LIFETIME) */
	PROTO_SET_HOSTNAME = 0x3e, /* hostname bytes (1..64, [A-Za-z0-9.-]) -> OK | ERR (minor 2, CAP_HOSTNAME) */
	PROTO_TETHER = 0x3f,       /* u32 PROTO_TETHER_* -> OK | ERR (minor 3, CAP_TETHER) */
	PROTO_PORT_CONNECT = 0x40, /* u16 port, u32 flags (0) -> OK then raw bytes both ways | ERR (minor 4,
				      CAP_PORT) */

	PROTO_OK = 0x82,         /* empty */
	PROTO_ERR = 0x83,        /* i32 errno (positive), string message */
	PROTO_STARTED = 0x90,    /* u32 pid */
	PROTO_STDOUT = 0x91,     /* raw bytes */
	PROTO_STDERR = 0x92,     /* raw bytes */
	PROTO_EXIT = 0x93,       /* struct proto_exit */
	PROTO_STAT_REPLY = 0xa0, /* struct proto_stat */
	PROTO_DIRENT = 0xa1,     /* struct proto_dirent */
	PROTO_PROC = 0xa2,       /* struct proto_proc */
};

/* EXEC flags */
#define PROTO_EXEC_STDIN 0x1u /* stdin is a pipe fed by STDIN frames (else /dev/null) */
#define PROTO_EXEC_PTY 0x2u   /* stdin/stdout/stderr on a new pty; output comes as STDOUT only */
#define PROTO_EXEC_DETACH 0x4u /* (minor 5, CAP_DETACH) the process outlives its connection: the reply is
				 STARTED and the connection ends; stdin is /dev/null, output is dropped;
				 not with STDIN or PTY */
/* path op flags */
#define PROTO_F_MKDIR_P 0x1u   /* FILE_WRITE: create missing parent directories */
#define PROTO_F_PARENTS 0x1u   /* MKDIR: like mkdir -p */
#define PROTO_F_RECURSIVE 0x1u /* REMOVE: like rm -r */
#define PROTO_F_NOFOLLOW 0x1u  /* STAT: lstat */
/* HELLO capabilities */
#define PROTO_CAP_PTY 0x1u
#define PROTO_CAP_RESEED 0x2u
#define PROTO_CAP_SET_TIME 0x4u
#define PROTO_CAP_VSOCK 0x8u /* the agent is listening on vsock (VM mode) */
#define PROTO_CAP_LIFETIME 0x10u /* SET_LIFETIME is understood */
#define PROTO_CAP_HOSTNAME 0x20u /* SET_HOSTNAME is understood */
#define PROTO_CAP_TETHER 0x40u   /* TETHER is understood */
#define PROTO_CAP_PORT 0x80u     /* PORT_CONNECT is understood */
#define PROTO_CAP_DETACH 0x100u  /* EXEC_DETACH is understood */
/* TETHER operations. ARM: after OK the connection stays open, carries nothing more, and its closing (for
 * whatever reason: the client exited or was killed) shuts the sandbox down. HOLD / RELEASE: the tethers
 * open now stop / start again shutting it down when they close (around a memory snapshot, whose restore
 * resets every connection it recorded: its tethers must not end the restored sandbox). */
#define PROTO_TETHER_ARM 1u
#define PROTO_TETHER_HOLD 2u
#define PROTO_TETHER_RELEASE 3u

/* uid/gid value meaning "the agent's own" */
#define PROTO_ID_INHERIT 0xffffffffu

struct proto_hello {
	uint32_t magic;
	uint16_t major, minor;
	uint32_t max_payload;
	uint64_t caps;
	char version[PROTO_MAX_IDENT + 1];  /* software version of the sender */
	char hostname[PROTO_MAX_IDENT + 1]; /* agent: the sandbox hostname; client: empty */
};

/* Decoded EXEC. One allocation: free() it. argv has >= 1 entry; env NULL-terminated, maybe empty. */
struct proto_exec {
	char **argv;
	char **env;
	char *cwd; /* NULL = default */
	uint32_t uid, gid;
	uint32_t flags;
	uint16_t rows, cols;
	uint32_t timeout_ms; /* 0 = none */
};

/* Decoded path op (FILE_WRITE, FILE_READ, STAT, LIST_DIR, MKDIR, REMOVE, RENAME). */
struct proto_path_op {
	char path[PROTO_MAX_PATH + 1];
	char path2[PROTO_MAX_PATH + 1]; /* RENAME target; else empty */
	uint32_t mode;
	uint32_t flags;
};

struct proto_exit {
	bool exited;    /* exited normally: code is valid */
	bool timed_out; /* killed by the agent at timeout_ms */
	int32_t code;
	int32_t signal; /* !exited: the signal that ended it */
	bool oom_killed; /* (minor 5: a trailing u8; older agents' EXIT lacks it) VM mode: the guest's OOM
			    killer killed while the process ended by SIGKILL (or exit 137) */
};

struct proto_stat {
	uint32_t mode; /* st_mode: type and permission bits */
	uint32_t uid, gid;
	uint64_t size;
	int64_t mtime_ns;
};

struct proto_dirent {
	char name[PROTO_MAX_NAME + 1];
	struct proto_stat st; /* lstat of the entry; mode holds only the type if that failed */
};

/* Decoded PROC. One allocation: free() it. */
struct proto_proc {
	uint32_t pid;
	char **argv; /* NULL-terminated */
};

struct proto_err {
	int32_t code; /* positive errno */
	char msg[PROTO_MAX_ERRMSG + 1];
};

/* ---- Outgoing byte queue and encoders ------------------------------------------------------------- */

/* A growable queue of encoded frames: appended at the tail, consumed (sent) from head. */
struct proto_buf {
	uint8_t *data;
	size_t head, len, cap; /* pending bytes are data[head..len) */
	size_t frame_start;    /* of the frame being built */
	int err;               /* sticky: -ENOMEM or -EMSGSIZE while building */
};

void proto_buf_free(struct proto_buf *b);
static inline size_t proto_buf_pending(const struct proto_buf *b) { return b->len - b->head; }
/* Marks n bytes from head as sent. */
void proto_buf_consume(struct proto_buf *b, size_t n);

/* Low-level frame building: begin, put fields, end. end returns 0 or the sticky error (and drops the
 * partial frame). */
void proto_begin(struct proto_buf *b, uint8_t type);
void proto_put_u8(struct proto_buf *b, uint8_t v);
void proto_put_u16(struct proto_buf *b, uint16_t v);
void proto_put_u32(struct proto_buf *b, uint32_t v);
void proto_put_u64(struct proto_buf *b, uint64_t v);
void proto_put_raw(struct proto_buf *b, const void *p, size_t n);
void proto_put_str(struct proto_buf *b, const char *s); /* NULL encodes as "" */
void proto_put_strv(struct proto_buf *b, const char *const *v); /* NULL encodes as empty */
int proto_end(struct proto_buf *b);

/* Whole messages. Each returns 0 or -errno (-EMSGSIZE when a field exceeds its limit). */
int proto_put_empty(struct proto_buf *b, uint8_t type);
int proto_put_bytes(struct proto_buf *b, uint8_t type, const void *p, size_t n); /* STDIN/STDOUT/DATA.. */
int proto_put_hello(struct proto_buf *b, const struct proto_hello *h);
int proto_put_exec(struct proto_buf *b, const char *const *argv, const char *const *env, const char *cwd,
		   uint32_t uid, uint32_t gid, uint32_t flags, uint16_t rows, uint16_t cols, uint32_t timeout_ms);
int proto_put_u32_msg(struct proto_buf *b, uint8_t type, uint32_t v); /* SIGNAL, STARTED, SET_LIFETIME */
int proto_put_u32x2_msg(struct proto_buf *b, uint8_t type, uint32_t a, uint32_t c); /* SIGNAL_PID */
int proto_put_resize(struct proto_buf *b, uint16_t rows, uint16_t cols);
int proto_put_set_time(struct proto_buf *b, int64_t unix_ns);
int proto_put_path_op(struct proto_buf *b, uint8_t type, const char *path, const char *path2, uint32_t mode,
		      uint32_t flags);
int proto_put_err(struct proto_buf *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* with_oom: the trailing oom_killed byte, for clients of minor 5 and later (older ones refuse it). */
int proto_put_exit(struct proto_buf *b, const struct proto_exit *e, bool with_oom);
int proto_put_stat(struct proto_buf *b, uint8_t type, const struct proto_stat *st); /* STAT_REPLY */
int proto_put_dirent(struct proto_buf *b, const struct proto_dirent *d);
int proto_put_proc(struct proto_buf *b, uint32_t pid, const char *const *argv);
/* PORT_CONNECT: port 1..65535 (-EINVAL for 0). */
int proto_put_port_connect(struct proto_buf *b, uint16_t port, uint32_t flags);

/* ---- Incoming frames and decoders --------------------------------------------------------------- */

struct proto_frame {
	uint8_t type;
	uint32_t len;
	const uint8_t *payload; /* points into the caller's buffer */
};

/*
 * Looks for one complete frame at buf[0..avail). Returns its total size (header + payload, > 0) and
 * fills *ret; 0 when more bytes are needed; -EMSGSIZE when the header announces more than max_payload
 * (the connection cannot be resynchronised and must be closed).
 */
long proto_frame_parse(const uint8_t *buf, size_t avail, uint32_t max_payload, struct proto_frame *ret);

/* Decoders: 0 or -EBADMSG (wrong type, short, trailing bytes, a limit exceeded, NUL inside a string)
 * or -ENOMEM. Outputs written only on success. */
int proto_get_hello(const struct proto_frame *f, struct proto_hello *ret);
int proto_get_exec(const struct proto_frame *f, struct proto_exec **ret);
int proto_get_u32(const struct proto_frame *f, uint32_t *ret);
int proto_get_u32x2(const struct proto_frame *f, uint32_t *ret_a, uint32_t *ret_b);
int proto_get_resize(const struct proto_frame *f, uint16_t *ret_rows, uint16_t *ret_cols);
int proto_get_set_time(const struct proto_frame *f, int64_t *ret);
int proto_get_path_op(const struct proto_frame *f, struct proto_path_op *ret);
int proto_get_err(const struct proto_frame *f, struct proto_err *ret);
int proto_get_exit(const struct proto_frame *f, struct proto_exit *ret);
int proto_get_stat(const struct proto_frame *f, struct proto_stat *ret);
int proto_get_dirent(const struct proto_frame *f, struct proto_dirent *ret);
int proto_get_proc(const struct proto_frame *f, struct proto_proc **ret);
/* PORT_CONNECT: port 0 is -EBADMSG; flags are returned as sent (the agent refuses ones it does not know). */
int proto_get_port_connect(const struct proto_frame *f, uint16_t *ret_port, uint32_t *ret_flags);
/* Checks an empty-payload frame. */
int proto_get_empty(const struct proto_frame *f);

/* Human name of a frame type ("EXEC"), "?" when unknown. */
const char *proto_type_name(uint8_t type);
