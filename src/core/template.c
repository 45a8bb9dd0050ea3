/* SPDX-License-Identifier: Apache-2.0 */
/* Templates: a rootfs.ext4 (plus optional kernel and initrd) in a subvolume of the pool. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/initramfs.h"
#include "core/internal.h"
#include "core/vm_assets.h"
#include "core/warm_pool.h"
#include "store/btrfs.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/escape.h"
#include "util/util.h"

enum rootfs_kind { ROOTFS_DIR, ROOTFS_TAR, ROOTFS_EXT4 };

static void progress(const struct space_template_import_options *o, const char *stage)
{
	if (o->progress)
		o->progress(stage, 0, 0, o->progress_userdata);
}

static int detect_rootfs(const char *path, enum rootfs_kind *ret)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		*ret = ROOTFS_DIR;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	uint8_t head[1082];
	memset(head, 0, sizeof(head));
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = pread(fd, head, sizeof(head), 0);
	if (n < 0)
		return -errno;
	if (n >= 1082 && head[1080] == 0x53 && head[1081] == 0xef) {
		*ret = ROOTFS_EXT4;
		return 0;
	}
	static const struct {
		size_t off;
		const char *magic;
		size_t len;
	} tar_magics[] = {
		{ 257, "ustar", 5 },                  /* POSIX / GNU tar */
		{ 0, "\x1f\x8b", 2 },                 /* gzip */
		{ 0, "\xfd" "7zXZ\0", 6 },            /* xz */
		{ 0, "\x28\xb5\x2f\xfd", 4 },         /* zstd */
		{ 0, "BZh", 3 },                      /* bzip2 */
	};
	for (size_t i = 0; i < ARRAY_SIZE(tar_magics); i++) {
		if ((size_t)n >= tar_magics[i].off + tar_magics[i].len &&
		    !memcmp(head + tar_magics[i].off, tar_magics[i].magic, tar_magics[i].len)) {
			*ret = ROOTFS_TAR;
			return 0;
		}
	}
	return -EINVAL;
}

static uint64_t tree_bytes;
static uint64_t tree_inodes;

static int tree_add(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	tree_bytes += (uint64_t)st->st_blocks * 512;
	tree_inodes++;
	return 0;
}

/* Content size of a tree. nftw has no userdata: serialize through the globals (import is rare). */
static int measure_tree(const char *dir, uint64_t *ret_bytes, uint64_t *ret_inodes)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	tree_bytes = tree_inodes = 0;
	int r = nftw(dir, tree_add, 64, FTW_PHYS) < 0 ? -errno : 0;
	*ret_bytes = tree_bytes;
	*ret_inodes = tree_inodes;
	pthread_mutex_unlock(&lock);
	return r;
}

/* Copies a file, sharing extents when both sides are on one btrfs. */
static int copy_file(const char *src, const char *dst, mode_t mode)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (out < 0)
		return -errno;
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EXDEV && errno != EOPNOTSUPP && errno != ENOSYS)
				return -errno;
			/* Fall back to read/write. */
			char buf[1 << 16];
			ssize_t k;
			while ((k = read(in, buf, sizeof(buf))) > 0) {
				int r = util_write_all(out, buf, (size_t)k);
				if (r < 0)
					return r;
			}
			return k < 0 ? -errno : 0;
		}
		if (n == 0)
			return 0;
	}
}

static int run_tool(space_ctx *ctx, const char *const argv[], const char *what)
{
	_cleanup_free_ char *out = NULL;
	int r = util_run(argv, &out);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "%s: %s not found (install e2fsprogs and tar)", what, argv[0]);
	if (r < 0)
		return ctx_error_msg(ctx, r, "%s failed: %s", what, out && *out ? out : "(no output)");
	return 0;
}

static int make_ext4(space_ctx *ctx, const struct space_template_import_options *o, const char *tree,
		     const char *image)
{
	uint64_t size = o->size_bytes;
	if (!size) {
		uint64_t bytes, inodes;
		int r = measure_tree(tree, &bytes, &inodes);
		if (r < 0)
			return ctx_error(ctx, r, "measure %s", tree);
		/* Room for ext4 metadata, the agent's writes and package installs. */
		size = bytes + bytes / 3 + inodes * 512 + (128ull << 20);
		if (size < (64ull << 20))
			size = 64ull << 20;
	}
	size = (size + (1 << 20) - 1) & ~((uint64_t)(1 << 20) - 1);
	char sz[32];
	snprintf(sz, sizeof(sz), "%lluk", (unsigned long long)(size >> 10));
	progress(o, "mkfs.ext4");
	const char *argv[] = { "mkfs.ext4", "-q", "-F", "-L", "rootfs", "-i", "8192", "-E",
			       "lazy_itable_init=0,lazy_journal_init=0", "-d", tree, image, sz, NULL };
	return run_tool(ctx, argv, "mkfs.ext4");
}

static int write_manifest(const char *dir, const char *name, const char *source, bool kernel, bool initrd,
			  bool modules, const char *kver)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return -ENOMEM;
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "source", source);
	cJSON_AddStringToObject(j, "rootfs", "rootfs.ext4");
	if (kernel)
		cJSON_AddStringToObject(j, "kernel", "kernel");
	if (initrd)
		cJSON_AddStringToObject(j, "initrd", "initrd");
	if (modules)
		cJSON_AddStringToObject(j, "modules", "modules");
	if (kver && *kver)
		cJSON_AddStringToObject(j, "release", kver);
	cJSON_AddNumberToObject(j, "created_ms", (double)util_wall_ms());
	cJSON_AddStringToObject(j, "libspace", space_version());
	char *text = cJSON_Print(j);
	cJSON_Delete(j);
	if (!text)
		return -ENOMEM;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/template.json", dir);
	int r = util_write_file_atomic(path, text, strlen(text), 0644);
	free(text);
	return r;
}


/* The modules the template's kernel needs in a VM sandbox, copied into <tmp>/modules. */
static int copy_modules(space_ctx *ctx, const struct space_template_import_options *o, const char *tmp)
{
	char dst[PATH_MAX], err[512] = "";
	struct kmod_list mods;
	progress(o, "copy kernel modules");
	int r = kmod_resolve(o->modules_dir, initramfs_required_modules, initramfs_optional_modules, &mods, err,
			     sizeof(err));
	if (r < 0)
		return ctx_error_msg(ctx, r, "modules %s: %s", o->modules_dir, err);
	snprintf(dst, sizeof(dst), "%s/modules", tmp);
	r = kmod_copy_tree(o->modules_dir, &mods, dst, err, sizeof(err));
	kmod_list_free(&mods);
	return r < 0 ? ctx_error_msg(ctx, r, "copy modules of %s: %s", o->modules_dir, err) : 0;
}

/* Fills the staging subvolume tmp with rootfs.ext4, kernel, initrd, modules and template.json. */
static int stage_template(space_ctx *ctx, const struct space_template_import_options *o, enum rootfs_kind kind,
			  const char *tmp)
{
	char image[PATH_MAX], tree[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", tmp);
	snprintf(tree, sizeof(tree), "%s/.tree", tmp);
	int r = -EINVAL;
	switch (kind) {
	case ROOTFS_DIR:
		r = make_ext4(ctx, o, o->rootfs, image);
		break;
	case ROOTFS_TAR: {
		r = util_mkdir_p(tree, 0755);
		if (r < 0)
			return ctx_error(ctx, r, "create %s", tree);
		progress(o, "extract tarball");
		const char *argv[] = { "tar", "-x", "-f", o->rootfs, "-C", tree, "--numeric-owner",
				       "--same-owner", "--same-permissions", NULL };
		r = run_tool(ctx, argv, "extract tarball");
		if (r == 0)
			r = make_ext4(ctx, o, tree, image);
		int k = util_rm_rf(tree);
		if (r == 0 && k < 0)
			r = ctx_error(ctx, k, "remove %s", tree);
		break;
	}
	case ROOTFS_EXT4: {
		progress(o, "copy ext4 image");
		r = copy_file(o->rootfs, image, 0644);
		if (r < 0)
			return ctx_error(ctx, r, "copy %s", o->rootfs);
		progress(o, "check ext4 image");
		const char *fsck[] = { "e2fsck", "-n", "-f", image, NULL };
		r = run_tool(ctx, fsck, "e2fsck of the rootfs image");
		if (r == 0 && o->size_bytes) {
			char sz[32];
			snprintf(sz, sizeof(sz), "%lluK", (unsigned long long)(o->size_bytes >> 10));
			const char *rs[] = { "resize2fs", image, sz, NULL };
			r = run_tool(ctx, rs, "resize2fs");
		}
		break;
	}
	}
	if (r < 0)
		return r;
	if (o->kernel) {
		char dst[PATH_MAX];
		snprintf(dst, sizeof(dst), "%s/kernel", tmp);
		r = copy_file(o->kernel, dst, 0644);
		if (r < 0)
			return ctx_error(ctx, r, "copy kernel %s", o->kernel);
	}
	if (o->initrd) {
		char dst[PATH_MAX];
		snprintf(dst, sizeof(dst), "%s/initrd", tmp);
		r = copy_file(o->initrd, dst, 0644);
		if (r < 0)
			return ctx_error(ctx, r, "copy initrd %s", o->initrd);
	}
	char kver[128] = "";
	if (o->kernel && vm_kernel_release(o->kernel, kver, sizeof(kver)) < 0)
		kver[0] = '\0';
	if (o->modules_dir) {
		r = copy_modules(ctx, o, tmp);
		if (r < 0)
			return r;
	}
	r = write_manifest(tmp, o->name, o->rootfs, o->kernel, o->initrd, o->modules_dir, kver);
	if (r < 0)
		return ctx_error(ctx, r, "write template.json");
	return 0;
}

/*
 * A work subvolume under the pool's .tmp, named after its owner ("tpl-<id>.<pid>-<start time>"), so that
 * what a killed import or template snapshot left there can be told from another process's work in progress
 * and removed (core_pool_tmp_sweep).
 */
int core_pool_tmp_path(space_ctx *ctx, const char *root, char *buf, size_t len)
{
	char id[32];
	int r = core_new_id("tpl-", id, sizeof(id));
	if (r < 0)
		return ctx_error(ctx, r, "random id");
	pid_t me = getpid();
	if ((size_t)snprintf(buf, len, "%s/.tmp/%s.%d-%llu", root, id, (int)me,
			     (unsigned long long)core_process_start_time(me)) >= len)
		return ctx_error_msg(ctx, -ENAMETOOLONG, "pool path %s too long", root);
	return 0;
}

/* Removes the work subvolumes under .tmp whose owner process is gone. Returns how many. */
int core_pool_tmp_sweep(space_ctx *ctx, const char *root)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/.tmp", root);
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *dot = strchr(e->d_name, '.');
		int pid;
		unsigned long long start;
		char end;
		if (strncmp(e->d_name, "tpl-", 4) || !dot || sscanf(dot + 1, "%d-%llu%c", &pid, &start, &end) != 2 ||
		    pid <= 0 || core_process_alive(pid, start))
			continue;
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (store_btrfs_subvolume_delete(path) == 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "removed %s, left by an interrupted template operation", path);
			n++;
		}
	}
	return n;
}

SPACE_API int space_template_import(space_ctx *ctx, const struct space_template_import_options *opts)
{
	CTX_ENTER(ctx);
	if (!ctx || !opts || !opts->rootfs)
		return -EINVAL;
	/* Callers built against version 1 of the options have no modules_dir field. */
	struct space_template_import_options full;
	int r = opts_template_import_load(ctx, opts, &full);
	if (r < 0)
		return r;
	const struct space_template_import_options *o = &full;
	if (!util_name_valid(o->name))
		return ctx_error_msg(ctx, -EINVAL,
				     "invalid template name '%s': use 1-63 letters, digits, '.', '_' or '-', "
				     "not starting with '.' or '-'",
				     o->name ? o->name : "");
	enum rootfs_kind kind;
	r = detect_rootfs(o->rootfs, &kind);
	if (r == -EINVAL)
		return ctx_error_msg(ctx, r, "rootfs %s is neither a directory, a tarball nor an ext4 image",
				     o->rootfs);
	if (r < 0)
		return ctx_error(ctx, r, "rootfs %s", o->rootfs);
	if (o->modules_dir && !o->kernel)
		return ctx_error_msg(ctx, -EINVAL, "modules %s given without the kernel they belong to (--kernel)",
				     o->modules_dir);
	struct stat mst;
	if (o->modules_dir && (stat(o->modules_dir, &mst) < 0 || !S_ISDIR(mst.st_mode)))
		return ctx_error_msg(ctx, -ENOTDIR, "modules %s is not a directory", o->modules_dir);
	const char *files[] = { o->kernel, o->initrd };
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		struct stat st;
		if (!files[i])
			continue;
		if (stat(files[i], &st) < 0)
			return ctx_error(ctx, -errno, "%s %s", i ? "initrd" : "kernel", files[i]);
		if (!S_ISREG(st.st_mode))
			return ctx_error_msg(ctx, -EINVAL, "%s %s is not a regular file", i ? "initrd" : "kernel",
					     files[i]);
	}
	const char *root;
	r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	struct store *s = ctx->store;
	r = store_template_exists(s, o->name);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	if (r > 0)
		return ctx_error_msg(ctx, -EEXIST, "template %s already exists (remove it with `space template rm %s`)",
				     o->name, o->name);

	char tmp[PATH_MAX], dst[PATH_MAX];
	(void)core_pool_tmp_sweep(ctx, root);
	if ((r = core_pool_tmp_path(ctx, root, tmp, sizeof(tmp))) < 0)
		return r;
	snprintf(dst, sizeof(dst), "%s/templates/%s", root, o->name);
	progress(o, "create subvolume");
	r = store_btrfs_subvolume_create(tmp);
	if (r < 0)
		return ctx_error(ctx, r, "create subvolume %s", tmp);
	util_fault_point("template-import", 1);
	r = stage_template(ctx, o, kind, tmp);
	if (r < 0)
		goto fail;
	util_fault_point("template-import", 2);

	struct stat st;
	char image[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", tmp);
	if (stat(image, &st) < 0) {
		r = ctx_error(ctx, -errno, "stat %s", image);
		goto fail;
	}
	/* The row and the final name appear together: insert in a transaction, rename, then commit. */
	r = store_begin(s);
	if (r < 0) {
		r = ctx_error(ctx, r, "store: %s", store_errmsg(s));
		goto fail;
	}
	if (store_template_exists(s, o->name) != 0) {
		store_rollback(s);
		r = ctx_error_msg(ctx, -EEXIST, "template %s already exists", o->name);
		goto fail;
	}
	struct store_template *row = calloc(1, sizeof(*row));
	if (row) {
		snprintf(row->name, sizeof(row->name), "%s", o->name);
		snprintf(row->path, sizeof(row->path), "%s", dst);
		row->rootfs_bytes = (uint64_t)st.st_size;
		row->has_kernel = o->kernel != NULL;
		row->has_initrd = o->initrd != NULL;
		row->created_ms = util_wall_ms();
	}
	r = row ? store_template_insert(s, row) : -ENOMEM;
	free(row);
	if (r == 0)
		r = store_event(s, NULL, "template.import", o->name);
	if (r < 0) {
		store_rollback(s);
		r = ctx_error(ctx, r, "store: %s", store_errmsg(s));
		goto fail;
	}
	util_fault_point("template-import", 3);
	/* No row and yet the final name: an import killed between its rename and its commit (we hold the
	 * store's write lock, which that import held until it died). Its leftover goes. */
	struct stat dst_st;
	if (lstat(dst, &dst_st) == 0 && (r = store_btrfs_subvolume_delete(dst)) < 0) {
		store_rollback(s);
		r = ctx_error(ctx, r, "remove %s, left by an interrupted import", dst);
		goto fail;
	}
	if (rename(tmp, dst) < 0) {
		r = ctx_error(ctx, -errno, "move template into %s", dst);
		store_rollback(s);
		goto fail;
	}
	util_fault_point("template-import", 4);
	r = store_commit(s);
	if (r < 0) {
		store_rollback(s);
		r = ctx_error(ctx, r, "store: %s", store_errmsg(s));
		if (rename(dst, tmp) < 0)
			snprintf(tmp, sizeof(tmp), "%s", dst);
		goto fail;
	}
	ctx_log(ctx, SPACE_LOG_INFO, "template %s imported (%lld bytes)", o->name, (long long)st.st_size);
	return 0;

fail:
	(void)store_btrfs_subvolume_delete(tmp);
	return r;
}

static void template_info(const struct store_template *t, struct template_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", t->name);
	snprintf(ret->path, sizeof(ret->path), "%s", t->path);
	ret->rootfs_bytes = t->rootfs_bytes;
	ret->has_kernel = t->has_kernel;
	ret->has_initrd = t->has_initrd;
	ret->created_ms = t->created_ms;
	ret->sandboxes = t->sandboxes;
	ret->checkpoints = t->checkpoints;
}

int core_template_list(space_ctx *ctx, struct template_info **ret_list, size_t *ret_count)
{
	if (!ctx || !ret_list || !ret_count)
		return -EINVAL;
	/* A store whose pool is mounted: paths in answers must exist. */
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	struct store_template *rows = NULL;
	size_t n = 0;
	r = store_template_list(ctx->store, &rows, &n);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	struct template_info *list = n ? calloc(n, sizeof(*list)) : NULL;
	if (n && !list) {
		free(rows);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		template_info(&rows[i], &list[i]);
	free(rows);
	*ret_list = list;
	*ret_count = n;
	return 0;
}

int core_template_get(space_ctx *ctx, const char *name, struct template_info *ret)
{
	if (!ctx || !name || !ret)
		return -EINVAL;
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	_cleanup_free_ struct store_template *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	r = store_template_get(ctx->store, name, t);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, -ENOENT, "no template named %s (see `space template ls`)", name);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(ctx->store));
	template_info(t, ret);
	return 0;
}

#define TEMPLATE_CPS_SHOWN 5

/* "(ID NAME, ID, ...)" of the checkpoints that depend on template name into buf (len >= 512; "" if none or
 * unknown), so a refusal says which. Names are the API caller's text: shown on one line, escaped, cut. */
static void template_checkpoints_of(space_ctx *ctx, const char *name, char *buf, size_t len)
{
	_cleanup_free_ struct checkpoint_info *list = NULL;
	size_t n = 0, used = 0, shown = 0;
	buf[0] = 0;
	if (core_checkpoint_list(ctx, NULL, &list, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(list[i].template_name, name))
			continue;
		if (shown++ == TEMPLATE_CPS_SHOWN) {
			used += (size_t)snprintf(buf + used, len - used, ", ...");
			break;
		}
		char nm[41]; /* 5 x (", " + id + " " + 40) fits 512 */
		util_text_one_line(list[i].name, nm, sizeof(nm));
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", used ? ", " : "(", list[i].id,
					 nm[0] ? " " : "", nm);
	}
	if (used)
		snprintf(buf + used, len - used, ")");
}

SPACE_API int space_template_remove(space_ctx *ctx, const char *name, bool force)
{
	CTX_ENTER(ctx);
	struct template_info t;
	int r = core_template_get(ctx, name, &t);
	if (r < 0)
		return r;
	if (!force && (t.sandboxes || t.checkpoints)) {
		char cps[512];
		template_checkpoints_of(ctx, name, cps, sizeof(cps));
		return ctx_error_msg(ctx, -EBUSY,
				     "template %s is used by %u sandbox(es) and %u checkpoint(s)%s%s: remove them first "
				     "(`space rm --with-checkpoints ID`, `space checkpoint rm ID`), or pass --force",
				     name, t.sandboxes, t.checkpoints, cps[0] ? " " : "", cps);
	}
	const char *root;
	r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	/* Its warm pool goes with it, no filler running meanwhile. */
	_cleanup_close_ int lock = warm_pool_lock(ctx);
	if (lock < 0)
		return lock;
	r = warm_pool_drain(ctx, name);
	if (r < 0)
		return r;
	r = warm_pool_forget(ctx, name);
	if (r < 0)
		return r;
	r = store_btrfs_subvolume_delete(t.path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", t.path);
	struct store *s = ctx->store;
	r = store_begin(s);
	if (r == 0)
		r = store_template_delete(s, name);
	return ctx_store_finish(ctx, s, r, NULL, force ? "template.remove.force" : "template.remove", name);
}
