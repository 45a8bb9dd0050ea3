/* SPDX-License-Identifier: Apache-2.0 */
/*
 * smp: the BSP wakes every AP (APIC IDs 1..smp.cpus-1) with INIT + SIPI, one at a time; each AP
 * enters long mode through the trampoline, reports its APIC ID on the serial port and halts.
 */
#include "guest.h"

#define NAME "smp"
#define LAPIC_ID 0xfee00020ull

static volatile uint32_t ap_count;
static volatile uint32_t ap_seen_mask;

static void ap_main(void)
{
	uint32_t id = mmio_read32(LAPIC_ID) >> 24;
	guest_puts("smp: cpu ");
	guest_put_dec(id);
	guest_puts(" up\n");
	if (id < 32)
		__atomic_or_fetch(&ap_seen_mask, 1u << id, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&ap_count, 1, __ATOMIC_SEQ_CST);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void guest_main(const uint8_t *bp)
{
	char buf[16];
	if (!guest_cmdline_value(bp, "smp.cpus", buf, sizeof(buf)))
		guest_fail(NAME, "smp.cpus= missing from the command line");
	uint64_t n = guest_parse_num(buf, NULL);
	if (n < 2 || n > 32)
		guest_fail(NAME, "smp.cpus must be 2..32");
	if ((mmio_read32(LAPIC_ID) >> 24) != 0)
		guest_fail(NAME, "the BSP's APIC ID is not 0");
	for (uint32_t id = 1; id < n; id++) {
		guest_start_ap(id, ap_main, 4096);
		/* Bounded wait: on an emulated ring 0 each iteration is a few microseconds. */
		uint64_t spins = 0;
		while (__atomic_load_n(&ap_count, __ATOMIC_SEQ_CST) < id) {
			if (++spins > 20000000ull)
				guest_fail(NAME, "an AP did not come up after INIT/SIPI");
			__asm__ volatile("pause");
		}
	}
	if (ap_seen_mask != (uint32_t)(((1ull << n) - 1) & ~1ull))
		guest_fail(NAME, "the APs reported unexpected APIC IDs");
	guest_puts("smp: all ");
	guest_put_dec(n);
	guest_puts(" cpus up\n");
	guest_ok(NAME);
}
