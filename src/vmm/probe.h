/* SPDX-License-Identifier: Apache-2.0 */
/* Measures how fast this host's KVM runs guest ring-0 code (see probe.c). */
#pragma once

#include <stdint.h>

/* Below this many ns per instruction ring 0 runs natively; below the second a Linux guest may boot. Speed
 * does not separate the two kinds of slow hosts: a nested KVM under a software-emulated SVM, where Linux
 * boots, measured 2.7, 168, 177 and 366 ns in four runs; a nested PVM, where it does not, 440-1000 ns. So a
 * PVM host is named by its module (probe.c), and the line is only for a ring 0 slower than both. */
#define VMM_PROBE_NATIVE_NS 5.0
#define VMM_PROBE_USABLE_NS 2000.0

enum vmm_probe_verdict {
	VMM_PROBE_NATIVE,   /* hardware virtualization */
	VMM_PROBE_SLOW,     /* nested or partly emulated, but Linux guests boot (slowly) */
	VMM_PROBE_EMULATED, /* ring 0 emulated instruction by instruction: stock Linux does not boot */
};

struct vmm_probe_result {
	int api_version;
	uint32_t iterations;
	double seconds;
	double ns_per_insn;
	enum vmm_probe_verdict verdict;
	char error[160];       /* why the probe failed */
};

/* Runs the probe in this process (it opens /dev/kvm). 0, or -errno with res->error set. */
int vmm_probe(struct vmm_probe_result *res);

const char *vmm_probe_verdict_name(enum vmm_probe_verdict v);

/* `space-vmm probe`: prints the result as one JSON object; exit status 0 measured, 1 KVM unusable. */
int vmm_probe_main(int argc, char **argv);
