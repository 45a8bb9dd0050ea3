/* SPDX-License-Identifier: Apache-2.0 */
/* A log capped in two parts, FILE and FILE.1 (see caplog.h). */
#include "util/caplog.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define COPY_CHUNK 16384

int caplog_init(struct caplog *l, int fd, int old_fd, uint64_t max)
{
	if (max < CAPLOG_MIN_MAX || max > CAPLOG_MAX_MAX)
		return -EINVAL;
	*l = (struct caplog){ .fd = fd, .old_fd = old_fd, .half = max / 2 };
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL; /* a pipe or a terminal cannot be cut back: not a log this can cap */
	l->size = (uint64_t)st.st_size;
	return l->size > l->half ? caplog_rotate(l) : 0;
}

/* Copies the last half bytes of FILE (as far as this writer knows its size) to the start of FILE.1 and
 * returns how many were copied; stops at the first error (a write-only FILE, a full disk). */
static uint64_t copy_tail(struct caplog *l)
{
	char buf[COPY_CHUNK];
	uint64_t from = l->size > l->half ? l->size - l->half : 0, copied = 0;
	while (copied < l->half) {
		size_t want = l->half - copied < sizeof(buf) ? (size_t)(l->half - copied) : sizeof(buf);
		ssize_t n = pread(l->fd, buf, want, (off_t)(from + copied));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = pwrite(l->old_fd, buf + done, (size_t)(n - done), (off_t)(copied + (uint64_t)done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return copied + (uint64_t)done;
			done += w;
		}
		copied += (uint64_t)n;
	}
	return copied;
}

int caplog_rotate(struct caplog *l)
{
	if (l->fd < 0)
		return 0;
	if (l->old_fd >= 0) {
		/* FILE.1 is rewritten from its start and cut to what it got: no byte of an older part stays. */
		uint64_t copied = copy_tail(l);
		if (ftruncate(l->old_fd, (off_t)copied) < 0)
			(void)ftruncate(l->old_fd, 0);
	}
	if (ftruncate(l->fd, 0) < 0)
		return -errno;
	l->size = 0;
	l->rotations++;
	return 0;
}

int caplog_write(struct caplog *l, const void *buf, size_t len)
{
	if (l->fd < 0 || len == 0)
		return 0;
	const char *p = buf;
	if (len > l->half) {
		p += len - l->half;
		len = (size_t)l->half;
	}
	if (l->size + len > l->half) {
		/* FILE could not be emptied: nothing more goes in (the cap holds, the newest bytes are lost). */
		int r = caplog_rotate(l);
		if (r < 0)
			return r;
	}
	/* Counted whether or not it all got there: a failed write must not make room it did not free. */
	l->size += len;
	return util_write_all(l->fd, p, len);
}
