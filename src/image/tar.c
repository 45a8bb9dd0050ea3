/* SPDX-License-Identifier: Apache-2.0 */
/* A bounded tar reader (image/tar.h). */
#include "image/tar.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Meta headers (pax 'x'/'g', GNU 'L'/'K') in a row before one entry. */
#define TAR_META_MAX 16

struct tar_reader {
	tar_read_fn read;
	tar_skip_fn skip;
	void *userdata;
	uint64_t offset;     /* bytes consumed */
	uint64_t left;       /* of the current entry's data */
	uint64_t pad;        /* after it, to the block boundary */
	bool done;
	char err[256];
	struct tar_entry entry;
	char path[TAR_PATH_MAX + 1];
	char link[TAR_PATH_MAX + 1];
	/* What the meta headers before the next entry said. */
	char *pax_path, *pax_link;
	bool has_size, has_uid, has_gid, has_mtime;
	uint64_t size;
	uint32_t uid, gid;
	int64_t mtime;
	uint32_t mtime_ns;
	struct tar_xattr *xattrs;
	size_t n_xattrs;
	/* The last entry's attributes, freed when the next one is read. */
	struct tar_xattr *entry_xattrs;
	size_t entry_n_xattrs;
};

static int fail(struct tar_reader *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct tar_reader *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof(t->err), fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static void xattrs_free(struct tar_xattr *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(x[i].name);
		free(x[i].value);
	}
	free(x);
}

static void pending_clear(struct tar_reader *t)
{
	free(t->pax_path);
	free(t->pax_link);
	t->pax_path = t->pax_link = NULL;
	t->has_size = t->has_uid = t->has_gid = t->has_mtime = false;
	xattrs_free(t->xattrs, t->n_xattrs);
	t->xattrs = NULL;
	t->n_xattrs = 0;
}

int tar_reader_new(tar_read_fn read, tar_skip_fn skip, void *userdata, struct tar_reader **ret)
{
	struct tar_reader *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->read = read;
	t->skip = skip;
	t->userdata = userdata;
	*ret = t;
	return 0;
}

void tar_reader_free(struct tar_reader *t)
{
	if (!t)
		return;
	pending_clear(t);
	xattrs_free(t->entry_xattrs, t->entry_n_xattrs);
	free(t);
}

const char *tar_error(const struct tar_reader *t)
{
	return t->err;
}

uint64_t tar_offset(const struct tar_reader *t)
{
	return t->offset;
}

/* Exactly n bytes, or -EBADMSG when the stream ends first (eof_ok: 0 bytes at its end is 0, "none"). */
static int read_full(struct tar_reader *t, void *buf, size_t n, bool eof_ok, size_t *ret_got)
{
	size_t got = 0;
	while (got < n) {
		int64_t k = t->read(t->userdata, (char *)buf + got, n - got);
		if (k < 0)
			return (int)k;
		if (k == 0)
			break;
		if ((uint64_t)k > n - got)
			return fail(t, "the source returned more than it was asked for");
		got += (size_t)k;
	}
	t->offset += got;
	if (ret_got)
		*ret_got = got;
	if (got == n || (eof_ok && got == 0))
		return 0;
	return fail(t, "the archive ends inside a block (at byte %llu)", (unsigned long long)t->offset);
}

static int skip_bytes(struct tar_reader *t, uint64_t n)
{
	if (!n)
		return 0;
	if (t->skip) {
		int r = t->skip(t->userdata, n);
		if (r == -EPIPE)
			return fail(t, "the archive ends inside an entry's data");
		if (r < 0)
			return r;
		t->offset += n;
		return 0;
	}
	char buf[8192];
	while (n) {
		size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
		int r = read_full(t, buf, k, false, NULL);
		if (r < 0)
			return r;
		n -= k;
	}
	return 0;
}

/* A field's text up to its first NUL, at most len bytes, into out (len + 1 bytes). */
static void field_str(const char *f, size_t len, char *out)
{
	size_t n = strnlen(f, len);
	memcpy(out, f, n);
	out[n] = '\0';
}

/* A numeric header field: octal digits (leading spaces, ending at a NUL or space, nothing after but NULs
 * and spaces) or GNU base-256 (first byte 0x80, positive only). An empty field is 0. */
static int field_num(struct tar_reader *t, const char *what, const char *f, size_t len, uint64_t max,
		     uint64_t *ret)
{
	const unsigned char *u = (const unsigned char *)f;
	uint64_t v = 0;
	if (u[0] & 0x80) {
		if (u[0] != 0x80)
			return fail(t, "negative or malformed base-256 %s", what);
		for (size_t i = 1; i < len; i++) {
			if (v >> 56)
				return fail(t, "%s out of range", what);
			v = (v << 8) | u[i];
		}
	} else {
		size_t i = 0;
		while (i < len && u[i] == ' ')
			i++;
		for (; i < len && u[i] >= '0' && u[i] <= '7'; i++) {
			if (v >> 60)
				return fail(t, "%s out of range", what);
			v = (v << 3) | (uint64_t)(u[i] - '0');
		}
		for (; i < len; i++)
			if (u[i] != ' ' && u[i] != '\0')
				return fail(t, "%s is not an octal number", what);
	}
	if (v > max)
		return fail(t, "%s %llu out of range", what, (unsigned long long)v);
	*ret = v;
	return 0;
}

static bool checksum_ok(const unsigned char *h)
{
	uint64_t want = 0;
	size_t i = 148;
	while (i < 156 && h[i] == ' ')
		i++;
	bool digits = false;
	for (; i < 156 && h[i] >= '0' && h[i] <= '7'; i++) {
		want = (want << 3) | (uint64_t)(h[i] - '0');
		digits = true;
	}
	for (; i < 156; i++)
		if (h[i] != ' ' && h[i] != '\0')
			return false;
	if (!digits)
		return false;
	uint64_t usum = 0;
	int64_t ssum = 0;
	for (i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = (i >= 148 && i < 156) ? ' ' : h[i];
		usum += c;
		ssum += (signed char)c;
	}
	return usum == want || (ssum >= 0 && (uint64_t)ssum == want);
}

static int dec_u64(const char *s, size_t n, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;
	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int set_string(struct tar_reader *t, char **dst, const char *what, const char *v, size_t n)
{
	if (n == 0 || n > TAR_PATH_MAX || memchr(v, '\0', n))
		return fail(t, "pax %s of %zu bytes (1..%u, no NUL)", what, n, TAR_PATH_MAX);
	char *s = strndup(v, n);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static int add_xattr(struct tar_reader *t, const char *name, size_t nlen, const char *v, size_t vlen)
{
	if (nlen == 0 || nlen > TAR_XATTR_NAME_MAX || memchr(name, '\0', nlen))
		return fail(t, "extended attribute name of %zu bytes (1..%u)", nlen, TAR_XATTR_NAME_MAX);
	if (vlen > TAR_XATTR_VALUE_MAX)
		return fail(t, "extended attribute value of %zu bytes (at most %u)", vlen, TAR_XATTR_VALUE_MAX);
	size_t i;
	for (i = 0; i < t->n_xattrs; i++)
		if (strlen(t->xattrs[i].name) == nlen && !memcmp(t->xattrs[i].name, name, nlen))
			break;
	if (i == t->n_xattrs) {
		if (t->n_xattrs == TAR_XATTRS_MAX)
			return fail(t, "more than %u extended attributes on one entry", TAR_XATTRS_MAX);
		struct tar_xattr *nx = realloc(t->xattrs, (t->n_xattrs + 1) * sizeof(*nx));
		if (!nx)
			return -ENOMEM;
		t->xattrs = nx;
		memset(&nx[i], 0, sizeof(nx[i]));
		if (!(nx[i].name = strndup(name, nlen)))
			return -ENOMEM;
		t->n_xattrs++;
	}
	uint8_t *val = malloc(vlen ? vlen : 1);
	if (!val)
		return -ENOMEM;
	memcpy(val, v, vlen);
	free(t->xattrs[i].value);
	t->xattrs[i].value = val;
	t->xattrs[i].len = vlen;
	return 0;
}

/* "123" or "123.456789" (more fraction digits are cut); a negative time counts as 0. */
static int pax_time(const char *v, size_t n, int64_t *ret_s, uint32_t *ret_ns)
{
	if (n && v[0] == '-') {
		*ret_s = 0;
		*ret_ns = 0;
		return 0;
	}
	const char *dot = memchr(v, '.', n);
	size_t ilen = dot ? (size_t)(dot - v) : n;
	uint64_t s;
	if (dec_u64(v, ilen, INT64_MAX / 2, &s) < 0)
		return -EINVAL;
	uint32_t ns = 0;
	if (dot) {
		size_t flen = n - ilen - 1;
		for (size_t i = 0; i < flen; i++) {
			if (dot[1 + i] < '0' || dot[1 + i] > '9')
				return -EINVAL;
			if (i < 9)
				ns = ns * 10 + (uint32_t)(dot[1 + i] - '0');
		}
		for (size_t i = flen; i < 9; i++)
			ns *= 10;
	}
	*ret_s = (int64_t)s;
	*ret_ns = ns;
	return 0;
}

static int pax_record(struct tar_reader *t, const char *k, size_t klen, const char *v, size_t vlen)
{
#define KEY(s) (klen == sizeof(s) - 1 && !memcmp(k, s, sizeof(s) - 1))
#define PREFIX(s) (klen >= sizeof(s) - 1 && !memcmp(k, s, sizeof(s) - 1))
	uint64_t n;
	if (KEY("path"))
		return set_string(t, &t->pax_path, "path", v, vlen);
	if (KEY("linkpath"))
		return set_string(t, &t->pax_link, "linkpath", v, vlen);
	if (KEY("size")) {
		if (dec_u64(v, vlen, TAR_FILE_MAX, &n) < 0)
			return fail(t, "pax size is not a number up to %llu", (unsigned long long)TAR_FILE_MAX);
		t->size = n;
		t->has_size = true;
		return 0;
	}
	if (KEY("uid") || KEY("gid")) {
		if (dec_u64(v, vlen, UINT32_MAX - 1, &n) < 0)
			return fail(t, "pax %.3s is not a number below 2^32 - 1", k);
		if (k[0] == 'u')
			t->uid = (uint32_t)n, t->has_uid = true;
		else
			t->gid = (uint32_t)n, t->has_gid = true;
		return 0;
	}
	if (KEY("mtime")) {
		if (pax_time(v, vlen, &t->mtime, &t->mtime_ns) < 0)
			return fail(t, "pax mtime is not a time");
		t->has_mtime = true;
		return 0;
	}
	if (PREFIX("SCHILY.xattr."))
		return add_xattr(t, k + 13, klen - 13, v, vlen);
	if (PREFIX("GNU.sparse."))
		return fail(t, "sparse files (GNU.sparse) are not supported");
	/* atime, ctime, uname, gname, comment, charset, hdrcharset, SCHILY.dev/ino/nlink, LIBARCHIVE.* (bsdtar
	 * writes SCHILY.xattr too): nothing a tree keeps. */
	return 0;
#undef KEY
#undef PREFIX
}

/* Records "LEN KEY=VALUE\n", LEN counting the whole record. global: parsed for validity, then dropped. */
static int pax_parse(struct tar_reader *t, const char *p, size_t n, bool global)
{
	while (n) {
		size_t i = 0, len = 0;
		while (i < n && i < 8 && p[i] >= '0' && p[i] <= '9')
			len = len * 10 + (size_t)(p[i++] - '0');
		if (i == 0 || i >= n || p[i] != ' ' || len <= i + 1 || len > n || p[len - 1] != '\n')
			return fail(t, "malformed pax record");
		const char *k = p + i + 1;
		const char *eq = memchr(k, '=', len - i - 2);
		if (!eq || eq == k)
			return fail(t, "malformed pax record (no key)");
		if (!global) {
			int r = pax_record(t, k, (size_t)(eq - k), eq + 1, (size_t)(p + len - 1 - (eq + 1)));
			if (r < 0)
				return r;
		}
		p += len;
		n -= len;
	}
	return 0;
}

/* The data of a meta header (size bytes, at most max), whole, into a new buffer (NUL-terminated). */
static int meta_data(struct tar_reader *t, uint64_t size, uint64_t max, const char *what, char **ret)
{
	if (size > max)
		return fail(t, "%s of %llu bytes (at most %llu)", what, (unsigned long long)size,
			    (unsigned long long)max);
	char *buf = malloc((size_t)size + 1);
	if (!buf)
		return -ENOMEM;
	int r = read_full(t, buf, (size_t)size, false, NULL);
	if (r == 0)
		r = skip_bytes(t, (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[size] = '\0';
	*ret = buf;
	return 0;
}

static int gnu_long(struct tar_reader *t, uint64_t size, char **dst, const char *what)
{
	char *buf;
	int r = meta_data(t, size, TAR_PATH_MAX + 1, what, &buf);
	if (r < 0)
		return r;
	size_t n = (size_t)size;
	while (n && buf[n - 1] == '\0')
		n--;
	if (!n || memchr(buf, '\0', n)) {
		free(buf);
		return fail(t, "malformed %s", what);
	}
	buf[n] = '\0';
	free(*dst);
	*dst = buf;
	return 0;
}

static bool all_zero(const unsigned char *b)
{
	for (size_t i = 0; i < TAR_BLOCK; i++)
		if (b[i])
			return false;
	return true;
}

static int entry_from(struct tar_reader *t, const unsigned char *h, char type)
{
	struct tar_entry *e = &t->entry;
	memset(e, 0, sizeof(*e));
	bool posix = !memcmp(h + 257, "ustar\0", 6);
	uint64_t mode, uid, gid, size, mtime, maj, min;
	int r;
	if ((r = field_num(t, "mode", (const char *)h + 100, 8, UINT32_MAX, &mode)) < 0 ||
	    (r = field_num(t, "uid", (const char *)h + 108, 8, UINT32_MAX - 1, &uid)) < 0 ||
	    (r = field_num(t, "gid", (const char *)h + 116, 8, UINT32_MAX - 1, &gid)) < 0 ||
	    (r = field_num(t, "size", (const char *)h + 124, 12, TAR_FILE_MAX, &size)) < 0 ||
	    (r = field_num(t, "mtime", (const char *)h + 136, 12, INT64_MAX / 2, &mtime)) < 0)
		return r;
	if (type == '3' || type == '4') {
		if ((r = field_num(t, "devmajor", (const char *)h + 329, 8, 4095, &maj)) < 0 ||
		    (r = field_num(t, "devminor", (const char *)h + 337, 8, 1048575, &min)) < 0)
			return r;
		e->devmajor = (uint32_t)maj;
		e->devminor = (uint32_t)min;
	}
	if (t->pax_path) {
		snprintf(t->path, sizeof(t->path), "%s", t->pax_path);
	} else {
		char name[101], prefix[156];
		field_str((const char *)h, 100, name);
		field_str((const char *)h + 345, 155, prefix);
		if (posix && prefix[0])
			snprintf(t->path, sizeof(t->path), "%s/%s", prefix, name);
		else
			snprintf(t->path, sizeof(t->path), "%s", name);
	}
	if (!t->path[0])
		return fail(t, "an entry without a name");
	if (t->pax_link)
		snprintf(t->link, sizeof(t->link), "%s", t->pax_link);
	else
		field_str((const char *)h + 157, 100, t->link);
	switch (type) {
	case '0':
	case '\0':
	case '7':
		/* An old-style regular entry named with a trailing slash is a directory. */
		e->type = type == '\0' && t->path[strlen(t->path) - 1] == '/' ? TAR_DIR : TAR_REG;
		break;
	case '1': e->type = TAR_HARDLINK; break;
	case '2': e->type = TAR_SYMLINK; break;
	case '3': e->type = TAR_CHR; break;
	case '4': e->type = TAR_BLK; break;
	case '5': e->type = TAR_DIR; break;
	case '6': e->type = TAR_FIFO; break;
	case 'S': return fail(t, "%s: sparse files are not supported", t->path);
	case 'M':
	case 'V': return fail(t, "%s: multi-volume archives are not supported", t->path);
	default:
		return fail(t, "%s: entry type '%c' is not supported", t->path,
			    type >= 0x20 && type < 0x7f ? type : '?');
	}
	if ((e->type == TAR_HARDLINK || e->type == TAR_SYMLINK) && !t->link[0])
		return fail(t, "%s: a link without a target", t->path);
	if (e->type != TAR_HARDLINK && e->type != TAR_SYMLINK)
		t->link[0] = '\0';
	e->path = t->path;
	e->link = t->link;
	e->mode = (uint32_t)mode & 07777;
	e->uid = t->has_uid ? t->uid : (uint32_t)uid;
	e->gid = t->has_gid ? t->gid : (uint32_t)gid;
	e->mtime = t->has_mtime ? t->mtime : (int64_t)mtime;
	e->mtime_ns = t->has_mtime ? t->mtime_ns : 0;
	if (t->has_size)
		size = t->size;
	/* Only regular files have data (as Go's archive/tar and GNU tar read it: the other types are
	 * header-only whatever their size field says). */
	e->size = e->type == TAR_REG ? size : 0;
	e->data_offset = t->offset;
	t->left = e->size;
	t->pad = (TAR_BLOCK - e->size % TAR_BLOCK) % TAR_BLOCK;
	/* The attributes move to the entry; the rest of the pending state goes. */
	xattrs_free(t->entry_xattrs, t->entry_n_xattrs);
	t->entry_xattrs = t->xattrs;
	t->entry_n_xattrs = t->n_xattrs;
	t->xattrs = NULL;
	t->n_xattrs = 0;
	e->xattrs = t->entry_xattrs;
	e->n_xattrs = t->entry_n_xattrs;
	pending_clear(t);
	return 0;
}

int tar_next(struct tar_reader *t, const struct tar_entry **ret)
{
	t->err[0] = '\0';
	if (t->done)
		return 0;
	int r = skip_bytes(t, t->left + t->pad);
	if (r < 0)
		return r;
	t->left = t->pad = 0;
	for (int meta = 0;; meta++) {
		unsigned char h[TAR_BLOCK];
		size_t got;
		if ((r = read_full(t, h, sizeof(h), true, &got)) < 0)
			return r;
		if (got == 0 || all_zero(h)) {
			if (meta)
				return fail(t, "the archive ends after an extended header");
			t->done = true;
			return 0;
		}
		if (!checksum_ok(h))
			return fail(t, "bad header checksum at byte %llu", (unsigned long long)(t->offset - TAR_BLOCK));
		if (meta == TAR_META_MAX)
			return fail(t, "more than %d extended headers before one entry", TAR_META_MAX);
		char type = (char)h[156];
		uint64_t size;
		if ((r = field_num(t, "size", (const char *)h + 124, 12, TAR_FILE_MAX, &size)) < 0)
			return r;
		char *buf = NULL;
		switch (type) {
		case 'x':
		case 'g':
			if ((r = meta_data(t, size, TAR_PAX_MAX, "pax header", &buf)) < 0)
				return r;
			r = pax_parse(t, buf, (size_t)size, type == 'g');
			free(buf);
			if (r < 0)
				return r;
			continue;
		case 'L':
			if ((r = gnu_long(t, size, &t->pax_path, "GNU long name")) < 0)
				return r;
			continue;
		case 'K':
			if ((r = gnu_long(t, size, &t->pax_link, "GNU long link name")) < 0)
				return r;
			continue;
		default:
			break;
		}
		if ((r = entry_from(t, h, type)) < 0)
			return r;
		*ret = &t->entry;
		return 1;
	}
}

int64_t tar_read(struct tar_reader *t, void *buf, size_t len)
{
	if (!t->left || !len)
		return 0;
	size_t want = len < t->left ? len : (size_t)t->left;
	int64_t k = t->read(t->userdata, buf, want);
	if (k < 0)
		return k;
	if (k == 0 || (uint64_t)k > want)
		return fail(t, "the archive ends inside the data of %s", t->entry.path);
	t->offset += (uint64_t)k;
	t->left -= (uint64_t)k;
	return k;
}

int tar_path_resolve(char *scratch, char *out, size_t len, bool clamp)
{
	size_t n = 0;
	for (char *save, *c = strtok_r(scratch, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			if (!n && !clamp)
				return -EPERM;
			while (n && out[n - 1] != '/')
				n--;
			if (n)
				n--;
			continue;
		}
		size_t cl = strlen(c);
		if (n + cl + 2 > len)
			return -ENAMETOOLONG;
		if (n)
			out[n++] = '/';
		memcpy(out + n, c, cl);
		n += cl;
	}
	out[n] = '\0';
	return 0;
}

int tar_path_normalize(const char *name, char *buf, size_t len)
{
	size_t n = 0;
	const char *p = name;
	while (*p) {
		while (*p == '/')
			p++;
		const char *c = p;
		while (*p && *p != '/')
			p++;
		size_t clen = (size_t)(p - c);
		if (clen == 0 || (clen == 1 && c[0] == '.'))
			continue;
		if (clen == 2 && c[0] == '.' && c[1] == '.')
			return -EINVAL;
		if (n + (n ? 1 : 0) + clen + 1 > len)
			return -ENAMETOOLONG;
		if (n)
			buf[n++] = '/';
		memcpy(buf + n, c, clen);
		n += clen;
	}
	buf[n] = '\0';
	return 0;
}

static void octal(uint8_t *f, size_t len, uint64_t v)
{
	snprintf((char *)f, len, "%0*llo", (int)len - 1, (unsigned long long)v);
}

int tar_header(uint8_t h[TAR_BLOCK], const char *name, const char *link, char type, uint32_t mode, uint32_t uid,
	       uint32_t gid, uint64_t size, int64_t mtime, uint32_t devmajor, uint32_t devminor)
{
	if (strlen(name) > 99 || (link && strlen(link) > 99))
		return -ENAMETOOLONG;
	memset(h, 0, TAR_BLOCK);
	memcpy(h, name, strlen(name));
	octal(h + 100, 8, mode & 07777);
	octal(h + 108, 8, uid > 07777777 ? 0 : uid);
	octal(h + 116, 8, gid > 07777777 ? 0 : gid);
	if (size > 077777777777ull) {
		h[124] = 0x80;
		for (int i = 0; i < 8; i++)
			h[135 - i] = (uint8_t)(size >> (8 * i));
	} else {
		octal(h + 124, 12, size);
	}
	octal(h + 136, 12, mtime < 0 ? 0 : mtime > 077777777777ll ? 077777777777ull : (uint64_t)mtime);
	h[156] = (uint8_t)type;
	if (link)
		memcpy(h + 157, link, strlen(link));
	memcpy(h + 257, "ustar\0" "00", 8);
	octal(h + 329, 8, devmajor & 07777777);
	octal(h + 337, 8, devminor & 07777777);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	return 0;
}

int tar_pax_record(char **buf, size_t *len, size_t max, const char *key, const void *value, size_t vlen)
{
	size_t body = strlen(key) + vlen + 3, n = body + 1;
	while (n != body + (size_t)snprintf(NULL, 0, "%zu", n))
		n = body + (size_t)snprintf(NULL, 0, "%zu", n);
	if (*len + n > max)
		return -E2BIG;
	char *nb = realloc(*buf, *len + n + 1);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	int k = snprintf(nb + *len, n + 1, "%zu %s=", n, key);
	memcpy(nb + *len + k, value, vlen);
	nb[*len + n - 1] = '\n';
	*len += n;
	return 0;
}
