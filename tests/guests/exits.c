/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exits: ends the VM the way exits.mode=<mode> says, so the test sees space-vmm's exit status for
 * each outcome: poweroff (ACPI S5 sleep control write), reset-i8042 (0xfe to port 0x64), reset-acpi
 * (reset register), triple (exception with an empty IDT), hang (spins with interrupts off until
 * --timeout), fail (debug exit with a non-zero code).
 */
#include "guest.h"

#define NAME "exits"

static bool is(const char *a, const char *b)
{
	size_t n = strlen(b);
	return strncmp(a, b, n) == 0 && a[n] == 0;
}

void guest_main(const uint8_t *bp)
{
	char mode[32];
	if (!guest_cmdline_value(bp, "exits.mode", mode, sizeof(mode)))
		guest_fail(NAME, "exits.mode= missing");
	guest_puts("exits: ");
	guest_puts(mode);
	guest_puts("\n");
	if (is(mode, "poweroff")) {
		outb(0x600, (5 << 2) | 0x20);
	} else if (is(mode, "reset-i8042")) {
		outb(0x64, 0xfe);
	} else if (is(mode, "reset-acpi")) {
		outb(0x602, 1);
	} else if (is(mode, "triple")) {
		static const struct __attribute__((packed)) { uint16_t limit; uint64_t base; } idt = { 0, 0 };
		__asm__ volatile("lidt %0; ud2" : : "m"(idt));
	} else if (is(mode, "hang")) {
		for (;;)
			__asm__ volatile("cli; pause");
	} else if (is(mode, "fail")) {
		guest_fail(NAME, "failing on request");
	}
	/* Every mode above ends the VM; getting here means the VMM ignored the request. */
	guest_fail(NAME, "the VM kept running after the exit request");
}
