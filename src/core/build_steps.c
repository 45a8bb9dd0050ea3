/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The steps of a build that change its disk (core/build.h): RUN in a sandbox of the step's disk, COPY and
 * ADD through space-unpack, WORKDIR. Each keeps its result as the cache entry of its key.
 */
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
#include "image/tar.h"
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

/* ---- RUN ---- */

static int run_output(int stream, const void *data, size_t len, void *userdata)
{
	const struct space_template_build_options *o = userdata;
	return o->output ? o->output(stream, data, len, o->output_userdata) : 0;
}

/* The stage's user as numbers, through its disk's /etc/passwd (root when it names none). */
int build_stage_user(struct build *b, const struct df_instr *in, const struct state *st, struct unpack_result *u)
{
	memset(u, 0, sizeof(*u));
	const char *user = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st->config, "user"));
	snprintf(u->home, sizeof(u->home), "/root");
	if (!user || !*user)
		return 0;
	char img[PATH_MAX + 16];
	snprintf(img, sizeof(img), "%s/rootfs.ext4", st->disk);
	int r = unpack_check_user(b->ctx, img, user, u);
	if (r < 0) {
		char msg[sizeof(b->ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
		return ctx_error_msg(b->ctx, r, "line %u: USER %s: %s", in->line, user, msg);
	}
	return 0;
}

/* A disk step whose key is complete: true when the cache holds its result (st->disk becomes it), false when
 * it must run; either way the progress line says which. */
static bool step_cached(struct build *b, const struct df_instr *in, struct state *st)
{
	char disk[PATH_MAX];
	bool hit = !b->o->no_cache && build_cached(b, st->key, disk, sizeof(disk));
	build_progress(b, in, hit);
	if (hit)
		snprintf(st->disk, sizeof(st->disk), "%s", disk);
	return hit;
}

int build_step_run(struct build *b, const struct df_instr *in, struct state *st)
{
	/* The key: the command and everything it runs with (ENV and WORKDIR are in the chain already). */
	cJSON *k = cJSON_CreateArray();
	for (size_t i = 0; k && i < in->n_args; i++)
		cJSON_AddItemToArray(k, cJSON_CreateString(in->args[i]));
	for (size_t i = 0; k && st->args[i]; i++)
		cJSON_AddItemToArray(k, cJSON_CreateString(st->args[i]));
	_cleanup_free_ char *kt = k ? cJSON_PrintUnformatted(k) : NULL;
	cJSON_Delete(k);
	if (!kt)
		return -ENOMEM;
	char text[BUILD_KEY_LEN + 16];
	snprintf(text, sizeof(text), "RUN %d", in->json);
	build_key_next(st->key, text, strlen(text));
	build_key_next(st->key, kt, strlen(kt));
	if (step_cached(b, in, st))
		return 0;
	struct unpack_result u;
	int r = build_stage_user(b, in, st, &u);
	if (r < 0)
		return r;
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = ".build"; /* no template's defaults: the stage's own are given to the exec */
	so.isolation = b->o->isolation;
	so.cpus = b->o->cpus;
	so.memory_mib = b->o->memory_mib;
	so.network_policy = b->o->network_policy;
	so.network_policy_trusted = b->o->network_policy_trusted;
	space_sandbox *sb;
	if ((r = sandbox_create_from(b->ctx, &so, st->disk, &sb)) < 0)
		return r;
	char **env = build_vars(st);
	size_t ne = 0;
	while (env && env[ne])
		ne++;
	char home[300];
	snprintf(home, sizeof(home), "HOME=%s", u.home);
	const char **full = env ? calloc(ne + 2, sizeof(char *)) : NULL;
	if (full) {
		full[0] = home; /* before the stage's own: an ENV HOME wins */
		memcpy(full + 1, env, ne * sizeof(char *));
	}
	const char *shell[] = { "/bin/sh", "-c", in->args[0], NULL };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = in->json ? (const char *const *)in->args : shell;
	eo.env = full;
	eo.cwd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st->config, "working_dir"));
	eo.uid = u.uid;
	eo.gid = u.gid;
	eo.flags = SPACE_EXEC_USER;
	eo.output = run_output;
	eo.userdata = (void *)b->o;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	r = full ? space_sandbox_exec(sb, &eo, &res) : -ENOMEM;
	free(full);
	free(env);
	char tmp[PATH_MAX];
	if (r == 0 && !(res.exited && res.exit_code == 0)) {
		char why[64];
		if (res.exited)
			snprintf(why, sizeof(why), "exit status %d", res.exit_code);
		else
			snprintf(why, sizeof(why), "killed by signal %d", res.signal);
		char cmd[96];
		util_text_one_line(in->text, cmd, sizeof(cmd));
		r = ctx_error_msg(b->ctx, -ECANCELED, "line %u: RUN %s: %s", in->line, cmd, why);
	} else if (r < 0) {
		char msg[sizeof(b->ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
		r = ctx_error_msg(b->ctx, r, "line %u: RUN: %s", in->line, msg);
	}
	if (r < 0) {
		char msg[sizeof(b->ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
		(void)space_sandbox_destroy(sb);
		space_sandbox_free(sb);
		snprintf(b->ctx->last_error, sizeof(b->ctx->last_error), "%s", msg);
		return r;
	}
	/* Everything written reaches the disk before the sandbox stops (a jail's file system is unmounted
	 * clean when its namespace goes; a VM's is synced here, its journal replayed at the next mount). */
	(void)agent_sync(sandbox_addr(sb), NULL);
	if ((r = core_pool_tmp_path(b->ctx, b->root, tmp, sizeof(tmp))) == 0)
		r = sandbox_destroy_keeping_disk(sb, tmp);
	space_sandbox_free(sb);
	if (r == 0) {
		if ((r = build_cache_put(b, tmp, st->key, st->disk, sizeof(st->disk))) < 0)
			(void)store_btrfs_subvolume_delete(tmp);
	}
	return r;
}

/* ---- COPY, ADD, WORKDIR ---- */

/* A writable snapshot of the stage's disk with layers (and a directory) applied, as the entry of key. */
static int disk_add(struct build *b, const struct df_instr *in, struct state *st, const struct unpack_add *req)
{
	char tmp[PATH_MAX], img[PATH_MAX + 16];
	int r = core_pool_tmp_path(b->ctx, b->root, tmp, sizeof(tmp));
	if (r < 0)
		return r;
	if ((r = store_btrfs_snapshot(st->disk, tmp, false)) < 0)
		return ctx_error(b->ctx, r, "snapshot %s", st->disk);
	snprintf(img, sizeof(img), "%s/rootfs.ext4", tmp);
	struct unpack_result res;
	r = unpack_add(b->ctx, img, req, &res);
	if (r < 0) {
		char msg[sizeof(b->ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
		r = ctx_error_msg(b->ctx, r, "line %u: %s: %s", in->line, dockerfile_keyword(in->op), msg);
	}
	if (r == 0)
		r = build_cache_put(b, tmp, st->key, st->disk, sizeof(st->disk));
	if (r < 0)
		(void)store_btrfs_subvolume_delete(tmp);
	return r;
}

/* dest as an absolute, normalized path in the image (relative to the working directory); *is_dir when it
 * ends in '/'. */
static int image_dest(struct build *b, const struct df_instr *in, const struct state *st, const char *word,
		      char *out, size_t len, bool *is_dir)
{
	_cleanup_free_ char *d = NULL;
	int r = build_expand(b, in, word, st, &d);
	if (r < 0)
		return r;
	const char *wd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st->config, "working_dir"));
	char joined[2 * PATH_MAX];
	snprintf(joined, sizeof(joined), "%s/%s", d[0] == '/' || !wd ? "" : wd, d);
	*is_dir = d[strlen(d) - 1] == '/' || !strcmp(d, ".");
	if (tar_path_normalize(joined, out, len) < 0)
		return ctx_error_msg(b->ctx, -EINVAL, "line %u: '%s' is not a path of the image (no '..')", in->line, d);
	return 0;
}

static int owner_of(struct build *b, const struct df_instr *in, const struct state *st, bool *chown, uint32_t *uid,
		    uint32_t *gid)
{
	*chown = false;
	if (!in->chown)
		return 0;
	_cleanup_free_ char *spec = NULL;
	int r = build_expand(b, in, in->chown, st, &spec);
	if (r < 0)
		return r;
	char img[PATH_MAX + 16];
	snprintf(img, sizeof(img), "%s/rootfs.ext4", st->disk);
	struct unpack_result u;
	if ((r = unpack_check_user(b->ctx, img, spec, &u)) < 0 || !u.has_user) {
		char msg[sizeof(b->ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
		return ctx_error_msg(b->ctx, r < 0 ? r : -ENOENT, "line %u: --chown=%s: %s", in->line, spec, msg);
	}
	*chown = true;
	*uid = u.uid;
	*gid = u.gid;
	return 0;
}

static const struct stage *stage_named(struct build *b, const char *name)
{
	char *end;
	unsigned long idx = strtoul(name, &end, 10);
	if (!*end && end != name)
		return idx < b->n_stages ? &b->stages[idx] : NULL;
	for (size_t i = 0; i < b->n_stages; i++)
		if (b->stages[i].name[0] && !strcasecmp(b->stages[i].name, name))
			return &b->stages[i];
	return NULL;
}

static int work_file(struct build *b, int *ret)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/.tmp", b->root);
	(void)mkdir(dir, 0700);
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return ctx_error(b->ctx, -errno, "a work file in %s", dir);
	*ret = fd;
	return 0;
}

static int file_digest(int fd, char *out)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return -ENOMEM;
	}
	uint8_t buf[1 << 16];
	ssize_t k;
	off_t off = 0;
	while ((k = pread(fd, buf, sizeof(buf), off)) > 0) {
		EVP_DigestUpdate(md, buf, (size_t)k);
		off += k;
	}
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_DigestFinal_ex(md, d, &n);
	EVP_MD_CTX_free(md);
	size_t at = (size_t)snprintf(out, BUILD_KEY_LEN, "sha256:");
	for (unsigned i = 0; i < n; i++)
		at += (size_t)snprintf(out + at, BUILD_KEY_LEN - at, "%02x", d[i]);
	return k < 0 ? -errno : 0;
}

int build_step_copy(struct build *b, const struct df_instr *in, struct state *st)
{
	size_t n = in->n_args - 1;
	char dest[TAR_PATH_MAX + 1];
	bool dest_dir;
	int r = image_dest(b, in, st, in->args[n], dest, sizeof(dest), &dest_dir);
	if (r < 0)
		return r;
	dest_dir |= n > 1;
	if (!dest_dir && !strpbrk(in->args[0], "*?[")) {
		/* COPY file /existing-dir: into it, as Docker does (never over it) */
		char img[PATH_MAX + 16], abs[TAR_PATH_MAX + 2];
		snprintf(img, sizeof(img), "%s/rootfs.ext4", st->disk);
		snprintf(abs, sizeof(abs), "/%s", dest);
		if ((r = unpack_check_isdir(b->ctx, img, abs, &dest_dir)) < 0)
			return r;
	}
	bool chown = false;
	uint32_t uid = 0, gid = 0;
	if ((r = owner_of(b, in, st, &chown, &uid, &gid)) < 0)
		return r;
	char **srcs = calloc(n + 1, sizeof(char *));
	if (!srcs)
		return -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		if (in->json && !strchr(in->args[i], '$'))
			r = (srcs[i] = strdup(in->args[i])) ? 0 : -ENOMEM;
		else
			r = build_expand(b, in, in->args[i], st, &srcs[i]);
		if (r == 0 && in->op == DF_ADD && (!strncmp(srcs[i], "http://", 7) || !strncmp(srcs[i], "https://", 8)))
			r = ctx_error_msg(b->ctx, -EOPNOTSUPP,
					  "line %u: ADD of a URL: builds fetch nothing; download it into the context and "
					  "ADD that file",
					  in->line);
	}
	struct image_layer layers[8];
	size_t nl = 0;
	int fds[8];
	int copyfd = -1;
	char key[BUILD_KEY_LEN + TAR_PATH_MAX + 64];
	const struct stage *from = in->from ? stage_named(b, in->from) : NULL;
	if (r == 0 && in->from && !from)
		r = ctx_error_msg(b->ctx, -ENOENT, "line %u: COPY --from=%s: no earlier stage of that name", in->line,
				  in->from);
	struct unpack_add req = { .chown = chown, .uid = uid, .gid = gid };
	char into[TAR_PATH_MAX + 2];
	const char *src_image = NULL;
	char img[PATH_MAX + 16];
	if (r == 0 && from) {
		snprintf(img, sizeof(img), "%s/rootfs.ext4", from->st.disk);
		src_image = img;
	} else if (r == 0 && b->ctx_image[0]) {
		src_image = b->ctx_image; /* an uploaded context, made a file system by space-unpack */
		req.chown = true;         /* owned by root unless --chown, as from a context directory */
		if (in->op == DF_ADD)
			r = ctx_error_msg(b->ctx, -EOPNOTSUPP,
					  "line %u: ADD from an uploaded context is not supported (use COPY, and RUN tar to "
					  "extract an archive)",
					  in->line);
	}
	if (r == 0 && src_image) {
		/* From a disk that is not the host's (another stage's, a RUN's work; an upload): each source exported
		 * by space-unpack, named for dest, applied under into. */
		const char *slash = strrchr(dest, '/');
		const char *as = dest_dir ? "." : slash ? slash + 1 : dest;
		snprintf(into, sizeof(into), "%.*s", dest_dir ? (int)strlen(dest) : slash ? (int)(slash - dest) : 0, dest);
		req.into = into;
		snprintf(key, sizeof(key), "COPY --from %s %s %d %u:%u", from ? from->st.key : "context", dest, dest_dir,
			 chown ? uid : 0, chown ? gid : 0);
		for (size_t i = 0; r == 0 && i < n; i++) {
			char abs[TAR_PATH_MAX + 2], dg[BUILD_KEY_LEN];
			int fd = -1;
			if (strpbrk(srcs[i], "*?[") && !from) {
				r = ctx_error_msg(b->ctx, -EOPNOTSUPP, "line %u: wildcards need a context directory", in->line);
				break;
			}
			if (nl == 8) {
				r = ctx_error_msg(b->ctx, -E2BIG, "line %u: more than 8 sources", in->line);
				break;
			}
			snprintf(abs, sizeof(abs), "%s%s", srcs[i][0] == '/' ? "" : "/", srcs[i]);
			if ((r = work_file(b, &fd)) < 0)
				break;
			char self[64];
			snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
			int ro = -1;
			struct stat fst;
			if ((r = unpack_export_path(b->ctx, src_image, abs, as, fd)) == 0 && (r = file_digest(fd, dg)) == 0) {
				ro = open(self, O_RDONLY | O_CLOEXEC);
				if (ro < 0 || fstat(ro, &fst) < 0)
					r = ctx_error(b->ctx, -errno, "reopen a work file");
			} else if (r < 0) {
				char msg[sizeof(b->ctx->last_error)];
				snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
				r = ctx_error_msg(b->ctx, r, "line %u: COPY %s: %s", in->line, srcs[i], msg);
			}
			close(fd);
			if (r < 0) {
				if (ro >= 0)
					close(ro);
				break;
			}
			fds[nl] = ro;
			layers[nl++] = (struct image_layer){ .fd = ro, .length = (uint64_t)fst.st_size, .comp = "none" };
			size_t kl = strlen(key);
			snprintf(key + kl, sizeof(key) - kl, " %s %s", srcs[i], dg);
		}
	} else if (r == 0) {
		/* From the context: ADD's archives are applied as they are, the rest goes in one tar stream. */
		char **plain = calloc(n + 1, sizeof(char *));
		size_t np = 0;
		snprintf(key, sizeof(key), "%s %s %d %u:%u", dockerfile_keyword(in->op), dest, dest_dir, uid, gid);
		for (size_t i = 0; plain && i < n && r == 0; i++) {
			if (in->op != DF_ADD || !build_is_archive(b->ctx, b->ctxfd, srcs[i])) {
				plain[np++] = srcs[i];
				continue;
			}
			if (nl == 7) {
				r = ctx_error_msg(b->ctx, -E2BIG, "line %u: ADD of more than 7 archives", in->line);
				break;
			}
			int fd = build_open_source(b->ctxfd, srcs[i]);
			struct stat sst;
			char dg[BUILD_KEY_LEN];
			if (fd < 0 || fstat(fd, &sst) < 0 || (r = file_digest(fd, dg)) < 0) {
				r = ctx_error(b->ctx, fd < 0 ? fd : r < 0 ? r : -errno, "line %u: ADD %s", in->line, srcs[i]);
				if (fd >= 0)
					close(fd);
				break;
			}
			fds[nl] = fd;
			layers[nl++] = (struct image_layer){ .fd = fd, .length = (uint64_t)sst.st_size, .comp = "auto" };
			size_t kl = strlen(key);
			snprintf(key + kl, sizeof(key) - kl, " archive %s", dg);
			req.into = dest;
			req.plain = true;
		}
		if (!plain)
			r = -ENOMEM;
		if (r == 0 && np) {
			struct build_copy c = { .ctxfd = b->ctxfd, .ignore = b->ignore, .srcs = plain, .n_srcs = np,
						.dest = dest, .dest_is_dir = dest_dir, .chown = chown, .uid = uid, .gid = gid };
			char ck[BUILD_KEY_LEN];
			if ((r = work_file(b, &copyfd)) == 0 && (r = build_copy_tar(b->ctx, &c, copyfd, ck)) == 0) {
				size_t kl = strlen(key);
				snprintf(key + kl, sizeof(key) - kl, " files %s", ck);
			} else if (r < 0) {
				char msg[sizeof(b->ctx->last_error)];
				snprintf(msg, sizeof(msg), "%s", b->ctx->last_error);
				r = ctx_error_msg(b->ctx, r, "line %u: %s", in->line, msg);
			}
		}
		free(plain);
	}
	if (r == 0) {
		build_key_next(st->key, key, strlen(key));
		if (!step_cached(b, in, st)) {
			/* space-unpack takes its sources read-only: the work file again, opened so */
			struct stat cst;
			char self[64];
			snprintf(self, sizeof(self), "/proc/self/fd/%d", copyfd);
			int ro = copyfd >= 0 ? open(self, O_RDONLY | O_CLOEXEC) : -1;
			if (copyfd >= 0) {
				close(copyfd);
				copyfd = ro;
				if (ro < 0)
					r = ctx_error(b->ctx, -errno, "reopen a work file");
			}
			struct image_layer files = { .fd = copyfd, .comp = "none" };
			if (copyfd >= 0 && fstat(copyfd, &cst) == 0)
				files.length = (uint64_t)cst.st_size;
			if (r < 0) {
				/* the work file could not be opened again */
			} else if (src_image) {
				/* the exported files, named for dest, under into */
				req.layers = layers;
				req.n_layers = nl;
				r = disk_add(b, in, st, &req);
			} else {
				/* ADD's archives under dest, taken as they are (plain); then the context's files, which
				 * the tar names from the root: two passes when a step has both */
				struct unpack_add arch = req, rest = { .layers = &files, .n_layers = 1 };
				arch.layers = layers;
				arch.n_layers = nl;
				if (nl && copyfd >= 0) {
					struct state half = *st;
					build_key_next(half.key, "archives", 8);
					if ((r = disk_add(b, in, &half, &arch)) == 0) {
						snprintf(st->disk, sizeof(st->disk), "%s", half.disk);
						r = disk_add(b, in, st, &rest);
					}
				} else {
					r = disk_add(b, in, st, nl ? &arch : &rest);
				}
			}
		}
	}
	for (size_t i = 0; i < nl; i++)
		close(fds[i]);
	if (copyfd >= 0)
		close(copyfd);
	for (size_t i = 0; i < n; i++)
		free(srcs[i]);
	free(srcs);
	return r;
}

int build_step_workdir(struct build *b, const struct df_instr *in, struct state *st)
{
	char dir[TAR_PATH_MAX + 1];
	bool is_dir;
	int r = image_dest(b, in, st, in->args[0], dir, sizeof(dir), &is_dir);
	if (r < 0)
		return r;
	char abs[TAR_PATH_MAX + 2];
	snprintf(abs, sizeof(abs), "/%s", dir);
	cJSON_DeleteItemFromObject(st->config, "working_dir");
	cJSON_AddStringToObject(st->config, "working_dir", abs);
	char text[TAR_PATH_MAX + 16];
	snprintf(text, sizeof(text), "WORKDIR %s", abs);
	build_key_next(st->key, text, strlen(text));
	if (step_cached(b, in, st))
		return 0;
	struct unpack_add req = { .workdir = abs };
	return disk_add(b, in, st, &req);
}

