/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel discovery for VM sandboxes, Debian cloud kernel fetching, and the cached initramfs. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/initramfs.h"
#include "core/internal.h"
#include "core/vm_assets.h"
#include "util/cleanup.h"
#include "util/util.h"

/*
 * Proven on Debian's kernels under space-vmm; the caller appends space.* parameters. `quiet`: the
 * kernel's boot messages below warning level stay in its ring buffer (dmesg inside) instead of crossing
 * the emulated serial port, where every byte is two exits to space-vmm (about 60,000 for a Debian
 * kernel's boot log); warnings, errors and panics still reach sandbox.log.
 */
#define VM_BASE_CMDLINE "console=ttyS0 quiet panic=-1"
#define DEBIAN_KERNEL_PACKAGE "linux-image-cloud-amd64"
/* Bumped whenever the archive's layout changes, so a cached image of another layout is not reused. */
#define INITRAMFS_FORMAT 1

int vm_cmdline_append(char *cmdline, size_t len, const char *key, const char *value)
{
	if (!cmdline || !key || !*key || !value)
		return -EINVAL;
	for (const char *p = value; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == '"' || *p == '\'' || *p == 0x7f)
			return -EINVAL;
	if (strpbrk(key, " =\"'\t\n"))
		return -EINVAL;
	size_t cur = strnlen(cmdline, len);
	if (cur == len)
		return -EINVAL;
	int n = snprintf(cmdline + cur, len - cur, "%s%s=%s", cur ? " " : "", key, value);
	if (n < 0 || (size_t)n >= len - cur) {
		cmdline[cur] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

int vm_kernel_release(const char *image, char *buf, size_t len)
{
	uint8_t head[0x8000];
	_cleanup_close_ int fd = open(image, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = pread(fd, head, sizeof(head), 0);
	if (n < 0)
		return -errno;
	/* Setup header: "HdrS" at 0x202, kernel_version (u16) at 0x20e points at a string 0x200 further. */
	if (n < 0x210 || memcmp(head + 0x202, "HdrS", 4) != 0)
		return -ENOENT;
	size_t off = (size_t)(head[0x20e] | head[0x20f] << 8);
	if (!off || off + 0x200 >= (size_t)n)
		return -ENOENT;
	const char *s = (const char *)head + off + 0x200;
	size_t max = (size_t)n - off - 0x200, k = 0;
	while (k < max && k + 1 < len && s[k] > ' ' && s[k] < 0x7f)
		k++;
	if (!k)
		return -ENOENT;
	memcpy(buf, s, k);
	buf[k] = '\0';
	return 0;
}

static bool is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* An unpacked kernel package in root: boot/vmlinuz-<kver> and (usr/)lib/modules/<kver>. */
static int find_in_tree(const char *root, char *kernel, char *moddir, char *kver)
{
	char boot[PATH_MAX];
	snprintf(boot, sizeof(boot), "%s/boot", root);
	_cleanup_closedir_ DIR *d = opendir(boot);
	if (!d)
		return -errno;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "vmlinuz-", 8) != 0 || strlen(e->d_name + 8) >= 128)
			continue;
		char k[PATH_MAX], m[PATH_MAX];
		snprintf(k, sizeof(k), "%s/%s", boot, e->d_name);
		if (!is_file(k))
			continue;
		snprintf(m, sizeof(m), "%s/lib/modules/%s", root, e->d_name + 8);
		if (!is_dir(m))
			snprintf(m, sizeof(m), "%s/usr/lib/modules/%s", root, e->d_name + 8);
		if (kernel)
			snprintf(kernel, PATH_MAX, "%s", k);
		if (moddir)
			snprintf(moddir, PATH_MAX, "%s", is_dir(m) ? m : "");
		if (kver)
			snprintf(kver, 128, "%s", e->d_name + 8);
		return 0;
	}
	return -ENOENT;
}

static int kernels_dir(space_ctx *ctx, char *buf, size_t len)
{
	int r = ctx_state_path(ctx, "kernels", buf, len);
	if (r < 0)
		return r;
	r = util_mkdir_p(buf, 0755);
	return r < 0 ? ctx_error(ctx, r, "create %s", buf) : 0;
}

/* The first fetched kernel under <state>/kernels/ (directories named linux-image-*). */
static int find_fetched(const char *kdir, vm_kernel_fn fn, void *userdata, char *kernel, char *moddir, char *kver)
{
	_cleanup_closedir_ DIR *d = opendir(kdir);
	if (!d)
		return errno == ENOENT ? -ENOENT : -errno;
	struct dirent *e;
	int found = -ENOENT;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "linux-image-", 12) != 0)
			continue;
		char root[PATH_MAX], k[PATH_MAX], m[PATH_MAX], v[128];
		snprintf(root, sizeof(root), "%s/%s", kdir, e->d_name);
		if (find_in_tree(root, k, m, v) < 0)
			continue;
		if (fn) {
			int r = fn("fetched", k, m, v, userdata);
			if (r < 0)
				return r;
			found = 0;
			continue;
		}
		snprintf(kernel, PATH_MAX, "%s", k);
		snprintf(moddir, PATH_MAX, "%s", m);
		snprintf(kver, 128, "%s", v);
		return 0;
	}
	return found;
}

static int host_kernel(char *kernel, char *moddir, char *kver)
{
	struct utsname u;
	if (uname(&u) < 0)
		return -errno;
	char k[PATH_MAX], m[PATH_MAX];
	snprintf(k, sizeof(k), "/boot/vmlinuz-%s", u.release);
	snprintf(m, sizeof(m), "/lib/modules/%s", u.release);
	if (access(k, R_OK) < 0)
		return -errno;
	snprintf(kernel, PATH_MAX, "%s", k);
	snprintf(moddir, PATH_MAX, "%s", is_dir(m) ? m : "");
	snprintf(kver, 128, "%s", u.release);
	return 0;
}

int vm_kernel_list(space_ctx *ctx, vm_kernel_fn fn, void *userdata)
{
	char k[PATH_MAX], m[PATH_MAX], v[128], kdir[PATH_MAX];
	if (host_kernel(k, m, v) == 0) {
		int r = fn("host", k, m, v, userdata);
		if (r < 0)
			return r;
	}
	int r = kernels_dir(ctx, kdir, sizeof(kdir));
	if (r < 0)
		return r;
	r = find_fetched(kdir, fn, userdata, NULL, NULL, NULL);
	return r == -ENOENT ? 0 : r;
}

static int run_step(space_ctx *ctx, const char *const argv[], const char *what, char **ret_out)
{
	_cleanup_free_ char *out = NULL;
	int r = util_run(argv, &out);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "%s: %s is not installed", what, argv[0]);
	if (r < 0)
		return ctx_error_msg(ctx, -ENOENT, "%s failed: %s", what, out && *out ? out : "(no output)");
	if (ret_out)
		*ret_out = TAKE_PTR(out);
	return 0;
}

/* apt-get download PKG into dir, and the path of the .deb it left there. */
static int apt_download(space_ctx *ctx, const char *dir, const char *pkg, char *deb, size_t len)
{
	const char *argv[] = { "sh", "-c", "cd \"$1\" && exec apt-get download -q \"$2\"", "sh", dir, pkg, NULL };
	char what[256];
	snprintf(what, sizeof(what), "apt-get download %s (is an apt source for Debian reachable?)", pkg);
	int r = run_step(ctx, argv, what, NULL);
	if (r < 0)
		return r;
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return ctx_error(ctx, -errno, "open %s", dir);
	struct dirent *e;
	size_t plen = strlen(pkg);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, pkg, plen) && e->d_name[plen] == '_') {
			snprintf(deb, len, "%s/%s", dir, e->d_name);
			return 0;
		}
	return ctx_error_msg(ctx, -ENOENT, "apt-get download %s left no package in %s", pkg, dir);
}

/* The metapackage depends on the versioned image package: "linux-image-6.1.0-28-cloud-amd64 (= ...)". */
static int real_package(space_ctx *ctx, const char *meta_deb, char *pkg, size_t len)
{
	const char *argv[] = { "dpkg-deb", "-f", meta_deb, "Depends", NULL };
	_cleanup_free_ char *out = NULL;
	int r = run_step(ctx, argv, "read the kernel metapackage", &out);
	if (r < 0)
		return r;
	for (char *save = NULL, *tok = strtok_r(out, " ,|()\n", &save); tok; tok = strtok_r(NULL, " ,|()\n", &save))
		if (!strncmp(tok, "linux-image-", 12) && strlen(tok) < len && !strpbrk(tok, "/")) {
			snprintf(pkg, len, "%s", tok);
			return 0;
		}
	return ctx_error_msg(ctx, -ENOENT, "%s names no linux-image package it depends on", meta_deb);
}

int vm_kernel_fetch(space_ctx *ctx, char *ret_kernel, char *ret_moddir, char *ret_kver)
{
	char kdir[PATH_MAX], k[PATH_MAX], m[PATH_MAX], v[128];
	int r = kernels_dir(ctx, kdir, sizeof(kdir));
	if (r < 0)
		return r;
	if (find_fetched(kdir, NULL, NULL, k, m, v) < 0) {
		char tmp[PATH_MAX], deb[PATH_MAX], pkg[128], root[PATH_MAX], dst[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s/.fetch-XXXXXX", kdir);
		if (!mkdtemp(tmp))
			return ctx_error(ctx, -errno, "create a directory in %s", kdir);
		ctx_log(ctx, SPACE_LOG_INFO, "fetching %s with apt-get download", DEBIAN_KERNEL_PACKAGE);
		r = apt_download(ctx, tmp, DEBIAN_KERNEL_PACKAGE, deb, sizeof(deb));
		if (r == 0)
			r = real_package(ctx, deb, pkg, sizeof(pkg));
		if (r == 0)
			r = apt_download(ctx, tmp, pkg, deb, sizeof(deb));
		snprintf(root, sizeof(root), "%s/root", tmp);
		const char *x[] = { "dpkg-deb", "-x", deb, root, NULL };
		if (r == 0)
			r = run_step(ctx, x, "unpack the kernel package", NULL);
		if (r == 0 && find_in_tree(root, k, m, v) < 0)
			r = ctx_error_msg(ctx, -ENOENT, "package %s holds no boot/vmlinuz-*", pkg);
		/* The package ships no modules.dep: its postinst would run depmod, and it is never installed. */
		const char *dm[] = { "depmod", "-b", root, v, NULL };
		if (r == 0 && *m)
			r = run_step(ctx, dm, "depmod of the fetched kernel (install kmod)", NULL);
		snprintf(dst, sizeof(dst), "%s/%s", kdir, r == 0 ? pkg : "");
		if (r == 0 && rename(root, dst) < 0 && errno != ENOTEMPTY && errno != EEXIST)
			r = ctx_error(ctx, -errno, "move the kernel into %s", dst);
		util_rm_rf(tmp);
		if (r < 0)
			return r;
		r = find_in_tree(dst, k, m, v);
		if (r < 0)
			return ctx_error(ctx, r, "fetched kernel in %s", dst);
	}
	if (ret_kernel)
		snprintf(ret_kernel, PATH_MAX, "%s", k);
	if (ret_moddir)
		snprintf(ret_moddir, PATH_MAX, "%s", m);
	if (ret_kver)
		snprintf(ret_kver, 128, "%s", v);
	return 0;
}

/* What template.json says: "kernel", "initrd", "modules" (relative to the template unless absolute). */
struct template_boot {
	char kernel[PATH_MAX], initrd[PATH_MAX], moddir[PATH_MAX];
};

static void template_entry(cJSON *j, const char *key, const char *dir, const char *fallback, char *out)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, key));
	char p[PATH_MAX];
	if (!v || !*v)
		v = fallback;
	if (v[0] == '/')
		snprintf(p, sizeof(p), "%s", v);
	else
		snprintf(p, sizeof(p), "%s/%s", dir, v);
	out[0] = '\0';
	if (!strcmp(key, "modules") ? is_dir(p) : is_file(p))
		snprintf(out, PATH_MAX, "%s", p);
}

static int read_template(space_ctx *ctx, const char *dir, struct template_boot *t)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	snprintf(path, sizeof(path), "%s/template.json", dir);
	int r = util_read_file(path, 1 << 20, &text, NULL);
	if (r < 0 && r != -ENOENT)
		return ctx_error(ctx, r, "read %s", path);
	cJSON *j = text ? cJSON_Parse(text) : NULL;
	if (text && !j)
		return ctx_error_msg(ctx, -EINVAL, "%s is not valid JSON", path);
	template_entry(j, "kernel", dir, "kernel", t->kernel);
	template_entry(j, "initrd", dir, "initrd", t->initrd);
	template_entry(j, "modules", dir, "modules", t->moddir);
	cJSON_Delete(j);
	return 0;
}

static void hash_add(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		*h ^= b[i];
		*h *= 0x100000001b3ull;
	}
}

/*
 * Identity of a file: size, mtime, inode and its first 64 KiB (a kernel's header names its release and
 * build). Not its path: a sandbox is a snapshot of its template, and the template's kernel seen through
 * any snapshot must find the same cached image. A missing file adds a marker.
 */
static void hash_file(uint64_t *h, const char *path)
{
	struct stat st;
	_cleanup_close_ int fd = *path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0 || fstat(fd, &st) < 0) {
		hash_add(h, "-", 1);
		return;
	}
	uint64_t id[4] = { (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec,
			   (uint64_t)st.st_ino };
	hash_add(h, id, sizeof(id));
	_cleanup_free_ uint8_t *head = malloc(1 << 16);
	ssize_t n = head ? pread(fd, head, 1 << 16, 0) : -1;
	if (n > 0)
		hash_add(h, head, (size_t)n);
}

static int build_initramfs(space_ctx *ctx, const char *kernel, const char *moddir, const char *kver, char *out)
{
	char agent[PATH_MAX], kdir[PATH_MAX], dep[PATH_MAX * 2];
	int r = ctx_helper_path(ctx, "space-agent", agent, sizeof(agent));
	if (r < 0)
		return r;
	r = kernels_dir(ctx, kdir, sizeof(kdir));
	if (r < 0)
		return r;
	uint64_t h = 0xcbf29ce484222325ull;
	int format = INITRAMFS_FORMAT;
	hash_add(&h, &format, sizeof(format));
	hash_file(&h, kernel);
	hash_file(&h, agent);
	snprintf(dep, sizeof(dep), "%s/modules.dep", moddir);
	hash_file(&h, *moddir ? dep : "");
	snprintf(out, PATH_MAX, "%s/initramfs-%s-%016llx.img", kdir, *kver ? kver : "custom", (unsigned long long)h);
	if (is_file(out))
		return 0;

	struct kmod_list mods = { 0 };
	char err[512] = "";
	if (*moddir) {
		r = kmod_resolve(moddir, initramfs_required_modules, initramfs_optional_modules, &mods, err,
				 sizeof(err));
		if (r < 0)
			return ctx_error_msg(ctx, r, "modules of %s: %s", kernel, err);
	}
	char scratch[PATH_MAX];
	snprintf(scratch, sizeof(scratch), "%s/.build-XXXXXX", kdir);
	if (!mkdtemp(scratch)) {
		kmod_list_free(&mods);
		return ctx_error(ctx, -errno, "create a directory in %s", kdir);
	}
	uint64_t t0 = util_now_ns();
	r = initramfs_write(out, agent, moddir, &mods, scratch, err, sizeof(err));
	util_rm_rf(scratch);
	size_t n = mods.n;
	kmod_list_free(&mods);
	if (r < 0)
		return ctx_error_msg(ctx, r, "build the initramfs %s: %s", out, err);
	ctx_log(ctx, SPACE_LOG_INFO, "built %s (%zu modules) in %llu ms", out, n,
		(unsigned long long)((util_now_ns() - t0) / 1000000));
	return 0;
}

int vm_assets_prepare(space_ctx *ctx, const char *template_path, struct vm_assets *out)
{
	if (!ctx || !out)
		return -EINVAL;
	struct template_boot t = { "", "", "" };
	struct vm_assets a;
	memset(&a, 0, sizeof(a));
	char moddir[PATH_MAX] = "";
	int r = template_path ? read_template(ctx, template_path, &t) : 0;
	if (r < 0)
		return r;
	if (*t.kernel) {
		snprintf(a.kernel, sizeof(a.kernel), "%s", t.kernel);
		if (vm_kernel_release(a.kernel, a.kver, sizeof(a.kver)) < 0)
			a.kver[0] = '\0';
		if (*t.moddir)
			snprintf(moddir, sizeof(moddir), "%s", t.moddir);
		else if (*a.kver)
			snprintf(moddir, sizeof(moddir), "/lib/modules/%s", a.kver);
		if (*moddir && !is_dir(moddir))
			moddir[0] = '\0'; /* a kernel without modules has what it needs built in */
	} else if (host_kernel(a.kernel, moddir, a.kver) < 0) {
		r = vm_kernel_fetch(ctx, a.kernel, moddir, a.kver);
		char why[512];
		snprintf(why, sizeof(why), "%s", space_ctx_last_error(ctx));
		if (r < 0)
			return ctx_error_msg(ctx, -ENOENT,
					     "no kernel for VM sandboxes: the template has none, /boot/vmlinuz-$(uname "
					     "-r) is not readable, and fetching Debian's %s failed (%s). Run `space "
					     "kernel fetch` where apt can reach Debian, or import the template with "
					     "--kernel FILE [--modules DIR]",
					     DEBIAN_KERNEL_PACKAGE, why);
	}
	if (*t.initrd)
		snprintf(a.initrd, sizeof(a.initrd), "%s", t.initrd);
	else if ((r = build_initramfs(ctx, a.kernel, moddir, a.kver, a.initrd)) < 0)
		return r;
	snprintf(a.cmdline, sizeof(a.cmdline), "%s", VM_BASE_CMDLINE);
	*out = a;
	return 0;
}
