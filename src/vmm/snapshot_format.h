/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The snapshot file format (docs/snapshot.md): a fixed header, typed sections, then guest RAM,
 * page-aligned and raw. This part knows bytes only (no KVM calls), so the unit tests and the fuzz
 * target exercise it without /dev/kvm.
 *
 * A snapshot file is hostile input: snap_parse() checks the magic, the format version, every size
 * and offset (with overflow checks) and the CRC32C before anything is used, and snap_next() never
 * yields a section that does not lie wholly inside the buffer it was given.
 *
 * Little-endian x86_64 only, like the rest of the VMM.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC "SPCSNAP\0"
#define SNAP_FORMAT_VERSION 1u
#define SNAP_PAGE 4096u
/* Bound on the header + sections part (what restore reads into memory). */
#define SNAP_MAX_META (16u << 20)

enum snap_section_type {
	SNAP_VCPU_REGS = 1,      /* struct kvm_regs, index = vCPU */
	SNAP_VCPU_SREGS,         /* struct kvm_sregs */
	SNAP_VCPU_XSAVE,         /* struct kvm_xsave (or SNAP_VCPU_FPU without KVM_CAP_XSAVE) */
	SNAP_VCPU_FPU,           /* struct kvm_fpu */
	SNAP_VCPU_XCRS,          /* struct kvm_xcrs */
	SNAP_VCPU_MSRS,          /* uint32 count, uint32 pad, count x struct kvm_msr_entry */
	SNAP_VCPU_LAPIC,         /* struct kvm_lapic_state */
	SNAP_VCPU_EVENTS,        /* struct kvm_vcpu_events */
	SNAP_VCPU_MP_STATE,      /* struct kvm_mp_state */
	SNAP_VCPU_DEBUGREGS,     /* struct kvm_debugregs */
	SNAP_VM_IRQCHIP,         /* struct kvm_irqchip, index = chip id (PIC master, PIC slave, IOAPIC) */
	SNAP_VM_PIT2,            /* struct kvm_pit_state2 */
	SNAP_VM_CLOCK,           /* struct kvm_clock_data */
	SNAP_DEV_SERIAL,         /* struct serial_state */
	SNAP_DEV_I8042,          /* struct i8042_state */
	SNAP_DEV_VIRTIO,         /* struct virtio_mmio_state + device bytes, index = device slot */
	SNAP_SECTION_TYPES,
};

struct snap_header {
	char magic[8];            /* SNAP_MAGIC */
	uint32_t format_version;  /* SNAP_FORMAT_VERSION */
	uint32_t header_size;     /* sizeof(struct snap_header) */
	char libspace_version[32];/* SPACE_VERSION_STRING of the writer, NUL-terminated */
	char cpu_vendor[16];      /* CPUID leaf 0 vendor, NUL-terminated */
	uint32_t cpu_signature;   /* CPUID leaf 1 EAX (family/model/stepping) */
	uint32_t cpuid_crc;       /* CRC32C of what KVM_GET_SUPPORTED_CPUID reported */
	uint32_t nvcpus;
	uint32_t nsections;
	uint64_t mem_bytes;
	uint64_t sections_len;    /* the sections follow the header directly */
	uint64_t mem_offset;      /* page-aligned file offset of guest RAM (mem_bytes bytes) */
	uint32_t crc;             /* CRC32C of the header (this field zero) and the sections */
	uint32_t reserved;        /* zero */
};
_Static_assert(sizeof(struct snap_header) == 112, "snapshot header layout");

struct snap_section_hdr {
	uint32_t type;
	uint32_t index;
	uint64_t len;             /* payload bytes; the payload is padded to 8 */
};

/* One section as found by snap_next(): data points into the caller's buffer. */
struct snap_section {
	uint32_t type, index;
	uint64_t len;
	const uint8_t *data;
};

/* CRC32C (Castagnoli), continuing from crc (start with 0). */
uint32_t snap_crc32c(uint32_t crc, const void *buf, size_t len);

/* ---- writing ---- */

/* A growing buffer of header + sections. err sticks: after one failed append all others no-op. */
struct snap_buf {
	uint8_t *p;
	size_t len, cap;
	unsigned nsections;
	int err;
};

/* Starts with room for the header (filled by snap_buf_finish). */
int snap_buf_init(struct snap_buf *b);
void snap_buf_free(struct snap_buf *b);
/* Appends a section. Returns 0 or -ENOMEM (also stored in b->err). */
int snap_buf_add(struct snap_buf *b, uint32_t type, uint32_t index, const void *data, size_t len);
/* Appends a section of two parts (a fixed struct and a variable tail). */
int snap_buf_add2(struct snap_buf *b, uint32_t type, uint32_t index, const void *a, size_t alen,
		  const void *c, size_t clen);
/*
 * Completes the header from *h (its magic, version, sizes, offsets and CRC are filled here) and
 * writes it at the start of the buffer. Returns b->err or 0.
 */
int snap_buf_finish(struct snap_buf *b, const struct snap_header *h);

/* ---- reading ---- */

/* Offset of guest RAM for a header + sections part of meta_len bytes. */
static inline uint64_t snap_mem_offset(uint64_t meta_len)
{
	return (meta_len + SNAP_PAGE - 1) / SNAP_PAGE * SNAP_PAGE;
}

/*
 * Checks the header at the start of buf (len bytes available, at least sizeof(struct snap_header)
 * needed): magic, format version, header size, counts and sizes within bounds, RAM offset aligned and
 * after the sections. Copies it to *ret. Does not check the CRC (the sections may not be read yet).
 * Returns 0 or -EINVAL / -EPROTONOSUPPORT (other format version) with a reason in err.
 */
int snap_parse_header(const void *buf, size_t len, struct snap_header *ret, char *err, size_t errlen);

/*
 * snap_parse_header() plus: buf holds exactly the header and its sections (len == header_size +
 * sections_len; RAM is not part of it), the CRC matches, and the sections walk exactly to the end with nsections entries,
 * each of a known type and a size its type allows. Returns 0, -EINVAL, -EPROTONOSUPPORT or
 * -EBADMSG (CRC mismatch), with a reason in err.
 */
int snap_parse(const uint8_t *buf, size_t len, struct snap_header *ret, char *err, size_t errlen);

/*
 * Iterates the sections of a buffer that passed snap_parse(): *pos starts at 0. Returns 1 and fills
 * *ret, 0 at the end, -EINVAL if a section does not fit (not reached after snap_parse()).
 */
int snap_next(const uint8_t *buf, size_t len, size_t *pos, struct snap_section *ret);

/* Finds the section (type, index). Returns it or NULL. */
bool snap_find(const uint8_t *buf, size_t len, uint32_t type, uint32_t index, struct snap_section *ret);

/* Expected payload size of a fixed-size section type (0 for variable-size types). */
size_t snap_section_size(uint32_t type);
