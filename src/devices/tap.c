/* SPDX-License-Identifier: Apache-2.0 */
/* TAP devices through the TUN driver's ioctls (see tap.h). */
#include "devices/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/cleanup.h"

static void copy_name(const struct ifreq *ifr, char *out, size_t len)
{
	if (out && len)
		snprintf(out, len, "%.*s", (int)IFNAMSIZ, ifr->ifr_name);
}

/* Sets IFF_UP; a TAP attached without CAP_NET_ADMIN (a persistent one owned by us) keeps its state. */
static int set_up(const char *ifname)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	if (ifr.ifr_flags & IFF_UP)
		return 0;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

int tap_open(const char *name, char *ifname_out, size_t len)
{
	if (name && strlen(name) >= IFNAMSIZ)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	if (name)
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		return -errno;
	int r = set_up(ifr.ifr_name);
	if (r < 0 && r != -EPERM && r != -EACCES)
		return r;
	copy_name(&ifr, ifname_out, len);
	return TAKE_FD(fd);
}

int tap_check_fd(int fd, char *ifname_out, size_t len)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr) < 0)
		return errno == EBADFD ? -EINVAL : -ENOTTY;
	if ((ifr.ifr_flags & (IFF_TAP | IFF_TUN)) != IFF_TAP || !(ifr.ifr_flags & IFF_NO_PI) ||
	    (ifr.ifr_flags & IFF_VNET_HDR))
		return -EINVAL;
	copy_name(&ifr, ifname_out, len);
	return 0;
}
