/* SPDX-License-Identifier: Apache-2.0 */
/* File requests: streamed write (temp file + rename) and read, stat, list, mkdir, remove, rename. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "util/util.h"

static void reply_err(struct conn *c, int code, const char *what, const char *path)
{
	if (code < 0)
		code = -code;
	proto_put_err(&c->out, code, "%s %s: %s", what, path, strerror(code));
	c->state = C_CLOSING;
}

static void reply_ok(struct conn *c)
{
	proto_put_empty(&c->out, PROTO_OK);
	c->state = C_CLOSING;
}

static void stat_to_proto(const struct stat *st, struct proto_stat *p)
{
	*p = (struct proto_stat){ .mode = st->st_mode, .uid = st->st_uid, .gid = st->st_gid,
				  .size = (uint64_t)st->st_size,
				  .mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec };
}

/* Directory part of path ("." for a bare name); caller frees. */
static char *dir_of(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return NULL;
	char *d = strdup(dirname(copy));
	free(copy);
	return d;
}

static int write_begin(struct conn *c, const struct proto_path_op *op)
{
	const char *base = strrchr(op->path, '/');
	base = base ? base + 1 : op->path;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return -EISDIR;
	char *dir = dir_of(op->path);
	if (!dir)
		return -ENOMEM;
	int r = 0;
	if (op->flags & PROTO_F_MKDIR_P)
		r = util_mkdir_p(dir, 0755);
	char *tmp = NULL, *final = strdup(op->path);
	if (r == 0 && (!final || asprintf(&tmp, "%s/.%s.space-tmp-XXXXXX", dir, base) < 0)) {
		tmp = NULL;
		r = -ENOMEM;
	}
	free(dir);
	if (r == 0) {
		int fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			r = -errno;
		else if (fchmod(fd, op->mode ? op->mode & 07777 : 0644) < 0) {
			r = -errno;
			close(fd);
			unlink(tmp);
		} else {
			c->file_fd = fd;
		}
	}
	if (r < 0) {
		free(tmp);
		free(final);
		return r;
	}
	c->tmp_path = tmp;
	c->final_path = final;
	c->state = C_FILE_WRITE;
	return 0;
}

void files_abort(struct conn *c)
{
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->file_fd = -1;
	if (c->tmp_path)
		unlink(c->tmp_path);
	free(c->tmp_path);
	free(c->final_path);
	c->tmp_path = c->final_path = NULL;
}

void files_write_frame(struct conn *c, const struct proto_frame *f)
{
	if (f->type == PROTO_DATA) {
		if (c->state == C_DISCARD)
			return;
		int r = util_write_all(c->file_fd, f->payload, f->len);
		if (r < 0) {
			proto_put_err(&c->out, -r, "write %s: %s", c->final_path, strerror(-r));
			files_abort(c);
			c->state = C_DISCARD;
		}
		return;
	}
	if (f->type != PROTO_END || proto_get_empty(f) < 0) {
		conn_close(c);
		return;
	}
	if (c->state == C_DISCARD) {
		c->state = C_CLOSING;
		return;
	}
	int fd = c->file_fd;
	c->file_fd = -1;
	int r = close(fd) < 0 ? -errno : 0;
	if (r == 0 && rename(c->tmp_path, c->final_path) < 0)
		r = -errno;
	if (r < 0) {
		reply_err(c, r, "write", c->final_path);
	} else {
		free(c->tmp_path);
		c->tmp_path = NULL;
		reply_ok(c);
	}
	files_abort(c);
}

void files_read_more(struct conn *c)
{
	static uint8_t buf[PROTO_CHUNK];
	while (c->file_fd >= 0 && proto_buf_pending(&c->out) < AGENT_OUT_HIGH) {
		ssize_t n = read(c->file_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			/* The client sees ERR instead of END: what it got so far is incomplete. */
			proto_put_err(&c->out, errno, "read: %s", strerror(errno));
		} else if (n > 0) {
			proto_put_bytes(&c->out, PROTO_DATA, buf, (size_t)n);
			continue;
		} else {
			proto_put_empty(&c->out, PROTO_END);
		}
		files_abort(c);
		c->state = C_CLOSING;
	}
}

static int read_begin(struct conn *c, const struct proto_path_op *op)
{
	int fd = open(op->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat st;
	int r = fstat(fd, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? -EISDIR : !S_ISREG(st.st_mode) ? -EINVAL : 0;
	if (r < 0) {
		close(fd);
		return r;
	}
	struct proto_stat ps;
	stat_to_proto(&st, &ps);
	proto_put_stat(&c->out, PROTO_STAT_REPLY, &ps);
	c->file_fd = fd;
	c->state = C_FILE_READ;
	files_read_more(c);
	return 0;
}

static int list_dir(struct conn *c, const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct proto_dirent e = { 0 };
		snprintf(e.name, sizeof(e.name), "%s", de->d_name);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			stat_to_proto(&st, &e.st);
		else
			e.st.mode = (uint32_t)DTTOIF(de->d_type);
		proto_put_dirent(&c->out, &e);
	}
	int r = errno ? -errno : 0;
	closedir(d);
	if (r < 0)
		return r;
	proto_put_empty(&c->out, PROTO_END);
	return 0;
}

static int remove_path(const char *path, bool recursive)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	if (recursive)
		return util_rm_rf(path);
	return rmdir(path) < 0 ? -errno : 0;
}

void files_request(struct conn *c, const struct proto_frame *f)
{
	struct proto_path_op op;
	if (proto_get_path_op(f, &op) < 0) {
		conn_close(c);
		return;
	}
	int r = 0;
	struct stat st;
	struct proto_stat ps;
	switch (f->type) {
	case PROTO_FILE_WRITE:
		r = write_begin(c, &op);
		if (r < 0) {
			/* Report now, then swallow the data the client is already sending. */
			proto_put_err(&c->out, -r, "write %s: %s", op.path, strerror(-r));
			c->state = C_DISCARD;
		}
		return;
	case PROTO_FILE_READ:
		r = read_begin(c, &op);
		if (r < 0)
			reply_err(c, r, "read", op.path);
		return;
	case PROTO_STAT:
		r = (op.flags & PROTO_F_NOFOLLOW ? lstat(op.path, &st) : stat(op.path, &st)) < 0 ? -errno : 0;
		if (r < 0) {
			reply_err(c, r, "stat", op.path);
		} else {
			stat_to_proto(&st, &ps);
			proto_put_stat(&c->out, PROTO_STAT_REPLY, &ps);
			c->state = C_CLOSING;
		}
		return;
	case PROTO_LIST_DIR:
		r = list_dir(c, op.path);
		if (r < 0)
			reply_err(c, r, "list", op.path);
		c->state = C_CLOSING;
		return;
	case PROTO_MKDIR:
		if (op.flags & PROTO_F_PARENTS)
			r = util_mkdir_p(op.path, op.mode ? op.mode & 07777 : 0755);
		else
			r = mkdir(op.path, op.mode ? op.mode & 07777 : 0755) < 0 ? -errno : 0;
		break;
	case PROTO_REMOVE:
		r = remove_path(op.path, op.flags & PROTO_F_RECURSIVE);
		break;
	case PROTO_RENAME:
		r = rename(op.path, op.path2) < 0 ? -errno : 0;
		break;
	default:
		conn_close(c);
		return;
	}
	if (r < 0)
		reply_err(c, r, f->type == PROTO_MKDIR ? "mkdir" : f->type == PROTO_REMOVE ? "remove" : "rename",
			  op.path);
	else
		reply_ok(c);
}
