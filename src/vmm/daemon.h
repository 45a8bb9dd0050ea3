/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space-vmm run`: one sandbox's VM as a daemon, controlled over a unix socket (docs/vmm.md, "The
 * daemon"). The library starts it with posix_spawn; it detaches (setsid, second fork) so the sandbox
 * outlives its creator, reports setup success or failure on --ready-fd, runs the VM and answers
 * status / pause / resume / stop requests on --control until the guest ends.
 */
#pragma once

/* Entry point of `space-vmm run` (argv[0] is "run"). Returns the process exit status. */
int vmm_daemon_main(int argc, char **argv);
