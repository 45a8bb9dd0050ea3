/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Periodic file snapshots (space.h, "Periodic file snapshots").
 *
 * The library runs in its caller's process and has no daemon, so each sandbox with a policy gets a small
 * helper, space-snapd (src/snapd), spawned detached in its own session when the sandbox starts. The policy
 * lives in the sandbox row's metadata JSON as "snapshots": {"every": N, "keep": K} (the caller's choice,
 * handed back as given), the helper's pid with its start time (against pid reuse) in the row's helper
 * columns (store/sandboxes.h), so any process can show it and stop the helper. The helper only ever calls
 * autosnap_take(); everything else happens in the lifecycle's process.
 *
 * Automatic checkpoints are ordinary checkpoints named "auto-<unix seconds>": they list, roll back and
 * fork like any other. A template's default policy is kept in the store's meta table under
 * "snapshots.template.<name>" together with the template's creation time, so a later template of the
 * same name does not inherit it.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/sandbox.h"
#include "core/backend.h"
#include "core/vm_backend.h" /* VM_SNAPSHOT_FILE, VM_SNAPSHOT_META */
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "store/checkpoints.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/spawn.h"
#include "util/util.h"

#define HELPER "space-snapd"
#define HELPER_READY_TIMEOUT_MS 10000
/* A snapshot in progress (sync, freeze, snapshot, thaw) is let finish: SIGKILL in the middle of it could
 * leave the sandbox's filesystem frozen. */
#define HELPER_STOP_TIMEOUT_MS 30000
#define AUTO_PREFIX "auto-"


bool core_checkpoint_name_automatic(const char *name)
{
	if (!name || strncmp(name, AUTO_PREFIX, strlen(AUTO_PREFIX)))
		return false;
	const char *p = name + strlen(AUTO_PREFIX);
	size_t n = strspn(p, "0123456789");
	return n > 0 && n <= 20 && p[n] == '\0';
}

int autosnap_validate(space_ctx *ctx, uint32_t every_s, uint32_t keep)
{
	if (every_s > AUTOSNAP_EVERY_MAX)
		return ctx_error_msg(ctx, -EINVAL, "snapshot interval %u s out of range (1..%u seconds)", every_s,
				     AUTOSNAP_EVERY_MAX);
	if (keep > AUTOSNAP_KEEP_MAX)
		return ctx_error_msg(ctx, -EINVAL, "snapshots to keep %u out of range (1..%u)", keep, AUTOSNAP_KEEP_MAX);
	if (keep && !every_s)
		return ctx_error_msg(ctx, -EINVAL, "a number of snapshots to keep needs an interval to take them at");
	return 0;
}

/* ---- the policy in metadata ------------------------------------------------------------------------ */

static uint32_t json_u32(const cJSON *o, const char *key, uint32_t max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > max)
		return 0;
	return (uint32_t)v->valuedouble;
}

void autosnap_policy_parse(const char *metadata, struct space_snapshot_policy *ret)
{
	memset(ret, 0, sizeof(*ret));
	cJSON *j = metadata ? cJSON_Parse(metadata) : NULL;
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "snapshots");
	if (cJSON_IsObject(p)) {
		ret->every_s = json_u32(p, "every", AUTOSNAP_EVERY_MAX);
		ret->keep = json_u32(p, "keep", AUTOSNAP_KEEP_MAX);
	}
	cJSON_Delete(j);
}

int autosnap_policy_load(space_ctx *ctx, const char *id, struct space_snapshot_policy *ret, uint64_t *ret_pid_start)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	struct store_sandbox row;
	r = store_sandbox_get(s, id, &row);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "no sandbox %s (see `space ls`)", id);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	autosnap_policy_parse(row.metadata, ret);
	ret->pid = row.helper.pid;
	if (ret_pid_start)
		*ret_pid_start = row.helper.start_time;
	store_sandbox_clear(&row);
	return 0;
}

/* metadata with "snapshots" replaced (removed when every_s is 0); NULL on allocation failure. Keys of
 * older libspace versions in it (the helper's pid) go with it. */
static char *policy_into(const char *metadata, uint32_t every_s, uint32_t keep)
{
	cJSON *j = metadata ? cJSON_Parse(metadata) : NULL;
	if (!j)
		j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(j, "snapshots");
	if (every_s) {
		cJSON *p = cJSON_AddObjectToObject(j, "snapshots");
		cJSON_AddNumberToObject(p, "every", every_s);
		cJSON_AddNumberToObject(p, "keep", keep);
	}
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* Records the policy and helper of a sandbox in its row, reading and writing the metadata in one
 * transaction so that no other change to it is lost. */
static int policy_store(space_ctx *ctx, const char *id, uint32_t every_s, uint32_t keep, int pid, uint64_t pid_start)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	struct store_sandbox row;
	_cleanup_free_ char *meta = NULL;
	r = store_sandbox_get(s, id, &row);
	if (r == 0) {
		meta = policy_into(row.metadata, every_s, keep);
		store_sandbox_clear(&row);
		r = meta ? store_sandbox_set_metadata(s, id, meta) : -ENOMEM;
	}
	/* After the metadata: a store of schema 7 clears the helper columns when a write drops the old key. */
	struct store_proc helper = { .pid = pid > 0 ? pid : 0, .start_time = pid > 0 ? pid_start : 0,
				     .pidns = pid > 0 ? util_pidns_self() : 0 };
	if (r == 0)
		r = store_sandbox_set_helper(s, id, &helper);
	char detail[96];
	if (pid > 0)
		snprintf(detail, sizeof(detail), "every %us, keep %u (space-snapd pid %d)", every_s, keep, pid);
	else
		snprintf(detail, sizeof(detail), every_s ? "every %us, keep %u" : "off", every_s, keep);
	return ctx_store_finish(ctx, s, r, id, "snapshots", detail);
}

int core_sandbox_get_snapshot_policy(space_ctx *ctx, const char *id, struct space_snapshot_policy *ret)
{
	CTX_ENTER(ctx);
	if (!ctx || !id || !ret)
		return -EINVAL;
	uint64_t start;
	int r = autosnap_policy_load(ctx, id, ret, &start);
	if (r < 0)
		return r;
	if (ret->pid > 0 && !core_process_alive(ret->pid, start))
		ret->pid = 0;
	return 0;
}

/* ---- template defaults ----------------------------------------------------------------------------- */

static int template_key(space_ctx *ctx, const char *name, char *key, size_t len, struct template_info *t)
{
	int r = core_template_get(ctx, name, t);
	if (r < 0)
		return r;
	snprintf(key, len, "snapshots.template.%s", t->name);
	return 0;
}

SPACE_API int space_template_set_snapshot_policy(space_ctx *ctx, const char *name, uint32_t every_s, uint32_t keep)
{
	CTX_ENTER(ctx);
	if (!ctx || !name)
		return -EINVAL;
	int r = autosnap_validate(ctx, every_s, keep);
	if (r < 0)
		return r;
	struct template_info t;
	char key[128];
	r = template_key(ctx, name, key, sizeof(key), &t);
	if (r < 0)
		return r;
	char val[128] = "";
	if (every_s)
		snprintf(val, sizeof(val), "{\"every\":%u,\"keep\":%u,\"template_created_ms\":%lld}", every_s,
			 keep ? keep : AUTOSNAP_KEEP_DEFAULT, (long long)t.created_ms);
	struct store *s = ctx->store;
	r = store_meta_set(s, key, val);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	return 0;
}

int core_template_get_snapshot_policy(space_ctx *ctx, const char *name, struct space_snapshot_policy *ret)
{
	CTX_ENTER(ctx);
	if (!ctx || !name || !ret)
		return -EINVAL;
	struct template_info t;
	char key[128];
	int r = template_key(ctx, name, key, sizeof(key), &t);
	if (r < 0)
		return r;
	struct space_snapshot_policy p = { 0 };
	_cleanup_free_ char *val = NULL;
	if (store_meta_get(ctx->store, key, &val) == 0 && val) {
		cJSON *j = cJSON_Parse(val);
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "template_created_ms");
		if (cJSON_IsNumber(c) && (int64_t)c->valuedouble == t.created_ms) {
			p.every_s = json_u32(j, "every", AUTOSNAP_EVERY_MAX);
			p.keep = p.every_s ? json_u32(j, "keep", AUTOSNAP_KEEP_MAX) : 0;
		}
		cJSON_Delete(j);
	}
	*ret = p;
	return 0;
}

/* ---- the helper ------------------------------------------------------------------------------------ */

/* Ends a helper: SIGTERM, which it acts on between snapshots, then SIGKILL if it does not exit. */
static void helper_stop(space_ctx *ctx, const char *id, int pid, uint64_t start)
{
	if (pid <= 0)
		return;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return;
	if (core_process_alive(pid, start) && syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0) == 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		if (poll(&p, 1, HELPER_STOP_TIMEOUT_MS) == 0) {
			ctx_log(ctx, SPACE_LOG_WARNING, "%s %d of %s did not stop in time: killing it", HELPER, pid, id);
			syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
			(void)poll(&p, 1, 5000);
		}
	}
	close(pfd);
}

/* Reads "ready <pid>" from the helper's status pipe. */
static int read_ready(int fd, int *ret_pid)
{
	char buf[64];
	/* A helper that ended before its line is a protocol failure, as a wrong line is. */
	int r = util_read_line_timeout(fd, buf, sizeof(buf), HELPER_READY_TIMEOUT_MS);
	if (r < 0 && r != -EPIPE)
		return r;
	int pid;
	if (sscanf(buf, "ready %d", &pid) != 1 || pid <= 0)
		return -EPROTO;
	*ret_pid = pid;
	return 0;
}

/* Spawns space-snapd for a sandbox. It detaches itself (forks, so it is nobody's child) and reports the
 * pid that stays on fd 3. */
static int helper_start(space_ctx *ctx, const struct sandbox_row *row, uint32_t every_s, uint32_t keep, int *ret_pid)
{
	char path[PATH_MAX], logp[PATH_MAX];
	int r = ctx_helper_path(ctx, HELPER, path, sizeof(path));
	if (r < 0)
		return r;
	snprintf(logp, sizeof(logp), "%s/snapd.log", row->runtime_dir);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return ctx_error(ctx, -errno, "pipe");
	_cleanup_close_ int rd = pfd[0];
	char every[16], kp[16];
	snprintf(every, sizeof(every), "%u", every_s);
	snprintf(kp, sizeof(kp), "%u", keep);
	const char *argv[] = { HELPER, "--state", ctx->state_dir, "--sandbox", row->info.id, "--every", every,
			       "--keep", kp, NULL };
	/* In the sandbox's helpers' cgroup, which a pause does not freeze (util/stop.h). */
	char cgroup[UTIL_CGROUP_SPEC_MAX];
	if ((r = util_spawn_helpers_cgroup(row->info.id, cgroup, sizeof(cgroup))) < 0) {
		close(pfd[1]);
		return ctx_error(ctx, r, "the helpers' cgroup of %s", row->info.id);
	}
	_cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int log = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (null < 0 || log < 0) {
		r = -errno;
		close(pfd[1]);
		return ctx_error(ctx, r, "open %s", null < 0 ? "/dev/null" : logp);
	}
	const int want[4] = { null, log, log, pfd[1] };
	const struct util_spawn_opts so = { .path = path, .argv = argv, .fds = want, .n_fds = 4, .new_session = true,
					    .cgroup = cgroup };
	struct util_child child;
	int e = util_spawn(&so, &child);
	close(pfd[1]);
	if (e < 0)
		return ctx_error(ctx, e, "start %s", path);
	r = read_ready(rd, ret_pid);
	while (waitpid(child.pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (child.pidfd >= 0)
		close(child.pidfd);
	if (r < 0)
		return ctx_error_msg(ctx, r, "%s did not start: %s (see %s)", HELPER, space_strerror(r), logp);
	return 0;
}

int autosnap_started(space_ctx *ctx, const char *id, const char *template_name,
		     const struct space_sandbox_options *o)
{
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	struct space_snapshot_policy p;
	uint64_t start = 0;
	if ((r = autosnap_policy_load(ctx, id, &p, &start)) < 0) {
		sandbox_row_clear(&row);
		return r;
	}
	helper_stop(ctx, id, p.pid, start); /* one from before a restart */
	if (o) {
		p.every_s = o->snapshot_every_s;
		p.keep = o->snapshot_keep;
		if (!p.every_s && template_name)
			(void)core_template_get_snapshot_policy(ctx, template_name, &p);
		ctx->last_error[0] = '\0';
	}
	if (p.every_s) {
		if (!p.keep)
			p.keep = AUTOSNAP_KEEP_DEFAULT;
		int pid = 0;
		r = helper_start(ctx, &row, p.every_s, p.keep, &pid);
		if (r == 0 && (r = policy_store(ctx, id, p.every_s, p.keep, pid, core_process_start_time(pid))) < 0)
			helper_stop(ctx, id, pid, 0); /* through its pidfd, like every stop of it */
		if (r == 0)
			ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s: snapshots every %us, keeping %u (%s pid %d)", id,
				p.every_s, p.keep, HELPER, pid);
	}
	sandbox_row_clear(&row);
	return r;
}

/* Removes the sandbox's automatic checkpoints, oldest first, until at most keep remain. Takes no lock:
 * autosnap_take holds it; a destroy calls this before it takes it (the sandbox is going away). */
static int prune(space_ctx *ctx, const char *id, uint32_t keep)
{
	struct checkpoint_info *list;
	size_t n;
	int r = core_checkpoint_list(ctx, id, &list, &n);
	if (r < 0)
		return r;
	size_t autos = 0;
	for (size_t i = 0; i < n; i++)
		autos += core_checkpoint_name_automatic(list[i].name);
	for (size_t i = 0; i < n && autos > keep; i++) {
		if (!core_checkpoint_name_automatic(list[i].name))
			continue;
		int t = checkpoint_remove_held(ctx, &list[i]);
		if (t < 0 && t != -ENOENT && r == 0)
			r = t;
		autos--;
	}
	free(list);
	return r;
}

int autosnap_before_restart(space_ctx *ctx, const char *id, const char *metadata, const char *disk_src)
{
	(void)metadata; /* the row is read again: the helper is in its columns */
	struct space_snapshot_policy p;
	uint64_t start = 0;
	if (autosnap_policy_load(ctx, id, &p, &start) < 0 || !p.every_s)
		return 0;
	helper_stop(ctx, id, p.pid, start);
	if (access(disk_src, F_OK) == 0)
		return 0;
	(void)autosnap_started(ctx, id, NULL, NULL);
	return ctx_error_msg(ctx, -ENOENT, "%s is gone: the sandbox's periodic snapshots pruned it meanwhile",
			     disk_src);
}

void autosnap_destroying(space_ctx *ctx, const char *id, const char *metadata)
{
	(void)metadata; /* the row is read again: the helper is in its columns */
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	struct space_snapshot_policy p;
	uint64_t start = 0;
	if (autosnap_policy_load(ctx, id, &p, &start) < 0 || !p.every_s) {
		snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
		return;
	}
	helper_stop(ctx, id, p.pid, start);
	if (prune(ctx, id, 0) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "automatic checkpoints of %s: %s", id, ctx->last_error);
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
}

/* ---- one snapshot ---------------------------------------------------------------------------------- */

static int strip_vm_state(const char *snap)
{
	char f[PATH_MAX], g[PATH_MAX];
	snprintf(f, sizeof(f), "%s/%s", snap, VM_SNAPSHOT_FILE);
	snprintf(g, sizeof(g), "%s/%s", snap, VM_SNAPSHOT_META);
	if (access(f, F_OK) < 0 && access(g, F_OK) < 0)
		return 0;
	int r = store_btrfs_set_read_only(snap, false);
	if (r == 0 && ((unlink(f) < 0 && errno != ENOENT) || (unlink(g) < 0 && errno != ENOENT)))
		r = -errno;
	int t = store_btrfs_set_read_only(snap, true);
	return r < 0 ? r : t;
}

/* A sandbox's disk alone, without its memory: its guest flushes its filesystems, then the subvolume is
 * snapshotted (a VM keeps running). */
static int disk_only_snapshot(space_sandbox *sb, const struct sandbox_row *row, const char *name,
			    char ret_id[SPACE_CHECKPOINT_ID_MAX])
{
	space_ctx *ctx = sandbox_ctx(sb);
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	char cid[SPACE_CHECKPOINT_ID_MAX], path[PATH_MAX];
	r = core_new_id("cp-", cid, sizeof(cid));
	if (r < 0)
		return ctx_error(ctx, r, "random id");
	snprintf(path, sizeof(path), "%s/checkpoints", root);
	if ((r = util_mkdir_p(path, 0700)) < 0)
		return ctx_error(ctx, r, "create %s", path);
	snprintf(path, sizeof(path), "%s/checkpoints/%s", root, cid);
	struct agent_error aerr = { 0 };
	r = autosnap_sync(ctx, row->info.id, sandbox_addr(sb), &aerr);
	if (r < 0)
		return ctx_error_msg(ctx, r, "sync sandbox %s: %s", row->info.id, aerr.msg[0] ? aerr.msg : space_strerror(r));
	int64_t created = util_wall_ms();
	r = store_btrfs_snapshot(row->info.path, path, true);
	if (r < 0)
		return ctx_error(ctx, r, "snapshot %s", row->info.path);
	/* The state files of a full checkpoint being taken at the same moment are not part of the disk. */
	if (strip_vm_state(path) < 0) {
		(void)store_btrfs_subvolume_delete(path);
		return ctx_error(ctx, -EIO, "snapshot %s: remove vm state files", path);
	}
	struct store *s = ctx->store;
	struct store_checkpoint c = { .created_ms = created, .kind = "disk" };
	snprintf(c.id, sizeof(c.id), "%s", cid);
	snprintf(c.sandbox_id, sizeof(c.sandbox_id), "%s", row->info.id);
	snprintf(c.template_name, sizeof(c.template_name), "%s", row->info.template_name);
	snprintf(c.name, sizeof(c.name), "%s", name);
	snprintf(c.path, sizeof(c.path), "%s", path);
	r = store_begin(s);
	if (r == 0)
		r = store_checkpoint_insert(s, &c);
	r = ctx_store_finish(ctx, s, r, row->info.id, "checkpoint", cid);
	if (r < 0) {
		(void)store_btrfs_subvolume_delete(path);
		return r;
	}
	memcpy(ret_id, cid, sizeof(cid));
	return 0;
}

int autosnap_take(space_ctx *ctx, const char *id, uint32_t keep, char ret_id[SPACE_CHECKPOINT_ID_MAX])
{
	space_sandbox *sb;
	int r = space_sandbox_open(ctx, id, &sb);
	if (r < 0)
		return r;
	/* A short wait: the holder may be a rollback or destroy waiting for this helper to exit; this period
	 * is skipped then, and the helper sees its SIGTERM before the next. */
	int lock = store_lock_take(ctx->state_dir, id, AUTOSNAP_LOCK_WAIT_MS);
	if (lock < 0) {
		space_sandbox_free(sb);
		return ctx_error(ctx, lock, "sandbox %s: its lock (another operation on it is running)", id);
	}
	struct sandbox_row row;
	r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		goto out;
	char name[32];
	snprintf(name, sizeof(name), AUTO_PREFIX "%lld", (long long)(util_wall_ms() / 1000));
	/* A back-end whose checkpoints save memory (a VM's pause and RAM dump) would make each periodic
	 * snapshot costly: those take the disk alone; the others' checkpoints are of the disk already. A
	 * sandbox stopped while this waited for the lock is no longer snapshotted. */
	const struct backend_ops *ops;
	if (row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED)
		r = ctx_error_msg(ctx, -ESRCH, "sandbox %s is %s", id, space_sandbox_status_name(row.info.status));
	else if ((r = backend_for_row(ctx, &row, &ops)) == 0)
		r = ops->snapshot ? disk_only_snapshot(sb, &row, name, ret_id) : checkpoint_create_held(sb, name, ret_id);
	sandbox_row_clear(&row);
	if (r == 0)
		r = prune(ctx, id, keep ? keep : AUTOSNAP_KEEP_DEFAULT);
out:
	store_lock_release(lock);
	space_sandbox_free(sb);
	return r;
}
