/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox lifecycle: creating -> running -> stopped/failed -> destroyed, each change one transaction.
 * Everything here is shared by the isolation modes; the mode-specific parts (start, alive, kill) sit
 * behind the small iso_* functions at the top.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/autosnap.h"
#include "core/internal.h"
#include "core/logcap.h"
#include "core/sandbox.h"
#include "core/uids.h"
#include "core/vm_backend.h"
#include "core/warm_pool.h"
#include "jail/jail.h"
#include "net/net.h"
#include "proto/agent_client.h"
#include "store/btrfs.h"
#include "util/cleanup.h"
#include "util/loop.h"
#include "util/util.h"

#define AGENT_HELLO_TIMEOUT_MS 15000
#define KILL_TIMEOUT_MS 10000

/* ---- isolation back-ends --------------------------------------------------------------------------- */

static bool is_vm(const struct sandbox_row *row)
{
	return !strcmp(row->info.isolation, "vm");
}

/* The jail_info a sandbox row describes. */
void sandbox_jail_info(const struct sandbox_row *row, struct jail_info *ji)
{
	memset(ji, 0, sizeof(*ji));
	ji->pid = row->info.pid;
	ji->start_time = row->pid_start;
	ji->uid_base = row->uid_base;
	snprintf(ji->cgroup, sizeof(ji->cgroup), "%s", row->cgroup);
}

static int iso_kill(space_ctx *ctx, const struct sandbox_row *row)
{
	if (is_vm(row))
		return vm_backend_kill(ctx, row); /* also removes the cgroup of a VMM that is already gone */
	if (row->info.pid <= 0)
		return 0;
	if (!strcmp(row->info.isolation, "jail")) {
		struct jail_info ji;
		sandbox_jail_info(row, &ji);
		int r = jail_kill(&ji, KILL_TIMEOUT_MS);
		if (r < 0)
			return ctx_error(ctx, r, "stop sandbox %s (pid %d)", row->info.id, row->info.pid);
	}
	return 0;
}

/* Stops what a start just made (ji), before the row records it. */
static void iso_kill_started(space_ctx *ctx, const struct sandbox_row *row, const struct jail_info *ji)
{
	struct sandbox_row tmp = *row;
	tmp.metadata = NULL;
	tmp.info.pid = ji->pid;
	tmp.pid_start = ji->start_time;
	snprintf(tmp.cgroup, sizeof(tmp.cgroup), "%s", ji->cgroup);
	(void)iso_kill(ctx, &tmp);
}

int sandbox_iso_pause(space_ctx *ctx, const struct sandbox_row *row, bool pause)
{
	if (is_vm(row))
		return vm_backend_pause(ctx, row, pause);
	struct jail_info ji;
	sandbox_jail_info(row, &ji);
	int r = jail_freeze(&ji, pause);
	if (r < 0)
		return ctx_error(ctx, r, "%s sandbox %s (cgroup %s)", pause ? "freeze" : "thaw", row->info.id, ji.cgroup);
	return 0;
}

void sandbox_death_reason(space_ctx *ctx, const struct space_sandbox_info *b, char *buf, size_t len)
{
	if (strcmp(b->isolation, "vm")) {
		snprintf(buf, len, "sandbox process exited unexpectedly");
		return;
	}
	char rd[PATH_MAX];
	snprintf(rd, sizeof(rd), "%s/run/%s", ctx->state_dir, b->id);
	vm_backend_death_reason(rd, b->pid, buf, len);
}

/* ---- rows ------------------------------------------------------------------------------------------ */

int sandbox_row_load(space_ctx *ctx, const char *id, struct sandbox_row *row)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	char sql[1024];
	snprintf(sql, sizeof(sql), "%s WHERE id = ?", core_sandbox_select());
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memset(row, 0, sizeof(*row));
		core_sandbox_row(st, &row->info, &row->pid_start);
		snprintf(row->runtime_dir, sizeof(row->runtime_dir), "%s", (const char *)sqlite3_column_text(st, 13));
		const char *cg = (const char *)sqlite3_column_text(st, 14);
		snprintf(row->cgroup, sizeof(row->cgroup), "%s", cg ? cg : "");
		const char *meta = (const char *)sqlite3_column_text(st, 15);
		row->metadata = meta ? strdup(meta) : NULL;
		row->host_uid = (uint32_t)sqlite3_column_int64(st, 16); /* uid slot (core/uids.h) */
		if (row->metadata) {
			cJSON *j = cJSON_Parse(row->metadata);
			cJSON *ub = cJSON_GetObjectItemCaseSensitive(j, "uid_base");
			if (cJSON_IsNumber(ub))
				row->uid_base = (uint32_t)ub->valuedouble;
			cJSON_Delete(j);
		}
	} else if (rc == SQLITE_DONE) {
		r = ctx_error_msg(ctx, -ENOENT, "no sandbox %s (see `space ls`)", id);
	} else {
		r = ctx_error(ctx, store_errno(rc), "store: %s", store_errmsg(s));
	}
	sqlite3_finalize(st);
	return r;
}

void sandbox_row_clear(struct sandbox_row *row)
{
	free(row->metadata);
	row->metadata = NULL;
}

/* One UPDATE + event in one transaction. */
static int row_update(space_ctx *ctx, const char *id, const char *sql_set, const char *event, const char *detail,
		      int (*bind)(sqlite3_stmt *st, void *ud), void *ud)
{
	struct store *s = ctx->store;
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	char sql[512];
	snprintf(sql, sizeof(sql), "UPDATE sandboxes SET %s, updated_ms = ?1 WHERE id = ?2", sql_set);
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL));
	if (r == 0) {
		sqlite3_bind_int64(st, 1, util_wall_ms());
		sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
		if (bind)
			r = bind(st, ud);
		if (r == 0)
			r = store_errno(sqlite3_step(st));
		sqlite3_finalize(st);
	}
	return ctx_store_finish(ctx, s, r, id, event, detail);
}

struct mark_bind {
	const char *status;
	const char *reason;
};

static int bind_mark(sqlite3_stmt *st, void *ud)
{
	const struct mark_bind *m = ud;
	if (m->reason && *m->reason)
		sqlite3_bind_text(st, 3, m->reason, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, m->status, -1, SQLITE_STATIC);
	return 0;
}

static int mark(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason)
{
	struct mark_bind m = { space_sandbox_status_name(status), reason };
	return row_update(ctx, id, "status = ?4, reason = ?3", m.status, reason, bind_mark, &m);
}

/* ---- handles --------------------------------------------------------------------------------------- */

struct space_sandbox {
	space_ctx *ctx;
	struct sandbox_row row;
	char addr[PATH_MAX + 16];    /* agent address for the client */
	char log_path[PATH_MAX];
	char **env;                  /* sandbox-wide environment, NULL-terminated */
};

void sandbox_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

char **sandbox_env_parse(const char *meta)
{
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	cJSON *env = cJSON_GetObjectItemCaseSensitive(j, "env");
	int n = cJSON_IsArray(env) ? cJSON_GetArraySize(env) : 0;
	char **v = calloc((size_t)n + 1, sizeof(char *));
	int k = 0;
	cJSON *e;
	if (v) {
		cJSON_ArrayForEach(e, env) {
			if (cJSON_IsString(e) && k < n && (v[k] = strdup(e->valuestring)))
				k++;
		}
	}
	cJSON_Delete(j);
	return v;
}

static int handle_new(space_ctx *ctx, struct sandbox_row *row, space_sandbox **ret)
{
	space_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	sb->ctx = ctx;
	sb->row = *row;
	row->metadata = NULL; /* moved */
	if (is_vm(&sb->row))
		vm_backend_agent_addr(sb->row.runtime_dir, sb->addr, sizeof(sb->addr));
	else
		snprintf(sb->addr, sizeof(sb->addr), "unix:%s/agent.sock", sb->row.runtime_dir);
	snprintf(sb->log_path, sizeof(sb->log_path), "%s/sandbox.log", sb->row.runtime_dir);
	sb->env = sandbox_env_parse(sb->row.metadata);
	if (!sb->env) {
		sandbox_row_clear(&sb->row);
		free(sb);
		return -ENOMEM;
	}
	*ret = sb;
	return 0;
}

SPACE_API void space_sandbox_free(space_sandbox *sb)
{
	if (!sb)
		return;
	sandbox_row_clear(&sb->row);
	sandbox_strv_free(sb->env);
	free(sb);
}

SPACE_API const char *space_sandbox_id(const space_sandbox *sb)
{
	return sb->row.info.id;
}

SPACE_API const char *space_sandbox_log_path(const space_sandbox *sb)
{
	return sb->log_path;
}

const char *sandbox_addr(const space_sandbox *sb)
{
	return sb->addr;
}

space_ctx *sandbox_ctx(const space_sandbox *sb)
{
	return sb->ctx;
}

char *const *sandbox_env(const space_sandbox *sb)
{
	return sb->env;
}

/* ---- create ---------------------------------------------------------------------------------------- */

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 || listen(fd, 128) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static char *make_metadata(const struct space_sandbox_options *o, uint32_t uid_base)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *env = cJSON_AddArrayToObject(j, "env");
	for (const char *const *e = o->env; e && *e; e++)
		cJSON_AddItemToArray(env, cJSON_CreateString(*e));
	cJSON_AddNumberToObject(j, "uid_base", uid_base);
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
	int r = store_begin(s);
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(
		store_db(s),
		"INSERT INTO sandboxes(id, template, isolation, status, pid, pid_start, cpus, memory_mib, path,"
		" runtime_dir, created_ms, updated_ms, expires_ms, metadata)"
		" VALUES (?, ?, ?, 'creating', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		-1, &st, NULL));
	if (r == 0) {
		const struct space_sandbox_info *b = &row->info;
		sqlite3_bind_text(st, 1, b->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, b->template_name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, b->isolation, -1, SQLITE_STATIC);
		/* Until the sandbox has its own process, the creator's identifies a live creation. */
		sqlite3_bind_int(st, 4, b->pid);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)row->pid_start);
		sqlite3_bind_int(st, 6, (int)b->cpus);
		sqlite3_bind_int(st, 7, (int)b->memory_mib);
		sqlite3_bind_text(st, 8, b->path, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, row->runtime_dir, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 10, b->created_ms);
		sqlite3_bind_int64(st, 11, b->created_ms);
		sqlite3_bind_int64(st, 12, b->expires_ms);
		sqlite3_bind_text(st, 13, metadata, -1, SQLITE_STATIC);
		r = store_errno(sqlite3_step(st));
		sqlite3_finalize(st);
	}
	return ctx_store_finish(ctx, s, r, row->info.id, "creating", row->info.template_name);
}

struct running_bind {
	const struct jail_info *ji;
	const char *metadata;
};

static int bind_running(sqlite3_stmt *st, void *ud)
{
	const struct running_bind *b = ud;
	sqlite3_bind_int(st, 3, b->ji->pid);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)b->ji->start_time);
	sqlite3_bind_text(st, 5, b->ji->cgroup, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, b->metadata, -1, SQLITE_STATIC);
	return 0;
}

/* Removes what a sandbox has on disk: its subvolume and runtime directory. */
static int release_disk(space_ctx *ctx, const struct sandbox_row *row)
{
	/* The jail's loop device goes only after the kernel tears down its mount namespace: wait for it,
	 * so a pool unmount or template removal right after a destroy does not find the image busy. */
	char image[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", row->info.path);
	if (util_loop_wait_released(image, KILL_TIMEOUT_MS) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "loop device of %s still attached", image);
	int r = store_btrfs_subvolume_delete(row->info.path);
	if (r < 0)
		return ctx_error(ctx, r, "delete subvolume %s", row->info.path);
	if (row->runtime_dir[0]) {
		r = util_rm_rf(row->runtime_dir);
		if (r < 0)
			return ctx_error(ctx, r, "remove %s", row->runtime_dir);
	}
	return 0;
}

/*
 * Starts the jail of a row whose disk is in place (row->info.path/rootfs.ext4) and waits for its agent.
 * On failure nothing of the jail is left running; the runtime directory stays for its log.
 */
static int jail_boot(space_ctx *ctx, const struct sandbox_row *row, const char *hostname, uint32_t lifetime_s,
		     struct jail_info *ji, struct agent_info *ai)
{
	const struct space_sandbox_info *b = &row->info;
	char agent[PATH_MAX];
	int r = ctx_helper_path(ctx, "space-agent", agent, sizeof(agent));
	if (r < 0)
		return r;
	char sock[PATH_MAX], image[PATH_MAX], logp[PATH_MAX];
	snprintf(sock, sizeof(sock), "%s/agent.sock", row->runtime_dir);
	snprintf(image, sizeof(image), "%s/rootfs.ext4", b->path);
	snprintf(logp, sizeof(logp), "%s/sandbox.log", row->runtime_dir);
	r = util_mkdir_p(row->runtime_dir, 0700);
	if (r < 0)
		return ctx_error(ctx, r, "create %s", row->runtime_dir);
	_cleanup_close_ int lfd = listen_unix(sock);
	if (lfd < 0)
		return ctx_error(ctx, lfd, "listen on %s", sock);
	/* Output goes through a pipe to the capping log writer: no host file is open inside (core/logcap.h). */
	_cleanup_close_ int logfd = -1;
	if ((r = logcap_start(ctx, b->id, row->runtime_dir, &logfd)) < 0)
		return r;
	/* The agent ends the sandbox at its deadline by itself; a later library call reclaims the disk. */
	char life_arg[24];
	snprintf(life_arg, sizeof(life_arg), "%u", lifetime_s);
	const char *agent_argv[] = { "space-agent", "--jail", "--listen-fd", "3", "--hostname", hostname,
				     lifetime_s ? "--lifetime" : NULL, life_arg, NULL };
	struct jail_config jc = {
		.id = b->id,
		.rootfs_image = image,
		.agent_path = agent,
		.hostname = hostname,
		.listen_fd = lfd,
		.argv_override = agent_argv,
		.log_fd = logfd,
		.cpus = b->cpus,
		.memory_bytes = (uint64_t)b->memory_mib << 20,
		.uid_base = row->host_uid, /* its machine-wide range (core/uids.h) */
		.allow_identity_fallback = uids_identity_map_allowed(ctx),
	};
	char why[512] = "";
	r = jail_start(&jc, ji, why, sizeof(why));
	if (r == -EOPNOTSUPP)
		return ctx_error_msg(ctx, r, "start jail: %s. This kernel cannot idmap the sandbox's rootfs; the operator "
					     "may allow that weaker mode for a state directory: `space init "
					     "--allow-identity-map`", why);
	if (r < 0)
		return ctx_error_msg(ctx, r, "start jail: %s", why[0] ? why : space_strerror(r));
	/* The operator's choice is said at every create (core/uids.h). */
	if (jc.allow_identity_fallback && ji->uid_base)
		ctx_log(ctx, SPACE_LOG_WARNING, "state directory %s allows the identity uid map (space init "
						"--allow-identity-map); sandbox %s did not need it", ctx->state_dir, b->id);
	else if (jc.allow_identity_fallback)
		ctx_log(ctx, SPACE_LOG_WARNING, "state directory %s allows the identity uid map and sandbox %s uses it: "
						"idmapped mounts failed, root inside is host uid 0 (a weaker boundary; "
						"see its log)", ctx->state_dir, b->id);
	/* The agent holds its own copies of the listening socket and the log pipe. */
	close(TAKE_FD(lfd));
	close(TAKE_FD(logfd));

	char addr[PATH_MAX + 16];
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	struct agent_error aerr = { 0 };
	r = agent_hello(addr, AGENT_HELLO_TIMEOUT_MS, ai, &aerr);
	if (r < 0) {
		ctx_error_msg(ctx, r, "agent did not answer: %s (see %s)", aerr.msg[0] ? aerr.msg : space_strerror(r),
			      logp);
		(void)jail_kill(ji, KILL_TIMEOUT_MS);
		return r;
	}
	return 0;
}

/* Records a booted jail in the row (status running) and in the in-memory copy. */
static int row_set_running(space_ctx *ctx, struct sandbox_row *row, const struct jail_info *ji, char *meta,
			   const char *event, const char *detail)
{
	struct running_bind rb = { ji, meta };
	int r = row_update(ctx, row->info.id,
			   "status = 'running', reason = NULL, pid = ?3, pid_start = ?4, cgroup = ?5, metadata = ?6",
			   event, detail, bind_running, &rb);
	if (r < 0)
		return r;
	row->info.status = SPACE_SANDBOX_RUNNING;
	row->info.reason[0] = '\0';
	row->info.pid = ji->pid;
	row->pid_start = ji->start_time;
	row->uid_base = ji->uid_base;
	snprintf(row->cgroup, sizeof(row->cgroup), "%s", ji->cgroup);
	free(row->metadata);
	row->metadata = meta;
	return 0;
}

/*
 * The memory snapshot a vm sandbox made from disk_src restores instead of booting, when disk_src (a VM
 * checkpoint, a template with a snapshot) carries one and the sandbox asks for its vCPUs and RAM or
 * for none: fills snap and the sizes and returns true.
 */
static bool restore_source(space_ctx *ctx, const char *iso, const char *disk_src, const struct space_sandbox_options *o,
			   char *snap, size_t len, uint32_t *cpus, uint32_t *memory_mib)
{
	if (strcmp(iso, "vm") || vm_backend_snapshot_find(disk_src, snap, len, cpus, memory_mib) < 0)
		return false;
	if ((o->cpus && o->cpus != *cpus) || (o->memory_mib && o->memory_mib != *memory_mib)) {
		ctx_log(ctx, SPACE_LOG_INFO, "%s holds a snapshot of a VM with %u vCPUs and %u MiB; booting afresh for %u "
					     "vCPUs and %u MiB", disk_src, *cpus, *memory_mib, o->cpus ? o->cpus : *cpus,
			o->memory_mib ? o->memory_mib : *memory_mib);
		return false;
	}
	return true;
}

/* A clone of a subvolume carrying a snapshot does not keep its copy: restores map the source's file. */
static void drop_snapshot_copy(const char *path)
{
	char f[PATH_MAX];
	snprintf(f, sizeof(f), "%s/%s", path, VM_SNAPSHOT_FILE);
	(void)unlink(f);
	snprintf(f, sizeof(f), "%s/%s", path, VM_SNAPSHOT_META);
	(void)unlink(f);
}

/* The sandbox's egress gateway (src/net, docs/network.md): for a jail its eth0, for a VM behind its TAP. */
static int net_attach(space_ctx *ctx, const struct sandbox_row *row, pid_t pid, const char *policy, bool trusted,
		      const char *const *allow_resolve)
{
	char agent[PATH_MAX + 64], dir[PATH_MAX];
	struct net_policy_trust t;
	int r = sandbox_policy_trust(ctx, trusted, allow_resolve, &t, dir, sizeof(dir));
	if (r < 0)
		return r;
	if (is_vm(row))
		vm_backend_agent_addr(row->runtime_dir, agent, sizeof(agent));
	return net_sandbox_attach(ctx, row->info.id, pid, is_vm(row) ? NETCFG_VM_TAP : NULL, policy, &t,
				  is_vm(row) ? agent : NULL);
}

/*
 * After a restart (rollback) the sandbox has a new network namespace: a new gateway with the policy it
 * was created with, and the trust it was given then. When that policy cannot be applied again (a secret
 * from an environment variable this process does not have, a registered secret since removed), the
 * sandbox gets a gateway without one: no egress, attempts recorded.
 */
static int net_reattach(space_ctx *ctx, const struct sandbox_row *row, pid_t pid)
{
	(void)net_sandbox_detach(ctx, row->info.id);
	cJSON *j = row->metadata ? cJSON_Parse(row->metadata) : NULL;
	const char *policy = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "network_policy"));
	bool trusted = false;
	char **allow = NULL;
	int r = sandbox_policy_from_meta(j, &trusted, &allow);
	if (r == 0)
		r = net_attach(ctx, row, pid, policy, trusted, (const char *const *)allow);
	sandbox_strv_free(allow);
	if (r < 0 && policy) {
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: its egress policy cannot be applied again (%s); it has no "
						"egress now", row->info.id, ctx->last_error);
		r = net_attach(ctx, row, pid, NULL, false, NULL);
	}
	cJSON_Delete(j);
	return r;
}

static int create_checked(space_ctx *ctx, const struct space_sandbox_options *o, const char *root,
			  const char *tname, const char *disk_src, const char *iso, space_sandbox **ret)
{
	struct sandbox_row row = { 0 };
	struct space_sandbox_info *b = &row.info;
	int r = core_new_id("sb-", b->id, sizeof(b->id));
	if (r < 0)
		return ctx_error(ctx, r, "random id");
	snprintf(b->template_name, sizeof(b->template_name), "%s", tname);
	snprintf(b->isolation, sizeof(b->isolation), "%s", iso);
	b->cpus = o->cpus ? o->cpus : 1;
	b->memory_mib = o->memory_mib ? o->memory_mib : 512;
	char snap[PATH_MAX];
	uint32_t snap_cpus, snap_mem;
	bool restore = restore_source(ctx, iso, disk_src, o, snap, sizeof(snap), &snap_cpus, &snap_mem);
	if (restore) {
		b->cpus = snap_cpus;
		b->memory_mib = snap_mem;
	}
	b->created_ms = util_wall_ms();
	b->expires_ms = o->timeout_s ? b->created_ms + (int64_t)o->timeout_s * 1000 : 0;
	b->pid = getpid();
	row.pid_start = core_process_start_time(getpid());
	snprintf(b->path, sizeof(b->path), "%s/sandboxes/%s", root, b->id);
	snprintf(row.runtime_dir, sizeof(row.runtime_dir), "%s/run/%s", ctx->state_dir, b->id);

	_cleanup_free_ char *meta = make_metadata(o, 0);
	if (!meta)
		return -ENOMEM;
	r = insert_row(ctx, &row, meta);
	if (r < 0)
		return r;

	struct jail_info ji = { 0 };
	bool started = false;
	struct agent_info ai;
	/* Its machine-wide host uid(s), once its row exists (a stale-slot reaper checks the row). */
	if ((r = uids_acquire(ctx, &row)) < 0)
		goto fail;
	r = store_btrfs_snapshot(disk_src, b->path, false);
	if (r < 0) {
		ctx_error(ctx, r, "snapshot %s", disk_src);
		goto fail;
	}
	drop_snapshot_copy(b->path);
	if (is_vm(&row))
		r = vm_backend_start(ctx, &row, o->hostname ? o->hostname : b->id, o->timeout_s, restore ? snap : NULL,
				     &ji, &ai);
	else
		r = jail_boot(ctx, &row, o->hostname ? o->hostname : b->id, o->timeout_s, &ji, &ai);
	if (r < 0)
		goto fail;
	started = true;
	/* egress: the sandbox's network and its gateway (src/net, docs/network.md) */
	if ((r = net_attach(ctx, &row, ji.pid, o->network_policy, o->network_policy_trusted,
			    o->network_allow_resolve)) < 0)
		goto fail;
	free(meta);
	meta = make_metadata(o, ji.uid_base);
	if (!meta) {
		r = -ENOMEM;
		goto fail;
	}
	r = row_set_running(ctx, &row, &ji, meta, "running", ai.version);
	if (r < 0)
		goto fail;
	meta = NULL; /* owned by the row */
	if ((r = autosnap_started(ctx, b->id, tname, o)) < 0) /* periodic snapshots (core/autosnap.c) */
		goto fail;
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s running (%s pid %d, agent %s)", b->id, is_vm(&row) ? "space-vmm" : "jail",
		ji.pid, ai.version);
	r = handle_new(ctx, &row, ret);
	if (r < 0) {
		sandbox_row_clear(&row);
		return ctx_error(ctx, r, "sandbox handle");
	}
	return 0;

fail: {
	/* Keep the first error's message; undo in reverse order. */
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	if (started)
		iso_kill_started(ctx, &row, &ji);
	(void)release_disk(ctx, &row);
	if (mark(ctx, b->id, SPACE_SANDBOX_DESTROYED, msg) == 0) {
		uids_release(ctx, &row);
		logcap_release(ctx, b->id);
	}
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
	return r;
}
}

int sandbox_create_from(space_ctx *ctx, const struct space_sandbox_options *o, const char *disk_src,
			space_sandbox **ret)
{
	if (!ctx || !o || o->version == 0 || !ret)
		return -EINVAL;
	const char *root;
	int r = ctx_pool(ctx, &root);
	if (r < 0)
		return r;
	const char *tname = o->template_name ? o->template_name : "base";
	struct space_template_info t;
	if (!disk_src) {
		r = space_template_get(ctx, tname, &t);
		if (r < 0)
			return r;
		disk_src = t.path;
	}
	_cleanup_free_ char *def_iso = NULL;
	const char *iso = o->isolation;
	if (!iso)
		iso = store_meta_get(ctx->store, "isolation", &def_iso) == 0 ? def_iso : "vm";
	if (strcmp(iso, "vm") && strcmp(iso, "jail"))
		return ctx_error_msg(ctx, -EINVAL, "unknown isolation '%s': use vm or jail", iso);
	/* Refused here, before any disk is cloned: fast and with a message saying what to do. */
	if (!strcmp(iso, "vm") && (r = vm_backend_available(ctx)) < 0)
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
	return create_checked(ctx, o, root, tname, disk_src, iso, ret);
}

SPACE_API int space_sandbox_create(space_ctx *ctx, const struct space_sandbox_options *o, space_sandbox **ret)
{
	if (!o || o->version == 0)
		return -EINVAL;
	/* Callers built against older versions of the options lack the later fields (zero: untrusted). */
	struct space_sandbox_options full = { 0 };
	memcpy(&full, o, o->version >= 4   ? sizeof(full)
			 : o->version == 3 ? offsetof(struct space_sandbox_options, network_policy_trusted)
			 : o->version == 2 ? offsetof(struct space_sandbox_options, snapshot_every_s)
					   : offsetof(struct space_sandbox_options, network_policy));
	/* warm pool (core/warm_pool.c): a create with default options takes a ready, paused sandbox */
	if (ctx && ret && !full.snapshot_every_s && warm_pool_take(ctx, &full, ret) > 0)
		return 0;
	return sandbox_create_from(ctx, &full, NULL, ret);
}

/* ---- restart on another disk (rollback) ------------------------------------------------------------ */

/* The row's metadata with uid_base replaced; NULL on allocation failure. */
static char *metadata_with_uid(const char *meta, uint32_t uid_base, char *hostname, size_t hlen)
{
	cJSON *j = meta ? cJSON_Parse(meta) : NULL;
	if (!j)
		j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hostname");
	if (cJSON_IsString(h) && util_name_valid(h->valuestring))
		snprintf(hostname, hlen, "%s", h->valuestring);
	cJSON_DeleteItemFromObjectCaseSensitive(j, "uid_base");
	cJSON_AddNumberToObject(j, "uid_base", uid_base);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

int sandbox_restart_from(space_sandbox *sb, const char *disk_src, const char *why)
{
	space_ctx *ctx = sb->ctx;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, sb->row.info.id, &row);
	if (r < 0)
		return r;
	const char *id = sb->row.info.id;
	struct jail_info ji;
	struct agent_info ai;
	char image[PATH_MAX], hostname[64];
	char *meta = NULL;
	uint32_t lifetime = 0;
	if (row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED) {
		r = ctx_error_msg(ctx, -ESRCH, "sandbox %s is %s", id, space_sandbox_status_name(row.info.status));
		goto out;
	}
	/* periodic snapshots (core/autosnap.c): no pruning of disk_src while it is copied */
	if ((r = autosnap_before_restart(ctx, id, row.metadata, disk_src)) < 0)
		goto out;
	sandbox_jail_info(&row, &ji);
	if (!is_vm(&row) && row.info.status == SPACE_SANDBOX_PAUSED)
		(void)jail_freeze(&ji, false);
	r = iso_kill(ctx, &row);
	if (r < 0)
		goto out;
	snprintf(image, sizeof(image), "%s/rootfs.ext4", row.info.path);
	if (util_loop_wait_released(image, KILL_TIMEOUT_MS) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "loop device of %s still attached", image);
	r = store_btrfs_subvolume_delete(row.info.path);
	if (r < 0) {
		ctx_error(ctx, r, "delete subvolume %s", row.info.path);
		goto failed;
	}
	/* A VM checkpoint restores memory too; a disk-only one boots the VM afresh on it. */
	char snap[PATH_MAX];
	uint32_t snap_cpus, snap_mem;
	struct space_sandbox_options same = { .cpus = row.info.cpus, .memory_mib = row.info.memory_mib };
	bool restore = restore_source(ctx, row.info.isolation, disk_src, &same, snap, sizeof(snap), &snap_cpus,
				      &snap_mem);
	r = store_btrfs_snapshot(disk_src, row.info.path, false);
	if (r < 0) {
		ctx_error(ctx, r, "snapshot %s", disk_src);
		goto failed;
	}
	drop_snapshot_copy(row.info.path);
	if (row.info.expires_ms) {
		int64_t left = (row.info.expires_ms - util_wall_ms() + 999) / 1000;
		lifetime = left > 0 ? (uint32_t)left : 1;
	}
	snprintf(hostname, sizeof(hostname), "%s", id);
	free(metadata_with_uid(row.metadata, 0, hostname, sizeof(hostname))); /* only for the hostname */
	if ((r = uids_reclaim(ctx, &row)) < 0) /* the same host uid(s) again, normally */
		goto failed;
	if (is_vm(&row))
		r = vm_backend_start(ctx, &row, hostname, lifetime, restore ? snap : NULL, &ji, &ai);
	else
		r = jail_boot(ctx, &row, hostname, lifetime, &ji, &ai);
	if (r < 0)
		goto failed;
	if ((r = net_reattach(ctx, &row, ji.pid)) < 0) {
		iso_kill_started(ctx, &row, &ji);
		goto failed;
	}
	meta = metadata_with_uid(row.metadata, ji.uid_base, hostname, sizeof(hostname));
	if (!meta) {
		r = -ENOMEM;
		iso_kill_started(ctx, &row, &ji);
		goto failed;
	}
	r = row_set_running(ctx, &row, &ji, meta, "restarted", why);
	if (r < 0) {
		free(meta);
		iso_kill_started(ctx, &row, &ji);
		goto failed;
	}
	ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s restarted on %s (%s pid %d%s)", id, disk_src,
		is_vm(&row) ? "space-vmm" : "jail", ji.pid, restore ? ", memory restored" : "");
	if (autosnap_started(ctx, id, NULL, NULL) < 0) /* periodic snapshots go on */
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: periodic snapshots: %s", id, ctx->last_error);
	sandbox_row_clear(&sb->row);
	sb->row = row;
	return 0;

failed: {
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	(void)mark(ctx, id, SPACE_SANDBOX_FAILED, msg);
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
}
out:
	sandbox_row_clear(&row);
	return r;
}

/* ---- open, info, destroy ------------------------------------------------------------------------ */

static bool row_alive(const struct sandbox_row *row)
{
	return core_process_alive(row->info.pid, row->pid_start);
}

SPACE_API int space_sandbox_open(space_ctx *ctx, const char *id, space_sandbox **ret)
{
	if (!ctx || !id || !ret)
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	if (row.info.status != SPACE_SANDBOX_RUNNING && row.info.status != SPACE_SANDBOX_PAUSED) {
		r = ctx_error_msg(ctx, -ESRCH, "sandbox %s is %s%s%s", id, space_sandbox_status_name(row.info.status),
				  row.info.reason[0] ? ": " : "", row.info.reason);
		sandbox_row_clear(&row);
		return r;
	}
	if (!row_alive(&row)) {
		char why[sizeof(row.info.reason)];
		sandbox_death_reason(ctx, &row.info, why, sizeof(why));
		(void)mark(ctx, id, SPACE_SANDBOX_FAILED, why);
		sandbox_row_clear(&row);
		return ctx_error_msg(ctx, -ESRCH, "sandbox %s has died (%s); `space rm %s` cleans up", id, why, id);
	}
	r = handle_new(ctx, &row, ret);
	if (r < 0)
		sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_get_info(space_sandbox *sb, struct space_sandbox_info *ret)
{
	struct sandbox_row row;
	int r = sandbox_row_load(sb->ctx, sb->row.info.id, &row);
	if (r < 0)
		return r;
	if ((row.info.status == SPACE_SANDBOX_RUNNING || row.info.status == SPACE_SANDBOX_PAUSED) && !row_alive(&row)) {
		char why[sizeof(row.info.reason)];
		sandbox_death_reason(sb->ctx, &row.info, why, sizeof(why));
		if (mark(sb->ctx, row.info.id, SPACE_SANDBOX_FAILED, why) == 0) {
			row.info.status = SPACE_SANDBOX_FAILED;
			snprintf(row.info.reason, sizeof(row.info.reason), "%s", why);
		}
	}
	*ret = row.info;
	sandbox_row_clear(&row);
	return 0;
}

/* keep_events: its rows in the event log stay (space_sandbox_remove_v2), else they go with it. */
static int destroy_row(space_ctx *ctx, struct sandbox_row *row, const char *reason, bool keep_events)
{
	if (row->info.status == SPACE_SANDBOX_DESTROYED)
		return 0;
	/* A creation still in progress in a live process is not ours to tear down. */
	if (row->info.status == SPACE_SANDBOX_CREATING && row->info.pid != getpid() && row_alive(row))
		return ctx_error_msg(ctx, -EBUSY, "sandbox %s is being created by process %d", row->info.id,
				     row->info.pid);
	/* Its snapshot helper first: a snapshot in progress finishes before the sandbox stops. */
	autosnap_destroying(ctx, row->info.id, row->metadata);
	/* A vm creation whose creator died may have left its VMM running: iso_kill asks it to stop. */
	if (row->info.status != SPACE_SANDBOX_CREATING || is_vm(row)) {
		int r = iso_kill(ctx, row);
		if (r < 0)
			return r;
	}
	(void)net_sandbox_detach(ctx, row->info.id); /* egress gateway */
	int r = release_disk(ctx, row);
	if (r < 0) {
		(void)mark(ctx, row->info.id, SPACE_SANDBOX_FAILED, ctx->last_error);
		return r;
	}
	r = mark(ctx, row->info.id, SPACE_SANDBOX_DESTROYED, reason);
	if (r == 0) {
		uids_release(ctx, row); /* nothing of it runs any more */
		logcap_release(ctx, row->info.id);
	}
	/* Nothing kept unless asked: its event log rows go too (the gateway's were collected on detach). */
	if (r == 0 && !keep_events) {
		int e = store_events_remove(ctx->store, row->info.id);
		if (e < 0)
			return ctx_error(ctx, e, "remove the events of %s: %s", row->info.id, store_errmsg(ctx->store));
	}
	return r;
}

SPACE_API int space_sandbox_destroy(space_sandbox *sb)
{
	if (!sb)
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(sb->ctx, sb->row.info.id, &row);
	if (r < 0)
		return r;
	r = destroy_row(sb->ctx, &row, NULL, false);
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_remove(space_ctx *ctx, const char *id)
{
	return space_sandbox_remove_v2(ctx, id, 0);
}

SPACE_API int space_sandbox_remove_v2(space_ctx *ctx, const char *id, unsigned flags)
{
	if (!ctx || !id || (flags & ~SPACE_REMOVE_KEEP_EVENTS))
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	if (row.info.status == SPACE_SANDBOX_DESTROYED) {
		sandbox_row_clear(&row);
		return ctx_error_msg(ctx, -ENOENT, "sandbox %s is already destroyed", id);
	}
	r = destroy_row(ctx, &row, NULL, flags & SPACE_REMOVE_KEEP_EVENTS);
	sandbox_row_clear(&row);
	return r;
}

SPACE_API int space_sandbox_reap(space_ctx *ctx)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	sqlite3_stmt *st;
	r = store_errno(sqlite3_prepare_v2(store_db(s),
					   "SELECT id FROM sandboxes WHERE status != 'destroyed' AND expires_ms > 0"
					   " AND expires_ms <= ?",
					   -1, &st, NULL));
	if (r < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	sqlite3_bind_int64(st, 1, util_wall_ms());
	char ids[64][32];
	int n = 0;
	while (n < 64 && sqlite3_step(st) == SQLITE_ROW)
		snprintf(ids[n++], sizeof(ids[0]), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	/* The gateways' spooled events join the event log (net.h): listings and `space serve` reap. */
	net_events_ingest_all(ctx);
	int done = 0;
	for (int i = 0; i < n; i++) {
		struct sandbox_row row;
		if (sandbox_row_load(ctx, ids[i], &row) < 0)
			continue;
		if (destroy_row(ctx, &row, "lifetime expired", false) == 0) {
			ctx_log(ctx, SPACE_LOG_INFO, "sandbox %s destroyed: lifetime expired", ids[i]);
			done++;
		}
		sandbox_row_clear(&row);
	}
	return done;
}

SPACE_API int space_sandbox_read_log(space_ctx *ctx, const char *id, int dst_fd)
{
	if (!ctx || !id || dst_fd < 0)
		return -EINVAL;
	struct sandbox_row row;
	int r = sandbox_row_load(ctx, id, &row);
	if (r < 0)
		return r;
	/* sandbox.log.1 (the older half, once the log has been rotated) then sandbox.log. */
	r = logcap_read(ctx, row.runtime_dir, dst_fd);
	sandbox_row_clear(&row);
	return r;
}
