/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a file streamed out of a sandbox lands on the host: a descriptor written in order, under a cap.
 *
 * The sandbox decides what it streams, so the cap counts logical bytes (zeros included): a 1 TiB sparse
 * file is 1 TiB for the cap, whatever it costs on disk. When the descriptor is a regular file written at
 * or past its end, runs of zero bytes are skipped (they read back as zeros: holes) and the file is
 * extended over a trailing hole at the end, so a sparse file stays sparse on the host. Anything else (a
 * pipe, a socket, an O_APPEND file, or a regular file with data after the offset that skipping would
 * leave in place) is written densely.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The granule of hole detection: a zero run is skipped in pieces that end on a multiple of this in the
 * file, so that whole filesystem blocks become holes. */
#define FILE_SINK_BLOCK 4096u

struct file_sink {
	int fd;
	uint64_t max;   /* logical bytes allowed */
	uint64_t done;  /* logical bytes taken so far */
	bool sparse;    /* zero runs may be skipped */
	off_t pos;      /* sparse: the file offset of the next byte */
};

/* Prepares to write to fd from its current offset, at most max bytes. Never fails: a descriptor whose
 * kind or offset cannot be learnt is written densely. */
void file_sink_init(struct file_sink *s, int fd, uint64_t max);

/* Appends len bytes. -EFBIG (and nothing of buf written) when the total would pass max; else 0 or the
 * -errno of the write. */
int file_sink_write(struct file_sink *s, const void *buf, size_t len);

/* Ends the stream: extends the file over a trailing hole and leaves the descriptor's offset after the
 * last byte, as a dense write would. 0 or -errno. */
int file_sink_finish(struct file_sink *s);
