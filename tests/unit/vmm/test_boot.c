/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel image validation and the boot protocol layout, on synthetic images (no KVM needed). */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "vmm/boot.h"


static uint8_t *make_bzimage(size_t *len, uint16_t version, uint8_t xlf)
{
	size_t n = 5 * 512 + 8192;
	uint8_t *d = calloc(1, n);
	d[0x1f1] = 4;                          /* setup_sects */
	d[0x1fe] = 0x55; d[0x1ff] = 0xaa;
	memcpy(d + 0x202, "HdrS", 4);
	d[0x206] = (uint8_t)version; d[0x207] = (uint8_t)(version >> 8);
	d[0x201] = 0x6a;                       /* header extends to 0x26c */
	uint32_t syssize = 8192 / 16;
	memcpy(d + 0x1f4, &syssize, 4);
	d[0x236] = xlf;
	uint32_t init_size = 0x100000, max = 0x37ffffff, cmax = 2047;
	memcpy(d + 0x260, &init_size, 4);
	memcpy(d + 0x22c, &max, 4);
	memcpy(d + 0x238, &cmax, 4);
	memset(d + 5 * 512, 0x90, 8192);
	*len = n;
	return d;
}

static uint8_t *make_elf(size_t *len, unsigned char cls)
{
	size_t n = 0x3000;
	uint8_t *d = calloc(1, n);
	Elf64_Ehdr eh = { 0 };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = cls;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_entry = 0x200000;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 1;
	memcpy(d, &eh, sizeof(eh));
	Elf64_Phdr ph = { .p_type = PT_LOAD, .p_offset = 0x1000, .p_paddr = 0x200000, .p_vaddr = 0x200000,
			  .p_filesz = 0x1000, .p_memsz = 0x3000 };
	memcpy(d + sizeof(eh), &ph, sizeof(ph));
	memset(d + 0x1000, 0xcc, 0x1000);
	*len = n;
	return d;
}

static void test_parse(void)
{
	struct kernel_image img;
	char err[160];
	size_t len;
	uint8_t *bz = make_bzimage(&len, 0x20f, 1);
	CHECK(kernel_image_parse(bz, len, &img, err, sizeof(err)) == 0, "good bzImage refused: %s", err);
	CHECK(img.kind == KERNEL_BZIMAGE && img.entry == 0x100200 && img.setup_size == 5 * 512, "bzImage fields");
	CHECK(kernel_image_parse(bz, 0x300, &img, err, sizeof(err)) == -EINVAL && strstr(err, "truncated"),
	      "short bzImage: %s", err);
	CHECK(kernel_image_parse(bz, len - 100, &img, err, sizeof(err)) == -EINVAL && strstr(err, "truncated"),
	      "bzImage missing payload: %s", err);
	free(bz);
	bz = make_bzimage(&len, 0x20f, 0);
	CHECK(kernel_image_parse(bz, len, &img, err, sizeof(err)) == -ENOEXEC && strstr(err, "32-bit"),
	      "32-bit-only bzImage: %s", err);
	free(bz);
	bz = make_bzimage(&len, 0x204, 1);
	CHECK(kernel_image_parse(bz, len, &img, err, sizeof(err)) == -ENOEXEC && strstr(err, "too old"),
	      "old protocol: %s", err);
	free(bz);

	uint8_t *elf = make_elf(&len, ELFCLASS64);
	CHECK(kernel_image_parse(elf, len, &img, err, sizeof(err)) == 0, "good ELF refused: %s", err);
	CHECK(img.kind == KERNEL_ELF && img.nsegs == 1 && img.entry == 0x200000, "ELF fields");
	CHECK(kernel_image_parse(elf, 0x1800, &img, err, sizeof(err)) == -EINVAL, "truncated ELF: %s", err);
	free(elf);
	elf = make_elf(&len, ELFCLASS32);
	CHECK(kernel_image_parse(elf, len, &img, err, sizeof(err)) == -ENOEXEC && strstr(err, "32-bit"),
	      "ELF32: %s", err);
	free(elf);
	const char *text = "#!/bin/sh\necho this is not a kernel\n";
	CHECK(kernel_image_parse((const uint8_t *)text, strlen(text), &img, err, sizeof(err)) == -ENOEXEC &&
	      strstr(err, "not a Linux kernel"), "text file: %s", err);
	CHECK(kernel_image_parse((const uint8_t *)"", 0, &img, err, sizeof(err)) == -ENOEXEC, "empty file");
}

static void test_load(uint64_t mem_size)
{
	uint8_t *ram = calloc(1, mem_size < (64u << 20) ? mem_size : (64u << 20));
	struct guest_mem mem = { .regions = { { 0, mem_size < (64u << 20) ? mem_size : (64u << 20), ram } },
				 .nregions = 1 };
	size_t len;
	uint8_t *bz = make_bzimage(&len, 0x20f, 1);
	struct kernel_image img;
	char err[160];
	CHECK(kernel_image_parse(bz, len, &img, err, sizeof(err)) == 0, "parse");
	uint8_t initrd[5000];
	memset(initrd, 0xab, sizeof(initrd));
	struct boot_request req = { .kernel = bz, .kernel_len = len, .img = &img, .initrd = initrd,
				    .initrd_len = sizeof(initrd), .cmdline = "console=ttyS0 quiet",
				    .rsdp_addr = 0xe0000 };
	CHECK(boot_load(&mem, &req, err, sizeof(err)) == 0, "boot_load: %s", err);
	uint8_t *bp = ram + BOOT_PARAMS_ADDR;
	uint32_t cmd, rd, rdsz;
	memcpy(&cmd, bp + 0x228, 4);
	memcpy(&rd, bp + 0x218, 4);
	memcpy(&rdsz, bp + 0x21c, 4);
	CHECK(cmd == BOOT_CMDLINE_ADDR && strcmp((char *)ram + cmd, "console=ttyS0 quiet") == 0, "cmdline");
	CHECK(rdsz == sizeof(initrd) && rd % 4096 == 0 && rd + rdsz <= mem.regions[0].size &&
	      rd >= 0x100000 + 0x100000 && ram[rd] == 0xab, "initrd at 0x%x", rd);
	CHECK(bp[0x210] == 0xff && memcmp(bp + 0x202, "HdrS", 4) == 0, "loader type / header copied");
	CHECK(ram[0x100000] == 0x90, "kernel at 1 MiB");
	CHECK(bp[0x1e8] == 3, "three e820 entries, got %u", bp[0x1e8]);
	uint64_t pml4 = *(uint64_t *)(ram + BOOT_PML4_ADDR);
	CHECK((pml4 & ~0xfffull) == BOOT_PDPT_ADDR, "page tables");

	/* Command line longer than the kernel accepts. */
	char *lng = malloc(3000);
	memset(lng, 'x', 2999);
	lng[2999] = 0;
	req.cmdline = lng;
	CHECK(boot_load(&mem, &req, err, sizeof(err)) == -E2BIG, "long cmdline refused");
	free(lng);
	/* An initrd that cannot fit. */
	req.cmdline = "";
	req.initrd_len = mem.regions[0].size;
	CHECK(boot_load(&mem, &req, err, sizeof(err)) == -ENOMEM && strstr(err, "initrd"), "big initrd: %s", err);
	free(bz);
	free(ram);
}

static void test_e820_split(void)
{
	struct guest_mem mem = { .regions = { { 0, 0xc0000000ull, NULL }, { 0x100000000ull, 1ull << 30, NULL } },
				 .nregions = 2 };
	struct boot_e820 e[8];
	unsigned n = boot_e820_map(&mem, e, 8);
	CHECK(n == 4, "split e820 has 4 entries, got %u", n);
	CHECK(e[3].addr == 0x100000000ull && e[3].size == 1ull << 30 && e[3].type == 1, "high RAM entry");
	CHECK(e[1].type == 2 && e[1].addr == BOOT_EBDA_START, "reserved BIOS area");
}

int main(void)
{
	test_parse();
	test_load(32u << 20);
	test_e820_split();
	return check_exit();
}
