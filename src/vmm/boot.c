/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel image parsing and the Linux 64-bit boot protocol layout (see boot.h). */
#include "vmm/boot.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Zero page (struct boot_params) offsets, from the kernel's Documentation/arch/x86/zero-page.rst. */
#define BP_ACPI_RSDP      0x070
#define BP_EXT_RAMDISK    0x0c0
#define BP_EXT_RAMDISK_SZ 0x0c4
#define BP_EXT_CMDLINE    0x0c8
#define BP_E820_ENTRIES   0x1e8
#define BP_SETUP_HEADER   0x1f1
#define BP_E820_TABLE     0x2d0
#define BP_E820_MAX       128
/* Setup header offsets (absolute within the zero page / image). */
#define SH_SETUP_SECTS    0x1f1
#define SH_BOOT_FLAG      0x1fe
#define SH_JUMP           0x200
#define SH_HEADER         0x202
#define SH_VERSION        0x206
#define SH_TYPE_OF_LOADER 0x210
#define SH_LOADFLAGS      0x211
#define SH_CODE32_START   0x214
#define SH_RAMDISK_IMAGE  0x218
#define SH_RAMDISK_SIZE   0x21c
#define SH_HEAP_END_PTR   0x224
#define SH_CMD_LINE_PTR   0x228
#define SH_INITRD_MAX     0x22c
#define SH_KERNEL_ALIGN   0x230
#define SH_RELOCATABLE    0x234
#define SH_XLOADFLAGS     0x236
#define SH_CMDLINE_SIZE   0x238
#define SH_INIT_SIZE      0x260

#define LOADFLAG_LOADED_HIGH   0x01
#define LOADFLAG_CAN_USE_HEAP  0x80
#define XLF_KERNEL_64          0x01

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void wr32(uint8_t *p, uint32_t v) { wr16(p, (uint16_t)v); wr16(p + 2, (uint16_t)(v >> 16)); }
static void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }

static int parse_bzimage(const uint8_t *d, size_t len, struct kernel_image *img, char *err, size_t errlen)
{
	if (len < 0x264) {
		set_err(err, errlen, "bzImage truncated: %zu bytes, the setup header alone needs 612", len);
		return -EINVAL;
	}
	uint16_t version = rd16(d + SH_VERSION);
	if (version < 0x206) {
		set_err(err, errlen, "boot protocol %u.%02x is too old (need 2.06 or later)", version >> 8,
			version & 0xff);
		return -ENOEXEC;
	}
	unsigned sects = d[SH_SETUP_SECTS] ? d[SH_SETUP_SECTS] : 4;
	uint64_t setup = (uint64_t)(sects + 1) * 512;
	if (setup >= len) {
		set_err(err, errlen, "bzImage truncated: %zu bytes but its setup code alone is %llu", len,
			(unsigned long long)setup);
		return -EINVAL;
	}
	if (version < 0x20c || !(d[SH_XLOADFLAGS] & XLF_KERNEL_64)) {
		set_err(err, errlen, "bzImage has no 64-bit entry point (32-bit-only kernel?)");
		return -ENOEXEC;
	}
	img->kind = KERNEL_BZIMAGE;
	img->version = version;
	img->setup_size = setup;
	img->entry = BOOT_BZIMAGE_LOAD + 0x200;
	img->init_size = version >= 0x20a ? rd32(d + SH_INIT_SIZE) : 0;
	img->initrd_addr_max = rd32(d + SH_INITRD_MAX);
	img->kernel_alignment = rd32(d + SH_KERNEL_ALIGN);
	img->relocatable = d[SH_RELOCATABLE] != 0;
	img->cmdline_size = version >= 0x206 ? rd32(d + SH_CMDLINE_SIZE) : 255;
	/* The payload must cover what the header claims to be compressed kernel (syssize, 16-byte units). */
	uint64_t syssize = (uint64_t)rd32(d + 0x1f4) * 16;
	if (syssize > len - setup) {
		set_err(err, errlen, "bzImage truncated: header says %llu kernel bytes, file has %llu",
			(unsigned long long)syssize, (unsigned long long)(len - setup));
		return -EINVAL;
	}
	return 0;
}

static int parse_elf(const uint8_t *d, size_t len, struct kernel_image *img, char *err, size_t errlen)
{
	if (len < EI_NIDENT || d[EI_CLASS] == ELFCLASS32) {
		set_err(err, errlen, len < EI_NIDENT ? "ELF image truncated" :
			"32-bit ELF kernel: only x86_64 (ELF64) kernels can be booted");
		return len < EI_NIDENT ? -EINVAL : -ENOEXEC;
	}
	if (d[EI_CLASS] != ELFCLASS64 || d[EI_DATA] != ELFDATA2LSB) {
		set_err(err, errlen, "ELF image is not little-endian ELF64");
		return -ENOEXEC;
	}
	if (len < sizeof(Elf64_Ehdr)) {
		set_err(err, errlen, "ELF image truncated: no complete header");
		return -EINVAL;
	}
	Elf64_Ehdr eh;
	memcpy(&eh, d, sizeof(eh));
	if (eh.e_machine != EM_X86_64 || eh.e_type != ET_EXEC) {
		set_err(err, errlen, "ELF image is not an x86_64 executable (machine %u, type %u)",
			eh.e_machine, eh.e_type);
		return -ENOEXEC;
	}
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 64) {
		set_err(err, errlen, "ELF image has a bad program header table");
		return -EINVAL;
	}
	uint64_t ph_end;
	if (__builtin_mul_overflow((uint64_t)eh.e_phnum, sizeof(Elf64_Phdr), &ph_end) ||
	    __builtin_add_overflow(ph_end, eh.e_phoff, &ph_end) || ph_end > len) {
		set_err(err, errlen, "ELF image truncated: program headers beyond the end of the file");
		return -EINVAL;
	}
	img->kind = KERNEL_ELF;
	img->entry = eh.e_entry;
	img->nsegs = 0;
	img->initrd_addr_max = 0x37ffffff;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, d + eh.e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		uint64_t end;
		if (ph.p_filesz > ph.p_memsz || __builtin_add_overflow(ph.p_offset, ph.p_filesz, &end) ||
		    end > len || __builtin_add_overflow(ph.p_paddr, ph.p_memsz, &end)) {
			set_err(err, errlen, "ELF segment %u lies outside the file (truncated image?)", i);
			return -EINVAL;
		}
		if (img->nsegs == KERNEL_MAX_SEGMENTS) {
			set_err(err, errlen, "ELF image has more than %d loadable segments", KERNEL_MAX_SEGMENTS);
			return -EINVAL;
		}
		img->segs[img->nsegs++] = (struct kernel_segment){ ph.p_paddr, ph.p_offset, ph.p_filesz,
								   ph.p_memsz };
	}
	if (!img->nsegs) {
		set_err(err, errlen, "ELF image has no loadable segment");
		return -ENOEXEC;
	}
	return 0;
}

int kernel_image_parse(const uint8_t *data, size_t len, struct kernel_image *ret, char *err, size_t errlen)
{
	struct kernel_image img;
	memset(&img, 0, sizeof(img));
	int r;
	if (len >= 4 && memcmp(data, ELFMAG, SELFMAG) == 0)
		r = parse_elf(data, len, &img, err, errlen);
	else if (len >= 0x206 && memcmp(data + SH_HEADER, "HdrS", 4) == 0 && rd16(data + SH_BOOT_FLAG) == 0xaa55)
		r = parse_bzimage(data, len, &img, err, errlen);
	else {
		set_err(err, errlen, len < 0x206 && len >= 0x200 ? "image truncated (no room for a setup header)" :
			"not a Linux kernel image (neither a bzImage nor an ELF executable)");
		r = len < 0x206 && len >= 0x200 ? -EINVAL : -ENOEXEC;
	}
	if (r < 0)
		return r;
	*ret = img;
	return 0;
}

unsigned boot_e820_map(const struct guest_mem *mem, struct boot_e820 *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < mem->nregions && n + 3 <= max; i++) {
		const struct guest_region *r = &mem->regions[i];
		if (r->gpa == 0) {
			/* Low memory: RAM, then the EBDA/BIOS area (ACPI tables live there), then RAM from 1 MiB. */
			out[n++] = (struct boot_e820){ 0, BOOT_EBDA_START, 1 };
			out[n++] = (struct boot_e820){ BOOT_EBDA_START, 0x100000 - BOOT_EBDA_START, 2 };
			if (r->size > 0x100000)
				out[n++] = (struct boot_e820){ 0x100000, r->size - 0x100000, 1 };
		} else {
			out[n++] = (struct boot_e820){ r->gpa, r->size, 1 };
		}
	}
	return n;
}

static int put(const struct guest_mem *mem, uint64_t gpa, const void *src, uint64_t len, uint64_t zero_len,
	       char *err, size_t errlen, const char *what)
{
	uint8_t *p = guest_mem_ptr(mem, gpa, len + zero_len);
	if (!p) {
		set_err(err, errlen, "%s at 0x%llx (+%llu bytes) does not fit in guest RAM (raise --memory)", what,
			(unsigned long long)gpa, (unsigned long long)(len + zero_len));
		return -ENOMEM;
	}
	if (len)
		memcpy(p, src, len);
	memset(p + len, 0, zero_len);
	return 0;
}

static void write_tables(uint8_t *gdt, uint64_t *pml4, uint64_t *pdpt, uint64_t *pd)
{
	/* null, null, code64 (0x10), data (0x18), 64-bit TSS (0x20, 16 bytes, base 0 limit 0x67) */
	static const uint64_t entries[] = { 0, 0, 0x00af9b000000ffffull, 0x00cf93000000ffffull,
					    0x0000890000000067ull, 0 };
	memcpy(gdt, entries, sizeof(entries));
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = BOOT_PDPT_ADDR | 0x3;
	for (unsigned i = 0; i < 4; i++) {
		pdpt[i] = (BOOT_PD_ADDR + i * 0x1000ull) | 0x3;
		for (unsigned j = 0; j < 512; j++)
			pd[i * 512 + j] = ((uint64_t)(i * 512 + j) << 21) | 0x83; /* present, rw, 2 MiB */
	}
}

int boot_load(const struct guest_mem *mem, const struct boot_request *req, char *err, size_t errlen)
{
	const struct kernel_image *img = req->img;
	uint8_t *bp = guest_mem_ptr(mem, BOOT_PARAMS_ADDR, 4096);
	uint8_t *gdt = guest_mem_ptr(mem, BOOT_GDT_ADDR, 0x30);
	uint64_t *pml4 = guest_mem_ptr(mem, BOOT_PML4_ADDR, 4096);
	uint64_t *pdpt = guest_mem_ptr(mem, BOOT_PDPT_ADDR, 4096);
	uint64_t *pd = guest_mem_ptr(mem, BOOT_PD_ADDR, 4 * 4096);
	if (!bp || !gdt || !pml4 || !pdpt || !pd) {
		set_err(err, errlen, "guest RAM does not cover the boot area below 1 MiB");
		return -ENOMEM;
	}
	uint64_t low_end = 0;
	for (unsigned i = 0; i < mem->nregions; i++)
		if (mem->regions[i].gpa == 0)
			low_end = mem->regions[i].size;
	int r;

	memset(bp, 0, 4096);
	uint64_t kernel_end;
	if (img->kind == KERNEL_BZIMAGE) {
		/* Copy the setup header as the image has it; the loader then fills in its fields. */
		size_t hdr_end = 0x202 + req->kernel[0x201];
		if (hdr_end > req->kernel_len || hdr_end > 4096)
			hdr_end = 0x202;
		memcpy(bp + BP_SETUP_HEADER, req->kernel + BP_SETUP_HEADER, hdr_end - BP_SETUP_HEADER);
		uint64_t ksize = req->kernel_len - img->setup_size;
		uint64_t need = img->init_size > ksize ? img->init_size : ksize;
		r = put(mem, BOOT_BZIMAGE_LOAD, req->kernel + img->setup_size, ksize, need - ksize, err, errlen,
			"kernel");
		if (r < 0)
			return r;
		kernel_end = BOOT_BZIMAGE_LOAD + need;
		wr32(bp + SH_CODE32_START, (uint32_t)BOOT_BZIMAGE_LOAD);
	} else {
		kernel_end = 0;
		for (unsigned i = 0; i < img->nsegs; i++) {
			const struct kernel_segment *s = &img->segs[i];
			if (s->paddr < 0x100000) {
				set_err(err, errlen, "ELF segment at 0x%llx overlaps the boot area below 1 MiB",
					(unsigned long long)s->paddr);
				return -EINVAL;
			}
			r = put(mem, s->paddr, req->kernel + s->offset, s->filesz, s->memsz - s->filesz, err,
				errlen, "kernel segment");
			if (r < 0)
				return r;
			if (s->paddr + s->memsz > kernel_end)
				kernel_end = s->paddr + s->memsz;
		}
		wr16(bp + SH_BOOT_FLAG, 0xaa55);
		memcpy(bp + SH_HEADER, "HdrS", 4);
		wr16(bp + SH_VERSION, 0x020f);
		wr32(bp + SH_INITRD_MAX, img->initrd_addr_max);
	}
	bp[SH_TYPE_OF_LOADER] = 0xff;
	bp[SH_LOADFLAGS] |= LOADFLAG_LOADED_HIGH | LOADFLAG_CAN_USE_HEAP;
	wr16(bp + SH_HEAP_END_PTR, 0xfe00);

	size_t clen = strlen(req->cmdline);
	uint32_t cmax = img->cmdline_size ? img->cmdline_size : BOOT_CMDLINE_MAX - 1;
	if (clen >= BOOT_CMDLINE_MAX || clen > cmax) {
		set_err(err, errlen, "command line too long: %zu bytes (this kernel accepts %u)", clen,
			cmax < BOOT_CMDLINE_MAX - 1 ? cmax : BOOT_CMDLINE_MAX - 1);
		return -E2BIG;
	}
	r = put(mem, BOOT_CMDLINE_ADDR, req->cmdline, clen, 1, err, errlen, "command line");
	if (r < 0)
		return r;
	wr32(bp + SH_CMD_LINE_PTR, (uint32_t)BOOT_CMDLINE_ADDR);
	wr32(bp + SH_CMDLINE_SIZE, (uint32_t)clen);

	if (req->initrd_len) {
		/* Highest page-aligned spot below both the kernel's limit and the end of low RAM. */
		uint64_t top = low_end;
		if (img->initrd_addr_max && (uint64_t)img->initrd_addr_max + 1 < top)
			top = (uint64_t)img->initrd_addr_max + 1;
		if (req->initrd_len > top || ((top - req->initrd_len) & ~0xfffull) < kernel_end) {
			set_err(err, errlen, "initrd of %zu bytes does not fit in guest RAM above the kernel "
				"(raise --memory)", req->initrd_len);
			return -ENOMEM;
		}
		uint64_t at = (top - req->initrd_len) & ~0xfffull;
		r = put(mem, at, req->initrd, req->initrd_len, 0, err, errlen, "initrd");
		if (r < 0)
			return r;
		wr32(bp + SH_RAMDISK_IMAGE, (uint32_t)at);
		wr32(bp + SH_RAMDISK_SIZE, (uint32_t)req->initrd_len);
		wr32(bp + BP_EXT_RAMDISK, 0);
		wr32(bp + BP_EXT_RAMDISK_SZ, 0);
	}
	wr32(bp + BP_EXT_CMDLINE, 0);
	wr64(bp + BP_ACPI_RSDP, req->rsdp_addr);

	struct boot_e820 map[BP_E820_MAX];
	unsigned n = boot_e820_map(mem, map, BP_E820_MAX);
	bp[BP_E820_ENTRIES] = (uint8_t)n;
	for (unsigned i = 0; i < n; i++) {
		uint8_t *e = bp + BP_E820_TABLE + i * 20;
		wr64(e, map[i].addr);
		wr64(e + 8, map[i].size);
		wr32(e + 16, map[i].type);
	}
	write_tables(gdt, pml4, pdpt, pd);
	return 0;
}
