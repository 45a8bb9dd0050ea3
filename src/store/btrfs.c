/* SPDX-License-Identifier: Apache-2.0 */
#include "store/btrfs.h"

#include <btrfsutil.h>
#include <errno.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/* libbtrfsutil leaves errno set on failure; fall back to EIO when it does not. */
static int btrfs_err(enum btrfs_util_error e)
{
	if (e == BTRFS_UTIL_OK)
		return 0;
	if (e == BTRFS_UTIL_ERROR_NOT_BTRFS || e == BTRFS_UTIL_ERROR_NOT_SUBVOLUME)
		return errno ? -errno : -EMEDIUMTYPE;
	return errno ? -errno : -EIO;
}

int store_btrfs_check(const char *path)
{
	struct statfs sf;
	if (statfs(path, &sf) < 0)
		return -errno;
	return sf.f_type == BTRFS_SUPER_MAGIC ? 0 : -EMEDIUMTYPE;
}

bool store_btrfs_is_subvolume(const char *path)
{
	errno = 0;
	return btrfs_util_is_subvolume(path) == BTRFS_UTIL_OK;
}

int store_btrfs_subvolume_create(const char *path)
{
	errno = 0;
	return btrfs_err(btrfs_util_create_subvolume(path, 0, NULL, NULL));
}

int store_btrfs_snapshot(const char *src, const char *dst, bool read_only)
{
	errno = 0;
	int flags = read_only ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0;
	return btrfs_err(btrfs_util_create_snapshot(src, dst, flags, NULL, NULL));
}

int store_btrfs_set_read_only(const char *path, bool read_only)
{
	errno = 0;
	return btrfs_err(btrfs_util_set_subvolume_read_only(path, read_only));
}

int store_btrfs_subvolume_delete(const char *path)
{
	if (access(path, F_OK) < 0)
		return errno == ENOENT ? 0 : -errno;
	bool ro = false;
	errno = 0;
	if (btrfs_util_get_subvolume_read_only(path, &ro) == BTRFS_UTIL_OK && ro)
		(void)btrfs_util_set_subvolume_read_only(path, false);
	errno = 0;
	int r = btrfs_err(btrfs_util_delete_subvolume(path, BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE));
	return r == -ENOENT ? 0 : r;
}
