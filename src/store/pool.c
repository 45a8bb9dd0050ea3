/* SPDX-License-Identifier: Apache-2.0 */
#include "store/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/loop.h"
#include "util/util.h"

int store_pool_loop_create(const char *image, uint64_t size, char *errbuf, size_t errlen)
{
	if (size < POOL_MIN_LOOP_BYTES) {
		snprintf(errbuf, errlen, "loop pool of %llu bytes is too small: give at least 256M",
			 (unsigned long long)size);
		return -EINVAL;
	}
	int fd = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int r = -errno;
		snprintf(errbuf, errlen, "create %s: %s", image, strerror(errno));
		return r;
	}
	int r = 0;
	if (ftruncate(fd, (off_t)size) < 0) {
		r = -errno;
		snprintf(errbuf, errlen, "size %s: %s", image, strerror(errno));
	}
	close(fd);
	if (r == 0) {
		const char *argv[] = { "mkfs.btrfs", "-q", "-f", "-L", "space-pool", image, NULL };
		_cleanup_free_ char *out = NULL;
		r = util_run(argv, &out);
		if (r == -ENOENT)
			snprintf(errbuf, errlen, "mkfs.btrfs not found: install btrfs-progs");
		else if (r < 0)
			snprintf(errbuf, errlen, "mkfs.btrfs %s failed: %s", image, out ? out : "");
	}
	if (r < 0)
		unlink(image);
	return r;
}

bool store_pool_is_mounted(const char *mountpoint)
{
	struct statfs sf;
	if (statfs(mountpoint, &sf) < 0 || sf.f_type != BTRFS_SUPER_MAGIC)
		return false;
	/* A mount point's device differs from its parent's (a subvolume's does too, but then the parent is
	 * btrfs as well and the pool directory is not a subvolume we made). */
	char parent[PATH_MAX];
	if (snprintf(parent, sizeof(parent), "%s/..", mountpoint) >= (int)sizeof(parent))
		return false;
	struct stat a, b;
	if (stat(mountpoint, &a) < 0 || stat(parent, &b) < 0)
		return false;
	struct statfs pf;
	if (statfs(parent, &pf) == 0 && pf.f_type == BTRFS_SUPER_MAGIC)
		return a.st_dev != b.st_dev && a.st_ino == 256;
	return a.st_dev != b.st_dev;
}

int store_pool_loop_mount(const char *image, const char *mountpoint, char *errbuf, size_t errlen)
{
	int r = util_mkdir_p(mountpoint, 0700);
	if (r < 0) {
		snprintf(errbuf, errlen, "create %s: %s", mountpoint, strerror(-r));
		return r;
	}
	char dev[64];
	int fd = util_loop_attach(image, false, dev, sizeof(dev));
	if (fd < 0) {
		snprintf(errbuf, errlen, "attach %s to a loop device: %s", image, strerror(-fd));
		return fd;
	}
	r = 0;
	if (mount(dev, mountpoint, "btrfs", MS_NOSUID | MS_NODEV, "user_subvol_rm_allowed") < 0) {
		r = -errno;
		snprintf(errbuf, errlen, "mount %s (%s) on %s: %s", image, dev, mountpoint, strerror(errno));
	}
	/* With autoclear, closing our fd releases the device if the mount failed and keeps it while
	 * mounted. */
	close(fd);
	return r;
}

int store_pool_unmount(const char *mountpoint)
{
	if (!store_pool_is_mounted(mountpoint))
		return 0;
	if (umount2(mountpoint, 0) < 0)
		return -errno;
	return 0;
}

int store_pool_prepare(const char *root)
{
	static const char *const dirs[] = { "templates", "sandboxes", "checkpoints", ".tmp", "run", "locks" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/%s", root, dirs[i]) >= (int)sizeof(p))
			return -ENAMETOOLONG;
		int r = util_mkdir_p(p, 0700);
		if (r < 0)
			return r;
	}
	return 0;
}
