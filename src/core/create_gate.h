/* SPDX-License-Identifier: Apache-2.0 */
/*
 * At most a few creates of one process at once; the others wait their turn, in order of arrival.
 *
 * A create is mostly kernel work (a btrfs snapshot, namespaces, mounts, cgroups, the jail's processes) on
 * the host's few CPUs. Run 256 at once on 2 cores and each one's kernel work costs more than alone (more
 * runnable tasks, more processes and descriptors to copy and walk, locks held across preemption), so
 * throughput fell as callers grew (measured: 16 clients 141 cycles/s, 256 clients 107). Queued, 256
 * callers make as many per second as 16, with the same work done and a shorter tail.
 *
 * The limit is twice the CPUs the process may run on, or SPACE_CREATE_CONCURRENCY (0..100000; 0: no limit),
 * read at the first create. It covers only the making of a sandbox (space_sandbox_create and what fills
 * warm pools, forks and builds make through it), never what a sandbox does after.
 */
#pragma once

/* Waits for a slot (in order of arrival). 0, or -EINVAL when SPACE_CREATE_CONCURRENCY does not parse (then
 * every create is refused, as every other operator setting that does not parse refuses what it sets). */
int create_gate_enter(void);
/* Gives the slot to the first waiter, if any. */
void create_gate_leave(void);
/* How many wait now. */
unsigned create_gate_waiting(void);
