/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What build.c (space_template_build) and build_copy.c share: the files a COPY or ADD takes from the build
 * context, never from outside it. Private.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

#define BUILD_KEY_LEN 72 /* "sha256:" + 64 hex digits + NUL */

/* .dockerignore of a context: its patterns in order (a later one wins; "!" re-includes). */
struct build_ignore;

/* Reads <context>/.dockerignore (none: nothing ignored). */
int build_ignore_load(space_ctx *ctx, int ctxfd, struct build_ignore **ret);
void build_ignore_free(struct build_ignore *ig);
/* Whether path (relative to the context, normalized) is left out. */
bool build_ignored(const struct build_ignore *ig, const char *path);

struct build_copy {
	int ctxfd;                   /* the context directory (O_PATH) */
	const struct build_ignore *ignore;
	char *const *srcs;           /* relative to the context, expanded; wildcards in the last component */
	size_t n_srcs;
	const char *dest;            /* absolute in the image, normalized, without a trailing '/' ("" the root) */
	bool dest_is_dir;            /* the destination names a directory (several sources, a trailing '/') */
	bool chown;                  /* owner of every entry; else root */
	uint32_t uid, gid;
};

/*
 * The sources of a COPY as a tar stream into out_fd (names relative to the image's root), and a digest of
 * what it holds (names, types, modes, owners, link targets, contents; not times) into key (BUILD_KEY_LEN):
 * the step's part of its cache key. -ENOENT (message) for a source that matches nothing, -EPERM for one
 * outside the context.
 */
int build_copy_tar(space_ctx *ctx, const struct build_copy *c, int out_fd, char *key);

/* Whether the context file src (relative) is a tar archive ADD extracts (plain, gzip, xz, bzip2, zstd). */
bool build_is_archive(space_ctx *ctx, int ctxfd, const char *src);
/* Opens the context file src for reading, inside the context only. -errno. */
int build_open_source(int ctxfd, const char *src);

/* ---- the builder's own state (build.c, build_steps.c) ---- */

#include <cjson/cJSON.h>
#include <limits.h>

#include "core/unpack.h"
#include "image/dockerfile.h"

#define STAGES_MAX 64
#define ARGS_MAX 256

struct state {
	char key[BUILD_KEY_LEN];
	char disk[PATH_MAX];     /* a subvolume holding rootfs.ext4 */
	cJSON *config;           /* env, working_dir, user, entrypoint, cmd, labels */
	char *args[ARGS_MAX + 1]; /* ARG values in scope, "NAME=VALUE" */
	bool cmd_here;           /* CMD set by this stage (ENTRYPOINT keeps it then) */
};

struct stage {
	char name[64];
	struct state st;
};

struct build {
	space_ctx *ctx;
	const struct space_template_build_options *o;
	const char *root;
	char cache[PATH_MAX];
	int ctxfd;                  /* the context directory, or -1 for an archive: */
	char ctx_tmp[PATH_MAX];     /* the subvolume holding it as a file system, */
	char ctx_image[PATH_MAX + 16]; /* its rootfs.ext4 ("" for a directory context) */
	struct build_ignore *ignore;
	struct dockerfile df;
	char *global[ARGS_MAX + 1]; /* ARG before the first FROM */
	struct stage stages[STAGES_MAX];
	size_t n_stages;
	size_t step;
};

void build_args_clear(char **v);
int build_args_set(space_ctx *ctx, char **v, const char *name, const char *value);
void build_state_clear(struct state *st);
int build_state_copy(struct state *dst, const struct state *src);
/* key = sha256(key "\n" text); _of: from nothing. */
void build_key_next(char *key, const char *text, size_t len);
void build_key_of(char *key, const char *text);
/* The cache entry of key (its path into path), and whether it holds a disk. */
void build_entry_path(const struct build *b, const char *key, char *out, size_t len);
bool build_cached(const struct build *b, const char *key, char *path, size_t len);
/* Work subvolume tmp as key's entry (its path into disk). */
int build_cache_put(struct build *b, const char *tmp, const char *key, char *disk, size_t len);
/* The stage's ARG values then ENV, for substitutions (an array of its strings; free() it). */
char **build_vars(const struct state *st);
/* word substituted with the stage's variables (st NULL: the global ARGs); a message on failure. */
int build_expand(struct build *b, const struct df_instr *in, const char *word, const struct state *st, char **ret);
int build_env_set(cJSON *config, const char *name, const char *value);
void build_progress(struct build *b, const struct df_instr *in, bool hit);
/* The stage's USER through its disk's /etc/passwd (root and /root when none). */
int build_stage_user(struct build *b, const struct df_instr *in, const struct state *st, struct unpack_result *u);
/* The disk steps (build_steps.c). */
int build_step_run(struct build *b, const struct df_instr *in, struct state *st);
int build_step_copy(struct build *b, const struct df_instr *in, struct state *st);
int build_step_workdir(struct build *b, const struct df_instr *in, struct state *st);
