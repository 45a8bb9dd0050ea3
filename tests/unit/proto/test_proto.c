/* SPDX-License-Identifier: Apache-2.0 */
/* Agent protocol codec: round trips, every limit, truncated and oversized frames. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

static int failures;

#define CHECK(cond)                                                                                      \
	do {                                                                                             \
		if (!(cond)) {                                                                           \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
			failures++;                                                                      \
		}                                                                                        \
	} while (0)

/* Parses the single frame b holds. */
static struct proto_frame only_frame(const struct proto_buf *b)
{
	struct proto_frame f = { 0 };
	long n = proto_frame_parse(b->data + b->head, proto_buf_pending(b), PROTO_MAX_PAYLOAD, &f);
	CHECK(n > 0 && (size_t)n == proto_buf_pending(b));
	return f;
}

typedef int (*decode_fn)(const struct proto_frame *f);

/* Every strict prefix of the payload and one extra trailing byte must be rejected. */
static void check_truncations(const struct proto_frame *f, decode_fn decode)
{
	for (uint32_t n = 0; n < f->len; n++) {
		struct proto_frame t = *f;
		t.len = n;
		CHECK(decode(&t) < 0);
	}
	uint8_t *longer = malloc(f->len + 1);
	memcpy(longer, f->payload, f->len);
	longer[f->len] = 0;
	struct proto_frame t = { f->type, f->len + 1, longer };
	CHECK(decode(&t) < 0);
	free(longer);
}

static int dec_exec(const struct proto_frame *f)
{
	struct proto_exec *x = NULL;
	int r = proto_get_exec(f, &x);
	free(x);
	return r;
}
static int dec_hello(const struct proto_frame *f)
{
	struct proto_hello h;
	return proto_get_hello(f, &h);
}
static int dec_path(const struct proto_frame *f)
{
	static struct proto_path_op op;
	return proto_get_path_op(f, &op);
}
static int dec_err(const struct proto_frame *f)
{
	struct proto_err e;
	return proto_get_err(f, &e);
}
static int dec_exit(const struct proto_frame *f)
{
	struct proto_exit e;
	return proto_get_exit(f, &e);
}
static int dec_dirent(const struct proto_frame *f)
{
	struct proto_dirent d;
	return proto_get_dirent(f, &d);
}
static int dec_proc(const struct proto_frame *f)
{
	struct proto_proc *p = NULL;
	int r = proto_get_proc(f, &p);
	free(p);
	return r;
}

/* A NUL-terminated string of n 'x' (caller frees). */
static char *filled(size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		abort();
	memset(p, 'x', n);
	p[n] = '\0';
	return p;
}

/* Ends the hand-built frame in b, checks that decode rejects it, empties b. */
static void check_rejected(struct proto_buf *b, decode_fn decode)
{
	CHECK(proto_end(b) == 0);
	struct proto_frame f = only_frame(b);
	CHECK(decode(&f) == -EBADMSG);
	proto_buf_free(b);
}

static void test_frame_parse(void)
{
	struct proto_frame f;
	uint8_t hdr[PROTO_HEADER_SIZE + 3] = { 3, 0, 0, 0, PROTO_STDOUT, 'a', 'b', 'c' };
	for (size_t n = 0; n < sizeof(hdr); n++)
		CHECK(proto_frame_parse(hdr, n, PROTO_MAX_PAYLOAD, &f) == 0);
	CHECK(proto_frame_parse(hdr, sizeof(hdr), PROTO_MAX_PAYLOAD, &f) == (long)sizeof(hdr));
	CHECK(f.type == PROTO_STDOUT && f.len == 3 && memcmp(f.payload, "abc", 3) == 0);
	/* Oversized: rejected from the header alone, before any payload arrives. */
	uint8_t big[PROTO_HEADER_SIZE] = { 0x01, 0x00, 0x10, 0x00, PROTO_DATA }; /* 1 MiB + 1 */
	CHECK(proto_frame_parse(big, sizeof(big), PROTO_MAX_PAYLOAD, &f) == -EMSGSIZE);
	uint8_t ff[PROTO_HEADER_SIZE] = { 0xff, 0xff, 0xff, 0xff, PROTO_DATA };
	CHECK(proto_frame_parse(ff, sizeof(ff), PROTO_MAX_PAYLOAD, &f) == -EMSGSIZE);
	CHECK(proto_frame_parse(hdr, sizeof(hdr), 2, &f) == -EMSGSIZE); /* a smaller negotiated bound */
}

static void test_buf(void)
{
	struct proto_buf b = { 0 };
	/* Exactly the maximum payload is fine; one byte more fails and leaves earlier frames intact. */
	uint8_t *data = calloc(1, PROTO_MAX_PAYLOAD + 1);
	CHECK(proto_put_empty(&b, PROTO_OK) == 0);
	CHECK(proto_put_bytes(&b, PROTO_DATA, data, PROTO_MAX_PAYLOAD) == 0);
	size_t before = proto_buf_pending(&b);
	CHECK(proto_put_bytes(&b, PROTO_DATA, data, PROTO_MAX_PAYLOAD + 1) == -EMSGSIZE);
	CHECK(proto_buf_pending(&b) == before);
	CHECK(proto_put_empty(&b, PROTO_END) == 0);
	struct proto_frame f;
	long n = proto_frame_parse(b.data + b.head, proto_buf_pending(&b), PROTO_MAX_PAYLOAD, &f);
	CHECK(n == PROTO_HEADER_SIZE && f.type == PROTO_OK);
	proto_buf_consume(&b, (size_t)n);
	n = proto_frame_parse(b.data + b.head, proto_buf_pending(&b), PROTO_MAX_PAYLOAD, &f);
	CHECK(n == PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD && f.type == PROTO_DATA);
	proto_buf_consume(&b, (size_t)n);
	n = proto_frame_parse(b.data + b.head, proto_buf_pending(&b), PROTO_MAX_PAYLOAD, &f);
	CHECK(n == PROTO_HEADER_SIZE && f.type == PROTO_END);
	proto_buf_consume(&b, (size_t)n);
	CHECK(proto_buf_pending(&b) == 0);
	proto_buf_free(&b);
	free(data);
}

static void test_hello(void)
{
	struct proto_buf b = { 0 };
	struct proto_hello h = { .magic = PROTO_MAGIC, .major = 1, .minor = 7, .max_payload = 4096, .caps = 5 };
	strcpy(h.version, "space-agent 0.1.0");
	strcpy(h.hostname, "box");
	CHECK(proto_put_hello(&b, &h) == 0);
	struct proto_frame f = only_frame(&b);
	struct proto_hello g;
	CHECK(proto_get_hello(&f, &g) == 0);
	CHECK(g.major == 1 && g.minor == 7 && g.max_payload == 4096 && g.caps == 5);
	CHECK(strcmp(g.version, h.version) == 0 && strcmp(g.hostname, "box") == 0);
	check_truncations(&f, dec_hello);
	/* Wrong magic */
	uint8_t *p = (uint8_t *)f.payload;
	p[0] ^= 1;
	CHECK(proto_get_hello(&f, &g) == -EBADMSG);
	proto_buf_free(&b);
	/* An identifier of exactly its bound is fine, one byte more is refused by the decoder. */
	struct proto_hello lng = h;
	memset(lng.hostname, 'x', PROTO_MAX_IDENT);
	lng.hostname[PROTO_MAX_IDENT] = '\0';
	CHECK(proto_put_hello(&b, &lng) == 0);
	f = only_frame(&b);
	CHECK(proto_get_hello(&f, &g) == 0 && strlen(g.hostname) == PROTO_MAX_IDENT);
	proto_buf_free(&b);
	char *name65 = filled(PROTO_MAX_IDENT + 1);
	proto_begin(&b, PROTO_HELLO);
	proto_put_u32(&b, PROTO_MAGIC);
	proto_put_u16(&b, 1);
	proto_put_u16(&b, 0);
	proto_put_u32(&b, PROTO_MAX_PAYLOAD);
	proto_put_u64(&b, 0);
	proto_put_str(&b, "v");
	proto_put_str(&b, name65);
	check_rejected(&b, dec_hello);
	free(name65);
}

static void test_exec(void)
{
	struct proto_buf b = { 0 };
	const char *argv[] = { "sh", "-c", "echo hi", NULL };
	const char *env[] = { "A=1", NULL };
	CHECK(proto_put_exec(&b, argv, env, "/tmp", 1000, 1001, PROTO_EXEC_PTY, 24, 80, 5000) == 0);
	struct proto_frame f = only_frame(&b);
	struct proto_exec *x = NULL;
	CHECK(proto_get_exec(&f, &x) == 0);
	CHECK(x && strcmp(x->argv[0], "sh") == 0 && strcmp(x->argv[2], "echo hi") == 0 && !x->argv[3]);
	CHECK(strcmp(x->env[0], "A=1") == 0 && !x->env[1]);
	CHECK(strcmp(x->cwd, "/tmp") == 0 && x->uid == 1000 && x->gid == 1001);
	CHECK(x->flags == PROTO_EXEC_PTY && x->rows == 24 && x->cols == 80 && x->timeout_ms == 5000);
	free(x);
	check_truncations(&f, dec_exec);
	proto_buf_free(&b);

	/* No env, no cwd */
	CHECK(proto_put_exec(&b, argv, NULL, NULL, 0, 0, 0, 0, 0, 0) == 0);
	f = only_frame(&b);
	CHECK(proto_get_exec(&f, &x) == 0 && !x->env[0] && !x->cwd);
	free(x);
	proto_buf_free(&b);

	/* Empty argv: refused by encoder and decoder */
	const char *none[] = { NULL };
	CHECK(proto_put_exec(&b, none, NULL, NULL, 0, 0, 0, 0, 0, 0) == -EINVAL);
	proto_begin(&b, PROTO_EXEC);
	proto_put_strv(&b, none);
	proto_put_strv(&b, none);
	proto_put_str(&b, "");
	for (int i = 0; i < 5; i++)
		proto_put_u32(&b, 0);
	check_rejected(&b, dec_exec);

	/* Too many arguments */
	const char **many = calloc(PROTO_MAX_ARGS + 2, sizeof(char *));
	for (size_t i = 0; i < PROTO_MAX_ARGS + 1; i++)
		many[i] = "x";
	CHECK(proto_put_exec(&b, many, NULL, NULL, 0, 0, 0, 0, 0, 0) == -EMSGSIZE);
	CHECK(proto_buf_pending(&b) == 0);
	many[PROTO_MAX_ARGS] = NULL;
	CHECK(proto_put_exec(&b, many, NULL, NULL, 0, 0, 0, 0, 0, 0) == 0);
	proto_buf_free(&b);
	/* ... and a count that lies, decoded */
	proto_begin(&b, PROTO_EXEC);
	proto_put_u32(&b, PROTO_MAX_ARGS + 1);
	check_rejected(&b, dec_exec);
	free(many);

	/* One argument too long */
	char *longarg = malloc(PROTO_MAX_ARG_LEN + 2);
	memset(longarg, 'a', PROTO_MAX_ARG_LEN + 1);
	longarg[PROTO_MAX_ARG_LEN + 1] = '\0';
	const char *la[] = { longarg, NULL };
	CHECK(proto_put_exec(&b, la, NULL, NULL, 0, 0, 0, 0, 0, 0) == -EMSGSIZE);
	longarg[PROTO_MAX_ARG_LEN] = '\0';
	CHECK(proto_put_exec(&b, la, NULL, NULL, 0, 0, 0, 0, 0, 0) == 0);
	f = only_frame(&b);
	CHECK(proto_get_exec(&f, &x) == 0 && strlen(x->argv[0]) == PROTO_MAX_ARG_LEN);
	free(x);
	proto_buf_free(&b);
	free(longarg);

	/* NUL inside a string */
	proto_begin(&b, PROTO_EXEC);
	proto_put_u32(&b, 1);
	proto_put_u32(&b, 3);
	proto_put_raw(&b, "a\0b", 3);
	proto_put_u32(&b, 0);
	proto_put_u32(&b, 0);
	for (int i = 0; i < 5; i++)
		proto_put_u32(&b, 0);
	check_rejected(&b, dec_exec);
}

static void test_path_ops(void)
{
	struct proto_buf b = { 0 };
	struct proto_path_op op;
	CHECK(proto_put_path_op(&b, PROTO_RENAME, "/a", "/b", 0, 0) == 0);
	struct proto_frame f = only_frame(&b);
	CHECK(proto_get_path_op(&f, &op) == 0 && strcmp(op.path, "/a") == 0 && strcmp(op.path2, "/b") == 0);
	check_truncations(&f, dec_path);
	proto_buf_free(&b);
	/* RENAME needs a target; others must not carry one */
	CHECK(proto_put_path_op(&b, PROTO_RENAME, "/a", NULL, 0, 0) == 0);
	f = only_frame(&b);
	CHECK(proto_get_path_op(&f, &op) == -EBADMSG);
	proto_buf_free(&b);
	CHECK(proto_put_path_op(&b, PROTO_STAT, "/a", "/b", 0, 0) == 0);
	f = only_frame(&b);
	CHECK(proto_get_path_op(&f, &op) == -EBADMSG);
	proto_buf_free(&b);
	CHECK(proto_put_path_op(&b, PROTO_MKDIR, "", NULL, 0, 0) == -EINVAL);
	/* PATH_MAX */
	char *p = malloc(PROTO_MAX_PATH + 2);
	memset(p, 'a', PROTO_MAX_PATH + 1);
	p[PROTO_MAX_PATH + 1] = '\0';
	CHECK(proto_put_path_op(&b, PROTO_STAT, p, NULL, 0, 0) == -EMSGSIZE);
	p[PROTO_MAX_PATH] = '\0';
	CHECK(proto_put_path_op(&b, PROTO_FILE_WRITE, p, NULL, 0644, PROTO_F_MKDIR_P) == 0);
	f = only_frame(&b);
	CHECK(proto_get_path_op(&f, &op) == 0 && strlen(op.path) == PROTO_MAX_PATH && op.mode == 0644 &&
	      op.flags == PROTO_F_MKDIR_P);
	proto_buf_free(&b);
	/* A hand-made path one byte over the limit */
	proto_begin(&b, PROTO_STAT);
	proto_put_u32(&b, PROTO_MAX_PATH + 1);
	p[PROTO_MAX_PATH] = 'a';
	proto_put_raw(&b, p, PROTO_MAX_PATH + 1);
	proto_put_u32(&b, 0);
	proto_put_u32(&b, 0);
	proto_put_u32(&b, 0);
	check_rejected(&b, dec_path);
	free(p);
}

static void test_replies(void)
{
	struct proto_buf b = { 0 };
	struct proto_frame f;

	CHECK(proto_put_err(&b, -ENOENT, "open %s: nope", "/x") == 0);
	f = only_frame(&b);
	struct proto_err e;
	CHECK(proto_get_err(&f, &e) == 0 && e.code == ENOENT && strcmp(e.msg, "open /x: nope") == 0);
	check_truncations(&f, dec_err);
	proto_buf_free(&b);
	/* Long messages are cut to the bound by the encoder */
	char lng[1000];
	memset(lng, 'm', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	CHECK(proto_put_err(&b, EIO, "%s", lng) == 0);
	f = only_frame(&b);
	CHECK(proto_get_err(&f, &e) == 0 && strlen(e.msg) == PROTO_MAX_ERRMSG);
	proto_buf_free(&b);
	/* errno 0 or absurd values are refused */
	proto_begin(&b, PROTO_ERR);
	proto_put_u32(&b, 0);
	proto_put_str(&b, "x");
	check_rejected(&b, dec_err);

	struct proto_exit x = { .exited = false, .signal = 9, .timed_out = true }, y;
	CHECK(proto_put_exit(&b, &x, true) == 0);
	f = only_frame(&b);
	CHECK(proto_get_exit(&f, &y) == 0 && !y.exited && y.signal == 9 && y.timed_out && !y.oom_killed);
	for (uint32_t n = 0; n < 10; n++) { /* 10 bytes is an older agent's EXIT (below) */
		struct proto_frame t = f;
		t.len = n;
		CHECK(dec_exit(&t) < 0);
	}
	uint8_t longer[12] = { 0 };
	memcpy(longer, f.payload, 11);
	CHECK(dec_exit(&(struct proto_frame){ PROTO_EXIT, 12, longer }) < 0);
	proto_buf_free(&b);
	/* minor 5 added the trailing oom byte: an older agent's 10-byte EXIT still decodes, as not OOM */
	x = (struct proto_exit){ .signal = 9, .oom_killed = true };
	CHECK(proto_put_exit(&b, &x, true) == 0);
	f = only_frame(&b);
	CHECK(f.len == 11 && proto_get_exit(&f, &y) == 0 && y.signal == 9 && y.oom_killed);
	f.len = 10;
	CHECK(proto_get_exit(&f, &y) == 0 && y.signal == 9 && !y.oom_killed);
	proto_buf_free(&b);
	CHECK(proto_put_exit(&b, &x, false) == 0); /* to a client older than minor 5 */
	f = only_frame(&b);
	CHECK(f.len == 10 && proto_get_exit(&f, &y) == 0 && !y.oom_killed);
	proto_buf_free(&b);
	proto_begin(&b, PROTO_EXIT);
	proto_put_u8(&b, 0);
	proto_put_u8(&b, 0);
	proto_put_u32(&b, 0);
	proto_put_u32(&b, 9);
	proto_put_u8(&b, 2); /* a flag is 0 or 1 */
	check_rejected(&b, dec_exit);
	x = (struct proto_exit){ .exited = true, .code = 256 };
	CHECK(proto_put_exit(&b, &x, true) == 0);
	f = only_frame(&b);
	CHECK(proto_get_exit(&f, &y) == -EBADMSG);
	proto_buf_free(&b);

	struct proto_dirent d = { .st = { .mode = 0100644, .size = 12, .mtime_ns = -5 } }, d2;
	strcpy(d.name, "file.txt");
	CHECK(proto_put_dirent(&b, &d) == 0);
	f = only_frame(&b);
	CHECK(proto_get_dirent(&f, &d2) == 0 && strcmp(d2.name, "file.txt") == 0 && d2.st.size == 12 &&
	      d2.st.mtime_ns == -5 && d2.st.mode == 0100644);
	check_truncations(&f, dec_dirent);
	proto_buf_free(&b);
	strcpy(d.name, "a/b");
	CHECK(proto_put_dirent(&b, &d) == 0);
	f = only_frame(&b);
	CHECK(proto_get_dirent(&f, &d2) == -EBADMSG);
	proto_buf_free(&b);
	/* A name one byte over NAME_MAX */
	char *name256 = filled(PROTO_MAX_NAME + 1);
	proto_begin(&b, PROTO_DIRENT);
	proto_put_str(&b, name256);
	proto_put_raw(&b, (uint8_t[28]){ 0 }, 28);
	check_rejected(&b, dec_dirent);
	free(name256);
	/* A PROC whose argv count lies */
	proto_begin(&b, PROTO_PROC);
	proto_put_u32(&b, 1);
	proto_put_u32(&b, PROTO_MAX_ARGS + 1);
	check_rejected(&b, dec_proc);

	const char *argv[] = { "sleep", "100", NULL };
	CHECK(proto_put_proc(&b, 42, argv) == 0);
	f = only_frame(&b);
	struct proto_proc *p = NULL;
	CHECK(proto_get_proc(&f, &p) == 0 && p->pid == 42 && strcmp(p->argv[1], "100") == 0 && !p->argv[2]);
	free(p);
	check_truncations(&f, dec_proc);
	proto_buf_free(&b);

	uint32_t u, v;
	uint16_t r, c;
	int64_t t;
	CHECK(proto_put_u32x2_msg(&b, PROTO_SIGNAL_PID, 7, 15) == 0);
	f = only_frame(&b);
	CHECK(proto_get_u32x2(&f, &u, &v) == 0 && u == 7 && v == 15);
	CHECK(proto_get_u32(&f, &u) == -EBADMSG);
	proto_buf_free(&b);
	CHECK(proto_put_resize(&b, 50, 132) == 0);
	f = only_frame(&b);
	CHECK(proto_get_resize(&f, &r, &c) == 0 && r == 50 && c == 132);
	proto_buf_free(&b);
	CHECK(proto_put_set_time(&b, 1700000000123456789ll) == 0);
	f = only_frame(&b);
	CHECK(proto_get_set_time(&f, &t) == 0 && t == 1700000000123456789ll);
	proto_buf_free(&b);
	struct proto_stat st = { .mode = 040755, .uid = 1, .gid = 2, .size = 1ull << 40, .mtime_ns = 3 }, st2;
	CHECK(proto_put_stat(&b, PROTO_STAT_REPLY, &st) == 0);
	f = only_frame(&b);
	CHECK(proto_get_stat(&f, &st2) == 0 && st2.mode == st.mode && st2.uid == 1 && st2.gid == 2 &&
	      st2.size == st.size && st2.mtime_ns == 3);
	proto_buf_free(&b);
	CHECK(strcmp(proto_type_name(PROTO_EXEC), "EXEC") == 0 && strcmp(proto_type_name(0xee), "?") == 0);
}

static int dec_port(const struct proto_frame *f)
{
	uint16_t port;
	uint32_t flags;
	return proto_get_port_connect(f, &port, &flags);
}

/* PORT_CONNECT (minor 4): round trip, port 0 refused both ways, truncations, the wrong type. */
static void test_port_connect(void)
{
	struct proto_buf b = { 0 };
	struct proto_frame f;
	uint16_t port = 0;
	uint32_t flags = 1;
	CHECK(proto_put_port_connect(&b, 8000, 0) == 0);
	f = only_frame(&b);
	CHECK(f.type == PROTO_PORT_CONNECT && f.len == 6);
	CHECK(proto_get_port_connect(&f, &port, &flags) == 0 && port == 8000 && flags == 0);
	check_truncations(&f, dec_port);
	struct proto_frame g = f;
	g.type = PROTO_TETHER;
	CHECK(dec_port(&g) == -EBADMSG);
	proto_buf_free(&b);
	CHECK(proto_put_port_connect(&b, 65535, 7) == 0);
	f = only_frame(&b);
	CHECK(proto_get_port_connect(&f, &port, &flags) == 0 && port == 65535 && flags == 7);
	proto_buf_free(&b);
	CHECK(proto_put_port_connect(&b, 0, 0) == -EINVAL);
	proto_buf_free(&b);
	uint8_t zero[6] = { 0, 0, 0, 0, 0, 0 };
	f = (struct proto_frame){ .type = PROTO_PORT_CONNECT, .len = 6, .payload = zero };
	port = 1;
	CHECK(proto_get_port_connect(&f, &port, &flags) == -EBADMSG && port == 1);
	CHECK(strcmp(proto_type_name(PROTO_PORT_CONNECT), "PORT_CONNECT") == 0);
	CHECK(PROTO_VERSION_MINOR >= 4 && (PROTO_CAP_PORT & (PROTO_CAP_PTY | PROTO_CAP_RESEED | PROTO_CAP_SET_TIME |
							     PROTO_CAP_VSOCK | PROTO_CAP_LIFETIME | PROTO_CAP_HOSTNAME |
							     PROTO_CAP_TETHER)) == 0);
}

int main(void)
{
	test_frame_parse();
	test_buf();
	test_hello();
	test_exec();
	test_path_ops();
	test_replies();
	test_port_connect();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("proto: all checks passed\n");
	return 0;
}
