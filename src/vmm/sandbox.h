/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The space-vmm process's seccomp allowlist, installed after every resource is acquired (KVM fds,
 * guest RAM, disks, console files) and before the vCPUs run: from then on the process can only run
 * the VM it has. Applies to every thread (TSYNC). Anything else kills the process (SIGSYS).
 */
#pragma once

/* Returns 0 or -errno. A no-op in sanitizer (ASan/TSan/MSan) builds, whose runtimes need more. */
int vmm_sandbox_apply(void);
