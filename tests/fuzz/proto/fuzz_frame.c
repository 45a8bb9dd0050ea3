/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's view of hostile client bytes: a stream of frames, each fed to every decoder (with its own
 * type and with the type each decoder expects). Whatever decodes must re-encode to the same meaning.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_exec_roundtrip(const struct proto_exec *x)
{
	struct proto_buf b = { 0 };
	if (proto_put_exec(&b, (const char *const *)x->argv, (const char *const *)x->env, x->cwd, x->uid, x->gid,
			   x->flags, x->rows, x->cols, x->timeout_ms) < 0)
		abort(); /* everything the decoder accepts is within the encoder's limits */
	struct proto_frame f;
	struct proto_exec *y = NULL;
	if (proto_frame_parse(b.data, b.len, PROTO_MAX_PAYLOAD, &f) <= 0 || proto_get_exec(&f, &y) < 0)
		abort();
	for (size_t i = 0; x->argv[i] || y->argv[i]; i++)
		if (!x->argv[i] || !y->argv[i] || strcmp(x->argv[i], y->argv[i]) != 0)
			abort();
	if ((x->cwd == NULL) != (y->cwd == NULL) || x->timeout_ms != y->timeout_ms)
		abort();
	free(y);
	proto_buf_free(&b);
}

static void decode_all(const struct proto_frame *f)
{
	struct proto_hello h;
	struct proto_exec *x = NULL;
	static struct proto_path_op op;
	struct proto_err e;
	struct proto_exit ex;
	struct proto_stat st;
	static struct proto_dirent d;
	struct proto_proc *p = NULL;
	uint32_t a, b;
	uint16_t r, c;
	int64_t t;

	(void)proto_get_hello(f, &h);
	if (proto_get_exec(f, &x) == 0) {
		check_exec_roundtrip(x);
		free(x);
	}
	(void)proto_get_path_op(f, &op);
	(void)proto_get_err(f, &e);
	(void)proto_get_exit(f, &ex);
	(void)proto_get_stat(f, &st);
	(void)proto_get_dirent(f, &d);
	if (proto_get_proc(f, &p) == 0)
		free(p);
	(void)proto_get_u32(f, &a);
	(void)proto_get_u32x2(f, &a, &b);
	(void)proto_get_resize(f, &r, &c);
	(void)proto_get_set_time(f, &t);
	if (proto_get_port_connect(f, &r, &a) == 0 && r == 0)
		abort(); /* port 0 never decodes */
	(void)proto_get_empty(f);
	(void)proto_type_name(f->type);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t types[] = { PROTO_HELLO, PROTO_EXEC, PROTO_RENAME, PROTO_ERR, PROTO_EXIT,
					 PROTO_STAT_REPLY, PROTO_DIRENT, PROTO_PROC, PROTO_RESIZE, PROTO_SET_TIME,
					 PROTO_PORT_CONNECT };
	size_t off = 0;
	while (off < size) {
		struct proto_frame f;
		long n = proto_frame_parse(data + off, size - off, PROTO_MAX_PAYLOAD, &f);
		if (n <= 0)
			break;
		off += (size_t)n;
		decode_all(&f);
		for (size_t i = 0; i < sizeof(types); i++) {
			struct proto_frame g = f;
			g.type = types[i];
			decode_all(&g);
		}
	}
	return 0;
}
