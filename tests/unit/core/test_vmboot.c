/* SPDX-License-Identifier: Apache-2.0 */
/*
 * VM boot assets: module resolution (a fake modules tree, and Debian's real one when nested-kvm has
 * cached it), the initramfs archive as cpio(1) lists it, the command line, kernel discovery from a
 * template directory and the initramfs cache.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/initramfs.h"
#include "core/vm_assets.h"
#include "space.h"
#include "util/util.h"

static int failures;
#define CHECK(cond, ...)                                                                                   \
	do {                                                                                               \
		if (!(cond)) {                                                                             \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
			fprintf(stderr, __VA_ARGS__);                                                      \
			fputc('\n', stderr);                                                               \
			failures++;                                                                        \
		}                                                                                          \
	} while (0)

static char tmpdir[256];

static void put(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
	char *slash = strrchr(p, '/');
	*slash = '\0';
	util_mkdir_p(p, 0755);
	*slash = '/';
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
}

static int position(const struct kmod_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->mods[i].name, name))
			return (int)i;
	return -1;
}

/* Every dependency modules.dep names for a listed module comes before it. */
static void check_order(const char *moddir, const struct kmod_list *l)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/modules.dep", moddir);
	char *text;
	size_t len;
	CHECK(util_read_file(path, 64 << 20, &text, &len) == 0, "read %s", path);
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *colon = strchr(line, ':');
		char name[64];
		if (!colon)
			continue;
		*colon = '\0';
		kmod_name_of(line, name, sizeof(name));
		int at = position(l, name);
		if (at < 0)
			continue;
		char *save = NULL;
		for (char *d = strtok_r(colon + 1, " ", &save); d; d = strtok_r(NULL, " ", &save)) {
			char dn[64];
			kmod_name_of(d, dn, sizeof(dn));
			int dat = position(l, dn);
			CHECK(dat >= 0 && dat < at, "%s (at %d) needs %s, at %d", name, at, dn, dat);
		}
	}
	free(text);
}

static void make_fake_tree(void)
{
	put("mods/modules.dep",
	    "kernel/drivers/virtio/virtio_ring.ko:\n"
	    "kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/virtio/virtio_mmio.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/block/virtio_blk.ko.xz: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/net/vmw_vsock/vmw_vsock_virtio_transport.ko: kernel/net/vmw_vsock/vmw_vsock_virtio_transport_common.ko "
	    "kernel/net/vmw_vsock/vsock.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/net/vmw_vsock/vmw_vsock_virtio_transport_common.ko: kernel/net/vmw_vsock/vsock.ko\n"
	    "kernel/net/vmw_vsock/vsock.ko:\n"
	    "kernel/drivers/char/hw_random/virtio-rng.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/gpu/unrelated.ko:\n");
	put("mods/modules.builtin", "kernel/fs/ext4/ext4.ko\nkernel/fs/jbd2/jbd2.ko\n");
	const char *kos[] = { "virtio_ring", "virtio", "virtio_mmio", "vmw_vsock_virtio_transport",
			      "vmw_vsock_virtio_transport_common", "vsock", "virtio-rng", "unrelated" };
	const char *dirs[] = { "drivers/virtio", "drivers/virtio", "drivers/virtio", "net/vmw_vsock", "net/vmw_vsock",
			       "net/vmw_vsock", "drivers/char/hw_random", "drivers/gpu" };
	for (size_t i = 0; i < sizeof(kos) / sizeof(kos[0]); i++) {
		char rel[256], body[128];
		snprintf(rel, sizeof(rel), "mods/kernel/%s/%s.ko", dirs[i], kos[i]);
		snprintf(body, sizeof(body), "MODULE %s\n", kos[i]);
		put(rel, body);
	}
	put("mods/kernel/drivers/block/virtio_blk.ko", "MODULE virtio_blk\n");
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "xz -f %s/mods/kernel/drivers/block/virtio_blk.ko", tmpdir);
	CHECK(system(cmd) == 0, "xz");
}

static void test_fake_resolve(void)
{
	char moddir[512], err[512] = "";
	snprintf(moddir, sizeof(moddir), "%s/mods", tmpdir);
	struct kmod_list l;
	int r = kmod_resolve(moddir, initramfs_required_modules, initramfs_optional_modules, &l, err, sizeof(err));
	CHECK(r == 0, "resolve: %d %s", r, err);
	if (r < 0)
		return;
	check_order(moddir, &l);
	CHECK(l.n == 8, "8 modules (ext4 built in, unrelated left out), got %zu", l.n);
	CHECK(position(&l, "ext4") < 0 && position(&l, "unrelated") < 0, "no ext4, no unrelated module");
	CHECK(position(&l, "virtio_rng") >= 0, "optional virtio-rng taken, normalized");
	CHECK(position(&l, "virtio_ring") == 0, "virtio_ring first");
	kmod_list_free(&l);

	/* A required module that is neither a module nor built in. */
	const char *req[] = { "virtio_mmio", "virtio_fs", NULL };
	r = kmod_resolve(moddir, req, NULL, &l, err, sizeof(err));
	CHECK(r == -ENOENT && strstr(err, "virtio_fs"), "missing module: %d %s", r, err);

	put("cyc/modules.dep", "a.ko: b.ko\nb.ko: a.ko\n");
	snprintf(moddir, sizeof(moddir), "%s/cyc", tmpdir);
	const char *a[] = { "a", NULL };
	r = kmod_resolve(moddir, a, NULL, &l, err, sizeof(err));
	CHECK(r == -ELOOP, "cycle: %d %s", r, err);
}

/* Lists an archive with cpio -t. */
static char *cpio_list(const char *archive)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "cpio -t --quiet < %s", archive);
	FILE *p = popen(cmd, "r");
	static char buf[8192];
	size_t n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
	buf[n] = '\0';
	CHECK(p && pclose(p) == 0, "cpio -t %s", archive);
	return buf;
}

static void test_archive(void)
{
	char moddir[512], out[512], scratch[512], agent[512], err[512] = "";
	snprintf(moddir, sizeof(moddir), "%s/mods", tmpdir);
	snprintf(out, sizeof(out), "%s/initrd.img", tmpdir);
	snprintf(scratch, sizeof(scratch), "%s/scratch", tmpdir);
	snprintf(agent, sizeof(agent), "%s/agent", tmpdir);
	put("agent", "#!/bin/sh\necho I am the agent\n");
	util_mkdir_p(scratch, 0755);
	struct kmod_list l;
	CHECK(kmod_resolve(moddir, initramfs_required_modules, initramfs_optional_modules, &l, err, sizeof(err)) == 0,
	      "%s", err);
	int r = initramfs_write(out, agent, moddir, &l, scratch, err, sizeof(err));
	CHECK(r == 0, "initramfs_write: %d %s", r, err);
	const char *want = "dev\nproc\nsys\nnewroot\nlib\nlib/modules\ndev/console\ninit\n"
			   "lib/modules/virtio_ring.ko\nlib/modules/virtio.ko\nlib/modules/virtio_rng.ko\n"
			   "lib/modules/virtio_mmio.ko\nlib/modules/virtio_blk.ko\nlib/modules/vsock.ko\n"
			   "lib/modules/vmw_vsock_virtio_transport_common.ko\nlib/modules/vmw_vsock_virtio_transport.ko\n"
			   "modules.order\n";
	const char *got = cpio_list(out);
	CHECK(!strcmp(got, want), "cpio -t lists\n%s\nwant\n%s", got, want);

	/* Unpacked: the decompressed module, the load order, /init intact, /dev/console a device. */
	char cmd[1200], x[512];
	snprintf(x, sizeof(x), "%s/x", tmpdir);
	util_mkdir_p(x, 0755);
	snprintf(cmd, sizeof(cmd), "cd %s && cpio -i -d --quiet < %s 2>/dev/null", x, out);
	CHECK(system(cmd) == 0, "cpio -i");
	char p[600], *text = NULL;
	size_t len;
	snprintf(p, sizeof(p), "%s/lib/modules/virtio_blk.ko", x);
	CHECK(util_read_file(p, 4096, &text, &len) == 0 && !strcmp(text, "MODULE virtio_blk\n"),
	      "virtio_blk.ko decompressed: %s", text ? text : "(none)");
	free(text);
	snprintf(p, sizeof(p), "%s/modules.order", x);
	CHECK(util_read_file(p, 4096, &text, &len) == 0 && !strncmp(text, "/lib/modules/virtio_ring.ko\n", 28),
	      "modules.order starts with virtio_ring: %s", text ? text : "(none)");
	free(text);
	snprintf(p, sizeof(p), "%s/init", x);
	struct stat st;
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0755 && st.st_size == 30, "init: mode %o size %lld",
	      st.st_mode, (long long)st.st_size);
	/* An empty modules list still gives a valid archive (a kernel with everything built in). */
	r = initramfs_write(out, agent, moddir, NULL, scratch, err, sizeof(err));
	got = cpio_list(out);
	CHECK(r == 0 && strstr(got, "init\nmodules.order\n"), "no modules: %s", got);
	kmod_list_free(&l);
}

static void test_cmdline(void)
{
	char c[48] = "console=ttyS0";
	CHECK(vm_cmdline_append(c, sizeof(c), "space.port", "1024") == 0, "append port");
	CHECK(vm_cmdline_append(c, sizeof(c), "space.hostname", "h1") == 0, "append hostname");
	CHECK(!strcmp(c, "console=ttyS0 space.port=1024 space.hostname=h1"), "got '%s'", c);
	CHECK(vm_cmdline_append(c, sizeof(c), "space.lifetime", "3600") == -ENAMETOOLONG, "too long");
	CHECK(!strcmp(c, "console=ttyS0 space.port=1024 space.hostname=h1"), "unchanged after overflow: '%s'", c);
	CHECK(vm_cmdline_append(c, sizeof(c), "space.hostname", "a b") == -EINVAL, "space in a value");
	CHECK(vm_cmdline_append(c, sizeof(c), "space.x", "\"q") == -EINVAL, "quote in a value");
	char e[16] = "";
	CHECK(vm_cmdline_append(e, sizeof(e), "a", "b") == 0 && !strcmp(e, "a=b"), "empty start: '%s'", e);
}

static const char *real_tree(char *kernel, char *moddir)
{
	const char *cache = getenv("NESTED_KVM_CACHE") ? getenv("NESTED_KVM_CACHE") : "/var/cache/nested-kvm";
	char p[400];
	static char kver[128];
	snprintf(p, sizeof(p), "%s/ready", cache);
	char *text = NULL;
	size_t len;
	if (util_read_file(p, 256, &text, &len) < 0)
		return NULL;
	snprintf(kver, sizeof(kver), "%.*s", (int)strcspn(text, "\n"), text);
	free(text);
	snprintf(kernel, 512, "%s/root/boot/vmlinuz-%s", cache, kver);
	snprintf(moddir, 512, "%s/root/lib/modules/%s", cache, kver);
	return access(kernel, R_OK) == 0 && access(moddir, R_OK) == 0 ? kver : NULL;
}

static void test_real_tree(void)
{
	char kernel[512], moddir[512], err[512] = "";
	const char *kver = real_tree(kernel, moddir);
	if (!kver) {
		printf("SKIP real modules tree: nested-kvm has cached no Debian kernel\n");
		return;
	}
	struct kmod_list l;
	int r = kmod_resolve(moddir, initramfs_required_modules, initramfs_optional_modules, &l, err, sizeof(err));
	CHECK(r == 0, "resolve Debian %s: %s", kver, err);
	if (r < 0)
		return;
	check_order(moddir, &l);
	for (size_t i = 0; initramfs_required_modules[i]; i++)
		CHECK(position(&l, initramfs_required_modules[i]) >= 0, "Debian needs module %s",
		      initramfs_required_modules[i]);
	CHECK(position(&l, "crc32c_generic") >= 0 && position(&l, "crc32c_generic") < position(&l, "ext4"),
	      "crc32c before ext4");
	printf("Debian %s: %zu modules:", kver, l.n);
	for (size_t i = 0; i < l.n; i++)
		printf(" %s", l.mods[i].name);
	printf("\n");

	/* A template's copy of them resolves to the same order. */
	char copy[512];
	snprintf(copy, sizeof(copy), "%s/copy", tmpdir);
	r = kmod_copy_tree(moddir, &l, copy, err, sizeof(err));
	CHECK(r == 0, "copy tree: %s", err);
	struct kmod_list l2;
	r = kmod_resolve(copy, initramfs_required_modules, initramfs_optional_modules, &l2, err, sizeof(err));
	CHECK(r == 0 && l2.n == l.n, "resolve the copy: %d %s (%zu vs %zu)", r, err, l2.n, l.n);
	for (size_t i = 0; r == 0 && i < l.n && i < l2.n; i++)
		CHECK(!strcmp(l.mods[i].name, l2.mods[i].name), "copy order %zu: %s vs %s", i, l.mods[i].name,
		      l2.mods[i].name);
	if (r == 0)
		kmod_list_free(&l2);
	kmod_list_free(&l);

	char rel[128];
	CHECK(vm_kernel_release(kernel, rel, sizeof(rel)) == 0 && !strcmp(rel, kver), "release of %s: %s", kernel,
	      rel);
}

/* A template directory naming a kernel and a modules tree: assets built once, then reused. */
static void test_prepare(void)
{
	char state[512], tpl[512], agent_env[600];
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	snprintf(tpl, sizeof(tpl), "%s/tpl", tmpdir);
	util_mkdir_p(state, 0755);
	util_mkdir_p(tpl, 0755);
	if (!getenv("SPACE_AGENT_PATH")) {
		snprintf(agent_env, sizeof(agent_env), "%s/agent", tmpdir);
		chmod(agent_env, 0755);
		setenv("SPACE_AGENT_PATH", agent_env, 1);
	}
	char kernel[512], moddir[512], k[600], m[600];
	const char *kver = real_tree(kernel, moddir);
	if (!kver) {
		snprintf(kernel, sizeof(kernel), "%s/agent", tmpdir); /* any file: it is not parsed here */
		snprintf(moddir, sizeof(moddir), "%s/mods", tmpdir);
	}
	snprintf(k, sizeof(k), "%s/kernel", tpl);
	snprintf(m, sizeof(m), "%s/modules", tpl);
	CHECK(symlink(kernel, k) == 0 && symlink(moddir, m) == 0, "symlinks");
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = state;
	space_ctx *ctx;
	CHECK(space_ctx_new(&o, &ctx) == 0, "ctx");
	struct vm_assets a, b;
	int r = vm_assets_prepare(ctx, tpl, &a);
	CHECK(r == 0, "prepare: %d %s", r, space_ctx_last_error(ctx));
	if (r == 0) {
		struct stat st1, st2;
		CHECK(!strcmp(a.kernel, k), "kernel %s", a.kernel);
		CHECK(!strcmp(a.kver, kver ? kver : ""), "kver '%s'", a.kver);
		CHECK(strstr(a.cmdline, "console=ttyS0"), "cmdline '%s'", a.cmdline);
		CHECK(stat(a.initrd, &st1) == 0 && st1.st_size > 0, "initrd %s", a.initrd);
		CHECK(strstr(cpio_list(a.initrd), "init\n"), "initrd has /init");
		CHECK(vm_assets_prepare(ctx, tpl, &b) == 0 && !strcmp(a.initrd, b.initrd), "same initrd reused");
		CHECK(stat(b.initrd, &st2) == 0 && st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec &&
			      st1.st_ino == st2.st_ino, "not rebuilt");
		printf("initrd %s: %lld bytes\n", a.initrd, (long long)st1.st_size);
		/* Another directory holding the same kernel and modules (a sandbox's snapshot of the template)
		 * shares the image. */
		char tpl2[512];
		snprintf(tpl2, sizeof(tpl2), "%s/tpl2", tmpdir);
		util_mkdir_p(tpl2, 0755);
		snprintf(k, sizeof(k), "%s/kernel", tpl2);
		snprintf(m, sizeof(m), "%s/modules", tpl2);
		CHECK(symlink(kernel, k) == 0 && symlink(moddir, m) == 0, "symlinks");
		CHECK(vm_assets_prepare(ctx, tpl2, &b) == 0 && !strcmp(a.initrd, b.initrd) && !strcmp(b.kernel, k),
		      "snapshot shares the image: %s vs %s", a.initrd, b.initrd);
	}
	/* A template whose modules lack a required driver fails with the driver's name. */
	put("bad/modules/modules.dep", "kernel/virtio_mmio.ko:\n");
	char bad[512];
	snprintf(bad, sizeof(bad), "%s/bad", tmpdir);
	snprintf(k, sizeof(k), "%s/bad/kernel", tmpdir);
	CHECK(symlink(kernel, k) == 0, "symlink");
	r = vm_assets_prepare(ctx, bad, &a);
	CHECK(r == -ENOENT && strstr(space_ctx_last_error(ctx), "virtio_blk"), "bad modules: %d %s", r,
	      space_ctx_last_error(ctx));
	space_ctx_free(ctx);
}

int main(void)
{
	if (system("command -v cpio >/dev/null && command -v xz >/dev/null") != 0) {
		printf("SKIP: cpio and xz are needed\n");
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/space-vmboot-XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	make_fake_tree();
	test_fake_resolve();
	test_archive();
	test_cmdline();
	test_real_tree();
	test_prepare();
	util_rm_rf(tmpdir);
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	else
		printf("vmboot: all checks passed\n");
	return failures ? 1 : 0;
}
