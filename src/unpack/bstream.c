/* SPDX-License-Identifier: Apache-2.0 */
/* The btrfs send stream decoder and checks (bstream.h). */
#include "unpack/bstream.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const cmd_names[BS_CMD_COUNT] = {
	"unspec", "subvol", "snapshot", "mkfile", "mkdir", "mknod", "mkfifo", "mksock", "symlink", "rename", "link",
	"unlink", "rmdir", "set_xattr", "remove_xattr", "write", "clone", "truncate", "chmod", "chown", "utimes", "end",
	"update_extent",
};

const char *bstream_cmd_name(unsigned cmd)
{
	return cmd < BS_CMD_COUNT ? cmd_names[cmd] : "unknown";
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

uint32_t bstream_crc32c(uint32_t crc, const void *data, size_t len)
{
	static uint32_t table[256];
	static _Atomic int ready;
	if (!ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
		ready = 1;
	}
	const uint8_t *p = data;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

int bstream_header(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	if (len < BSTREAM_HEADER_SIZE || memcmp(buf, BSTREAM_MAGIC, sizeof(BSTREAM_MAGIC))) {
		snprintf(err, errlen, "not a btrfs send stream (no \"btrfs-stream\" header)");
		return -EINVAL;
	}
	uint32_t v = le32(buf + sizeof(BSTREAM_MAGIC));
	if (v != 1) {
		snprintf(err, errlen, "btrfs send stream version %u: only version 1 is received", v);
		return -EINVAL;
	}
	return 0;
}

long bstream_cmd_length(const uint8_t *hdr)
{
	uint32_t n = le32(hdr);
	return n > BSTREAM_MAX_PAYLOAD ? -EINVAL : (long)n;
}

int bstream_decode(const uint8_t *buf, size_t len, struct bstream_cmd *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	if (len < BSTREAM_CMD_HEADER) {
		snprintf(err, errlen, "a command cut short (%zu bytes)", len);
		return -EINVAL;
	}
	uint32_t plen = le32(buf);
	if (plen > BSTREAM_MAX_PAYLOAD || plen != len - BSTREAM_CMD_HEADER) {
		snprintf(err, errlen, "a command of %u bytes where %zu are", plen, len - BSTREAM_CMD_HEADER);
		return -EINVAL;
	}
	ret->cmd = le16(buf + 4);
	uint32_t want = le32(buf + 6);
	static const uint8_t zero[4];
	uint32_t crc = bstream_crc32c(0, buf, 6);
	crc = bstream_crc32c(crc, zero, 4);
	crc = bstream_crc32c(crc, buf + BSTREAM_CMD_HEADER, plen);
	if (crc != want) {
		snprintf(err, errlen, "command %s: checksum %08x where the stream says %08x", bstream_cmd_name(ret->cmd), crc,
			 want);
		return -EINVAL;
	}
	if (ret->cmd == BS_UNSPEC || ret->cmd >= BS_CMD_COUNT) {
		snprintf(err, errlen, "unknown command %u (version 1 has 1-%d)", ret->cmd, BS_CMD_COUNT - 1);
		return -EINVAL;
	}
	const uint8_t *p = buf + BSTREAM_CMD_HEADER, *end = p + plen;
	while (p < end) {
		if (end - p < 4) {
			snprintf(err, errlen, "command %s: an attribute header cut short", bstream_cmd_name(ret->cmd));
			return -EINVAL;
		}
		uint16_t type = le16(p), alen = le16(p + 2);
		p += 4;
		if (alen > end - p) {
			snprintf(err, errlen, "command %s: attribute %u of %u bytes past the command's end",
				 bstream_cmd_name(ret->cmd), type, alen);
			return -EINVAL;
		}
		if (type == BA_UNSPEC || type >= BA_COUNT) {
			snprintf(err, errlen, "command %s: unknown attribute %u", bstream_cmd_name(ret->cmd), type);
			return -EINVAL;
		}
		if (ret->a[type].set) {
			snprintf(err, errlen, "command %s: attribute %u twice", bstream_cmd_name(ret->cmd), type);
			return -EINVAL;
		}
		ret->a[type] = (struct bstream_val){ .p = p, .len = alen, .set = true };
		p += alen;
	}
	return 0;
}

uint64_t bstream_u64(const struct bstream_val *v)
{
	return v->set && v->len == 8 ? le64(v->p) : 0;
}

struct bstream_time bstream_time(const struct bstream_val *v)
{
	struct bstream_time t = { 0, 0 };
	if (v->set && v->len == 12) {
		t.sec = (int64_t)le64(v->p);
		t.nsec = le32(v->p + 8);
	}
	return t;
}

void bstream_path(const struct bstream_val *v, char *buf, size_t len)
{
	size_t n = v->set ? v->len : 0;
	if (n >= len)
		n = len - 1;
	memcpy(buf, v->p, n);
	buf[n] = '\0';
}

/* A name in the tree: relative, no "." or ".." part, no empty part, no NUL, under PATH_MAX. */
static bool path_ok(const struct bstream_val *v)
{
	if (!v->set || v->len == 0 || v->len >= PATH_MAX || memchr(v->p, '\0', v->len) || v->p[0] == '/')
		return false;
	const uint8_t *p = v->p, *end = v->p + v->len;
	while (p < end) {
		const uint8_t *s = memchr(p, '/', (size_t)(end - p));
		size_t n = s ? (size_t)(s - p) : (size_t)(end - p);
		if (n == 0 || n > NAME_MAX || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n + (s ? 1 : 0);
		if (s && p == end)
			return false; /* a trailing slash */
	}
	return true;
}

struct need {
	uint8_t attr;
	uint8_t size; /* 0: a path; 255: any (data, xattr values); else exactly */
};

static const struct {
	struct need n[7];
} needs[BS_CMD_COUNT] = {
	[BS_SUBVOL] = { { { BA_PATH, 0 }, { BA_UUID, 16 }, { BA_CTRANSID, 8 } } },
	[BS_SNAPSHOT] = { { { BA_PATH, 0 }, { BA_UUID, 16 }, { BA_CTRANSID, 8 }, { BA_CLONE_UUID, 16 },
			    { BA_CLONE_CTRANSID, 8 } } },
	[BS_MKFILE] = { { { BA_PATH, 0 } } },
	[BS_MKDIR] = { { { BA_PATH, 0 } } },
	[BS_MKNOD] = { { { BA_PATH, 0 }, { BA_MODE, 8 }, { BA_RDEV, 8 } } },
	[BS_MKFIFO] = { { { BA_PATH, 0 } } },
	[BS_MKSOCK] = { { { BA_PATH, 0 } } },
	[BS_SYMLINK] = { { { BA_PATH, 0 }, { BA_PATH_LINK, 255 } } },
	[BS_RENAME] = { { { BA_PATH, 0 }, { BA_PATH_TO, 0 } } },
	[BS_LINK] = { { { BA_PATH, 0 }, { BA_PATH_LINK, 0 } } },
	[BS_UNLINK] = { { { BA_PATH, 0 } } },
	[BS_RMDIR] = { { { BA_PATH, 0 } } },
	[BS_SET_XATTR] = { { { BA_PATH, 0 }, { BA_XATTR_NAME, 255 }, { BA_XATTR_DATA, 255 } } },
	[BS_REMOVE_XATTR] = { { { BA_PATH, 0 }, { BA_XATTR_NAME, 255 } } },
	[BS_WRITE] = { { { BA_PATH, 0 }, { BA_FILE_OFFSET, 8 }, { BA_DATA, 255 } } },
	[BS_CLONE] = { { { BA_PATH, 0 }, { BA_FILE_OFFSET, 8 }, { BA_CLONE_LEN, 8 }, { BA_CLONE_UUID, 16 },
			 { BA_CLONE_CTRANSID, 8 }, { BA_CLONE_PATH, 0 }, { BA_CLONE_OFFSET, 8 } } },
	[BS_TRUNCATE] = { { { BA_PATH, 0 }, { BA_SIZE, 8 } } },
	[BS_CHMOD] = { { { BA_PATH, 0 }, { BA_MODE, 8 } } },
	[BS_CHOWN] = { { { BA_PATH, 0 }, { BA_UID, 8 }, { BA_GID, 8 } } },
	[BS_UTIMES] = { { { BA_PATH, 0 }, { BA_ATIME, 12 }, { BA_MTIME, 12 }, { BA_CTIME, 12 } } },
	[BS_END] = { { { 0, 0 } } },
};

int bstream_check(const struct bstream_cmd *c, struct bstream_state *st, char *err, size_t errlen)
{
	const char *name = bstream_cmd_name(c->cmd);
	if (st->ended) {
		snprintf(err, errlen, "command %s after the stream's end (one subvolume a stream)", name);
		return -EINVAL;
	}
	bool first = c->cmd == BS_SUBVOL || c->cmd == BS_SNAPSHOT;
	if (first == st->started) {
		snprintf(err, errlen, first ? "a second %s command (one subvolume a stream)" :
					      "command %s before the subvolume's (subvol or snapshot first)", name);
		return -EINVAL;
	}
	switch (c->cmd) {
	case BS_MKNOD:
		snprintf(err, errlen, "a device node in the stream: templates hold none");
		return -EOPNOTSUPP;
	case BS_MKSOCK:
		snprintf(err, errlen, "a socket in the stream: templates hold none");
		return -EOPNOTSUPP;
	case BS_UPDATE_EXTENT:
		snprintf(err, errlen, "a stream made without its data (update_extent): send it with its data");
		return -EOPNOTSUPP;
	default:
		break;
	}
	/* The root itself is named by an empty path in UTIMES, CHOWN and CHMOD of "." (the kernel sends "");
	 * allow exactly that for those three. */
	bool root_ok = c->cmd == BS_UTIMES || c->cmd == BS_CHOWN || c->cmd == BS_CHMOD;
	for (size_t i = 0; i < 7 && needs[c->cmd].n[i].attr; i++) {
		const struct need *n = &needs[c->cmd].n[i];
		const struct bstream_val *v = &c->a[n->attr];
		if (!v->set) {
			snprintf(err, errlen, "command %s without its attribute %u", name, n->attr);
			return -EINVAL;
		}
		if (n->size == 0) {
			bool root = root_ok && n->attr == BA_PATH && v->len == 0;
			if (!root && !path_ok(v)) {
				char shown[80];
				size_t k = v->len < sizeof(shown) - 1 ? v->len : sizeof(shown) - 1;
				for (size_t j = 0; j < k; j++)
					shown[j] = v->p[j] >= 0x20 && v->p[j] < 0x7f ? (char)v->p[j] : '?';
				shown[k] = '\0';
				snprintf(err, errlen, "command %s: the name '%s' leaves the tree or is malformed", name, shown);
				return -EINVAL;
			}
		} else if (n->size != 255 && v->len != n->size) {
			snprintf(err, errlen, "command %s: attribute %u of %u bytes, not %u", name, n->attr, v->len, n->size);
			return -EINVAL;
		}
	}
	if (c->cmd == BS_SYMLINK && (c->a[BA_PATH_LINK].len == 0 || c->a[BA_PATH_LINK].len >= PATH_MAX ||
				     memchr(c->a[BA_PATH_LINK].p, '\0', c->a[BA_PATH_LINK].len))) {
		snprintf(err, errlen, "command symlink: a target empty, too long or holding a NUL");
		return -EINVAL;
	}
	if ((c->cmd == BS_SET_XATTR || c->cmd == BS_REMOVE_XATTR) &&
	    (c->a[BA_XATTR_NAME].len == 0 || c->a[BA_XATTR_NAME].len > 255 ||
	     memchr(c->a[BA_XATTR_NAME].p, '\0', c->a[BA_XATTR_NAME].len))) {
		snprintf(err, errlen, "command %s: an attribute name empty, over 255 bytes or holding a NUL", name);
		return -EINVAL;
	}
	if (c->cmd == BS_WRITE || c->cmd == BS_CLONE) {
		uint64_t off = bstream_u64(&c->a[BA_FILE_OFFSET]);
		uint64_t n = c->cmd == BS_WRITE ? c->a[BA_DATA].len : bstream_u64(&c->a[BA_CLONE_LEN]);
		uint64_t src = c->cmd == BS_CLONE ? bstream_u64(&c->a[BA_CLONE_OFFSET]) : 0;
		if (off > (uint64_t)INT64_MAX - n || src > (uint64_t)INT64_MAX - n) {
			snprintf(err, errlen, "command %s: offset and length past a file's largest size", name);
			return -EINVAL;
		}
	}
	if (c->cmd == BS_TRUNCATE && bstream_u64(&c->a[BA_SIZE]) > (uint64_t)INT64_MAX) {
		snprintf(err, errlen, "command truncate: a size past a file's largest");
		return -EINVAL;
	}
	if (first) {
		st->started = true;
		st->incremental = c->cmd == BS_SNAPSHOT;
		memcpy(st->uuid, c->a[BA_UUID].p, 16);
		if (st->incremental)
			memcpy(st->parent_uuid, c->a[BA_CLONE_UUID].p, 16);
	}
	if (c->cmd == BS_CLONE && memcmp(c->a[BA_CLONE_UUID].p, st->uuid, 16) &&
	    (!st->incremental || memcmp(c->a[BA_CLONE_UUID].p, st->parent_uuid, 16))) {
		snprintf(err, errlen, "command clone: from a subvolume that is neither this one nor its parent");
		return -EINVAL;
	}
	if (c->cmd == BS_END)
		st->ended = true;
	st->commands++;
	return 0;
}
