/* SPDX-License-Identifier: Apache-2.0 */
/* Container image documents (image/oci.h). */
#include "image/oci.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/tar.h"

static int errf(char *err, size_t errlen, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int errf(char *err, size_t errlen, int r, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

bool oci_digest_valid(const char *s)
{
	if (!s || strncmp(s, "sha256:", 7) || strlen(s) != OCI_DIGEST_LEN)
		return false;
	for (const char *p = s + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* NULL with *r set (and a message) for a document too large or not JSON. */
static cJSON *parse(const char *json, size_t len, int *r, char *err, size_t errlen)
{
	if (len > OCI_DOC_MAX) {
		*r = errf(err, errlen, -EFBIG, "a document of %zu bytes (at most %u)", len, OCI_DOC_MAX);
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(json, len);
	if (!j)
		*r = errf(err, errlen, -EINVAL, "not valid JSON");
	return j;
}

static const char *str(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* A short string field into buf; absent is "", too long or not a string is an error. */
static int copy_str(const cJSON *o, const char *key, char *buf, size_t len, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	buf[0] = '\0';
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= len)
		return errf(err, errlen, -EINVAL, "'%s' is not a string of at most %zu bytes", key, len - 1);
	snprintf(buf, len, "%s", v->valuestring);
	return 0;
}

static void ref_of(const cJSON *desc, char *buf, size_t len)
{
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(desc, "annotations");
	const char *r = str(ann, "io.containerd.image.name");
	if (!r)
		r = str(ann, "org.opencontainers.image.ref.name");
	snprintf(buf, len, "%s", r && strlen(r) < len ? r : "");
}

static int desc_parse(const cJSON *d, struct oci_desc *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(d))
		return errf(err, errlen, -EINVAL, "a descriptor that is not an object");
	int r = copy_str(d, "mediaType", ret->media_type, sizeof(ret->media_type), err, errlen);
	if (r < 0)
		return r;
	const char *dg = str(d, "digest");
	if (!dg)
		return errf(err, errlen, -EINVAL, "a descriptor without a digest");
	if (strncmp(dg, "sha256:", 7))
		return errf(err, errlen, -EOPNOTSUPP, "digest '%.80s': only sha256 digests are supported", dg);
	if (!oci_digest_valid(dg))
		return errf(err, errlen, -EINVAL, "digest '%.80s' is not sha256 and 64 hex digits", dg);
	snprintf(ret->digest, sizeof(ret->digest), "%s", dg);
	const cJSON *sz = cJSON_GetObjectItemCaseSensitive(d, "size");
	if (!cJSON_IsNumber(sz) || sz->valuedouble < 0 || sz->valuedouble > 9007199254740992.0)
		return errf(err, errlen, -EINVAL, "descriptor %s has no valid size", ret->digest);
	ret->size = (uint64_t)sz->valuedouble;
	ref_of(d, ret->ref, sizeof(ret->ref));
	return 0;
}

static bool is_index_type(const char *mt)
{
	return !strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
	       !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json");
}

static bool is_manifest_type(const char *mt)
{
	return !strcmp(mt, "application/vnd.oci.image.manifest.v1+json") ||
	       !strcmp(mt, "application/vnd.docker.distribution.manifest.v2+json");
}

int oci_index_pick(const char *json, size_t len, struct oci_desc *ret, bool *ret_is_index, char *err, size_t errlen)
{
	int r = 0;
	cJSON *j = parse(json, len, &r, err, errlen);
	if (!j)
		return r;
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "manifests");
	if (!cJSON_IsArray(ms)) {
		r = errf(err, errlen, -EINVAL, "an index without a manifests array");
		goto out;
	}
	struct oci_desc best = { 0 }, d;
	int matches = 0, unplatformed = 0, images = 0;
	char seen[512] = "";
	size_t seen_n = 0;
	const cJSON *m;
	cJSON_ArrayForEach(m, ms) {
		if ((r = desc_parse(m, &d, err, errlen)) < 0)
			goto out;
		if (d.media_type[0] && !is_index_type(d.media_type) && !is_manifest_type(d.media_type))
			continue; /* artifacts, signatures */
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "platform");
		const char *os = str(p, "os"), *arch = str(p, "architecture");
		if (os && arch && !strcmp(os, "unknown") && !strcmp(arch, "unknown"))
			continue; /* a build attestation, not an image */
		images++;
		if (seen_n < sizeof(seen) - 1)
			seen_n += (size_t)snprintf(seen + seen_n, sizeof(seen) - seen_n, "%s%s/%s%s%s", seen_n ? ", " : "",
						   os ? os : "?", arch ? arch : "?", d.ref[0] ? " " : "", d.ref);
		if (!p) {
			if (!unplatformed++ && !matches)
				best = d;
		} else if (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64")) {
			if (!matches++)
				best = d; /* a platform match wins over one without a platform */
		}
	}
	if (matches > 1 || (!matches && unplatformed > 1)) {
		r = errf(err, errlen, -EINVAL,
			 "the index holds several images (%s): make an image layout of the one to import", seen);
		goto out;
	}
	if (!matches && !unplatformed) {
		r = errf(err, errlen, images ? -ENOEXEC : -EINVAL,
			 images ? "no image for linux/amd64 in the index (it has: %s)" : "the index holds no image%s",
			 seen);
		goto out;
	}
	*ret = best;
	*ret_is_index = best.media_type[0] && is_index_type(best.media_type);
out:
	cJSON_Delete(j);
	return r;
}

void oci_manifest_clear(struct oci_manifest *m)
{
	free(m->layers);
	memset(m, 0, sizeof(*m));
}

static int layer_comp(const char *mt, enum oci_comp *ret, char *err, size_t errlen)
{
	static const struct {
		const char *type;
		enum oci_comp comp;
	} known[] = {
		{ "application/vnd.oci.image.layer.v1.tar", OCI_COMP_NONE },
		{ "application/vnd.oci.image.layer.v1.tar+gzip", OCI_COMP_GZIP },
		{ "application/vnd.oci.image.layer.v1.tar+zstd", OCI_COMP_ZSTD },
		{ "application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_COMP_NONE },
		{ "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_COMP_GZIP },
		{ "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_COMP_ZSTD },
		{ "application/vnd.docker.image.rootfs.diff.tar", OCI_COMP_NONE },
		{ "application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_COMP_GZIP },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(mt, known[i].type)) {
			*ret = known[i].comp;
			return 0;
		}
	return errf(err, errlen, -EOPNOTSUPP, "layer media type '%.100s' is not supported (not a Linux file system layer)",
		    mt);
}

int oci_manifest_parse(const char *json, size_t len, struct oci_manifest *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	int r = 0;
	cJSON *j = parse(json, len, &r, err, errlen);
	if (!j)
		return r;
	const char *mt = str(j, "mediaType");
	const cJSON *sv = cJSON_GetObjectItemCaseSensitive(j, "schemaVersion");
	if (!cJSON_IsNumber(sv) || sv->valueint != 2) {
		r = errf(err, errlen, -EOPNOTSUPP, "manifest schema version %d is not supported (only 2)",
			 cJSON_IsNumber(sv) ? sv->valueint : 0);
		goto out;
	}
	if (mt && !is_manifest_type(mt)) {
		r = errf(err, errlen, -EOPNOTSUPP, "manifest media type '%.100s' is not an image manifest", mt);
		goto out;
	}
	if ((r = desc_parse(cJSON_GetObjectItemCaseSensitive(j, "config"), &ret->config, err, errlen)) < 0)
		goto out;
	if (ret->config.media_type[0] && strcmp(ret->config.media_type, "application/vnd.oci.image.config.v1+json") &&
	    strcmp(ret->config.media_type, "application/vnd.docker.container.image.v1+json")) {
		r = errf(err, errlen, -EOPNOTSUPP, "config media type '%.100s': not a container image",
			 ret->config.media_type);
		goto out;
	}
	const cJSON *ls = cJSON_GetObjectItemCaseSensitive(j, "layers");
	int n = cJSON_IsArray(ls) ? cJSON_GetArraySize(ls) : -1;
	if (n < 0 || (size_t)n > OCI_LAYERS_MAX) {
		r = errf(err, errlen, -EINVAL, n < 0 ? "a manifest without layers" : "%d layers (at most %u)", n,
			 OCI_LAYERS_MAX);
		goto out;
	}
	ret->layers = calloc((size_t)n + 1, sizeof(*ret->layers));
	if (!ret->layers) {
		r = -ENOMEM;
		goto out;
	}
	const cJSON *l;
	cJSON_ArrayForEach(l, ls) {
		struct oci_layer *ol = &ret->layers[ret->n_layers];
		if ((r = desc_parse(l, &ol->desc, err, errlen)) < 0 ||
		    (r = layer_comp(ol->desc.media_type, &ol->comp, err, errlen)) < 0)
			goto out;
		ret->n_layers++;
	}
out:
	cJSON_Delete(j);
	if (r < 0)
		oci_manifest_clear(ret);
	return r;
}

/* A member name of the archive, checked: relative, no "..". */
static int member_path(const char *s, char *buf, size_t len, char *err, size_t errlen)
{
	if (!s || tar_path_normalize(s, buf, len) < 0 || !buf[0])
		return errf(err, errlen, -EINVAL, "manifest.json names '%.100s', not a file of the archive", s ? s : "");
	return 0;
}

int oci_docker_manifest_parse(const char *json, size_t len, struct oci_manifest *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	int r = 0;
	cJSON *j = parse(json, len, &r, err, errlen);
	if (!j)
		return r;
	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) < 1) {
		r = errf(err, errlen, -EINVAL, "manifest.json holds no image");
		goto out;
	}
	if (cJSON_GetArraySize(j) > 1) {
		char tags[400] = "";
		size_t n = 0;
		const cJSON *im;
		cJSON_ArrayForEach(im, j) {
			const char *t = cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(im, "RepoTags"), 0));
			if (n < sizeof(tags) - 1)
				n += (size_t)snprintf(tags + n, sizeof(tags) - n, "%s%.60s", n ? ", " : "", t ? t : "(untagged)");
		}
		r = errf(err, errlen, -EINVAL, "the archive holds %d images (%s): `docker save` one of them",
			 cJSON_GetArraySize(j), tags);
		goto out;
	}
	const cJSON *im = cJSON_GetArrayItem(j, 0);
	if ((r = member_path(str(im, "Config"), ret->config_path, sizeof(ret->config_path), err, errlen)) < 0)
		goto out;
	const char *tag = cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(im, "RepoTags"), 0));
	snprintf(ret->ref, sizeof(ret->ref), "%s", tag && strlen(tag) < sizeof(ret->ref) ? tag : "");
	const cJSON *ls = cJSON_GetObjectItemCaseSensitive(im, "Layers");
	int n = cJSON_IsArray(ls) ? cJSON_GetArraySize(ls) : -1;
	if (n < 0 || (size_t)n > OCI_LAYERS_MAX) {
		r = errf(err, errlen, -EINVAL, n < 0 ? "manifest.json names no layers" : "%d layers (at most %u)", n,
			 OCI_LAYERS_MAX);
		goto out;
	}
	ret->layers = calloc((size_t)n + 1, sizeof(*ret->layers));
	if (!ret->layers) {
		r = -ENOMEM;
		goto out;
	}
	const cJSON *l;
	cJSON_ArrayForEach(l, ls) {
		struct oci_layer *ol = &ret->layers[ret->n_layers];
		if ((r = member_path(cJSON_GetStringValue(l), ol->path, sizeof(ol->path), err, errlen)) < 0)
			goto out;
		ol->comp = OCI_COMP_NONE; /* docker save writes them uncompressed; space-unpack checks */
		ret->n_layers++;
	}
out:
	cJSON_Delete(j);
	if (r < 0)
		oci_manifest_clear(ret);
	return r;
}

static void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

void oci_config_clear(struct oci_config *c)
{
	strv_free(c->env);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	strv_free(c->labels);
	free(c->working_dir);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

/* An array of strings (null or absent: *ret NULL). env: only "KEY=VALUE" entries are kept. */
static int strv(const cJSON *o, const char *key, bool env, char ***ret, char *err, size_t errlen)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
	*ret = NULL;
	if (!a || cJSON_IsNull(a))
		return 0;
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
	if (n < 0 || (size_t)n > OCI_STRS_MAX)
		return errf(err, errlen, -EINVAL, "config %s is not an array of at most %u strings", key, OCI_STRS_MAX);
	char **v = calloc((size_t)n + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, a) {
		if (!cJSON_IsString(e) || strlen(e->valuestring) > OCI_STR_MAX) {
			strv_free(v);
			return errf(err, errlen, -EINVAL, "config %s holds something other than a string of at most %u bytes",
				    key, OCI_STR_MAX);
		}
		const char *eq = strchr(e->valuestring, '=');
		if (env && (!eq || eq == e->valuestring))
			continue;
		if (!(v[k++] = strdup(e->valuestring))) {
			strv_free(v);
			return -ENOMEM;
		}
	}
	*ret = v;
	return 0;
}

static bool user_valid(const char *u)
{
	size_t n = strlen(u);
	if (!n || n > 255 || u[0] == ':' || u[n - 1] == ':')
		return false;
	int colons = 0;
	for (const char *p = u; *p; p++) {
		if (*p == ':')
			colons++;
		else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			   *p == '.' || *p == '_' || *p == '-'))
			return false;
	}
	return colons <= 1;
}

int oci_config_parse(const char *json, size_t len, struct oci_config *ret, char *err, size_t errlen)
{
	memset(ret, 0, sizeof(*ret));
	int r = 0;
	cJSON *j = parse(json, len, &r, err, errlen);
	if (!j)
		return r;
	if ((r = copy_str(j, "os", ret->os, sizeof(ret->os), err, errlen)) < 0 ||
	    (r = copy_str(j, "architecture", ret->architecture, sizeof(ret->architecture), err, errlen)) < 0)
		goto out;
	if (strcmp(ret->os, "linux") || strcmp(ret->architecture, "amd64")) {
		r = errf(err, errlen, -ENOEXEC, "the image is for %s/%s; this host runs linux/amd64",
			 ret->os[0] ? ret->os : "?", ret->architecture[0] ? ret->architecture : "?");
		goto out;
	}
	const cJSON *rootfs = cJSON_GetObjectItemCaseSensitive(j, "rootfs");
	const cJSON *ids = cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids");
	const char *type = str(rootfs, "type");
	if (!type || strcmp(type, "layers") || !cJSON_IsArray(ids)) {
		r = errf(err, errlen, -EINVAL, "the config has no rootfs of type layers with diff_ids");
		goto out;
	}
	const cJSON *id;
	cJSON_ArrayForEach(id, ids) {
		if (ret->n_diff_ids == OCI_LAYERS_MAX) {
			r = errf(err, errlen, -EINVAL, "more than %u layers", OCI_LAYERS_MAX);
			goto out;
		}
		const char *s = cJSON_GetStringValue(id);
		if (!oci_digest_valid(s)) {
			r = errf(err, errlen, -EINVAL, "diff id '%.80s' is not a sha256 digest", s ? s : "");
			goto out;
		}
		snprintf(ret->diff_ids[ret->n_diff_ids++], OCI_DIGEST_LEN + 1, "%s", s);
	}
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "config");
	if (c && !cJSON_IsNull(c) && !cJSON_IsObject(c)) {
		r = errf(err, errlen, -EINVAL, "the config's config is not an object");
		goto out;
	}
	if ((r = strv(c, "Env", true, &ret->env, err, errlen)) < 0 ||
	    (r = strv(c, "Entrypoint", false, &ret->entrypoint, err, errlen)) < 0 ||
	    (r = strv(c, "Cmd", false, &ret->cmd, err, errlen)) < 0)
		goto out;
	if (!ret->env && !(ret->env = calloc(1, sizeof(char *)))) {
		r = -ENOMEM;
		goto out;
	}
	const char *wd = str(c, "WorkingDir");
	if (wd && *wd) {
		if (strlen(wd) > OCI_PATH_MAX - 1) {
			r = errf(err, errlen, -EINVAL, "the config's WorkingDir is longer than %u bytes", OCI_PATH_MAX - 1);
			goto out;
		}
		/* Relative means from the root, as runtimes take it. */
		if (!(ret->working_dir = malloc(strlen(wd) + 2))) {
			r = -ENOMEM;
			goto out;
		}
		sprintf(ret->working_dir, "%s%s", wd[0] == '/' ? "" : "/", wd);
	}
	const char *user = str(c, "User");
	if (user && *user) {
		if (!user_valid(user)) {
			r = errf(err, errlen, -EINVAL, "the config's User '%.60s' is not a user[:group] name or number", user);
			goto out;
		}
		if (!(ret->user = strdup(user))) {
			r = -ENOMEM;
			goto out;
		}
	}
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(c, "Labels");
	int nl = cJSON_IsObject(labels) ? cJSON_GetArraySize(labels) : 0;
	if (nl < 0 || (size_t)nl > OCI_LABELS_MAX) {
		r = errf(err, errlen, -EINVAL, "more than %u labels", OCI_LABELS_MAX);
		goto out;
	}
	if (!(ret->labels = calloc(2 * (size_t)nl + 1, sizeof(char *)))) {
		r = -ENOMEM;
		goto out;
	}
	size_t k = 0;
	const cJSON *lb;
	cJSON_ArrayForEach(lb, labels) {
		if (!cJSON_IsString(lb) || strlen(lb->string) > 1024 || strlen(lb->valuestring) > 16384) {
			r = errf(err, errlen, -EINVAL, "a label that is not a string (keys up to 1 KiB, values 16 KiB)");
			goto out;
		}
		if (!(ret->labels[k++] = strdup(lb->string)) || !(ret->labels[k++] = strdup(lb->valuestring))) {
			r = -ENOMEM;
			goto out;
		}
	}
	r = 0;
out:
	cJSON_Delete(j);
	if (r < 0)
		oci_config_clear(ret);
	return r;
}

static cJSON *strv_json(char *const *v)
{
	cJSON *a = cJSON_CreateArray();
	for (; a && v && *v; v++)
		cJSON_AddItemToArray(a, cJSON_CreateString(*v));
	return a;
}

char *oci_config_defaults_json(const struct oci_config *c)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddItemToObject(j, "env", strv_json(c->env));
	if (c->working_dir)
		cJSON_AddStringToObject(j, "working_dir", c->working_dir);
	if (c->user)
		cJSON_AddStringToObject(j, "user", c->user);
	if (c->entrypoint)
		cJSON_AddItemToObject(j, "entrypoint", strv_json(c->entrypoint));
	if (c->cmd)
		cJSON_AddItemToObject(j, "cmd", strv_json(c->cmd));
	cJSON *l = cJSON_AddObjectToObject(j, "labels");
	for (char *const *p = c->labels; l && p && p[0] && p[1]; p += 2)
		cJSON_AddStringToObject(l, p[0], p[1]);
	cJSON_AddStringToObject(j, "os", c->os);
	cJSON_AddStringToObject(j, "architecture", c->architecture);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}
