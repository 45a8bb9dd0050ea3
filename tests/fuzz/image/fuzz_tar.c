/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the bounded tar reader (src/image/tar.c) that space-unpack runs over every image layer and
 * rootfs tarball, and the library over image archives: every entry read to its end, its name normalized,
 * both with and without a skip callback. Invariants: no sanitizer report; names and link targets within
 * their bounds and free of NUL; a normalized name never holds a ".." component nor starts with "/".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct src {
	const uint8_t *data;
	size_t size, pos;
};

static int64_t rd(void *u, void *buf, size_t len)
{
	struct src *s = u;
	size_t n = s->size - s->pos < len ? s->size - s->pos : len;
	/* Short reads, as a decompressor gives them. */
	if (n > 1 && (s->pos & 7) == 3)
		n = n / 2;
	memcpy(buf, s->data + s->pos, n);
	s->pos += n;
	return (int64_t)n;
}

static int skp(void *u, uint64_t n)
{
	struct src *s = u;
	if (n > s->size - s->pos)
		return -32; /* -EPIPE */
	s->pos += n;
	return 0;
}

static void walk(const uint8_t *data, size_t size, bool with_skip)
{
	struct src s = { data, size, 0 };
	struct tar_reader *t;
	if (tar_reader_new(rd, with_skip ? skp : NULL, &s, &t) < 0)
		return;
	const struct tar_entry *e;
	char buf[4096], norm[TAR_PATH_MAX + 1];
	for (int n = 0; n < 10000 && tar_next(t, &e) > 0; n++) {
		size_t pl = strlen(e->path), ll = strlen(e->link);
		if (!pl || pl > TAR_PATH_MAX || ll > TAR_PATH_MAX || e->n_xattrs > TAR_XATTRS_MAX)
			__builtin_trap();
		for (size_t i = 0; i < e->n_xattrs; i++)
			if (e->xattrs[i].len > TAR_XATTR_VALUE_MAX || !e->xattrs[i].name[0])
				__builtin_trap();
		if (tar_path_normalize(e->path, norm, sizeof(norm)) == 0) {
			if (norm[0] == '/' || !strcmp(norm, "..") || !strncmp(norm, "../", 3) || strstr(norm, "/../") ||
			    (strlen(norm) >= 3 && !strcmp(norm + strlen(norm) - 3, "/..")))
				__builtin_trap();
		}
		if (!with_skip)
			while (tar_read(t, buf, sizeof(buf)) > 0)
				;
	}
	tar_reader_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	walk(data, size, false);
	walk(data, size, true);
	return 0;
}
