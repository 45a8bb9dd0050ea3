/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: the background filler of templates' warm pools. */
#pragma once

struct serve_pool;

/* Starts a thread (with its own context over state_dir, NULL: the default) that runs space_warm_pool_fill for
 * every template at once and then every second, so a hand-out is replaced within about a second. */
int serve_pool_start(const char *state_dir, struct serve_pool **ret);

/* Stops and joins the thread (a fill in progress finishes first). NULL is fine. */
void serve_pool_stop(struct serve_pool *p);
