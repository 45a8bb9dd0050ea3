/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acpi: finds the RSDP (boot_params.acpi_rsdp_addr, else a scan of 0xe0000-0xfffff), walks
 * XSDT -> FACP -> DSDT and MADT checking every checksum, and compares the enabled local APICs and the
 * LNRO0005 (virtio-mmio) devices with acpi.cpus=N and acpi.disks=K from the command line.
 */
#include "guest.h"

#define NAME "acpi"

static uint8_t sum(const uint8_t *p, uint64_t n)
{
	uint8_t s = 0;
	while (n--)
		s = (uint8_t)(s + *p++);
	return s;
}

static const uint8_t *table(uint64_t addr, const char *sig)
{
	const uint8_t *t = (const uint8_t *)(uintptr_t)addr;
	uint32_t len = guest_rd32(t + 4);
	if (len < 36 || len > 0x10000)
		guest_fail(NAME, "table with a bad length");
	if (sum(t, len) != 0) {
		guest_puts("acpi: bad checksum in ");
		char s[5] = { (char)t[0], (char)t[1], (char)t[2], (char)t[3], 0 };
		guest_puts(s);
		guest_puts("\n");
		guest_fail(NAME, "table checksum wrong");
	}
	if (sig && memcmp(t, sig, 4) != 0)
		guest_fail(NAME, "table signature mismatch");
	return t;
}

static uint64_t cmdline_num(const uint8_t *bp, const char *key)
{
	char buf[32];
	if (!guest_cmdline_value(bp, key, buf, sizeof(buf)))
		guest_fail(NAME, "expected counts missing from the command line");
	return guest_parse_num(buf, NULL);
}

void guest_main(const uint8_t *bp)
{
	uint64_t want_cpus = cmdline_num(bp, "acpi.cpus"), want_disks = cmdline_num(bp, "acpi.disks");
	uint64_t rsdp_addr = guest_rd64(bp + 0x70);
	for (uint64_t a = 0xe0000; !rsdp_addr && a < 0x100000; a += 16)
		if (memcmp((const void *)(uintptr_t)a, "RSD PTR ", 8) == 0)
			rsdp_addr = a;
	if (!rsdp_addr)
		guest_fail(NAME, "no RSDP");
	const uint8_t *rsdp = (const uint8_t *)(uintptr_t)rsdp_addr;
	if (memcmp(rsdp, "RSD PTR ", 8) != 0 || sum(rsdp, 20) != 0 || rsdp[15] < 2 || sum(rsdp, 36) != 0)
		guest_fail(NAME, "RSDP signature, revision or checksum wrong");
	const uint8_t *xsdt = table(guest_rd64(rsdp + 24), "XSDT");
	const uint8_t *facp = NULL, *madt = NULL;
	for (uint32_t off = 36; off + 8 <= guest_rd32(xsdt + 4); off += 8) {
		const uint8_t *t = table(guest_rd64(xsdt + off), NULL);
		if (memcmp(t, "FACP", 4) == 0)
			facp = t;
		else if (memcmp(t, "APIC", 4) == 0)
			madt = t;
	}
	if (!facp || !madt)
		guest_fail(NAME, "XSDT lacks FACP or APIC");
	if (!(guest_rd32(facp + 112) & (1u << 20)))
		guest_fail(NAME, "FADT is not hardware-reduced");
	if (guest_rd64(facp + 244 + 4) == 0)
		guest_fail(NAME, "FADT has no sleep control register");
	const uint8_t *dsdt = table(guest_rd64(facp + 140), "DSDT");

	uint64_t cpus = 0, ioapics = 0;
	uint32_t mlen = guest_rd32(madt + 4);
	for (uint32_t off = 44; off + 2 <= mlen;) {
		uint8_t type = madt[off], len = madt[off + 1];
		if (len < 2 || off + len > mlen)
			guest_fail(NAME, "malformed MADT entry");
		if (type == 0 && (guest_rd32(madt + off + 4) & 1))
			cpus++;
		if (type == 1)
			ioapics++;
		off += len;
	}
	uint64_t devs = 0;
	uint32_t dlen = guest_rd32(dsdt + 4);
	for (uint32_t off = 36; off + 8 <= dlen; off++)
		if (dsdt[off] == 'L' && memcmp(dsdt + off, "LNRO0005", 8) == 0)
			devs++;
	guest_puts("acpi: cpus=");
	guest_put_dec(cpus);
	guest_puts(" ioapics=");
	guest_put_dec(ioapics);
	guest_puts(" virtio-mmio=");
	guest_put_dec(devs);
	guest_puts("\n");
	if (cpus != want_cpus)
		guest_fail(NAME, "MADT CPU count differs from acpi.cpus");
	if (ioapics != 1)
		guest_fail(NAME, "MADT should list one IOAPIC");
	if (devs != want_disks)
		guest_fail(NAME, "DSDT LNRO0005 count differs from acpi.disks");
	guest_ok(NAME);
}
