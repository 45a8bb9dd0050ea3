/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test guest `snapshot`: fills 2 MiB with a known pattern, then counts, printing "count N" every
 * snapshot.delay loop iterations, up to snapshot.target. The test pauses it mid-run, saves a
 * snapshot, stops it and restores the snapshot in a new space-vmm: the count must go on from where it
 * stopped (the counter lives in guest memory), and at the end the pattern must be intact.
 */
#include "guest.h"

#define NAME "snapshot"
#define PATTERN_WORDS ((2u << 20) / 8)

static uint64_t pattern[PATTERN_WORDS] __attribute__((aligned(4096)));
static volatile uint64_t counter;

static uint64_t pattern_word(uint64_t i)
{
	return (i * 0x9e3779b97f4a7c15ull) ^ 0x5a5a5a5a00000000ull;
}

static uint64_t cmdline_num(const uint8_t *bp, const char *key, uint64_t dflt)
{
	char val[24];
	return guest_cmdline_value(bp, key, val, sizeof(val)) ? guest_parse_num(val, NULL) : dflt;
}

void guest_main(const uint8_t *bp)
{
	uint64_t delay = cmdline_num(bp, "snapshot.delay", 30000000);
	uint64_t target = cmdline_num(bp, "snapshot.target", 40);
	for (uint64_t i = 0; i < PATTERN_WORDS; i++)
		pattern[i] = pattern_word(i);
	guest_puts("snapshot: pattern written\n");
	while (counter < target) {
		counter++;
		guest_puts("count ");
		guest_put_dec(counter);
		guest_puts("\n");
		for (volatile uint64_t spin = 0; spin < delay; spin++)
			;
	}
	for (uint64_t i = 0; i < PATTERN_WORDS; i++)
		if (pattern[i] != pattern_word(i))
			guest_fail(NAME, "memory pattern changed");
	guest_puts("snapshot: pattern intact\n");
	guest_ok(NAME);
}
