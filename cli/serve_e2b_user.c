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
	return e2b_passwd_find(buf, (size_t)size, name, ret);
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
