/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: a user's entry in a sandbox's /etc/passwd. The file is the sandbox's (hostile): each line
 * is taken alone, a line past PASSWD_LINE_MAX or with a NUL is skipped, and so is one whose fields do not
 * parse (seven fields, decimal ids, an absolute home without control bytes that fits).
 * tests/fuzz/server/fuzz_passwd.c feeds it arbitrary files.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "serve_e2b.h"

#define PASSWD_LINE_MAX 1024

/* A decimal id in [0, UINT32_MAX - 1] (-1 is "no id" to the kernel). */
static bool id_parse(const char *s, size_t n, uint32_t *ret)
{
	uint64_t v = 0;
	if (!n || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v >= UINT32_MAX)
		return false;
	*ret = (uint32_t)v;
	return true;
}

/* One passwd line (n bytes, no newline) for name: fills u and returns true. */
static bool line_match(const char *line, size_t n, const char *name, struct e2b_user *u)
{
	const char *f[7];
	size_t len[7];
	size_t k = 0, start = 0;
	for (size_t i = 0; i <= n && k < 7; i++)
		if (i == n || line[i] == ':') {
			f[k] = line + start;
			len[k++] = i - start;
			start = i + 1;
		}
	if (k != 7 || len[0] != strlen(name) || memcmp(f[0], name, len[0]))
		return false;
	uint32_t uid, gid;
	/* The home must be an absolute path we can print and join (no NUL, no control bytes). */
	if (!id_parse(f[2], len[2], &uid) || !id_parse(f[3], len[3], &gid) || !len[5] || f[5][0] != '/' ||
	    len[5] >= sizeof(u->home))
		return false;
	for (size_t i = 0; i < len[5]; i++)
		if ((unsigned char)f[5][i] < 0x20 || f[5][i] == 0x7f)
			return false;
	u->uid = uid;
	u->gid = gid;
	memcpy(u->home, f[5], len[5]);
	u->home[len[5]] = '\0';
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->given = true;
	return true;
}

int e2b_passwd_find(const char *buf, size_t len, const char *name, struct e2b_user *ret)
{
	struct e2b_user u = { 0 };
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(buf + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (buf + i)) : len - i;
		if (n <= PASSWD_LINE_MAX && !memchr(buf + i, '\0', n) && line_match(buf + i, n, name, &u)) {
			*ret = u;
			return 0;
		}
		i += n + 1;
	}
	return -ENOENT;
}
