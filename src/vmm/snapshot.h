/* SPDX-License-Identifier: Apache-2.0 */
/*
 * VM snapshots: the whole machine (vCPUs, in-kernel irqchip, PIT, kvmclock, devices, guest RAM) in
 * one file (format: docs/snapshot.md, src/vmm/snapshot_format.h), and new VMs restored from it with
 * their RAM mapped MAP_PRIVATE from the file, so every restore of one snapshot shares its unchanged
 * pages and no restore sees another's writes.
 *
 * Call order, save:    vm_run() on one thread ... vm_pause() -> vm_snapshot_save() -> vm_resume() or
 *                      vm_request_stop(), from another (the space-vmm control thread).
 * Call order, restore: vm_create_from_snapshot() -> vm_run() -> vm_destroy(). No vm_load_kernel().
 */
#pragma once

#include <stddef.h>

#include "vmm/vmm.h"

/*
 * Writes the state of vm to path (through path.tmp and a rename, so path is either the old file or
 * the complete new one). The VM must be paused (vm_pause(): every vCPU parked) or loaded and not yet
 * run; -EBUSY otherwise. Guest RAM is written sparsely: all-zero pages stay holes in the file.
 * Returns 0 or -errno; vm_error() says why.
 */
int vm_snapshot_save(struct vm *vm, const char *path);

/*
 * The same into an open regular file (truncated first, fsync'd after), for a jailed VMM that can open
 * nothing: the caller opens the file and passes the descriptor (space-vmm's `snapshot-fd` request).
 */
int vm_snapshot_save_fd(struct vm *vm, int fd);

struct vm_restore_config {
	int console_fd;       /* as in struct vm_config */
	int console_log_fd;
	int console_log_old_fd; /* with console_log_max: the log's cap (0: uncapped) */
	uint64_t console_log_max;
	int kvm_fd;
	/*
	 * Re-creates the devices with vm_add_disk/rng/vsock/net, the same kinds in the same order as the
	 * VM that was saved (the files and sockets may differ: a fork gets its own disk copy). May be
	 * NULL for a VM without devices. Returns 0 or -errno (vm_error() says why).
	 */
	int (*add_devices)(struct vm *vm, void *userdata);
	void *userdata;
};
#define VM_RESTORE_CONFIG_INIT { .console_fd = -1, .console_log_fd = -1, .console_log_old_fd = -1, .kvm_fd = -1 }

/*
 * Creates a VM from the snapshot at path: the snapshot's vCPU count and RAM size, RAM mapped from
 * the file, devices from cfg->add_devices with their saved state, then every vCPU's state, the
 * irqchip, PIT and clock. The VM is ready for vm_run(). Refused, with the reason in err and nothing
 * left behind: a file that is not a snapshot (-EINVAL), another format or libspace version
 * (-EPROTONOSUPPORT), a checksum mismatch (-EBADMSG), a truncated file (-EINVAL), a snapshot from a
 * CPU with another feature set (-ENOEXEC), devices that do not match (-EINVAL).
 */
int vm_create_from_snapshot(const char *path, const struct vm_restore_config *cfg, struct vm **ret,
			    char *err, size_t errlen);
