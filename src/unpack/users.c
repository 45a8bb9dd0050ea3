/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's own users and shell (unpack.h): an image config's User ("app", "1000", "app:staff",
 * "1000:50") becomes numbers through the image's /etc/passwd and /etc/group, as a container runtime reads
 * them at start: a name must be there; a number need not be (its group is then the passwd entry's, else
 * 0); the home directory is the passwd entry's, else "/". Both files are the image's (hostile): read whole
 * up to 4 MiB, every line bounded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unpack/unpack.h"
#include "util/cleanup.h"
#include "util/util.h"

#define FILE_MAX (4u << 20)

/* The regular file at path (symlinks followed inside the image) into a NUL-terminated buffer. */
static int read_image_file(ext2_filsys fs, const char *path, char **ret)
{
	ext2_ino_t ino;
	int r = image_resolve(fs, path, true, &ino);
	if (r < 0)
		return r;
	struct ext2_inode inode;
	if (ext2fs_read_inode(fs, ino, &inode))
		return -EIO;
	uint64_t size = EXT2_I_SIZE(&inode);
	if (!LINUX_S_ISREG(inode.i_mode) || size > FILE_MAX)
		return -EINVAL;
	char *buf = malloc((size_t)size + 1);
	if (!buf)
		return -ENOMEM;
	ext2_file_t f;
	unsigned int got = 0;
	errcode_t e = ext2fs_file_open(fs, ino, 0, &f);
	if (!e) {
		e = ext2fs_file_read(f, buf, (unsigned)size, &got);
		ext2fs_file_close(f);
	}
	if (e || got != size) {
		free(buf);
		return -EIO;
	}
	buf[size] = '\0';
	*ret = buf;
	return 0;
}

static bool is_number(const char *s, uint32_t *ret)
{
	uint64_t v;
	if (util_parse_uint(s, 0, UINT32_MAX - 1, &v) < 0)
		return false;
	*ret = (uint32_t)v;
	return true;
}

/*
 * The entry of a "name:x:id:gid:gecos:home:shell" (passwd) or "name:x:id:members" (group) file whose name
 * (by_name) or id matches key. fields: how many colon-separated fields to split into out (at most 7).
 */
static bool find_line(char *text, const char *key, bool by_name, char **out, int fields)
{
	for (char *line = text; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strlen(line) < 4096 && line[0] != '#') {
			int n = 0;
			char *p = line;
			while (n < fields) {
				out[n++] = p;
				p = strchr(p, ':');
				if (!p)
					break;
				*p++ = '\0';
			}
			if (n >= 3 && !strcmp(by_name ? out[0] : out[2], key))
				return true;
		}
		line = next;
	}
	return false;
}

int users_resolve(ext2_filsys fs, const char *spec, struct image_user *ret, char *err, size_t errlen)
{
	char user[256], group[256] = "";
	const char *colon = strchr(spec, ':');
	if (strlen(spec) >= sizeof(user))
		return util_errf(err, errlen, -EINVAL, "user '%s' is too long", spec);
	snprintf(user, sizeof(user), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
	if (colon)
		snprintf(group, sizeof(group), "%s", colon + 1);
	if (!user[0])
		return util_errf(err, errlen, -EINVAL, "user '%s' names no user", spec);
	_cleanup_free_ char *passwd = NULL, *groups = NULL;
	(void)read_image_file(fs, "/etc/passwd", &passwd);
	(void)read_image_file(fs, "/etc/group", &groups);
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->home, sizeof(ret->home), "/");
	char *f[7] = { 0 };
	uint32_t id;
	bool numeric = is_number(user, &id);
	bool found = passwd && find_line(passwd, user, !numeric, f, 7);
	if (!found && !numeric)
		return util_errf(err, errlen, -ENOENT, "user '%s' is not in the image's /etc/passwd", user);
	if (found) {
		uint32_t uid, gid;
		if (!is_number(f[2], &uid) || !f[3] || !is_number(f[3], &gid))
			return util_errf(err, errlen, -EINVAL, "the image's /etc/passwd entry of '%s' is malformed", user);
		ret->uid = uid;
		ret->gid = gid;
		if (f[5] && f[5][0] == '/' && strlen(f[5]) < sizeof(ret->home))
			snprintf(ret->home, sizeof(ret->home), "%s", f[5]);
	} else {
		ret->uid = id;
		ret->gid = 0;
	}
	if (group[0]) {
		if (is_number(group, &id)) {
			ret->gid = id;
		} else {
			char *g[4] = { 0 };
			if (!groups || !find_line(groups, group, true, g, 4) || !is_number(g[2], &id))
				return util_errf(err, errlen, -ENOENT, "group '%s' is not in the image's /etc/group", group);
			ret->gid = id;
		}
	}
	return 0;
}

bool users_has_shell(ext2_filsys fs)
{
	ext2_ino_t ino;
	struct ext2_inode inode;
	return image_resolve(fs, "/bin/sh", true, &ino) == 0 && !ext2fs_read_inode(fs, ino, &inode) &&
	       LINUX_S_ISREG(inode.i_mode) && (inode.i_mode & 0111);
}
