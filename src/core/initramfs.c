/* SPDX-License-Identifier: Apache-2.0 */
/* The VM initramfs: a newc cpio writer, module resolution from modules.dep, and the archive itself. */
#include "core/initramfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

extern char **environ;

const char *const initramfs_required_modules[] = {
	"virtio_mmio", "virtio_blk", "vsock", "vmw_vsock_virtio_transport", "ext4", NULL,
};

/* crc32c first: ext4 and jbd2 ask the crypto API for it at mount time, and nothing would load it then. */
const char *const initramfs_optional_modules[] = {
	"crc32c_intel", "crc32c_generic", "virtio_rng", "virtio_net", NULL,
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- cpio ---------------------------------------------------------------------------------------- */

void cpio_init(struct cpio_writer *w, int fd)
{
	*w = (struct cpio_writer){ .fd = fd, .ino = 1 };
}

static int cpio_pad(struct cpio_writer *w)
{
	static const char zero[4];
	size_t pad = (4 - (w->offset & 3)) & 3;
	if (!pad)
		return 0;
	w->offset += pad;
	return util_write_all(w->fd, zero, pad);
}

static int cpio_header(struct cpio_writer *w, const char *name, mode_t mode, dev_t rdev, uint64_t size)
{
	size_t nlen = strlen(name) + 1;
	if (nlen > PATH_MAX)
		return -ENAMETOOLONG;
	if (size > UINT32_MAX)
		return -EFBIG;
	char hdr[110 + PATH_MAX + 1];
	/* magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor,
	 * namesize, check. mtime 0 keeps the archive reproducible, so its identity is its inputs'. */
	int n = snprintf(hdr, sizeof(hdr), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", w->ino++,
			 (unsigned)mode, 0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u, (unsigned)size, 0u, 0u,
			 major(rdev), minor(rdev), (unsigned)nlen, 0u);
	memcpy(hdr + n, name, nlen);
	w->offset += (uint64_t)n + nlen;
	int r = util_write_all(w->fd, hdr, (size_t)n + nlen);
	return r < 0 ? r : cpio_pad(w);
}

int cpio_add(struct cpio_writer *w, const char *name, mode_t mode, dev_t rdev, const void *data, size_t len)
{
	int r = cpio_header(w, name, mode, rdev, len);
	if (r < 0 || !len)
		return r;
	r = util_write_all(w->fd, data, len);
	if (r < 0)
		return r;
	w->offset += len;
	return cpio_pad(w);
}

int cpio_add_file(struct cpio_writer *w, const char *name, mode_t mode, const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	int r = cpio_header(w, name, S_IFREG | (mode & 07777), 0, (uint64_t)st.st_size);
	if (r < 0)
		return r;
	uint64_t left = (uint64_t)st.st_size;
	char buf[1 << 16];
	while (left) {
		ssize_t k = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO; /* shrank while we read it */
		r = util_write_all(w->fd, buf, (size_t)k);
		if (r < 0)
			return r;
		left -= (uint64_t)k;
		w->offset += (uint64_t)k;
	}
	return cpio_pad(w);
}

int cpio_finish(struct cpio_writer *w)
{
	return cpio_add(w, "TRAILER!!!", 0, 0, NULL, 0);
}

/* ---- modules.dep --------------------------------------------------------------------------------- */

int kmod_name_of(const char *path, char *buf, size_t len)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strcspn(base, ".");
	if (n == 0 || n >= len)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < n; i++)
		buf[i] = base[i] == '-' ? '_' : base[i];
	buf[n] = '\0';
	return 0;
}

struct dep_entry {
	char name[64];
	char *path; /* points into the file's text */
	char *deps; /* space-separated paths, in the text */
	int state;  /* 0 unvisited, 1 visiting, 2 done */
};

struct dep_table {
	char *text;
	struct dep_entry *e;
	size_t n;
	char **builtin; /* normalized names, into builtin_text */
	size_t nbuiltin;
	char *builtin_text;
};

static void dep_table_free(struct dep_table *t)
{
	free(t->text);
	free(t->e);
	free(t->builtin);
	free(t->builtin_text);
}

static struct dep_entry *dep_find(struct dep_table *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->e[i].name, name))
			return &t->e[i];
	return NULL;
}

static bool dep_builtin(const struct dep_table *t, const char *name)
{
	for (size_t i = 0; i < t->nbuiltin; i++)
		if (!strcmp(t->builtin[i], name))
			return true;
	return false;
}

/* Modules directories are ours or a distribution's, but a template may bring its own: bound everything. */
#define KMOD_DEP_MAX (64u << 20)

static int dep_load(const char *moddir, struct dep_table *t, char *err, size_t errlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/modules.dep", moddir);
	size_t len;
	int r = util_read_file(path, KMOD_DEP_MAX, &t->text, &len);
	if (r < 0) {
		set_err(err, errlen, "read %s: %s", path, strerror(-r));
		return r;
	}
	size_t cap = 0;
	for (char *line = t->text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		if (t->n == cap) {
			cap = cap ? cap * 2 : 1024;
			struct dep_entry *ne = realloc(t->e, cap * sizeof(*ne));
			if (!ne)
				return -ENOMEM;
			t->e = ne;
		}
		struct dep_entry *e = &t->e[t->n];
		if (kmod_name_of(line, e->name, sizeof(e->name)) < 0)
			continue;
		e->path = line;
		e->deps = colon + 1;
		e->state = 0;
		t->n++;
	}
	snprintf(path, sizeof(path), "%s/modules.builtin", moddir);
	r = util_read_file(path, KMOD_DEP_MAX, &t->builtin_text, &len);
	if (r == -ENOENT)
		return 0; /* no list: nothing is known to be built in */
	if (r < 0) {
		set_err(err, errlen, "read %s: %s", path, strerror(-r));
		return r;
	}
	cap = 0;
	for (char *line = t->builtin_text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char name[64];
		if (kmod_name_of(line, name, sizeof(name)) < 0)
			continue;
		/* Normalize in place: the name is never longer than the line. */
		strcpy(line, name);
		if (t->nbuiltin == cap) {
			cap = cap ? cap * 2 : 512;
			char **nb = realloc(t->builtin, cap * sizeof(*nb));
			if (!nb)
				return -ENOMEM;
			t->builtin = nb;
		}
		t->builtin[t->nbuiltin++] = line;
	}
	return 0;
}

static int list_push(struct kmod_list *l, const struct dep_entry *e)
{
	struct kmod *nm = realloc(l->mods, (l->n + 1) * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	l->mods = nm;
	char *p = strdup(e->path);
	if (!p)
		return -ENOMEM;
	snprintf(nm[l->n].name, sizeof(nm[l->n].name), "%s", e->name);
	nm[l->n].path = p;
	l->n++;
	return 0;
}

/* Depth-first: every dependency is pushed before the module that needs it. */
static int visit(struct dep_table *t, struct dep_entry *e, struct kmod_list *out, unsigned depth, char *err,
		 size_t errlen)
{
	if (e->state == 2)
		return 0;
	if (e->state == 1 || depth > 64) {
		set_err(err, errlen, "modules.dep: dependency cycle through %s", e->name);
		return -ELOOP;
	}
	e->state = 1;
	_cleanup_free_ char *deps = strdup(e->deps);
	if (!deps)
		return -ENOMEM;
	char *save = NULL;
	for (char *d = strtok_r(deps, " \t", &save); d; d = strtok_r(NULL, " \t", &save)) {
		char name[64];
		if (kmod_name_of(d, name, sizeof(name)) < 0)
			continue;
		struct dep_entry *de = dep_find(t, name);
		if (!de) {
			set_err(err, errlen, "modules.dep: %s needs %s, which it does not list", e->name, d);
			return -ENOENT;
		}
		int r = visit(t, de, out, depth + 1, err, errlen);
		if (r < 0)
			return r;
	}
	e->state = 2;
	return list_push(out, e);
}

static int resolve_names(struct dep_table *t, const char *const *names, bool required, struct kmod_list *out,
			 const char *moddir, char *err, size_t errlen)
{
	for (size_t i = 0; names && names[i]; i++) {
		char name[64];
		if (kmod_name_of(names[i], name, sizeof(name)) < 0)
			return -EINVAL;
		struct dep_entry *e = dep_find(t, name);
		if (!e) {
			if (!required || dep_builtin(t, name))
				continue;
			set_err(err, errlen, "the kernel of %s has no %s: neither a module nor built in", moddir, name);
			return -ENOENT;
		}
		int r = visit(t, e, out, 0, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

int kmod_resolve(const char *moddir, const char *const *required, const char *const *optional,
		 struct kmod_list *ret, char *err, size_t errlen)
{
	struct dep_table t = { 0 };
	struct kmod_list l = { 0 };
	int r = dep_load(moddir, &t, err, errlen);
	if (r == 0)
		r = resolve_names(&t, optional, false, &l, moddir, err, errlen);
	if (r == 0)
		r = resolve_names(&t, required, true, &l, moddir, err, errlen);
	dep_table_free(&t);
	if (r < 0) {
		kmod_list_free(&l);
		return r;
	}
	*ret = l;
	return 0;
}

void kmod_list_free(struct kmod_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->mods[i].path);
	free(l->mods);
	l->mods = NULL;
	l->n = 0;
}

/* ---- decompression ------------------------------------------------------------------------------- */

static bool has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* Writes the module at src, decompressed, to the new file dst. */
static int kmod_extract(const char *src, const char *dst, char *err, size_t errlen)
{
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		set_err(err, errlen, "create %s: %s", dst, strerror(errno));
		return -errno;
	}
	/* cat for an uncompressed module: one way to fill dst, whatever the source. A host tool waited for
	 * here, no sandbox's helper: it stays posix_spawnp, outside util_spawn (util/spawn.h). */
	const char *tool = has_suffix(src, ".xz") ? "xz" : has_suffix(src, ".zst") ? "zstd" : "cat";
	const char *argv[] = { tool, strcmp(tool, "cat") ? "-dc" : "--", src, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	/* A library prints nothing: the exit status says enough. */
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int r = posix_spawnp(&pid, tool, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0) {
		set_err(err, errlen, "%s is needed to decompress %s: %s", tool, src, strerror(r));
		return -r;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		set_err(err, errlen, "%s %s %s failed (%s %d)", tool, argv[1], src, WIFEXITED(status) ? "status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		return WIFEXITED(status) && WEXITSTATUS(status) == 127 ? -ENOENT : -EPROTO;
	}
	return 0;
}

/* "kernel/fs/ext4/ext4.ko.xz" -> "kernel/fs/ext4/ext4.ko" into buf. */
static int strip_compression(const char *path, char *buf, size_t len)
{
	size_t n = strlen(path);
	if (has_suffix(path, ".xz"))
		n -= 3;
	else if (has_suffix(path, ".zst"))
		n -= 4;
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(buf, path, n);
	buf[n] = '\0';
	return 0;
}

int kmod_copy_tree(const char *moddir, const struct kmod_list *l, const char *dst, char *err, size_t errlen)
{
	_cleanup_free_ char *dep = NULL;
	size_t deplen = 0;
	for (size_t i = 0; i < l->n; i++) {
		char rel[PATH_MAX], src[PATH_MAX], to[PATH_MAX * 2];
		if (strip_compression(l->mods[i].path, rel, sizeof(rel)) < 0 ||
		    (size_t)snprintf(src, sizeof(src), "%s/%s", moddir, l->mods[i].path) >= sizeof(src))
			return -ENAMETOOLONG;
		snprintf(to, sizeof(to), "%s/%s", dst, rel);
		char *slash = strrchr(to, '/');
		*slash = '\0';
		int r = util_mkdir_p(to, 0755);
		*slash = '/';
		if (r < 0) {
			set_err(err, errlen, "create %s: %s", to, strerror(-r));
			return r;
		}
		r = kmod_extract(src, to, err, errlen);
		if (r < 0)
			return r;
		/* The copy's modules.dep makes each module depend on all the ones before it: the list is already
		 * a load order, and resolving any required module then brings in everything, in that order. */
		size_t need = deplen + strlen(rel) + 3;
		for (size_t j = 0; j < i; j++)
			need += strlen(l->mods[j].path) + 1;
		char *nd = realloc(dep, need);
		if (!nd)
			return -ENOMEM;
		dep = nd;
		deplen += (size_t)sprintf(dep + deplen, "%s:", rel);
		for (size_t j = i; j-- > 0;) {
			char prev[PATH_MAX];
			strip_compression(l->mods[j].path, prev, sizeof(prev));
			deplen += (size_t)sprintf(dep + deplen, " %s", prev);
		}
		dep[deplen++] = '\n';
		dep[deplen] = '\0';
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/modules.dep", dst);
	int r = util_write_file_atomic(path, dep ? dep : "", deplen, 0644);
	if (r < 0) {
		set_err(err, errlen, "write %s: %s", path, strerror(-r));
		return r;
	}
	/* The built-in list says which required modules are not missing but compiled in. */
	_cleanup_free_ char *builtin = NULL;
	size_t blen = 0;
	char src[PATH_MAX];
	snprintf(src, sizeof(src), "%s/modules.builtin", moddir);
	r = util_read_file(src, KMOD_DEP_MAX, &builtin, &blen);
	if (r == -ENOENT)
		return 0;
	snprintf(path, sizeof(path), "%s/modules.builtin", dst);
	if (r == 0)
		r = util_write_file_atomic(path, builtin, blen, 0644);
	if (r < 0)
		set_err(err, errlen, "copy %s: %s", src, strerror(-r));
	return r;
}

/* ---- the archive --------------------------------------------------------------------------------- */

static int add_modules(struct cpio_writer *w, const char *moddir, const struct kmod_list *mods,
		       const char *scratch, char *err, size_t errlen)
{
	size_t cap = 1;
	_cleanup_free_ char *order = calloc(1, cap);
	if (!order)
		return -ENOMEM;
	size_t olen = 0;
	for (size_t i = 0; mods && i < mods->n; i++) {
		char src[PATH_MAX], tmp[PATH_MAX], name[PATH_MAX];
		if ((size_t)snprintf(src, sizeof(src), "%s/%s", moddir, mods->mods[i].path) >= sizeof(src) ||
		    (size_t)snprintf(tmp, sizeof(tmp), "%s/%s.ko", scratch, mods->mods[i].name) >= sizeof(tmp))
			return -ENAMETOOLONG;
		snprintf(name, sizeof(name), "%s/%s.ko", &INITRAMFS_MODULE_DIR[1], mods->mods[i].name);
		const char *from = src;
		if (has_suffix(src, ".xz") || has_suffix(src, ".zst")) {
			int r = kmod_extract(src, tmp, err, errlen);
			if (r < 0)
				return r;
			from = tmp;
		}
		int r = cpio_add_file(w, name, 0644, from);
		if (from == tmp)
			unlink(tmp);
		if (r < 0) {
			set_err(err, errlen, "add %s: %s", src, strerror(-r));
			return r;
		}
		size_t need = olen + strlen(name) + 3;
		if (need > cap) {
			cap = need * 2;
			char *no = realloc(order, cap);
			if (!no)
				return -ENOMEM;
			order = no;
		}
		olen += (size_t)sprintf(order + olen, "/%s\n", name);
	}
	return cpio_add(w, &INITRAMFS_ORDER_FILE[1], S_IFREG | 0644, 0, order, olen);
}

static int write_archive(int fd, const char *agent_path, const char *moddir, const struct kmod_list *mods,
			 const char *scratch, char *err, size_t errlen)
{
	static const char *const dirs[] = { "dev", "proc", "sys", "newroot", "lib", "lib/modules" };
	struct cpio_writer w;
	cpio_init(&w, fd);
	int r = 0;
	for (size_t i = 0; i < ARRAY_SIZE(dirs) && r == 0; i++)
		r = cpio_add(&w, dirs[i], S_IFDIR | 0755, 0, NULL, 0);
	if (r == 0)
		r = cpio_add(&w, "dev/console", S_IFCHR | 0600, makedev(5, 1), NULL, 0);
	if (r == 0) {
		r = cpio_add_file(&w, "init", 0755, agent_path);
		if (r < 0)
			set_err(err, errlen, "add the agent %s: %s", agent_path, strerror(-r));
	}
	if (r == 0)
		r = add_modules(&w, moddir, mods, scratch, err, errlen);
	if (r == 0)
		r = cpio_finish(&w);
	if (r < 0 && err && !*err)
		set_err(err, errlen, "write the archive: %s", strerror(-r));
	return r;
}

int initramfs_write(const char *out, const char *agent_path, const char *moddir, const struct kmod_list *mods,
		    const char *scratch, char *err, size_t errlen)
{
	if (err && errlen)
		*err = '\0';
	char tmp[PATH_MAX];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", out) >= sizeof(tmp))
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		set_err(err, errlen, "create %s: %s", tmp, strerror(errno));
		return -errno;
	}
	int r = write_archive(fd, agent_path, moddir, mods, scratch, err, errlen);
	if (r == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0 || rename(tmp, out) < 0)) {
		r = -errno;
		set_err(err, errlen, "finish %s: %s", out, strerror(errno));
	}
	if (r < 0)
		unlink(tmp);
	return r;
}
