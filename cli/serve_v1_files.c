/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: files of a sandbox in the native API. Uploads stream into the sandbox as they arrive
 * (a pipe and a writer thread) under a temporary name renamed into place once the body is whole, so an
 * aborted or oversized upload never leaves a partial file. Downloads stream out the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"
#include "util/cleanup.h"
#include "util/util.h"

#define PATH_MAX_LEN 4095
#define LIST_ENTRIES_MAX 100000

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* The absolute path in ?path= (or a JSON member); NULL after answering 400. */
static const char *check_path(struct serve_req *r, const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > PATH_MAX_LEN) {
		serve_reply_error(r, 400, "invalid", "'path' must be an absolute path of at most %d bytes", PATH_MAX_LEN);
		return NULL;
	}
	return p;
}

/* The sandbox and the ?path= of a file request, and (with ret_stat) the file's attributes; NULL after
 * answering when any of them is wrong. */
static space_sandbox *file_target(struct serve_req *r, const char **ret_path, struct space_file_stat *ret_stat)
{
	*ret_path = check_path(r, serve_query(r, "path"));
	space_sandbox *sb = *ret_path ? serve_req_sandbox(r) : NULL;
	if (sb && ret_stat) {
		int e = space_sandbox_stat(sb, *ret_path, ret_stat);
		if (e < 0) {
			serve_reply_space_error(r, e, "stat");
			return NULL;
		}
	}
	return sb;
}

static const char *file_type(uint32_t mode)
{
	return S_ISDIR(mode) ? "dir" : S_ISREG(mode) ? "file" : S_ISLNK(mode) ? "symlink" : "other";
}

static cJSON *stat_json(const char *name_key, const char *name, const struct space_file_stat *st)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, name_key, name);
	cJSON_AddStringToObject(j, "type", file_type(st->mode));
	cJSON_AddNumberToObject(j, "mode", st->mode & 07777);
	cJSON_AddNumberToObject(j, "uid", st->uid);
	cJSON_AddNumberToObject(j, "gid", st->gid);
	cJSON_AddNumberToObject(j, "size", (double)st->file_size);
	cJSON_AddNumberToObject(j, "mtime_ms", (double)(st->mtime_ns / 1000000));
	return j;
}

/* --- upload --- */

struct upload {
	char path[PATH_MAX_LEN + 1];
	char tmp[PATH_MAX_LEN + 64];
	uint32_t mode;
	int wfd;                      /* our end of the pipe */
	int rfd;                      /* the writer's end */
	pthread_t thread;
	bool started;
	bool committed;               /* renamed into place: nothing to clean up */
	int result;                   /* the writer's */
	space_sandbox *sb;
};

static void *upload_thread(void *arg)
{
	struct upload *u = arg;
	u->result = space_sandbox_write_file(u->sb, u->tmp, u->rfd, u->mode);
	/* Our reads are over: a client still sending gets EPIPE on its next chunk. */
	close(u->rfd);
	u->rfd = -1;
	return NULL;
}

/* Ends the writer: EOF on the pipe, then waits. Returns its result. */
static int upload_finish(struct upload *u)
{
	if (u->wfd >= 0) {
		close(u->wfd);
		u->wfd = -1;
	}
	if (u->started) {
		pthread_join(u->thread, NULL);
		u->started = false;
	}
	return u->result;
}

static void upload_free(struct serve_req *r)
{
	struct upload *u = r->state;
	if (!u)
		return;
	upload_finish(u);
	if (!u->committed && u->sb)
		space_sandbox_remove_path(u->sb, u->tmp, false);
	if (u->rfd >= 0)
		close(u->rfd);
	free(u);
	r->state = NULL;
}

static int upload_sink(struct serve_req *r, const char *data, size_t len)
{
	struct upload *u = r->state;
	return util_write_all(u->wfd, data, len);
}

enum MHD_Result serve_v1_upload_start(struct serve_req *r)
{
	const char *path = check_path(r, serve_query(r, "path"));
	if (!path)
		return MHD_YES;
	uint64_t mode = 0644;
	const char *ms = serve_query(r, "mode");
	if (ms) {
		char *end;
		errno = 0;
		mode = strtoull(ms, &end, 8);
		if (errno || *end || !*ms || mode > 07777)
			return serve_reply_error(r, 400, "invalid", "'mode' must be octal permissions, e.g. 0644");
	}
	if (path[strlen(path) - 1] == '/')
		return serve_reply_error(r, 400, "invalid", "'path' names a directory");
	space_sandbox *sb = serve_req_sandbox(r);
	if (!sb)
		return MHD_YES;
	struct upload *u = calloc(1, sizeof(*u));
	if (!u)
		return serve_reply_error(r, 500, "internal", "out of memory");
	u->wfd = u->rfd = -1;
	u->mode = (uint32_t)mode;
	u->sb = sb;
	r->state = u;
	r->state_free = upload_free;
	unsigned char rnd[6];
	if (util_random_bytes(rnd, sizeof(rnd)) < 0)
		return serve_reply_error(r, 500, "internal", "random bytes");
	snprintf(u->path, sizeof(u->path), "%s", path);
	const char *slash = strrchr(path, '/');
	snprintf(u->tmp, sizeof(u->tmp), "%.*s/.%s.upload-%02x%02x%02x%02x%02x%02x", (int)(slash - path), path,
		 slash + 1, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return serve_reply_error(r, 500, "internal", "pipe: %s", strerror(errno));
	u->rfd = fds[0];
	u->wfd = fds[1];
	if (pthread_create(&u->thread, NULL, upload_thread, u) != 0)
		return serve_reply_error(r, 500, "internal", "cannot start a thread");
	u->started = true;
	r->sink = upload_sink;
	return MHD_YES;
}

enum MHD_Result serve_v1_upload(struct serve_req *r)
{
	struct upload *u = r->state;
	int e = upload_finish(u);
	if (e < 0)
		return serve_reply_space_error(r, e, "write file");
	if (r->sink_error < 0)
		return serve_reply_error(r, 500, "internal", "write file: %s", strerror(-r->sink_error));
	e = space_sandbox_rename(u->sb, u->tmp, u->path);
	if (e < 0)
		return serve_reply_space_error(r, e, "write file");
	u->committed = true;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	if (space_sandbox_stat(u->sb, u->path, &st) < 0)
		memset(&st, 0, sizeof(st));
	return serve_reply_json(r, 201, stat_json("path", u->path, &st));
}

/* --- download --- */

/* What a download's producer needs: the cap goes with it because the request is gone by then. */
struct download {
	uint64_t max;
	char path[];
};

static void download_producer(struct serve_producer *p)
{
	const struct download *d = p->arg;
	struct space_read_options o = SPACE_READ_OPTIONS_INIT;
	o.max_bytes = d->max;
	/* A file that grew past the cap after the stat (or whose sandbox lied about its size) ends the
	 * response with an error: the client sees a cut stream, not a whole file. */
	if (space_sandbox_read_file_v2(p->sb, d->path, p->fd, &o, NULL) < 0)
		p->failed = true;
}

enum MHD_Result serve_v1_download(struct serve_req *r)
{
	const char *path;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	space_sandbox *sb = file_target(r, &path, &st);
	if (!sb)
		return MHD_YES;
	if (S_ISDIR(st.mode))
		return serve_reply_error(r, 400, "is_directory", "%s is a directory (use files/list)", path);
	uint64_t max = r->srv->download_max;
	if (st.file_size > max) {
		char a[32], b[32];
		return serve_reply_error(r, 413, "too_large", "%s is %s, over the download limit of %s", path,
					 util_format_size(st.file_size, a, sizeof(a)), util_format_size(max, b, sizeof(b)));
	}
	size_t len = strlen(path);
	struct download *d = malloc(sizeof(*d) + len + 1);
	if (!d)
		return serve_reply_error(r, 500, "internal", "out of memory");
	d->max = max;
	memcpy(d->path, path, len + 1);
	return serve_reply_stream(r, 200, "application/octet-stream", download_producer, d, free);
}

/* --- the rest --- */

enum MHD_Result serve_v1_file_remove(struct serve_req *r)
{
	const char *path;
	space_sandbox *sb = file_target(r, &path, NULL);
	if (!sb)
		return MHD_YES;
	int e = space_sandbox_remove_path(sb, path, serve_query_bool(r, "recursive", false));
	if (e < 0)
		return serve_reply_space_error(r, e, "remove");
	return serve_reply_empty(r, 204);
}

enum MHD_Result serve_v1_file_stat(struct serve_req *r)
{
	const char *path;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	space_sandbox *sb = file_target(r, &path, &st);
	if (!sb)
		return MHD_YES;
	return serve_reply_json(r, 200, stat_json("path", path, &st));
}

static int list_entry(const char *name, const struct space_file_stat *st, void *userdata)
{
	cJSON *a = userdata;
	if (cJSON_GetArraySize(a) >= LIST_ENTRIES_MAX)
		return -E2BIG;
	_cleanup_free_ char *clean = serve_utf8_clean(name, strlen(name), NULL, NULL);
	cJSON *e = clean ? stat_json("name", clean, st) : NULL;
	if (!e)
		return -ENOMEM;
	cJSON_AddItemToArray(a, e);
	return 0;
}

enum MHD_Result serve_v1_file_list(struct serve_req *r)
{
	const char *path;
	space_sandbox *sb = file_target(r, &path, NULL);
	if (!sb)
		return MHD_YES;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	cJSON *a = cJSON_AddArrayToObject(j, "entries");
	if (!a)
		return serve_reply_json(r, 500, NULL);
	int e = space_sandbox_list_dir(sb, path, list_entry, a);
	if (e == -E2BIG) {
		cJSON_AddBoolToObject(j, "truncated", true);
	} else if (e < 0) {
		cJSON_Delete(j);
		return serve_reply_space_error(r, e, "list");
	}
	return serve_reply_json(r, 200, j);
}

enum MHD_Result serve_v1_mkdir(struct serve_req *r)
{
	static const char *const fields[] = { "path", "parents", "mode", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = serve_body_fields(r, fields);
	if (!j)
		return MHD_YES;
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "path");
	const cJSON *parents = cJSON_GetObjectItemCaseSensitive(j, "parents");
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(j, "mode");
	if ((parents && !cJSON_IsBool(parents)) ||
	    (mode && (!cJSON_IsNumber(mode) || mode->valuedouble < 0 || mode->valuedouble > 07777)))
		return serve_reply_error(r, 400, "invalid", "'parents' must be a boolean, 'mode' a number up to 4095");
	const char *path = check_path(r, cJSON_GetStringValue(p));
	if (!path)
		return MHD_YES;
	space_sandbox *sb = serve_req_sandbox(r);
	if (!sb)
		return MHD_YES;
	int e = space_sandbox_mkdir(sb, path, mode ? (uint32_t)mode->valuedouble : 0755, !parents || cJSON_IsTrue(parents));
	if (e < 0)
		return serve_reply_space_error(r, e, "mkdir");
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "path", path);
	return serve_reply_json(r, 201, out);
}
