/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Template streams: a template moved to another host as the kernel's btrfs send stream of its subvolume,
 * whole or against a parent the other host has, behind a header of ours.
 *
 *   space-template-stream 1 LEN\n
 *   LEN bytes of JSON: {"format":1, "name", "id", "parent", "parent_id", "digest", "entries", "files",
 *                       "bytes", "kernel", "initrd", "image_digest", "image_config"}
 *   a btrfs send stream, version 1, to the end
 *
 * "id" is the template's identity: the uuid of its subvolume, or for a template received here the id it
 * was sent with (kept as the subvolume's received uuid), so that a template keeps one id on every host it
 * reaches and a later stream can name it as its parent. Both ends work on a view of the template less what
 * is the host's own (the booted memory snapshot, the jails' copy of the tree): the sender sends that view
 * and its digest (template_digest.c), the receiver applies the stream onto an empty subvolume or a view of
 * the parent, through the confined space-unpack (core/unpack.h), and commits the template only when the
 * digest of what it made is the sender's. An identity says which template to start from; the digest says
 * the result is right (a parent that changed since makes a digest that differs, and nothing is kept).
 */
#include <btrfsutil.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/template_import.h"
#include "core/template_stream.h"
#include "core/unpack.h"
#include "core/vm_backend.h"
#include "core/disk_tree.h"
#include "store/btrfs.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete)

#define IMAGE_CONFIG_MAX (256u << 10)

static void progress(space_progress_fn fn, void *ud, const char *stage, uint64_t done, uint64_t total)
{
	if (fn)
		fn(stage, done, total, ud);
}

static void uuid_str(const uint8_t u[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
		 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static int uuid_parse(const char *s, uint8_t u[16])
{
	if (!s || strlen(s) != 36)
		return -EINVAL;
	size_t k = 0;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -EINVAL;
			continue;
		}
		int v = s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10 : -1;
		if (v < 0)
			return -EINVAL;
		if (k % 2 == 0)
			u[k / 2] = (uint8_t)(v << 4);
		else
			u[k / 2] |= (uint8_t)v;
		k++;
	}
	static const uint8_t zero[16];
	return memcmp(u, zero, 16) ? 0 : -EINVAL;
}

/* A template's identity: its subvolume's received uuid when it came in a stream, else its own uuid. */
static int template_identity(const char *path, uint8_t ret[16]);

int template_stream_identity(const char *path, char out[37])
{
	uint8_t u[16];
	int r = template_identity(path, u);
	if (r < 0) {
		out[0] = '\0';
		return r;
	}
	uuid_str(u, out);
	return 0;
}

static int template_identity(const char *path, uint8_t ret[16])
{
	struct btrfs_util_subvolume_info info;
	if (btrfs_util_subvolume_info(path, 0, &info) != BTRFS_UTIL_OK)
		return errno ? -errno : -EIO;
	static const uint8_t zero[16];
	memcpy(ret, memcmp(info.received_uuid, zero, 16) ? info.received_uuid : info.uuid, 16);
	return 0;
}

/* Removes from the subvolume at dir what is this host's own: the memory snapshot and the jails' tree. */
static int strip_host_files(const char *dir)
{
	static const char *const names[] = { VM_SNAPSHOT_FILE, VM_SNAPSHOT_META, DISK_TREE, DISK_TREE_STALE };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		int r = util_rm_rf(p);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A read-only view of the template at src (a snapshot under the pool's .tmp, stripped) into out. */
static int send_view(space_ctx *ctx, const char *root, const char *src, char *out, size_t len)
{
	int r = core_pool_tmp_path(ctx, root, out, len);
	if (r < 0)
		return r;
	if ((r = store_btrfs_snapshot(src, out, false)) < 0)
		return ctx_error(ctx, r, "snapshot %s", src);
	if ((r = strip_host_files(out)) < 0 || (r = store_btrfs_set_read_only(out, true)) < 0) {
		(void)store_btrfs_subvolume_delete(out);
		out[0] = '\0';
		return ctx_error(ctx, r, "prepare the view of %s to send", src);
	}
	return 0;
}

static void drop_view(char *path)
{
	if (path[0])
		(void)store_btrfs_subvolume_delete(path);
	path[0] = '\0';
}

static char *stream_header(space_ctx *ctx, const char *name, const char *parent, const struct template_info *t,
			   const uint8_t id[16], const uint8_t *parent_id, const struct template_digest *dg)
{
	char ids[37];
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "format", 1);
	cJSON_AddStringToObject(j, "name", name);
	uuid_str(id, ids);
	cJSON_AddStringToObject(j, "id", ids);
	if (parent) {
		cJSON_AddStringToObject(j, "parent", parent);
		uuid_str(parent_id, ids);
		cJSON_AddStringToObject(j, "parent_id", ids);
	}
	cJSON_AddStringToObject(j, "digest", dg->digest);
	cJSON_AddNumberToObject(j, "entries", (double)dg->entries);
	cJSON_AddNumberToObject(j, "files", (double)dg->files);
	cJSON_AddNumberToObject(j, "bytes", (double)dg->bytes);
	cJSON_AddBoolToObject(j, "kernel", t->has_kernel);
	cJSON_AddBoolToObject(j, "initrd", t->has_initrd);
	cJSON_AddStringToObject(j, "image_digest", t->image_digest);
	_cleanup_free_ char *cfg = NULL;
	if (t->image_digest[0] && store_template_get_image_config(ctx->store, name, &cfg) == 0 && cfg) {
		cJSON *c = cJSON_Parse(cfg);
		if (c)
			cJSON_AddItemToObject(j, "image_config", c);
	}
	char *body = cJSON_PrintUnformatted(j);
	if (!body)
		return NULL;
	size_t n = strlen(body);
	char *out = malloc(n + 64);
	if (out)
		snprintf(out, n + 64, TEMPLATE_STREAM_MAGIC "%zu\n%s", n, body);
	free(body);
	return out;
}

struct send_job {
	int dir, pipe_w;
	struct btrfs_ioctl_send_args a;
	int err;
};

static void *send_thread(void *arg)
{
	struct send_job *j = arg;
	j->err = ioctl(j->dir, BTRFS_IOC_SEND, &j->a) < 0 ? -errno : 0;
	close(j->pipe_w);
	return NULL;
}

/*
 * The kernel's send of the read-only subvolume view (incremental against parent_view) into fd. The kernel
 * writes at its own offset from 0 (a file would lose what precedes), so it writes into a pipe, which this
 * thread copies to fd from its position, counting the bytes for progress.
 */
static int kernel_send(space_ctx *ctx, const char *view, const char *parent_view, int fd, space_progress_fn fn,
		       void *ud, uint64_t total, uint64_t *ret_bytes)
{
	_cleanup_close_ int dir = open(view, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return ctx_error(ctx, -errno, "open %s", view);
	struct send_job j = { .dir = dir };
	__u64 parent_id = 0;
	if (parent_view) {
		uint64_t sid = 0;
		if (btrfs_util_subvolume_id(parent_view, &sid) != BTRFS_UTIL_OK)
			return ctx_error(ctx, errno ? -errno : -EIO, "the subvolume id of %s", parent_view);
		parent_id = sid;
		j.a.parent_root = parent_id;
		j.a.clone_sources_count = 1;
		j.a.clone_sources = &parent_id;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return ctx_error(ctx, -errno, "pipe");
	j.pipe_w = p[1];
	j.a.send_fd = p[1];
	pthread_t t;
	int r = pthread_create(&t, NULL, send_thread, &j);
	if (r) {
		close(p[0]);
		close(p[1]);
		return ctx_error(ctx, -r, "start the send");
	}
	_cleanup_free_ char *buf = malloc(1u << 18);
	uint64_t n = 0, shown = 0;
	int werr = buf ? 0 : -ENOMEM;
	for (;;) {
		ssize_t k = read(p[0], buf ? buf : (char[1]){ 0 }, buf ? 1u << 18 : 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		/* After a write error the pipe is still drained, so the kernel's send ends. */
		if (werr == 0 && (werr = util_write_all(fd, buf, (size_t)k)) < 0)
			continue;
		n += (uint64_t)k;
		if (fn && n - shown >= (8u << 20)) {
			shown = n;
			fn("send", n, total, ud);
		}
	}
	close(p[0]);
	pthread_join(t, NULL);
	*ret_bytes = n;
	if (j.err < 0)
		return ctx_error(ctx, j.err, "btrfs send of %s", view);
	if (werr < 0)
		return ctx_error(ctx, werr, "write the stream");
	return 0;
}

/* The physical extents of the file at path (sorted by start), at most max of them. */
struct extent {
	uint64_t phys, len;
};

static int cmp_extent(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;
	return x->phys < y->phys ? -1 : x->phys > y->phys;
}

static int file_extents(const char *path, struct extent **ret, size_t *ret_n)
{
	enum { BATCH = 256, MAX = 1 << 16 };
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_cleanup_free_ struct fiemap *fm = calloc(1, sizeof(*fm) + BATCH * sizeof(struct fiemap_extent));
	struct extent *list = NULL;
	size_t n = 0;
	uint64_t start = 0;
	bool last = false;
	if (!fm)
		return -ENOMEM;
	while (!last && n < MAX) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_extent_count = BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			free(list);
			return -errno;
		}
		if (!fm->fm_mapped_extents)
			break;
		struct extent *nl = realloc(list, (n + fm->fm_mapped_extents) * sizeof(*list));
		if (!nl) {
			free(list);
			return -ENOMEM;
		}
		list = nl;
		for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
			const struct fiemap_extent *e = &fm->fm_extents[i];
			if (!(e->fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DATA_INLINE)))
				list[n++] = (struct extent){ e->fe_physical, e->fe_length };
			last |= e->fe_flags & FIEMAP_EXTENT_LAST;
			start = e->fe_logical + e->fe_length;
		}
	}
	qsort(list, n, sizeof(*list), cmp_extent);
	*ret = list;
	*ret_n = n;
	return 0;
}

/* How much of a's disk (rootfs.ext4) lies in extents b's disk holds too: what an incremental send of a
 * against b can clone instead of sending. */
static uint64_t shared_bytes(const struct extent *a, size_t na, const struct extent *b, size_t nb)
{
	uint64_t shared = 0;
	size_t j = 0;
	for (size_t i = 0; i < na; i++) {
		uint64_t s = a[i].phys, e = a[i].phys + a[i].len;
		while (j < nb && b[j].phys + b[j].len <= s)
			j++;
		for (size_t k = j; k < nb && b[k].phys < e; k++) {
			uint64_t lo = s > b[k].phys ? s : b[k].phys, hi = e < b[k].phys + b[k].len ? e : b[k].phys + b[k].len;
			if (hi > lo)
				shared += hi - lo;
		}
	}
	return shared;
}

/* Of the local templates whose id is in ids, the one sharing the most of t's disk, into ret (64 bytes);
 * "" when none shares any. */
static void pick_parent(space_ctx *ctx, const struct template_info *t, const char *const *ids, char *ret)
{
	ret[0] = '\0';
	char disk[PATH_MAX];
	snprintf(disk, sizeof(disk), "%s/rootfs.ext4", t->path);
	_cleanup_free_ struct extent *mine = NULL;
	size_t n_mine = 0;
	struct template_info *list = NULL;
	size_t n = 0;
	if (file_extents(disk, &mine, &n_mine) < 0 || core_template_list(ctx, &list, &n) < 0)
		return;
	uint64_t best = 0;
	for (size_t i = 0; i < n; i++) {
		char id[37];
		bool wanted = false;
		if (!strcmp(list[i].name, t->name) || template_stream_identity(list[i].path, id) < 0)
			continue;
		for (size_t k = 0; ids[k] && !wanted; k++)
			wanted = !strcmp(ids[k], id);
		if (!wanted)
			continue;
		snprintf(disk, sizeof(disk), "%s/rootfs.ext4", list[i].path);
		struct extent *theirs = NULL;
		size_t n_theirs = 0;
		if (file_extents(disk, &theirs, &n_theirs) < 0)
			continue;
		uint64_t s = shared_bytes(mine, n_mine, theirs, n_theirs);
		free(theirs);
		if (s > best) {
			best = s;
			snprintf(ret, 64, "%s", list[i].name);
		}
	}
	free(list);
}

SPACE_API int space_template_send(space_ctx *ctx, const char *name, const struct space_template_send_options *opts,
				  struct space_template_send_info *ret)
{
	CTX_ENTER(ctx);
	if (!ctx || !name || !opts)
		return -EINVAL;
	struct space_template_send_options o;
	int r = opts_template_send_load(ctx, opts, &o);
	if (r < 0)
		return r;
	struct space_template_send_info info_local;
	if (!ret)
		ret = &info_local;
	memset(ret, 0, sizeof(*ret));
	if (o.fd <= 0 || fcntl(o.fd, F_GETFL) < 0 || (fcntl(o.fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return ctx_error_msg(ctx, -EINVAL, "send: fd %d is not open for writing", o.fd);
	if (o.parent && !strcmp(o.parent, name))
		return ctx_error_msg(ctx, -EINVAL, "template %s cannot be sent against itself", name);
	struct template_info t, pt;
	if ((r = core_template_get(ctx, name, &t)) < 0)
		return r;
	char picked[64] = "";
	if (!o.parent && o.receiver_ids) {
		pick_parent(ctx, &t, o.receiver_ids, picked);
		if (picked[0])
			o.parent = picked;
	}
	if (o.parent && (r = core_template_get(ctx, o.parent, &pt)) < 0)
		return r;
	const char *root;
	if ((r = ctx_pool(ctx, &root)) < 0)
		return r;
	uint8_t id[16], pid[16];
	if ((r = template_identity(t.path, id)) < 0 || (o.parent && (r = template_identity(pt.path, pid)) < 0))
		return ctx_error(ctx, r, "the identity of template %s", r < 0 && o.parent ? o.parent : name);
	(void)core_pool_tmp_sweep(ctx, root);
	char view[PATH_MAX] = "", pview[PATH_MAX] = "";
	progress(o.progress, o.progress_userdata, "snapshot", 0, 0);
	if ((r = send_view(ctx, root, t.path, view, sizeof(view))) < 0)
		return r;
	if (o.parent && (r = send_view(ctx, root, pt.path, pview, sizeof(pview))) < 0) {
		drop_view(view);
		return r;
	}
	progress(o.progress, o.progress_userdata, "digest", 0, 0);
	struct template_digest dg;
	char err[600];
	if ((r = template_digest_tree(view, &dg, err, sizeof(err))) < 0) {
		_cleanup_free_ char *safe = util_escape_dup(err, 0);
		r = ctx_error_msg(ctx, r, "digest of template %s: %s", name, safe ? safe : "?");
	}
	_cleanup_free_ char *hdr = r == 0 ? stream_header(ctx, name, o.parent, &t, id, pid, &dg) : NULL;
	if (r == 0 && !hdr)
		r = ctx_error_msg(ctx, -ENOMEM, "the stream's header");
	if (r == 0 && (r = util_write_all(o.fd, hdr, strlen(hdr))) < 0)
		r = ctx_error(ctx, r, "write the stream");
	if (r == 0) {
		uint64_t sent = 0;
		progress(o.progress, o.progress_userdata, "send", 0, dg.bytes);
		r = kernel_send(ctx, view, o.parent ? pview : NULL, o.fd, o.progress, o.progress_userdata, dg.bytes, &sent);
		ret->stream_bytes = strlen(hdr) + sent;
		snprintf(ret->parent, sizeof(ret->parent), "%s", o.parent ? o.parent : "");
		snprintf(ret->digest, sizeof(ret->digest), "%s", dg.digest);
	}
	drop_view(view);
	drop_view(pview);
	if (r == 0)
		ctx_log(ctx, SPACE_LOG_INFO, "template %s sent%s%s (%llu files, %llu bytes, %s)", name,
			o.parent ? " against " : "", o.parent ? o.parent : "", (unsigned long long)dg.files,
			(unsigned long long)dg.bytes, dg.digest);
	return r;
}

/* ---- receive ---- */

struct header {
	char name[64], parent[64];
	uint8_t id[16], parent_id[16];
	bool incremental, kernel, initrd;
	char digest[72], image_digest[80];
	char *image_config; /* malloc'd JSON, or NULL */
	uint64_t bytes, entries;
	size_t size;        /* of the header on the wire */
};

/* Reads the header exactly (nothing of the btrfs stream after it): the line, then LEN bytes. */
static int read_header(space_ctx *ctx, int fd, struct header *h)
{
	char line[64];
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t k = read(fd, &c, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return ctx_error(ctx, -errno, "read the stream");
		if (k == 0)
			return ctx_error_msg(ctx, -EBADMSG, n ? "the stream ends inside its header" : "the stream is empty");
		if (c == '\n')
			break;
		if (n == sizeof(line) - 1)
			return ctx_error_msg(ctx, -EBADMSG, "not a template stream (its first line is too long)");
		line[n++] = c;
	}
	line[n] = '\0';
	uint64_t len;
	size_t m = strlen(TEMPLATE_STREAM_MAGIC);
	if (strncmp(line, TEMPLATE_STREAM_MAGIC, m)) {
		bool other = !strncmp(line, "space-template-stream ", 22);
		return ctx_error_msg(ctx, -EBADMSG, other ? "a template stream of a later format (this library reads format 1)" :
						      "not a template stream (made by `space template send`)");
	}
	if (util_parse_uint(line + m, 2, TEMPLATE_STREAM_HEADER_MAX, &len) < 0)
		return ctx_error_msg(ctx, -EBADMSG, "a template stream header of a bad length (1 MiB at most)");
	_cleanup_free_ char *body = malloc(len + 1);
	if (!body)
		return -ENOMEM;
	size_t got = 0;
	while (got < len) {
		ssize_t k = read(fd, body + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? ctx_error(ctx, -errno, "read the stream") :
				       ctx_error_msg(ctx, -EBADMSG, "the stream ends inside its header");
		got += (size_t)k;
	}
	body[len] = '\0';
	h->size = n + 1 + len;
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_ParseWithLength(body, len);
	if (!cJSON_IsObject(j))
		return ctx_error_msg(ctx, -EBADMSG, "the stream's header is not a JSON object");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "name"));
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "id"));
	const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "digest"));
	const char *image_digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "image_digest"));
	const cJSON *parent = cJSON_GetObjectItemCaseSensitive(j, "parent");
	const cJSON *parent_id = cJSON_GetObjectItemCaseSensitive(j, "parent_id");
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "image_config");
	const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(j, "bytes");
	const cJSON *entries = cJSON_GetObjectItemCaseSensitive(j, "entries");
	if (!cJSON_IsNumber(fmt) || fmt->valuedouble != 1)
		return ctx_error_msg(ctx, -EBADMSG, "the stream's header: format 1 is read");
	if (!name || !util_name_valid(name) || strlen(name) >= sizeof(h->name))
		return ctx_error_msg(ctx, -EBADMSG, "the stream's header: no valid template name");
	snprintf(h->name, sizeof(h->name), "%s", name);
	if (uuid_parse(id, h->id) < 0)
		return ctx_error_msg(ctx, -EBADMSG, "the stream's header: no valid id");
	if (!digest || strlen(digest) != 71 || strncmp(digest, "sha256:", 7) || strspn(digest + 7, "0123456789abcdef") != 64)
		return ctx_error_msg(ctx, -EBADMSG, "the stream's header: no valid digest");
	snprintf(h->digest, sizeof(h->digest), "%s", digest);
	if (image_digest && image_digest[0] &&
	    (strlen(image_digest) != 71 || strncmp(image_digest, "sha256:", 7) || strspn(image_digest + 7, "0123456789abcdef") != 64))
		return ctx_error_msg(ctx, -EBADMSG, "the stream's header: a malformed image_digest");
	snprintf(h->image_digest, sizeof(h->image_digest), "%s", image_digest ? image_digest : "");
	if (parent && !cJSON_IsNull(parent)) {
		const char *pn = cJSON_GetStringValue(parent);
		if (!pn || !util_name_valid(pn) || strlen(pn) >= sizeof(h->parent) ||
		    uuid_parse(cJSON_GetStringValue(parent_id), h->parent_id) < 0)
			return ctx_error_msg(ctx, -EBADMSG, "the stream's header: a malformed parent or parent_id");
		snprintf(h->parent, sizeof(h->parent), "%s", pn);
		h->incremental = true;
	}
	h->kernel = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "kernel"));
	h->initrd = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "initrd"));
	h->bytes = cJSON_IsNumber(bytes) && bytes->valuedouble > 0 ? (uint64_t)bytes->valuedouble : 0;
	h->entries = cJSON_IsNumber(entries) && entries->valuedouble > 0 ? (uint64_t)entries->valuedouble : 0;
	if (cfg && !cJSON_IsNull(cfg)) {
		if (!cJSON_IsObject(cfg) || !h->image_digest[0])
			return ctx_error_msg(ctx, -EBADMSG, "the stream's header: image_config is not an object of an image");
		h->image_config = cJSON_PrintUnformatted(cfg);
		if (!h->image_config)
			return -ENOMEM;
		if (strlen(h->image_config) > IMAGE_CONFIG_MAX) {
			free(h->image_config);
			h->image_config = NULL;
			return ctx_error_msg(ctx, -EBADMSG, "the stream's header: image_config over 256 KiB");
		}
	}
	return 0;
}

/* The local template whose identity is id, into ret. -ENOENT when none. */
static int find_by_identity(space_ctx *ctx, const uint8_t id[16], struct template_info *ret)
{
	struct template_info *list = NULL;
	size_t n = 0;
	int r = core_template_list(ctx, &list, &n);
	if (r < 0)
		return r;
	r = -ENOENT;
	for (size_t i = 0; i < n && r == -ENOENT; i++) {
		uint8_t u[16];
		if (template_identity(list[i].path, u) == 0 && !memcmp(u, id, 16)) {
			*ret = list[i];
			r = 0;
		}
	}
	free(list);
	return r;
}

/* The id a stream gave the template it made, kept as its subvolume's received uuid. */
static int set_identity(const char *path, const uint8_t id[16])
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct btrfs_ioctl_received_subvol_args a;
	memset(&a, 0, sizeof(a));
	memcpy(a.uuid, id, 16);
	return ioctl(fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, &a) < 0 ? -errno : 0;
}

static int receive_into(space_ctx *ctx, const struct space_template_receive_options *o, const struct header *h,
			const char *root, const char *q, const struct template_info *parent,
			struct space_template_receive_info *ret)
{
	struct statvfs sv;
	uint64_t max_bytes = o->max_bytes;
	if (!max_bytes)
		max_bytes = statvfs(root, &sv) == 0 ? (uint64_t)sv.f_bavail * sv.f_frsize : (1ull << 40);
	off_t start = lseek(o->fd, 0, SEEK_CUR);
	struct unpack_receive_request req = {
		.dst = q, .parent = parent ? parent->path : NULL, .in_fd = o->fd, .max_bytes = max_bytes ? max_bytes : 1,
		.max_entries = 1u << 24, .expected_bytes = h->bytes, .progress = o->progress,
		.progress_userdata = o->progress_userdata,
	};
	struct unpack_receive_counts counts;
	int r = unpack_receive(ctx, &req, &counts);
	if (r < 0)
		return r;
	off_t end = lseek(o->fd, 0, SEEK_CUR);
	ret->stream_bytes = h->size + (start >= 0 && end >= start ? (uint64_t)(end - start) : 0);
	ret->data_bytes = counts.bytes;
	ret->entries = counts.entries;
	progress(o->progress, o->progress_userdata, "check", 0, 0);
	struct template_digest dg;
	char err[600];
	if ((r = template_digest_tree(q, &dg, err, sizeof(err))) < 0) {
		_cleanup_free_ char *safe = util_escape_dup(err, 0);
		return ctx_error_msg(ctx, -EBADMSG, "the template received cannot be checked: %s", safe ? safe : "?");
	}
	if (strcmp(dg.digest, h->digest)) {
		if (parent)
			return ctx_error_msg(ctx, -EBADMSG,
					     "the template received differs from the one sent (its files' digest is %s, the "
					     "sender's %s): this host's %s is not the %s it was sent against; send it whole",
					     dg.digest, h->digest, parent->name, h->parent);
		return ctx_error_msg(ctx, -EBADMSG,
				     "the template received differs from the one sent (its files' digest is %s, the sender's %s)",
				     dg.digest, h->digest);
	}
	snprintf(ret->digest, sizeof(ret->digest), "%s", dg.digest);
	char image[PATH_MAX];
	struct stat st;
	snprintf(image, sizeof(image), "%s/rootfs.ext4", q);
	if (lstat(image, &st) < 0 || !S_ISREG(st.st_mode))
		return ctx_error_msg(ctx, -EBADMSG, "the template received has no rootfs.ext4 file");
	if ((r = set_identity(q, h->id)) < 0)
		return ctx_error(ctx, r, "keep the template's id");
	progress(o->progress, o->progress_userdata, "commit", 0, 0);
	/* Its row as an import's: the kernel and initrd (files of its subvolume, in template.json) travelled. */
	struct space_template_import_options io = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	io.name = ret->name;
	io.kernel = h->kernel ? "(received)" : NULL;
	io.initrd = h->initrd ? "(received)" : NULL;
	io.progress = o->progress;
	io.progress_userdata = o->progress_userdata;
	return template_commit(ctx, &io, root, q, h->image_digest[0] ? h->image_digest : NULL, h->image_config);
}

SPACE_API int space_template_receive(space_ctx *ctx, const struct space_template_receive_options *opts,
				     struct space_template_receive_info *ret)
{
	CTX_ENTER(ctx);
	if (!ctx || !opts || !ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	struct space_template_receive_options o;
	int r = opts_template_receive_load(ctx, opts, &o);
	if (r < 0)
		return r;
	if (o.fd < 0 || fcntl(o.fd, F_GETFL) < 0 || (fcntl(o.fd, F_GETFL) & O_ACCMODE) == O_WRONLY)
		return ctx_error_msg(ctx, -EINVAL, "receive: fd %d is not open for reading", o.fd);
	if (o.name && !util_name_valid(o.name))
		return ctx_error_msg(ctx, -EINVAL, "invalid template name '%s'", o.name);
	const char *root;
	if ((r = ctx_pool(ctx, &root)) < 0)
		return r;
	progress(o.progress, o.progress_userdata, "header", 0, 0);
	struct header h = { 0 };
	if ((r = read_header(ctx, o.fd, &h)) < 0)
		return r;
	snprintf(ret->name, sizeof(ret->name), "%s", o.name ? o.name : h.name);
	struct template_info parent;
	r = store_template_exists(ctx->store, ret->name);
	if (r > 0)
		r = ctx_error_msg(ctx, -EEXIST, "template %s already exists (remove it with `space template rm %s`, or "
						"receive under another name)", ret->name, ret->name);
	else if (r < 0)
		r = ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	if (r == 0 && h.incremental && (r = find_by_identity(ctx, h.parent_id, &parent)) < 0) {
		char ids[37];
		uuid_str(h.parent_id, ids);
		r = r == -ENOENT ? ctx_error_msg(ctx, -ENOENT,
						 "the stream holds only what differs from template %s (id %s), which this "
						 "host does not have: send %s whole, or send %s here first",
						 h.parent, ids, h.name, h.parent) :
				   ctx_error(ctx, r, "find the stream's parent");
	}
	char q[PATH_MAX] = "";
	if (r == 0) {
		(void)core_pool_tmp_sweep(ctx, root);
		r = core_pool_tmp_path(ctx, root, q, sizeof(q));
	}
	if (r == 0) {
		/* The quarantine: nothing uses it until its digest is checked and it is committed. */
		r = h.incremental ? store_btrfs_snapshot(parent.path, q, false) : store_btrfs_subvolume_create(q);
		if (r < 0) {
			r = ctx_error(ctx, r, "create the quarantine subvolume %s", q);
			q[0] = '\0';
		} else if (h.incremental && (r = strip_host_files(q)) < 0) {
			r = ctx_error(ctx, r, "prepare the quarantine subvolume %s", q);
		}
	}
	if (r == 0) {
		if (h.incremental)
			snprintf(ret->parent, sizeof(ret->parent), "%s", parent.name);
		r = receive_into(ctx, &o, &h, root, q, h.incremental ? &parent : NULL, ret);
	}
	if (r < 0 && q[0]) {
		(void)store_btrfs_set_read_only(q, false);
		(void)store_btrfs_subvolume_delete(q);
	}
	free(h.image_config);
	if (r == 0)
		ctx_log(ctx, SPACE_LOG_INFO, "template %s received%s%s (%llu bytes of data, %s)", ret->name,
			ret->parent[0] ? " against " : "", ret->parent, (unsigned long long)ret->data_bytes, ret->digest);
	return r;
}
