/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of src/vmm (not used outside it). */
#pragma once

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>

#include "devices/i8042.h"
#include "devices/mmio_dev.h"
#include "devices/serial.h"
#include "vmm/vmm.h"

struct vcpu {
	struct vm *vm;
	unsigned id;          /* also its APIC ID */
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool thread_started;
};

struct vm_mmio_slot {
	struct mmio_dev dev;
	int irq_fd;           /* eventfd bound with KVM_IRQFD to dev.gsi */
};

struct vm {
	struct vm_config cfg;
	int kvm_fd, vm_fd, mem_fd;  /* mem_fd: the memfd, or the snapshot file when ram_private */
	bool ram_private;           /* RAM is a MAP_PRIVATE mapping of a snapshot (vm_config.ram_fd) */
	uint8_t *ram;
	uint64_t ram_size;
	struct guest_mem mem;
	size_t run_size;
	struct kvm_cpuid2 *cpuid;   /* supported CPUID, filtered per vCPU in cpuid.c */
	unsigned nvcpus;
	struct vcpu vcpus[VM_MAX_VCPUS];
	struct serial *serial;
	struct i8042 *i8042;
	unsigned nmmio;
	struct vm_mmio_slot mmio[VM_MAX_MMIO_DEVS];
	bool loaded, ran;

	pthread_mutex_t lock;       /* guards outcome */
	atomic_bool stopping;
	struct vm_outcome outcome;
	int stop_fd;                /* eventfd: a vCPU thread ended the VM */

	/* Pause: vm_pause() sets pause_req and kicks; each vCPU thread parks in vm_vcpu_park() outside
	 * KVM_RUN until vm_resume() or the VM stops. pause_lock guards pause_req and parked. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	atomic_bool pause_req;
	unsigned parked;
	/* A disk write waits for room in the host's file system (vm_disk_wait_space, in vm.c). */
	atomic_bool disk_full;
	char err[256];
};

/* Records why the VM ends (the first caller wins) and wakes vm_run(). Thread-safe. */
void vm_stop(struct vm *vm, enum vm_exit_reason reason, unsigned code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Sets vm->err (printf-style) and returns r (a -errno) for `return vm_fail(vm, r, ...)`. */
int vm_fail(struct vm *vm, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* vcpu.c */
int vcpu_init(struct vm *vm, unsigned id);
int vcpu_set_boot_state(struct vcpu *v, uint64_t entry, uint64_t boot_params);
void *vcpu_thread(void *arg);
void vcpu_kick(struct vcpu *v);
/* Called by a vCPU thread that saw pause_req: waits outside KVM_RUN until resumed or stopping. */
void vm_vcpu_park(struct vm *vm);

/* cpuid.c: fills the vCPU's CPUID from the supported list for a VM of ncpus. */
int cpuid_setup(int vcpu_fd, const struct kvm_cpuid2 *supported, unsigned apic_id, unsigned ncpus,
		bool tsc_deadline);
/* KVM_GET_SUPPORTED_CPUID into a malloc'd struct. */
int cpuid_get_supported(int kvm_fd, struct kvm_cpuid2 **ret);

/* io.c: port I/O and MMIO exits. */
void vm_handle_io(struct vm *vm, struct vcpu *v);
void vm_handle_mmio(struct vm *vm, struct vcpu *v);
