/* SPDX-License-Identifier: Apache-2.0 */
/* The escaping tests' oracle (test_escape.c, fuzz_escape.c): what "safe to show" means, written apart
 * from src/util/escape.c so that a bug there is not repeated here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "util/escape.h"

/* Independent UTF-8 validator (RFC 3629 table 2), not the code under test. */
static bool valid_utf8(const unsigned char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		size_t n;
		unsigned char lo = 0x80, hi = 0xbf;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 2;
		else if (c == 0xe0)
			n = 3, lo = 0xa0;
		else if (c == 0xed)
			n = 3, hi = 0x9f;
		else if (c >= 0xe1 && c <= 0xef)
			n = 3;
		else if (c == 0xf0)
			n = 4, lo = 0x90;
		else if (c == 0xf4)
			n = 4, hi = 0x8f;
		else if (c >= 0xf1 && c <= 0xf3)
			n = 4;
		else
			return false;
		if (i + n > len || s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t k = 2; k < n; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
		i += n;
	}
	return true;
}

/* No byte a terminal acts on: no C0 but the kept ones, no DEL, no C1 (raw or encoded), valid UTF-8. */
static bool terminal_safe(const char *s, unsigned flags)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strlen(s);
	if (!valid_utf8(u, len))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (u[i] == '\n' && (flags & UTIL_ESC_KEEP_NL))
			continue;
		if (u[i] == '\t' && (flags & UTIL_ESC_KEEP_TAB))
			continue;
		if (u[i] < 0x20 || u[i] == 0x7f)
			return false;
		if (u[i] == 0xc2 && i + 1 < len && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f)
			return false;
	}
	return true;
}
