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

/* Whether loop device path (/dev/loopN) is bound to the file (dev, ino). */
static bool dev_backs(const char *path, dev_t dev, ino_t ino)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct loop_info64 info;
	int r = ioctl(fd, LOOP_GET_STATUS64, &info);
	close(fd);
	return r == 0 && info.lo_device == dev && info.lo_inode == ino;
}

/* Whether a loop device is bound to the file (dev, ino): paths in sysfs are as seen from the mount
 * namespace that attached it, so compare identities instead. only: that device alone, else every one. */
static bool loop_backs(const char *only, dev_t dev, ino_t ino)
{
	if (only)
		return dev_backs(only, dev, ino);
	_cleanup_closedir_ DIR *d = opendir("/sys/block");
	if (!d)
		return false;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char p[300];
		snprintf(p, sizeof(p), "/dev/%s", de->d_name);
		if (dev_backs(p, dev, ino))
			return true;
	}
	return false;
}

/* "/dev/loop" followed by digits only. */
static bool loop_dev_name(const char *dev)
{
	if (!dev || strncmp(dev, "/dev/loop", 9) != 0 || !dev[9])
		return false;
	for (const char *c = dev + 9; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return strlen(dev) < 32;
}

int util_loop_wait_released_dev(const char *image, const char *dev, int timeout_ms)
{
	struct stat st;
	if (stat(image, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	const char *only = loop_dev_name(dev) ? dev : NULL;
	/* The kernel releases it shortly after the namespace's end: look again soon, then every 10 ms. */
	unsigned pause_us = 200, waited_us = 0;
	for (;;) {
		if (!loop_backs(only, st.st_dev, st.st_ino))
			return 0;
		if (waited_us >= (unsigned)timeout_ms * 1000u)
			return -ETIMEDOUT;
		usleep(pause_us);
		waited_us += pause_us;
		pause_us = pause_us < 10000 ? pause_us * 2 : 10000;
	}
}

int util_loop_wait_released(const char *image, int timeout_ms)
{
	return util_loop_wait_released_dev(image, NULL, timeout_ms);
}
