/* SPDX-License-Identifier: Apache-2.0 */
/* ACPI table generation (see acpi.h). Table layouts follow the ACPI 6.x specification. */
#include "vmm/acpi.h"

#include <errno.h>
#include <string.h>

#include "vmm/vmm.h"

#define OEM_ID       "LIBSPC"
#define OEM_TABLE_ID "SPACEVMM"

struct out {
	uint8_t *p;
	size_t len, pos;
	int err;
};

static void emit(struct out *o, const void *d, size_t n)
{
	if (o->err || n > o->len - o->pos) {
		o->err = -E2BIG;
		return;
	}
	memcpy(o->p + o->pos, d, n);
	o->pos += n;
}
static void emit8(struct out *o, uint8_t v) { emit(o, &v, 1); }
static void emit16(struct out *o, uint16_t v) { uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) }; emit(o, b, 2); }
static void emit32(struct out *o, uint32_t v) { emit16(o, (uint16_t)v); emit16(o, (uint16_t)(v >> 16)); }
static void emit64(struct out *o, uint64_t v) { emit32(o, (uint32_t)v); emit32(o, (uint32_t)(v >> 32)); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }

uint8_t acpi_checksum(const uint8_t *p, size_t len)
{
	uint8_t s = 0;
	for (size_t i = 0; i < len; i++)
		s = (uint8_t)(s + p[i]);
	return s;
}

/* Starts a table with the standard 36-byte header; returns its offset. */
static size_t table_begin(struct out *o, const char sig[4], uint8_t rev)
{
	size_t at = o->pos;
	emit(o, sig, 4);
	emit32(o, 0); /* length, patched */
	emit8(o, rev);
	emit8(o, 0);  /* checksum, patched */
	emit(o, OEM_ID, 6);
	emit(o, OEM_TABLE_ID, 8);
	emit32(o, 1);
	emit(o, "LSPC", 4);
	emit32(o, 1);
	return at;
}

static size_t table_end(struct out *o, size_t at)
{
	if (o->err)
		return 0;
	size_t len = o->pos - at;
	put32(o->p + at + 4, (uint32_t)len);
	o->p[at + 9] = (uint8_t)(0x100 - acpi_checksum(o->p + at, len));
	/* Keep every table 8-byte aligned. */
	while (o->pos % 8 && !o->err)
		emit8(o, 0);
	return len;
}

/* Generic Address Structure: one byte in I/O space. */
static void emit_gas_io8(struct out *o, uint16_t port)
{
	emit8(o, 1); emit8(o, 8); emit8(o, 0); emit8(o, 1);
	emit64(o, port);
}

static size_t build_facp(struct out *o, uint64_t dsdt_gpa, size_t *ret_len)
{
	size_t at = table_begin(o, "FACP", 6);
	emit32(o, 0);                   /* FIRMWARE_CTRL */
	emit32(o, (uint32_t)dsdt_gpa);  /* DSDT */
	uint8_t zeros[109 - 46];
	memset(zeros, 0, sizeof(zeros));
	emit8(o, 0);                    /* reserved */
	emit8(o, 0);                    /* preferred PM profile: unspecified */
	emit(o, zeros, sizeof(zeros));  /* SCI_INT .. CENTURY: nothing of the fixed hardware exists */
	/* IAPC_BOOT_ARCH: VGA not present (bit 2), CMOS RTC not present (bit 5); no 8042 advertised. */
	emit16(o, (1u << 2) | (1u << 5));
	emit8(o, 0);
	/* Flags: WBINVD (0), PWR_BUTTON (4) and SLP_BUTTON (5) as control methods, RESET_REG_SUP (10),
	 * HW_REDUCED_ACPI (20). */
	emit32(o, (1u << 0) | (1u << 4) | (1u << 5) | (1u << 10) | (1u << 20));
	emit_gas_io8(o, VM_PORT_RESET);
	emit8(o, VM_RESET_VALUE);
	emit16(o, 0);                   /* ARM_BOOT_ARCH */
	emit8(o, 3);                    /* FADT minor version (6.3) */
	emit64(o, 0);                   /* X_FIRMWARE_CTRL */
	emit64(o, dsdt_gpa);            /* X_DSDT */
	uint8_t gas_zero[12 * 8];
	memset(gas_zero, 0, sizeof(gas_zero));
	emit(o, gas_zero, sizeof(gas_zero)); /* X_PM1a_EVT .. X_GPE1: none */
	emit_gas_io8(o, VM_PORT_SLEEP_CTL);
	emit_gas_io8(o, VM_PORT_SLEEP_STS);
	emit(o, "LIBSPACE", 8);         /* hypervisor vendor identity */
	*ret_len = table_end(o, at);
	return at;
}

static size_t build_apic(struct out *o, const struct acpi_config *cfg, size_t *ret_len)
{
	size_t at = table_begin(o, "APIC", 5);
	emit32(o, (uint32_t)VM_LAPIC_ADDR);
	emit32(o, 1); /* PCAT_COMPAT: the in-kernel irqchip has 8259s too */
	for (unsigned i = 0; i < cfg->cpus; i++) {
		emit8(o, 0); emit8(o, 8);          /* Processor Local APIC */
		emit8(o, (uint8_t)i);              /* ACPI processor UID */
		emit8(o, (uint8_t)i);              /* APIC ID */
		emit32(o, 1);                      /* enabled */
	}
	emit8(o, 1); emit8(o, 12);                 /* I/O APIC */
	emit8(o, (uint8_t)cfg->cpus);              /* its id, after the CPUs' */
	emit8(o, 0);
	emit32(o, (uint32_t)VM_IOAPIC_ADDR);
	emit32(o, 0);                              /* GSI base */
	/* ISA IRQ 9 (SCI on PCs) as level/active-high, like firmware reports it; IRQ 0-15 otherwise map
	 * 1:1 to GSIs, which is how the in-kernel irqchip routes them. */
	emit8(o, 2); emit8(o, 10);
	emit8(o, 0); emit8(o, 9); emit32(o, 9); emit16(o, 0x000d);
	emit8(o, 4); emit8(o, 6);                  /* Local APIC NMI: all processors, LINT1 */
	emit8(o, 0xff); emit16(o, 0); emit8(o, 1);
	*ret_len = table_end(o, at);
	return at;
}

/* --- AML ------------------------------------------------------------------------------------- */

/* Writes the PkgLength encoding for a body of len bytes (the encoding counts its own bytes). */
static void aml_pkglen(struct out *o, size_t len)
{
	if (len + 1 < 64) {
		emit8(o, (uint8_t)(len + 1));
		return;
	}
	for (unsigned n = 2; n <= 4; n++) {
		size_t total = len + n;
		if (total < (1ul << (4 + 8 * (n - 1)))) {
			emit8(o, (uint8_t)(((n - 1) << 6) | (total & 0xf)));
			for (unsigned i = 1; i < n; i++)
				emit8(o, (uint8_t)(total >> (4 + 8 * (i - 1))));
			return;
		}
	}
	o->err = -E2BIG;
}

static void aml_int(struct out *o, uint64_t v)
{
	if (v == 0) emit8(o, 0x00);
	else if (v == 1) emit8(o, 0x01);
	else if (v <= 0xff) { emit8(o, 0x0a); emit8(o, (uint8_t)v); }
	else if (v <= 0xffff) { emit8(o, 0x0b); emit16(o, (uint16_t)v); }
	else if (v <= 0xffffffffu) { emit8(o, 0x0c); emit32(o, (uint32_t)v); }
	else { emit8(o, 0x0e); emit64(o, v); }
}

static void aml_name_int(struct out *o, const char seg[4], uint64_t v)
{
	emit8(o, 0x08); emit(o, seg, 4); aml_int(o, v);
}

static void aml_name_str(struct out *o, const char seg[4], const char *s)
{
	emit8(o, 0x08); emit(o, seg, 4);
	emit8(o, 0x0d); emit(o, s, strlen(s) + 1);
}

/* Device (Vnnn) { _HID "LNRO0005", _UID n, _CRS { Memory32Fixed RW, Interrupt Edge/High/Exclusive } } */
static void aml_virtio_device(struct out *o, unsigned idx, const struct acpi_mmio_dev *d)
{
	uint8_t body[128];
	struct out b = { body, sizeof(body), 0, 0 };
	char seg[5] = { 'V', (char)('0' + idx / 100 % 10), (char)('0' + idx / 10 % 10), (char)('0' + idx % 10), 0 };
	emit(&b, seg, 4);
	aml_name_str(&b, "_HID", "LNRO0005");
	aml_name_int(&b, "_UID", idx);
	/* The resource template as a Buffer object. */
	uint8_t res[32];
	struct out r = { res, sizeof(res), 0, 0 };
	emit8(&r, 0x86); emit16(&r, 9); emit8(&r, 1); emit32(&r, (uint32_t)d->base); emit32(&r, d->size);
	emit8(&r, 0x89); emit16(&r, 6); emit8(&r, 0x03); emit8(&r, 1); emit32(&r, d->gsi);
	emit8(&r, 0x79); emit8(&r, 0);
	uint8_t buf[48];
	struct out bb = { buf, sizeof(buf), 0, 0 };
	aml_int(&bb, r.pos);
	emit(&bb, res, r.pos);
	emit8(&b, 0x08); emit(&b, "_CRS", 4);
	emit8(&b, 0x11); aml_pkglen(&b, bb.pos); emit(&b, buf, bb.pos);
	if (b.err || r.err || bb.err) {
		o->err = -E2BIG;
		return;
	}
	emit8(o, 0x5b); emit8(o, 0x82); aml_pkglen(o, b.pos); emit(o, body, b.pos);
}

/*
 * Device (COM1) { _HID EisaId ("PNP0501"), _UID 1, _CRS { IO (Decode16, 0x3f8, 0x3f8, 1, 8), IRQNoFlags {4} } }
 * A hardware-reduced platform has no legacy PIC setup of ISA IRQs: describing the UART lets Linux's
 * PNP layer route IRQ 4 through the IOAPIC, which its tty (interrupt-driven) output needs.
 */
static void aml_com1(struct out *o)
{
	static const uint8_t res[] = { 0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x01, 0x08, /* IO */
				       0x22, 0x10, 0x00,                               /* IRQNoFlags {4} */
				       0x79, 0x00 };
	uint8_t body[64];
	struct out b = { body, sizeof(body), 0, 0 };
	emit(&b, "COM1", 4);
	emit8(&b, 0x08); emit(&b, "_HID", 4); emit8(&b, 0x0c); emit32(&b, 0x0105d041); /* EisaId PNP0501 */
	aml_name_int(&b, "_UID", 1);
	emit8(&b, 0x08); emit(&b, "_CRS", 4);
	emit8(&b, 0x11); aml_pkglen(&b, 2 + sizeof(res)); aml_int(&b, sizeof(res)); emit(&b, res, sizeof(res));
	if (b.err) {
		o->err = b.err;
		return;
	}
	emit8(o, 0x5b); emit8(o, 0x82); aml_pkglen(o, b.pos); emit(o, body, b.pos);
}

static size_t build_dsdt(struct out *o, const struct acpi_config *cfg, size_t *ret_len)
{
	size_t at = table_begin(o, "DSDT", 2);
	/* Name (_S5, Package () { 5, 0 }): the SLP_TYP value Linux writes to the sleep control register. */
	emit8(o, 0x08); emit(o, "_S5_", 4);
	emit8(o, 0x12); aml_pkglen(o, 4); emit8(o, 2); aml_int(o, VM_ACPI_S5_TYPE); aml_int(o, 0);
	_Static_assert(VM_ACPI_S5_TYPE > 1 && VM_ACPI_S5_TYPE <= 0xff, "one BytePrefix integer");
	/* Scope (\_SB) { devices } */
	uint8_t body[ACPI_MAX_MMIO * 96 + 128];
	struct out b = { body, sizeof(body), 0, 0 };
	emit(&b, "\\_SB_", 5);
	aml_com1(&b);
	for (unsigned i = 0; i < cfg->nmmio; i++)
		aml_virtio_device(&b, i, &cfg->mmio[i]);
	if (b.err) {
		o->err = b.err;
		return 0;
	}
	emit8(o, 0x10); aml_pkglen(o, b.pos); emit(o, body, b.pos);
	*ret_len = table_end(o, at);
	return at;
}

int acpi_build(const struct acpi_config *cfg, uint8_t *buf, size_t len, uint64_t gpa, struct acpi_layout *ret)
{
	if (!cfg->cpus || cfg->cpus > 255 || cfg->nmmio > ACPI_MAX_MMIO)
		return -EINVAL;
	struct out o = { buf, len, 0, 0 };
	struct acpi_layout l;
	memset(&l, 0, sizeof(l));
	memset(buf, 0, len);

	/* RSDP (revision 2, 36 bytes) at offset 0; XSDT address patched below. */
	l.rsdp = 0;
	l.rsdp_len = 36;
	emit(&o, "RSD PTR ", 8);
	emit8(&o, 0);
	emit(&o, OEM_ID, 6);
	emit8(&o, 2);
	emit32(&o, 0);      /* RSDT: none */
	emit32(&o, 36);
	emit64(&o, 0);      /* XSDT address, patched */
	emit8(&o, 0);
	emit8(&o, 0); emit8(&o, 0); emit8(&o, 0);
	emit(&o, "\0\0\0\0", 4); /* pad to 40 */

	l.dsdt = build_dsdt(&o, cfg, &l.dsdt_len);
	l.facp = build_facp(&o, gpa + l.dsdt, &l.facp_len);
	l.apic = build_apic(&o, cfg, &l.apic_len);
	l.xsdt = table_begin(&o, "XSDT", 1);
	emit64(&o, gpa + l.facp);
	emit64(&o, gpa + l.apic);
	l.xsdt_len = table_end(&o, l.xsdt);
	if (o.err)
		return o.err;
	uint64_t x = gpa + l.xsdt;
	for (int i = 0; i < 8; i++)
		buf[24 + i] = (uint8_t)(x >> (8 * i));
	buf[8] = (uint8_t)(0x100 - acpi_checksum(buf, 20));
	buf[32] = (uint8_t)(0x100 - acpi_checksum(buf, 36));
	l.total = o.pos;
	*ret = l;
	return 0;
}
