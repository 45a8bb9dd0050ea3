/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered secrets (docs/network.md, "Registered secrets"): values the operator stores on the host so
 * that policies written by API callers can have them injected by name (secret:NAME) without naming a
 * host file or variable. One file per secret under <state>/secrets: the directory 0700, the files 0600,
 * both the state directory owner's, each written whole (temporary file, fsync, rename) so a reader sees
 * the old value or the new one. No ctx here: space-gateway links policy.c, which reads them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/net.h"
#include "net/secrets.h"
#include "util/cleanup.h"
#include "util/util.h"

/* Opens the secrets directory; with create, makes it (0700) first. Refuses one that is a symlink or
 * someone else's, and takes group and other access away from ours (an older or hand-made one). */
static int dir_open(const char *dir, bool create)
{
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_uid != geteuid())
		return -EPERM;
	if ((st.st_mode & 077) && fchmod(fd, 0700) < 0)
		return -errno;
	return TAKE_FD(fd);
}

bool net_secret_value_valid(const void *value, size_t len)
{
	return len > 0 && len <= NET_SECRET_MAX && !memchr(value, '\0', len) && !memchr(value, '\r', len) &&
	       !memchr(value, '\n', len);
}

int net_secret_read(const char *dir, const char *name, char **ret, size_t *ret_len)
{
	if (!util_name_valid(name))
		return -EINVAL;
	_cleanup_close_ int dfd = dir_open(dir, false);
	if (dfd < 0)
		return dfd;
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EINVAL : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_size > NET_SECRET_MAX)
		return -EFBIG;
	/* One buffer, never grown: a realloc would leave a copy of the value behind in freed memory. */
	char *buf = malloc(NET_SECRET_MAX + 2);
	if (!buf)
		return -ENOMEM;
	size_t n = 0;
	while (n <= NET_SECRET_MAX) {
		ssize_t k = read(fd, buf + n, NET_SECRET_MAX + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				break;
			int r = -errno;
			explicit_bzero(buf, n);
			free(buf);
			return r;
		}
		n += (size_t)k;
	}
	if (n > NET_SECRET_MAX || !net_secret_value_valid(buf, n)) {
		int r = n > NET_SECRET_MAX ? -EFBIG : -EINVAL;
		explicit_bzero(buf, n);
		free(buf);
		return r;
	}
	buf[n] = '\0';
	*ret = buf;
	if (ret_len)
		*ret_len = n;
	return 0;
}

int net_secret_write(const char *dir, const char *name, const void *value, size_t len)
{
	if (!util_name_valid(name) || !net_secret_value_valid(value, len))
		return -EINVAL;
	_cleanup_close_ int dfd = dir_open(dir, true);
	if (dfd < 0)
		return dfd;
	/* A leading '.' is never a secret's name, so a temporary file is never listed or read as one. */
	char tmp[96];
	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int)getpid());
	(void)unlinkat(dfd, tmp, 0); /* left by a crash of this pid's predecessor */
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = fchmod(fd, 0600) < 0 ? -errno : 0; /* whatever the umask said */
	if (r == 0)
		r = util_write_all(fd, value, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(dfd, tmp, 0);
		return r;
	}
	(void)fsync(dfd); /* the rename itself survives a crash */
	return 0;
}

int net_secret_remove(const char *dir, const char *name)
{
	if (!util_name_valid(name))
		return -EINVAL;
	_cleanup_close_ int dfd = dir_open(dir, false);
	if (dfd < 0)
		return dfd;
	if (unlinkat(dfd, name, 0) < 0)
		return -errno;
	(void)fsync(dfd);
	return 0;
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct net_secret_info *)a)->name, ((const struct net_secret_info *)b)->name);
}

int net_secret_list(const char *dir, struct net_secret_info **ret, size_t *ret_count)
{
	size_t n = 0, cap = 0;
	_cleanup_free_ struct net_secret_info *list = NULL;
	int dfd = dir_open(dir, false);
	if (dfd == -ENOENT) /* nothing registered yet */
		goto done;
	if (dfd < 0)
		return dfd;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int r = -errno;
		close(dfd);
		return r;
	}
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d))) {
		struct stat st;
		if (!util_name_valid(de->d_name) || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct net_secret_info *nl = reallocarray(list, cap, sizeof(*list));
			if (!nl) {
				r = -ENOMEM;
				break;
			}
			list = nl;
		}
		memset(&list[n], 0, sizeof(list[n]));
		snprintf(list[n].name, sizeof(list[n].name), "%s", de->d_name);
		list[n].created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		n++;
	}
	closedir(d);
	if (r < 0)
		return r;
done:
	if (!list && !(list = calloc(1, sizeof(*list))))
		return -ENOMEM;
	qsort(list, n, sizeof(*list), info_cmp);
	*ret = TAKE_PTR(list);
	*ret_count = n;
	return 0;
}
