/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Linux x86 64-bit boot protocol: parsing a kernel image (bzImage or vmlinux ELF64) and laying
 * out the zero page, command line, initrd, identity page tables and GDT in guest RAM.
 *
 * Guest physical layout below 1 MiB (all fixed):
 *   0x0500 GDT   0x0520 IDT (empty)   0x7000 boot_params   0x9000 PML4   0xa000 PDPT   0xb000-0xefff PDs
 *   0x20000 command line (BOOT_CMDLINE_MAX)   0xe0000-0xfffff ACPI tables (e820 reserved from 0x9fc00)
 * A bzImage's protected-mode kernel is loaded at 1 MiB; a vmlinux at its segments' physical addresses.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/guest_mem.h"

#define BOOT_GDT_ADDR        0x500ull
#define BOOT_IDT_ADDR        0x520ull
#define BOOT_PARAMS_ADDR     0x7000ull
#define BOOT_PML4_ADDR       0x9000ull
#define BOOT_PDPT_ADDR       0xa000ull
#define BOOT_PD_ADDR         0xb000ull /* four PDs: identity map of the first 4 GiB, 2 MiB pages */
#define BOOT_CMDLINE_ADDR    0x20000ull
#define BOOT_CMDLINE_MAX     4096u     /* bytes including the NUL */
#define BOOT_EBDA_START      0x9fc00ull
#define BOOT_ACPI_ADDR       0xe0000ull
#define BOOT_ACPI_SIZE       0x20000ull
#define BOOT_BZIMAGE_LOAD    0x100000ull
#define BOOT_STACK_TOP       0x8ff0ull

/* GDT selectors as the boot protocol wants them (__BOOT_CS, __BOOT_DS) and a TSS for TR. */
#define BOOT_CS 0x10
#define BOOT_DS 0x18
#define BOOT_TSS 0x20

#define KERNEL_MAX_SEGMENTS 16

enum kernel_kind { KERNEL_BZIMAGE = 1, KERNEL_ELF = 2 };

struct kernel_segment {
	uint64_t paddr, offset, filesz, memsz;
};

struct kernel_image {
	enum kernel_kind kind;
	uint64_t entry;          /* guest physical 64-bit entry point */
	/* bzImage */
	uint64_t setup_size;     /* boot sector + real-mode setup, bytes */
	uint16_t version;        /* boot protocol version */
	uint32_t init_size;      /* memory the kernel needs from its load address */
	uint32_t initrd_addr_max;
	uint32_t cmdline_size;   /* max cmdline length the kernel accepts (0 = protocol default) */
	uint32_t kernel_alignment; /* physical alignment a relocatable kernel needs */
	bool relocatable;        /* relocatable_kernel: may be loaded at another aligned address */
	/* ELF */
	unsigned nsegs;
	struct kernel_segment segs[KERNEL_MAX_SEGMENTS];
};

/*
 * Validates a kernel image held in data[0..len). Accepts a bzImage with boot protocol >= 2.06 and a
 * 64-bit entry (XLF_KERNEL_64), or an x86_64 ELF64 executable with PT_LOAD segments inside the file.
 * On failure returns -ENOEXEC (not a kernel / unsupported) or -EINVAL (truncated / malformed) and
 * writes a one-line reason to err. Pure function: the fuzz target calls it on hostile bytes.
 */
int kernel_image_parse(const uint8_t *data, size_t len, struct kernel_image *ret, char *err, size_t errlen);

struct boot_e820 {
	uint64_t addr, size;
	uint32_t type; /* 1 RAM, 2 reserved */
};

struct boot_request {
	const uint8_t *kernel; size_t kernel_len;   /* parsed already into img */
	const struct kernel_image *img;
	const uint8_t *initrd; size_t initrd_len;   /* NULL/0 = none */
	const char *cmdline;                        /* full command line */
	uint64_t rsdp_addr;                         /* 0 = none */
};

/*
 * Writes the kernel, initrd, zero page (with the e820 map derived from mem), command line, page tables
 * and GDT into guest memory. Fails with -ENOMEM (and a reason) when something does not fit.
 */
int boot_load(const struct guest_mem *mem, const struct boot_request *req, char *err, size_t errlen);

/* Builds the e820 map for mem into out (up to max entries); returns the number of entries. */
unsigned boot_e820_map(const struct guest_mem *mem, struct boot_e820 *out, unsigned max);
