/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The vm isolation back-end: one space-vmm daemon per sandbox (src/vmm/daemon.c), started with
 * posix_spawn, found again by any process through the sandbox row (pid, pid start time, cgroup, runtime
 * directory). Private to the library; the rest of it calls the back-end through backend_vm_ops
 * (core/backend.h), apart from the snapshot file helpers below.
 *
 * Runtime directory of a vm sandbox (<state>/run/<id>/):
 *   sandbox.log      serial console of the guest and "space-vmm: ..." lines of the VMM
 *   control.sock     the daemon's control socket (status, pause, resume, stop; docs/vmm.md)
 *   vm/vsock.sock    virtio-vsock host side; the agent is at "vsock-uds:<that>:1024"
 *   root/            the empty directory space-vmm pivot_roots into (its jail)
 *
 * All functions return 0 or -errno with the context's last error set.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"
#include "core/internal.h"
#include "core/sandbox.h"

struct agent_info;

/* 0 when this host can run vm sandboxes (/dev/kvm opens, guest ring 0 is not emulated); else -ENODEV
 * with a message naming the cause and what to do. Fast: no disk is touched. */
int vm_backend_available(space_ctx *ctx);

/*
 * Starts the VM of a row whose disk is in place (row->info.path/rootfs.ext4; the subvolume's
 * template.json, kernel and initrd choose what boots) and waits until its agent answers HELLO
 * (deadline: $SPACE_VM_BOOT_TIMEOUT seconds, default 120). With restore (a snapshot file), the VM is
 * restored from it instead of booted, and its guest gets a fresh identity (vm_backend_refresh_identity).
 * Fills *ret with the daemon's pid, start time,
 * its uid (uid_base) and cgroup, and *ai with the agent's HELLO. On failure nothing is left running.
 */
int vm_backend_start(space_ctx *ctx, const struct sandbox_row *row, const char *hostname, uint32_t lifetime_s,
		     const char *restore, struct backend_proc *ret, struct agent_info *ai);

/*
 * After a restore from a memory snapshot that other sandboxes may share: the guest gets fresh entropy
 * (RESEED), the host's time (SET_TIME), its own hostname and lifetime (0: none). Done by
 * vm_backend_start itself when restore is set; also for a paused pooled sandbox handed out.
 */
int vm_backend_refresh_identity(space_ctx *ctx, const struct sandbox_row *row, const char *hostname,
				uint32_t lifetime_s);

/*
 * Saves the running or paused VM's memory, vCPU and device state into a new file at path (the daemon's
 * snapshot-fd request: we open the file, the jailed VMM writes it). The VM is paused while it is saved
 * and left as it was. On failure path is removed.
 */
int vm_backend_snapshot(space_ctx *ctx, const struct sandbox_row *row, const char *path);

/* The file a VM checkpoint (or a template snapshot) keeps the snapshot in, inside its subvolume. */
#define VM_SNAPSHOT_FILE "vmstate.snap"
#define VM_SNAPSHOT_META "vmstate.json" /* {"cpus": N, "memory_mib": M} of the VM it was taken of */

/* Writes dir/vmstate.json. 0 or -errno (no context: the caller reports). */
int vm_backend_snapshot_meta_write(const char *dir, uint32_t cpus, uint32_t memory_mib);

/*
 * Whether the subvolume dir carries a VM snapshot: 0 with snap = dir/vmstate.snap and the vCPUs and RAM
 * it was taken with; -ENOENT when it has none; another -errno for an unreadable or bad vmstate.json.
 */
int vm_backend_snapshot_find(const char *dir, char *snap, size_t len, uint32_t *ret_cpus, uint32_t *ret_memory_mib);

/* Stops the VM: a control `stop`, then SIGKILL after a grace period; removes its cgroup. Fine on a dead
 * VM (idempotent). */
int vm_backend_kill(space_ctx *ctx, const struct sandbox_row *row);

/* Pauses (vCPUs parked) or resumes the VM through its control socket. */
int vm_backend_pause(space_ctx *ctx, const struct sandbox_row *row, bool pause);

/* The agent's address of a vm sandbox with this runtime directory. */
void vm_backend_agent_addr(const char *runtime_dir, char *buf, size_t len);

/*
 * Why the space-vmm of a sandbox is gone, for its failure reason: the last "space-vmm: ..." line of its
 * log (e.g. "space-vmm: triple fault on vCPU 0", a seccomp violation), else a generic sentence.
 */
void vm_backend_death_reason(const char *runtime_dir, int pid, char *buf, size_t len);

/* 1 when the VMM in runtime_dir says a disk write waits for room in the pool (docs/vmm.md, "A full
 * pool"), 0 when not, -errno when it did not answer within a short while. */
int vm_backend_disk_full(const char *runtime_dir);
