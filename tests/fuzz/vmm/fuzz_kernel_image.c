/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: kernel image validation (bzImage setup header, ELF64 headers and segments) and, for
 * images that pass, the boot protocol layout into a small guest RAM. Neither may read outside the
 * input or write outside guest RAM, whatever the bytes claim.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/boot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RAM_SIZE (24u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *ram;
	if (!ram && !(ram = calloc(1, RAM_SIZE)))
		return 0;
	struct kernel_image img;
	char err[160];
	if (kernel_image_parse(data, size, &img, err, sizeof(err)) < 0)
		return 0;
	struct guest_mem mem = { .regions = { { 0, RAM_SIZE, ram } }, .nregions = 1 };
	/* The tail of the input doubles as an initrd, to exercise placement. */
	struct boot_request req = { .kernel = data, .kernel_len = size, .img = &img, .initrd = data,
				    .initrd_len = size % 8192, .cmdline = "console=ttyS0", .rsdp_addr = 0xe0000 };
	(void)boot_load(&mem, &req, err, sizeof(err));
	return 0;
}
