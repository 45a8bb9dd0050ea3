/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Escaping of sandbox-made text (src/util/escape.h): every class of byte a terminal or a JSON reader could
 * be hurt by, the ones that must pass unchanged, output that is always safe and can be decoded back to the
 * input exactly, truncation that never splits an escape, and streaming across chunk cuts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/escape.h"
#include "../../check.h"
#include "escape_oracle.h"


static char out[8192];

static const char *esc(const char *in, size_t len, unsigned flags)
{
	size_t used = util_escape_text(out, sizeof(out), in, len, flags);
	CHECK(used == len);
	return out;
}
#define ESC(lit, flags) esc(lit, sizeof(lit) - 1, flags)

/* Decodes util_escape_text's output ("\\\\" and "\\xHH"); -1 for anything else after a backslash. */
static long unescape(const char *s, char *dst)
{
	size_t o = 0;
	for (size_t i = 0; s[i];) {
		if (s[i] != '\\') {
			dst[o++] = s[i++];
			continue;
		}
		if (s[i + 1] == '\\') {
			dst[o++] = '\\';
			i += 2;
			continue;
		}
		unsigned v;
		if (s[i + 1] != 'x' || sscanf(s + i + 2, "%2x", &v) != 1 || !s[i + 2] || !s[i + 3])
			return -1;
		dst[o++] = (char)v;
		i += 4;
	}
	return (long)o;
}

static void test_c0_del(void)
{
	for (int c = 0; c < 0x20; c++) {
		char in[3] = { 'a', (char)c, 'b' }, want[8];
		snprintf(want, sizeof(want), "a\\x%02xb", c);
		CHECK(!strcmp(esc(in, 3, 0), want));
		bool kept = (c == '\n') || (c == '\t');
		const char *e = esc(in, 3, UTIL_ESC_KEEP_NL | UTIL_ESC_KEEP_TAB);
		CHECK(kept ? (e[1] == c && strlen(e) == 3) : !strcmp(e, want));
		CHECK(util_text_is_safe(in, 3) == kept);
	}
	CHECK(!strcmp(ESC("\n", UTIL_ESC_KEEP_TAB), "\\x0a"));
	CHECK(!strcmp(ESC("\t", UTIL_ESC_KEEP_NL), "\\x09"));
	CHECK(!strcmp(ESC("x\x7fy", 0), "x\\x7fy"));
	CHECK(!util_text_is_safe("\x7f", 1));
	/* The attack of issue 14: an OSC title change. */
	CHECK(!strcmp(ESC("\x1b]0;PWNED\x07", 0), "\\x1b]0;PWNED\\x07"));
	CHECK(!strcmp(ESC("\x1b[2J\x1b[H", 0), "\\x1b[2J\\x1b[H"));
}

static void test_c1(void)
{
	for (int c = 0x80; c <= 0x9f; c++) {
		/* As UTF-8 (U+0080..U+009F): both bytes escaped. */
		char in[2] = { (char)0xc2, (char)c }, want[16];
		snprintf(want, sizeof(want), "\\xc2\\x%02x", c);
		CHECK(!strcmp(esc(in, 2, 0), want));
		CHECK(!util_text_is_safe(in, 2));
		/* As a raw byte (8-bit CSI 0x9b and friends): not UTF-8 at all. */
		char raw[1] = { (char)c };
		snprintf(want, sizeof(want), "\\x%02x", c);
		CHECK(!strcmp(esc(raw, 1, 0), want));
		CHECK(!util_text_is_safe(raw, 1));
	}
	/* U+00A0, the first code point after C1, is text. */
	CHECK(!strcmp(ESC("\xc2\xa0", 0), "\xc2\xa0"));
	CHECK(util_text_is_safe("\xc2\xa0", 2));
}

static void test_invalid_utf8(void)
{
	static const struct {
		const char *in;
		size_t len;
		const char *want;
	} cases[] = {
		{ "\xc0\x80", 2, "\\xc0\\x80" },                 /* overlong NUL */
		{ "\xc1\xbf", 2, "\\xc1\\xbf" },                 /* overlong DEL */
		{ "\xe0\x80\x80", 3, "\\xe0\\x80\\x80" },        /* overlong 3-byte */
		{ "\xe0\x9f\xbf", 3, "\\xe0\\x9f\\xbf" },        /* overlong U+07FF */
		{ "\xf0\x80\x80\x80", 4, "\\xf0\\x80\\x80\\x80" }, /* overlong 4-byte */
		{ "\xf0\x8f\xbf\xbf", 4, "\\xf0\\x8f\\xbf\\xbf" }, /* overlong U+FFFF */
		{ "\xed\xa0\x80", 3, "\\xed\\xa0\\x80" },        /* surrogate U+D800 */
		{ "\xed\xbf\xbf", 3, "\\xed\\xbf\\xbf" },        /* surrogate U+DFFF */
		{ "\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80" }, /* U+110000 */
		{ "\xf5\x80\x80\x80", 4, "\\xf5\\x80\\x80\\x80" },
		{ "\xff", 1, "\\xff" },
		{ "\xfe", 1, "\\xfe" },
		{ "\xe2\x82", 2, "\\xe2\\x82" },                 /* truncated */
		{ "\xe2\x82x", 3, "\\xe2\\x82x" },               /* interrupted */
		{ "\xbf", 1, "\\xbf" },                          /* lone continuation */
		{ "\xc3", 1, "\\xc3" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(!strcmp(esc(cases[i].in, cases[i].len, 0), cases[i].want));
		CHECK(!util_text_is_safe(cases[i].in, cases[i].len));
	}
	/* Valid UTF-8 of every length is kept, boundaries included. */
	static const char *const ok[] = { "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xed\x9f\xbf",
					  "\xee\x80\x80", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK(!strcmp(esc(ok[i], strlen(ok[i]), 0), ok[i]));
		CHECK(util_text_is_safe(ok[i], strlen(ok[i])));
	}
}

static void test_backslash(void)
{
	CHECK(!strcmp(ESC("a\\b", 0), "a\\\\b"));
	/* A sandbox cannot forge an escape: its literal "\x1b" comes out distinct from a real ESC. */
	CHECK(!strcmp(ESC("\\x1b", 0), "\\\\x1b"));
	CHECK(!strcmp(ESC("\x1b", 0), "\\x1b")); /* the real one: one backslash */
	CHECK(util_text_is_safe("\\", 1)); /* safe to print as is; escaping it is for unambiguity */
	/* For people: backslashes stay, so text escaped upstream (the gateway's) is not escaped twice. */
	CHECK(!strcmp(ESC("dns \\x1b]0;t\\x07.test", UTIL_ESC_KEEP_BACKSLASH), "dns \\x1b]0;t\\x07.test"));
	CHECK(!strcmp(ESC("C:\\dir \x1b[2J", UTIL_ESC_KEEP_BACKSLASH), "C:\\dir \\x1b[2J"));
}

/* Every cut of the output buffer gives a prefix made of whole escapes of a prefix of the input. */
static void test_truncation(void)
{
	static const char in[] = "ok\x1b]0;t\x07\\\xc2\x85\xe4\xb8\xad\xff\xf0\x9f\x98\x80 end";
	char full[256], cut[256], back[256];
	util_escape_text(full, sizeof(full), in, sizeof(in) - 1, 0);
	for (size_t cap = 1; cap <= strlen(full) + 1; cap++) {
		memset(cut, 'Z', sizeof(cut));
		size_t used = util_escape_text(cut, cap, in, sizeof(in) - 1, 0);
		size_t n = strlen(cut);
		CHECK(n < cap);
		CHECK(!strncmp(cut, full, n));
		/* What was written is exactly the escape of what was consumed. */
		char again[256];
		util_escape_text(again, sizeof(again), in, used, 0);
		CHECK(!strcmp(again, cut));
		CHECK(unescape(cut, back) == (long)used && !memcmp(back, in, used));
	}
	CHECK(util_escape_text(cut, 0, in, 3, 0) == 0);
	CHECK(util_escape_text(cut, 1, in, 3, 0) == 0 && cut[0] == '\0');
}

/* Random bytes: the output is always safe, and decodes back to the input exactly. */
static void test_roundtrip_random(void)
{
	uint32_t x = 12345;
	char in[512], back[512];
	static char big[4 * 512 + 1];
	for (int round = 0; round < 3000; round++) {
		size_t len = (size_t)(round % 500);
		for (size_t i = 0; i < len; i++) {
			x = x * 1103515245u + 12345u;
			/* Biased towards the interesting bytes. */
			unsigned v = (x >> 16) & 0xff;
			in[i] = (char)((x & 3) == 0 ? (v & 0x1f) : (x & 3) == 1 ? (0x80 | (v & 0x7f)) : v);
		}
		for (unsigned flags = 0; flags < 8; flags++) {
			size_t used = util_escape_text(big, sizeof(big), in, len, flags);
			CHECK(used == len);
			CHECK(terminal_safe(big, flags));
			if (!(flags & UTIL_ESC_KEEP_BACKSLASH) || !memchr(in, '\\', len))
				CHECK(unescape(big, back) == (long)len && !memcmp(back, in, len));
		}
		char *z = util_utf8_sanitize(in, len);
		CHECK(z && valid_utf8((const unsigned char *)z, strlen(z)));
		free(z);
	}
}

static void test_dup_and_sanitize(void)
{
	char *e = util_escape_dup("t\x1b[31m\xff", 0);
	CHECK(e && !strcmp(e, "t\\x1b[31m\\xff"));
	free(e);
	char *z = util_utf8_sanitize("a\xff" "b\xc0\x80" "c\xe4\xb8\xad", 9);
	CHECK(z && !strcmp(z, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xe4\xb8\xad"));
	free(z);
	/* A NUL would cut the C string short and hide what follows it. */
	z = util_utf8_sanitize("a\0b", 3);
	CHECK(z && !strcmp(z, "a\xef\xbf\xbd" "b"));
	free(z);
	/* Control characters are the JSON encoder's job: kept. */
	z = util_utf8_sanitize("\x1b]0;x\x07", 6);
	CHECK(z && !strcmp(z, "\x1b]0;x\x07"));
	free(z);
	z = util_utf8_sanitize("", 0);
	CHECK(z && !*z);
	free(z);
}

static void test_partial_tail(void)
{
	CHECK(util_utf8_partial_tail("abc", 3) == 0);
	CHECK(util_utf8_partial_tail("", 0) == 0);
	CHECK(util_utf8_partial_tail("a\xe4", 2) == 1);
	CHECK(util_utf8_partial_tail("a\xe4\xb8", 3) == 2);
	CHECK(util_utf8_partial_tail("a\xe4\xb8\xad", 4) == 0);  /* complete */
	CHECK(util_utf8_partial_tail("\xf0\x9f\x98", 3) == 3);
	CHECK(util_utf8_partial_tail("\xf0\x9f", 2) == 2);
	CHECK(util_utf8_partial_tail("\xc3", 1) == 1);
	CHECK(util_utf8_partial_tail("\xe0\x80", 2) == 0);        /* already overlong: invalid, not partial */
	CHECK(util_utf8_partial_tail("\xed\xa0", 2) == 0);        /* surrogate */
	CHECK(util_utf8_partial_tail("\xf4\x90", 2) == 0);        /* beyond U+10FFFF */
	CHECK(util_utf8_partial_tail("\xf5", 1) == 0);
	CHECK(util_utf8_partial_tail("\x80\x80\x80", 3) == 0);    /* no lead */
	CHECK(util_utf8_partial_tail("\xe4\x41", 2) == 0);        /* interrupted */
	/* Streaming with held-back tails gives what escaping the whole gives, at every cut. */
	static const char in[] = "x\xe4\xb8\xad\xf0\x9f\x98\x80\x1b\xc2\x85\xe2\x82 \xc3";
	size_t len = sizeof(in) - 1;
	char whole[256];
	util_escape_text(whole, sizeof(whole), in, len, 0);
	for (size_t step = 1; step <= len; step++) {
		char joined[256] = "", carry[4];
		size_t nc = 0;
		for (size_t off = 0; off < len; off += step) {
			char chunk[64];
			size_t n = len - off < step ? len - off : step;
			memcpy(chunk, carry, nc);
			memcpy(chunk + nc, in + off, n);
			n += nc;
			bool last = off + step >= len;
			nc = last ? 0 : util_utf8_partial_tail(chunk, n);
			char part[256];
			util_escape_text(part, sizeof(part), chunk, n - nc, 0);
			memcpy(carry, chunk + n - nc, nc);
			strcat(joined, part);
		}
		CHECK(!strcmp(joined, whole));
	}
}

/* Printed JSON made terminal-safe means the same document, with no raw DEL/C1 and only valid UTF-8. */
static void test_json_terminal_safe(void)
{
	static const char raw[] = "a\x7f b\xc2\x9b[31m c\x1b]0;t\x07 d\xe4\xb8\xad e\xc2\xa0";
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "detail", raw);
	char *printed = cJSON_PrintUnformatted(j);
	char *safe = util_json_terminal_safe(printed, strlen(printed));
	CHECK(safe && terminal_safe(safe, 0));
	CHECK(safe && strstr(safe, "\\u007f") && strstr(safe, "\\u009b") && strstr(safe, "\\u001b"));
	cJSON *back = safe ? cJSON_Parse(safe) : NULL;
	const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(back, "detail"));
	CHECK(d && !strcmp(d, raw)); /* the same string */
	cJSON_Delete(back);
	free(safe);
	free(printed);
	cJSON_Delete(j);
	/* A string nobody sanitized: invalid bytes become U+FFFD, the document stays JSON. */
	static const char bad[] = "{\"x\":\"\xff\xc0\x80\"}";
	safe = util_json_terminal_safe(bad, sizeof(bad) - 1);
	CHECK(safe && !strcmp(safe, "{\"x\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}"));
	back = safe ? cJSON_Parse(safe) : NULL;
	CHECK(back != NULL);
	cJSON_Delete(back);
	free(safe);
}

int main(void)
{
	test_c0_del();
	test_c1();
	test_invalid_utf8();
	test_backslash();
	test_truncation();
	test_roundtrip_random();
	test_dup_and_sanitize();
	test_partial_tail();
	test_json_terminal_safe();
	return check_summary("escape");
}
