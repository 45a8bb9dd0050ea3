/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp allowlists of space-vmm, one per thread role (docs/vmm.md, "seccomp").
 *
 * Call order: acquire every resource (KVM fds, guest RAM, disks, sockets, console files), then
 * vmm_seccomp_apply(VMM_THREAD_MAIN) on the main thread (daemon.c does that), then start the
 * vCPU threads. MAIN is the process filter: it is synchronized onto every thread that already exists
 * (TSYNC) and inherited by every thread started later, so it holds the union of all roles' lists plus
 * what only the main thread does (start and join threads). Each other thread then narrows itself with
 * vmm_seccomp_thread_enter(ROLE) at its entry point; filters stack, so a thread may only make the
 * syscalls both MAIN and its role allow.
 *
 * A syscall outside the list kills the whole process with SIGSYS. Before it dies, the thread that
 * made the call writes "space-vmm: seccomp violation: <syscall> (<nr>) in a <role> thread" to stderr
 * (the filters answer with SECCOMP_RET_TRAP; the SIGSYS reporter cannot be replaced or masked, and ends
 * the process through a syscall every filter answers with SECCOMP_RET_KILL_PROCESS).
 *
 * Sanitizer builds (ASan/TSan/MSan) that are test builds (meson -Dtest_switches=true) install nothing: their
 * runtimes need far more than a VMM. Every other build installs the filters.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum vmm_thread_role {
	VMM_THREAD_MAIN,    /* setup, thread start/join, waits for the stop event; the process filter */
	VMM_THREAD_VCPU,    /* KVM_RUN and the exits it handles (PIO/MMIO, virtio notify, blk I/O) */
	VMM_THREAD_DEVICE,  /* a device's event loop (virtio-vsock host sockets, virtio-net receive) */
	VMM_THREAD_CONTROL, /* the control socket: requests from the host (pause, resume, state) */
	VMM_THREAD_ROLES,
};

/*
 * Installs the filter of ROLE on the calling thread (MAIN: on every thread of the process, and arms
 * vmm_seccomp_thread_enter). Returns 0 or -errno; on failure writes a reason to err (errlen bytes,
 * NUL-terminated). Nothing is installed in sanitized test builds (returns 0).
 */
int vmm_seccomp_apply(enum vmm_thread_role role, char *err, size_t errlen);

/*
 * For thread entry points (and event loops, after each wake-up): once the process filter is in place
 * (MAIN applied), installs ROLE's filter on the calling thread, once per thread; before that, and with
 * --no-seccomp, does nothing. Returns 0 or -errno; a thread that gets an error must not run guest work.
 * Test hook, in test builds only (meson -Dtest_switches=true; release builds do not read the variable):
 * with SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 in the environment when MAIN was applied, a VCPU or
 * DEVICE thread then calls execve(), which its filter forbids: the process must die with SIGSYS. With
 * the value "device", only DEVICE threads do (vCPU threads start first, so "1" always names a vCPU).
 */
int vmm_seccomp_thread_enter(enum vmm_thread_role role);

/* Number of rules in ROLE's filter (syscalls, counting each argument-filtered variant once). */
size_t vmm_seccomp_rule_count(enum vmm_thread_role role);

/* "main", "vCPU", "device", "control". */
const char *vmm_seccomp_role_name(enum vmm_thread_role role);

/*
 * The descriptor of the daemon's status file (--status): the SIGSYS reporter writes its line there too,
 * without the "space-vmm: " prefix, so the reason of a seccomp kill reaches the library on a channel the
 * guest cannot write. -1 (the default): stderr only. Call before vmm_seccomp_apply.
 */
void vmm_seccomp_set_report_fd(int fd);
