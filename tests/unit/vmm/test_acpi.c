/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ACPI tables: every checksum and pointer, then `iasl -d` (acpica-tools) must disassemble each table
 * without complaint and see the vCPUs and virtio-mmio devices we asked for. Skips the iasl part when
 * iasl is not installed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"
#include "check.h"
#include "vmm/acpi.h"
#include "vmm/vmm.h"


#define GPA 0xe0000ull
static uint8_t buf[0x20000];

static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void check_table(const struct acpi_layout *l, size_t off, size_t len, const char *sig)
{
	CHECK(memcmp(buf + off, sig, 4) == 0, "%s signature", sig);
	CHECK(rd32(buf + off + 4) == len, "%s length", sig);
	CHECK(acpi_checksum(buf + off, len) == 0, "%s checksum", sig);
	CHECK(off + len <= l->total, "%s inside the area", sig);
}

static void run_iasl(const struct acpi_layout *l, unsigned cpus, unsigned disks)
{
	if (!util_have_program("iasl")) {
		printf("iasl not installed: skipping the disassembly part\n");
		return;
	}
	char dir[] = "/tmp/space-acpi-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	static const struct { const char *name; size_t off_idx; } t[] = {
		{ "facp", 0 }, { "apic", 1 }, { "dsdt", 2 }, { "xsdt", 3 },
	};
	size_t offs[] = { l->facp, l->apic, l->dsdt, l->xsdt }, lens[] = { l->facp_len, l->apic_len, l->dsdt_len,
									   l->xsdt_len };
	for (size_t i = 0; i < 4; i++) {
		char path[256], dsl[256];
		snprintf(path, sizeof(path), "%s/%s.dat", dir, t[i].name);
		snprintf(dsl, sizeof(dsl), "%s/%s.dsl", dir, t[i].name);
		CHECK(util_write_file_atomic(path, buf + offs[i], lens[i], 0644) == 0, "write %s", path);
		char *out = NULL;
		const char *argv[] = { "iasl", "-d", path, NULL };
		int r = util_run(argv, &out);
		CHECK(r == 0, "iasl -d %s failed: %s", t[i].name, out ? out : "");
		CHECK(!out || (!strstr(out, "rror") && !strstr(out, "Incorrect checksum")), "iasl complains on %s: %s",
		      t[i].name, out);
		free(out);
		char *text = NULL;
		size_t tl;
		if (util_read_file(dsl, 1 << 20, &text, &tl) < 0) {
			CHECK(0, "no %s", dsl);
			continue;
		}
		CHECK(!strstr(text, "Incorrect"), "iasl flags something incorrect in %s", t[i].name);
		if (strcmp(t[i].name, "dsdt") == 0) {
			CHECK(count(text, "\"LNRO0005\"") == disks, "DSDT has %zu LNRO0005, want %u",
			      count(text, "\"LNRO0005\""), disks);
			CHECK(strstr(text, "Name (_S5,") != NULL, "DSDT has _S5");
			CHECK(strstr(text, "0xD0001000") != NULL || disks < 2, "second window address");
		}
		if (strcmp(t[i].name, "apic") == 0)
			CHECK(count(text, "Local Apic ID") == cpus, "MADT lists %zu CPUs, want %u",
			      count(text, "Local Apic ID"), cpus);
		if (strcmp(t[i].name, "facp") == 0)
			CHECK(strstr(text, "Hardware Reduced (V5) : 1") != NULL, "FADT hardware-reduced");
		free(text);
	}
	util_rm_rf(dir);
}

static void test_one(unsigned cpus, unsigned disks)
{
	struct acpi_config cfg = { .cpus = cpus, .nmmio = disks };
	for (unsigned i = 0; i < disks; i++)
		cfg.mmio[i] = (struct acpi_mmio_dev){ VM_MMIO_BASE + i * VM_MMIO_STRIDE, 0x200, VM_MMIO_FIRST_GSI + i };
	struct acpi_layout l;
	int r = acpi_build(&cfg, buf, sizeof(buf), GPA, &l);
	CHECK(r == 0, "acpi_build(%u, %u) = %d", cpus, disks, r);
	if (r)
		return;
	CHECK(memcmp(buf, "RSD PTR ", 8) == 0 && acpi_checksum(buf, 20) == 0 && acpi_checksum(buf, 36) == 0,
	      "RSDP checksums");
	CHECK(rd64(buf + 24) == GPA + l.xsdt, "RSDP -> XSDT");
	check_table(&l, l.xsdt, l.xsdt_len, "XSDT");
	check_table(&l, l.facp, l.facp_len, "FACP");
	check_table(&l, l.apic, l.apic_len, "APIC");
	check_table(&l, l.dsdt, l.dsdt_len, "DSDT");
	CHECK(rd64(buf + l.xsdt + 36) == GPA + l.facp && rd64(buf + l.xsdt + 44) == GPA + l.apic, "XSDT entries");
	CHECK(rd64(buf + l.facp + 140) == GPA + l.dsdt, "FADT X_DSDT");
	CHECK(l.facp_len == 276, "FADT revision 6 size");
	CHECK(l.apic_len == 44 + 8 * cpus + 12 + 10 + 6, "MADT size for %u CPUs", cpus);
	run_iasl(&l, cpus, disks);
}

int main(void)
{
	test_one(1, 0);
	test_one(3, 2);
	test_one(64, 16);
	struct acpi_layout l;
	struct acpi_config bad = { .cpus = 0 };
	CHECK(acpi_build(&bad, buf, sizeof(buf), GPA, &l) == -EINVAL, "zero CPUs refused");
	struct acpi_config ok = { .cpus = 2 };
	CHECK(acpi_build(&ok, buf, 64, GPA, &l) == -E2BIG, "small buffer refused");
	return check_exit();
}
