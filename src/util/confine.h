/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Confinement shared by the helpers that face hostile input (space-gateway, space-vmm, space-logcap,
 * space-unpack, the snapshot sync child): dropping everything of root for good, or keeping exactly the
 * capabilities a task needs, and the SIGSYS reporter that names a system call a seccomp filter trapped
 * before the process dies. Needs libseccomp (syscall names).
 */
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Drops to uid (and the same gid, no supplementary groups) for good: securebits locked so that neither uid
 * 0 nor exec gives capabilities back, the bounding and ambient sets emptied, then every capability set
 * cleared and checked empty (checked rather than trusted, with the uids), not dumpable, no_new_privs.
 * Refuses uid 0. Call as root, before the seccomp filter. Returns 0, or -errno with a message in err (when
 * err and errlen are non-zero).
 */
int confine_drop_to_uid(uint32_t uid, char *err, size_t errlen);

/*
 * Keeps exactly the capabilities in mask (bit n: capability n), for a process that stays uid 0 (of a user
 * namespace of its own): every other one dropped from the bounding set, the ambient set cleared, mask
 * alone effective and permitted, nothing inheritable, then checked with capget rather than trusted. Neither
 * no_new_privs nor dumpable is touched. Call before the seccomp filter. Returns 0, or -errno with a message
 * in err (-EPERM when the sets read back are not mask's).
 */
int confine_keep_caps(uint64_t mask, char *err, size_t errlen);

/*
 * Installs handler for SIGSYS (SA_SIGINFO, every signal blocked while it runs), with the name of each
 * system call resolved now, since the handler may not allocate. Once per process: later calls return 0 and
 * install nothing (a filter in place may forbid rt_sigaction of SIGSYS). Returns 0 or -errno with err.
 */
int confine_sigsys_install(void (*handler)(int, siginfo_t *, void *), char *err, size_t errlen);

/* For the handler (async-signal-safe): the name of system call nr, or "syscall" when it has none. */
const char *confine_syscall_name(unsigned nr);

/* For the handler (async-signal-safe): appends s, or v in decimal, to buf[at..cap - 1); returns the new at. */
size_t confine_put(char *buf, size_t at, size_t cap, const char *s);
size_t confine_put_uint(char *buf, size_t at, size_t cap, unsigned long v);

/* For the handler: ends the process through the one call the filters kill (kexec_load), whose kill the
 * kernel reports as SIGSYS for the whole process. Filters built with this module must add that rule. */
_Noreturn void confine_sigsys_die(void);

/* The call confine_sigsys_die() makes; a filter kills the process on it (SCMP_ACT_KILL_PROCESS). */
#define CONFINE_KILL_SYSCALL SCMP_SYS(kexec_load)
