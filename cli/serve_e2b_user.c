/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: the `user` of an envd request (the SDK's `user` option). The SDK names it in an
 * "Authorization: Basic base64(USER:)" header (process and filesystem calls) or in ?username= (/files);
 * it is looked up in the sandbox's own /etc/passwd. That file is made by the sandbox, so it is read with
 * a cap, line by line with a cap on a line, and a line that does not parse is skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define PASSWD_MAX (1u << 20) /* bytes of /etc/passwd read */
#define PASSWD_LINE_MAX 1024  /* a longer line is skipped */

/* A user name we take from a caller: what useradd accepts, without the oddities a message or a path
 * would have to guard against. */
static bool name_ok(const char *s, size_t n)
{
	if (!n || n > E2B_USER_NAME_MAX || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

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

int e2b_user_lookup(space_sandbox *sb, const char *name, struct e2b_user *ret)
{
	if (!name_ok(name, strlen(name)))
		return -EINVAL;
	_cleanup_close_ int fd = memfd_create("passwd", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct space_read_options o = SPACE_READ_OPTIONS_INIT;
	o.max_bytes = PASSWD_MAX;
	int e = space_sandbox_read_file_v2(sb, "/etc/passwd", fd, &o, NULL);
	if (e == -ENOENT)
		return -ENOENT;
	if (e < 0)
		return e;
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return -errno;
	if (size == 0)
		return -ENOENT;
	_cleanup_free_ char *buf = malloc((size_t)size);
	if (!buf)
		return -ENOMEM;
	if (pread(fd, buf, (size_t)size, 0) != size)
		return -EIO;
	struct e2b_user u = { 0 };
	for (size_t i = 0; i < (size_t)size;) {
		const char *nl = memchr(buf + i, '\n', (size_t)size - i);
		size_t n = nl ? (size_t)(nl - (buf + i)) : (size_t)size - i;
		if (n <= PASSWD_LINE_MAX && !memchr(buf + i, '\0', n) && line_match(buf + i, n, name, &u)) {
			*ret = u;
			return 0;
		}
		i += n + 1;
	}
	return -ENOENT;
}

/* The user name of an "Authorization: Basic base64(USER:PASSWORD)" header into out; false when there is
 * none or it does not parse. */
static bool basic_user(const char *h, char *out, size_t size)
{
	if (!h || strncasecmp(h, "Basic ", 6))
		return false;
	h += 6;
	while (*h == ' ')
		h++;
	if (strlen(h) > 4 * E2B_USER_NAME_MAX)
		return false;
	_cleanup_free_ unsigned char *dec = NULL;
	size_t len;
	if (e2b_base64_decode(h, &dec, &len) < 0)
		return false;
	const unsigned char *colon = memchr(dec, ':', len);
	size_t n = colon ? (size_t)(colon - dec) : len;
	if (n >= size)
		return false;
	memcpy(out, dec, n);
	out[n] = '\0';
	return true;
}

int e2b_request_user(struct serve_req *r, space_sandbox *sb, struct e2b_user *ret, char *err, size_t errlen)
{
	struct e2b_user u = { .uid = 0, .gid = 0, .home = E2B_HOME, .name = "root" };
	char name[E2B_USER_NAME_MAX + 1];
	const char *q = serve_query(r, "username");
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
	int e;
	if (q && *q && strcmp(q, "undefined")) {
		if (strlen(q) >= sizeof(name)) {
			snprintf(name, sizeof(name), "%.20s...", q);
			e = -EINVAL;
			goto fail;
		}
		snprintf(name, sizeof(name), "%s", q);
	} else if (h) {
		if (!basic_user(h, name, sizeof(name))) {
			snprintf(err, errlen, "the Authorization header must be Basic base64(\"USER:\")");
			return -EINVAL;
		}
	} else {
		*ret = u;
		return 0;
	}
	e = e2b_user_lookup(sb, name, &u);
	if (e >= 0) {
		*ret = u;
		return 0;
	}
fail:;
	_cleanup_free_ char *shown = serve_utf8_clean(name, strlen(name), NULL, NULL);
	if (e == -ENOENT || e == -EINVAL) {
		snprintf(err, errlen, "no user '%s' in the sandbox", shown ? shown : "?");
		return -EINVAL;
	}
	snprintf(err, errlen, "look up user '%s': %s", shown ? shown : "?", space_strerror(e));
	return e;
}
