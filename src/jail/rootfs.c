/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's root file system: the sandbox's ext4 image on an auto-clearing loop device, mounted with the new
 * mount API as a detached mount (so it can be idmapped before anyone sees it), attached in the private
 * staging mount namespace, given a minimal /dev, and finally made the root with pivot_root.
 * Everything here runs in the children of jail_start() (shared memory, own stacks): no allocation.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail_internal.h"
#include "util/cleanup.h"

/*
 * Makes sure dir (relative to dfd) is a real directory. The image is hostile: a symlink there would
 * redirect the mounts made on it.
 */
static int mkdir_nofollow(int dfd, const char *dir, mode_t mode)
{
	struct stat st;
	if (mkdirat(dfd, dir, mode) < 0 && errno != EEXIST)
		return -errno;
	if (fstatat(dfd, dir, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* While still unmapped, host root can create the mount points the rootfs lacks (as uid 0 on disk). */
static int make_mount_points(int mfd, const char **ret_step)
{
	static const char *const dirs[][2] = { { "dev", "create /dev in rootfs" },
		                               { "proc", "create /proc in rootfs" },
		                               { "sys", "create /sys in rootfs" } };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		*ret_step = dirs[i][1];
		int r = mkdir_nofollow(mfd, dirs[i][0], i == 0 ? 0755 : 0555);
		if (r < 0)
			return r;
	}
	return 0;
}

int jail_rootfs_open_tree(const char *tree, int *ret_mfd, const char **ret_step)
{
	*ret_step = "bind the rootfs tree";
	/* A detached copy of the one mount (no submounts), so it can be idmapped before anyone sees it. */
	int mfd = open_tree(AT_FDCWD, tree, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (mfd < 0)
		return -errno;
	*ret_step = "set nodev,nosuid on the rootfs tree";
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID };
	int r = mount_setattr(mfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ? -errno : 0;
	if (r == 0)
		r = make_mount_points(mfd, ret_step);
	if (r < 0) {
		close(mfd);
		return r;
	}
	*ret_mfd = mfd;
	return 0;
}

int jail_rootfs_open(const char *loop_path, int *ret_mfd, const char **ret_step)
{
	*ret_step = "fsopen ext4";
	_cleanup_close_ int fsfd = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return -errno;
	*ret_step = "mount rootfs";
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", loop_path, 0) < 0)
		return -errno;
	/* No cache flushes: each one is an fsync of the image on the btrfs pool, and a burst of jails ending
	 * at once spent seconds each in them at umount. A sandbox disk does not outlive a host crash anyway;
	 * a checkpoint freezes the file system (its writes reach the image's page cache) and the btrfs snapshot
	 * writes that out itself. */
	*ret_step = "mount rootfs (nobarrier)";
	if (fsconfig(fsfd, FSCONFIG_SET_FLAG, "nobarrier", NULL, 0) < 0)
		return -errno;
	*ret_step = "mount rootfs";
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	/* nodev: an image may carry device nodes; nosuid: no_new_privs ignores set-id bits anyway. */
	int mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
	if (mfd < 0)
		return -errno;
	int r = make_mount_points(mfd, ret_step);
	if (r < 0) {
		close(mfd);
		return r;
	}
	*ret_mfd = mfd;
	return 0;
}

int jail_rootfs_idmap(int mfd, int userns_fd)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_IDMAP,
		.userns_fd = (uint64_t)userns_fd,
	};
	if (mount_setattr(mfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return -errno;
	return 0;
}

/* Device nodes bound from the host: the ones every program expects; nothing that reaches hardware. */
static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
static const char *const dev_links[][2] = {
	{ "fd", "/proc/self/fd" },           { "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" },
	{ "stderr", "/proc/self/fd/2" },     { "ptmx", "pts/ptmx" },
};

static int populate_dev(const char *dev, uid_t owner)
{
	char path[4096], opts[96];

	/* devtmpfs cannot be mounted in a user namespace: a small tmpfs owned by root-inside instead. */
	snprintf(opts, sizeof(opts), "mode=0755,size=1m,nr_inodes=4096,uid=%u,gid=%u", (unsigned)owner,
	         (unsigned)owner);
	if (mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, opts) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
		char host[64];
		snprintf(host, sizeof(host), "/dev/%s", dev_nodes[i]);
		snprintf(path, sizeof(path), "%s/%s", dev, dev_nodes[i]);
		int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		close(fd);
		if (mount(host, path, NULL, MS_BIND, NULL) < 0)
			return -errno;
	}
	for (size_t i = 0; i < ARRAY_SIZE(dev_links); i++) {
		snprintf(path, sizeof(path), "%s/%s", dev, dev_links[i][0]);
		if (symlink(dev_links[i][1], path) < 0)
			return -errno;
	}
	static const char *const dirs[] = { "pts", "shm", "mqueue" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dev, dirs[i]);
		if (mkdir(path, i == 1 ? 01777 : 0755) < 0)
			return -errno;
	}
	/* Give the tree to root-inside (the tmpfs options only cover its root directory). */
	for (size_t i = 0; i < ARRAY_SIZE(dev_links); i++) {
		snprintf(path, sizeof(path), "%s/%s", dev, dev_links[i][0]);
		if (lchown(path, owner, owner) < 0)
			return -errno;
	}
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dev, dirs[i]);
		if (chown(path, owner, owner) < 0)
			return -errno;
	}
	return 0;
}

int jail_rootfs_attach(int mfd, const char *stage, uid_t owner_uid, const char **ret_step)
{
	*ret_step = "attach rootfs";
	if (move_mount(mfd, "", AT_FDCWD, stage, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return -errno;
	char dev[4096];
	if ((size_t)snprintf(dev, sizeof(dev), "%s/dev", stage) >= sizeof(dev))
		return -ENAMETOOLONG;
	*ret_step = "populate /dev";
	return populate_dev(dev, owner_uid);
}

/*
 * proc entries that stay read-only inside. The pid and user namespaces do not cover them: writes there are
 * checked against the file mode and uid 0 (GLOBAL_ROOT_UID) only, so under the identity mapping root inside
 * could otherwise set kernel.core_pattern, trigger sysrq or retarget IRQs on the host.
 */
static const char *const proc_readonly[] = { "sys", "sysrq-trigger", "irq", "bus", "fs" };

/* Runs in a helper inside the jail's pid and net namespaces, still root of the initial user namespace. */
static int mount_pseudo(const char *stage)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/proc", stage);
	if (mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(proc_readonly); i++) {
		struct stat st;
		snprintf(path, sizeof(path), "%s/proc/%s", stage, proc_readonly[i]);
		if (lstat(path, &st) < 0)
			continue; /* not in this kernel */
		if (mount(path, path, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		          NULL) < 0)
			return -errno;
	}
	snprintf(path, sizeof(path), "%s/sys", stage);
	if (mount("sysfs", path, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -errno;
	return 0;
}

struct pseudo_args {
	const char *stage;
	int netns;
};

static int pseudo_helper(void *arg)
{
	const struct pseudo_args *a = arg;
	int r = setns(a->netns, CLONE_NEWNET) < 0 ? -errno : mount_pseudo(a->stage);
	_exit(r < 0 ? -r : 0);
}

int jail_rootfs_pseudo(const char *stage, pid_t pid1)
{
	char path[4096];
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", stage, i == 0 ? "proc" : "sys");
		int r = mkdir_nofollow(AT_FDCWD, path, 0555);
		if (r < 0)
			return r;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid1);
	_cleanup_close_ int pidns = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid1);
	_cleanup_close_ int netns = open(path, O_RDONLY | O_CLOEXEC);
	if (pidns < 0 || netns < 0)
		return -errno;
	/* proc shows the pid namespace of the process that mounts it: our next child is born in the jail's. */
	if (setns(pidns, CLONE_NEWPID) < 0)
		return -errno;
	/*
	 * The helper shares our memory and we sleep until it exits (like posix_spawn): no page tables to copy,
	 * however large the caller is. It only makes syscalls, on its own stack.
	 */
	struct pseudo_args a = { .stage = stage, .netns = netns };
	static const size_t stack_size = 64 * 1024;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return -errno;
	pid_t pid = clone(pseudo_helper, stack + stack_size, JAIL_CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	int r = pid < 0 ? -errno : 0;
	munmap(stack, stack_size);
	if (r < 0)
		return r;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(st))
		return -EIO;
	return -WEXITSTATUS(st);
}

int jail_rootfs_pivot(const char *stage)
{
	/*
	 * Mounts copied into a namespace of a less privileged user namespace are locked, and pivot_root refuses
	 * a locked new root: a recursive self-bind makes an unlocked one (its children stay locked, and stay).
	 */
	if (mount(stage, stage, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -errno;
	/* pivot_root(".", ".") stacks the old root on the new one; a lazy unmount of "." then drops it. */
	if (chdir(stage) < 0)
		return -errno;
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return -errno;
	if (umount2(".", MNT_DETACH) < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	return 0;
}

int jail_net_lo_up(void)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct ifreq ifr = { 0 };
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

const char *jail_stage_dir(void)
{
	/* Only ever mounted on inside the private staging namespace; the host never sees it. */
	static const char *const candidates[] = { "/tmp", "/run", "/mnt", "/var/tmp" };
	for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
		struct stat st;
		if (stat(candidates[i], &st) == 0 && S_ISDIR(st.st_mode))
			return candidates[i];
	}
	return NULL;
}
