/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util_mkdir_p (src/util/util.h): a directory whose parents exist (one mkdir), a chain of missing ones,
 * one already there, trailing slashes, a file in the way (at the end and half way), the empty path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../check.h"
#include "util/util.h"

static int is_dir(const char *p, mode_t *mode)
{
	struct stat st;
	if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if (mode)
		*mode = st.st_mode & 07777;
	return 1;
}

int main(void)
{
	char root[] = "/tmp/space-test-mkdir-XXXXXX", p[256];
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	umask(022);
	mode_t m = 0;
	snprintf(p, sizeof(p), "%s/one", root);
	CHECK(util_mkdir_p(p, 0700) == 0 && is_dir(p, &m) && m == 0700);
	CHECK(util_mkdir_p(p, 0700) == 0); /* already there */
	snprintf(p, sizeof(p), "%s/a/b/c/d", root);
	CHECK(util_mkdir_p(p, 0755) == 0 && is_dir(p, &m) && m == 0755);
	snprintf(p, sizeof(p), "%s/a/b", root);
	CHECK(is_dir(p, &m) && m == 0755); /* the parents made on the way, with the same mode */
	snprintf(p, sizeof(p), "%s/e/f///", root);
	CHECK(util_mkdir_p(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/e/f", root);
	CHECK(is_dir(p, NULL));
	/* A file where a directory should be: at the end, and half way. */
	snprintf(p, sizeof(p), "%s/file", root);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK(util_mkdir_p(p, 0700) == -ENOTDIR);
	snprintf(p, sizeof(p), "%s/file/below/more", root);
	CHECK(util_mkdir_p(p, 0700) == -ENOTDIR);
	CHECK(util_mkdir_p("", 0700) == -ENOENT);
	CHECK(util_mkdir_p("/", 0700) == 0);
	CHECK(util_rm_rf(root) == 0);
	return check_summary("util_mkdir");
}
