/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library's own views of sandboxes, checkpoints, templates and the pool: fixed-size structs the core
 * fills and passes around. The public API never exposes them: core/api_out.c turns them into the
 * size-versioned objects of space.h (strings owned by the object) at the boundary, so these may change
 * freely. Private.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "space.h"

struct sandbox_info {
	char id[32];              /* "sb-" + 16 base32 characters */
	char template_name[64];
	char isolation[8];        /* "vm" or "jail" */
	enum space_sandbox_status status;
	char reason[256];         /* why it failed or stopped, "" otherwise */
	int32_t pid;              /* the sandbox's host process; 0 if none */
	uint32_t cpus;
	uint32_t memory_mib;
	int64_t created_ms;
	int64_t updated_ms;
	int64_t expires_ms;       /* 0 = no lifetime limit */
	char path[4096];          /* the sandbox's subvolume */
};

struct checkpoint_info {
	char id[SPACE_CHECKPOINT_ID_MAX];
	char sandbox_id[32];
	char template_name[64];
	char name[64];            /* "" if none was given */
	char kind[8];             /* "disk" or "full" */
	char path[4096];          /* its read-only subvolume */
	int64_t created_ms;
};

struct template_info {
	char name[64];
	char path[4096];          /* the template's subvolume */
	uint64_t rootfs_bytes;
	bool has_kernel;
	bool has_initrd;
	int64_t created_ms;
	uint32_t sandboxes;
	uint32_t checkpoints;
	char image_digest[80];    /* "" when not made from an image */
};

struct pool_info {
	char path[4096];
	char loop_image[4096];    /* "" when the pool is not a loop image */
	char isolation[8];
	uint64_t total_bytes;
	uint64_t free_bytes;
	bool mounted;
	uint64_t used_bytes;
	uint64_t promised_bytes;  /* the sandboxes' disks' apparent sizes, summed */
	uint32_t sandbox_disks;
};

/* The calls behind the public ones of the same name (space_sandbox_list, ...), on the views above. Lists
 * are one calloc'd array (free()). */
int core_sandbox_list(space_ctx *ctx, struct sandbox_info **ret_list, size_t *ret_count);
int core_sandbox_get_info(space_sandbox *sb, struct sandbox_info *ret);
int core_template_list(space_ctx *ctx, struct template_info **ret_list, size_t *ret_count);
int core_template_get(space_ctx *ctx, const char *name, struct template_info *ret);
/* template_start.c: runs template tname's start command in sb, a sandbox just made from it, and waits for
 * its port (0 when it has none). template_start_or_destroy: on failure also destroys and frees *sb
 * (NULL after), keeping the message. */
int template_start_run(space_ctx *ctx, space_sandbox *sb, const char *tname);
int template_start_or_destroy(space_ctx *ctx, space_sandbox **sb, const char *tname);
/* The process defaults an image gave template name (JSON, malloc'd into *ret; NULL when none). */
int core_template_image_config(space_ctx *ctx, const char *name, char **ret);
int core_checkpoint_list(space_ctx *ctx, const char *sandbox_id, struct checkpoint_info **ret_list,
			 size_t *ret_count);
int core_checkpoint_get(space_ctx *ctx, const char *id, struct checkpoint_info *ret);
int core_checkpoint_find(space_ctx *ctx, const char *sandbox_id, const char *id_or_name,
			 struct checkpoint_info *ret);
int core_pool_get_info(space_ctx *ctx, struct pool_info *ret);
struct net_secret_info;
int core_secret_list(space_ctx *ctx, struct net_secret_info **ret_list, size_t *ret_count);
int core_template_get_warm_info(space_ctx *ctx, const char *name, struct space_template_warm_info *ret);
int core_sandbox_get_snapshot_policy(space_ctx *ctx, const char *id, struct space_snapshot_policy *ret);
int core_template_get_snapshot_policy(space_ctx *ctx, const char *name, struct space_snapshot_policy *ret);
int core_sandbox_exec(space_sandbox *sb, const struct space_exec_options *opts, struct space_exec_result *ret);
int core_process_pump(space_process *p, struct space_exec_result *ret);
space_ctx *process_ctx(const space_process *p); /* the context a process was started on */
int core_sandbox_stat(space_sandbox *sb, const char *path, struct space_file_stat *ret);
int core_sandbox_get_usage(space_sandbox *sb, struct space_sandbox_usage *ret); /* core/sandbox_usage.c */
int core_sandbox_read_file(space_sandbox *sb, const char *path, int dst_fd, const struct space_read_options *opts,
			   struct space_file_stat *ret_stat);
int core_sandbox_exec_step(space_sandbox *sb, const struct space_exec_options *opts, unsigned flags,
			   struct space_exec_result *ret_result, char ret_rolled_back[SPACE_CHECKPOINT_ID_MAX]);
/* timeout_s 0: what is left of the checkpointed sandbox's lifetime. */
int core_checkpoint_fork(space_ctx *ctx, const char *checkpoint_id, uint32_t count, uint32_t timeout_s,
			 space_sandbox **ret_sandboxes);
int core_template_snapshot(space_ctx *ctx, const char *name, uint32_t cpus, uint32_t memory_mib);
/* True for a checkpoint name a periodic snapshot policy gives ("auto-<digits>"). */
bool core_checkpoint_name_automatic(const char *name);
