/* SPDX-License-Identifier: Apache-2.0 */
/* Container images on the host: directories, archives, their documents (core/image_source.h). */
#include "core/image_source.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "image/tar.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define MEMBERS_MAX 65536u /* of an image archive: a few per layer in practice */
#define LINK_DEPTH 8       /* symlinks followed inside an archive (docker save links legacy names to blobs) */
#define NEST_MAX 4         /* indexes within indexes */

struct member {
	char *name;           /* normalized */
	enum tar_type type;
	uint64_t offset, size;
	char *link;           /* symlink target, normalized against the member's directory; NULL otherwise */
};

/* Where an image's files are: a directory (dirfd) or an archive (fd and its members, sorted by name). */
struct source {
	int dirfd;
	int fd;
	struct member *members;
	size_t n;
	bool archive;
};

void image_sha256(const void *buf, size_t len, char *out)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	size_t at = (size_t)snprintf(out, OCI_DIGEST_LEN + 1, "sha256:");
	if (EVP_Digest(buf, len, d, &n, EVP_sha256(), NULL) != 1)
		n = 0; /* "sha256:" alone matches no digest */
	for (unsigned i = 0; i < n && at + 2 < OCI_DIGEST_LEN + 1; i++)
		at += (size_t)snprintf(out + at, OCI_DIGEST_LEN + 1 - at, "%02x", d[i]);
}

static void source_close(struct source *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->members[i].name);
		free(s->members[i].link);
	}
	free(s->members);
	if (s->dirfd >= 0)
		close(s->dirfd);
	if (s->fd >= 0)
		close(s->fd);
	memset(s, 0, sizeof(*s));
	s->dirfd = s->fd = -1;
}

/* ---- archives ---- */

struct scan {
	int fd;
	uint64_t pos, size;
};

static int64_t scan_read(void *userdata, void *buf, size_t len)
{
	struct scan *sc = userdata;
	ssize_t k;
	do
		k = pread(sc->fd, buf, len, (off_t)sc->pos);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	sc->pos += (uint64_t)k;
	return k;
}

static int scan_skip(void *userdata, uint64_t n)
{
	struct scan *sc = userdata;
	if (n > sc->size - sc->pos)
		return -EPIPE;
	sc->pos += n;
	return 0;
}

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct member *)a)->name, ((const struct member *)b)->name);
}

/* A symlink's target as a member name: relative to the link's directory, "..": only inside the archive. */
static char *link_target(const char *name, const char *target)
{
	char joined[2 * TAR_PATH_MAX + 2], out[TAR_PATH_MAX + 1];
	const char *slash = strrchr(name, '/');
	if (target[0] == '/')
		snprintf(joined, sizeof(joined), "%s", target);
	else
		snprintf(joined, sizeof(joined), "%.*s%s%s", slash ? (int)(slash - name) : 0, name, slash ? "/" : "",
			 target);
	/* ".." resolved inside the archive (tar_path_normalize refuses it, an archive's own links may use it). */
	if (tar_path_resolve(joined, out, sizeof(out), false) < 0 || !out[0])
		return NULL;
	return strdup(out);
}

static int archive_scan(space_ctx *ctx, const char *path, struct source *s)
{
	struct stat st;
	if (fstat(s->fd, &st) < 0)
		return ctx_error(ctx, -errno, "%s", path);
	struct scan sc = { .fd = s->fd, .size = (uint64_t)st.st_size };
	struct tar_reader *t;
	if (tar_reader_new(scan_read, scan_skip, &sc, &t) < 0)
		return -ENOMEM;
	int r;
	size_t cap = 0;
	const struct tar_entry *e;
	while ((r = tar_next(t, &e)) > 0) {
		char norm[TAR_PATH_MAX + 1];
		if (tar_path_normalize(e->path, norm, sizeof(norm)) < 0 || !norm[0])
			continue; /* not a name a document refers to */
		if (e->type != TAR_REG && e->type != TAR_SYMLINK && e->type != TAR_HARDLINK)
			continue;
		if (s->n == MEMBERS_MAX) {
			r = ctx_error_msg(ctx, -E2BIG, "image archive %s holds more than %u files: not an image", path,
					  MEMBERS_MAX);
			break;
		}
		if (s->n == cap) {
			cap = cap ? 2 * cap : 64;
			struct member *m = realloc(s->members, cap * sizeof(*m));
			if (!m) {
				r = -ENOMEM;
				break;
			}
			s->members = m;
		}
		struct member *m = &s->members[s->n];
		memset(m, 0, sizeof(*m));
		m->type = e->type;
		m->offset = e->data_offset;
		m->size = e->size;
		if (!(m->name = strdup(norm))) {
			r = -ENOMEM;
			break;
		}
		if (e->type != TAR_REG) {
			/* A hard link names a member from the archive's root, a symlink from its own directory. */
			char tn[TAR_PATH_MAX + 1];
			m->link = e->type == TAR_HARDLINK ? (tar_path_normalize(e->link, tn, sizeof(tn)) == 0 && tn[0] ? strdup(tn) : NULL)
							  : link_target(norm, e->link);
			if (!m->link) {
				free(m->name);
				continue; /* a link to nothing a document could name */
			}
		}
		s->n++;
	}
	if (r < 0 && r != -ENOMEM && r != -E2BIG) {
		_cleanup_free_ char *why = util_escape_dup(tar_error(t), 0);
		r = ctx_error_msg(ctx, r, "image archive %s: %s", path, why ? why : "malformed");
	}
	tar_reader_free(t);
	if (r < 0)
		return r;
	qsort(s->members, s->n, sizeof(*s->members), member_cmp);
	/* Two members of one name: which one a document means is anybody's guess. */
	for (size_t i = 1; i < s->n; i++)
		if (!strcmp(s->members[i - 1].name, s->members[i].name)) {
			_cleanup_free_ char *nm = util_escape_dup(s->members[i].name, 0);
			return ctx_error_msg(ctx, -EBADMSG, "image archive %s holds %s twice", path, nm ? nm : "a file");
		}
	return 0;
}

static const struct member *member_find(const struct source *s, const char *name)
{
	for (int depth = 0; depth <= LINK_DEPTH; depth++) {
		struct member key = { .name = (char *)name };
		const struct member *m = bsearch(&key, s->members, s->n, sizeof(*s->members), member_cmp);
		if (!m || m->type == TAR_REG)
			return m;
		name = m->link;
	}
	return NULL;
}

/* ---- both ---- */

static int source_open(space_ctx *ctx, const char *path, struct source *s)
{
	memset(s, 0, sizeof(*s));
	s->dirfd = s->fd = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ctx_error(ctx, -errno, "image %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return ctx_error(ctx, -errno, "image %s", path);
	}
	if (S_ISDIR(st.st_mode)) {
		s->dirfd = fd;
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return ctx_error_msg(ctx, -EINVAL, "image %s is neither a directory nor a file", path);
	}
	s->fd = fd;
	s->archive = true;
	uint8_t head[512];
	ssize_t n = pread(fd, head, sizeof(head), 0);
	if (n >= 2 && ((head[0] == 0x1f && head[1] == 0x8b) || (n >= 4 && !memcmp(head, "\x28\xb5\x2f\xfd", 4)) ||
		       (n >= 3 && !memcmp(head, "BZh", 3)) || (n >= 6 && !memcmp(head, "\xfd" "7zXZ", 5)))) {
		source_close(s);
		return ctx_error_msg(ctx, -EINVAL,
				     "image %s is a compressed file: decompress it first (an image archive is a plain tar, "
				     "as `docker save` and `skopeo copy ... oci-archive:` write it)",
				     path);
	}
	if (n < 263 || memcmp(head + 257, "ustar", 5)) {
		source_close(s);
		return ctx_error_msg(ctx, -EINVAL, "image %s is neither a directory nor a tar archive", path);
	}
	int r = archive_scan(ctx, path, s);
	if (r < 0)
		source_close(s);
	return r;
}

/* An open descriptor of the file name (relative) with its offset and length in it. *ret_fd: a new one the
 * caller closes (directory), or the archive's own (do not close). */
static int source_file(space_ctx *ctx, const struct source *s, const char *name, int *ret_fd, bool *ret_own,
		       uint64_t *ret_off, uint64_t *ret_len)
{
	if (s->archive) {
		const struct member *m = member_find(s, name);
		if (!m)
			return -ENOENT;
		*ret_fd = s->fd;
		*ret_own = false;
		*ret_off = m->offset;
		*ret_len = m->size;
		return 0;
	}
	/* Symlinks inside the layout are fine; none may lead out of it, nor through /proc magic. */
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, s->dirfd, name, &how, sizeof(how));
	if (fd < 0)
		return errno == EXDEV ? -EPERM : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	*ret_fd = fd;
	*ret_own = true;
	*ret_off = 0;
	*ret_len = (uint64_t)st.st_size;
	return 0;
}

static bool source_has(const struct source *s, const char *name)
{
	if (s->archive)
		return member_find(s, name) != NULL;
	struct stat st;
	return fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A document, whole (at most OCI_DOC_MAX bytes), NUL-terminated. */
static int source_read(space_ctx *ctx, const struct source *s, const char *name, char **ret, size_t *ret_len)
{
	int fd;
	bool own;
	uint64_t off, len;
	int r = source_file(ctx, s, name, &fd, &own, &off, &len);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "the image has no %s", name);
	if (r == -EPERM)
		return ctx_error_msg(ctx, r, "%s leads out of the image layout", name);
	if (r < 0)
		return ctx_error(ctx, r, "%s of the image", name);
	if (len > OCI_DOC_MAX) {
		if (own)
			close(fd);
		return ctx_error_msg(ctx, -EFBIG, "%s of the image is %llu bytes, more than a document may be (%u)", name,
				     (unsigned long long)len, OCI_DOC_MAX);
	}
	char *buf = malloc((size_t)len + 1);
	ssize_t k = buf ? pread(fd, buf, (size_t)len, (off_t)off) : -1;
	int e = errno;
	if (own)
		close(fd);
	if (!buf)
		return -ENOMEM;
	if (k != (ssize_t)len) {
		free(buf);
		return ctx_error(ctx, k < 0 ? -e : -EIO, "read %s of the image", name);
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = (size_t)len;
	return 0;
}

/* A content-addressed blob: read, checked against its digest and size. */
static int read_blob(space_ctx *ctx, const struct source *s, const struct oci_desc *d, const char *what, char **ret,
		     size_t *ret_len)
{
	char name[100], got[OCI_DIGEST_LEN + 1];
	snprintf(name, sizeof(name), "blobs/sha256/%s", d->digest + 7);
	int r = source_read(ctx, s, name, ret, ret_len);
	if (r < 0)
		return r;
	image_sha256(*ret, *ret_len, got);
	if (strcmp(got, d->digest) || *ret_len != d->size) {
		free(*ret);
		return ctx_error_msg(ctx, -EBADMSG, "the image's %s %s does not match its descriptor (%s, %zu bytes)", what,
				     d->digest, got, *ret_len);
	}
	return 0;
}

int image_source_detect(space_ctx *ctx, const char *path, const char **ret_why)
{
	struct source s;
	static const char *const marks[] = { "oci-layout", "index.json", "manifest.json" };
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISREG(st.st_mode)) {
		/* Only a plain tar can be looked into cheaply; a compressed one is checked when it is applied. */
		uint8_t head[512];
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) || memcmp(head + 257, "ustar", 5))
			return 0;
	} else if (!S_ISDIR(st.st_mode)) {
		return 0;
	}
	int r = source_open(ctx, path, &s);
	if (r < 0)
		return 0; /* not an image we can read: the rootfs path decides */
	r = 0;
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]) && !r; i++)
		if (source_has(&s, marks[i])) {
			if (ret_why)
				*ret_why = marks[i];
			r = 1;
		}
	/* A root file system has /etc; an image's top has none. */
	if (r && source_has(&s, "etc"))
		r = 0;
	source_close(&s);
	return r;
}

void image_plan_clear(struct image_plan *p)
{
	for (size_t i = 0; i < p->n_fds; i++)
		if (p->fds[i] >= 0)
			close(p->fds[i]);
	oci_config_clear(&p->config);
	free(p->defaults);
	memset(p, 0, sizeof(*p));
}

static int plan_fd(struct image_plan *p, int fd)
{
	for (size_t i = 0; i < p->n_fds; i++)
		if (p->fds[i] == fd)
			return 0;
	if (p->n_fds == OCI_LAYERS_MAX)
		return -E2BIG;
	p->fds[p->n_fds++] = fd;
	return 0;
}

/* The manifest an OCI layout's index.json leads to, for linux/amd64. */
static int oci_manifest_of(space_ctx *ctx, const struct source *s, struct oci_manifest *ret)
{
	_cleanup_free_ char *doc = NULL;
	size_t len;
	char err[600] = "";
	int r = source_read(ctx, s, "index.json", &doc, &len);
	if (r < 0)
		return r;
	struct oci_desc d;
	bool is_index;
	const char *what = "index.json";
	for (int depth = 0;; depth++) {
		if ((r = oci_index_pick(doc, len, &d, &is_index, err, sizeof(err))) < 0)
			return ctx_error_msg(ctx, r, "the image's %s: %s", what, err);
		free(TAKE_PTR(doc));
		if (!is_index)
			break;
		if (depth == NEST_MAX)
			return ctx_error_msg(ctx, -ELOOP, "the image's indexes nest deeper than %d", NEST_MAX);
		if ((r = read_blob(ctx, s, &d, "index", &doc, &len)) < 0)
			return r;
		what = "nested index";
	}
	if ((r = read_blob(ctx, s, &d, "manifest", &doc, &len)) < 0)
		return r;
	if ((r = oci_manifest_parse(doc, len, ret, err, sizeof(err))) < 0)
		return ctx_error_msg(ctx, r, "the image's manifest %s: %s", d.digest, err);
	if (!ret->ref[0])
		snprintf(ret->ref, sizeof(ret->ref), "%s", d.ref);
	return 0;
}

/* The hex of "blobs/sha256/<hex>" or "<hex>.json" (the legacy config's name), as a digest; "" if neither. */
static void digest_of_name(const char *name, const char *suffix, char *out)
{
	out[0] = '\0';
	const char *hex = !strncmp(name, "blobs/sha256/", 13) ? name + 13 : name;
	size_t n = strlen(hex), sl = strlen(suffix);
	if (hex == name && (n != 64 + sl || strcmp(hex + 64, suffix)))
		return;
	if (hex != name && n != 64)
		return;
	char d[OCI_DIGEST_LEN + 1];
	snprintf(d, sizeof(d), "sha256:%.64s", hex);
	if (oci_digest_valid(d))
		snprintf(out, OCI_DIGEST_LEN + 1, "%s", d);
}

int image_plan_load(space_ctx *ctx, const char *path, struct image_plan *ret)
{
	memset(ret, 0, sizeof(*ret));
	struct source s;
	int r = source_open(ctx, path, &s);
	if (r < 0)
		return r;
	struct oci_manifest m = { 0 };
	_cleanup_free_ char *cfg = NULL, *dj = NULL;
	size_t cfg_len = 0;
	char err[600] = "";
	bool oci = source_has(&s, "index.json");
	if (oci) {
		snprintf(ret->format, sizeof(ret->format), "%s", s.archive ? "oci-archive" : "oci-layout");
		if ((r = oci_manifest_of(ctx, &s, &m)) < 0)
			goto out;
		if ((r = read_blob(ctx, &s, &m.config, "config", &cfg, &cfg_len)) < 0)
			goto out;
		snprintf(ret->digest, sizeof(ret->digest), "%s", m.config.digest);
	} else if (source_has(&s, "manifest.json")) {
		snprintf(ret->format, sizeof(ret->format), "docker-archive");
		_cleanup_free_ char *doc = NULL;
		size_t len;
		if ((r = source_read(ctx, &s, "manifest.json", &doc, &len)) < 0)
			goto out;
		if ((r = oci_docker_manifest_parse(doc, len, &m, err, sizeof(err))) < 0) {
			r = ctx_error_msg(ctx, r, "the image's manifest.json: %s", err);
			goto out;
		}
		if ((r = source_read(ctx, &s, m.config_path, &cfg, &cfg_len)) < 0)
			goto out;
		image_sha256(cfg, cfg_len, ret->digest);
		char named[OCI_DIGEST_LEN + 1];
		digest_of_name(m.config_path, ".json", named);
		if (named[0] && strcmp(named, ret->digest)) {
			r = ctx_error_msg(ctx, -EBADMSG, "the image's config %s is %s, not what its name says", m.config_path,
					  ret->digest);
			goto out;
		}
	} else {
		r = ctx_error_msg(ctx, -EINVAL,
				  "%s is not a container image: no index.json (an OCI image layout) nor manifest.json (a "
				  "`docker save` archive)",
				  path);
		goto out;
	}
	snprintf(ret->ref, sizeof(ret->ref), "%s", m.ref);
	if ((r = oci_config_parse(cfg, cfg_len, &ret->config, err, sizeof(err))) < 0) {
		r = ctx_error_msg(ctx, r, "the image's config %s: %s", ret->digest, err);
		goto out;
	}
	if (ret->config.n_diff_ids != m.n_layers) {
		r = ctx_error_msg(ctx, -EBADMSG, "the image's config lists %zu layers, its manifest %zu",
				  ret->config.n_diff_ids, m.n_layers);
		goto out;
	}
	for (size_t i = 0; i < m.n_layers; i++) {
		const struct oci_layer *ol = &m.layers[i];
		struct image_layer *l = &ret->layers[i];
		char name[OCI_PATH_MAX + 1];
		if (oci)
			snprintf(name, sizeof(name), "blobs/sha256/%s", ol->desc.digest + 7);
		else
			snprintf(name, sizeof(name), "%s", ol->path);
		int fd;
		bool own;
		if ((r = source_file(ctx, &s, name, &fd, &own, &l->offset, &l->length)) < 0) {
			r = r == -ENOENT ? ctx_error_msg(ctx, r, "the image has no layer %s (layer %zu)", name, i + 1)
					 : ctx_error(ctx, r, "layer %zu (%s) of the image", i + 1, name);
			goto out;
		}
		if (own && (r = plan_fd(ret, fd)) < 0) {
			close(fd);
			goto out;
		}
		l->fd = fd;
		if (oci && l->length != ol->desc.size) {
			r = ctx_error_msg(ctx, -EBADMSG, "layer %zu of the image is %llu bytes, its descriptor says %llu", i + 1,
					  (unsigned long long)l->length, (unsigned long long)ol->desc.size);
			goto out;
		}
		if (oci)
			snprintf(l->digest, sizeof(l->digest), "%s", ol->desc.digest);
		else
			digest_of_name(name, "", l->digest);
		snprintf(l->diff_id, sizeof(l->diff_id), "%s", ret->config.diff_ids[i]);
		l->comp = !oci ? "auto" : ol->comp == OCI_COMP_GZIP ? "gzip" : ol->comp == OCI_COMP_ZSTD ? "zstd" : "none";
		ret->layer_bytes += l->length;
		ret->n_layers++;
	}
	if (s.archive) {
		if ((r = plan_fd(ret, s.fd)) < 0)
			goto out;
		s.fd = -1; /* the plan's now */
	}
	/* What a template keeps: the process defaults, and where the image came from. */
	dj = oci_config_defaults_json(&ret->config);
	cJSON *j = dj ? cJSON_Parse(dj) : NULL;
	if (j) {
		cJSON_AddStringToObject(j, "format", ret->format);
		if (ret->ref[0])
			cJSON_AddStringToObject(j, "ref", ret->ref);
		ret->defaults = cJSON_PrintUnformatted(j);
		cJSON_Delete(j);
	}
	r = ret->defaults ? 0 : -ENOMEM;
out:
	oci_manifest_clear(&m);
	source_close(&s);
	if (r < 0)
		image_plan_clear(ret);
	return r;
}
