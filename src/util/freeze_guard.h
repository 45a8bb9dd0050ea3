/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

#include "util/cgroup.h"

/*
 * A frozen file system outlives everything: when the process that froze it (FIFREEZE) dies before it
 * thaws it, every writer blocks for ever, the sandbox's processes cannot be killed out of their writes,
 * and the file system stays alive after its last mount is gone, holding its loop device and the pool under
 * it. A freeze guard is a small process started before the freeze: if its starter dies (any signal, kill -9
 * included) it thaws the file system and the cgroup and exits; when the starter ends normally it exits
 * without doing anything. It holds copies of the starter's descriptors (the sandbox's lock among them)
 * until it exits, so nobody else acts on the sandbox before it is thawed.
 */
struct util_freeze_guard {
	pid_t pid;
	int done_w;
	void *mem;
};

/* Starts a guard that thaws fs_fd (FITHAW; -1: none) and the cgroup spec (util/cgroup.h; NULL or "": none)
 * should the caller die before util_freeze_guard_end. Returns 0 or -errno (then nothing was started). */
int util_freeze_guard_start(struct util_freeze_guard *g, int fs_fd, const char *cgroup);

/* The caller thawed what it froze: the guard exits untouched and is reaped. */
void util_freeze_guard_end(struct util_freeze_guard *g);
