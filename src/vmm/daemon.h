/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space-vmm run`: one sandbox's VM as a daemon, controlled over a unix socket (docs/vmm.md, "The
 * daemon"). The library starts it with posix_spawn; it detaches (setsid, second fork) so the sandbox
 * outlives its creator, reports setup success or failure on --ready-fd, runs the VM and answers
 * status / pause / resume / stop requests on --control until the guest ends.
 *
 * `space-vmm boot` is the same code in the foreground: the console on stdout (unless --quiet), the
 * control socket and the log optional, and the guest's outcome as the exit status (options.h).
 */
#pragma once

#include "vmm/options.h"

/* Entry point of `space-vmm run` and `boot` (argv[0] is the verb). Returns the process exit status. */
int vmm_run_main(enum vmm_verb verb, int argc, char **argv);
