/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A btrfs send stream (version 1), read as hostile input: the decoder (one command at a time: its
 * checksum, its attributes within its bounds), the checks every command passes before anything is done
 * with it (bstream_check: the attributes it needs, names that stay inside the tree, the order of the
 * stream), and the applier that space-unpack receive runs confined (bstream_apply.c). Shared by the helper
 * and the fuzz target; nothing here opens or writes anything.
 *
 * The stream: "btrfs-stream\0", a little-endian u32 version; then commands, each a 10-byte header (u32
 * length of the payload, u16 command, u32 crc32c of header and payload with the crc field zero) and the
 * payload, a list of attributes (u16 type, u16 length, the value).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BSTREAM_MAGIC "btrfs-stream"
#define BSTREAM_HEADER_SIZE 17 /* the magic with its NUL, the version */
#define BSTREAM_CMD_HEADER 10
#define BSTREAM_MAX_PAYLOAD (256u << 10) /* version 1 sends at most 64 KiB of data a command */

enum bstream_cmd_kind {
	BS_UNSPEC, BS_SUBVOL, BS_SNAPSHOT, BS_MKFILE, BS_MKDIR, BS_MKNOD, BS_MKFIFO, BS_MKSOCK, BS_SYMLINK,
	BS_RENAME, BS_LINK, BS_UNLINK, BS_RMDIR, BS_SET_XATTR, BS_REMOVE_XATTR, BS_WRITE, BS_CLONE, BS_TRUNCATE,
	BS_CHMOD, BS_CHOWN, BS_UTIMES, BS_END, BS_UPDATE_EXTENT,
	BS_CMD_COUNT
};

enum bstream_attr_kind {
	BA_UNSPEC, BA_UUID, BA_CTRANSID, BA_INO, BA_SIZE, BA_MODE, BA_UID, BA_GID, BA_RDEV, BA_CTIME, BA_MTIME,
	BA_ATIME, BA_OTIME, BA_XATTR_NAME, BA_XATTR_DATA, BA_PATH, BA_PATH_TO, BA_PATH_LINK, BA_FILE_OFFSET,
	BA_DATA, BA_CLONE_UUID, BA_CLONE_CTRANSID, BA_CLONE_PATH, BA_CLONE_OFFSET, BA_CLONE_LEN,
	BA_COUNT
};

struct bstream_val {
	const uint8_t *p; /* into the command's payload */
	uint16_t len;
	bool set;
};

struct bstream_cmd {
	unsigned cmd;
	struct bstream_val a[BA_COUNT];
};

/* A time attribute: seconds and nanoseconds. */
struct bstream_time {
	int64_t sec;
	uint32_t nsec;
};

/* Where a stream is: what came first, and whether it ended. */
struct bstream_state {
	bool started;          /* the first command (SUBVOL or SNAPSHOT) was seen */
	bool incremental;      /* it was SNAPSHOT */
	bool ended;            /* END was seen: nothing may follow */
	uint8_t uuid[16];      /* the stream's subvolume */
	uint8_t parent_uuid[16];
	uint64_t commands;
};

const char *bstream_cmd_name(unsigned cmd);

/* The stream's header: 0 when buf (BSTREAM_HEADER_SIZE bytes) is a version 1 stream, else -EINVAL with
 * err. */
int bstream_header(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* A command's length from its header (hdr: BSTREAM_CMD_HEADER bytes): the payload's size, or -EINVAL over
 * BSTREAM_MAX_PAYLOAD. */
long bstream_cmd_length(const uint8_t *hdr);

/* Decodes one command (buf: its header and payload, len bytes): the checksum, every attribute within the
 * payload, each attribute at most once, known types only. 0 with *ret (pointing into buf), or -EINVAL. */
int bstream_decode(const uint8_t *buf, size_t len, struct bstream_cmd *ret, char *err, size_t errlen);

/* Whether the decoded command may be done at this point of the stream: the attributes its kind needs, of
 * their sizes; every path relative, without "." or ".." components, empty parts or a NUL, under PATH_MAX;
 * SUBVOL or SNAPSHOT first and only first, nothing after END; no device node, socket or UPDATE_EXTENT
 * (a stream made without data). Updates st. 0, or -EINVAL / -EOPNOTSUPP with err. */
int bstream_check(const struct bstream_cmd *c, struct bstream_state *st, char *err, size_t errlen);

/* A checked attribute's value. */
uint64_t bstream_u64(const struct bstream_val *v);
struct bstream_time bstream_time(const struct bstream_val *v);
/* A path attribute as a C string into buf (checked: fits). */
void bstream_path(const struct bstream_val *v, char *buf, size_t len);

/* crc32c (Castagnoli), the raw update btrfs uses (no inversion before or after). */
uint32_t bstream_crc32c(uint32_t crc, const void *data, size_t len);
