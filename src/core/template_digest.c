/* SPDX-License-Identifier: Apache-2.0 */
/* The digest of a template's files (core/template_stream.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/template_stream.h"
#include "util/cleanup.h"
#include "util/util.h"

#define DIGEST_DEPTH_MAX 256
#define DIGEST_BLOCK (64u << 10)

struct walk {
	EVP_MD_CTX *md;
	uint8_t *block;
	struct template_digest *d;
	char err[512];
};

static void feed(struct walk *w, const void *p, size_t n)
{
	EVP_DigestUpdate(w->md, p, n);
}

static void feed_str(struct walk *w, const char *s)
{
	feed(w, s, strlen(s) + 1); /* with its NUL: no name holds one, so records cannot run together */
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A file's content: its size, then each 64 KiB block that is not all zeros, with its offset. Holes and
 * written zeros read alike, so the digest does not depend on how each side laid the file out. */
static int feed_file(struct walk *w, int fd, uint64_t size)
{
	char hdr[32];
	snprintf(hdr, sizeof(hdr), "%llu", (unsigned long long)size);
	feed_str(w, hdr);
	uint64_t off = 0;
	while (off < size) {
		off_t data = lseek(fd, (off_t)off, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break; /* a hole to the end */
			return -errno;
		}
		off_t hole = lseek(fd, data, SEEK_HOLE);
		off = (uint64_t)data / DIGEST_BLOCK * DIGEST_BLOCK;
		uint64_t end = hole < 0 ? size : (uint64_t)hole;
		while (off < end && off < size) {
			size_t want = size - off < DIGEST_BLOCK ? (size_t)(size - off) : DIGEST_BLOCK;
			ssize_t n = pread(fd, w->block, want, (off_t)off);
			if (n < 0)
				return -errno;
			if (n == 0)
				return -EIO; /* shorter than its size: it changed under us */
			if (!all_zero(w->block, (size_t)n)) {
				uint8_t where[8];
				for (int i = 0; i < 8; i++)
					where[i] = (uint8_t)(off >> (8 * i));
				feed(w, where, sizeof(where));
				feed(w, w->block, (size_t)n);
			}
			off += (uint64_t)n;
		}
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int walk_dir(struct walk *w, int dfd, const char *rel, int depth)
{
	if (depth > DIGEST_DEPTH_MAX) {
		snprintf(w->err, sizeof(w->err), "%s: deeper than %d directories", rel, DIGEST_DEPTH_MAX);
		return -ELOOP;
	}
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	if (dup_fd < 0)
		return -errno;
	DIR *d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return -errno;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int r = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				r = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name))) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (r < 0) {
		free_names(names, n);
		return r;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n && r == 0; i++) {
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", names[i]) >= sizeof(path)) {
			snprintf(w->err, sizeof(w->err), "a path longer than %d bytes under %s", PATH_MAX, rel);
			r = -ENAMETOOLONG;
			break;
		}
		struct stat st;
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			snprintf(w->err, sizeof(w->err), "stat %s: %s", path, strerror(errno));
			break;
		}
		w->d->entries++;
		char meta[96];
		char type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' :
			    S_ISFIFO(st.st_mode) ? 'p' : 'x';
		snprintf(meta, sizeof(meta), "%c %o %u %u", type, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
			 (unsigned)st.st_gid);
		feed_str(w, path);
		feed_str(w, meta);
		if (type == 'f') {
			int fd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			struct stat fst;
			if (fd < 0 || fstat(fd, &fst) < 0 || fst.st_ino != st.st_ino || !S_ISREG(fst.st_mode)) {
				r = fd < 0 ? -errno : -ESTALE;
				snprintf(w->err, sizeof(w->err), "open %s: %s", path, strerror(-r));
			} else if ((r = feed_file(w, fd, (uint64_t)fst.st_size)) < 0) {
				snprintf(w->err, sizeof(w->err), "read %s: %s", path, strerror(-r));
			}
			if (fd >= 0)
				close(fd);
			w->d->files++;
			w->d->bytes += (uint64_t)st.st_size;
		} else if (type == 'd') {
			int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				r = -errno;
				snprintf(w->err, sizeof(w->err), "open %s: %s", path, strerror(errno));
			} else {
				r = walk_dir(w, sub, path, depth + 1);
				close(sub);
			}
		} else if (type == 'l') {
			char target[PATH_MAX];
			ssize_t k = readlinkat(dfd, names[i], target, sizeof(target) - 1);
			if (k < 0) {
				r = -errno;
				snprintf(w->err, sizeof(w->err), "readlink %s: %s", path, strerror(errno));
			} else {
				target[k] = '\0';
				feed_str(w, target);
			}
		} else if (type == 'x') {
			/* Device nodes and sockets: a template holds none (receive refuses them). */
			snprintf(w->err, sizeof(w->err), "%s is a device node or socket", path);
			r = -EINVAL;
		}
	}
	free_names(names, n);
	return r;
}

int template_digest_tree(const char *dir, struct template_digest *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "open %s: %s", dir, strerror(errno));
		return -errno;
	}
	struct walk w = { .d = ret };
	w.md = EVP_MD_CTX_new();
	w.block = malloc(DIGEST_BLOCK);
	int r = -ENOMEM;
	if (w.md && w.block && EVP_DigestInit_ex(w.md, EVP_sha256(), NULL) == 1) {
		feed_str(&w, "space-template-digest-v1");
		r = walk_dir(&w, fd, "", 0);
	}
	if (r == 0) {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned n = 0;
		EVP_DigestFinal_ex(w.md, d, &n);
		size_t at = (size_t)snprintf(ret->digest, sizeof(ret->digest), "sha256:");
		for (unsigned i = 0; i < n && at + 2 < sizeof(ret->digest); i++)
			at += (size_t)snprintf(ret->digest + at, sizeof(ret->digest) - at, "%02x", d[i]);
	} else {
		snprintf(err, errlen, "%s", w.err[0] ? w.err : strerror(-r));
	}
	EVP_MD_CTX_free(w.md);
	free(w.block);
	return r;
}
