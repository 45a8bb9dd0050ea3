/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the two halves of the space-unpack runner share: unpack.c (the image modes, run under a uid slot)
 * and unpack_tree.c (copy and receive, run as root of a user namespace over idmapped mounts). Private.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/internal.h"
#include "util/uidalloc.h"

#define LINE_MAX_BYTES 1024

struct helper {
	space_ctx *ctx;
	pid_t pid;
	int ctl;
	uint32_t uid;
	char owner[UIDALLOC_OWNER_MAX + 1];
	char buf[LINE_MAX_BYTES + 1];
	size_t len;
	char error[LINE_MAX_BYTES];
};

/* In a child between fork and exec (async-signal-safe only): dies with its parent (which must still be
 * parent), with no signal blocked. false: it cannot. */
bool helper_tie_to(pid_t parent);
/* In a child: want[i] becomes fd i for i < n, everything from n on is closed. */
bool helper_place_fds(const int *want, size_t n);
/* Ends the helper (killed unless it already exited) and reaps it. Returns its wait status. */
int helper_reap(struct helper *h, bool kill_it);
/* The next status line, within the idle timeout. -EPIPE at EOF. */
int helper_next_line(struct helper *h, char *line, size_t len);
/* The helper's end: "error ..." as the message, or how it died. */
int helper_failed(struct helper *h, const char *what, int r);
/* Whether line starts with the word w; *rest: what follows it. */
bool helper_word(const char *line, const char *w, const char **rest);
