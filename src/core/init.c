/* SPDX-License-Identifier: Apache-2.0 */
/* space_init and the pool: where templates, sandboxes and checkpoints live. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/internal.h"
#include "core/uids.h"
#include "store/btrfs.h"
#include "store/pool.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/util.h"

static const char *fs_name(const char *path)
{
	struct statfs sf;
	if (statfs(path, &sf) < 0)
		return "unknown";
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: return "ext4";
	case TMPFS_MAGIC: return "tmpfs";
	case XFS_SUPER_MAGIC: return "xfs";
	case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
	case NFS_SUPER_MAGIC: return "nfs";
	case BTRFS_SUPER_MAGIC: return "btrfs";
	default: return "a non-btrfs filesystem";
	}
}

static void progress(const struct space_init_options *o, const char *stage)
{
	if (o && o->progress)
		o->progress(stage, 0, 0, o->progress_userdata);
}

static bool pool_has_content(const char *root)
{
	static const char *const dirs[] = { "templates", "sandboxes", "checkpoints" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		_cleanup_closedir_ DIR *d = opendir(p);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				return true;
	}
	return false;
}

/* Sets up a loop pool; on failure removes an image it created. */
static int init_loop_pool(space_ctx *ctx, const struct space_init_options *o, char *root, size_t rootlen,
			  char *image, size_t imagelen)
{
	int r = ctx_state_path(ctx, "pool.img", image, imagelen);
	if (r == 0)
		r = ctx_state_path(ctx, "pool", root, rootlen);
	if (r < 0)
		return ctx_error(ctx, r, "state dir %s", ctx->state_dir);
	char msg[512];
	bool created = false;
	struct stat st;
	if (stat(image, &st) < 0) {
		char sz[32];
		progress(o, "format loop pool");
		ctx_log(ctx, SPACE_LOG_INFO, "creating btrfs loop pool %s (%s)", image,
			util_format_size(o->loop_pool_size, sz, sizeof(sz)));
		r = store_pool_loop_create(image, o->loop_pool_size, msg, sizeof(msg));
		if (r < 0)
			return ctx_error_msg(ctx, r, "%s", msg);
		created = true;
	} else if ((uint64_t)st.st_size != o->loop_pool_size) {
		ctx_log(ctx, SPACE_LOG_WARNING, "loop pool %s exists with size %llu; keeping it as it is", image,
			(unsigned long long)st.st_size);
	}
	if (!store_pool_is_mounted(root)) {
		progress(o, "mount loop pool");
		r = store_pool_loop_mount(image, root, msg, sizeof(msg));
		if (r < 0) {
			if (created)
				unlink(image);
			return ctx_error_msg(ctx, r, "%s", msg);
		}
	}
	return 0;
}

/*
 * <state>/run, where each sandbox has its runtime directory (its sockets, its log, pid files: made at every
 * create, removed at every destroy), and <state>/locks, where each sandbox has its lock file (made at its
 * create, removed at its destroy), become links to <pool>/run and <pool>/locks, on the pool's btrfs: the one
 * file system libspace owns. A file made on the host's own file system can cost far more (0.2-0.7 ms each on
 * an ext4 root, against about 0.02 ms on the pool, measured on the same host), and a create makes seven. A
 * directory that still holds sandboxes' files stays as it is; a link to another pool (an init onto a new
 * pool, which the caller allowed only when the old one was empty) is pointed at this one.
 */
static int pool_link(space_ctx *ctx, const char *root, const char *name)
{
	char link[PATH_MAX], target[PATH_MAX], cur[PATH_MAX], tmp[PATH_MAX + 8], cache[PATH_MAX + 16];
	int r = ctx_state_path(ctx, name, link, sizeof(link));
	if (r < 0)
		return r;
	if ((size_t)snprintf(target, sizeof(target), "%s/%s", root, name) >= sizeof(target))
		return -ENAMETOOLONG;
	ssize_t n = readlink(link, cur, sizeof(cur) - 1);
	if (n >= 0) {
		cur[n] = '\0';
		if (!strcmp(cur, target))
			return 0;
	} else if (errno == EINVAL) {
		/* A directory: run/ may hold the doctor's cached verdict (made again); anything else means sandboxes. */
		snprintf(cache, sizeof(cache), "%s/vm-usable", link);
		(void)unlink(cache);
		if (rmdir(link) < 0)
			return errno == ENOTEMPTY || errno == EEXIST ? 0 : -errno;
	} else if (errno != ENOENT) {
		return -errno;
	}
	snprintf(tmp, sizeof(tmp), "%s.new", link);
	(void)unlink(tmp);
	if (symlink(target, tmp) < 0)
		return -errno;
	if (rename(tmp, link) < 0) {
		r = -errno;
		(void)unlink(tmp);
		return r;
	}
	return 0;
}

SPACE_API int space_init(space_ctx *ctx, const struct space_init_options *opts)
{
	CTX_ENTER(ctx);
	struct space_init_options full; /* later fields of an older caller's version read as zero */
	if (!ctx || !opts || opts_init_load(ctx, opts, &full) < 0)
		return -EINVAL;
	const struct space_init_options *o = &full;
	const struct backend_ops *chosen;
	if (o->isolation && backend_by_name(ctx, o->isolation, &chosen) < 0)
		return -EINVAL; /* a name this build does not know is never stored */
	if (o->pool_path && o->loop_pool_size)
		return ctx_error_msg(ctx, -EINVAL, "give either a pool path or a loop pool size, not both");
	int idmap = o->version >= 2 ? o->identity_map : 0; /* version 1 callers have no such field */
	if (idmap != 0 && idmap != SPACE_IDENTITY_MAP_ALLOW && idmap != SPACE_IDENTITY_MAP_REFUSE)
		return ctx_error_msg(ctx, -EINVAL, "identity_map must be SPACE_IDENTITY_MAP_ALLOW, _REFUSE or 0");

	int r = util_mkdir_p(ctx->state_dir, 0700);
	if (r < 0)
		return ctx_error(ctx, r, "create state directory %s", ctx->state_dir);
	char db[PATH_MAX];
	r = ctx_state_path(ctx, "space.db", db, sizeof(db));
	if (r < 0)
		return ctx_error(ctx, r, "state dir %s", ctx->state_dir);
	bool fresh = access(db, F_OK) < 0;
	if (!ctx->store) {
		char msg[512];
		r = store_open(db, true, &ctx->store, msg, sizeof(msg));
		if (r < 0)
			return ctx_error_msg(ctx, r, "%s", msg);
	}
	struct store *s = ctx->store;
	_cleanup_free_ char *old_root = NULL;
	(void)store_meta_get(s, "pool_root", &old_root);

	char root[PATH_MAX] = "", image[PATH_MAX] = "";
	if (o->pool_path) {
		if (!realpath(o->pool_path, root)) {
			r = ctx_error(ctx, -errno, "pool %s", o->pool_path);
			goto fail;
		}
		r = store_btrfs_check(root);
		if (r == -EMEDIUMTYPE) {
			r = ctx_error_msg(ctx, r,
					  "pool %s is on %s, not btrfs: libspace keeps templates and sandboxes as btrfs "
					  "subvolumes. Pass --pool with a directory on a btrfs mount, or --loop-pool SIZE "
					  "(e.g. --loop-pool 20G) to create a btrfs image inside the state directory",
					  root, fs_name(root));
			goto fail;
		}
		if (r < 0) {
			r = ctx_error(ctx, r, "pool %s", root);
			goto fail;
		}
	} else if (o->loop_pool_size) {
		r = init_loop_pool(ctx, o, root, sizeof(root), image, sizeof(image));
		if (r < 0)
			goto fail;
	} else if (old_root) {
		const char *p;
		r = ctx_pool(ctx, &p);
		if (r < 0)
			return r;
		snprintf(root, sizeof(root), "%s", p);
		/* Settings only: a loop pool stays one (its image is what re-mounts it after an unmount or a
		 * reboot). */
		_cleanup_free_ char *old_image = NULL;
		if (store_meta_get(s, "loop_image", &old_image) == 0 && old_image)
			snprintf(image, sizeof(image), "%s", old_image);
	} else {
		r = ctx_error_msg(ctx, -EINVAL,
				  "no pool: pass --pool PATH (a directory on btrfs) or --loop-pool SIZE "
				  "(a btrfs image inside the state directory)");
		goto fail;
	}

	if (old_root && strcmp(old_root, root) && pool_has_content(old_root)) {
		r = ctx_error_msg(ctx, -EBUSY,
				  "state directory %s already uses pool %s, which holds templates or sandboxes; "
				  "remove them first or use another --state",
				  ctx->state_dir, old_root);
		goto fail;
	}
	r = store_pool_prepare(root);
	if (r < 0) {
		r = ctx_error(ctx, r, "prepare pool %s", root);
		goto fail;
	}
	static const char *const linked[] = { "run", "locks" };
	for (size_t i = 0; i < ARRAY_SIZE(linked); i++)
		if ((r = pool_link(ctx, root, linked[i])) < 0) {
			r = ctx_error(ctx, r, "link %s/%s to %s/%s", ctx->state_dir, linked[i], root, linked[i]);
			goto fail;
		}
	r = store_begin(s);
	if (r < 0) {
		r = ctx_error(ctx, r, "store: %s", store_errmsg(s));
		goto fail;
	}
	if ((r = store_meta_set(s, "pool_root", root)) < 0 ||
	    (r = store_meta_set(s, "loop_image", image)) < 0 ||
	    (o->isolation && (r = store_meta_set(s, "isolation", o->isolation)) < 0) ||
	    (idmap && (r = store_meta_set(s, UIDS_IDENTITY_MAP_KEY, idmap > 0 ? "allow" : "refuse")) < 0) ||
	    (r = store_event(s, NULL, fresh ? "init" : "reinit", root)) < 0 ||
	    (r = store_commit(s)) < 0) {
		store_rollback(s);
		r = ctx_error(ctx, r, "store: %s", store_errmsg(s));
		goto fail;
	}
	snprintf(ctx->pool_root, sizeof(ctx->pool_root), "%s", root);
	if (uids_identity_map_allowed(ctx))
		ctx_log(ctx, SPACE_LOG_WARNING, "state directory %s allows the identity uid map: where idmapped mounts "
						"fail, root in a jail is host uid 0 (a weaker boundary)", ctx->state_dir);
	/* Host uid slots whose sandboxes are gone (a crash, a removed state directory) are free again. */
	int freed = uids_reap_stale(ctx);
	if (freed > 0)
		ctx_log(ctx, SPACE_LOG_INFO, "freed %d stale host uid slot(s)", freed);
	return 0;

fail:
	if (fresh) {
		/* A first init that failed leaves the state dir uninitialized, as it was. */
		store_close(ctx->store);
		ctx->store = NULL;
		static const char *const suffixes[] = { "", "-wal", "-shm" };
		for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
			char p[PATH_MAX + 8];
			snprintf(p, sizeof(p), "%s%s", db, suffixes[i]);
			unlink(p);
		}
	}
	return r;
}

SPACE_API int space_identity_map_allowed(space_ctx *ctx)
{
	CTX_ENTER(ctx);
	struct store *s;
	int r = ctx ? ctx_store(ctx, &s) : -EINVAL;
	return r < 0 ? r : uids_identity_map_allowed(ctx);
}

/* The apparent sizes of the sandboxes' disks (<pool>/sandboxes/<id>/disk/rootfs.ext4, or
 * <pool>/sandboxes/<id>/rootfs.ext4 for a sandbox made before the per-sandbox directory) into *ret_bytes,
 * how many into *ret_n: what they are promised, written or not. What is on the pool counts, row or not (a
 * disk a crash left behind takes space as well). */
static void pool_promised(const char *root, uint64_t *ret_bytes, uint32_t *ret_n)
{
	char path[PATH_MAX];
	*ret_bytes = 0;
	*ret_n = 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/sandboxes", root) >= sizeof(path))
		return;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	static const char *const layouts[] = { "disk/rootfs.ext4", "rootfs.ext4" };
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		for (size_t i = 0; i < ARRAY_SIZE(layouts); i++) {
			char disk[NAME_MAX + 24];
			struct stat st;
			snprintf(disk, sizeof(disk), "%s/%s", de->d_name, layouts[i]);
			if (fstatat(dirfd(d), disk, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
				*ret_bytes += (uint64_t)st.st_size;
				(*ret_n)++;
				break;
			}
		}
	}
	closedir(d);
}

int core_pool_get_info(space_ctx *ctx, struct pool_info *ret)
{
	CTX_ENTER(ctx);
	if (!ctx || !ret)
		return -EINVAL;
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	struct pool_info info = { .mounted = false };
	snprintf(info.path, sizeof(info.path), "%s", root);
	_cleanup_free_ char *image = NULL, *iso = NULL;
	if (store_meta_get(ctx->store, "loop_image", &image) == 0)
		snprintf(info.loop_image, sizeof(info.loop_image), "%s", image);
	snprintf(info.isolation, sizeof(info.isolation), "%s",
		 store_meta_get(ctx->store, "isolation", &iso) == 0 ? iso : backend_of(BACKEND_DEFAULT)->name);
	struct statvfs sv;
	if (statvfs(root, &sv) == 0) {
		info.total_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
		info.free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
		info.used_bytes = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	}
	pool_promised(root, &info.promised_bytes, &info.sandbox_disks);
	info.mounted = true;
	*ret = info;
	return 0;
}

SPACE_API int space_pool_unmount(space_ctx *ctx)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	_cleanup_free_ char *root = NULL, *image = NULL;
	if (store_meta_get(s, "pool_root", &root) < 0)
		return ctx_error_msg(ctx, -ENOMEDIUM, "state directory %s has no pool", ctx->state_dir);
	if (store_meta_get(s, "loop_image", &image) < 0 || !*image)
		return 0;
	int live = store_sandbox_count(s, STORE_ST_LIVE);
	if (live < 0)
		return ctx_error(ctx, live, "store: %s", store_errmsg(s));
	if (live > 0)
		return ctx_error_msg(ctx, -EBUSY, "%d sandbox(es) still running on pool %s: remove them first", live,
				     root);
	r = store_pool_unmount(root);
	if (r < 0)
		return ctx_error(ctx, r, "unmount pool %s", root);
	ctx->pool_root[0] = '\0';
	return 0;
}
