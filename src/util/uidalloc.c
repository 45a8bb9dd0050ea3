/* SPDX-License-Identifier: Apache-2.0 */
#include "util/uidalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

#define RANGE_FIRST 0x40000000u
#define RANGE_SLOTS 16384u /* up to 0x80000000 */
#define SINGLE_FIRST 0x90000000u
#define SINGLE_SLOTS 0x10000000u
#define TMP_PREFIX ".t"
#define TMP_STALE_S 60

static uint32_t slot_uid(enum uidalloc_kind kind, uint32_t slot)
{
	return kind == UIDALLOC_RANGE ? RANGE_FIRST + slot * UIDALLOC_RANGE_SIZE : SINGLE_FIRST + slot;
}

static int slot_check(enum uidalloc_kind kind, uint32_t uid)
{
	if (kind == UIDALLOC_RANGE)
		return uid >= RANGE_FIRST && (uid - RANGE_FIRST) % UIDALLOC_RANGE_SIZE == 0 &&
				       (uid - RANGE_FIRST) / UIDALLOC_RANGE_SIZE < RANGE_SLOTS
			       ? 0
			       : -EINVAL;
	if (kind == UIDALLOC_SINGLE)
		return uid >= SINGLE_FIRST && uid - SINGLE_FIRST < SINGLE_SLOTS ? 0 : -EINVAL;
	return -EINVAL;
}

bool uidalloc_slot_of(uint32_t uid, enum uidalloc_kind *ret_kind, uint32_t *ret_first)
{
	if (uid >= RANGE_FIRST && (uid - RANGE_FIRST) / UIDALLOC_RANGE_SIZE < RANGE_SLOTS) {
		*ret_kind = UIDALLOC_RANGE;
		*ret_first = uid - (uid - RANGE_FIRST) % UIDALLOC_RANGE_SIZE;
		return true;
	}
	if (uid >= SINGLE_FIRST && uid - SINGLE_FIRST < SINGLE_SLOTS) {
		*ret_kind = UIDALLOC_SINGLE;
		*ret_first = uid;
		return true;
	}
	return false;
}

static void slot_name(enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len)
{
	snprintf(buf, len, "%c%u", kind == UIDALLOC_RANGE ? 'r' : 'u', uid);
}

static int owner_check(const char *owner)
{
	if (!owner || !*owner || strchr(owner, '\n'))
		return -EINVAL;
	return strlen(owner) > UIDALLOC_OWNER_MAX ? -ENAMETOOLONG : 0;
}

/* Opens UIDALLOC_DIR (creating it), refusing one that others could write into or that is a symlink. */
static int open_dir(bool create)
{
	if (create && mkdir(UIDALLOC_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	_cleanup_close_ int fd = open(UIDALLOC_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Someone else's directory there would let them steer (or exhaust) the allocation. */
	if (st.st_uid != 0 || (st.st_mode & 022))
		return -EPERM;
	return TAKE_FD(fd);
}

/* Writes owner into a fresh temporary file of dir; its name goes to tmp. */
static int write_tmp(int dir, const char *owner, char *tmp, size_t len)
{
	uint64_t rnd;
	int r = util_random_bytes(&rnd, sizeof(rnd));
	if (r < 0)
		return r;
	snprintf(tmp, len, TMP_PREFIX "%d-%016llx", (int)getpid(), (unsigned long long)rnd);
	_cleanup_close_ int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	r = util_write_all(fd, owner, strlen(owner));
	if (r < 0)
		(void)unlinkat(dir, tmp, 0);
	return r;
}

/* 0 when the slot is ours now (its file appeared with owner in it), -EEXIST when taken. */
static int try_slot(int dir, enum uidalloc_kind kind, uint32_t uid, const char *owner)
{
	char tmp[64], name[32];
	int r = write_tmp(dir, owner, tmp, sizeof(tmp));
	if (r < 0)
		return r;
	slot_name(kind, uid, name, sizeof(name));
	r = linkat(dir, tmp, dir, name, 0) < 0 ? -errno : 0;
	(void)unlinkat(dir, tmp, 0);
	return r;
}

static int read_owner(int dir, enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len)
{
	char name[32];
	slot_name(kind, uid, name, sizeof(name));
	_cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (len == 0)
		return 0;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* 0: the slot is held by exactly owner; -ESTALE: by someone else; -ENOENT: free. */
static int owned_by(int dir, enum uidalloc_kind kind, uint32_t uid, const char *owner)
{
	char cur[UIDALLOC_OWNER_MAX + 2];
	int r = read_owner(dir, kind, uid, cur, sizeof(cur));
	if (r < 0)
		return r;
	return strcmp(cur, owner) ? -ESTALE : 0;
}

int uidalloc_acquire(enum uidalloc_kind kind, const char *owner, uint32_t *ret_uid)
{
	int r = owner_check(owner);
	if (r < 0 || (kind != UIDALLOC_RANGE && kind != UIDALLOC_SINGLE))
		return r < 0 ? r : -EINVAL;
	_cleanup_close_ int dir = open_dir(true);
	if (dir < 0)
		return dir;
	uint32_t slots = kind == UIDALLOC_RANGE ? RANGE_SLOTS : SINGLE_SLOTS, start;
	if ((r = util_random_bytes(&start, sizeof(start))) < 0)
		return r;
	/* A random start keeps probes short while few slots are taken; the walk is bounded so a full (or
	 * hostile-filled) directory ends in -ENOSPC rather than a long scan. */
	uint32_t tries = slots < 65536 ? slots : 65536;
	for (uint32_t i = 0; i < tries; i++) {
		uint32_t uid = slot_uid(kind, (uint32_t)(((uint64_t)start + i) % slots));
		r = try_slot(dir, kind, uid, owner);
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
	int r = slot_check(kind, uid);
	if (r < 0 || (r = owner_check(owner)) < 0)
		return r;
	_cleanup_close_ int dir = open_dir(true);
	if (dir < 0)
		return dir;
	/* A slot released between our try and our look is tried again (a few times: each needs a race). */
	for (int i = 0; i < 4; i++) {
		r = try_slot(dir, kind, uid, owner);
		if (r != -EEXIST)
			return r;
		r = owned_by(dir, kind, uid, owner);
		if (r != -ENOENT)
			return r == -ESTALE ? -EEXIST : r;
	}
	return -EEXIST;
}

int uidalloc_set_owner(enum uidalloc_kind kind, uint32_t uid, const char *old_owner, const char *new_owner)
{
	int r = slot_check(kind, uid);
	if (r < 0 || (r = owner_check(old_owner)) < 0 || (r = owner_check(new_owner)) < 0)
		return r;
	_cleanup_close_ int dir = open_dir(false);
	if (dir < 0)
		return dir == -ENOENT ? -ENOENT : dir;
	if ((r = owned_by(dir, kind, uid, old_owner)) < 0)
		return r;
	char tmp[64], name[32];
	if ((r = write_tmp(dir, new_owner, tmp, sizeof(tmp))) < 0)
		return r;
	slot_name(kind, uid, name, sizeof(name));
	/* rename() replaces the slot file in one step: it never looks free to an acquirer. */
	if (renameat(dir, tmp, dir, name) < 0) {
		r = -errno;
		(void)unlinkat(dir, tmp, 0);
		return r;
	}
	return 0;
}

int uidalloc_release(enum uidalloc_kind kind, uint32_t uid, const char *owner)
{
	int r = slot_check(kind, uid);
	if (r < 0)
		return r;
	_cleanup_close_ int dir = open_dir(false);
	if (dir < 0)
		return dir == -ENOENT ? 0 : dir;
	if (owner && (r = owned_by(dir, kind, uid, owner)) < 0)
		return r == -ENOENT || r == -ESTALE ? 0 : r;
	char name[32];
	slot_name(kind, uid, name, sizeof(name));
	return unlinkat(dir, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

int uidalloc_owner(enum uidalloc_kind kind, uint32_t uid, char *buf, size_t len)
{
	int r = slot_check(kind, uid);
	if (r < 0)
		return r;
	_cleanup_close_ int dir = open_dir(false);
	if (dir < 0)
		return dir;
	return read_owner(dir, kind, uid, buf, len);
}

int uidalloc_foreach(uidalloc_visit_fn fn, void *userdata)
{
	_cleanup_close_ int dfd = open_dir(false);
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return -errno;
	_cleanup_closedir_ DIR *d = fdopendir(dup);
	if (!d) {
		int r = -errno;
		close(dup);
		return r;
	}
	struct dirent *de;
	int r = 0;
	time_t now = time(NULL);
	while (r >= 0 && (de = readdir(d))) {
		struct stat st;
		if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && now - st.st_mtime > TMP_STALE_S)
				(void)unlinkat(dfd, de->d_name, 0);
			continue;
		}
		enum uidalloc_kind kind;
		if (de->d_name[0] == 'r')
			kind = UIDALLOC_RANGE;
		else if (de->d_name[0] == 'u')
			kind = UIDALLOC_SINGLE;
		else
			continue;
		uint64_t uid;
		if (util_parse_uint(de->d_name + 1, 0, UINT32_MAX, &uid) < 0 || slot_check(kind, (uint32_t)uid) < 0)
			continue;
		char name[32];
		slot_name(kind, (uint32_t)uid, name, sizeof(name));
		if (strcmp(name, de->d_name))
			continue; /* "r0100" and the like: not a name we make */
		char owner[UIDALLOC_OWNER_MAX + 2];
		if (read_owner(dfd, kind, (uint32_t)uid, owner, sizeof(owner)) < 0)
			continue; /* released meanwhile */
		r = fn(kind, (uint32_t)uid, owner, userdata);
	}
	return r < 0 ? r : 0;
}
