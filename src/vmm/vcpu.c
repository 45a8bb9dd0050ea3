/* SPDX-License-Identifier: Apache-2.0 */
/* vCPUs: creation, the registers Linux expects at its 64-bit entry, and the run loop (one thread each). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "vmm/boot.h"
#include "vmm/sandbox.h"
#include "vmm/vm_priv.h"

#define MSR_IA32_TSC            0x10
#define MSR_IA32_SYSENTER_CS    0x174
#define MSR_IA32_SYSENTER_ESP   0x175
#define MSR_IA32_SYSENTER_EIP   0x176
#define MSR_IA32_MISC_ENABLE    0x1a0
#define MSR_MTRR_DEF_TYPE       0x2ff
#define MSR_STAR                0xc0000081
#define MSR_LSTAR               0xc0000082
#define MSR_CSTAR               0xc0000083
#define MSR_SYSCALL_MASK        0xc0000084
#define MSR_KERNEL_GS_BASE      0xc0000102

#define APIC_LVT_LINT0 0x350
#define APIC_LVT_LINT1 0x360
#define APIC_MODE_NMI    0x4
#define APIC_MODE_EXTINT 0x7

static int set_msrs(struct vcpu *v)
{
	static const struct { uint32_t index; uint64_t value; bool required; } msrs[] = {
		{ MSR_IA32_SYSENTER_CS, 0, true },  { MSR_IA32_SYSENTER_ESP, 0, true },
		{ MSR_IA32_SYSENTER_EIP, 0, true }, { MSR_STAR, 0, true },
		{ MSR_LSTAR, 0, true },             { MSR_CSTAR, 0, true },
		{ MSR_SYSCALL_MASK, 0, true },      { MSR_KERNEL_GS_BASE, 0, true },
		/* Fast strings on; MTRRs enabled with write-back as the default type (Linux warns otherwise).
		 * Not every KVM implements these, so they are best effort. */
		{ MSR_IA32_MISC_ENABLE, 1, false }, { MSR_MTRR_DEF_TYPE, (1u << 11) | 6, false },
	};
	for (size_t i = 0; i < sizeof(msrs) / sizeof(msrs[0]); i++) {
		_Alignas(struct kvm_msrs) uint8_t buf[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
		memset(buf, 0, sizeof(buf));
		struct kvm_msrs *m = (struct kvm_msrs *)buf;
		m->nmsrs = 1;
		m->entries[0].index = msrs[i].index;
		m->entries[0].data = msrs[i].value;
		int r = ioctl(v->fd, KVM_SET_MSRS, m);
		if (r != 1 && msrs[i].required)
			return vm_fail(v->vm, r < 0 ? -errno : -EIO, "KVM_SET_MSRS 0x%x failed", msrs[i].index);
	}
	return 0;
}

static int set_lapic(struct vcpu *v)
{
	struct kvm_lapic_state l;
	if (ioctl(v->fd, KVM_GET_LAPIC, &l) < 0)
		return vm_fail(v->vm, -errno, "KVM_GET_LAPIC: %m");
	uint32_t lint0, lint1;
	memcpy(&lint0, l.regs + APIC_LVT_LINT0, 4);
	memcpy(&lint1, l.regs + APIC_LVT_LINT1, 4);
	/* Like PC firmware: LINT0 takes the 8259's ExtINT, LINT1 is the NMI line. */
	lint0 = (lint0 & ~0x700u) | (APIC_MODE_EXTINT << 8);
	lint1 = (lint1 & ~0x700u) | (APIC_MODE_NMI << 8);
	memcpy(l.regs + APIC_LVT_LINT0, &lint0, 4);
	memcpy(l.regs + APIC_LVT_LINT1, &lint1, 4);
	if (ioctl(v->fd, KVM_SET_LAPIC, &l) < 0)
		return vm_fail(v->vm, -errno, "KVM_SET_LAPIC: %m");
	return 0;
}

int vcpu_init(struct vm *vm, unsigned id)
{
	struct vcpu *v = &vm->vcpus[id];
	v->vm = vm;
	v->id = id;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (v->fd < 0)
		return vm_fail(vm, -errno, "KVM_CREATE_VCPU %u: %m", id);
	v->run = mmap(NULL, vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		return vm_fail(vm, -errno, "mmap of vCPU %u run area: %m", id);
	}
	int r = cpuid_setup(v->fd, vm->cpuid, id, vm->cfg.cpus,
			    ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0);
	if (r < 0)
		return vm_fail(vm, r, "KVM_SET_CPUID2 on vCPU %u failed", id);
	r = set_msrs(v);
	if (r < 0)
		return r;
	r = set_lapic(v);
	if (r < 0)
		return r;
	struct kvm_fpu fpu;
	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0)
		return vm_fail(vm, -errno, "KVM_SET_FPU: %m");
	/* APs wait for the guest's INIT/SIPI. */
	struct kvm_mp_state mp = { .mp_state = id == 0 ? KVM_MP_STATE_RUNNABLE : KVM_MP_STATE_UNINITIALIZED };
	if (ioctl(v->fd, KVM_SET_MP_STATE, &mp) < 0)
		return vm_fail(vm, -errno, "KVM_SET_MP_STATE: %m");
	return 0;
}

static void seg(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code64)
{
	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->limit = 0xffffffff;
	s->type = type;
	s->present = 1;
	s->s = 1;
	s->l = code64;
	s->db = !code64;
	s->g = 1;
}

int vcpu_set_boot_state(struct vcpu *v, uint64_t entry, uint64_t boot_params)
{
	struct kvm_sregs sr;
	if (ioctl(v->fd, KVM_GET_SREGS, &sr) < 0)
		return vm_fail(v->vm, -errno, "KVM_GET_SREGS: %m");
	seg(&sr.cs, BOOT_CS, 0xb, true);
	seg(&sr.ds, BOOT_DS, 0x3, false);
	sr.es = sr.fs = sr.gs = sr.ss = sr.ds;
	memset(&sr.tr, 0, sizeof(sr.tr));
	sr.tr.selector = BOOT_TSS;
	sr.tr.limit = 0x67;
	sr.tr.type = 0xb; /* busy 64-bit TSS */
	sr.tr.present = 1;
	memset(&sr.ldt, 0, sizeof(sr.ldt));
	sr.ldt.type = 0x2;
	sr.ldt.present = 1;
	sr.ldt.unusable = 1;
	sr.gdt.base = BOOT_GDT_ADDR;
	sr.gdt.limit = 6 * 8 - 1;
	sr.idt.base = BOOT_IDT_ADDR;
	sr.idt.limit = 0;
	sr.cr0 = 0x80000000u | 0x10 | 0x1; /* PG | ET | PE */
	sr.cr3 = BOOT_PML4_ADDR;
	sr.cr4 = 0x20;                      /* PAE */
	sr.efer = 0x500;                    /* LME | LMA */
	if (ioctl(v->fd, KVM_SET_SREGS, &sr) < 0)
		return vm_fail(v->vm, -errno, "KVM_SET_SREGS: %m");
	struct kvm_regs regs;
	memset(&regs, 0, sizeof(regs));
	regs.rflags = 0x2;
	regs.rip = entry;
	regs.rsi = boot_params;
	regs.rsp = BOOT_STACK_TOP;
	if (ioctl(v->fd, KVM_SET_REGS, &regs) < 0)
		return vm_fail(v->vm, -errno, "KVM_SET_REGS: %m");
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (!v->run || !v->thread_started)
		return;
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(v->thread, SIGUSR1);
}

static void handle_exit(struct vcpu *v)
{
	struct vm *vm = v->vm;
	struct kvm_run *run = v->run;
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		vm_handle_io(vm, v);
		break;
	case KVM_EXIT_MMIO:
		vm_handle_mmio(vm, v);
		break;
	case KVM_EXIT_INTR:
		break;
	case KVM_EXIT_HLT:
		/* Only reachable without an in-kernel LAPIC; a halted guest with nothing to wake it is done. */
		vm_stop(vm, VM_EXIT_INTERNAL, 0, "vCPU %u halted with no interrupt source", v->id);
		break;
	case KVM_EXIT_SHUTDOWN:
		vm_stop(vm, VM_EXIT_TRIPLE_FAULT, 0, "triple fault on vCPU %u", v->id);
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			vm_stop(vm, VM_EXIT_RESET, 0, "guest requested a reset");
		else
			vm_stop(vm, VM_EXIT_POWEROFF, 0, "guest powered off");
		break;
	case KVM_EXIT_FAIL_ENTRY:
		vm_stop(vm, VM_EXIT_INTERNAL, 0, "VM entry failed on vCPU %u (hardware reason 0x%llx)", v->id,
			(unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_INTERNAL_ERROR: {
		struct kvm_regs regs;
		unsigned long long rip = ioctl(v->fd, KVM_GET_REGS, &regs) == 0 ? regs.rip : 0;
		vm_stop(vm, VM_EXIT_INTERNAL, 0, "KVM internal error (suberror %u) on vCPU %u at rip 0x%llx",
			run->internal.suberror, v->id, rip);
		break;
	}
	default:
		vm_stop(vm, VM_EXIT_INTERNAL, 0, "unhandled KVM exit %u on vCPU %u", run->exit_reason, v->id);
		break;
	}
}

void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	if (vmm_seccomp_thread_enter(VMM_THREAD_VCPU) < 0)
		return vm_stop(vm, VM_EXIT_INTERNAL, 0, "vCPU %u: cannot install its seccomp filter", v->id), NULL;
	while (!atomic_load(&vm->stopping)) {
		if (atomic_load(&vm->pause_req)) {
			vm_vcpu_park(vm);
			continue;
		}
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			/* EINTR: kicked (or a stray signal); EAGAIN: an AP leaving the wait-for-SIPI state. */
			if (errno == EINTR || errno == EAGAIN) {
				__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
				continue;
			}
			vm_stop(vm, VM_EXIT_INTERNAL, 0, "KVM_RUN on vCPU %u: %s", v->id, strerror(errno));
			break;
		}
		handle_exit(v);
	}
	return NULL;
}
