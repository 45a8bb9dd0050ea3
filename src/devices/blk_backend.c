/* SPDX-License-Identifier: Apache-2.0 */
#include "devices/blk_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

struct file_backend {
	int fd;
};

/* Transfers the whole iovec, resuming after short transfers and EINTR. */
static int file_rw(void *b, const struct iovec *iov_in, int iovcnt, uint64_t off, bool write)
{
	struct file_backend *f = b;
	struct iovec iov[IOV_MAX];

	if (iovcnt < 0 || iovcnt > IOV_MAX || off > INT64_MAX)
		return -EINVAL;
	memcpy(iov, iov_in, sizeof(*iov) * (size_t)iovcnt);
	struct iovec *cur = iov;
	while (iovcnt > 0) {
		if (cur->iov_len == 0) {
			cur++;
			iovcnt--;
			continue;
		}
		ssize_t n = write ? pwritev(f->fd, cur, iovcnt, (off_t)off)
				  : preadv(f->fd, cur, iovcnt, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* the file shrank under us */
		off += (uint64_t)n;
		while (n > 0 && iovcnt > 0) {
			size_t take = (size_t)n < cur->iov_len ? (size_t)n : cur->iov_len;
			cur->iov_base = (uint8_t *)cur->iov_base + take;
			cur->iov_len -= take;
			n -= (ssize_t)take;
			if (cur->iov_len == 0) {
				cur++;
				iovcnt--;
			}
		}
	}
	return 0;
}

static int file_readv(void *b, const struct iovec *iov, int iovcnt, uint64_t off)
{
	return file_rw(b, iov, iovcnt, off, false);
}

static int file_writev(void *b, const struct iovec *iov, int iovcnt, uint64_t off)
{
	return file_rw(b, iov, iovcnt, off, true);
}

static int file_flush(void *b)
{
	struct file_backend *f = b;
	return fdatasync(f->fd) < 0 ? -errno : 0;
}

static int file_discard(void *b, uint64_t off, uint64_t len)
{
	struct file_backend *f = b;

	if (off > INT64_MAX || len > INT64_MAX)
		return -EINVAL;
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}

static void file_close(void *b)
{
	struct file_backend *f = b;
	if (!f)
		return;
	close(f->fd);
	free(f);
}

static const struct blk_backend_ops file_ops = {
	.readv = file_readv,
	.writev = file_writev,
	.flush = file_flush,
	.discard = file_discard,
	.close = file_close,
};

int blk_backend_from_fd(int fd, bool read_only, struct blk_backend *ret)
{
	struct stat st;

	if (fd < 0 || !ret)
		return -EBADF;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return -EINVAL;
	uint64_t size = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(fd, 0, SEEK_END);
		if (end < 0)
			return -errno;
		size = (uint64_t)end;
	}
	struct file_backend *f = malloc(sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = fd;
	*ret = (struct blk_backend){
		.ops = &file_ops,
		.b = f,
		.size = size & ~511ull,
		.read_only = read_only,
	};
	return 0;
}

int blk_backend_open_file(const char *path, bool read_only, struct blk_backend *ret)
{
	if (!path || !ret)
		return -EINVAL;
	_cleanup_close_ int fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = blk_backend_from_fd(fd, read_only, ret);
	if (r < 0)
		return r;
	TAKE_FD(fd);
	return 0;
}

void blk_backend_close(struct blk_backend *be)
{
	if (!be || !be->ops)
		return;
	be->ops->close(be->b);
	*be = (struct blk_backend){ 0 };
}
