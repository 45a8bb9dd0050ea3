/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Escaping of sandbox-made text (src/util/escape.h) on arbitrary bytes. Properties, each a trap when it
 * fails: util_escape_text's output is valid UTF-8 with no C0 (but the kept \n/\t), DEL or C1, and decodes
 * back to exactly the input; a smaller output buffer gives a prefix made of whole escapes of the bytes it
 * consumed; escaping chunk by chunk with util_utf8_partial_tail gives the same as escaping the whole;
 * util_text_is_safe agrees with "escaping changes nothing"; util_utf8_sanitize gives valid UTF-8 without
 * NUL that equals the input when the input was valid UTF-8 without NUL.
 * The first byte picks the flags (bits 0-2), an output cap (3-4) and a chunk size (5-7); the rest is the
 * text.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/escape.h"
#include "../../unit/util/escape_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_IN 4096

static void fuzz_assert(bool cond)
{
	if (!cond)
		__builtin_trap();
}

static void check_safe(const char *s, unsigned flags)
{
	fuzz_assert(terminal_safe(s, flags));
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes "\\\\" and "\\xHH" (lower-case hex, as written); traps on anything else after a backslash. */
static size_t unescape(const char *s, char *dst)
{
	size_t o = 0;
	for (size_t i = 0; s[i];) {
		if (s[i] != '\\') {
			dst[o++] = s[i++];
		} else if (s[i + 1] == '\\') {
			dst[o++] = '\\';
			i += 2;
		} else {
			fuzz_assert(s[i + 1] == 'x' && s[i + 2] && s[i + 3]);
			int hi = hexval(s[i + 2]), lo = hexval(s[i + 3]);
			fuzz_assert(hi >= 0 && lo >= 0);
			dst[o++] = (char)(hi << 4 | lo);
			i += 4;
		}
	}
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned flags = data[0] & 7, cap_sel = (data[0] >> 3) & 3, step = ((data[0] >> 5) & 7) + 1;
	const char *in = (const char *)data + 1;
	size_t len = size - 1 > MAX_IN ? MAX_IN : size - 1;
	static char full[4 * MAX_IN + 1], cut[4 * MAX_IN + 1], back[MAX_IN + 1], again[4 * MAX_IN + 1];

	/* Whole: safe, and exactly reversible (with backslashes kept: when there are none). */
	size_t used = util_escape_text(full, sizeof(full), in, len, flags);
	fuzz_assert(used == len);
	check_safe(full, flags);
	if (!(flags & UTIL_ESC_KEEP_BACKSLASH) || !memchr(in, '\\', len))
		fuzz_assert(unescape(full, back) == len && !memcmp(back, in, len));
	/* "Safe to print as is" means escaping (keeping \n and \t) changes nothing, backslashes aside. */
	if (!memchr(in, '\\', len)) {
		util_escape_text(again, sizeof(again), in, len, UTIL_ESC_KEEP_NL | UTIL_ESC_KEEP_TAB);
		fuzz_assert(util_text_is_safe(in, len) == (strlen(again) == len && !memcmp(again, in, len)));
	}

	/* Cut short: whole escapes of a prefix. */
	size_t cap = cap_sel == 0 ? 1 : (size_t)cap_sel * 11;
	size_t u2 = util_escape_text(cut, cap, in, len, flags);
	fuzz_assert(u2 <= len && strlen(cut) < cap);
	util_escape_text(again, sizeof(again), in, u2, flags);
	fuzz_assert(!strcmp(again, cut));

	/* In chunks, holding back partial UTF-8 sequences. */
	size_t jl = 0, nc = 0;
	char carry[4];
	for (size_t off = 0; off < len; off += step) {
		char chunk[16];
		size_t n = len - off < step ? len - off : step;
		memcpy(chunk, carry, nc);
		memcpy(chunk + nc, in + off, n);
		n += nc;
		nc = off + step >= len ? 0 : util_utf8_partial_tail(chunk, n);
		fuzz_assert(nc <= 3 && nc <= n);
		char part[64];
		fuzz_assert(util_escape_text(part, sizeof(part), chunk, n - nc, flags) == n - nc);
		memcpy(carry, chunk + n - nc, nc);
		size_t pl = strlen(part);
		memcpy(again + jl, part, pl);
		jl += pl;
	}
	again[jl] = '\0';
	fuzz_assert(!strcmp(again, full));

	/* For JSON. */
	char *z = util_utf8_sanitize(in, len);
	fuzz_assert(z != NULL);
	size_t zl = strlen(z);
	fuzz_assert(valid_utf8((const unsigned char *)z, zl));
	if (valid_utf8((const unsigned char *)in, len) && !memchr(in, '\0', len))
		fuzz_assert(zl == len && !memcmp(z, in, len));
	/* As a JSON string, printed and made terminal-safe: the same string back, nothing raw. */
	cJSON *j = cJSON_CreateString(z);
	char *printed = j ? cJSON_PrintUnformatted(j) : NULL;
	char *safe = printed ? util_json_terminal_safe(printed, strlen(printed)) : NULL;
	fuzz_assert(safe != NULL);
	check_safe(safe, 0);
	cJSON *parsed = cJSON_Parse(safe);
	fuzz_assert(parsed && cJSON_IsString(parsed) && !strcmp(parsed->valuestring, z));
	cJSON_Delete(parsed);
	free(safe);
	free(printed);
	cJSON_Delete(j);
	/* And on the raw bytes as a "document": valid UTF-8, no raw DEL or C1, whatever came in. */
	safe = util_json_terminal_safe(in, len);
	fuzz_assert(safe != NULL && valid_utf8((const unsigned char *)safe, strlen(safe)));
	for (const unsigned char *p = (const unsigned char *)safe; *p; p++)
		fuzz_assert(*p != 0x7f && !(p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f));
	free(safe);
	free(z);
	return 0;
}
