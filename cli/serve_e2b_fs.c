/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: envd's files. GET/POST /files (raw download; upload as multipart/form-data or
 * application/octet-stream, held in a memfd while it arrives) and the filesystem.Filesystem service
 * (ListDir, MakeDir, Remove, Stat, Move) over the Connect protocol's JSON codec.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define E2B_PATH_MAX 4096
#define LIST_ENTRIES_MAX 100000
#define LIST_DEPTH_MAX 32
#define UPLOAD_PARTS_MAX 1000

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* --- GET /files --- */

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
	/* Past the cap after the stat (a growing file, a lying sandbox): the response ends with an error. */
	if (space_sandbox_read_file_v2(p->sb, d->path, p->fd, &o, NULL) < 0)
		p->failed = true;
}

/* The ?path= of a /files request resolved (against home) into buf; false after answering 400. */
static bool query_path(struct serve_req *r, const char *home, char *buf, size_t size)
{
	if (!e2b_path(home, serve_query(r, "path"), buf, size)) {
		e2b_api_error(r, 400, "'path' is too long");
		return false;
	}
	return true;
}

enum MHD_Result e2b_files_get(struct serve_req *r)
{
	char path[E2B_PATH_MAX];
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return MHD_YES;
	struct e2b_user user;
	char err[256];
	int e = e2b_request_user(r, sb, &user, err, sizeof(err));
	if (e < 0)
		return e2b_api_error(r, e == -EINVAL ? 400 : 500, "%s", err);
	if (!query_path(r, user.home, path, sizeof(path)))
		return MHD_YES;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	e = space_sandbox_stat(sb, path, &st);
	if (e == -ENOENT)
		return e2b_api_error(r, 404, "path '%s' does not exist", path);
	if (e < 0)
		return e2b_api_error(r, 500, "stat '%s': %s", path, space_strerror(e));
	if (S_ISDIR(st.mode))
		return e2b_api_error(r, 400, "path '%s' is a directory", path);
	uint64_t max = r->srv->download_max;
	if (st.file_size > max) {
		char a[32], b[32];
		return e2b_api_error(r, 413, "file '%s' is %s, over the download limit of %s", path,
				     util_format_size(st.file_size, a, sizeof(a)), util_format_size(max, b, sizeof(b)));
	}
	if (st.file_size == 0) {
		/* An empty file: Content-Length 0 rather than an empty chunked body. */
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
		if (resp)
			MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
		return serve_reply(r, 200, resp);
	}
	size_t len = strlen(path);
	struct download *d = malloc(sizeof(*d) + len + 1);
	if (!d)
		return e2b_api_error(r, 500, "out of memory");
	d->max = max;
	memcpy(d->path, path, len + 1);
	return serve_reply_stream(r, 200, "application/octet-stream", download_producer, d, free);
}

/* --- POST /files --- */

struct upload {
	int fd;                       /* memfd holding the body */
	char home[256];               /* relative paths resolve here: the request's user's home */
};

static void upload_free(struct serve_req *r)
{
	struct upload *u = r->state;
	if (u && u->fd >= 0)
		close(u->fd);
	free(u);
	r->state = NULL;
}

static int upload_sink(struct serve_req *r, const char *data, size_t len)
{
	struct upload *u = r->state;
	return util_write_all(u->fd, data, len);
}

enum MHD_Result e2b_files_post_start(struct serve_req *r)
{
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return MHD_YES;
	struct e2b_user user;
	char err[256];
	int e = e2b_request_user(r, sb, &user, err, sizeof(err));
	if (e < 0)
		return e2b_api_error(r, e == -EINVAL ? 400 : 500, "%s", err);
	struct upload *u = calloc(1, sizeof(*u));
	if (!u)
		return e2b_api_error(r, 500, "out of memory");
	/* Files land where the user's paths resolve, but owned by root: the library has no call that sets a
	 * sandbox file's owner (docs/e2b.md). */
	snprintf(u->home, sizeof(u->home), "%s", user.home);
	r->state = u;
	r->state_free = upload_free;
	u->fd = memfd_create("space-e2b-upload", MFD_CLOEXEC);
	if (u->fd < 0)
		return e2b_api_error(r, 500, "memfd: %s", strerror(errno));
	r->sink = upload_sink;
	return MHD_YES;
}

/* Writes len bytes at data to path in the sandbox and adds its entry to out; 0 or -errno. */
static int write_one(space_sandbox *sb, const char *path, const void *data, size_t len, cJSON *out)
{
	_cleanup_close_ int fd = memfd_create("space-e2b-part", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int e = util_write_all(fd, data, len);
	if (e < 0)
		return e;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	e = space_sandbox_write_file(sb, path, fd, 0644);
	if (e < 0)
		return e;
	const char *slash = strrchr(path, '/');
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", slash ? slash + 1 : path);
	cJSON_AddStringToObject(j, "type", "file");
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddItemToArray(out, j);
	return 0;
}

static const char *memmem_str(const char *hay, size_t len, const char *needle)
{
	return memmem(hay, len, needle, strlen(needle));
}

/* The filename="..." of a part's headers into buf ("" when absent). */
static void part_filename(const char *h, size_t hlen, char *buf, size_t size)
{
	buf[0] = '\0';
	const char *f = memmem_str(h, hlen, "filename=\"");
	if (!f)
		return;
	f += 10;
	const char *q = memchr(f, '"', hlen - (size_t)(f - h));
	if (q && (size_t)(q - f) < size) {
		memcpy(buf, f, (size_t)(q - f));
		buf[q - f] = '\0';
	}
}

/* Splits a multipart body and writes each part; answers. */
static enum MHD_Result multipart(struct serve_req *r, const char *body, size_t len, const char *boundary,
				 const char *qpath, const char *home, cJSON *out)
{
	char delim[256];
	if (snprintf(delim, sizeof(delim), "--%s", boundary) >= (int)sizeof(delim))
		return e2b_api_error(r, 400, "multipart boundary too long");
	const char *p = memmem_str(body, len, delim);
	int parts = 0;
	while (p) {
		p += strlen(delim);
		size_t left = len - (size_t)(p - body);
		if (left >= 2 && !memcmp(p, "--", 2))
			break;
		const char *hend = memmem_str(p, left, "\r\n\r\n");
		if (!hend)
			return e2b_api_error(r, 400, "malformed multipart body");
		const char *data = hend + 4;
		char delim_crlf[260];
		snprintf(delim_crlf, sizeof(delim_crlf), "\r\n%s", delim);
		const char *next = memmem_str(data, len - (size_t)(data - body), delim_crlf);
		if (!next)
			return e2b_api_error(r, 400, "malformed multipart body");
		char name[E2B_PATH_MAX], path[E2B_PATH_MAX];
		part_filename(p, (size_t)(hend - p), name, sizeof(name));
		/* ?path= names a single file; the part's filename names each of several. */
		const char *want = qpath && *qpath ? qpath : name;
		if (!*want || !strcmp(want, "undefined") || !e2b_path(home, want, path, sizeof(path)))
			return e2b_api_error(r, 400, "no path for an uploaded file");
		if (++parts > UPLOAD_PARTS_MAX)
			return e2b_api_error(r, 400, "too many files in one upload");
		int e = write_one(r->sb, path, data, (size_t)(next - data), out);
		if (e < 0)
			return e2b_api_error(r, e == -ENOSPC ? 507 : 500, "write '%s': %s", path, space_strerror(e));
		p = next + 2;
	}
	if (!parts)
		return e2b_api_error(r, 400, "the upload holds no file");
	return serve_reply_json(r, 200, TAKE_PTR(out));
}

enum MHD_Result e2b_files_post(struct serve_req *r)
{
	struct upload *u = r->state;
	if (r->sink_error < 0)
		return e2b_api_error(r, 500, "upload: %s", strerror(-r->sink_error));
	off_t size = lseek(u->fd, 0, SEEK_END);
	if (size < 0 || lseek(u->fd, 0, SEEK_SET) < 0)
		return e2b_api_error(r, 500, "upload: %s", strerror(errno));
	const char *qpath = serve_query(r, "path");
	const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	_cleanup_(cJSON_Deletep) cJSON *out = cJSON_CreateArray();
	if (!out)
		return e2b_api_error(r, 500, "out of memory");
	if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
		const char *b = strcasestr(ct, "boundary=");
		if (!b || !b[9])
			return e2b_api_error(r, 400, "multipart upload without a boundary");
		char boundary[200];
		snprintf(boundary, sizeof(boundary), "%.*s", (int)strcspn(b + 9, ";"), b + 9);
		if (boundary[0] == '"') {
			memmove(boundary, boundary + 1, strlen(boundary));
			boundary[strcspn(boundary, "\"")] = '\0';
		}
		if (size == 0)
			return e2b_api_error(r, 400, "the upload holds no file");
		void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, u->fd, 0);
		if (m == MAP_FAILED)
			return e2b_api_error(r, 500, "upload: %s", strerror(errno));
		enum MHD_Result ret = multipart(r, m, (size_t)size, boundary, qpath, u->home, out);
		if (r->answered && r->status == 200)
			out = NULL;
		munmap(m, (size_t)size);
		return ret;
	}
	if (ct && strncasecmp(ct, "application/octet-stream", 24))
		return e2b_api_error(r, 400, "unsupported upload type '%s'", ct);
	const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding");
	if (enc && strcasecmp(enc, "identity"))
		return e2b_api_error(r, 400, "Content-Encoding '%s' is not supported", enc);
	char path[E2B_PATH_MAX];
	if (!qpath || !*qpath)
		return e2b_api_error(r, 400, "'path' is required");
	if (!e2b_path(u->home, qpath, path, sizeof(path)))
		return e2b_api_error(r, 400, "'path' is too long");
	int e = space_sandbox_write_file(r->sb, path, u->fd, 0644);
	if (e < 0)
		return e2b_api_error(r, e == -ENOSPC ? 507 : 500, "write '%s': %s", path, space_strerror(e));
	const char *slash = strrchr(path, '/');
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", slash + 1);
	cJSON_AddStringToObject(j, "type", "file");
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddItemToArray(out, j);
	return serve_reply_json(r, 200, TAKE_PTR(out));
}

/* --- filesystem.Filesystem --- */

static void perm_string(uint32_t mode, char out[11])
{
	out[0] = S_ISDIR(mode) ? 'd' : S_ISLNK(mode) ? 'l' : '-';
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[10] = '\0';
}

static void add_owner(cJSON *j, const char *name, uint32_t id)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%u", id);
	cJSON_AddStringToObject(j, name, id == 0 ? "root" : buf);
}

cJSON *e2b_entry_json(const char *path, const struct space_file_stat *st)
{
	cJSON *j = cJSON_CreateObject();
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *name = serve_utf8_clean(slash && slash[1] ? slash + 1 : path,
						     strlen(slash && slash[1] ? slash + 1 : path), NULL, NULL);
	_cleanup_free_ char *cpath = serve_utf8_clean(path, strlen(path), NULL, NULL);
	cJSON_AddStringToObject(j, "name", name ? name : "");
	cJSON_AddStringToObject(j, "type", S_ISDIR(st->mode) ? "FILE_TYPE_DIRECTORY" : S_ISLNK(st->mode) ?
					   "FILE_TYPE_SYMLINK" : "FILE_TYPE_FILE");
	cJSON_AddStringToObject(j, "path", cpath ? cpath : "");
	char size[24], perms[11], mtime[48];
	snprintf(size, sizeof(size), "%llu", (unsigned long long)st->file_size);
	cJSON_AddStringToObject(j, "size", size);
	cJSON_AddNumberToObject(j, "mode", st->mode & 0777);
	perm_string(st->mode, perms);
	cJSON_AddStringToObject(j, "permissions", perms);
	add_owner(j, "owner", st->uid);
	add_owner(j, "group", st->gid);
	time_t t = (time_t)(st->mtime_ns / 1000000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(mtime, sizeof(mtime), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(j, "modifiedTime", mtime);
	return j;
}

/* The "path" member of a unary request resolved (a relative one against the request's user's home) into
 * buf, and the sandbox; NULL after answering. */
static space_sandbox *rpc_target(struct serve_req *r, const cJSON *j, const char *member, char *buf, size_t size)
{
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return NULL;
	struct e2b_user user;
	char err[256];
	int e = e2b_request_user(r, sb, &user, err, sizeof(err));
	if (e < 0) {
		e2b_rpc_error(r, e2b_rpc_code(e), "%s", err);
		return NULL;
	}
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, member);
	if ((p && !cJSON_IsString(p)) || !e2b_path(user.home, cJSON_GetStringValue(p), buf, size)) {
		e2b_rpc_error(r, "invalid_argument", "'%s' must be a path", member);
		return NULL;
	}
	return sb;
}

/* Stat of path as an EntryInfo reply under "entry"; answers. */
static enum MHD_Result reply_entry(struct serve_req *r, space_sandbox *sb, const char *path)
{
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	int e = space_sandbox_stat(sb, path, &st);
	if (e < 0)
		return e2b_rpc_error(r, e2b_rpc_code(e), "stat '%s': %s", path, space_strerror(e));
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "entry", e2b_entry_json(path, &st));
	return e2b_rpc_reply(r, j);
}

struct walk {
	space_sandbox *sb;
	cJSON *entries;
	const char *dir;
	unsigned depth;               /* levels still to list below this one */
};

static int walk_entry(const char *name, const struct space_file_stat *st, void *userdata)
{
	struct walk *w = userdata;
	if (cJSON_GetArraySize(w->entries) >= LIST_ENTRIES_MAX)
		return -E2BIG;
	char path[E2B_PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s%s%s", w->dir, strcmp(w->dir, "/") ? "/" : "", name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return 0;
	cJSON *e = e2b_entry_json(path, st);
	if (!e)
		return -ENOMEM;
	cJSON_AddItemToArray(w->entries, e);
	if (S_ISDIR(st->mode) && w->depth > 1) {
		struct walk sub = { w->sb, w->entries, path, w->depth - 1 };
		int r = space_sandbox_list_dir(w->sb, path, walk_entry, &sub);
		if (r == -E2BIG || r == -ENOMEM)
			return r;
	}
	return 0;
}

/* A request whose body names one "path" (and ListDir's "depth"): the path into path (E2B_PATH_MAX
 * bytes) and the sandbox; NULL after answering. */
static space_sandbox *path_request(struct serve_req *r, char *path, double *ret_depth)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	if (!j)
		return NULL;
	if (ret_depth)
		*ret_depth = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "depth"));
	return rpc_target(r, j, "path", path, E2B_PATH_MAX);
}

enum MHD_Result e2b_fs_list_dir(struct serve_req *r)
{
	char path[E2B_PATH_MAX];
	double d;
	space_sandbox *sb = path_request(r, path, &d);
	if (!sb)
		return MHD_YES;
	unsigned depth = d >= 1 && d <= LIST_DEPTH_MAX ? (unsigned)d : d > LIST_DEPTH_MAX ? LIST_DEPTH_MAX : 1;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	int e = space_sandbox_stat(sb, path, &st);
	if (e == 0 && !S_ISDIR(st.mode))
		return e2b_rpc_error(r, "invalid_argument", "'%s' is not a directory", path);
	cJSON *out = cJSON_CreateObject();
	struct walk w = { sb, cJSON_AddArrayToObject(out, "entries"), path, depth };
	if (e == 0)
		e = space_sandbox_list_dir(sb, path, walk_entry, &w);
	if (e < 0 && e != -E2BIG) {
		cJSON_Delete(out);
		return e2b_rpc_error(r, e2b_rpc_code(e), "list '%s': %s", path, space_strerror(e));
	}
	return e2b_rpc_reply(r, out);
}

enum MHD_Result e2b_fs_stat(struct serve_req *r)
{
	char path[E2B_PATH_MAX];
	space_sandbox *sb = path_request(r, path, NULL);
	return sb ? reply_entry(r, sb, path) : MHD_YES;
}

enum MHD_Result e2b_fs_make_dir(struct serve_req *r)
{
	char path[E2B_PATH_MAX];
	space_sandbox *sb = path_request(r, path, NULL);
	if (!sb)
		return MHD_YES;
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	if (space_sandbox_stat(sb, path, &st) == 0)
		return e2b_rpc_error(r, "already_exists", "'%s' already exists", path);
	int e = space_sandbox_mkdir(sb, path, 0755, true);
	if (e < 0)
		return e2b_rpc_error(r, e2b_rpc_code(e), "make '%s': %s", path, space_strerror(e));
	return reply_entry(r, sb, path);
}

enum MHD_Result e2b_fs_remove(struct serve_req *r)
{
	char path[E2B_PATH_MAX];
	space_sandbox *sb = path_request(r, path, NULL);
	if (!sb)
		return MHD_YES;
	int e = space_sandbox_remove_path(sb, path, true);
	if (e < 0)
		return e2b_rpc_error(r, e2b_rpc_code(e), "remove '%s': %s", path, space_strerror(e));
	return e2b_rpc_reply(r, NULL);
}

enum MHD_Result e2b_fs_move(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	char from[E2B_PATH_MAX], to[E2B_PATH_MAX];
	space_sandbox *sb = j ? rpc_target(r, j, "source", from, sizeof(from)) : NULL;
	if (!sb || !rpc_target(r, j, "destination", to, sizeof(to)))
		return MHD_YES;
	int e = space_sandbox_rename(sb, from, to);
	if (e < 0)
		return e2b_rpc_error(r, e2b_rpc_code(e), "move '%s': %s", from, space_strerror(e));
	return reply_entry(r, sb, to);
}
