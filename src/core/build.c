/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space_template_build: a template from a Dockerfile (space.h; docs/templates.md).
 *
 * A build walks its instructions once. Each one moves the stage's key along a chain, key = sha256(parent
 * key, the instruction as expanded, and for COPY/ADD what the copied files hold), and changes the stage's
 * config (ENV, USER, CMD, ...: recomputed every time, they cost nothing) or its disk (RUN, COPY, ADD,
 * WORKDIR). A disk step's result is a read-only subvolume <pool>/build-cache/<key> holding rootfs.ext4:
 * found there, the step is not run again. So a Dockerfile whose last line changed reruns that line only.
 *
 * RUN runs in a sandbox (jail or VM) made from the step's disk, as the stage's user, in its working
 * directory, with its environment and ARG values; its disk, once the sandbox stopped and its file system
 * is unmounted, becomes the step's cache entry. COPY and ADD write the context's files as a tar stream
 * (build_copy.c) that space-unpack applies onto a snapshot of the disk; an ADD of a local archive is
 * applied by it as it is. A base template's disk is first copied into an entry of its own (a reflink), so
 * every step's disk is a plain subvolume with rootfs.ext4 and nothing of the template's (kernel, booted
 * snapshot). Nothing becomes a template before the last step succeeded.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/build.h"
#include "core/image_source.h"
#include "core/sandbox.h"
#include "core/template_import.h"
#include "core/unpack.h"
#include "image/dockerfile.h"
#include "image/tar.h"
#include "store/btrfs.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"


#define SCRATCH_SIZE (1ull << 30)

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete)

void build_args_clear(char **v)
{
	for (size_t i = 0; v[i]; i++) {
		free(v[i]);
		v[i] = NULL;
	}
}

int build_args_set(space_ctx *ctx, char **v, const char *name, const char *value)
{
	size_t nl = strlen(name), i;
	for (i = 0; v[i]; i++)
		if (!strncmp(v[i], name, nl) && v[i][nl] == '=')
			break;
	if (i == ARGS_MAX)
		return ctx_error_msg(ctx, -E2BIG, "more than %d ARG or ENV values", ARGS_MAX);
	char *kv = malloc(nl + strlen(value) + 2);
	if (!kv)
		return -ENOMEM;
	sprintf(kv, "%s=%s", name, value);
	free(v[i]);
	v[i] = kv;
	return 0;
}

void build_state_clear(struct state *st)
{
	cJSON_Delete(st->config);
	st->config = NULL;
	build_args_clear(st->args);
}

int build_state_copy(struct state *dst, const struct state *src)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->key, src->key, sizeof(dst->key));
	memcpy(dst->disk, src->disk, sizeof(dst->disk));
	dst->config = cJSON_Duplicate(src->config, true);
	dst->cmd_here = src->cmd_here;
	return dst->config ? 0 : -ENOMEM;
}

/* key = sha256(key "\n" text) */
void build_key_next(char *key, const char *text, size_t len)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	if (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1) {
		EVP_DigestUpdate(md, key, strlen(key));
		EVP_DigestUpdate(md, "\n", 1);
		EVP_DigestUpdate(md, text, len);
		EVP_DigestFinal_ex(md, d, &n);
	}
	EVP_MD_CTX_free(md);
	size_t at = (size_t)snprintf(key, BUILD_KEY_LEN, "sha256:");
	for (unsigned i = 0; i < n; i++)
		at += (size_t)snprintf(key + at, BUILD_KEY_LEN - at, "%02x", d[i]);
}

void build_key_of(char *key, const char *text)
{
	key[0] = '\0';
	build_key_next(key, text, strlen(text));
}

void build_entry_path(const struct build *b, const char *key, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", b->cache, key + 7);
}

bool build_cached(const struct build *b, const char *key, char *path, size_t len)
{
	build_entry_path(b, key, path, len);
	struct stat st;
	char img[PATH_MAX + 16];
	snprintf(img, sizeof(img), "%s/rootfs.ext4", path);
	return stat(img, &st) == 0 && S_ISREG(st.st_mode);
}

/* A work subvolume made into the cache entry of key: renamed into place, then read-only (a concurrent
 * build that got there first wins; this one's copy goes). */
int build_cache_put(struct build *b, const char *tmp, const char *key, char *disk, size_t len)
{
	build_entry_path(b, key, disk, len);
	/* Moved while writable (a read-only subvolume cannot be renamed: its ".." would change). */
	(void)store_btrfs_set_read_only(tmp, false);
	if (rename(tmp, disk) < 0) {
		int r = -errno;
		if (r != -EEXIST && r != -ENOTEMPTY)
			return ctx_error(b->ctx, r, "move %s into the build cache", tmp);
		(void)store_btrfs_subvolume_delete(tmp);
		return 0;
	}
	int r = store_btrfs_set_read_only(disk, true);
	return r < 0 ? ctx_error(b->ctx, r, "make %s read-only", disk) : 0;
}

/* The step's expansions see the stage's ARG values and its ENV (the later wins, as ENV follows ARG). */
char **build_vars(const struct state *st)
{
	size_t n = 0;
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(st->config, "env"), *e;
	for (size_t i = 0; st->args[i]; i++)
		n++;
	n += (size_t)cJSON_GetArraySize(env);
	char **v = calloc(n + 1, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; v && st->args[i]; i++)
		v[k++] = st->args[i];
	cJSON_ArrayForEach(e, env)
		if (v && cJSON_IsString(e))
			v[k++] = e->valuestring;
	return v;
}

int build_expand(struct build *b, const struct df_instr *in, const char *word, const struct state *st, char **ret)
{
	char err[256];
	char **vars = st ? build_vars(st) : NULL;
	int r = dockerfile_expand(word, (const char *const *)(st ? vars : b->global), ret, err, sizeof(err));
	free(vars);
	if (r < 0)
		return ctx_error_msg(b->ctx, r == -ENOMEM ? r : -EINVAL, "line %u: %s", in->line, err);
	return 0;
}

int build_env_set(cJSON *config, const char *name, const char *value)
{
	cJSON *env = cJSON_GetObjectItemCaseSensitive(config, "env");
	if (!env)
		env = cJSON_AddArrayToObject(config, "env");
	size_t nl = strlen(name);
	char *kv = malloc(nl + strlen(value) + 2);
	if (!env || !kv) {
		free(kv);
		return -ENOMEM;
	}
	sprintf(kv, "%s=%s", name, value);
	int i = 0;
	cJSON *e;
	cJSON_ArrayForEach(e, env) {
		if (cJSON_IsString(e) && !strncmp(e->valuestring, name, nl) && e->valuestring[nl] == '=') {
			cJSON_ReplaceItemInArray(env, i, cJSON_CreateString(kv));
			free(kv);
			return 0;
		}
		i++;
	}
	cJSON_AddItemToArray(env, cJSON_CreateString(kv));
	free(kv);
	return 0;
}

void build_progress(struct build *b, const struct df_instr *in, bool hit)
{
	if (!b->o->progress)
		return;
	char text[96], stage[192];
	util_text_one_line(in->text, text, sizeof(text));
	snprintf(stage, sizeof(stage), "step %zu/%zu (line %u): %s %s%s", b->step, b->df.n, in->line,
		 dockerfile_keyword(in->op), text, hit ? ", cached" : "");
	b->o->progress(stage, 0, 0, b->o->progress_userdata);
}

/* ---- FROM ---- */

/* A disk entry of its own for a base's rootfs.ext4 (a reflink: no copy of the data). */
static int base_entry(struct build *b, const char *key, const char *image, char *disk, size_t len)
{
	if (build_cached(b, key, disk, len))
		return 0;
	char tmp[PATH_MAX], dst[PATH_MAX + 16];
	int r = core_pool_tmp_path(b->ctx, b->root, tmp, sizeof(tmp));
	if (r < 0)
		return r;
	if ((r = store_btrfs_subvolume_create(tmp)) < 0)
		return ctx_error(b->ctx, r, "create %s", tmp);
	snprintf(dst, sizeof(dst), "%s/rootfs.ext4", tmp);
	if (image) {
		if ((r = template_copy_file(image, dst, 0644)) < 0)
			r = ctx_error(b->ctx, r, "copy %s", image);
	} else {
		/* scratch: an empty file system */
		char sz[32];
		snprintf(sz, sizeof(sz), "%lluk", (unsigned long long)(SCRATCH_SIZE >> 10));
		const char *mk[] = { "mkfs.ext4", "-q", "-F", "-L", "rootfs", "-b", "4096", dst, sz, NULL };
		_cleanup_free_ char *out = NULL;
		if ((r = util_run(mk, &out)) < 0)
			r = ctx_error_msg(b->ctx, r, "mkfs.ext4 for FROM scratch: %s", out ? out : "failed");
	}
	if (r == 0)
		r = build_cache_put(b, tmp, key, disk, len);
	if (r < 0)
		(void)store_btrfs_subvolume_delete(tmp);
	return r;
}

static int from_image(struct build *b, const char *path, struct state *st)
{
	struct image_plan plan;
	int r = image_plan_load(b->ctx, path, &plan);
	if (r < 0)
		return r;
	char text[128];
	snprintf(text, sizeof(text), "image %s", plan.digest);
	build_key_of(st->key, text);
	if (!(st->config = cJSON_Parse(plan.defaults))) {
		image_plan_clear(&plan);
		return -ENOMEM;
	}
	if (build_cached(b, st->key, st->disk, sizeof(st->disk))) {
		image_plan_clear(&plan);
		return 0;
	}
	char tmp[PATH_MAX], img[PATH_MAX + 16];
	if ((r = core_pool_tmp_path(b->ctx, b->root, tmp, sizeof(tmp))) < 0 || (r = store_btrfs_subvolume_create(tmp)) < 0) {
		image_plan_clear(&plan);
		return r;
	}
	snprintf(img, sizeof(img), "%s/rootfs.ext4", tmp);
	struct unpack_request req = {
		.layers = plan.layers, .n_layers = plan.n_layers, .fds = plan.fds, .n_fds = plan.n_fds,
		.workdir = plan.config.working_dir, .what = "layer", .progress = b->o->progress,
		.progress_userdata = b->o->progress_userdata,
	};
	struct unpack_result res;
	r = unpack_apply(b->ctx, &req, img, &res);
	image_plan_clear(&plan);
	if (r == 0)
		r = build_cache_put(b, tmp, st->key, st->disk, sizeof(st->disk));
	if (r < 0)
		(void)store_btrfs_subvolume_delete(tmp);
	return r;
}

static int step_from(struct build *b, const struct df_instr *in, struct stage *sg)
{
	_cleanup_free_ char *base = NULL;
	int r = build_expand(b, in, in->args[0], NULL, &base);
	if (r < 0)
		return r;
	struct state *st = &sg->st;
	memset(st, 0, sizeof(*st));
	if (in->as) {
		if (!util_name_valid(in->as))
			return ctx_error_msg(b->ctx, -EINVAL, "line %u: '%s' is not a stage name", in->line, in->as);
		snprintf(sg->name, sizeof(sg->name), "%s", in->as);
	}
	for (size_t i = 0; i < b->n_stages; i++)
		if (b->stages[i].name[0] && !strcasecmp(b->stages[i].name, base))
			return build_state_copy(st, &b->stages[i].st);
	struct template_info t;
	if (!strcmp(base, "scratch")) {
		build_key_of(st->key, "scratch");
		st->config = cJSON_CreateObject();
		return st->config ? base_entry(b, st->key, NULL, st->disk, sizeof(st->disk)) : -ENOMEM;
	}
	if (util_name_valid(base) && store_template_exists(b->ctx->store, base) > 0 &&
	    core_template_get(b->ctx, base, &t) == 0) {
		char text[256], img[PATH_MAX + 16];
		snprintf(text, sizeof(text), "template %s %lld %s", t.name, (long long)t.created_ms, t.image_digest);
		build_key_of(st->key, text);
		_cleanup_free_ char *cfg = NULL;
		if ((r = core_template_image_config(b->ctx, base, &cfg)) < 0)
			return r;
		st->config = cfg ? cJSON_Parse(cfg) : cJSON_CreateObject();
		if (!st->config)
			return -ENOMEM;
		snprintf(img, sizeof(img), "%s/rootfs.ext4", t.path);
		return base_entry(b, st->key, img, st->disk, sizeof(st->disk));
	}
	struct stat sb;
	if (strchr(base, '/') && stat(base, &sb) == 0)
		return from_image(b, base, st);
	_cleanup_free_ char *safe = util_escape_dup(base, 0);
	return ctx_error_msg(b->ctx, -ENOENT,
			     "line %u: FROM %s: no template, earlier stage or image of that name (an image is a path to "
			     "an OCI layout or a docker save archive; import registry images with `space template "
			     "import --image` first)",
			     in->line, safe ? safe : "?");
}

/* ---- the config's instructions ---- */

static int step_config(struct build *b, const struct df_instr *in, struct state *st)
{
	cJSON *key = cJSON_CreateArray();
	if (!key)
		return -ENOMEM;
	_cleanup_(cJSON_Deletep) cJSON *keyp = key;
	cJSON_AddItemToArray(key, cJSON_CreateString(dockerfile_keyword(in->op)));
	int r = 0;
	switch (in->op) {
	case DF_ENV:
	case DF_LABEL:
	case DF_ARG:
		for (size_t i = 0; i + 1 < in->n_args && r == 0; i += 2) {
			_cleanup_free_ char *k = NULL, *v = NULL;
			if ((r = build_expand(b, in, in->args[i], st, &k)) < 0 || (r = build_expand(b, in, in->args[i + 1], st, &v)) < 0)
				break;
			if (in->op == DF_ARG) {
				/* A build argument wins; then the default; then the value of a global ARG of that name. */
				const char *given = NULL;
				size_t kl = strlen(k);
				for (const char *const *a = b->o->build_args; a && *a; a++)
					if (!strncmp(*a, k, kl) && (*a)[kl] == '=')
						given = *a + kl + 1;
				for (size_t g = 0; !given && !in->has_value[i / 2] && b->global[g]; g++)
					if (!strncmp(b->global[g], k, kl) && b->global[g][kl] == '=')
						given = b->global[g] + kl + 1;
				if (!given && !in->has_value[i / 2])
					continue;
				r = build_args_set(b->ctx, st->args, k, given ? given : v);
				if (r == 0 && given) {
					free(v);
					v = strdup(given); /* the value the key records */
				}
			} else if (in->op == DF_ENV) {
				r = build_env_set(st->config, k, v);
			} else {
				cJSON *labels = cJSON_GetObjectItemCaseSensitive(st->config, "labels");
				if (!labels)
					labels = cJSON_AddObjectToObject(st->config, "labels");
				cJSON_DeleteItemFromObjectCaseSensitive(labels, k);
				cJSON_AddStringToObject(labels, k, v);
			}
			cJSON_AddItemToArray(key, cJSON_CreateString(k));
			cJSON_AddItemToArray(key, cJSON_CreateString(v ? v : ""));
		}
		break;
	case DF_USER: {
		_cleanup_free_ char *u = NULL;
		if ((r = build_expand(b, in, in->args[0], st, &u)) < 0)
			break;
		cJSON_DeleteItemFromObject(st->config, "user");
		cJSON_AddStringToObject(st->config, "user", u);
		cJSON_AddItemToArray(key, cJSON_CreateString(u));
		break;
	}
	case DF_ENTRYPOINT:
	case DF_CMD: {
		cJSON *v = cJSON_CreateArray();
		if (!in->json) {
			cJSON_AddItemToArray(v, cJSON_CreateString("/bin/sh"));
			cJSON_AddItemToArray(v, cJSON_CreateString("-c"));
		}
		for (size_t i = 0; i < in->n_args; i++)
			cJSON_AddItemToArray(v, cJSON_CreateString(in->args[i]));
		const char *field = in->op == DF_CMD ? "cmd" : "entrypoint";
		cJSON_AddItemToArray(key, cJSON_Duplicate(v, true));
		cJSON_DeleteItemFromObject(st->config, field);
		cJSON_AddItemToObject(st->config, field, v);
		if (in->op == DF_CMD)
			st->cmd_here = true;
		else if (!st->cmd_here)
			cJSON_DeleteItemFromObject(st->config, "cmd"); /* a base's CMD goes with a new ENTRYPOINT */
		break;
	}
	default:
		return -EINVAL;
	}
	if (r < 0)
		return r;
	_cleanup_free_ char *kt = cJSON_PrintUnformatted(key);
	if (!kt)
		return -ENOMEM;
	build_key_next(st->key, kt, strlen(kt));
	build_progress(b, in, false);
	return 0;
}

/* ---- the build ---- */

static int global_args(struct build *b, const struct df_instr *in)
{
	for (size_t i = 0; i + 1 < in->n_args; i += 2) {
		_cleanup_free_ char *k = NULL, *v = NULL;
		int r;
		if ((r = build_expand(b, in, in->args[i], NULL, &k)) < 0 || (r = build_expand(b, in, in->args[i + 1], NULL, &v)) < 0)
			return r;
		const char *given = NULL;
		size_t kl = strlen(k);
		for (const char *const *a = b->o->build_args; a && *a; a++)
			if (!strncmp(*a, k, kl) && (*a)[kl] == '=')
				given = *a + kl + 1;
		if (given || in->has_value[i / 2])
			if ((r = build_args_set(b->ctx, b->global, k, given ? given : v)) < 0)
				return r;
	}
	return 0;
}

static int run_steps(struct build *b)
{
	struct stage *sg = NULL;
	for (size_t i = 0; i < b->df.n; i++) {
		const struct df_instr *in = &b->df.v[i];
		b->step = i + 1;
		int r;
		if (!sg && in->op == DF_ARG) {
			if ((r = global_args(b, in)) < 0)
				return r;
			build_progress(b, in, false);
			continue;
		}
		if (in->op == DF_FROM) {
			if (b->n_stages == STAGES_MAX)
				return ctx_error_msg(b->ctx, -E2BIG, "line %u: more than %d stages", in->line, STAGES_MAX);
			sg = &b->stages[b->n_stages];
			if ((r = step_from(b, in, sg)) < 0) {
				build_state_clear(&sg->st);
				return r;
			}
			b->n_stages++;
			build_progress(b, in, false);
			continue;
		}
		struct state *st = &sg->st;
		switch (in->op) {
		case DF_RUN: r = build_step_run(b, in, st); break;
		case DF_COPY:
		case DF_ADD: r = build_step_copy(b, in, st); break;
		case DF_WORKDIR: r = build_step_workdir(b, in, st); break;
		default: r = step_config(b, in, st); break;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The last stage as the template name. */
static int commit(struct build *b, const struct state *st)
{
	space_ctx *ctx = b->ctx;
	const char *name = b->o->name;
	_cleanup_free_ struct store_template *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	int r = store_template_get(ctx->store, name, t);
	if (r == 0 && !strcmp(t->image_digest, st->key)) {
		ctx_log(ctx, SPACE_LOG_INFO, "template %s is up to date (%s)", name, st->key);
		return 0;
	}
	if (r == 0 && (t->sandboxes || t->checkpoints))
		return ctx_error_msg(ctx, -EBUSY, "template %s is used by %u sandbox(es) and %u checkpoint(s): it cannot be "
					       "replaced by the new build (remove them, or build under another name)",
				     name, t->sandboxes, t->checkpoints);
	struct unpack_result u;
	const struct df_instr *last = &b->df.v[b->df.n - 1];
	if ((r = build_stage_user(b, last, st, &u)) < 0)
		return r;
	cJSON *cfg = cJSON_Duplicate(st->config, true);
	if (!cfg)
		return -ENOMEM;
	cJSON_DeleteItemFromObject(cfg, "uid");
	cJSON_DeleteItemFromObject(cfg, "gid");
	cJSON_DeleteItemFromObject(cfg, "home");
	cJSON_DeleteItemFromObject(cfg, "format");
	cJSON_DeleteItemFromObject(cfg, "ref");
	if (!cJSON_GetObjectItemCaseSensitive(cfg, "env"))
		cJSON_AddArrayToObject(cfg, "env");
	cJSON_AddNumberToObject(cfg, "uid", u.uid);
	cJSON_AddNumberToObject(cfg, "gid", u.gid);
	cJSON_AddStringToObject(cfg, "home", u.home);
	cJSON_AddStringToObject(cfg, "format", "dockerfile");
	_cleanup_free_ char *config = cJSON_PrintUnformatted(cfg);
	cJSON_Delete(cfg);
	if (!config)
		return -ENOMEM;
	char tmp[PATH_MAX], src[PATH_MAX + 16], dst[PATH_MAX + 16];
	if ((r = core_pool_tmp_path(ctx, b->root, tmp, sizeof(tmp))) < 0)
		return r;
	if ((r = store_btrfs_subvolume_create(tmp)) < 0)
		return ctx_error(ctx, r, "create %s", tmp);
	snprintf(src, sizeof(src), "%s/rootfs.ext4", st->disk);
	snprintf(dst, sizeof(dst), "%s/rootfs.ext4", tmp);
	struct space_template_import_options io = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	io.name = name;
	if ((r = template_copy_file(src, dst, 0644)) < 0)
		r = ctx_error(ctx, r, "copy %s", src);
	const char *source = b->o->context_archive ? "(a context archive)" : b->o->dockerfile;
	if (r == 0 && (r = template_write_manifest(tmp, &io, source, "", st->key, config)) < 0)
		r = ctx_error(ctx, r, "write template.json");
	if (r == 0 && t->name[0] && (r = space_template_remove(ctx, name, false)) < 0) {
		(void)store_btrfs_subvolume_delete(tmp);
		return r;
	}
	if (r == 0)
		r = template_commit(ctx, &io, b->root, tmp, st->key, config);
	if (r < 0)
		(void)store_btrfs_subvolume_delete(tmp);
	return r;
}

/* ---- an uploaded context ---- */

struct fd_src {
	int fd;
	uint64_t off;
};

static int64_t fd_read(void *userdata, void *buf, size_t len)
{
	struct fd_src *s = userdata;
	ssize_t k = pread(s->fd, buf, len, (off_t)s->off);
	if (k < 0)
		return -errno;
	s->off += (uint64_t)k;
	return k;
}

/* The context archive as a file system of its own, made by space-unpack (nothing of it touches the host's
 * tree): b->ctx_image. */
static int context_image(struct build *b)
{
	space_ctx *ctx = b->ctx;
	_cleanup_close_ int fd = open(b->o->context_archive, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "build context %s", b->o->context_archive);
	if (!S_ISREG(st.st_mode))
		return ctx_error_msg(ctx, -EINVAL, "build context %s: not a file", b->o->context_archive);
	int r = core_pool_tmp_path(ctx, b->root, b->ctx_tmp, sizeof(b->ctx_tmp));
	if (r == 0 && (r = store_btrfs_subvolume_create(b->ctx_tmp)) < 0)
		r = ctx_error(ctx, r, "create %s", b->ctx_tmp);
	if (r < 0) {
		b->ctx_tmp[0] = '\0';
		return r;
	}
	snprintf(b->ctx_image, sizeof(b->ctx_image), "%s/rootfs.ext4", b->ctx_tmp);
	struct image_layer l = { .fd = fd, .length = (uint64_t)st.st_size, .comp = "auto" };
	int fds[1] = { fd };
	struct unpack_request req = {
		.layers = &l, .n_layers = 1, .fds = fds, .n_fds = 1, .what = "context", .any_tree = true,
		.progress = b->o->progress, .progress_userdata = b->o->progress_userdata,
	};
	struct unpack_result res;
	return unpack_apply(ctx, &req, b->ctx_image, &res);
}

/* The Dockerfile at name inside the context's file system, exported by space-unpack and read back. */
static int context_dockerfile(struct build *b, const char *name, char **ret, size_t *ret_len)
{
	space_ctx *ctx = b->ctx;
	char norm[TAR_PATH_MAX + 1], abs[TAR_PATH_MAX + 2], dir[PATH_MAX];
	if (tar_path_normalize(name, norm, sizeof(norm)) < 0 || !norm[0])
		return ctx_error_msg(ctx, -EINVAL, "'%s' is not a path inside the build context", name);
	snprintf(abs, sizeof(abs), "/%s", norm);
	snprintf(dir, sizeof(dir), "%s/.tmp", b->root);
	(void)mkdir(dir, 0700);
	_cleanup_close_ int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return ctx_error(ctx, -errno, "a work file in %s", dir);
	int r = unpack_export_path(ctx, b->ctx_image, abs, NULL, fd);
	if (r < 0) {
		char msg[sizeof(ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", ctx->last_error);
		return ctx_error_msg(ctx, r, "Dockerfile %s in the build context: %s", norm, msg);
	}
	struct fd_src src = { .fd = fd };
	struct tar_reader *t;
	if ((r = tar_reader_new(fd_read, NULL, &src, &t)) < 0)
		return r;
	const struct tar_entry *e;
	char *text = NULL;
	size_t len = 0;
	if ((r = tar_next(t, &e)) != 1 || e->type != TAR_REG || e->size > DF_TEXT_MAX) {
		r = ctx_error_msg(ctx, r < 0 ? r : r == 0 ? -ENOENT : e->type != TAR_REG ? -EISDIR : -EFBIG,
				  "Dockerfile %s in the build context: %s", norm,
				  r < 0 ? tar_error(t) : r == 0 ? "not there" : e->type != TAR_REG ? "not a file" : "too large");
	} else if (!(text = malloc(e->size + 1))) {
		r = -ENOMEM;
	} else {
		int64_t k = 1;
		while (len < e->size && (k = tar_read(t, text + len, e->size - len)) > 0)
			len += (size_t)k;
		r = k < 0 ? ctx_error_msg(ctx, (int)k, "Dockerfile %s: %s", norm, tar_error(t)) : 0;
		text[len] = '\0';
	}
	tar_reader_free(t);
	if (r < 0) {
		free(text);
		return r;
	}
	*ret = text;
	*ret_len = len;
	return 0;
}

SPACE_API int space_template_build(space_ctx *ctx, const struct space_template_build_options *opts)
{
	CTX_ENTER(ctx);
	if (!ctx || !opts)
		return -EINVAL;
	struct space_template_build_options o;
	int r = opts_template_build_load(ctx, opts, &o);
	if (r < 0)
		return r;
	if (!util_name_valid(o.name))
		return ctx_error_msg(ctx, -EINVAL, "invalid template name '%s'", o.name ? o.name : "");
	if (!o.dockerfile && !o.context_archive)
		return ctx_error_msg(ctx, -EINVAL, "a build needs a Dockerfile");
	if (o.context_archive && o.context)
		return ctx_error_msg(ctx, -EINVAL, "a build takes a context directory or a context archive, not both");
	struct build *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->ctx = ctx;
	b->o = &o;
	b->ctxfd = -1;
	_cleanup_free_ char *text = NULL;
	size_t len;
	char err[512] = "";
	const char *df_name = o.dockerfile ? o.dockerfile : "Dockerfile";
	if ((r = ctx_pool(ctx, &b->root)) == 0) {
		snprintf(b->cache, sizeof(b->cache), "%s/build-cache", b->root);
		if (mkdir(b->cache, 0700) < 0 && errno != EEXIST)
			r = ctx_error(ctx, -errno, "create %s", b->cache);
		(void)core_pool_tmp_sweep(ctx, b->root);
	}
	if (r < 0) {
		/* no pool */
	} else if (o.context_archive) {
		if ((r = context_image(b)) == 0)
			r = context_dockerfile(b, df_name, &text, &len);
	} else if ((r = util_read_file(o.dockerfile, DF_TEXT_MAX, &text, &len)) < 0) {
		r = ctx_error(ctx, r, "Dockerfile %s", o.dockerfile);
	}
	if (r == 0 && (r = dockerfile_parse(text, len, &b->df, err, sizeof(err))) < 0)
		r = ctx_error_msg(ctx, r, "Dockerfile %s: %s", df_name, err);
	char dir[PATH_MAX];
	if (r == 0 && !o.context_archive) {
		snprintf(dir, sizeof(dir), "%s", o.dockerfile);
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		const char *c = o.context ? o.context : slash ? dir : ".";
		b->ctxfd = open(c, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (b->ctxfd < 0)
			r = ctx_error(ctx, -errno, "build context %s", c);
		if (r == 0)
			r = build_ignore_load(ctx, b->ctxfd, &b->ignore);
	}
	if (r == 0)
		r = run_steps(b);
	if (r == 0)
		r = commit(b, &b->stages[b->n_stages - 1].st);
	for (size_t i = 0; i < b->n_stages; i++)
		build_state_clear(&b->stages[i].st);
	build_args_clear(b->global);
	dockerfile_free(&b->df);
	build_ignore_free(b->ignore);
	if (b->ctxfd >= 0)
		close(b->ctxfd);
	if (b->ctx_tmp[0])
		(void)store_btrfs_subvolume_delete(b->ctx_tmp);
	free(b);
	return r;
}

