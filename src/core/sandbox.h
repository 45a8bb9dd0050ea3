/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox rows and handles, shared by the lifecycle, process and file code. Private. */
#pragma once

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/internal.h"

struct op_trace;

struct sandbox_row {
	struct sandbox_info info;
	uint64_t pid_start;          /* start time of info.pid, against pid reuse */
	uint32_t uid_base;           /* jail: host uid of root inside (0: the identity map); its own column */
	uint32_t host_uid;           /* the machine-wide uid slot it holds (core/uids.h); 0 = none */
	char runtime_dir[PATH_MAX];  /* sockets and logs */
	char cgroup[256];
	char *metadata;              /* JSON: env, uid_base */
	struct op_trace *trace;      /* the current operation's step timings (core/trace.h); NULL: none */
};

/* Loads a row by id (-ENOENT with a message if none). Free with sandbox_row_clear. */
int sandbox_row_load(space_ctx *ctx, const char *id, struct sandbox_row *row);
void sandbox_row_clear(struct sandbox_row *row);

/* The agent's address ("unix:..."), the context and the sandbox-wide environment of a handle. */
const char *sandbox_addr(const space_sandbox *sb);
space_ctx *sandbox_ctx(const space_sandbox *sb);
char *const *sandbox_env(const space_sandbox *sb);
/* Records how the handle's sandbox was made (space_sandbox_create_steps). */
void sandbox_handle_set_steps(space_sandbox *sb, const struct op_trace *t);
/* The row a handle holds (as of its last load). */
const struct sandbox_row *sandbox_handle_row(const space_sandbox *sb);

/* space_sandbox_create with the disk snapshotted from disk_src (a subvolume holding rootfs.ext4) instead
 * of the template's; NULL = the template's. */
/* -ENOSPC (with the numbers and what to do) when the pool under root is too full for a new sandbox. */
int sandbox_pool_space_check(space_ctx *ctx, const char *root);
int sandbox_create_from(space_ctx *ctx, const struct space_sandbox_options *o, const char *disk_src,
			space_sandbox **ret);

/* space_sandbox_destroy, taking a read-only snapshot of the sandbox's subvolume (its disk, unmounted and
 * clean) at dst before it goes: a build step's result (core/build.c). The handle must still be freed. */
int sandbox_destroy_keeping_disk(space_sandbox *sb, const char *dst);

/* Stops the sandbox (jail or VM), replaces its subvolume with a writable snapshot of disk_src and starts it
 * again with the same id, hostname, limits and environment (processes inside are lost; a VM restores the
 * memory disk_src carries, if any). why goes to the event log. On failure after the old one is gone the
 * sandbox is marked failed. The caller (space_sandbox_rollback) holds the sandbox's lock: this never takes
 * it (store/lock.h). (core/sandbox_restart.c) */
int sandbox_restart_from(space_sandbox *sb, const char *disk_src, const char *why);

/* Why a sandbox whose process is gone ended, for its failure reason (its back-end's death_reason; vm:
 * from space-vmm's status file). */
void sandbox_death_reason(space_ctx *ctx, const struct sandbox_info *b, char *buf, size_t len);

/* 0 if the sandbox runs; -EBUSY (paused) or -ESRCH with a message otherwise. */
int sandbox_usable(space_sandbox *sb);

/* The defaults of a sandbox's processes that its template's image gave (metadata "defaults"): working
 * directory ("" none) and user (0/0: root). */
struct sandbox_defaults {
	char cwd[PATH_MAX];
	uint32_t uid, gid;
};
void sandbox_defaults_parse(const char *meta, struct sandbox_defaults *ret);
const struct sandbox_defaults *sandbox_defaults(const space_sandbox *sb);

/* The "env" array of a row's metadata as a NULL-terminated list (empty if none); NULL on allocation
 * failure. Free with sandbox_strv_free. */
char **sandbox_env_parse(const char *meta);
void sandbox_strv_free(char **v);

/* A sandbox's egress policy and its trust (core/sandbox_policy.c, docs/network.md). */
struct cJSON;
struct net_policy_trust;
/* The trust to compile a policy with; dir (dlen bytes) holds the secrets directory t points at. */
int sandbox_policy_trust(space_ctx *ctx, bool trusted, const char *const *allow_resolve, struct net_policy_trust *t,
			 char *dir, size_t dlen);
/* Compiles o's policy with o's trust and throws the result away: -EINVAL with the reason (and nothing
 * of a secret) in ctx's last error when it is refused. 0 when there is none. */
int sandbox_policy_check(space_ctx *ctx, const struct space_sandbox_options *o);
/* Adds o's trust (network_trusted, network_allow_resolve) to a row's metadata, next to network_policy. */
int sandbox_policy_to_meta(struct cJSON *meta, const struct space_sandbox_options *o);
/* The trust stored with a row's policy (untrusted when the metadata says nothing), and its allowed
 * resolve ranges as a NULL-terminated list (free with sandbox_strv_free). */
int sandbox_policy_from_meta(const struct cJSON *meta, bool *ret_trusted, char ***ret_allow_resolve);

/* ---- tethers (core/tether.c) ---- */

/* The handle's tether connection (-1: none); set closes the one it had (which ends the sandbox). */
int sandbox_tether_fd(const space_sandbox *sb);
void sandbox_set_tether_fd(space_sandbox *sb, int fd);
/* After a restart (rollback) started a new agent: a tethered handle tethers it again. 0 when untethered. */
int tether_retether(space_sandbox *sb);
/* Whether a row's metadata names a tether holder / one that is gone (its pid no longer that process). */
bool tether_recorded(const char *meta);
bool tether_holder_gone(const char *meta);
/* PROTO_TETHER_HOLD (hold) or RELEASE at the agent addr: around a memory snapshot, so that a restored copy
 * is not ended by the reset of the tethers it recorded. 0 for an agent without tethers. */
int tether_hold(const char *addr, bool hold);
/* Up to max ids of sandboxes (not destroyed) whose tether holder is gone, or that are tethered and failed
 * (their tether ended them: the handle was freed while its holder lives on); their count or -errno. */
int tether_orphans(space_ctx *ctx, char (*ids)[32], int max);

/* ---- the lifecycle's own (sandbox.c, sandbox_create.c, sandbox_restart.c) ---- */

struct backend_ops;
struct backend_proc;

/* Sets a row's status and reason (an event of that status's name): a compare-and-set from whatever
 * status may precede it (store/sandboxes.h); -ESTALE when none may. */
int sandbox_mark(space_ctx *ctx, const char *id, enum space_sandbox_status status, const char *reason);

/* A handle for a row (its metadata moves into the handle). */
int sandbox_handle_new(space_ctx *ctx, struct sandbox_row *row, space_sandbox **ret);

/* Replaces the row a handle holds (row's metadata moves into the handle). */
void sandbox_handle_set_row(space_sandbox *sb, struct sandbox_row *row);

/* A new sandbox's disk: the subvolume <pool>/sandboxes/<id>/disk (into buf), and the directory of its own
 * that holds it, made before the snapshot (sandbox.c says why). */
int sandbox_disk_path(const char *pool, const char *id, char *buf, size_t len);
int sandbox_disk_dir_make(const char *disk);

/* Removes what a sandbox has on disk: its subvolume, the directory of its own that held it (none for a
 * sandbox made before those: its row's path says), and its runtime directory. */
int sandbox_release_disk(space_ctx *ctx, const struct sandbox_row *row);

/* Ends the sandbox's helpers (space-logcap, space-gateway, space-snapd) through their cgroup, a sibling of
 * the sandbox's (util/stop.h), and removes it: for a destroy, once the sandbox's own cgroup is stopped.
 * 0 (also on a host without cgroups, where none was made) or -errno with the context's error set. */
int sandbox_stop_helpers(space_ctx *ctx, const char *id);

/* Records a started sandbox in the row (status running, its process, the metadata meta, which the row
 * then owns) and in the in-memory copy. */
int sandbox_row_set_running(space_ctx *ctx, struct sandbox_row *row, const struct backend_proc *proc, char *meta,
			    const char *event, const char *detail);

/*
 * The memory snapshot a sandbox of back-end ops made from disk_src restores instead of booting, when
 * disk_src (a VM checkpoint, a template with a snapshot) carries one and o asks for its vCPUs and RAM or
 * for none: fills snap and the sizes and returns true.
 */
bool sandbox_restore_source(space_ctx *ctx, const struct backend_ops *ops, const char *disk_src,
			    const struct space_sandbox_options *o, char *snap, size_t len, uint32_t *cpus,
			    uint32_t *memory_mib);

/* The sandbox's egress gateway (src/net, docs/network.md) through its back-end, with the policy and trust. */
int sandbox_net_attach(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row, pid_t pid,
		       const char *policy, bool trusted, const char *const *allow_resolve);
/* A new gateway for a running sandbox whose process is pid (its old one ended first): the policy and trust
 * it was created with, else an empty policy when that cannot be applied again (sandbox_restart.c). */
int sandbox_net_reattach(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row, pid_t pid);
/* The next reap's care of a running sandbox's helpers that died (sandbox_revive.c): a new egress gateway
 * or snapshot helper, each recorded as an event. Returns how many were started again; never fails. */
int sandbox_revive_helpers(space_ctx *ctx);
/* VMs whose disk waits for room in a full pool: shown paused, "pool full", until it has room
 * (core/sandbox_revive.c). */
void sandbox_sync_pool_full(space_ctx *ctx);
/* How such a sandbox's reason begins, and whether a paused sandbox's reason is that one. */
#define SANDBOX_POOL_FULL_REASON "pool full"
bool sandbox_reason_pool_full(const char *reason);
