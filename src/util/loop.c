/* SPDX-License-Identifier: Apache-2.0 */
#include "util/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

int util_loop_attach(const char *image, bool read_only, char *ret_dev, size_t devlen)
{
	_cleanup_close_ int file = open(image, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (file < 0)
		return -errno;
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	/* Another process may grab the same free device between GET_FREE and CONFIGURE: retry then. */
	for (int attempt = 0; attempt < 64; attempt++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return -errno;
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		int fd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		struct loop_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned)file;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0);
		snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", image);
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
			snprintf(ret_dev, devlen, "%s", dev);
			return fd;
		}
		int err = errno;
		close(fd);
		if (err != EBUSY)
			return -err;
	}
	return -EBUSY;
}

/* Whether a loop device is bound to the file (dev, ino): paths in sysfs are as seen from the mount
 * namespace that attached it, so compare identities instead. */
static bool loop_backs(dev_t dev, ino_t ino)
{
	_cleanup_closedir_ DIR *d = opendir("/sys/block");
	if (!d)
		return false;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char p[300];
		snprintf(p, sizeof(p), "/dev/%s", de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct loop_info64 info;
		int r = ioctl(fd, LOOP_GET_STATUS64, &info);
		close(fd);
		if (r == 0 && info.lo_device == dev && info.lo_inode == ino)
			return true;
	}
	return false;
}

int util_loop_wait_released(const char *image, int timeout_ms)
{
	struct stat st;
	if (stat(image, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	for (int waited = 0;; waited += 10) {
		if (!loop_backs(st.st_dev, st.st_ino))
			return 0;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		usleep(10000);
	}
}
