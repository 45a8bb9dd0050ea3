/* SPDX-License-Identifier: Apache-2.0 */
/*
 * COPY and ADD sources (core/build.h): files of the build context, found through descriptors so that no
 * source leads outside the context, even through a symlink (openat2 RESOLVE_IN_ROOT: a link is followed as
 * if the context were the root; a name with ".." climbing above the context is refused), honouring
 * .dockerignore, and written as a tar stream for space-unpack to apply onto the image. Symlinks inside a
 * copied directory stay symlinks; sockets, devices and FIFOs of the context are left out.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/build.h"
#include "image/tar.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define IGNORE_MAX 4096
#define COPY_DEPTH 256
#define COPY_ENTRIES_MAX (1u << 20)

struct build_ignore {
	char **pat;   /* normalized, without the "!" */
	bool *neg;
	size_t n;
};

void build_ignore_free(struct build_ignore *ig)
{
	if (!ig)
		return;
	for (size_t i = 0; i < ig->n; i++)
		free(ig->pat[i]);
	free(ig->pat);
	free(ig->neg);
	free(ig);
}

static int open_in(int dirfd, const char *name, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

int build_open_source(int ctxfd, const char *src)
{
	return open_in(ctxfd, src, O_RDONLY | O_NOCTTY | O_NONBLOCK);
}

int build_ignore_load(space_ctx *ctx, int ctxfd, struct build_ignore **ret)
{
	struct build_ignore *ig = calloc(1, sizeof(*ig));
	if (!ig)
		return -ENOMEM;
	*ret = ig;
	int fd = open_in(ctxfd, ".dockerignore", O_RDONLY);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return ctx_error(ctx, fd, "read .dockerignore");
	char *text = malloc(1 << 20);
	ssize_t n = text ? read(fd, text, (1 << 20) - 1) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		return ctx_error(ctx, -EIO, "read .dockerignore");
	}
	text[n] = '\0';
	for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		line += strspn(line, " \t");
		size_t l = strcspn(line, "\r");
		while (l && (line[l - 1] == ' ' || line[l - 1] == '\t'))
			l--;
		line[l] = '\0';
		if (!*line || *line == '#')
			continue;
		bool neg = *line == '!';
		char norm[TAR_PATH_MAX + 1];
		if (tar_path_normalize(line + neg, norm, sizeof(norm)) < 0 || !norm[0] || ig->n == IGNORE_MAX)
			continue;
		char **p = realloc(ig->pat, (ig->n + 1) * sizeof(char *));
		bool *g = p ? realloc(ig->neg, (ig->n + 1) * sizeof(bool)) : NULL;
		if (p)
			ig->pat = p;
		if (!g || !(ig->pat[ig->n] = strdup(norm))) {
			free(text);
			return -ENOMEM;
		}
		ig->neg = g;
		ig->neg[ig->n++] = neg;
	}
	free(text);
	return 0;
}

/* Docker's matching: pattern against path or any of its leading directories; "**" any number of them. */
static bool match(const char *pat, const char *path)
{
	if (!strncmp(pat, "**/", 3)) {
		for (const char *p = path; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL)
			if (match(pat + 3, p))
				return true;
		return false;
	}
	if (!strcmp(pat, "**"))
		return true;
	if (fnmatch(pat, path, FNM_PATHNAME) == 0)
		return true;
	/* a pattern naming a directory covers what is in it */
	char prefix[TAR_PATH_MAX + 1];
	snprintf(prefix, sizeof(prefix), "%s", path);
	for (char *s = strrchr(prefix, '/'); s; s = strrchr(prefix, '/')) {
		*s = '\0';
		if (fnmatch(pat, prefix, FNM_PATHNAME) == 0)
			return true;
	}
	return false;
}

bool build_ignored(const struct build_ignore *ig, const char *path)
{
	bool out = false;
	for (size_t i = 0; ig && i < ig->n; i++)
		if (match(ig->pat[i], path))
			out = !ig->neg[i];
	return out;
}

/* ---- the tar stream ---- */

struct writer {
	space_ctx *ctx;
	int fd;
	EVP_MD_CTX *key;
	const struct build_copy *c;
	uint64_t entries;
	uint8_t buf[1 << 16];
};

static int w_put(struct writer *w, const void *p, size_t n)
{
	int r = util_write_all(w->fd, p, n);
	return r < 0 ? ctx_error(w->ctx, r, "write the copy's archive") : 0;
}

static int w_pad(struct writer *w, uint64_t n)
{
	static const uint8_t zero[TAR_BLOCK];
	size_t p = (size_t)((TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK);
	return p ? w_put(w, zero, p) : 0;
}

/* One entry: a pax header for what ustar cannot hold, the header; key gets all but the times. */
static int w_entry(struct writer *w, const char *name, char type, const struct stat *st, const char *link,
		   uint64_t size)
{
	if (++w->entries > COPY_ENTRIES_MAX)
		return ctx_error_msg(w->ctx, -E2BIG, "a COPY of more than %u files", COPY_ENTRIES_MAX);
	uint32_t uid = w->c->chown ? w->c->uid : 0, gid = w->c->chown ? w->c->gid : 0;
	uint32_t mode = (uint32_t)st->st_mode & 07777;
	char desc[TAR_PATH_MAX * 2 + 100];
	int dl = snprintf(desc, sizeof(desc), "%c %o %u %u %llu %s -> %s\n", type, mode, uid, gid,
			  (unsigned long long)size, name, link ? link : "");
	EVP_DigestUpdate(w->key, desc, (size_t)(dl < (int)sizeof(desc) ? dl : (int)sizeof(desc) - 1));
	_cleanup_free_ char *pax = NULL;
	size_t plen = 0;
	char n99[100], l99[100];
	int r = 0;
	if (strlen(name) > 99)
		r = tar_pax_record(&pax, &plen, 1 << 20, "path", name, strlen(name));
	if (!r && link && strlen(link) > 99)
		r = tar_pax_record(&pax, &plen, 1 << 20, "linkpath", link, strlen(link));
	if (r < 0)
		return ctx_error(w->ctx, r, "a name in the copy");
	uint8_t h[TAR_BLOCK];
	if (pax) {
		tar_header(h, "PaxHeaders/x", NULL, 'x', 0644, 0, 0, plen, 0, 0, 0);
		if ((r = w_put(w, h, sizeof(h))) < 0 || (r = w_put(w, pax, plen)) < 0 || (r = w_pad(w, plen)) < 0)
			return r;
	}
	snprintf(n99, sizeof(n99), "%.99s", name);
	if (link)
		snprintf(l99, sizeof(l99), "%.99s", link);
	tar_header(h, n99, link ? l99 : NULL, type, mode, uid, gid, size, st->st_mtime, 0, 0);
	return w_put(w, h, sizeof(h));
}

static int w_file(struct writer *w, int fd, const char *name, const struct stat *st)
{
	int r = w_entry(w, name, '0', st, NULL, (uint64_t)st->st_size);
	uint64_t done = 0;
	while (r == 0 && done < (uint64_t)st->st_size) {
		ssize_t k = read(fd, w->buf, sizeof(w->buf));
		if (k <= 0)
			return ctx_error(w->ctx, k < 0 ? -errno : -EIO, "read %s of the context (it changed while copied?)",
					 name);
		if ((uint64_t)k > (uint64_t)st->st_size - done)
			k = (ssize_t)((uint64_t)st->st_size - done);
		EVP_DigestUpdate(w->key, w->buf, (size_t)k);
		r = w_put(w, w->buf, (size_t)k);
		done += (uint64_t)k;
	}
	return r ? r : w_pad(w, (uint64_t)st->st_size);
}

static int copy_tree(struct writer *w, int dirfd, const char *rel, const char *name, int depth);

/* The entry name of fd (context path rel) in the image is name. */
static int copy_one(struct writer *w, int parent, const char *leaf, const char *rel, const char *name, int depth)
{
	if (build_ignored(w->c->ignore, rel))
		return 0;
	struct stat st;
	if (fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return ctx_error(w->ctx, -errno, "%s of the context", rel);
	if (S_ISLNK(st.st_mode)) {
		char target[TAR_PATH_MAX + 1];
		ssize_t n = readlinkat(parent, leaf, target, sizeof(target) - 1);
		if (n < 0)
			return ctx_error(w->ctx, -errno, "%s of the context", rel);
		target[n] = '\0';
		return w_entry(w, name, '2', &st, target, 0);
	}
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(parent, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return ctx_error(w->ctx, -errno, "%s of the context", rel);
		int r = w_entry(w, name, '5', &st, NULL, 0);
		if (r == 0)
			r = copy_tree(w, fd, rel, name, depth + 1);
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	int fd = openat(parent, leaf, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return ctx_error(w->ctx, -errno, "%s of the context", rel);
	int r = w_file(w, fd, name, &st);
	close(fd);
	return r;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The contents of directory dirfd (context path rel, "" the context) under image name (may be ""). */
static int copy_tree(struct writer *w, int dirfd, const char *rel, const char *name, int depth)
{
	if (depth > COPY_DEPTH)
		return ctx_error_msg(w->ctx, -ELOOP, "%s: directories nested deeper than %d", rel, COPY_DEPTH);
	int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup < 0 ? NULL : fdopendir(dup);
	if (!d) {
		if (dup >= 0)
			close(dup);
		return ctx_error(w->ctx, -errno, "list %s of the context", *rel ? rel : ".");
	}
	char **names = NULL;
	size_t n = 0;
	int r = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char **v = realloc(names, (n + 1) * sizeof(char *));
		if (!v || !(v[n] = strdup(e->d_name))) {
			names = v ? v : names;
			r = -ENOMEM;
			break;
		}
		names = v;
		n++;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(char *), name_cmp); /* the same context, the same stream */
	for (size_t i = 0; r == 0 && i < n; i++) {
		char crel[TAR_PATH_MAX + 1], cname[TAR_PATH_MAX + 1];
		if ((size_t)snprintf(crel, sizeof(crel), "%s%s%s", rel, *rel ? "/" : "", names[i]) >= sizeof(crel) ||
		    (size_t)snprintf(cname, sizeof(cname), "%s%s%s", name, *name ? "/" : "", names[i]) >= sizeof(cname))
			r = ctx_error_msg(w->ctx, -ENAMETOOLONG, "%s: a path too long", rel);
		else
			r = copy_one(w, dirfd, names[i], crel, cname, depth);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/* src, normalized and inside the context; -EPERM when it climbs out. */
static int context_path(space_ctx *ctx, const char *src, char *out, size_t len)
{
	char copy[TAR_PATH_MAX + 1];
	snprintf(copy, sizeof(copy), "%s", src);
	int r = tar_path_resolve(copy, out, len, false);
	if (r == -EPERM) {
		_cleanup_free_ char *safe = util_escape_dup(src, 0);
		return ctx_error_msg(ctx, -EPERM, "COPY %s: outside the build context", safe ? safe : "?");
	}
	if (r < 0)
		return ctx_error_msg(ctx, r, "COPY: a source path too long");
	return 0;
}

/* One source (after its wildcard, if any): a file to dest[/its name], or a directory's contents to dest. */
static int copy_source(struct writer *w, const char *rel)
{
	const struct build_copy *c = w->c;
	int fd = open_in(c->ctxfd, *rel ? rel : ".", O_PATH);
	if (fd < 0) {
		_cleanup_free_ char *safe = util_escape_dup(rel, 0);
		return ctx_error(w->ctx, fd, "COPY %s", safe ? safe : "?");
	}
	struct stat st;
	int r = fstat(fd, &st) < 0 ? -errno : 0;
	if (r == 0 && S_ISDIR(st.st_mode)) {
		int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r = dfd < 0 ? -errno : copy_tree(w, dfd, rel, c->dest, 0);
		if (dfd >= 0)
			close(dfd);
	} else if (r == 0 && S_ISREG(st.st_mode)) {
		const char *base = strrchr(rel, '/');
		base = base ? base + 1 : rel;
		char name[TAR_PATH_MAX + 1];
		if (c->dest_is_dir)
			snprintf(name, sizeof(name), "%s%s%s", c->dest, *c->dest ? "/" : "", base);
		else
			snprintf(name, sizeof(name), "%s", c->dest);
		/* Opened again for reading, inside the context as before (it may have changed: its own fstat). */
		int rfd = open_in(c->ctxfd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
		struct stat rst;
		r = rfd < 0 ? rfd : fstat(rfd, &rst) < 0 ? -errno : !S_ISREG(rst.st_mode) ? -EINVAL : w_file(w, rfd, name, &rst);
		if (rfd >= 0)
			close(rfd);
	} else if (r == 0) {
		r = ctx_error_msg(w->ctx, -EINVAL, "COPY %s: not a file or directory", rel);
	}
	close(fd);
	return r;
}

int build_copy_tar(space_ctx *ctx, const struct build_copy *c, int out_fd, char *key)
{
	struct writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->fd = out_fd;
	w->c = c;
	w->key = EVP_MD_CTX_new();
	int r = w->key && EVP_DigestInit_ex(w->key, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < c->n_srcs; i++) {
		char rel[TAR_PATH_MAX + 1];
		if ((r = context_path(ctx, c->srcs[i], rel, sizeof(rel))) < 0)
			break;
		const char *slash = strrchr(rel, '/');
		const char *leaf = slash ? slash + 1 : rel;
		if (!strpbrk(leaf, "*?[")) {
			if (*rel && build_ignored(c->ignore, rel))
				r = ctx_error_msg(ctx, -ENOENT, "COPY %s: left out by .dockerignore", rel);
			else
				r = copy_source(w, rel);
			continue;
		}
		/* A wildcard in the last component: every match of the directory, in name order. */
		char dir[TAR_PATH_MAX + 1];
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 0, rel);
		int dfd = open_in(c->ctxfd, *dir ? dir : ".", O_RDONLY | O_DIRECTORY);
		DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
		if (!d) {
			if (dfd >= 0)
				close(dfd);
			r = ctx_error(ctx, dfd < 0 ? dfd : -errno, "COPY %s", rel);
			break;
		}
		char **names = NULL;
		size_t n = 0;
		for (struct dirent *e; r == 0 && (e = readdir(d));) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || fnmatch(leaf, e->d_name, 0))
				continue;
			char **v = realloc(names, (n + 1) * sizeof(char *));
			if (!v || !(v[n] = strdup(e->d_name)))
				r = -ENOMEM;
			names = v ? v : names;
			if (!r)
				n++;
		}
		closedir(d);
		if (names)
			qsort(names, n, sizeof(char *), name_cmp);
		size_t matched = 0;
		for (size_t k = 0; r == 0 && k < n; k++) {
			char m[TAR_PATH_MAX + 1];
			snprintf(m, sizeof(m), "%s%s%s", dir, *dir ? "/" : "", names[k]);
			if (build_ignored(c->ignore, m))
				continue;
			matched++;
			r = copy_source(w, m);
		}
		for (size_t k = 0; k < n; k++)
			free(names[k]);
		free(names);
		if (r == 0 && !matched)
			r = ctx_error_msg(ctx, -ENOENT, "COPY %s: no file of the context matches", rel);
	}
	static const uint8_t end[2 * TAR_BLOCK];
	if (r == 0)
		r = w_put(w, end, sizeof(end));
	if (r == 0) {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned dn = 0;
		EVP_DigestFinal_ex(w->key, d, &dn);
		size_t at = (size_t)snprintf(key, BUILD_KEY_LEN, "sha256:");
		for (unsigned i = 0; i < dn; i++)
			at += (size_t)snprintf(key + at, BUILD_KEY_LEN - at, "%02x", d[i]);
	}
	EVP_MD_CTX_free(w->key);
	free(w);
	return r;
}

bool build_is_archive(space_ctx *ctx, int ctxfd, const char *src)
{
	char rel[TAR_PATH_MAX + 1];
	if (context_path(ctx, src, rel, sizeof(rel)) < 0)
		return false;
	int fd = open_in(ctxfd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return false;
	uint8_t h[512];
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, h, sizeof(h), 0) : -1;
	close(fd);
	if (n < 6)
		return false;
	return (h[0] == 0x1f && h[1] == 0x8b) || !memcmp(h, "\x28\xb5\x2f\xfd", 4) || !memcmp(h, "BZh", 3) ||
	       !memcmp(h, "\xfd" "7zXZ", 5) || (n == 512 && !memcmp(h + 257, "ustar", 5));
}
