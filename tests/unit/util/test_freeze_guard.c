/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The freeze guard (util/freeze_guard.h): a process that froze a file system and is then killed with
 * SIGKILL leaves it thawed (before the guard, a checkpoint killed mid-way left the jail's root filesystem
 * frozen for ever: its loop device, and the pool under it, could never be released). And a caller that ends
 * normally leaves no guard process behind. Needs root, loop devices and mkfs.ext4; skips (77) without.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../check.h"
#include "util/freeze_guard.h"
#include "util/loop.h"

static char dir[] = "/tmp/space-freeze-guard-XXXXXX";
static char img[64], mnt[64];

static bool is_frozen(void)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	/* A second freeze of a frozen file system is EBUSY; if it succeeds it was thawed: undo ours. */
	bool frozen = ioctl(fd, FIFREEZE, 0) < 0 && errno == EBUSY;
	if (!frozen)
		ioctl(fd, FITHAW, 0);
	close(fd);
	return frozen;
}

/* A child that freezes the file system under a guard and then waits to be killed (or, ending normally,
 * thaws and ends the guard). Returns the child's pid once the file system is frozen. */
static pid_t freezer(bool end_normally)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct util_freeze_guard g;
		if (fd < 0 || util_freeze_guard_start(&g, fd, NULL) < 0 || ioctl(fd, FIFREEZE, 0) < 0)
			_exit(2);
		if (end_normally) {
			ioctl(fd, FITHAW, 0);
			util_freeze_guard_end(&g);
			(void)!write(p[1], "g", 1);
			_exit(0);
		}
		(void)!write(p[1], "f", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char c = 0;
	if (pid < 0 || read(p[0], &c, 1) != 1)
		pid = -1;
	close(p[0]);
	return pid;
}

int main(void)
{
	if (geteuid() != 0 || access("/dev/loop-control", W_OK) < 0) {
		printf("SKIP: needs root and loop devices\n");
		return 77;
	}
	if (!mkdtemp(dir))
		return 1;
	snprintf(img, sizeof(img), "%s/fs.img", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "truncate -s 32M %s && mkfs.ext4 -q -F %s >/dev/null 2>&1", img, img);
	if (system(cmd) != 0 || mkdir(mnt, 0700) < 0) {
		printf("SKIP: no mkfs.ext4\n");
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		(void)!system(cmd);
		return 77;
	}
	char dev[64];
	int lfd = util_loop_attach(img, false, dev, sizeof(dev));
	CHECK(lfd >= 0);
	int r = lfd >= 0 ? mount(dev, mnt, "ext4", 0, NULL) : -1;
	if (lfd >= 0)
		close(lfd);
	CHECK(r == 0);
	if (r == 0) {
		/* Killed while frozen: the guard thaws. */
		pid_t pid = freezer(false);
		CHECK(pid > 0);
		CHECK(is_frozen());
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		bool thawed = false;
		for (int i = 0; i < 200 && !thawed; i++) {
			thawed = !is_frozen();
			if (!thawed)
				usleep(10000);
		}
		CHECK(thawed);

		/* Ends normally: thawed, and no guard left running. */
		pid = freezer(true);
		CHECK(pid > 0);
		int st = -1;
		if (pid > 0)
			waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK(!is_frozen());

		/* Whatever failed above: never leave a frozen file system behind us. */
		int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			ioctl(fd, FITHAW, 0);
			close(fd);
		}
		CHECK(umount(mnt) == 0);
	}
	CHECK(util_loop_wait_released(img, 5000) == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
	return check_summary("freeze_guard");
}
