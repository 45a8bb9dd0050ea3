/* SPDX-License-Identifier: Apache-2.0 */
/* space-agent as a VM's /init: modules, root disk, switch root (see init.h). */
#include "agent/init.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "util/util.h"

/* Kept in step with src/core/initramfs.h, which writes the archive. */
#define ORDER_FILE "/modules.order"
#define NEWROOT "/newroot"

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* The console is all a VM that cannot boot has to say why; then power off rather than hang. */
	fprintf(stderr, "space-agent: FATAL: %s: powering off\n", line);
	fflush(stderr);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static bool take_uint(const char *key, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	if (util_parse_uint(v, min, max, out) == 0)
		return true;
	agent_log("ignoring %s=%s: not a number in %llu..%llu", key, v, (unsigned long long)min,
		  (unsigned long long)max);
	return false;
}

static bool take_str(const char *key, const char *v, char *out, size_t len)
{
	if (*v && strlen(v) < len) {
		memcpy(out, v, strlen(v) + 1);
		return true;
	}
	agent_log("ignoring %s=%s: empty or longer than %zu", key, v, len - 1);
	return false;
}

int vm_params_parse(const char *cmdline, struct vm_params *p)
{
	char *copy = strdup(cmdline ? cmdline : "");
	if (!copy)
		return -ENOMEM;
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		if (strncmp(tok, "space.", 6) != 0)
			continue;
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *k = tok + 6, *v = eq + 1;
		bool ok = false;
		if (!strcmp(k, "port"))
			ok = take_uint(tok, v, 1, UINT32_MAX - 1, &p->port);
		else if (!strcmp(k, "lifetime"))
			ok = take_uint(tok, v, 1, PROTO_MAX_LIFETIME, &p->lifetime);
		else if (!strcmp(k, "rootwait"))
			ok = take_uint(tok, v, 1, 3600, &p->rootwait);
		else if (!strcmp(k, "hostname"))
			ok = take_str(tok, v, p->hostname, sizeof(p->hostname));
		else if (!strcmp(k, "root") && strncmp(v, "/dev/", 5) != 0)
			agent_log("ignoring %s=%s: not a /dev path", tok, v);
		else if (!strcmp(k, "root"))
			ok = take_str(tok, v, p->root, sizeof(p->root));
		else if (!strcmp(k, "rootfstype"))
			ok = take_str(tok, v, p->rootfstype, sizeof(p->rootfstype));
		else if (!strcmp(k, "net"))
			ok = take_str(tok, v, p->net, sizeof(p->net));
		else
			agent_log("ignoring unknown parameter %s", tok);
		n += ok;
	}
	free(copy);
	return n;
}

static void mount_early(const char *type, const char *target, unsigned long flags, const char *data)
{
	mkdir(target, 0755);
	if (mount(type, target, type, flags, data) < 0 && errno != EBUSY)
		fatal("mount %s on %s: %s", type, target, strerror(errno));
}

/* The kernel starts /init with the console as stdio when the archive has /dev/console; else attach now. */
static void attach_console(void)
{
	if (fcntl(1, F_GETFD) >= 0)
		return;
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0)
		return;
	for (int i = 0; i < 3; i++)
		if (fd != i)
			dup2(fd, i);
	if (fd > 2)
		close(fd);
}

static uint64_t ms_since(uint64_t t0)
{
	return (util_now_ns() - t0) / 1000000;
}

static void load_modules(void)
{
	char *text = NULL;
	size_t len;
	int r = util_read_file(ORDER_FILE, 1 << 20, &text, &len);
	if (r < 0)
		fatal("read %s: %s", ORDER_FILE, strerror(-r));
	unsigned loaded = 0, failed = 0;
	uint64_t t0 = util_now_ns();
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!*line)
			continue;
		int fd = open(line, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			agent_log("module %s: %m", line);
			failed++;
			continue;
		}
		/* A module may also be built in, or already pulled in: EEXIST is success. A failure is reported
		 * and the boot goes on; a missing disk or vsock says which one mattered. */
		if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST) {
			agent_log("module %s: %m", line);
			failed++;
		} else {
			loaded++;
		}
		close(fd);
	}
	free(text);
	agent_log("loaded %u modules in %llu ms (%u failed)", loaded, (unsigned long long)ms_since(t0), failed);
}

static void wait_for_root(const struct vm_params *p)
{
	uint64_t t0 = util_now_ns(), limit = p->rootwait * 1000;
	struct stat st;
	while (stat(p->root, &st) < 0 || !S_ISBLK(st.st_mode)) {
		if (ms_since(t0) >= limit)
			fatal("the root disk %s did not appear within %llu s (no virtio-blk disk attached, or its "
			      "driver did not load: see the module messages above)",
			      p->root, (unsigned long long)p->rootwait);
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* Empties the initramfs (it stays in RAM otherwise), never crossing into another filesystem. */
static void delete_tree(int dfd, dev_t dev)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				delete_tree(sub, dev);
			unlinkat(dfd, e->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(dfd, e->d_name, 0);
		}
	}
	closedir(d);
}

static void switch_root(void)
{
	static const char *const moves[] = { "/dev", "/proc", "/sys" };
	for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
		char target[64];
		snprintf(target, sizeof(target), NEWROOT "%s", moves[i]);
		mkdir(target, 0755);
		if (mount(moves[i], target, NULL, MS_MOVE, NULL) < 0)
			fatal("move %s to the root disk: %s", moves[i], strerror(errno));
	}
	struct stat st;
	if (stat("/", &st) < 0)
		fatal("stat /: %s", strerror(errno));
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (chdir(NEWROOT) < 0)
		fatal("chdir " NEWROOT ": %s", strerror(errno));
	if (root >= 0)
		delete_tree(root, st.st_dev);
	if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
		fatal("move the root disk to /: %s", strerror(errno));
	if (chroot(".") < 0 || chdir("/") < 0)
		fatal("chroot into the root disk: %s", strerror(errno));
}

static void set_up_lo(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			agent_log("bring up lo: %m");
	}
	close(fd);
}

/* space.net=ADDR/PREFIX,GATEWAY,MAC,MTU: eth0 (virtio-net) as the host's side of the wire expects it, which
 * passes only this MAC and address (docs/network.md). Plain ioctls: the agent is static, without libnl. */
static int eth0_ioctl(int fd, unsigned long req, struct ifreq *ifr, const char *what)
{
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "eth0");
	if (ioctl(fd, req, ifr) == 0)
		return 0;
	agent_log("eth0: %s: %m", what);
	return -1;
}

static void set_in(struct sockaddr *sa, in_addr_t a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = a };
	memcpy(sa, &sin, sizeof(sin));
}

static void set_up_eth0(const char *spec)
{
	char addr[16], gw[16];
	unsigned prefix, mtu, m[6];
	struct in_addr a, g;
	if (sscanf(spec, "%15[0-9.]/%u,%15[0-9.],%x:%x:%x:%x:%x:%x,%u", addr, &prefix, gw, &m[0], &m[1], &m[2], &m[3],
		   &m[4], &m[5], &mtu) != 10 || prefix < 1 || prefix > 32 || mtu < 576 || mtu > 65535 ||
	    inet_pton(AF_INET, addr, &a) != 1 || inet_pton(AF_INET, gw, &g) != 1) {
		agent_log("ignoring space.net=%s: not ADDR/PREFIX,GATEWAY,MAC,MTU", spec);
		return;
	}
	if (if_nametoindex("eth0") == 0) {
		agent_log("space.net: no eth0 (no virtio-net device): no network");
		return;
	}
	/* IPv4 only: the gateway serves nothing else and the wire drops it. */
	int sfd = open("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", O_WRONLY | O_CLOEXEC);
	if (sfd >= 0) {
		(void)!write(sfd, "1", 1);
		close(sfd);
	}
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	for (int i = 0; i < 6; i++)
		ifr.ifr_hwaddr.sa_data[i] = (char)(m[i] & 0xff);
	int bad = eth0_ioctl(fd, SIOCSIFHWADDR, &ifr, "set MAC");
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_mtu = (int)mtu;
	bad |= eth0_ioctl(fd, SIOCSIFMTU, &ifr, "set MTU");
	set_in(&ifr.ifr_addr, a.s_addr);
	bad |= eth0_ioctl(fd, SIOCSIFADDR, &ifr, "set address");
	set_in(&ifr.ifr_netmask, htonl(~0u << (32 - prefix)));
	bad |= eth0_ioctl(fd, SIOCSIFNETMASK, &ifr, "set netmask");
	if (eth0_ioctl(fd, SIOCGIFFLAGS, &ifr, "get flags") == 0) {
		ifr.ifr_flags |= IFF_UP;
		bad |= eth0_ioctl(fd, SIOCSIFFLAGS, &ifr, "bring up");
	}
	struct rtentry rt;
	memset(&rt, 0, sizeof(rt));
	set_in(&rt.rt_dst, INADDR_ANY);
	set_in(&rt.rt_genmask, INADDR_ANY);
	set_in(&rt.rt_gateway, g.s_addr);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	if (ioctl(fd, SIOCADDRT, &rt) < 0 && errno != EEXIST) {
		agent_log("eth0: default route via %s: %m", gw);
		bad = -1;
	}
	close(fd);
	if (!bad)
		agent_log("eth0 %s/%u via %s, mtu %u", addr, prefix, gw, mtu);
}

static bool in_initramfs(void)
{
	struct statfs sfs;
	return access(ORDER_FILE, R_OK) == 0 && statfs("/", &sfs) == 0 &&
	       ((unsigned long)sfs.f_type == RAMFS_MAGIC || (unsigned long)sfs.f_type == TMPFS_MAGIC);
}

bool vm_init_boot(struct vm_params *p)
{
	uint64_t t0 = util_now_ns();
	if (!*p->root)
		snprintf(p->root, sizeof(p->root), "/dev/vda");
	if (!*p->rootfstype)
		snprintf(p->rootfstype, sizeof(p->rootfstype), "ext4");
	if (!p->rootwait)
		p->rootwait = 30;
	bool initramfs = in_initramfs();
	if (initramfs) {
		mount_early("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
		mount_early("sysfs", "/sys", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL);
		mount_early("devtmpfs", "/dev", MS_NOSUID, "mode=0755");
		attach_console();
	} else if (access("/proc/cmdline", R_OK) < 0) {
		mkdir("/proc", 0755);
		mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	}
	char *cmdline = NULL;
	size_t len;
	if (util_read_file("/proc/cmdline", 1 << 16, &cmdline, &len) == 0) {
		vm_params_parse(cmdline, p);
		free(cmdline);
	}
	if (initramfs) {
		load_modules();
		wait_for_root(p);
		mkdir(NEWROOT, 0755);
		if (mount(p->root, NEWROOT, p->rootfstype, 0, NULL) < 0)
			fatal("mount %s (%s) on " NEWROOT ": %s", p->root, p->rootfstype, strerror(errno));
		switch_root();
		agent_log("root %s mounted, %llu ms after /init started", p->root, (unsigned long long)ms_since(t0));
	}
	if (*p->hostname && sethostname(p->hostname, strlen(p->hostname)) < 0)
		agent_log("sethostname: %m");
	set_up_lo();
	if (*p->net)
		set_up_eth0(p->net);
	return initramfs;
}
