/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest physical memory as seen by the VMM: up to two RAM regions (below and above the 32-bit hole).
 * Every access to guest memory from device code goes through guest_mem_ptr(): it is the one checked
 * gpa -> host pointer translation, and it refuses any range that is not wholly inside one RAM region
 * (including ranges whose end overflows).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUEST_MEM_MAX_REGIONS 2

struct guest_region {
	uint64_t gpa;   /* guest physical start */
	uint64_t size;  /* bytes */
	uint8_t *host;  /* host mapping of the region */
};

struct guest_mem {
	struct guest_region regions[GUEST_MEM_MAX_REGIONS];
	unsigned nregions;
};

/* Host pointer for [gpa, gpa+len) or NULL if any byte of it is outside guest RAM. len 0 is valid. */
static inline void *guest_mem_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	uint64_t end;
	if (__builtin_add_overflow(gpa, len, &end))
		return NULL;
	for (unsigned i = 0; i < m->nregions; i++) {
		const struct guest_region *r = &m->regions[i];
		if (gpa >= r->gpa && end <= r->gpa + r->size)
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}
