/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ACPI tables built by the VMM for a hardware-reduced x86 platform: RSDP -> XSDT -> {FACP, APIC}, and
 * FACP -> DSDT. The DSDT holds one "LNRO0005" device per virtio-mmio window and the \_S5 package so
 * Linux powers off through the sleep control register (VM_PORT_SLEEP_CTL).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define ACPI_MAX_MMIO 32

struct acpi_mmio_dev {
	uint64_t base;
	uint32_t size;
	uint32_t gsi;
};

struct acpi_config {
	unsigned cpus;       /* local APIC ids 0..cpus-1 */
	unsigned nmmio;
	struct acpi_mmio_dev mmio[ACPI_MAX_MMIO];
};

/* Where each table landed, as offsets into the buffer given to acpi_build(). */
struct acpi_layout {
	size_t rsdp, xsdt, facp, apic, dsdt;
	size_t rsdp_len, xsdt_len, facp_len, apic_len, dsdt_len;
	size_t total;
};

/*
 * Writes the tables into buf (which the guest sees at guest physical address gpa), RSDP first at
 * offset 0. Returns 0, -E2BIG if len is too small, -EINVAL on a bad config.
 */
int acpi_build(const struct acpi_config *cfg, uint8_t *buf, size_t len, uint64_t gpa, struct acpi_layout *ret);

/* Sum of bytes mod 256 (0 for a table whose checksum is right). */
uint8_t acpi_checksum(const uint8_t *p, size_t len);
