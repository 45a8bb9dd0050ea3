/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The microVMM core: one `struct vm` is one KVM virtual machine with its guest RAM, vCPU threads and
 * devices. Nothing here is process-global, so several VMs could share a process; in practice each VM
 * runs in its own space-vmm process (src/vmm/main.c), which is the only place that prints or exits.
 *
 * Call order: vm_create() -> vm_add_disk()*, vm_add_rng(), vm_add_vsock(), vm_add_net() ->
 * vm_load_kernel() -> vm_run() -> vm_destroy().
 * Every function returns 0 (or >= 0) on success and -errno on failure; on failure vm_error() gives a
 * human-readable reason ("bzImage truncated: ...").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/guest_mem.h"

#define VM_MAX_VCPUS 64
#define VM_MAX_MMIO_DEVS 16

/* Guest physical address map (x86_64). */
#define VM_LOW_RAM_END      0xc0000000ull /* RAM below the 32-bit hole ends here */
#define VM_HIGH_RAM_START   0x100000000ull
#define VM_MMIO_BASE        0xd0000000ull /* virtio-mmio windows, VM_MMIO_STRIDE apart */
#define VM_MMIO_STRIDE      0x1000ull
#define VM_MMIO_WINDOW      0x200ull
#define VM_MMIO_FIRST_GSI   5             /* GSI 4 is the serial port */
#define VM_IOAPIC_ADDR      0xfec00000ull
#define VM_LAPIC_ADDR       0xfee00000ull
#define VM_IDENTITY_MAP     0xfeffc000ull /* KVM_SET_IDENTITY_MAP_ADDR: one page */
#define VM_TSS_ADDR         0xfeffd000ull /* KVM_SET_TSS_ADDR: three pages */

/* I/O ports the VMM answers (besides the 8250 at 0x3f8 and the i8042 at 0x60/0x64). */
#define VM_PORT_DEBUG_EXIT  0x501 /* outb(code): ends the VM; code 0 = success, else guest failure */
#define VM_PORT_SLEEP_CTL   0x600 /* ACPI hw-reduced sleep control register (SLP_TYP 5 + SLP_EN = off) */
#define VM_PORT_SLEEP_STS   0x601 /* ACPI hw-reduced sleep status register */
#define VM_PORT_RESET       0x602 /* ACPI reset register; VM_RESET_VALUE written there resets */
#define VM_RESET_VALUE      0x01
#define VM_ACPI_S5_TYPE     5

/* Why vm_run() ended. */
enum vm_exit_reason {
	VM_EXIT_NONE = 0,
	VM_EXIT_POWEROFF,      /* ACPI S5, KVM system event shutdown, or debug exit code 0 */
	VM_EXIT_GUEST_FAILURE, /* debug exit port with a non-zero code (test guests) */
	VM_EXIT_RESET,         /* i8042 0xfe, ACPI reset register, KVM system event reset */
	VM_EXIT_TRIPLE_FAULT,  /* KVM_EXIT_SHUTDOWN */
	VM_EXIT_INTERNAL,      /* KVM_EXIT_INTERNAL_ERROR, FAIL_ENTRY, unexpected exits, ioctl errors */
	VM_EXIT_TIMEOUT,       /* vm_run's timeout elapsed */
};

struct vm_config {
	unsigned cpus;           /* 1..VM_MAX_VCPUS */
	uint64_t mem_bytes;      /* guest RAM; >= 16 MiB */
	int console_fd;          /* serial output goes here when >= 0 (not owned) */
	int console_log_fd;      /* and here when >= 0 (not owned; O_RDWR | O_APPEND when capped) */
	/* The console log's cap (devices/serial.h, util/caplog.h): both parts together at most this many bytes,
	 * console_log_old_fd (not owned) the older part. 0: uncapped (the operator's own `boot --console-log`). */
	int console_log_old_fd;
	uint64_t console_log_max;
	/* > 0: an already open /dev/kvm (duplicated, not owned), for a process that can no longer open it
	 * (jailed after opening it); 0 or -1: vm_create() opens /dev/kvm. */
	int kvm_fd;
	/* > 0: guest RAM is mapped MAP_PRIVATE from this file (duplicated, not owned) at ram_offset (a
	 * multiple of 4096) instead of a new memfd, so VMs restored from one snapshot share its
	 * unchanged pages; 0 or -1: a new memfd. */
	int ram_fd;
	uint64_t ram_offset;
};
#define VM_CONFIG_INIT { .cpus = 1, .mem_bytes = 256ull << 20, .console_fd = -1, .console_log_fd = -1, .console_log_old_fd = -1, .kvm_fd = -1, .ram_fd = -1 }

struct vm_outcome {
	enum vm_exit_reason reason;
	unsigned guest_code;     /* debug-exit code (VM_EXIT_GUEST_FAILURE) */
	char detail[160];        /* e.g. "KVM internal error suberror 1 on vCPU 0 at rip 0x..." */
};

struct vm;

/*
 * Opens /dev/kvm, creates the VM, guest RAM, irqchip, PIT, platform devices and vCPUs. On failure
 * writes the reason to err (when non-NULL) since there is no VM to ask.
 */
int vm_create(const struct vm_config *cfg, struct vm **ret, char *err, size_t errlen);

/* Adds a virtio-blk disk backed by path (next free window and GSI). -EOPNOTSUPP when not built in. */
int vm_add_disk(struct vm *vm, const char *path, bool read_only);

/* Adds a virtio-rng entropy device. -EOPNOTSUPP when not built in. */
int vm_add_rng(struct vm *vm);

/*
 * Adds a virtio-vsock device with the guest's CID (3..UINT32_MAX-1) whose host side listens on the
 * unix socket uds_path (see docs/vmm.md). -EOPNOTSUPP when not built in.
 */
int vm_add_vsock(struct vm *vm, uint64_t guest_cid, const char *uds_path);

/*
 * Adds a virtio-net device with the guest MAC mac, backed by tap_fd: a TAP opened IFF_TAP | IFF_NO_PI
 * without IFF_VNET_HDR (src/devices/tap.h), or any fd whose read()/write() move one frame each. The
 * device keeps a duplicate of tap_fd (the caller still owns and closes its own) and sets O_NONBLOCK
 * on the shared file description. -EOPNOTSUPP when not built in.
 */
int vm_add_net(struct vm *vm, int tap_fd, const uint8_t mac[6]);

/*
 * Loads a bzImage or vmlinux ELF (and the optional initrd), writes boot_params, the command line
 * (cmdline plus virtio_mmio.device= entries), ACPI tables, page tables, GDT, and sets the BSP's
 * registers for the 64-bit entry. Call once, after every vm_add_disk().
 */
int vm_load_kernel(struct vm *vm, const char *kernel_path, const char *initrd_path, const char *cmdline);

/* Runs the vCPUs until the guest ends the VM or timeout_ms (0 = none) passes. Fills *ret. */
int vm_run(struct vm *vm, uint64_t timeout_ms, struct vm_outcome *ret);

/*
 * Pause and resume, callable from any thread while vm_run() runs (the space-vmm control thread).
 * vm_pause() kicks every vCPU out of KVM_RUN and returns once all of them are parked outside it
 * (-ETIMEDOUT if one did not park within 2 s; the pause request stays). vm_resume() tells KVM that
 * each vCPU was stopped (KVM_KVMCLOCK_CTRL, so the guest's soft-lockup watchdog does not fire) and
 * lets them run again. Both are idempotent; -ESRCH when the VM is not running.
 */
int vm_pause(struct vm *vm);
int vm_resume(struct vm *vm);
/* True while paused (after vm_pause(), before vm_resume()). */
bool vm_paused(struct vm *vm);

/* Whether a disk write waits for room in the host's file system (the pool is full): the guest is stalled
 * on its disk until there is, and it cannot be paused or snapshotted meanwhile (a request is half done). */
bool vm_disk_full(struct vm *vm);

/* Ends a running VM from outside (e.g. a control request): vm_run() returns with reason and detail. */
void vm_request_stop(struct vm *vm, enum vm_exit_reason reason, const char *detail);

/* Stops the vCPUs if running, frees everything. NULL is fine. */
void vm_destroy(struct vm *vm);

/* Last error text of the VM ("" if none). */
const char *vm_error(const struct vm *vm);

/* Guest RAM map (for tests and devices). */
const struct guest_mem *vm_guest_mem(const struct vm *vm);
