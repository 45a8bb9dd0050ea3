/* SPDX-License-Identifier: Apache-2.0 */
/* Encoders and bounds-checked decoders of the agent protocol (see proto.h). libc only. */
#include "proto/proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- proto_buf --------------------------------------------------------------------------------- */

void proto_buf_free(struct proto_buf *b)
{
	free(b->data);
	*b = (struct proto_buf){ 0 };
}

void proto_buf_consume(struct proto_buf *b, size_t n)
{
	if (n > proto_buf_pending(b))
		n = proto_buf_pending(b);
	b->head += n;
	if (b->head == b->len)
		b->head = b->len = 0;
}

static bool buf_reserve(struct proto_buf *b, size_t n)
{
	if (b->err)
		return false;
	if (b->len - b->frame_start + n > PROTO_HEADER_SIZE + (size_t)PROTO_MAX_PAYLOAD) {
		b->err = -EMSGSIZE;
		return false;
	}
	if (b->len + n <= b->cap)
		return true;
	/* Reclaim the already-sent prefix before growing. */
	if (b->head > 0) {
		memmove(b->data, b->data + b->head, b->len - b->head);
		b->len -= b->head;
		b->frame_start -= b->head;
		b->head = 0;
		if (b->len + n <= b->cap)
			return true;
	}
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->data, cap);
	if (!p) {
		b->err = -ENOMEM;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void proto_begin(struct proto_buf *b, uint8_t type)
{
	b->err = 0;
	b->frame_start = b->len;
	if (buf_reserve(b, PROTO_HEADER_SIZE)) {
		memset(b->data + b->len, 0, 4);
		b->data[b->len + 4] = type;
		b->len += PROTO_HEADER_SIZE;
	}
}

void proto_put_raw(struct proto_buf *b, const void *p, size_t n)
{
	if (n == 0 || !buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void put_le(struct proto_buf *b, uint64_t v, unsigned n)
{
	uint8_t tmp[8];
	for (unsigned i = 0; i < n; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	proto_put_raw(b, tmp, n);
}

void proto_put_u8(struct proto_buf *b, uint8_t v) { put_le(b, v, 1); }
void proto_put_u16(struct proto_buf *b, uint16_t v) { put_le(b, v, 2); }
void proto_put_u32(struct proto_buf *b, uint32_t v) { put_le(b, v, 4); }
void proto_put_u64(struct proto_buf *b, uint64_t v) { put_le(b, v, 8); }

static void put_strn(struct proto_buf *b, const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;
	if (n > max) {
		if (!b->err)
			b->err = -EMSGSIZE;
		return;
	}
	proto_put_u32(b, (uint32_t)n);
	proto_put_raw(b, s, n);
}

void proto_put_str(struct proto_buf *b, const char *s) { put_strn(b, s, PROTO_MAX_PAYLOAD); }

static void put_strv_max(struct proto_buf *b, const char *const *v, size_t max_len)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	if (n > PROTO_MAX_ARGS) {
		if (!b->err)
			b->err = -EMSGSIZE;
		return;
	}
	proto_put_u32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		put_strn(b, v[i], max_len);
}

void proto_put_strv(struct proto_buf *b, const char *const *v) { put_strv_max(b, v, PROTO_MAX_ARG_LEN); }

int proto_end(struct proto_buf *b)
{
	if (b->err) {
		int r = b->err;
		if (b->frame_start <= b->len && b->frame_start >= b->head)
			b->len = b->frame_start; /* drop the partial frame */
		b->err = 0;
		return r;
	}
	uint32_t n = (uint32_t)(b->len - b->frame_start - PROTO_HEADER_SIZE);
	uint8_t *h = b->data + b->frame_start;
	h[0] = (uint8_t)n;
	h[1] = (uint8_t)(n >> 8);
	h[2] = (uint8_t)(n >> 16);
	h[3] = (uint8_t)(n >> 24);
	return 0;
}

int proto_put_empty(struct proto_buf *b, uint8_t type)
{
	proto_begin(b, type);
	return proto_end(b);
}

int proto_put_bytes(struct proto_buf *b, uint8_t type, const void *p, size_t n)
{
	proto_begin(b, type);
	proto_put_raw(b, p, n);
	return proto_end(b);
}

int proto_put_hello(struct proto_buf *b, const struct proto_hello *h)
{
	proto_begin(b, PROTO_HELLO);
	proto_put_u32(b, h->magic);
	proto_put_u16(b, h->major);
	proto_put_u16(b, h->minor);
	proto_put_u32(b, h->max_payload);
	proto_put_u64(b, h->caps);
	put_strn(b, h->version, PROTO_MAX_IDENT);
	put_strn(b, h->hostname, PROTO_MAX_IDENT);
	return proto_end(b);
}

int proto_put_exec(struct proto_buf *b, const char *const *argv, const char *const *env, const char *cwd,
		   uint32_t uid, uint32_t gid, uint32_t flags, uint16_t rows, uint16_t cols, uint32_t timeout_ms)
{
	if (!argv || !argv[0])
		return -EINVAL;
	proto_begin(b, PROTO_EXEC);
	proto_put_strv(b, argv);
	proto_put_strv(b, env);
	put_strn(b, cwd, PROTO_MAX_PATH);
	proto_put_u32(b, uid);
	proto_put_u32(b, gid);
	proto_put_u32(b, flags);
	proto_put_u16(b, rows);
	proto_put_u16(b, cols);
	proto_put_u32(b, timeout_ms);
	return proto_end(b);
}

int proto_put_u32_msg(struct proto_buf *b, uint8_t type, uint32_t v)
{
	proto_begin(b, type);
	proto_put_u32(b, v);
	return proto_end(b);
}

int proto_put_port_connect(struct proto_buf *b, uint16_t port, uint32_t flags)
{
	if (port == 0)
		return -EINVAL;
	proto_begin(b, PROTO_PORT_CONNECT);
	proto_put_u16(b, port);
	proto_put_u32(b, flags);
	return proto_end(b);
}

int proto_put_u32x2_msg(struct proto_buf *b, uint8_t type, uint32_t a, uint32_t c)
{
	proto_begin(b, type);
	proto_put_u32(b, a);
	proto_put_u32(b, c);
	return proto_end(b);
}

int proto_put_resize(struct proto_buf *b, uint16_t rows, uint16_t cols)
{
	proto_begin(b, PROTO_RESIZE);
	proto_put_u16(b, rows);
	proto_put_u16(b, cols);
	return proto_end(b);
}

int proto_put_set_time(struct proto_buf *b, int64_t unix_ns)
{
	proto_begin(b, PROTO_SET_TIME);
	proto_put_u64(b, (uint64_t)unix_ns);
	return proto_end(b);
}

int proto_put_path_op(struct proto_buf *b, uint8_t type, const char *path, const char *path2, uint32_t mode,
		      uint32_t flags)
{
	if (!path || !*path)
		return -EINVAL;
	proto_begin(b, type);
	put_strn(b, path, PROTO_MAX_PATH);
	put_strn(b, path2, PROTO_MAX_PATH);
	proto_put_u32(b, mode);
	proto_put_u32(b, flags);
	return proto_end(b);
}

int proto_put_err(struct proto_buf *b, int code, const char *fmt, ...)
{
	char msg[PROTO_MAX_ERRMSG + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	proto_begin(b, PROTO_ERR);
	if (code < 0)
		code = -code;
	proto_put_u32(b, (uint32_t)(code > 0 && code < 4096 ? code : EIO));
	put_strn(b, msg, PROTO_MAX_ERRMSG);
	return proto_end(b);
}

int proto_put_exit(struct proto_buf *b, const struct proto_exit *e, bool with_oom)
{
	proto_begin(b, PROTO_EXIT);
	proto_put_u8(b, e->exited);
	proto_put_u8(b, e->timed_out);
	proto_put_u32(b, (uint32_t)e->code);
	proto_put_u32(b, (uint32_t)e->signal);
	if (with_oom)
		proto_put_u8(b, e->oom_killed);
	return proto_end(b);
}

static void put_stat_fields(struct proto_buf *b, const struct proto_stat *st)
{
	proto_put_u32(b, st->mode);
	proto_put_u32(b, st->uid);
	proto_put_u32(b, st->gid);
	proto_put_u64(b, st->size);
	proto_put_u64(b, (uint64_t)st->mtime_ns);
}

int proto_put_stat(struct proto_buf *b, uint8_t type, const struct proto_stat *st)
{
	proto_begin(b, type);
	put_stat_fields(b, st);
	return proto_end(b);
}

int proto_put_dirent(struct proto_buf *b, const struct proto_dirent *d)
{
	proto_begin(b, PROTO_DIRENT);
	put_strn(b, d->name, PROTO_MAX_NAME);
	put_stat_fields(b, &d->st);
	return proto_end(b);
}

int proto_put_proc(struct proto_buf *b, uint32_t pid, const char *const *argv)
{
	proto_begin(b, PROTO_PROC);
	proto_put_u32(b, pid);
	proto_put_strv(b, argv);
	return proto_end(b);
}

/* ---- Decoding ---------------------------------------------------------------------------------- */

long proto_frame_parse(const uint8_t *buf, size_t avail, uint32_t max_payload, struct proto_frame *ret)
{
	if (avail < PROTO_HEADER_SIZE)
		return 0;
	uint32_t n = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24;
	if (n > max_payload || n > PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (avail - PROTO_HEADER_SIZE < n)
		return 0;
	ret->type = buf[4];
	ret->len = n;
	ret->payload = buf + PROTO_HEADER_SIZE;
	return (long)(PROTO_HEADER_SIZE + n);
}

/* A cursor over one payload; any overrun makes it bad and every later read returns zeroes. */
struct rd {
	const uint8_t *p;
	size_t len, off;
	bool bad;
};

static struct rd rd_of(const struct proto_frame *f) { return (struct rd){ f->payload, f->len, 0, false }; }

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	if (r->bad || r->len - r->off < n) {
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->p + r->off;
	r->off += n;
	return p;
}

static uint64_t rd_le(struct rd *r, unsigned n)
{
	const uint8_t *p = rd_take(r, n);
	uint64_t v = 0;
	for (unsigned i = 0; p && i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint8_t rd_u8(struct rd *r) { return (uint8_t)rd_le(r, 1); }
static uint16_t rd_u16(struct rd *r) { return (uint16_t)rd_le(r, 2); }
static uint32_t rd_u32(struct rd *r) { return (uint32_t)rd_le(r, 4); }
static uint64_t rd_u64(struct rd *r) { return rd_le(r, 8); }

/* A string of at most max bytes without NUL; returns a pointer into the payload and its length. */
static const char *rd_str(struct rd *r, size_t max, size_t *ret_len)
{
	uint32_t n = rd_u32(r);
	if (r->bad || n > max) {
		r->bad = true;
		return NULL;
	}
	const char *s = (const char *)rd_take(r, n);
	if (!s || memchr(s, '\0', n)) {
		r->bad = true;
		return NULL;
	}
	*ret_len = n;
	return s;
}

/* Copies a string field into a fixed array of max+1 bytes. */
static void rd_str_into(struct rd *r, char *dst, size_t max)
{
	size_t n = 0;
	const char *s = rd_str(r, max, &n);
	if (!s) {
		dst[0] = '\0';
		return;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static int rd_done(struct rd *r) { return r->bad || r->off != r->len ? -EBADMSG : 0; }

int proto_get_empty(const struct proto_frame *f) { return f->len == 0 ? 0 : -EBADMSG; }

int proto_get_hello(const struct proto_frame *f, struct proto_hello *ret)
{
	if (f->type != PROTO_HELLO)
		return -EBADMSG;
	struct rd r = rd_of(f);
	struct proto_hello h = { 0 };
	h.magic = rd_u32(&r);
	h.major = rd_u16(&r);
	h.minor = rd_u16(&r);
	h.max_payload = rd_u32(&r);
	h.caps = rd_u64(&r);
	rd_str_into(&r, h.version, PROTO_MAX_IDENT);
	rd_str_into(&r, h.hostname, PROTO_MAX_IDENT);
	if (rd_done(&r) < 0 || h.magic != PROTO_MAGIC)
		return -EBADMSG;
	*ret = h;
	return 0;
}

/*
 * Measures a string vector: count entries and the bytes they need with their NULs, validating each.
 * Leaves the cursor after the vector.
 */
static void rd_strv_measure(struct rd *r, size_t max_count, uint32_t *ret_n, size_t *ret_bytes)
{
	uint32_t n = rd_u32(r);
	size_t bytes = 0;
	if (n > max_count) {
		r->bad = true;
		return;
	}
	for (uint32_t i = 0; i < n && !r->bad; i++) {
		size_t l = 0;
		if (rd_str(r, PROTO_MAX_ARG_LEN, &l))
			bytes += l + 1;
	}
	*ret_n = n;
	*ret_bytes = bytes;
}

/* Copies a validated vector into ptrs[0..n] (NULL-terminated) and the string area at *area. */
static void rd_strv_copy(struct rd *r, char **ptrs, char **area)
{
	uint32_t n = rd_u32(r);
	for (uint32_t i = 0; i < n; i++) {
		size_t l = 0;
		const char *s = rd_str(r, PROTO_MAX_ARG_LEN, &l);
		memcpy(*area, s, l);
		(*area)[l] = '\0';
		ptrs[i] = *area;
		*area += l + 1;
	}
	ptrs[n] = NULL;
}

int proto_get_exec(const struct proto_frame *f, struct proto_exec **ret)
{
	if (f->type != PROTO_EXEC)
		return -EBADMSG;
	/* Pass 1 validates everything and sizes the single allocation; pass 2 copies. */
	struct rd r = rd_of(f);
	uint32_t argc = 0, envc = 0;
	size_t abytes = 0, ebytes = 0, cwdlen = 0;
	rd_strv_measure(&r, PROTO_MAX_ARGS, &argc, &abytes);
	rd_strv_measure(&r, PROTO_MAX_ARGS, &envc, &ebytes);
	const char *cwd = rd_str(&r, PROTO_MAX_PATH, &cwdlen);
	struct proto_exec x = { 0 };
	x.uid = rd_u32(&r);
	x.gid = rd_u32(&r);
	x.flags = rd_u32(&r);
	x.rows = rd_u16(&r);
	x.cols = rd_u16(&r);
	x.timeout_ms = rd_u32(&r);
	if (rd_done(&r) < 0 || argc == 0 || !cwd)
		return -EBADMSG;

	size_t size = sizeof(x) + (argc + 1 + envc + 1) * sizeof(char *) + abytes + ebytes + cwdlen + 1;
	struct proto_exec *out = malloc(size);
	if (!out)
		return -ENOMEM;
	*out = x;
	out->argv = (char **)(out + 1);
	out->env = out->argv + argc + 1;
	char *area = (char *)(out->env + envc + 1);
	r = rd_of(f);
	rd_strv_copy(&r, out->argv, &area);
	rd_strv_copy(&r, out->env, &area);
	if (cwdlen > 0) {
		memcpy(area, cwd, cwdlen);
		area[cwdlen] = '\0';
		out->cwd = area;
	}
	*ret = out;
	return 0;
}

int proto_get_u32(const struct proto_frame *f, uint32_t *ret)
{
	struct rd r = rd_of(f);
	uint32_t v = rd_u32(&r);
	if (rd_done(&r) < 0)
		return -EBADMSG;
	*ret = v;
	return 0;
}

int proto_get_u32x2(const struct proto_frame *f, uint32_t *ret_a, uint32_t *ret_b)
{
	struct rd r = rd_of(f);
	uint32_t a = rd_u32(&r), b = rd_u32(&r);
	if (rd_done(&r) < 0)
		return -EBADMSG;
	*ret_a = a;
	*ret_b = b;
	return 0;
}

int proto_get_resize(const struct proto_frame *f, uint16_t *ret_rows, uint16_t *ret_cols)
{
	struct rd r = rd_of(f);
	uint16_t rows = rd_u16(&r), cols = rd_u16(&r);
	if (f->type != PROTO_RESIZE || rd_done(&r) < 0)
		return -EBADMSG;
	*ret_rows = rows;
	*ret_cols = cols;
	return 0;
}

int proto_get_port_connect(const struct proto_frame *f, uint16_t *ret_port, uint32_t *ret_flags)
{
	struct rd r = rd_of(f);
	uint16_t port = rd_u16(&r);
	uint32_t flags = rd_u32(&r);
	if (f->type != PROTO_PORT_CONNECT || rd_done(&r) < 0 || port == 0)
		return -EBADMSG;
	*ret_port = port;
	*ret_flags = flags;
	return 0;
}

int proto_get_set_time(const struct proto_frame *f, int64_t *ret)
{
	struct rd r = rd_of(f);
	uint64_t v = rd_u64(&r);
	if (f->type != PROTO_SET_TIME || rd_done(&r) < 0)
		return -EBADMSG;
	*ret = (int64_t)v;
	return 0;
}

int proto_get_path_op(const struct proto_frame *f, struct proto_path_op *ret)
{
	struct rd r = rd_of(f);
	rd_str_into(&r, ret->path, PROTO_MAX_PATH);
	rd_str_into(&r, ret->path2, PROTO_MAX_PATH);
	ret->mode = rd_u32(&r);
	ret->flags = rd_u32(&r);
	if (rd_done(&r) < 0 || ret->path[0] == '\0')
		return -EBADMSG;
	if ((f->type == PROTO_RENAME) != (ret->path2[0] != '\0'))
		return -EBADMSG;
	return 0;
}

int proto_get_err(const struct proto_frame *f, struct proto_err *ret)
{
	struct rd r = rd_of(f);
	struct proto_err e;
	uint32_t code = rd_u32(&r);
	rd_str_into(&r, e.msg, PROTO_MAX_ERRMSG);
	/* errno values are small positive numbers; anything else is a lie. */
	if (f->type != PROTO_ERR || rd_done(&r) < 0 || code == 0 || code > 4095)
		return -EBADMSG;
	e.code = (int32_t)code;
	*ret = e;
	return 0;
}

int proto_get_exit(const struct proto_frame *f, struct proto_exit *ret)
{
	struct rd r = rd_of(f);
	uint8_t exited = rd_u8(&r), timed_out = rd_u8(&r);
	uint32_t code = rd_u32(&r), sig = rd_u32(&r);
	uint8_t oom = f->len > 10 ? rd_u8(&r) : 0; /* minor 5 added it */
	if (f->type != PROTO_EXIT || rd_done(&r) < 0 || exited > 1 || timed_out > 1 || code > 255 || sig > 64 ||
	    oom > 1)
		return -EBADMSG;
	*ret = (struct proto_exit){ .exited = exited, .timed_out = timed_out, .code = (int32_t)code,
				    .signal = (int32_t)sig, .oom_killed = oom };
	return 0;
}

static void rd_stat(struct rd *r, struct proto_stat *st)
{
	st->mode = rd_u32(r);
	st->uid = rd_u32(r);
	st->gid = rd_u32(r);
	st->size = rd_u64(r);
	st->mtime_ns = (int64_t)rd_u64(r);
}

int proto_get_stat(const struct proto_frame *f, struct proto_stat *ret)
{
	struct rd r = rd_of(f);
	struct proto_stat st;
	rd_stat(&r, &st);
	if (f->type != PROTO_STAT_REPLY || rd_done(&r) < 0)
		return -EBADMSG;
	*ret = st;
	return 0;
}

int proto_get_dirent(const struct proto_frame *f, struct proto_dirent *ret)
{
	struct rd r = rd_of(f);
	rd_str_into(&r, ret->name, PROTO_MAX_NAME);
	rd_stat(&r, &ret->st);
	if (f->type != PROTO_DIRENT || rd_done(&r) < 0 || ret->name[0] == '\0' || strchr(ret->name, '/'))
		return -EBADMSG;
	return 0;
}

int proto_get_proc(const struct proto_frame *f, struct proto_proc **ret)
{
	struct rd r = rd_of(f);
	uint32_t pid = rd_u32(&r), argc = 0;
	size_t bytes = 0;
	rd_strv_measure(&r, PROTO_MAX_ARGS, &argc, &bytes);
	if (f->type != PROTO_PROC || rd_done(&r) < 0)
		return -EBADMSG;
	struct proto_proc *p = malloc(sizeof(*p) + (argc + 1) * sizeof(char *) + bytes);
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->argv = (char **)(p + 1);
	char *area = (char *)(p->argv + argc + 1);
	r = rd_of(f);
	(void)rd_u32(&r);
	rd_strv_copy(&r, p->argv, &area);
	*ret = p;
	return 0;
}

const char *proto_type_name(uint8_t type)
{
	switch (type) {
	case PROTO_HELLO: return "HELLO";
	case PROTO_EXEC: return "EXEC";
	case PROTO_STDIN: return "STDIN";
	case PROTO_STDIN_EOF: return "STDIN_EOF";
	case PROTO_SIGNAL: return "SIGNAL";
	case PROTO_RESIZE: return "RESIZE";
	case PROTO_SIGNAL_PID: return "SIGNAL_PID";
	case PROTO_LIST_PROCS: return "LIST_PROCS";
	case PROTO_FILE_WRITE: return "FILE_WRITE";
	case PROTO_DATA: return "DATA";
	case PROTO_END: return "END";
	case PROTO_FILE_READ: return "FILE_READ";
	case PROTO_STAT: return "STAT";
	case PROTO_LIST_DIR: return "LIST_DIR";
	case PROTO_MKDIR: return "MKDIR";
	case PROTO_REMOVE: return "REMOVE";
	case PROTO_RENAME: return "RENAME";
	case PROTO_SYNC: return "SYNC";
	case PROTO_SET_TIME: return "SET_TIME";
	case PROTO_RESEED: return "RESEED";
	case PROTO_SHUTDOWN: return "SHUTDOWN";
	case PROTO_SET_LIFETIME: return "SET_LIFETIME";
	case PROTO_SET_HOSTNAME: return "SET_HOSTNAME";
	case PROTO_TETHER: return "TETHER";
	case PROTO_PORT_CONNECT: return "PORT_CONNECT";
	case PROTO_OK: return "OK";
	case PROTO_ERR: return "ERR";
	case PROTO_STARTED: return "STARTED";
	case PROTO_STDOUT: return "STDOUT";
	case PROTO_STDERR: return "STDERR";
	case PROTO_EXIT: return "EXIT";
	case PROTO_STAT_REPLY: return "STAT_REPLY";
	case PROTO_DIRENT: return "DIRENT";
	case PROTO_PROC: return "PROC";
	default: return "?";
	}
}
