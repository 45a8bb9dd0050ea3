/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Creating a sandbox: a row in state creating, its host uid, a clone of the template's (or a checkpoint's)
 * disk, its back-end's start (core/backend.h), its egress gateway, then running; on any failure the
 * steps done so far are undone in reverse order and the row says why it is destroyed. Also what a
 * restart (sandbox_restart.c) shares with creation: recording a started sandbox, finding a memory
 * snapshot to restore, attaching the gateway.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/backend.h"
#include "core/create_gate.h"
#include "core/info.h"
#include "core/internal.h"
#include "core/logcap.h"
#include "core/sandbox.h"
#include "core/trace.h"
#include "core/uids.h"
#include "core/warm_pool.h"
#include "net/net.h"
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "store/lock.h"
#include "store/sandboxes.h"
#include "store/templates.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/procstat.h"
#include "util/util.h"

static bool env_has(const char *const *env, const char *kv)
{
	size_t kl = strcspn(kv, "=");
	for (const char *const *e = env; e && *e; e++)
		if (!strncmp(*e, kv, kl) && (*e)[kl] == '=')
			return true;
	return false;
}

/*
 * The template image's process defaults (its config JSON, core/info.h) into the row: its Env first (the
 * caller's entries win; HOME the user's home unless the image sets it), and "defaults" (working directory,
 * user) for every exec (core/process.c).
 */
static void image_defaults(cJSON *j, cJSON *env, const struct space_sandbox_options *o, const char *image_config)
{
	cJSON *c = image_config ? cJSON_Parse(image_config) : NULL;
	if (!c)
		return;
	const cJSON *e;
	bool home = false;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "env")) {
		if (!cJSON_IsString(e) || env_has(o->env, e->valuestring))
			continue;
		home |= !strncmp(e->valuestring, "HOME=", 5);
		cJSON_AddItemToArray(env, cJSON_CreateString(e->valuestring));
	}
	const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "home"));
	if (!home && h && h[0] == '/' && !env_has(o->env, "HOME=")) {
		char kv[300];
		snprintf(kv, sizeof(kv), "HOME=%s", h);
		cJSON_AddItemToArray(env, cJSON_CreateString(kv));
	}
	cJSON *d = cJSON_AddObjectToObject(j, "defaults");
	const char *wd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "working_dir"));
	if (wd)
		cJSON_AddStringToObject(d, "cwd", wd);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(c, "uid"), *gid = cJSON_GetObjectItemCaseSensitive(c, "gid");
	if (cJSON_IsNumber(uid) && cJSON_IsNumber(gid)) {
		cJSON_AddNumberToObject(d, "uid", uid->valuedouble);
		cJSON_AddNumberToObject(d, "gid", gid->valuedouble);
	}
	cJSON_Delete(c);
}

static char *make_metadata(const struct space_sandbox_options *o, const char *image_config)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *env = cJSON_AddArrayToObject(j, "env");
	image_defaults(j, env, o, image_config);
	for (const char *const *e = o->env; e && *e; e++)
		cJSON_AddItemToArray(env, cJSON_CreateString(*e));
	if (o->hostname)
		cJSON_AddStringToObject(j, "hostname", o->hostname);
	/* The policy as given (secrets by reference: secret:, env:, file:) and its trust, so a restart can
	 * apply it again as it was allowed to be (core/sandbox_policy.c). */
	if (o->network_policy)
		cJSON_AddStringToObject(j, "network_policy", o->network_policy);
	char *s = sandbox_policy_to_meta(j, o) == 0 ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	return s;
}

static int insert_row(space_ctx *ctx, const struct sandbox_row *row, const char *metadata)
{
	struct store *s = ctx->store;
	const struct sandbox_info *b = &row->info;
	struct store_sandbox sr = {
		/* Until the sandbox has its own process, the creator's identifies a live creation. */
		.proc = { .pid = b->pid, .start_time = row->pid_start, .pidns = util_pidns_self() },
		.cpus = b->cpus,
		.memory_mib = b->memory_mib,
		.created_ms = b->created_ms,
		.expires_ms = b->expires_ms,
		.metadata = (char *)metadata,
	};
	snprintf(sr.id, sizeof(sr.id), "%s", b->id);
	snprintf(sr.template_name, sizeof(sr.template_name), "%s", b->template_name);
	snprintf(sr.isolation, sizeof(sr.isolation), "%s", b->isolation);
	snprintf(sr.path, sizeof(sr.path), "%s", b->path);
	snprintf(sr.runtime_dir, sizeof(sr.runtime_dir), "%s", row->runtime_dir);
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	r = store_sandbox_insert(s, &sr);
	return ctx_store_finish(ctx, s, r, b->id, "creating", b->template_name);
}

int sandbox_row_set_running(space_ctx *ctx, struct sandbox_row *row, const struct backend_proc *proc, char *meta,
			    const char *event, const char *detail)
{
	struct store *s = ctx->store;
	struct store_proc sp = { .pid = proc->pid, .start_time = proc->start_time, .pidns = util_pidns_self() };
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	/* From creating (create, fork) or a live status (restart, rollback): never from failed or destroyed. */
	r = store_sandbox_transition_proc(s, row->info.id, STORE_ST_LIVE, STORE_RUNNING, &sp, proc->cgroup,
					  proc->uid_base);
	if (r == 0)
		r = store_sandbox_set_metadata(s, row->info.id, meta);
	if (r == -ESTALE) {
		store_rollback(s);
		return ctx_error_msg(ctx, r, "sandbox %s changed status meanwhile: it cannot become running",
				     row->info.id);
	}
	r = ctx_store_finish(ctx, s, r, row->info.id, event, detail);
	if (r < 0)
		return r;
	row->info.status = SPACE_SANDBOX_RUNNING;
	row->info.reason[0] = '\0';
	row->info.pid = proc->pid;
	row->pid_start = proc->start_time;
	row->uid_base = proc->uid_base;
	snprintf(row->cgroup, sizeof(row->cgroup), "%s", proc->cgroup);
	free(row->metadata);
	row->metadata = meta;
	return 0;
}

bool sandbox_restore_source(space_ctx *ctx, const struct backend_ops *ops, const char *disk_src,
			    const struct space_sandbox_options *o, char *snap, size_t len, uint32_t *cpus,
			    uint32_t *memory_mib)
{
	/* Only a back-end that restores memory looks for a snapshot (a jail boots on the disk alone). */
	if (!ops->snapshot_find || ops->snapshot_find(disk_src, snap, len, cpus, memory_mib) < 0)
		return false;
	if ((o->cpus && o->cpus != *cpus) || (o->memory_mib && o->memory_mib != *memory_mib)) {
		ctx_log(ctx, SPACE_LOG_INFO, "%s holds a snapshot of a VM with %u vCPUs and %u MiB; booting afresh for %u "
					     "vCPUs and %u MiB", disk_src, *cpus, *memory_mib, o->cpus ? o->cpus : *cpus,
			o->memory_mib ? o->memory_mib : *memory_mib);
		return false;
	}
	return true;
}

/* For a jail its eth0, for a VM behind its TAP (the back-end's attach_network). */
int sandbox_net_attach(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row, pid_t pid,
		       const char *policy, bool trusted, const char *const *allow_resolve)
{
	char dir[PATH_MAX];
	struct net_policy_trust t;
	int r = sandbox_policy_trust(ctx, trusted, allow_resolve, &t, dir, sizeof(dir));
	if (r < 0)
		return r;
	return ops->attach_network(ctx, row, pid, policy, &t);
}

static int create_locked(space_ctx *ctx, const struct space_sandbox_options *o, const char *root, const char *tname,
			 const char *disk_src, const struct backend_ops *ops, struct op_trace *trace,
			 struct sandbox_row *rowp, space_sandbox **ret);

/*
 * The new sandbox's lock is held from before its row exists to the end (store/lock.h): a destroy of a row
 * still "creating" waits for the creation, and one that gets the lock knows the creator is gone. The row
 * (status creating, its runtime directory; its cgroup follows from the id, util/stop.h) is written before
 * any process of the sandbox starts, so nothing of it ever runs without a row that a destroy can end.
 */
static int create_checked(space_ctx *ctx, const struct space_sandbox_options *o, const char *root,
			  const char *tname, const char *disk_src, const struct backend_ops *ops, struct op_trace *trace,
			  space_sandbox **ret)
{
	struct sandbox_row row = { 0 };
	int r = core_new_id("sb-", row.info.id, sizeof(row.info.id));
	if (r < 0)
		return ctx_error(ctx, r, "random id");
	int lock = -1;
	if ((r = core_sandbox_lock(ctx, row.info.id, &lock)) < 0)
		return r;
	trace_mark(trace, "lock");
	r = create_locked(ctx, o, root, tname, disk_src, ops, trace, &row, ret);
	if (r < 0) /* undone (the row says destroyed): locks/ does not keep a file per failed create */
		store_lock_remove(ctx->state_dir, row.info.id, lock);
	store_lock_release(lock);
	return r;
}

static int create_locked(space_ctx *ctx, const struct space_sandbox_options *o, const char *root, const char *tname,
			 const char *disk_src, const struct backend_ops *ops, struct op_trace *trace,
			 struct sandbox_row *rowp, space_sandbox **ret)
{
	struct sandbox_row row = *rowp;
	struct sandbox_info *b = &row.info;
	row.trace = trace; /* begun by the caller: its checks and the lock are its first steps */
	int r;
	/* An image template's process defaults (none when the template has none, or is gone: a fork). */
	_cleanup_free_ char *image_config = NULL;
	if (store_template_get_image_config(ctx->store, tname, &image_config) < 0)
		image_config = NULL;
	snprintf(b->template_name, sizeof(b->template_name), "%s", tname);
	snprintf(b->isolation, sizeof(b->isolation), "%s", ops->name);
	b->cpus = o->cpus ? o->cpus : 1;
	b->memory_mib = o->memory_mib ? o->memory_mib : 512;
	char snap[PATH_MAX];
	uint32_t snap_cpus, snap_mem;
	bool restore = sandbox_restore_source(ctx, ops, disk_src, o, snap, sizeof(snap), &snap_cpus, &snap_mem);
	if (restore) {
		b->cpus = snap_cpus;
		b->memory_mib = snap_mem;
	}
	b->created_ms = util_wall_ms();
	b->expires_ms = o->timeout_s ? b->created_ms + (int64_t)o->timeout_s * 1000 : 0;
	b->pid = getpid();
	row.pid_start = core_process_start_time(getpid());
	if ((r = sandbox_disk_path(root, b->id, b->path, sizeof(b->path))) < 0)
		return ctx_error(ctx, r, "the disk path of sandbox %s in %s", b->id, root);
	snprintf(row.runtime_dir, sizeof(row.runtime_dir), "%s/run/%s", ctx->state_dir, b->id);

	_cleanup_free_ char *meta = make_metadata(o, image_config);
	if (!meta)
		return -ENOMEM;
	r = insert_row(ctx, &row, meta);
	if (r < 0)
		return r;
	trace_mark(trace, "row");
	util_fault_point("create", 1);

	struct backend_proc proc = { 0 };
	bool started = false;
	struct agent_info ai;
	/* Its machine-wide host uid(s), once its row exists (a stale-slot reaper checks the row). */
	if ((r = uids_acquire(ctx, &row)) < 0)
		goto fail;
	trace_mark(trace, "uids");
	util_fault_point("create", 3);
	if ((r = sandbox_disk_dir_make(b->path)) < 0) {
		ctx_error(ctx, r, "make the directory of %s", b->path);
		goto fail;
	}
	r = store_btrfs_snapshot(disk_src, b->path, false);
	if (r < 0) {
		ctx_error(ctx, r, "snapshot %s", disk_src);
		goto fail;
	}
	trace_mark(trace, "clone");
	util_fault_point("create", 4);
	backend_snapshot_files_drop(b->path); /* restores map the source's file */
	r = ops->start(ctx, &row, o->hostname ? o->hostname : b->id, o->timeout_s, restore ? snap : NULL, &proc, &ai);
	if (r < 0)
		goto fail;
	started = true;
	util_fault_point("create", 5);
	/* egress: the sandbox's network and its gateway (src/net, docs/network.md) */
	if ((r = sandbox_net_attach(ctx, ops, &row, proc.pid, o->network_policy, o->network_policy_trusted,
				    o->network_allow_resolve)) < 0)
		goto fail;
	trace_mark(trace, "network");
	free(meta);
	meta = make_metadata(o, image_config);
	if (!meta) {
		r = -ENOMEM;
		goto fail;
	}
	util_fault_point("create", 6);
	r = sandbox_row_set_running(ctx, &row, &proc, meta, "running", ai.version);
	if (r < 0)
		goto fail;
	util_fault_point("create", 7);
	meta = NULL; /* owned by the row */
	if ((r = autosnap_started(ctx, b->id, tname, o)) < 0) /* periodic snapshots (core/autosnap.c) */
		goto fail;
	trace_mark(trace, "running");
	char steps[512];
	trace_format(trace, steps, sizeof(steps));
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s running (%s pid %d, agent %s)", b->id, ops->proc_name, proc.pid,
		ai.version);
	ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s created: %s", b->id, steps);
	row.trace = NULL;
	r = sandbox_handle_new(ctx, &row, ret);
	if (r < 0) {
		sandbox_row_clear(&row);
		return ctx_error(ctx, r, "sandbox handle");
	}
	sandbox_handle_set_steps(*ret, trace);
	return 0;

fail: {
	/* Keep the first error's message; undo in reverse order. */
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	if (started)
		backend_stop_started(ctx, ops, &row, &proc);
	(void)sandbox_stop_helpers(ctx, b->id); /* a log writer, a gateway, a snapshot helper */
	uint32_t logcap_uid = logcap_recorded_uid(row.runtime_dir); /* before the runtime directory goes */
	(void)sandbox_release_disk(ctx, &row);
	/* Slots first: a kill between the two would leave them held by a row nobody destroys again. */
	uids_release(ctx, &row);
	logcap_release(ctx, b->id, logcap_uid);
	(void)sandbox_mark(ctx, b->id, SPACE_SANDBOX_DESTROYED, msg);
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
	return r;
}
}

/*
 * A pool with less than this free is full for a new sandbox: its clone costs nearly nothing, but it could
 * not write, and its disk would fail inside as I/O errors. Refused before anything is made, with the
 * numbers (-ENOSPC: the API's 507).
 */
#define POOL_MIN_FREE_MIB 64

int sandbox_pool_space_check(space_ctx *ctx, const char *root)
{
	struct statvfs sv;
	if (statvfs(root, &sv) < 0)
		return ctx_error(ctx, -errno, "statvfs %s", root);
	uint64_t free_mib = (uint64_t)sv.f_bavail * sv.f_frsize >> 20;
	uint64_t size_mib = (uint64_t)sv.f_blocks * sv.f_frsize >> 20;
	if (free_mib >= POOL_MIN_FREE_MIB)
		return 0;
	return ctx_error_msg(ctx, -ENOSPC,
			     "pool full (%" PRIu64 " MiB free of %" PRIu64 " MiB, a sandbox needs %d MiB): remove "
			     "sandboxes, checkpoints or templates (space ls, space checkpoint ls, space template ls) "
			     "or grow the pool",
			     free_mib, size_mib, POOL_MIN_FREE_MIB);
}

int sandbox_create_from(space_ctx *ctx, const struct space_sandbox_options *o, const char *disk_src,
			space_sandbox **ret)
{
	if (!ctx || !o || o->version == 0 || !ret)
		return -EINVAL;
	/* The one longest lifetime: the agent's alarm, space_sandbox_set_timeout, the CLI and the API's. */
	_Static_assert(SPACE_TIMEOUT_MAX_S == PROTO_MAX_LIFETIME, "space.h and the agent protocol agree");
	if (o->timeout_s > PROTO_MAX_LIFETIME)
		return ctx_error_msg(ctx, -EINVAL, "a lifetime of %u s is over the limit of %u s (366 days)",
				     o->timeout_s, PROTO_MAX_LIFETIME);
	struct op_trace trace;
	trace_start(&trace);
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	const char *tname = o->template_name ? o->template_name : "base";
	struct template_info t;
	if (!disk_src) {
		r = core_template_get(ctx, tname, &t);
		if (r < 0)
			return r;
		disk_src = t.path;
	}
	/* The back-end choice: the caller's, else the state directory's; a name we do not know is refused. */
	const struct backend_ops *ops;
	r = o->isolation ? backend_by_name(ctx, o->isolation, &ops) : backend_default(ctx, ctx->store, &ops);
	if (r < 0)
		return r;
	/* Refused here, before any disk is cloned: fast and with a message saying what to do. */
	if ((r = ops->available(ctx)) < 0)
		return r;
	if (o->cpus > 256 || o->memory_mib > (1u << 22))
		return ctx_error_msg(ctx, -EINVAL, "cpus (%u) or memory (%u MiB) out of range", o->cpus,
				     o->memory_mib);
	for (const char *const *e = o->env; e && *e; e++)
		if (!strchr(*e, '=') || **e == '=')
			return ctx_error_msg(ctx, -EINVAL, "environment entry '%s' is not KEY=VALUE", *e);
	if (o->hostname && !util_name_valid(o->hostname))
		return ctx_error_msg(ctx, -EINVAL, "invalid hostname '%s'", o->hostname);
	if ((r = autosnap_validate(ctx, o->snapshot_every_s, o->snapshot_keep)) < 0)
		return r;
	if ((r = sandbox_policy_check(ctx, o)) < 0) /* before any disk is cloned */
		return r;
	if ((r = sandbox_pool_space_check(ctx, root)) < 0)
		return r;
	trace_mark(&trace, "checks");
	if ((r = create_gate_enter()) < 0)
		return ctx_error_msg(ctx, r, "SPACE_CREATE_CONCURRENCY='%s' is not a number of 0..100000",
				     getenv("SPACE_CREATE_CONCURRENCY"));
	trace_mark(&trace, "queue");
	r = create_checked(ctx, o, root, tname, disk_src, ops, &trace, ret);
	create_gate_leave();
	return r;
}

SPACE_API int space_sandbox_create(space_ctx *ctx, const struct space_sandbox_options *o, space_sandbox **ret)
{
	CTX_ENTER(ctx);
	/* Callers built against older versions of the options lack the later fields (zero: untrusted). */
	struct space_sandbox_options full;
	int r = opts_sandbox_load(ctx, o, &full);
	if (r < 0)
		return r;
	/* warm pool (core/warm_pool.c): a create with default options takes a ready, paused sandbox */
	if (ctx && ret && !full.snapshot_every_s && warm_pool_take(ctx, &full, ret) > 0)
		return 0; /* pooled sandboxes were started with the template's start command */
	r = sandbox_create_from(ctx, &full, NULL, ret);
	if (r == 0)
		r = template_start_or_destroy(ctx, ret, full.template_name ? full.template_name : "base");
	return r;
}

