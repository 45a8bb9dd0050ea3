/* SPDX-License-Identifier: Apache-2.0 */
/* A chunked HTTP/1.1 body, decoded as its bytes come (http_chunked.h). */
#include <errno.h>
#include <string.h>

#include "http_chunked.h"

enum {
	ST_SIZE = 0,   /* hex digits of a chunk's size */
	ST_EXT,        /* a chunk extension, up to CR */
	ST_SIZE_LF,    /* the LF of a size line */
	ST_DATA,
	ST_DATA_CR,    /* the CRLF after a chunk's data */
	ST_DATA_LF,
	ST_TRAILER,    /* a trailer line (or the empty line that ends the body) */
	ST_TRAILER_LF,
	ST_END_LF,     /* the LF of the empty line */
	ST_BAD,
};

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int http_chunked_feed(struct http_chunked *c, const char *in, size_t in_len, char *out, size_t out_cap, size_t *used,
		      size_t *made)
{
	size_t i = 0, o = 0;
	while (i < in_len && !c->done && c->state != ST_BAD) {
		if (c->state == ST_DATA) {
			if (o == out_cap)
				break;
			size_t k = in_len - i < out_cap - o ? in_len - i : out_cap - o;
			if (k > c->left)
				k = (size_t)c->left;
			memmove(out + o, in + i, k);
			i += k;
			o += k;
			if (!(c->left -= k))
				c->state = ST_DATA_CR;
			continue;
		}
		char ch = in[i++];
		if (++c->line > HTTP_CHUNKED_LINE_MAX) { /* a size or trailer line (with its CRLF), too long */
			c->state = ST_BAD;
			break;
		}
		switch (c->state) {
		case ST_SIZE: {
			int v = hexval(ch);
			if (v >= 0 && c->digits < 16) {
				c->left = c->left * 16 + (unsigned)v;
				c->digits++;
			} else if (c->digits && (ch == ';' || ch == ' ' || ch == '\t')) {
				c->state = ST_EXT;
			} else if (c->digits && ch == '\r') {
				c->state = ST_SIZE_LF;
			} else {
				c->state = ST_BAD;
			}
			break;
		}
		case ST_EXT:
			if (ch == '\r')
				c->state = ST_SIZE_LF;
			else if (ch == '\n')
				c->state = ST_BAD;
			break;
		case ST_SIZE_LF:
			c->line = 0;
			c->state = ch != '\n' ? ST_BAD : c->left ? ST_DATA : ST_TRAILER;
			break;
		case ST_DATA_CR:
			c->state = ch == '\r' ? ST_DATA_LF : ST_BAD;
			break;
		case ST_DATA_LF:
			c->state = ch == '\n' ? ST_SIZE : ST_BAD;
			c->line = c->digits = 0;
			break;
		case ST_TRAILER:
			if (ch == '\r')
				c->state = c->line == 1 ? ST_END_LF : ST_TRAILER_LF;
			else if (ch == '\n')
				c->state = ST_BAD;
			break;
		case ST_TRAILER_LF:
			c->state = ch == '\n' ? ST_TRAILER : ST_BAD;
			c->line = 0;
			break;
		case ST_END_LF:
			if (ch == '\n')
				c->done = true;
			else
				c->state = ST_BAD;
			break;
		default:
			c->state = ST_BAD;
		}
	}
	*used = i;
	*made = o;
	return c->state == ST_BAD ? -EBADMSG : 0;
}
