/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Importing a template (space_template_import): a root file system from a directory, a tarball or an ext4
 * image, or a container image (template_image.c), staged in a work subvolume of the pool and committed
 * with its row in one step. A tarball is hostile input like an image layer: it is applied by the confined
 * helper space-unpack (core/unpack.h), never extracted on the host. A rootfs without /bin/sh is refused
 * unless forced; one that looks like a container image is imported as an image.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/disk_tree.h"
#include "core/image_source.h"
#include "core/initramfs.h"
#include "core/internal.h"
#include "core/template_import.h"
#include "core/unpack.h"
#include "core/vm_assets.h"
#include "store/btrfs.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/fault.h"
#include "util/util.h"

enum rootfs_kind { ROOTFS_DIR, ROOTFS_TAR, ROOTFS_EXT4 };

void template_progress(const struct space_template_import_options *o, const char *stage)
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

int template_copy_file(const char *src, const char *dst, mode_t mode)
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
		return ctx_error_msg(ctx, r, "%s: %s not found (install e2fsprogs)", what, argv[0]);
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
	template_progress(o, "mkfs.ext4");
	const char *argv[] = { "mkfs.ext4", "-q", "-F", "-L", "rootfs", "-i", "8192", "-E",
			       "lazy_itable_init=0,lazy_journal_init=0", "-d", tree, image, sz, NULL };
	return run_tool(ctx, argv, "mkfs.ext4");
}

/* The operator's tree has bin/sh (followed inside the tree: merged /usr links to usr/bin). */
static bool tree_has_shell(const char *tree)
{
	_cleanup_close_ int dir = open(tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = dir < 0 ? -1 : (int)syscall(SYS_openat2, dir, "bin/sh", &how, sizeof(how));
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

static int shell_refused(space_ctx *ctx, const char *what)
{
	return ctx_error_msg(ctx, -EINVAL,
			     "%s has no /bin/sh: it does not look like a root file system (sandboxes run their commands "
			     "through it); import it anyway with --force",
			     what);
}

int template_write_manifest(const char *dir, const struct space_template_import_options *o, const char *source,
			    const char *kver, const char *image_digest, const char *image_config)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return -ENOMEM;
	cJSON_AddStringToObject(j, "name", o->name);
	cJSON_AddStringToObject(j, "source", source);
	cJSON_AddStringToObject(j, "rootfs", "rootfs.ext4");
	if (o->kernel)
		cJSON_AddStringToObject(j, "kernel", "kernel");
	if (o->initrd)
		cJSON_AddStringToObject(j, "initrd", "initrd");
	if (o->modules_dir)
		cJSON_AddStringToObject(j, "modules", "modules");
	if (kver && *kver)
		cJSON_AddStringToObject(j, "release", kver);
	if (image_digest && *image_digest) {
		cJSON *im = cJSON_AddObjectToObject(j, "image");
		cJSON_AddStringToObject(im, "digest", image_digest);
		cJSON *cfg = image_config ? cJSON_Parse(image_config) : NULL;
		if (cfg)
			cJSON_AddItemToObject(im, "config", cfg);
	}
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
	template_progress(o, "copy kernel modules");
	int r = kmod_resolve(o->modules_dir, initramfs_required_modules, initramfs_optional_modules, &mods, err,
			     sizeof(err));
	if (r < 0)
		return ctx_error_msg(ctx, r, "modules %s: %s", o->modules_dir, err);
	snprintf(dst, sizeof(dst), "%s/modules", tmp);
	r = kmod_copy_tree(o->modules_dir, &mods, dst, err, sizeof(err));
	kmod_list_free(&mods);
	return r < 0 ? ctx_error_msg(ctx, r, "copy modules of %s: %s", o->modules_dir, err) : 0;
}

int template_stage_boot_files(space_ctx *ctx, const struct space_template_import_options *o, const char *tmp,
			      char *kver, size_t kver_len)
{
	int r;
	if (o->kernel) {
		char dst[PATH_MAX];
		snprintf(dst, sizeof(dst), "%s/kernel", tmp);
		r = template_copy_file(o->kernel, dst, 0644);
		if (r < 0)
			return ctx_error(ctx, r, "copy kernel %s", o->kernel);
	}
	if (o->initrd) {
		char dst[PATH_MAX];
		snprintf(dst, sizeof(dst), "%s/initrd", tmp);
		r = template_copy_file(o->initrd, dst, 0644);
		if (r < 0)
			return ctx_error(ctx, r, "copy initrd %s", o->initrd);
	}
	kver[0] = '\0';
	if (o->kernel && vm_kernel_release(o->kernel, kver, kver_len) < 0)
		kver[0] = '\0';
	if (o->modules_dir && (r = copy_modules(ctx, o, tmp)) < 0)
		return r;
	return 0;
}

/* A rootfs tarball through space-unpack, as one layer without a digest. *ret_image: it holds an image. */
static int stage_tarball(space_ctx *ctx, const struct space_template_import_options *o, const char *image,
			 bool *ret_image)
{
	_cleanup_close_ int fd = open(o->rootfs, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "rootfs %s", o->rootfs);
	struct image_layer l = { .fd = fd, .offset = 0, .length = (uint64_t)st.st_size, .comp = "auto" };
	int fds[1] = { fd };
	struct unpack_request req = {
		.layers = &l, .n_layers = 1, .fds = fds, .n_fds = 1, .size_bytes = o->size_bytes, .what = "tarball",
		.progress = o->progress, .progress_userdata = o->progress_userdata,
	};
	struct unpack_result res;
	template_progress(o, "extract tarball (confined)");
	int r = unpack_apply(ctx, &req, image, &res);
	if (r < 0) {
		char msg[sizeof(ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", ctx->last_error);
		return ctx_error_msg(ctx, r, "extract tarball failed: %s", msg);
	}
	if (res.looks_like_image) {
		*ret_image = true;
		return 0;
	}
	if (!res.shell && !o->force)
		return shell_refused(ctx, o->rootfs);
	return 0;
}

/* Fills the staging subvolume tmp with rootfs.ext4, kernel, initrd, modules and template.json. */
static int stage_rootfs(space_ctx *ctx, const struct space_template_import_options *o, enum rootfs_kind kind,
			const char *tmp, bool *ret_image)
{
	char image[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", tmp);
	int r = -EINVAL;
	bool shell = true;
	switch (kind) {
	case ROOTFS_DIR:
		if (!o->force && !tree_has_shell(o->rootfs))
			return shell_refused(ctx, o->rootfs);
		r = make_ext4(ctx, o, o->rootfs, image);
		break;
	case ROOTFS_TAR:
		if ((r = stage_tarball(ctx, o, image, ret_image)) < 0 || *ret_image)
			return r;
		break;
	case ROOTFS_EXT4: {
		template_progress(o, "copy ext4 image");
		r = template_copy_file(o->rootfs, image, 0644);
		if (r < 0)
			return ctx_error(ctx, r, "copy %s", o->rootfs);
		template_progress(o, "check ext4 image");
		const char *fsck[] = { "e2fsck", "-n", "-f", image, NULL };
		r = run_tool(ctx, fsck, "e2fsck of the rootfs image");
		if (r == 0 && !o->force && (r = unpack_check_shell(ctx, image, &shell)) == 0 && !shell)
			return shell_refused(ctx, o->rootfs);
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
	char kver[128];
	if ((r = template_stage_boot_files(ctx, o, tmp, kver, sizeof(kver))) < 0)
		return r;
	r = template_write_manifest(tmp, o, o->rootfs, kver, NULL, NULL);
	return r < 0 ? ctx_error(ctx, r, "write template.json") : 0;
}

int template_commit(space_ctx *ctx, const struct space_template_import_options *o, const char *root,
		    const char *tmp, const char *image_digest, const char *image_config)
{
	struct store *s = ctx->store;
	char dst[PATH_MAX], image[PATH_MAX];
	snprintf(dst, sizeof(dst), "%s/templates/%s", root, o->name);
	snprintf(image, sizeof(image), "%s/rootfs.ext4", tmp);
	util_fault_point("template-import", 2);
	struct stat st;
	if (stat(image, &st) < 0)
		return ctx_error(ctx, -errno, "stat %s", image);
	/* Its jails' disk: the same files as a directory tree (core/disk_tree.h). */
	int r = disk_tree_add(ctx, root, tmp, o->progress, o->progress_userdata);
	if (r < 0)
		return r;
	/* The row and the final name appear together: insert in a transaction, rename, then commit. */
	r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	if (store_template_exists(s, o->name) != 0) {
		store_rollback(s);
		return ctx_error_msg(ctx, -EEXIST, "template %s already exists", o->name);
	}
	struct store_template *row = calloc(1, sizeof(*row));
	if (row) {
		snprintf(row->name, sizeof(row->name), "%s", o->name);
		snprintf(row->path, sizeof(row->path), "%s", dst);
		row->rootfs_bytes = (uint64_t)st.st_size;
		row->has_kernel = o->kernel != NULL;
		row->has_initrd = o->initrd != NULL;
		row->created_ms = util_wall_ms();
		snprintf(row->image_digest, sizeof(row->image_digest), "%s", image_digest ? image_digest : "");
		row->image_config = image_config;
	}
	r = row ? store_template_insert(s, row) : -ENOMEM;
	free(row);
	if (r == 0)
		r = store_event(s, NULL, "template.import", o->name);
	if (r < 0) {
		store_rollback(s);
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	}
	util_fault_point("template-import", 3);
	/* No row and yet the final name: an import killed between its rename and its commit (we hold the
	 * store's write lock, which that import held until it died). Its leftover goes. */
	struct stat dst_st;
	if (lstat(dst, &dst_st) == 0 && (r = store_btrfs_subvolume_delete(dst)) < 0) {
		store_rollback(s);
		return ctx_error(ctx, r, "remove %s, left by an interrupted import", dst);
	}
	if (rename(tmp, dst) < 0) {
		r = ctx_error(ctx, -errno, "move template into %s", dst);
		store_rollback(s);
		return r;
	}
	util_fault_point("template-import", 4);
	r = store_commit(s);
	if (r < 0) {
		store_rollback(s);
		r = ctx_error(ctx, r, "store: %s", store_errmsg(s));
		/* Back to the work name, which the caller removes. */
		if (rename(dst, tmp) < 0)
			(void)store_btrfs_subvolume_delete(dst);
		return r;
	}
	ctx_log(ctx, SPACE_LOG_INFO, "template %s imported (%lld bytes)", o->name, (long long)st.st_size);
	return 0;
}

/* "docker://x", "oci:x", "registry.io/x:tag", "debian:12": names of a registry, not files here. */
static bool names_registry(const char *ref)
{
	struct stat st;
	if (stat(ref, &st) == 0)
		return false;
	static const char *const schemes[] = { "docker://", "docker-daemon:", "oci:", "oci-archive:", "containers-storage:",
					       "registry:", "http://", "https://" };
	for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
		if (!strncmp(ref, schemes[i], strlen(schemes[i])))
			return true;
	return ref[0] != '/' && ref[0] != '.' && (strchr(ref, ':') || strchr(ref, '@'));
}

static int registry_refused(space_ctx *ctx, const char *ref)
{
	_cleanup_free_ char *safe = util_escape_dup(ref, 0);
	return ctx_error_msg(ctx, -EOPNOTSUPP,
			     "'%s' names a registry image, and libspace pulls from no registry: on a machine that "
			     "reaches the registry, make an image layout or archive and bring it here, e.g. `skopeo copy "
			     "docker://IMAGE oci-archive:image.tar` or `docker pull IMAGE && docker save -o image.tar "
			     "IMAGE`, then `space template import NAME --image image.tar`",
			     safe ? safe : "?");
}

SPACE_API int space_template_import(space_ctx *ctx, const struct space_template_import_options *opts)
{
	CTX_ENTER(ctx);
	if (!ctx || !opts)
		return -EINVAL;
	/* Callers built against older versions of the options lack the later fields. */
	struct space_template_import_options full;
	int r = opts_template_import_load(ctx, opts, &full);
	if (r < 0)
		return r;
	struct space_template_import_options *o = &full;
	if (!o->rootfs == !o->image)
		return ctx_error_msg(ctx, -EINVAL, "a template import takes a rootfs or an image (exactly one)");
	if (!util_name_valid(o->name))
		return ctx_error_msg(ctx, -EINVAL,
				     "invalid template name '%s': use 1-63 letters, digits, '.', '_' or '-', "
				     "not starting with '.' or '-'",
				     o->name ? o->name : "");
	if (o->image && names_registry(o->image))
		return registry_refused(ctx, o->image);
	enum rootfs_kind kind = ROOTFS_DIR;
	if (o->rootfs) {
		r = detect_rootfs(o->rootfs, &kind);
		if (r == -EINVAL)
			return ctx_error_msg(ctx, r, "rootfs %s is neither a directory, a tarball nor an ext4 image",
					     o->rootfs);
		if (r < 0)
			return ctx_error(ctx, r, "rootfs %s", o->rootfs);
		const char *why = NULL;
		if (kind != ROOTFS_EXT4 && image_source_detect(ctx, o->rootfs, &why) > 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "%s is a container image (it has %s at its top): importing it as one",
				o->rootfs, why);
			o->image = o->rootfs;
			o->rootfs = NULL;
		}
	}
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
	if (o->image)
		return template_import_image(ctx, o, root);
	struct store *s = ctx->store;
	r = store_template_exists(s, o->name);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	if (r > 0)
		return ctx_error_msg(ctx, -EEXIST, "template %s already exists (remove it with `space template rm %s`)",
				     o->name, o->name);

	char tmp[PATH_MAX];
	(void)core_pool_tmp_sweep(ctx, root);
	if ((r = core_pool_tmp_path(ctx, root, tmp, sizeof(tmp))) < 0)
		return r;
	template_progress(o, "create subvolume");
	r = store_btrfs_subvolume_create(tmp);
	if (r < 0)
		return ctx_error(ctx, r, "create subvolume %s", tmp);
	util_fault_point("template-import", 1);
	bool is_image = false;
	r = stage_rootfs(ctx, o, kind, tmp, &is_image);
	if (r == 0 && is_image) {
		(void)store_btrfs_subvolume_delete(tmp);
		return ctx_error_msg(ctx, -EINVAL,
				     "rootfs %s looks like a container image (manifest.json, oci-layout or index.json at its "
				     "top): decompress it and import it with --image",
				     o->rootfs);
	}
	if (r == 0)
		r = template_commit(ctx, o, root, tmp, NULL, NULL);
	if (r < 0)
		(void)store_btrfs_subvolume_delete(tmp);
	return r;
}
