/* SPDX-License-Identifier: Apache-2.0 */
#include "util/uidalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

#define RANGE_FIRST 0x40000000u
#define RANGE_SLOTS 16384u /* up to 0x80000000 */
#define SINGLE_FIRST 0x90000000u
#define SINGLE_SLOTS 0x10000000u

static uint32_t slot_uid(enum uidalloc_kind kind, uint32_t slot)
{
	return kind == UIDALLOC_RANGE ? RANGE_FIRST + slot * UIDALLOC_RANGE_SIZE : SINGLE_FIRST + slot;
}

static int slot_of(enum uidalloc_kind kind, uint32_t uid, uint32_t *ret)
{
	if (kind == UIDALLOC_RANGE) {
		if (uid < RANGE_FIRST || (uid - RANGE_FIRST) % UIDALLOC_RANGE_SIZE ||
		    (uid - RANGE_FIRST) / UIDALLOC_RANGE_SIZE >= RANGE_SLOTS)
			return -EINVAL;
		*ret = (uid - RANGE_FIRST) / UIDALLOC_RANGE_SIZE;
		return 0;
	}
	if (uid < SINGLE_FIRST || uid - SINGLE_FIRST >= SINGLE_SLOTS)
		return -EINVAL;
	*ret = uid - SINGLE_FIRST;
	return 0;
}

static void slot_path(enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%c%u", UIDALLOC_DIR, kind == UIDALLOC_RANGE ? 'r' : 'u', uid);
}

static int ensure_dir(void)
{
	if (mkdir(UIDALLOC_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (lstat(UIDALLOC_DIR, &st) < 0)
		return -errno;
	/* Someone else's directory (or a symlink) there would let them steer the allocation. */
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

/* 0 when created, -EEXIST when taken. */
static int try_slot(enum uidalloc_kind kind, uint32_t uid, const char *owner)
{
	char path[64];
	slot_path(kind, uid, path, sizeof(path));
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int r = util_write_all(fd, owner, strnlen(owner, 255));
	if (r < 0) {
		unlink(path);
		return r;
	}
	return 0;
}

int uidalloc_acquire(enum uidalloc_kind kind, const char *owner, uint32_t *ret_uid)
{
	uint32_t slots = kind == UIDALLOC_RANGE ? RANGE_SLOTS : SINGLE_SLOTS, start;
	int r = ensure_dir();
	if (r < 0)
		return r;
	if ((r = util_random_bytes(&start, sizeof(start))) < 0)
		return r;
	/* A random start keeps probes short while few slots are taken; the walk is bounded so a full (or
	 * hostile-filled) directory ends in -ENOSPC rather than a long scan. */
	uint32_t tries = slots < 65536 ? slots : 65536;
	for (uint32_t i = 0; i < tries; i++) {
		uint32_t uid = slot_uid(kind, (start + i) % slots);
		r = try_slot(kind, uid, owner);
		if (r == 0) {
			*ret_uid = uid;
			return 0;
		}
		if (r != -EEXIST)
			return r;
	}
	return -ENOSPC;
}

int uidalloc_claim(enum uidalloc_kind kind, uint32_t uid, const char *owner)
{
	uint32_t slot;
	int r = slot_of(kind, uid, &slot);
	if (r < 0 || (r = ensure_dir()) < 0)
		return r;
	r = try_slot(kind, uid, owner);
	if (r != -EEXIST)
		return r;
	char cur[256];
	if (uidalloc_owner(kind, uid, cur, sizeof(cur)) == 0 && !strncmp(cur, owner, 255))
		return 0;
	return -EEXIST;
}

int uidalloc_release(enum uidalloc_kind kind, uint32_t uid)
{
	uint32_t slot;
	int r = slot_of(kind, uid, &slot);
	if (r < 0)
		return r;
	char path[64];
	slot_path(kind, uid, path, sizeof(path));
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int uidalloc_owner(enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len)
{
	uint32_t slot;
	int r = slot_of(kind, uid, &slot);
	if (r < 0)
		return r;
	char path[64];
	slot_path(kind, uid, path, sizeof(path));
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len ? len - 1 : 0);
	if (n < 0)
		return -errno;
	if (len)
		buf[n] = '\0';
	return 0;
}
