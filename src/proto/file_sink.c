/* SPDX-License-Identifier: Apache-2.0 */
/* A capped, hole-keeping writer for files streamed out of a sandbox (contract in file_sink.h). */
#include "proto/file_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

void file_sink_init(struct file_sink *s, int fd, uint64_t max)
{
	*s = (struct file_sink){ .fd = fd, .max = max };
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_APPEND) || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	off_t cur = lseek(fd, 0, SEEK_CUR);
	/* Skipped bytes read back as zeros only beyond the end of what the file held: before it, skipping
	 * would leave old data where the stream had zeros. */
	if (cur < 0 || cur < st.st_size)
		return;
	s->sparse = true;
	s->pos = cur;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int file_sink_write(struct file_sink *s, const void *buf, size_t len)
{
	if (len > s->max - s->done)
		return -EFBIG;
	if (!s->sparse) {
		int r = util_write_all(s->fd, buf, len);
		if (r == 0)
			s->done += len;
		return r;
	}
	if ((uint64_t)len > (uint64_t)(INT64_MAX - s->pos))
		return -EFBIG;
	/* Pieces end on block boundaries of the file; consecutive data pieces go out in one pwrite. */
	const uint8_t *p = buf, *run = NULL;
	off_t run_off = 0;
	size_t left = len;
	while (left > 0) {
		size_t room = FILE_SINK_BLOCK - (size_t)((uint64_t)s->pos % FILE_SINK_BLOCK);
		size_t n = left < room ? left : room;
		if (all_zero(p, n)) {
			if (run) {
				int r = pwrite_all(s->fd, run, (size_t)(p - run), run_off);
				if (r < 0)
					return r;
				run = NULL;
			}
		} else if (!run) {
			run = p;
			run_off = s->pos;
		}
		p += n;
		left -= n;
		s->pos += (off_t)n;
	}
	if (run) {
		int r = pwrite_all(s->fd, run, (size_t)(p - run), run_off);
		if (r < 0)
			return r;
	}
	s->done += len;
	return 0;
}

int file_sink_finish(struct file_sink *s)
{
	if (!s->sparse)
		return 0;
	struct stat st;
	if (fstat(s->fd, &st) < 0)
		return -errno;
	/* A trailing zero run was skipped: the size must still say where the stream ended. */
	if (st.st_size < s->pos && ftruncate(s->fd, s->pos) < 0)
		return -errno;
	if (lseek(s->fd, s->pos, SEEK_SET) < 0)
		return -errno;
	return 0;
}
