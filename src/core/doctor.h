/* SPDX-License-Identifier: Apache-2.0 */
/* Host capability checks behind space_doctor, and the fail-fast test of vm isolation. Private. */
#pragma once

#include "core/internal.h"

struct doctor_ring0 {
	double ns_per_insn;   /* measured by `space-vmm probe` */
	char verdict[16];     /* "native", "slow" or "emulated" */
	char error[256];      /* why it could not be measured */
};

/* Runs `space-vmm probe`. 0 with *ret filled, or -errno with ret->error set. */
int doctor_probe_ring0(space_ctx *ctx, struct doctor_ring0 *ret);

/* 0 when vm isolation can run Linux guests here (/dev/kvm opens and guest ring 0 is not emulated);
 * -ENODEV with a context message naming the cause and what to do otherwise. Takes tens of ms. */
int doctor_vm_usable(space_ctx *ctx);
