/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot file format: CRC32C, the section writer and the checked parser (snapshot_format.h). */
#include "vmm/snapshot_format.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/i8042.h"
#include "devices/serial.h"
#ifdef SPACE_HAVE_VIRTIO_BLK
#include "devices/virtio_mmio.h"
#endif

/* Reflected Castagnoli polynomial; the table is built on first use (a const table would do too). */
static uint32_t crc_table[256];
static bool crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (c & 1 ? 0x82f63b78u : 0);
		crc_table[i] = c;
	}
	__atomic_store_n(&crc_ready, true, __ATOMIC_RELEASE);
}

uint32_t snap_crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
		crc_init(); /* idempotent: two threads racing here write the same table */
	const uint8_t *p = buf;
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

int snap_buf_init(struct snap_buf *b)
{
	*b = (struct snap_buf){ 0 };
	b->cap = 64 << 10;
	b->p = calloc(1, b->cap);
	if (!b->p)
		return b->err = -ENOMEM;
	b->len = sizeof(struct snap_header);
	return 0;
}

void snap_buf_free(struct snap_buf *b)
{
	free(b->p);
	*b = (struct snap_buf){ 0 };
}

static int reserve(struct snap_buf *b, size_t more)
{
	if (b->err)
		return b->err;
	if (more > SNAP_MAX_META || b->len + more > SNAP_MAX_META)
		return b->err = -E2BIG;
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap;
	while (cap < b->len + more)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return b->err = -ENOMEM;
	memset(p + b->cap, 0, cap - b->cap);
	b->p = p;
	b->cap = cap;
	return 0;
}

int snap_buf_add2(struct snap_buf *b, uint32_t type, uint32_t index, const void *a, size_t alen,
		  const void *c, size_t clen)
{
	size_t len = alen + clen;
	int r = reserve(b, sizeof(struct snap_section_hdr) + pad8(len));
	if (r < 0)
		return r;
	struct snap_section_hdr h = { .type = type, .index = index, .len = len };
	memcpy(b->p + b->len, &h, sizeof(h));
	b->len += sizeof(h);
	if (alen)
		memcpy(b->p + b->len, a, alen);
	if (clen)
		memcpy(b->p + b->len + alen, c, clen);
	b->len += pad8(len); /* the padding is already zero */
	b->nsections++;
	return 0;
}

int snap_buf_add(struct snap_buf *b, uint32_t type, uint32_t index, const void *data, size_t len)
{
	return snap_buf_add2(b, type, index, data, len, NULL, 0);
}

int snap_buf_finish(struct snap_buf *b, const struct snap_header *in)
{
	if (b->err)
		return b->err;
	struct snap_header h = *in;
	memcpy(h.magic, SNAP_MAGIC, sizeof(h.magic));
	h.format_version = SNAP_FORMAT_VERSION;
	h.header_size = sizeof(h);
	h.nsections = b->nsections;
	h.sections_len = b->len - sizeof(h);
	h.mem_offset = snap_mem_offset(b->len);
	h.crc = 0;
	h.reserved = 0;
	memcpy(b->p, &h, sizeof(h));
	h.crc = snap_crc32c(0, b->p, b->len);
	memcpy(b->p, &h, sizeof(h));
	return 0;
}

size_t snap_section_size(uint32_t type)
{
	switch (type) {
	case SNAP_VCPU_REGS: return sizeof(struct kvm_regs);
	case SNAP_VCPU_SREGS: return sizeof(struct kvm_sregs);
	case SNAP_VCPU_XSAVE: return sizeof(struct kvm_xsave);
	case SNAP_VCPU_FPU: return sizeof(struct kvm_fpu);
	case SNAP_VCPU_XCRS: return sizeof(struct kvm_xcrs);
	case SNAP_VCPU_LAPIC: return sizeof(struct kvm_lapic_state);
	case SNAP_VCPU_EVENTS: return sizeof(struct kvm_vcpu_events);
	case SNAP_VCPU_MP_STATE: return sizeof(struct kvm_mp_state);
	case SNAP_VCPU_DEBUGREGS: return sizeof(struct kvm_debugregs);
	case SNAP_VM_IRQCHIP: return sizeof(struct kvm_irqchip);
	case SNAP_VM_PIT2: return sizeof(struct kvm_pit_state2);
	case SNAP_VM_CLOCK: return sizeof(struct kvm_clock_data);
	case SNAP_DEV_SERIAL: return sizeof(struct serial_state);
	case SNAP_DEV_I8042: return sizeof(struct i8042_state);
	default: return 0;
	}
}

/* Whether a payload of len bytes is acceptable for type. */
static bool section_size_ok(uint32_t type, uint64_t len)
{
	switch (type) {
	case SNAP_VCPU_MSRS: {
		/* count, pad, then count entries: checked again against the count by the reader */
		if (len < 8 || (len - 8) % sizeof(struct kvm_msr_entry))
			return false;
		return (len - 8) / sizeof(struct kvm_msr_entry) <= 4096;
	}
	case SNAP_DEV_VIRTIO:
#ifdef SPACE_HAVE_VIRTIO_BLK
		return len >= sizeof(struct virtio_mmio_state) &&
		       len - sizeof(struct virtio_mmio_state) <= VIRTIO_MMIO_DEV_STATE_MAX;
#else
		return false;
#endif
	default:
		return type > 0 && type < SNAP_SECTION_TYPES && len == snap_section_size(type);
	}
}

static int bad(char *err, size_t errlen, int r, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", why);
	return r;
}

int snap_parse_header(const void *buf, size_t len, struct snap_header *ret, char *err, size_t errlen)
{
	struct snap_header h;
	if (len < sizeof(h))
		return bad(err, errlen, -EINVAL, "snapshot truncated: no complete header");
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, SNAP_MAGIC, sizeof(h.magic)) != 0)
		return bad(err, errlen, -EINVAL, "not a space-vmm snapshot (bad magic)");
	if (h.format_version != SNAP_FORMAT_VERSION) {
		if (err && errlen)
			snprintf(err, errlen, "snapshot format version %u, this space-vmm reads version %u",
				 h.format_version, SNAP_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (h.header_size != sizeof(h) || h.reserved != 0)
		return bad(err, errlen, -EINVAL, "snapshot header size or reserved field is wrong");
	if (!memchr(h.libspace_version, 0, sizeof(h.libspace_version)) ||
	    !memchr(h.cpu_vendor, 0, sizeof(h.cpu_vendor)))
		return bad(err, errlen, -EINVAL, "snapshot header strings are not terminated");
	if (h.nvcpus == 0 || h.nvcpus > 64)
		return bad(err, errlen, -EINVAL, "snapshot vCPU count out of range");
	if (h.mem_bytes < (16ull << 20) || h.mem_bytes > (1ull << 40) || h.mem_bytes % SNAP_PAGE)
		return bad(err, errlen, -EINVAL, "snapshot memory size out of range");
	if (h.sections_len > SNAP_MAX_META - sizeof(h) || h.sections_len % 8)
		return bad(err, errlen, -EINVAL, "snapshot sections too large or misaligned");
	if (h.nsections > h.sections_len / sizeof(struct snap_section_hdr))
		return bad(err, errlen, -EINVAL, "snapshot section count does not fit");
	if (h.mem_offset != snap_mem_offset(sizeof(h) + h.sections_len))
		return bad(err, errlen, -EINVAL, "snapshot memory offset is not right after the sections");
	*ret = h;
	return 0;
}

int snap_next(const uint8_t *buf, size_t len, size_t *pos, struct snap_section *ret)
{
	size_t at = *pos ? *pos : sizeof(struct snap_header);
	if (at == len)
		return 0;
	struct snap_section_hdr sh;
	if (at > len || len - at < sizeof(sh))
		return -EINVAL;
	memcpy(&sh, buf + at, sizeof(sh));
	at += sizeof(sh);
	if (sh.len > len - at || pad8((size_t)sh.len) > len - at)
		return -EINVAL;
	*ret = (struct snap_section){ .type = sh.type, .index = sh.index, .len = sh.len, .data = buf + at };
	*pos = at + pad8((size_t)sh.len);
	return 1;
}

bool snap_find(const uint8_t *buf, size_t len, uint32_t type, uint32_t index, struct snap_section *ret)
{
	size_t pos = 0;
	struct snap_section s;
	while (snap_next(buf, len, &pos, &s) == 1)
		if (s.type == type && s.index == index) {
			*ret = s;
			return true;
		}
	return false;
}

int snap_parse(const uint8_t *buf, size_t len, struct snap_header *ret, char *err, size_t errlen)
{
	struct snap_header h;
	int r = snap_parse_header(buf, len, &h, err, errlen);
	if (r < 0)
		return r;
	size_t meta = sizeof(h) + (size_t)h.sections_len;
	if (len < meta)
		return bad(err, errlen, -EINVAL, "snapshot truncated inside its sections");
	if (len > meta)
		return bad(err, errlen, -EINVAL, "bytes after the snapshot sections (pass exactly the header and sections)");
	struct snap_header z = h;
	z.crc = 0;
	uint32_t crc = snap_crc32c(0, &z, sizeof(z));
	crc = snap_crc32c(crc, buf + sizeof(h), (size_t)h.sections_len);
	if (crc != h.crc)
		return bad(err, errlen, -EBADMSG, "snapshot checksum mismatch (the file is corrupted)");
	size_t pos = 0;
	unsigned n = 0;
	struct snap_section s;
	while ((r = snap_next(buf, meta, &pos, &s)) == 1) {
		if (!section_size_ok(s.type, s.len))
			return bad(err, errlen, -EINVAL, "snapshot section of unknown type or wrong size");
		if (s.type == SNAP_VCPU_MSRS) {
			uint32_t count;
			memcpy(&count, s.data, sizeof(count));
			if (count != (s.len - 8) / sizeof(struct kvm_msr_entry))
				return bad(err, errlen, -EINVAL, "snapshot MSR count does not match its section");
		}
		if (s.type <= SNAP_VCPU_DEBUGREGS && s.index >= h.nvcpus)
			return bad(err, errlen, -EINVAL, "snapshot vCPU section for a vCPU that does not exist");
		n++;
	}
	if (r < 0 || n != h.nsections)
		return bad(err, errlen, -EINVAL, "snapshot sections do not add up");
	*ret = h;
	return 0;
}
