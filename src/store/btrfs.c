/* SPDX-License-Identifier: Apache-2.0 */
#include "store/btrfs.h"

#include <btrfsutil.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "util/cleanup.h"

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
	/* Deleted as it is first: asking for its flags takes the file system's subvolume lock, which every
	 * delete holds for writing, so each destroy waited for the others twice. A read-only one whose delete
	 * failed (a subvolume inside it cannot be unlinked from it) is made writable and deleted again. */
	errno = 0;
	int r = btrfs_err(btrfs_util_delete_subvolume(path, BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE));
	if (r < 0 && r != -ENOENT) {
		bool ro = false;
		errno = 0;
		if (btrfs_util_get_subvolume_read_only(path, &ro) == BTRFS_UTIL_OK && ro &&
		    btrfs_util_set_subvolume_read_only(path, false) == BTRFS_UTIL_OK) {
			errno = 0;
			r = btrfs_err(btrfs_util_delete_subvolume(path, BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE));
		}
	}
	return r == -ENOENT ? 0 : r;
}

int store_btrfs_quota_mode(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct btrfs_ioctl_fs_info_args fi;
	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return -errno;
	char p[128];
	const unsigned char *u = fi.fsid;
	snprintf(p, sizeof(p),
		 "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/qgroups/mode", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	_cleanup_close_ int mfd = open(p, O_RDONLY | O_CLOEXEC);
	if (mfd < 0) {
		if (errno != ENOENT)
			return -errno;
		/* No qgroups directory: quotas are off (the mode file exists on kernels that have simple quotas). */
		*strrchr(p, '/') = 0;
		return access(p, F_OK) == 0 ? STORE_QUOTA_FULL : STORE_QUOTA_NONE;
	}
	char mode[32] = "";
	ssize_t n = read(mfd, mode, sizeof(mode) - 1);
	if (n < 0)
		return -errno;
	mode[n] = 0;
	if (!strncmp(mode, "squota", 6))
		return STORE_QUOTA_SIMPLE;
	if (!strncmp(mode, "qgroup", 6))
		return STORE_QUOTA_FULL;
	return STORE_QUOTA_NONE;
}

#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4
#endif

int store_btrfs_squota_enable(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct btrfs_ioctl_quota_ctl_args a = { .cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA };
	return ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) < 0 ? -errno : 0;
}

int store_btrfs_qgroup_limit(const char *subvol, uint64_t bytes)
{
	_cleanup_close_ int fd = open(subvol, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct btrfs_ioctl_qgroup_limit_args a;
	memset(&a, 0, sizeof(a));
	a.qgroupid = 0; /* the subvolume fd names */
	a.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
	a.lim.max_rfer = bytes ? bytes : (uint64_t)-1;
	return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0 ? -errno : 0;
}

/* One item of the quota tree (key type, offset: the qgroup id) into buf. */
static int quota_item(int fd, uint8_t type, uint64_t qgroupid, void *buf, size_t len)
{
	struct btrfs_ioctl_search_args a;
	memset(&a, 0, sizeof(a));
	struct btrfs_ioctl_search_key *k = &a.key;
	k->tree_id = BTRFS_QUOTA_TREE_OBJECTID;
	k->min_type = k->max_type = type;
	k->min_offset = k->max_offset = qgroupid;
	k->max_transid = (uint64_t)-1;
	k->nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &a) < 0)
		return -errno;
	if (k->nr_items < 1)
		return -ENOENT;
	const struct btrfs_ioctl_search_header *h = (const void *)a.buf;
	if (h->type != type || h->offset != qgroupid || h->len < len || sizeof(*h) + h->len > sizeof(a.buf))
		return -ENOENT;
	memcpy(buf, a.buf + sizeof(*h), len);
	return 0;
}

int store_btrfs_qgroup_usage(const char *subvol, uint64_t *ret_bytes, uint64_t *ret_cap)
{
	_cleanup_close_ int fd = open(subvol, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint64_t id = 0;
	errno = 0;
	int r = btrfs_err(btrfs_util_subvolume_id_fd(fd, &id));
	if (r < 0)
		return r;
	/* struct btrfs_qgroup_info_item: generation, rfer, ...; btrfs_qgroup_limit_item: flags, max_rfer, ...
	 * (little-endian on disk) */
	uint64_t info[2], lim[2] = { 0, 0 };
	if ((r = quota_item(fd, BTRFS_QGROUP_INFO_KEY, id, info, sizeof(info))) < 0)
		return r;
	if (quota_item(fd, BTRFS_QGROUP_LIMIT_KEY, id, lim, sizeof(lim)) < 0)
		lim[0] = 0;
	lim[0] = le64toh(lim[0]);
	uint64_t cap = (lim[0] & BTRFS_QGROUP_LIMIT_MAX_RFER) ? le64toh(lim[1]) : 0;
	*ret_bytes = le64toh(info[1]);
	*ret_cap = cap == (uint64_t)-1 ? 0 : cap;
	return 0;
}
