/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A chunked HTTP/1.1 body (RFC 9112 7.1), decoded as its bytes come: the answers of a cluster host on a
 * kept connection (serve_ports.c) and a server's answer to `space template push|pull`. Strict: sizes are
 * 1..16 hex digits, every line ends in CRLF, a size line or a trailer line is at most
 * HTTP_CHUNKED_LINE_MAX bytes; anything else is -EBADMSG. Fuzzed (tests/fuzz/server/fuzz_http_chunked.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define HTTP_CHUNKED_LINE_MAX 256

struct http_chunked {
	int state;
	unsigned long long left;  /* data bytes of the current chunk still to come */
	unsigned digits, line;
	bool done;                /* the last chunk and the trailer were read: the body is whole */
};
#define HTTP_CHUNKED_INIT { 0 }

/* Decodes in[0..in_len): the data goes to out (out_cap bytes at most; out may be in itself, trailing it,
 * to decode in place). *used: the input bytes taken; *made: the data bytes written. Stops at the body's
 * end (c->done), leaving any bytes after it, or when out is full. 0, or -EBADMSG when the body is not
 * well formed (c is then of no further use). */
int http_chunked_feed(struct http_chunked *c, const char *in, size_t in_len, char *out, size_t out_cap, size_t *used,
		      size_t *made);
