/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Block back-ends: where virtio-blk's sectors live. The front-end (virtio_blk.c) speaks only to this
 * interface, so it can be tested against a back-end that fails on purpose. Every operation moves all
 * the bytes asked for or returns -errno (short transfers are retried or turned into -EIO).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct blk_backend_ops {
	/* Reads/writes exactly the iovec's total at byte offset off. 0 or -errno. */
	int (*readv)(void *b, const struct iovec *iov, int iovcnt, uint64_t off);
	int (*writev)(void *b, const struct iovec *iov, int iovcnt, uint64_t off);
	/* Makes completed writes durable. 0 or -errno. */
	int (*flush)(void *b);
	/* Deallocates [off, off+len) (reads back as zeroes). 0, -EOPNOTSUPP or -errno. May be NULL. */
	int (*discard)(void *b, uint64_t off, uint64_t len);
	/* Releases the back-end. */
	void (*close)(void *b);
};

/* What the front-end tells wait_space (below). */
enum blk_space_event {
	BLK_SPACE_WAIT, /* a write or flush found no room: wait a while; true to try it again */
	BLK_SPACE_BACK, /* the one that waited went through (the return value is ignored) */
};

struct blk_backend {
	const struct blk_backend_ops *ops;
	void *b;
	uint64_t size;  /* bytes */
	bool read_only;
	/*
	 * A write or flush that the host's file system has no room for (ENOSPC, EDQUOT): without this hook
	 * the guest gets an I/O error, which its file system takes for a broken disk (ext4 remounts itself
	 * read-only). With it the request waits, as long as the hook says (it sleeps, then returns true to
	 * try again), and goes through once there is room: the guest sees a slow disk. NULL: fail.
	 */
	bool (*wait_space)(void *opaque, enum blk_space_event ev);
	void *wait_opaque;
};

/*
 * Opens a raw image file (O_RDWR, or O_RDONLY when read_only) as a back-end. Its size is rounded down
 * to whole 512-byte sectors. Returns 0 or -errno; *ret is written only on success.
 */
int blk_backend_open_file(const char *path, bool read_only, struct blk_backend *ret);

/* Same over an open descriptor, whose ownership passes to the back-end on success. */
int blk_backend_from_fd(int fd, bool read_only, struct blk_backend *ret);

/* Closes be (no-op for a zeroed struct). */
void blk_backend_close(struct blk_backend *be);
