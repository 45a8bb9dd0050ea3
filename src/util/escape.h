/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Escaping of sandbox-made text before it reaches a terminal, a log line or JSON.
 *
 * Anything a sandbox can influence (DNS names, SNI, Host headers, command output shown by `space logs`,
 * event details) may carry terminal control sequences: ESC ] 0 ; ... BEL retitles the operator's terminal,
 * CSI sequences move the cursor or hide text. These helpers make such bytes visible and inert.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Copies in[0..len) to out (capacity outlen, always NUL-terminated when outlen > 0) with every C0 control
 * byte (0x00-0x1f) except the ones allowed by flags, DEL (0x7f), every C1 control (U+0080..U+009F, in
 * UTF-8 or as raw 0x80..0x9f bytes), and every byte that is not part of valid UTF-8 written as \xHH.
 * A backslash is written as "\\" so the output is unambiguous. Valid UTF-8 outside those ranges is kept.
 * Stops early (never splitting an escape) when out is full. Returns the number of input bytes consumed.
 */
#define UTIL_ESC_KEEP_NL 1u  /* keep '\n' */
#define UTIL_ESC_KEEP_TAB 2u /* keep '\t' */
size_t util_escape_text(char *out, size_t outlen, const char *in, size_t len, unsigned flags);

/* Malloc'd escaped copy of a NUL-terminated string (NULL only on allocation failure). */
char *util_escape_dup(const char *s, unsigned flags);

/* Whether in[0..len) is valid UTF-8 with no C0 (but \n, \t), DEL or C1 control: safe to print as is. */
bool util_text_is_safe(const char *in, size_t len);

/*
 * Malloc'd copy of in[0..len) that is valid UTF-8: each byte of an invalid sequence becomes U+FFFD.
 * For JSON strings (cJSON writes bytes as given, and a JSON document must be UTF-8). Control characters
 * are left to the JSON encoder, which escapes them as \uXXXX.
 */
char *util_utf8_sanitize(const char *in, size_t len);
