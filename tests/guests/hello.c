/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hello: prints, then checks what the VMM handed over against what the test asked for on the command
 * line: hello.mem=<size> (the --memory given to space-vmm) must equal the RAM in the e820 map plus the
 * reserved BIOS area below 1 MiB, and hello.text must read back as the word the tests pass
 * (HELLO_TEXT), proving the command line arrives intact.
 */
#include "guest.h"

#define NAME "hello"
#define BIOS_HOLE (0x100000 - 0x9fc00)
#define HELLO_TEXT "pineapple"

void guest_main(const uint8_t *bp)
{
	guest_puts("hello from the test guest\n");
	char buf[64];
	if (!guest_cmdline_value(bp, "hello.text", buf, sizeof(buf)) || strlen(buf) == 0)
		guest_fail(NAME, "hello.text= missing from the command line");
	guest_puts("hello: text=");
	guest_puts(buf);
	guest_puts("\n");
	if (strlen(buf) != strlen(HELLO_TEXT) || memcmp(buf, HELLO_TEXT, strlen(HELLO_TEXT)) != 0)
		guest_fail(NAME, "hello.text differs from what the test passed");
	if (!guest_cmdline_value(bp, "hello.mem", buf, sizeof(buf)))
		guest_fail(NAME, "hello.mem= missing from the command line");
	uint64_t want = guest_parse_num(buf, NULL);

	unsigned n = bp[0x1e8];
	if (n == 0 || n > 128)
		guest_fail(NAME, "e820 map empty or oversized");
	uint64_t ram = 0, prev_end = 0;
	bool low = false;
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *e = bp + 0x2d0 + i * 20;
		uint64_t addr = guest_rd64(e), size = guest_rd64(e + 8);
		uint32_t type = guest_rd32(e + 16);
		guest_puts("e820: ");
		guest_put_hex(addr);
		guest_puts(" +");
		guest_put_hex(size);
		guest_puts(type == 1 ? " ram\n" : " reserved\n");
		if (addr < prev_end)
			guest_fail(NAME, "e820 entries overlap or are unsorted");
		prev_end = addr + size;
		if (type == 1) {
			ram += size;
			if (addr == 0)
				low = true;
			if (addr < 0x100000 && addr + size > 0x9fc00)
				guest_fail(NAME, "e820 RAM covers the BIOS area below 1 MiB");
			if (addr < 0x100000000ull && addr + size > 0xc0000000ull)
				guest_fail(NAME, "e820 RAM reaches into the 32-bit hole");
		}
	}
	if (!low)
		guest_fail(NAME, "no RAM at address 0 in e820");
	if (ram + BIOS_HOLE != want) {
		guest_puts("hello: e820 RAM ");
		guest_put_dec(ram + BIOS_HOLE);
		guest_puts(" bytes, asked for ");
		guest_put_dec(want);
		guest_puts("\n");
		guest_fail(NAME, "e820 RAM does not match the requested memory size");
	}
	guest_ok(NAME);
}
