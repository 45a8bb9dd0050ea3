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
 * A backslash is written as "\\" so the output is unambiguous, unless UTIL_ESC_KEEP_BACKSLASH. Valid UTF-8
 * outside those ranges is kept. Stops early (never splitting an escape) when out is full. Returns the
 * number of input bytes consumed.
 */
#define UTIL_ESC_KEEP_NL 1u  /* keep '\n' */
#define UTIL_ESC_KEEP_TAB 2u /* keep '\t' */
/* Keep '\' as is. For showing text to people (`space events`, `space logs`): what matters there is that
 * nothing acts on the terminal; text escaped upstream (the gateway writes "\x1b") is not escaped twice,
 * and a literal "\x1b" a sandbox wrote looks like the escape of an ESC, which is harmless. */
#define UTIL_ESC_KEEP_BACKSLASH 4u
size_t util_escape_text(char *out, size_t outlen, const char *in, size_t len, unsigned flags);

/* Malloc'd escaped copy of a NUL-terminated string (NULL only on allocation failure). */
char *util_escape_dup(const char *s, unsigned flags);

/* Whether in[0..len) is valid UTF-8 with no C0 (but \n, \t), DEL or C1 control: safe to print as is. */
bool util_text_is_safe(const char *in, size_t len);

/*
 * in as one line of text for a log or an event, into out (outlen > 0, always NUL-terminated): kept as is
 * when it is printable UTF-8 without a newline or tab (cut on a character boundary to fit), escaped whole
 * with util_escape_text() otherwise, so a line can never forge another.
 */
void util_text_one_line(const char *in, char *out, size_t outlen);

/*
 * Malloc'd copy of in[0..len) that is valid UTF-8: each byte of an invalid sequence becomes U+FFFD, and
 * so does a NUL byte (the copy is a C string: a NUL would silently cut off the rest). For JSON strings
 * (cJSON writes bytes as given, and a JSON document must be UTF-8). Other control characters are left
 * to the JSON encoder, which escapes them as \uXXXX. NULL only on allocation failure.
 */
char *util_utf8_sanitize(const char *in, size_t len);

/*
 * Malloc'd copy of a printed JSON document (json[0..len), as cJSON writes it: structure in ASCII, strings
 * in UTF-8) that a terminal can show: DEL and the C1 controls U+0080..U+009F, which JSON allows raw in
 * strings and some terminals act on, become \u007f and \u0080..\u009f; a byte that is not valid UTF-8
 * (a string nobody sanitized) becomes U+FFFD. The document means the same. NULL only on allocation failure.
 */
char *util_json_terminal_safe(const char *json, size_t len);

/*
 * For callers that escape a stream chunk by chunk: how many bytes at the end of in[0..len) (0..3) begin a
 * UTF-8 sequence that the next bytes could still complete. Hold them back and prepend them to the next
 * chunk; at the end of the stream, escape them as they are (they are invalid then).
 */
size_t util_utf8_partial_tail(const char *in, size_t len);
