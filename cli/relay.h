/* SPDX-License-Identifier: Apache-2.0 */
/* Byte relay between two connected stream sockets (`space port`, the port routes of `space serve`). */
#pragma once

/*
 * Copies bytes both ways between a and b until both directions ended, passing each end on as a
 * half-close (shutdown(SHUT_WR) of the other socket), then closes both. Blocks the calling thread; the
 * b -> a direction runs on a thread of its own. a and b are taken over whatever the outcome.
 */
void cli_relay(int a, int b);
/* cli_relay() on a detached thread of its own; returns at once (0), or -errno with a and b closed. */
int cli_relay_detached(int a, int b);
