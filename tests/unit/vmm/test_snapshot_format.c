/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the snapshot file format (src/vmm/snapshot_format.c), no KVM needed: CRC32C against
 * its published check value, a written snapshot parses back section by section, and every kind of
 * damaged or foreign file is refused with its own error: bad magic, another format version, a flipped
 * byte (checksum), truncation, a section of the wrong size, an MSR count that lies, a vCPU section
 * beyond the vCPU count, a section length that runs past the end, bytes after the sections. Also the
 * serial and i8042 register state round trip.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "vmm/snapshot_format.h"

/* A snapshot of 2 vCPUs with regs, MSRs (3 entries) and a serial section. */
static void build(struct snap_buf *b)
{
	CHECK(snap_buf_init(b) == 0, "snap_buf_init");
	for (uint32_t cpu = 0; cpu < 2; cpu++) {
		struct kvm_regs regs;
		memset(&regs, 0, sizeof(regs));
		regs.rip = 0x200000 + cpu;
		snap_buf_add(b, SNAP_VCPU_REGS, cpu, &regs, sizeof(regs));
		uint32_t head[2] = { 3, 0 };
		struct kvm_msr_entry e[3] = { { .index = 0x10, .data = 1 }, { .index = 0x174 }, { .index = 0xc0000080, .data = 0x500 } };
		snap_buf_add2(b, SNAP_VCPU_MSRS, cpu, head, sizeof(head), e, sizeof(e));
	}
	struct serial_state ss = { .lcr = 3, .dll = 12 };
	snap_buf_add(b, SNAP_DEV_SERIAL, 0, &ss, sizeof(ss));
	struct snap_header h = { .nvcpus = 2, .mem_bytes = 64ull << 20 };
	strcpy(h.libspace_version, "0.1.0");
	strcpy(h.cpu_vendor, "AuthenticAMD");
	CHECK(snap_buf_finish(b, &h) == 0, "snap_buf_finish");
}

/* Recomputes the CRC of a changed buffer, so a test reaches the checks after it. */
static void fix_crc(uint8_t *p, size_t len)
{
	struct snap_header h;
	memcpy(&h, p, sizeof(h));
	h.crc = 0;
	memcpy(p, &h, sizeof(h));
	h.crc = snap_crc32c(0, p, len);
	memcpy(p, &h, sizeof(h));
}

static int parse_copy(const struct snap_buf *b, size_t len, void (*edit)(uint8_t *p, size_t len), bool crc)
{
	uint8_t *p = malloc(b->len + 64);
	memset(p, 0, b->len + 64);
	memcpy(p, b->p, b->len);
	if (edit)
		edit(p, b->len);
	if (crc)
		fix_crc(p, b->len);
	struct snap_header h;
	char err[160] = "";
	int r = snap_parse(p, len, &h, err, sizeof(err));
	if (r < 0 && !err[0])
		r = -1000; /* every refusal must say why */
	free(p);
	return r;
}

static void flip(uint8_t *p, size_t len) { p[len - 5] ^= 0x01; }
static void version(uint8_t *p, size_t len) { (void)len; p[8] = 2; }
static void magic(uint8_t *p, size_t len) { (void)len; p[0] = 'X'; }
static void vcpus(uint8_t *p, size_t len) { (void)len; uint32_t one = 1; memcpy(p + offsetof(struct snap_header, nvcpus), &one, 4); }

/* The section header of the first section (regs of vCPU 0). */
static struct snap_section_hdr *first(uint8_t *p) { return (struct snap_section_hdr *)(void *)(p + sizeof(struct snap_header)); }
static void regs_size(uint8_t *p, size_t len) { (void)len; first(p)->len -= 8; }
static void huge_len(uint8_t *p, size_t len) { (void)len; first(p)->len = UINT64_MAX - 4; }
static void bad_type(uint8_t *p, size_t len) { (void)len; first(p)->type = 999; }

static void msr_count(uint8_t *p, size_t len)
{
	(void)len;
	uint8_t *msrs = p + sizeof(struct snap_header) + sizeof(struct snap_section_hdr) + sizeof(struct kvm_regs) +
			sizeof(struct snap_section_hdr);
	uint32_t lie = 4;
	memcpy(msrs, &lie, 4);
}

int main(void)
{
	CHECK(snap_crc32c(0, "123456789", 9) == 0xe3069283u, "CRC32C check value");
	CHECK(snap_crc32c(snap_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u, "CRC32C continues");

	struct snap_buf b;
	build(&b);
	struct snap_header h;
	char err[160];
	CHECK(snap_parse(b.p, b.len, &h, err, sizeof(err)) == 0, "valid snapshot refused: %s", err);
	CHECK(h.nsections == 5 && h.nvcpus == 2 && h.mem_offset % SNAP_PAGE == 0 && h.mem_offset >= b.len,
	      "header fields");
	struct snap_section s;
	CHECK(snap_find(b.p, b.len, SNAP_VCPU_REGS, 1, &s) && s.len == sizeof(struct kvm_regs), "regs of vCPU 1");
	struct kvm_regs regs;
	memcpy(&regs, s.data, sizeof(regs));
	CHECK(regs.rip == 0x200001, "regs of vCPU 1 read back");
	CHECK(snap_find(b.p, b.len, SNAP_VCPU_MSRS, 0, &s) && s.len == 8 + 3 * sizeof(struct kvm_msr_entry), "MSRs");
	CHECK(!snap_find(b.p, b.len, SNAP_VCPU_REGS, 2, &s), "no vCPU 2");
	size_t pos = 0;
	unsigned n = 0;
	while (snap_next(b.p, b.len, &pos, &s) == 1)
		n++;
	CHECK(n == 5 && pos == b.len, "walk: %u sections", n);

	CHECK(parse_copy(&b, b.len, magic, false) == -EINVAL, "bad magic");
	CHECK(parse_copy(&b, b.len, version, false) == -EPROTONOSUPPORT, "format version 2");
	CHECK(parse_copy(&b, b.len, flip, false) == -EBADMSG, "flipped byte");
	CHECK(parse_copy(&b, b.len - 1, NULL, false) == -EINVAL, "truncated");
	CHECK(parse_copy(&b, 40, NULL, false) == -EINVAL, "truncated header");
	CHECK(parse_copy(&b, b.len + 8, NULL, false) == -EINVAL, "trailing bytes");
	CHECK(parse_copy(&b, b.len, regs_size, true) == -EINVAL, "regs of the wrong size");
	CHECK(parse_copy(&b, b.len, huge_len, true) == -EINVAL, "section length past the end");
	CHECK(parse_copy(&b, b.len, bad_type, true) == -EINVAL, "unknown section type");
	CHECK(parse_copy(&b, b.len, msr_count, true) == -EINVAL, "MSR count that lies");
	CHECK(parse_copy(&b, b.len, vcpus, true) == -EINVAL, "vCPU section beyond nvcpus");
	snap_buf_free(&b);

	/* Register state of the legacy devices survives a save/restore into a new device. */
	struct serial *a = NULL, *c = NULL;
	CHECK(serial_create(-1, NULL, NULL, NULL, &a) == 0 && serial_create(-1, NULL, NULL, NULL, &c) == 0, "serial");
	uint8_t v = 0x83;
	serial_io(a, 3, true, &v); /* LCR with DLAB */
	v = 0x01;
	serial_io(a, 0, true, &v); /* divisor 1 */
	v = 0x55;
	serial_io(a, 7, true, &v);
	struct serial_state ss;
	serial_save(a, &ss);
	serial_restore(c, &ss);
	serial_io(c, 0, false, &v);
	CHECK(v == 0x01, "restored divisor latch");
	serial_io(c, 7, false, &v);
	CHECK(v == 0x55, "restored scratch register");
	serial_destroy(a);
	serial_destroy(c);
	struct i8042 *k = NULL, *k2 = NULL;
	CHECK(i8042_create(&k) == 0 && i8042_create(&k2) == 0, "i8042");
	v = 0x60;
	i8042_io(k, I8042_CMD_PORT, true, &v); /* write command byte: pending */
	struct i8042_state ks;
	i8042_save(k, &ks);
	ks.pending_cmd = 0xd1;
	i8042_restore(k2, &ks);
	v = 0x00;
	CHECK(i8042_io(k2, I8042_DATA_PORT, true, &v), "restored pending output-port write resets");
	ks.pending_cmd = 0x42; /* not a command that takes data: dropped */
	i8042_restore(k2, &ks);
	CHECK(!i8042_io(k2, I8042_DATA_PORT, true, &v), "bogus pending command ignored");
	i8042_destroy(k);
	i8042_destroy(k2);
	return check_exit();
}
