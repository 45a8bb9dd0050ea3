/* SPDX-License-Identifier: Apache-2.0 */
#include "util/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
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
