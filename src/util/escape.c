/* SPDX-License-Identifier: Apache-2.0 */
#include "util/escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes there are not one. Rejects
 * overlong forms, surrogates and code points above U+10FFFF. Writes the code point to *cp. */
static size_t utf8_seq(const unsigned char *s, size_t len, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return n;
}

static bool cp_is_control(uint32_t cp, unsigned flags)
{
	if (cp == '\n')
		return !(flags & UTIL_ESC_KEEP_NL);
	if (cp == '\t')
		return !(flags & UTIL_ESC_KEEP_TAB);
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

size_t util_escape_text(char *out, size_t outlen, const char *in, size_t len, unsigned flags)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0;
	if (outlen == 0)
		return 0;
	while (i < len) {
		uint32_t cp = 0;
		size_t n = utf8_seq(s + i, len - i, &cp);
		if (n == 1 && cp == '\\' && !(flags & UTIL_ESC_KEEP_BACKSLASH)) {
			if (o + 2 >= outlen)
				break;
			out[o++] = '\\', out[o++] = '\\';
		} else if (n == 0 || cp_is_control(cp, flags)) {
			/* escape every byte of the sequence (or the single bad byte) */
			size_t m = n ? n : 1;
			if (o + 4 * m >= outlen)
				break;
			for (size_t k = 0; k < m; k++) {
				out[o++] = '\\', out[o++] = 'x';
				out[o++] = hex[s[i + k] >> 4], out[o++] = hex[s[i + k] & 15];
			}
			n = m;
		} else {
			if (o + n >= outlen)
				break;
			memcpy(out + o, s + i, n);
			o += n;
		}
		i += n;
	}
	out[o] = '\0';
	return i;
}

char *util_escape_dup(const char *s, unsigned flags)
{
	size_t len = strlen(s);
	if (len > (SIZE_MAX - 1) / 4)
		return NULL;
	char *out = malloc(4 * len + 1);
	if (out)
		util_escape_text(out, 4 * len + 1, s, len, flags);
	return out;
}

bool util_text_is_safe(const char *in, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_seq(s + i, len - i, &cp);
		if (n == 0 || cp_is_control(cp, UTIL_ESC_KEEP_NL | UTIL_ESC_KEEP_TAB))
			return false;
		i += n;
	}
	return true;
}

void util_text_one_line(const char *in, char *out, size_t outlen)
{
	size_t n = strlen(in);
	if (!util_text_is_safe(in, n) || memchr(in, '\n', n) || memchr(in, '\t', n)) {
		util_escape_text(out, outlen, in, n, 0);
		return;
	}
	if (n >= outlen) {
		n = outlen - 1;
		while (n > 0 && ((unsigned char)in[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(out, in, n);
	out[n] = '\0';
}

char *util_utf8_sanitize(const char *in, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(3 * len + 1), *o = out; /* U+FFFD is 3 bytes, replacing 1 */
	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_seq(s + i, len - i, &cp);
		if (n == 0 || s[i] == 0) {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else {
			memcpy(o, s + i, n);
			o += n;
			i += n;
		}
	}
	*o = '\0';
	return out;
}

/* One pass of util_json_terminal_safe: writes to out when non-NULL; returns the output length. */
static size_t json_safe_pass(const unsigned char *s, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_seq(s + i, len - i, &cp);
		if (n == 0 || s[i] == 0) {
			if (out)
				memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else if (cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
			if (out) {
				memcpy(out + o, "\\u00", 4);
				out[o + 4] = hex[cp >> 4], out[o + 5] = hex[cp & 15];
			}
			o += 6;
			i += n;
		} else {
			if (out)
				memcpy(out + o, s + i, n);
			o += n;
			i += n;
		}
	}
	return o;
}

char *util_json_terminal_safe(const char *json, size_t len)
{
	const unsigned char *s = (const unsigned char *)json;
	if (len > (SIZE_MAX - 1) / 6)
		return NULL;
	/* Sized exactly (server answers can be large): each byte becomes at most 6. */
	size_t n = json_safe_pass(s, len, NULL);
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	json_safe_pass(s, len, out);
	out[n] = '\0';
	return out;
}

/* Whether the second byte b of a sequence led by lead is in range (overlong, surrogate, > U+10FFFF). */
static bool second_ok(unsigned char lead, unsigned char b)
{
	switch (lead) {
	case 0xe0: return b >= 0xa0 && b <= 0xbf;
	case 0xed: return b >= 0x80 && b <= 0x9f;
	case 0xf0: return b >= 0x90 && b <= 0xbf;
	case 0xf4: return b >= 0x80 && b <= 0x8f;
	default: return (b & 0xc0) == 0x80;
	}
}

size_t util_utf8_partial_tail(const char *in, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	for (size_t k = 1; k <= 3 && k <= len; k++) {
		unsigned char lead = s[len - k];
		size_t need = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3
			    : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
		if (need == 0) {
			if ((lead & 0xc0) == 0x80)
				continue; /* a continuation byte: the lead may be further back */
			return 0;
		}
		if (need <= k)
			return 0; /* complete (valid or not): nothing to wait for */
		if (k >= 2 && !second_ok(lead, s[len - k + 1]))
			return 0;
		for (size_t i = 2; i < k; i++)
			if ((s[len - k + i] & 0xc0) != 0x80)
				return 0;
		return k;
	}
	return 0;
}
