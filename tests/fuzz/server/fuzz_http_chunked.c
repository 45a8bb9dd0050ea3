/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A chunked HTTP/1.1 body as http_chunked_feed decodes it: any bytes, fed whole and again in pieces (the
 * first byte picks the pieces' and the output room's sizes). Both feedings agree: the same data, the same
 * end, the same refusal; no feed takes more than it was given or writes more than its room; the data is
 * never longer than the input, and decoded in place it comes out the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_chunked.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_assert(int cond)
{
	if (!cond)
		__builtin_trap();
}

struct result {
	char *out;
	size_t len, taken;
	int err;
	int done;
};

/* Feeds in in pieces of piece bytes (0: whole) with out room of room bytes a call (0: all of it). */
static struct result decode(const char *in, size_t size, size_t piece, size_t room)
{
	struct result r = { .out = malloc(size + 1) };
	struct http_chunked c = HTTP_CHUNKED_INIT;
	size_t off = 0;
	while (r.out && off < size && !c.done) {
		size_t n = piece && piece < size - off ? piece : size - off;
		size_t cap = room ? room : size;
		size_t used, made;
		int e = http_chunked_feed(&c, in + off, n, r.out + r.len, cap, &used, &made);
		fuzz_assert(used <= n && made <= cap && made <= used);
		off += used;
		r.len += made;
		if (e < 0) {
			r.err = e;
			break;
		}
		if (!used && !made) /* room full is impossible here: no progress means the piece ended */
			fuzz_assert(n == 0);
	}
	r.taken = off;
	r.done = c.done;
	fuzz_assert(r.len <= size);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = (data[0] & 0x0f) + 1, room = (data[0] >> 4) + 1;
	const char *in = (const char *)data + 1;
	size--;
	struct result whole = decode(in, size, 0, 0), parts = decode(in, size, piece, room);
	if (whole.out && parts.out) {
		fuzz_assert(whole.err == parts.err && whole.done == parts.done);
		if (!whole.err) {
			fuzz_assert(whole.len == parts.len && !memcmp(whole.out, parts.out, whole.len));
			fuzz_assert(whole.taken == parts.taken);
		}
		/* in place, as the CLI decodes an answer */
		char *copy = malloc(size + 1);
		if (copy && size) {
			memcpy(copy, in, size);
			struct http_chunked c = HTTP_CHUNKED_INIT;
			size_t used, made;
			int e = http_chunked_feed(&c, copy, size, copy, size, &used, &made);
			fuzz_assert(e == whole.err && c.done == whole.done);
			if (!e)
				fuzz_assert(made == whole.len && !memcmp(copy, whole.out, made));
		}
		free(copy);
	}
	free(whole.out);
	free(parts.out);
	return 0;
}
