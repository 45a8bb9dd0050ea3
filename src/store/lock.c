/* SPDX-License-Identifier: Apache-2.0 */
#include "store/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

static bool id_valid(const char *id)
{
	size_t n = id ? strnlen(id, 64) : 0;
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
			return false;
	return true;
}

int store_lock_path(const char *state_dir, const char *id, char *buf, size_t len)
{
	if (!state_dir || !id_valid(id))
		return -EINVAL;
	int n = snprintf(buf, len, "%s/locks/%s.lock", state_dir, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Whether fd still is the file at path (store_lock_remove may have unlinked it while we waited). */
static bool still_linked(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int store_lock_take(const char *state_dir, const char *id, unsigned wait_ms)
{
	char path[4096], dir[4096];
	int r = store_lock_path(state_dir, id, path, sizeof(path));
	if (r < 0)
		return r;
	snprintf(dir, sizeof(dir), "%s/locks", state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	int64_t deadline = mono_ms() + wait_ms;
	unsigned nap_ms = 1;
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (still_linked(fd, path))
				return fd;
			close(fd); /* removed by its last holder: take the fresh file instead */
			continue;
		}
		int e = errno;
		close(fd);
		if (e != EWOULDBLOCK && e != EINTR)
			return -e;
		if (mono_ms() >= deadline)
			return -EBUSY;
		/* Polling with a growing nap keeps the wait bounded (a blocking flock could not be). */
		struct timespec ts = { 0, (long)nap_ms * 1000000L };
		nanosleep(&ts, NULL);
		if (nap_ms < 50)
			nap_ms *= 2;
	}
}

void store_lock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}

void store_lock_remove(const char *state_dir, const char *id, int fd)
{
	char path[4096];
	if (fd >= 0 && store_lock_path(state_dir, id, path, sizeof(path)) == 0 && still_linked(fd, path))
		(void)unlink(path);
}
