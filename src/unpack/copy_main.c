/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-unpack copy, around copy.c: the mode's confinement and its run. Unlike the image modes it stays
 * root, of a user namespace the library made, since it must give every copied inode its owner and mode;
 * what keeps it in is the namespace (its capabilities reach only inodes whose owners it maps: the two
 * trees), the chroot into the destination and the MODE_COPY allowlist (main.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "unpack/unpack.h"
#include "util/cleanup.h"
#include "util/confine.h"
#include "util/util.h"

/* Whether /proc/self/uid_map is the initial user namespace's ("0 0 4294967295"). */
static bool initial_userns(void)
{
	char map[4096];
	_cleanup_close_ int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, map, sizeof(map) - 1);
	if (n < 0)
		unpack_die_err(errno, "read /proc/self/uid_map: %s", strerror(errno));
	map[n] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(map, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long inside, outside, count;
		if (sscanf(line, "%lu %lu %lu", &inside, &outside, &count) == 3 && !inside && !outside &&
		    count == 4294967295ul)
			return true;
	}
	return false;
}

/* copy: uid 0 of a user namespace the library made (its capabilities reach only the inodes whose owners
 * that namespace maps: the two trees), in a mount namespace of its own chrooted into the destination, with
 * the capabilities of a file's owner only, then the filter. Fails closed at each step. */
void copy_main_confine(enum unpack_mode m)
{
	char err[256] = "";
	int r;
	const char *mode = m == MODE_RECEIVE ? "receive" : "copy";
	if (initial_userns())
		unpack_die_err(EPERM, "%s runs only inside a user namespace", mode);
	if (getuid() != 0 || getgid() != 0)
		unpack_die_err(EPERM, "%s runs as uid 0 and gid 0 of its user namespace (not %u:%u)", mode, getuid(),
			       getgid());
	struct stat st;
	if (fstat(COPY_SRC_FD, &st) < 0 || !S_ISDIR(st.st_mode))
		unpack_die_err(ENOTDIR, "fd %d is not the source (or parent) directory", COPY_SRC_FD);
	if (fstat(COPY_DST_FD, &st) < 0 || !S_ISDIR(st.st_mode))
		unpack_die_err(ENOTDIR, "fd %d is not the destination directory", COPY_DST_FD);
	if (syscall(SYS_close_range, (unsigned)COPY_DST_FD + 1, ~0u, 0) < 0)
		unpack_die_err(errno, "close_range: %s", strerror(errno));
	/* From here on a path, absolute or relative, names something in the destination only. */
	if (unshare(CLONE_NEWNS) < 0)
		unpack_die_err(errno, "unshare(CLONE_NEWNS): %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		unpack_die_err(errno, "make the mounts private: %s", strerror(errno));
	if (fchdir(COPY_DST_FD) < 0 || chroot(".") < 0 || chdir("/") < 0)
		unpack_die_err(errno, "chroot into the destination: %s", strerror(errno));
	/* 2 descriptors a level at COPY_DEPTH_MAX levels, well inside. */
	if ((r = unpack_set_limit(RLIMIT_CORE, 0)) < 0 || (r = unpack_set_limit(RLIMIT_NPROC, 0)) < 0 ||
	    (r = unpack_set_limit(RLIMIT_NOFILE, 4096)) < 0 || (r = unpack_limit_memory()) < 0)
		unpack_die_err(r, "setrlimit: %s", strerror(-r));
	static const int keep[] = { CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_SETFCAP };
	uint64_t want = 0;
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
		want |= 1ull << keep[i];
	if ((r = confine_keep_caps(want, err, sizeof(err))) < 0)
		unpack_die_err(r, "%s", err);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		unpack_die_err(errno, "prctl: %s", strerror(errno));
	if ((r = unpack_load_filter(m, err, sizeof(err))) < 0)
		unpack_die_err(r, "%s", err);
	unpack_status("ready");
}

void copy_main_run(uint64_t max_bytes, uint64_t max_entries)
{
	struct copy_counts n;
	char err[800];
	int r = copy_tree(COPY_SRC_FD, COPY_DST_FD, max_bytes, max_entries, &n, err, sizeof(err));
	if (r < 0)
		unpack_die_err(r, "%s", err);
	if (n.xattrs_failed)
		unpack_status("warn xattrs: %llu could not be copied (first: %s)", (unsigned long long)n.xattrs_failed,
			      n.xattr_first);
	if (n.devices || n.sockets)
		unpack_status("warn skipped %llu device nodes and %llu sockets", (unsigned long long)n.devices,
			      (unsigned long long)n.sockets);
	unpack_status("counts entries=%llu files=%llu dirs=%llu symlinks=%llu hardlinks=%llu bytes=%llu skipped=%llu",
		      (unsigned long long)n.entries, (unsigned long long)n.files, (unsigned long long)n.dirs,
		      (unsigned long long)n.symlinks, (unsigned long long)n.hardlinks, (unsigned long long)n.bytes,
		      (unsigned long long)(n.devices + n.sockets));
	unpack_status("done");
}
