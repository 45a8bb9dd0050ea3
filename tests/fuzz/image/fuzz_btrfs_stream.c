/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the btrfs send stream decoder and checks (src/unpack/bstream.c) that space-unpack receive
 * runs over every command of a received template before doing it. The input is a stream; when its first
 * byte is odd, each command's checksum is recomputed first, so that mutations reach the attribute parser
 * and the checks behind it. Invariants: no sanitizer report; every attribute of a decoded command lies
 * within it; a command that passes the checks has the attributes its kind needs, relative paths without
 * "." or ".." parts, a clone source that is the stream's own subvolume or its parent, and nothing passes
 * after END.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unpack/bstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check_path(const struct bstream_val *v, bool root_ok)
{
	if (!v->set)
		abort();
	if (v->len == 0) {
		if (!root_ok)
			abort();
		return;
	}
	char p[PATH_MAX];
	bstream_path(v, p, sizeof(p));
	if (p[0] == '/' || strlen(p) != v->len)
		abort();
	for (char *s = p, *e; s; s = e ? e + 1 : NULL) {
		e = strchr(s, '/');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool fix = data[0] & 1;
	data++;
	size--;
	char err[900];
	if (bstream_header(data, size, err, sizeof(err)) < 0)
		return 0;
	uint8_t *buf = malloc(BSTREAM_CMD_HEADER + BSTREAM_MAX_PAYLOAD);
	if (!buf)
		return 0;
	struct bstream_state st;
	memset(&st, 0, sizeof(st));
	size_t off = BSTREAM_HEADER_SIZE;
	while (size - off >= BSTREAM_CMD_HEADER) {
		long plen = bstream_cmd_length(data + off);
		if (plen < 0 || (size_t)plen > size - off - BSTREAM_CMD_HEADER)
			break;
		size_t n = BSTREAM_CMD_HEADER + (size_t)plen;
		memcpy(buf, data + off, n);
		off += n;
		if (fix) {
			static const uint8_t zero[4];
			uint32_t crc = bstream_crc32c(0, buf, 6);
			crc = bstream_crc32c(crc, zero, 4);
			put_le32(buf + 6, bstream_crc32c(crc, buf + BSTREAM_CMD_HEADER, (size_t)plen));
		}
		struct bstream_cmd c;
		if (bstream_decode(buf, n, &c, err, sizeof(err)) < 0)
			break;
		for (int a = 0; a < BA_COUNT; a++)
			if (c.a[a].set && (c.a[a].p < buf + BSTREAM_CMD_HEADER || c.a[a].p + c.a[a].len > buf + n))
				abort();
		bool ended = st.ended;
		if (bstream_check(&c, &st, err, sizeof(err)) < 0)
			break;
		if (ended)
			abort(); /* nothing may pass after END */
		if (c.cmd == BS_END)
			continue;
		bool root_ok = c.cmd == BS_UTIMES || c.cmd == BS_CHOWN || c.cmd == BS_CHMOD;
		check_path(&c.a[BA_PATH], root_ok);
		if (c.cmd == BS_RENAME)
			check_path(&c.a[BA_PATH_TO], false);
		if (c.cmd == BS_LINK)
			check_path(&c.a[BA_PATH_LINK], false);
		if (c.cmd == BS_CLONE) {
			check_path(&c.a[BA_CLONE_PATH], false);
			if (memcmp(c.a[BA_CLONE_UUID].p, st.uuid, 16) &&
			    (!st.incremental || memcmp(c.a[BA_CLONE_UUID].p, st.parent_uuid, 16)))
				abort();
		}
		if (c.cmd == BS_MKNOD || c.cmd == BS_MKSOCK || c.cmd == BS_UPDATE_EXTENT)
			abort();
		(void)bstream_u64(&c.a[BA_FILE_OFFSET]);
		(void)bstream_time(&c.a[BA_MTIME]);
		(void)le32;
	}
	free(buf);
	return 0;
}
