/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest's CPUID: what KVM can virtualise (KVM_GET_SUPPORTED_CPUID), with the hypervisor bit set,
 * the topology made consistent with the VM's vCPU count (one core per vCPU, one thread per core,
 * APIC ID = vCPU index), and features without a virtual implementation removed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm/vm_priv.h"

int cpuid_get_supported(int kvm_fd, struct kvm_cpuid2 **ret)
{
	for (unsigned n = 128; n <= 4096; n *= 2) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(struct kvm_cpuid_entry2));
		if (!c)
			return -ENOMEM;
		c->nent = n;
		if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			*ret = c;
			return 0;
		}
		int e = errno;
		free(c);
		if (e != E2BIG)
			return -e;
	}
	return -E2BIG;
}

static unsigned order_of(unsigned n)
{
	unsigned s = 0;
	while ((1u << s) < n)
		s++;
	return s;
}

int cpuid_setup(int vcpu_fd, const struct kvm_cpuid2 *sup, unsigned apic_id, unsigned ncpus, bool tsc_deadline)
{
	size_t sz = sizeof(*sup) + sup->nent * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *c = malloc(sz);
	if (!c)
		return -ENOMEM;
	memcpy(c, sup, sz);
	unsigned core_shift = order_of(ncpus);
	for (unsigned i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];
		switch (e->function) {
		case 0x1:
			/* EBX: initial APIC ID, logical processors per package, CLFLUSH line size (8 x 8 bytes). */
			e->ebx = (apic_id << 24) | ((ncpus > 1 ? ncpus : 1) << 16) | (8u << 8);
			e->ecx |= 1u << 31;               /* running under a hypervisor */
			if (tsc_deadline)
				e->ecx |= 1u << 24;       /* KVM emulates the TSC-deadline LAPIC timer */
			if (ncpus > 1)
				e->edx |= 1u << 28;       /* HTT: more than one logical processor */
			else
				e->edx &= ~(1u << 28);
			break;
		case 0x4:
			/* Deterministic cache parameters: cores per package, one thread per cache. */
			e->eax &= 0x3ff;
			if (e->eax & 0x1f)
				e->eax |= (ncpus - 1) << 26;
			break;
		case 0x6:
			e->eax = 0; /* no thermal/power management */
			e->ecx = 0;
			break;
		case 0xa:
			e->eax = e->ebx = e->ecx = e->edx = 0; /* no architectural PMU */
			break;
		case 0xb:
		case 0x1f:
			/* Extended topology: level 0 = SMT (1 thread), level 1 = core (ncpus). */
			if (e->index == 0) {
				e->eax = 0;
				e->ebx = 1;
				e->ecx = (1u << 8) | 0;
			} else if (e->index == 1) {
				e->eax = core_shift;
				e->ebx = ncpus;
				e->ecx = (2u << 8) | 1;
			} else {
				e->eax = e->ebx = 0;
				e->ecx = e->index;
			}
			e->edx = apic_id;
			break;
		case 0x40000001:
			/*
			 * KVM paravirt features: no asynchronous page faults (guest RAM is shared memfd
			 * memory, and a lost "page ready" notification hangs a guest task for good), and no
			 * "realtime" hint (vCPUs here are ordinary host threads that do get preempted).
			 */
			e->eax &= ~((1u << 4) | (1u << 10) | (1u << 14));
			e->edx = 0;
			break;
		case 0x80000001:
			/* AMD CmpLegacy: cores are reported through 0x80000008 rather than as HTT threads. */
			if (ncpus > 1)
				e->ecx |= 1u << 1;
			break;
		case 0x80000008:
			/* AMD: ApicIdCoreIdSize and NC (cores - 1). */
			e->ecx = (core_shift << 12) | (ncpus - 1);
			break;
		default:
			break;
		}
	}
	int r = ioctl(vcpu_fd, KVM_SET_CPUID2, c) < 0 ? -errno : 0;
	free(c);
	return r;
}
