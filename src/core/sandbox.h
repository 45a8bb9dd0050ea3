/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox rows and handles, shared by the lifecycle, process and file code. Private. */
#pragma once

#include <limits.h>
#include <stdint.h>

#include "core/internal.h"

struct sandbox_row {
	struct space_sandbox_info info;
	uint64_t pid_start;          /* start time of info.pid, against pid reuse */
	uint32_t uid_base;           /* jail: host uid of root inside */
	char runtime_dir[PATH_MAX];  /* sockets and logs */
	char cgroup[256];
	char *metadata;              /* JSON: env, uid_base */
};

/* Loads a row by id (-ENOENT with a message if none). Free with sandbox_row_clear. */
int sandbox_row_load(space_ctx *ctx, const char *id, struct sandbox_row *row);
void sandbox_row_clear(struct sandbox_row *row);

/* The agent's address ("unix:..."), the context and the sandbox-wide environment of a handle. */
const char *sandbox_addr(const space_sandbox *sb);
space_ctx *sandbox_ctx(const space_sandbox *sb);
char *const *sandbox_env(const space_sandbox *sb);
