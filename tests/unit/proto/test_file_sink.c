/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The writer behind copies out of a sandbox (src/proto/file_sink.c): the cap holds on logical bytes and
 * writes nothing of a chunk that would pass it; zero runs become holes only where they read back as
 * zeros (a regular file written at or past its end); everything else is written densely and exactly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/file_sink.h"
#include "../../check.h"


static char dir[] = "/tmp/space-file-sink-XXXXXX";

static int new_file(const char *name, int flags)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | flags, 0600);
}

/* The whole file equals want[0..len). */
static bool content_is(int fd, const unsigned char *want, size_t len)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != len)
		return false;
	unsigned char *got = malloc(len + 1);
	bool ok = got && pread(fd, got, len + 1, 0) == (ssize_t)len && memcmp(got, want, len) == 0;
	free(got);
	return ok;
}

/* Data, a long zero run fed in odd-sized chunks, data again, then a trailing zero run. */
static void test_holes(void)
{
	const size_t total = 8192 + (1u << 20) + 100 + (3u << 20);
	unsigned char *want = calloc(1, total);
	memset(want, 'a', 8192);
	memset(want + 8192 + (1u << 20), 'b', 100);
	int fd = new_file("sparse", 0);
	CHECK(fd >= 0);
	struct file_sink s;
	file_sink_init(&s, fd, UINT64_MAX);
	CHECK(s.sparse);
	for (size_t off = 0; off < total;) {
		size_t n = total - off < 65521 ? total - off : 65521; /* not a multiple of the block */
		CHECK(file_sink_write(&s, want + off, n) == 0);
		off += n;
	}
	CHECK(file_sink_finish(&s) == 0);
	CHECK(s.done == total);
	CHECK(content_is(fd, want, total));
	CHECK(lseek(fd, 0, SEEK_CUR) == (off_t)total);
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_blocks * 512 < 64 * 1024); /* 4 MiB logical, a few blocks real */
	close(fd);
	free(want);
}

/* The cap counts zeros too, and a chunk that would pass it writes nothing. */
static void test_cap(void)
{
	int fd = new_file("cap", 0);
	struct file_sink s;
	file_sink_init(&s, fd, 10000);
	unsigned char buf[8192] = { 0 };
	buf[0] = 1;
	CHECK(file_sink_write(&s, buf, sizeof(buf)) == 0);
	CHECK(file_sink_write(&s, buf, 4096) == -EFBIG);
	CHECK(s.done == 8192);
	CHECK(file_sink_write(&s, buf, 10000 - 8192) == 0);
	CHECK(file_sink_write(&s, buf, 1) == -EFBIG);
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size <= 10000);
	close(fd);
	/* A zero-only stream is capped like any other. */
	fd = new_file("cap0", 0);
	unsigned char zero[65536] = { 0 };
	file_sink_init(&s, fd, 100000);
	CHECK(file_sink_write(&s, zero, sizeof(zero)) == 0);
	CHECK(file_sink_write(&s, zero, sizeof(zero)) == -EFBIG);
	CHECK(file_sink_finish(&s) == 0);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 65536);
	close(fd);
}

/* Old data after the offset: zeros must overwrite it, not be skipped over it. */
static void test_existing_content(void)
{
	int fd = new_file("old", 0);
	unsigned char x[16384];
	memset(x, 'x', sizeof(x));
	CHECK(write(fd, x, sizeof(x)) == (ssize_t)sizeof(x));
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	struct file_sink s;
	file_sink_init(&s, fd, UINT64_MAX);
	CHECK(!s.sparse);
	unsigned char z[16384] = { 0 };
	CHECK(file_sink_write(&s, z, sizeof(z)) == 0);
	CHECK(file_sink_finish(&s) == 0);
	CHECK(content_is(fd, z, sizeof(z)));
	close(fd);
}

/* O_APPEND ignores offsets: dense. A start offset past the end in mid-block: still exact. */
static void test_append_and_offset(void)
{
	int fd = new_file("append", O_APPEND);
	struct file_sink s;
	file_sink_init(&s, fd, UINT64_MAX);
	CHECK(!s.sparse);
	unsigned char buf[9000] = { 0 };
	buf[8999] = 'e';
	CHECK(file_sink_write(&s, buf, sizeof(buf)) == 0);
	CHECK(content_is(fd, buf, sizeof(buf)));
	close(fd);

	fd = new_file("offset", 0);
	CHECK(write(fd, "head", 4) == 4);
	file_sink_init(&s, fd, UINT64_MAX);
	CHECK(s.sparse);
	CHECK(file_sink_write(&s, buf, sizeof(buf)) == 0);
	CHECK(file_sink_write(&s, buf, 100) == 0); /* trailing zeros */
	CHECK(file_sink_finish(&s) == 0);
	unsigned char want[4 + 9000 + 100] = { 'h', 'e', 'a', 'd' };
	want[4 + 8999] = 'e';
	CHECK(content_is(fd, want, sizeof(want)));
	close(fd);
}

/* A pipe: dense, in order. */
static void test_pipe(void)
{
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	struct file_sink s;
	file_sink_init(&s, p[1], 100);
	CHECK(!s.sparse);
	CHECK(file_sink_write(&s, "\0\0\0abc", 6) == 0);
	CHECK(file_sink_write(&s, "x", 95) == -EFBIG);
	CHECK(file_sink_finish(&s) == 0);
	close(p[1]);
	char got[16];
	CHECK(read(p[0], got, sizeof(got)) == 6 && memcmp(got, "\0\0\0abc", 6) == 0);
	close(p[0]);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_holes();
	test_cap();
	test_existing_content();
	test_append_and_offset();
	test_pipe();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return check_summary("file-sink");
}
