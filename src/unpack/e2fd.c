/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A libext2fs I/O manager over the one image descriptor (unpack.h), with a large read cache.
 *
 * libext2fs's own unix manager caches 8 blocks; applying a layer looks names up and links them into
 * directories that are read again for every entry (ext2fs_link and ext2fs_lookup scan a directory
 * linearly), so a directory of thousands of entries was read from the file for each one: 28 s for 30,000
 * small files. This one keeps CACHE_BLOCKS single-block reads (direct-mapped by block number) and writes
 * through: every write goes to the file at once and refreshes a cached copy of the blocks it covers, so the
 * cache never holds anything the file does not, and a failure leaves nothing unwritten in memory. Its only
 * calls are pread64, pwrite64 and (read-write) fdatasync on the image descriptor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unpack/unpack.h"

#define CACHE_BLOCKS 16384u /* 64 MiB of 4 KiB blocks */

struct e2fd {
	int fd;
	bool rw;
	int bs;
	struct slot {
		unsigned long long blk;
		bool valid;
	} *slots;
	uint8_t *data;
	struct struct_io_stats stats;
};

static errcode_t e2fd_open(const char *name, int flags, io_channel *channel);

static errcode_t io_pread(struct e2fd *d, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(d->fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno;
		if (k == 0) {
			/* Past the end of the file: zeros, as a hole would read. */
			memset((char *)buf + got, 0, n - got);
			break;
		}
		got += (size_t)k;
	}
	d->stats.bytes_read += n;
	return 0;
}

static errcode_t io_pwrite(struct e2fd *d, const void *buf, size_t n, uint64_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = pwrite(d->fd, (const char *)buf + done, n - done, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno;
		if (k == 0)
			return EXT2_ET_SHORT_WRITE;
		done += (size_t)k;
	}
	d->stats.bytes_written += n;
	return 0;
}

/* count > 0: blocks; count < 0: bytes (libext2fs's convention). */
static size_t span(struct e2fd *d, int count)
{
	return count < 0 ? (size_t)-count : (size_t)count * (size_t)d->bs;
}

static void cache_reset(struct e2fd *d)
{
	memset(d->slots, 0, CACHE_BLOCKS * sizeof(*d->slots));
}

/* Refreshes cached copies of the blocks [blk, blk + n) that buf now holds, from byte skip of blk on. */
static void cache_update(struct e2fd *d, unsigned long long first, size_t bytes, const uint8_t *buf)
{
	unsigned long long last = first + (bytes + (size_t)d->bs - 1) / (size_t)d->bs;
	for (unsigned long long b = first; b < last; b++) {
		struct slot *s = &d->slots[b % CACHE_BLOCKS];
		if (!s->valid || s->blk != b)
			continue;
		size_t off = (size_t)(b - first) * (size_t)d->bs;
		if (off + (size_t)d->bs <= bytes)
			memcpy(d->data + (size_t)(b % CACHE_BLOCKS) * (size_t)d->bs, buf + off, (size_t)d->bs);
		else
			s->valid = false; /* a partial block: read again when needed */
	}
}

static errcode_t e2fd_read_blk64(io_channel ch, unsigned long long blk, int count, void *buf)
{
	struct e2fd *d = ch->private_data;
	if (count == 1) {
		struct slot *s = &d->slots[blk % CACHE_BLOCKS];
		uint8_t *c = d->data + (size_t)(blk % CACHE_BLOCKS) * (size_t)d->bs;
		if (!s->valid || s->blk != blk) {
			errcode_t e = io_pread(d, c, (size_t)d->bs, blk * (uint64_t)d->bs);
			if (e)
				return e;
			s->blk = blk;
			s->valid = true;
		}
		memcpy(buf, c, (size_t)d->bs);
		return 0;
	}
	/* The file holds everything the cache does (writes go through): read it directly. */
	return io_pread(d, buf, span(d, count), blk * (uint64_t)d->bs);
}

static errcode_t e2fd_write_blk64(io_channel ch, unsigned long long blk, int count, const void *buf)
{
	struct e2fd *d = ch->private_data;
	size_t n = span(d, count);
	errcode_t e = io_pwrite(d, buf, n, blk * (uint64_t)d->bs);
	if (e) {
		cache_reset(d);
		return e;
	}
	cache_update(d, blk, n, buf);
	return 0;
}

static errcode_t e2fd_read_blk(io_channel ch, unsigned long blk, int count, void *buf)
{
	return e2fd_read_blk64(ch, blk, count, buf);
}

static errcode_t e2fd_write_blk(io_channel ch, unsigned long blk, int count, const void *buf)
{
	return e2fd_write_blk64(ch, blk, count, buf);
}

static errcode_t e2fd_write_byte(io_channel ch, unsigned long offset, int count, const void *buf)
{
	struct e2fd *d = ch->private_data;
	if (count < 0)
		return EXT2_ET_INVALID_ARGUMENT;
	errcode_t e = io_pwrite(d, buf, (size_t)count, offset);
	/* Whatever cached block it touched is read again. */
	unsigned long long first = offset / (unsigned)d->bs, last = (offset + (unsigned)count) / (unsigned)d->bs;
	for (unsigned long long b = first; b <= last; b++)
		if (d->slots[b % CACHE_BLOCKS].blk == b)
			d->slots[b % CACHE_BLOCKS].valid = false;
	return e;
}

static errcode_t e2fd_set_blksize(io_channel ch, int blksize)
{
	struct e2fd *d = ch->private_data;
	if (blksize <= 0 || blksize > 65536)
		return EXT2_ET_INVALID_ARGUMENT;
	if (blksize != d->bs) {
		uint8_t *data = realloc(d->data, CACHE_BLOCKS * (size_t)blksize);
		if (!data)
			return EXT2_ET_NO_MEMORY;
		d->data = data;
		d->bs = blksize;
		ch->block_size = blksize;
		cache_reset(d);
	}
	return 0;
}

static errcode_t e2fd_flush(io_channel ch)
{
	struct e2fd *d = ch->private_data;
	return d->rw && fdatasync(d->fd) < 0 ? errno : 0;
}

static errcode_t e2fd_close(io_channel ch)
{
	if (--ch->refcount > 0)
		return 0;
	struct e2fd *d = ch->private_data;
	errcode_t e = d->rw && fdatasync(d->fd) < 0 ? errno : 0;
	free(d->slots);
	free(d->data);
	free(d);
	free(ch->name);
	free(ch);
	return e;
}

static errcode_t e2fd_set_option(io_channel ch, const char *option, const char *arg)
{
	return EXT2_ET_INVALID_ARGUMENT;
}

static errcode_t e2fd_get_stats(io_channel ch, io_stats *stats)
{
	struct e2fd *d = ch->private_data;
	*stats = &d->stats;
	return 0;
}

static errcode_t e2fd_discard(io_channel ch, unsigned long long blk, unsigned long long count)
{
	return EXT2_ET_UNIMPLEMENTED;
}

static errcode_t e2fd_cache_readahead(io_channel ch, unsigned long long blk, unsigned long long count)
{
	return 0;
}

static errcode_t e2fd_zeroout(io_channel ch, unsigned long long blk, unsigned long long count)
{
	return EXT2_ET_UNIMPLEMENTED; /* libext2fs then writes zeros itself */
}

static struct struct_io_manager e2fd_manager = {
	.magic = EXT2_ET_MAGIC_IO_MANAGER,
	.name = "space-unpack fd I/O",
	.open = e2fd_open,
	.close = e2fd_close,
	.set_blksize = e2fd_set_blksize,
	.read_blk = e2fd_read_blk,
	.write_blk = e2fd_write_blk,
	.flush = e2fd_flush,
	.write_byte = e2fd_write_byte,
	.set_option = e2fd_set_option,
	.get_stats = e2fd_get_stats,
	.read_blk64 = e2fd_read_blk64,
	.write_blk64 = e2fd_write_blk64,
	.discard = e2fd_discard,
	.cache_readahead = e2fd_cache_readahead,
	.zeroout = e2fd_zeroout,
};

io_manager e2fd_io_manager = &e2fd_manager;

/* name: the descriptor's number ("3"); it is the caller's, never closed here. */
static errcode_t e2fd_open(const char *name, int flags, io_channel *channel)
{
	char *end;
	long fd = strtol(name, &end, 10);
	if (!*name || *end || fd < 0 || fd > 1024)
		return EXT2_ET_BAD_DEVICE_NAME;
	io_channel ch = calloc(1, sizeof(*ch));
	struct e2fd *d = calloc(1, sizeof(*d));
	if (ch)
		ch->name = strdup(name);
	if (d) {
		d->slots = calloc(CACHE_BLOCKS, sizeof(*d->slots));
		d->data = malloc(CACHE_BLOCKS * 1024u);
	}
	if (!ch || !ch->name || !d || !d->slots || !d->data) {
		if (d) {
			free(d->slots);
			free(d->data);
		}
		free(d);
		if (ch)
			free(ch->name);
		free(ch);
		return EXT2_ET_NO_MEMORY;
	}
	d->fd = (int)fd;
	d->rw = flags & IO_FLAG_RW;
	d->bs = 1024;
	d->stats.num_fields = 2;
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = e2fd_io_manager;
	ch->block_size = 1024;
	ch->refcount = 1;
	ch->private_data = d;
	ch->flags = CHANNEL_FLAGS_WRITETHROUGH;
	*channel = ch;
	return 0;
}
