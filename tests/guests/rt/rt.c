/* SPDX-License-Identifier: Apache-2.0 */
/* Runtime of the freestanding test guests (see guest.h). */
#include "guest.h"

#define COM1 0x3f8
#define LAPIC 0xfee00000ull
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310

void *memset(void *d, int c, size_t n)
{
	uint8_t *p = d;
	while (n--)
		*p++ = (uint8_t)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	uint8_t *p = d;
	const uint8_t *q = s;
	while (n--)
		*p++ = *q++;
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const uint8_t *p = a, *q = b;
	for (; n; n--, p++, q++)
		if (*p != *q)
			return *p < *q ? -1 : 1;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (uint8_t)*a < (uint8_t)*b ? -1 : 1;
		if (!*a)
			return 0;
	}
	return 0;
}

/* The VMM's UART transmits instantly, so there is no need to poll the line status per byte. */
void guest_puts(const char *s)
{
	for (; *s; s++)
		outb(COM1, (uint8_t)*s);
}

void guest_put_hex(uint64_t v)
{
	char buf[19] = "0x";
	int shift = 60;
	while (shift > 0 && !((v >> shift) & 0xf))
		shift -= 4;
	int i = 2;
	for (; shift >= 0; shift -= 4)
		buf[i++] = "0123456789abcdef"[(v >> shift) & 0xf];
	buf[i] = 0;
	guest_puts(buf);
}

void guest_put_dec(uint64_t v)
{
	char buf[21];
	int i = 20;
	buf[i] = 0;
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	guest_puts(buf + i);
}

__attribute__((noreturn)) static void guest_end(uint8_t code)
{
	outb(GUEST_DEBUG_EXIT_PORT, code);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void guest_ok(const char *name)
{
	guest_puts("GUEST-OK ");
	guest_puts(name);
	guest_puts("\n");
	guest_end(0);
}

void guest_fail(const char *name, const char *why)
{
	guest_puts("GUEST-FAIL ");
	guest_puts(name);
	guest_puts(": ");
	guest_puts(why);
	guest_puts("\n");
	guest_end(1);
}

const char *guest_cmdline(const uint8_t *bp)
{
	if (!bp)
		return "";
	uint64_t p = guest_rd32(bp + 0x228) | (uint64_t)guest_rd32(bp + 0xc8) << 32;
	return p ? (const char *)(uintptr_t)p : "";
}

bool guest_cmdline_value(const uint8_t *bp, const char *key, char *buf, size_t len)
{
	const char *s = guest_cmdline(bp);
	size_t klen = strlen(key);
	while (*s) {
		while (*s == ' ')
			s++;
		if (strncmp(s, key, klen) == 0 && s[klen] == '=') {
			s += klen + 1;
			size_t n = 0;
			while (s[n] && s[n] != ' ' && n + 1 < len) {
				buf[n] = s[n];
				n++;
			}
			buf[n] = 0;
			return len > 0;
		}
		while (*s && *s != ' ')
			s++;
	}
	return false;
}

uint64_t guest_parse_num(const char *s, const char **end)
{
	uint64_t v = 0;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s += 2;
		for (;; s++) {
			unsigned d;
			if (*s >= '0' && *s <= '9') d = (unsigned)(*s - '0');
			else if (*s >= 'a' && *s <= 'f') d = (unsigned)(*s - 'a' + 10);
			else if (*s >= 'A' && *s <= 'F') d = (unsigned)(*s - 'A' + 10);
			else break;
			v = v * 16 + d;
		}
	} else {
		for (; *s >= '0' && *s <= '9'; s++)
			v = v * 10 + (uint64_t)(*s - '0');
	}
	switch (*s) {
	case 'K': case 'k': v <<= 10; s++; break;
	case 'M': case 'm': v <<= 20; s++; break;
	case 'G': case 'g': v <<= 30; s++; break;
	default: break;
	}
	if (end)
		*end = s;
	return v;
}

static uint8_t arena[1 << 20] __attribute__((aligned(4096)));
static size_t arena_used;

void *guest_alloc(size_t size, size_t align)
{
	if (!align)
		align = 16;
	size_t at = (arena_used + align - 1) & ~(align - 1);
	if (at > sizeof(arena) || size > sizeof(arena) - at)
		guest_fail("rt", "guest_alloc: arena exhausted");
	arena_used = at + size;
	return arena + at;
}

void guest_start_ap(unsigned apic_id, void (*entry)(void), size_t stack_size)
{
	static bool copied;
	if (!copied) {
		memcpy((void *)(uintptr_t)GUEST_AP_TRAMPOLINE, guest_ap_tramp_start,
		       (size_t)(guest_ap_tramp_end - guest_ap_tramp_start));
		copied = true;
	}
	/* The variables live inside the copied trampoline: write them at their low-memory address. */
	uint8_t *base = (uint8_t *)(uintptr_t)GUEST_AP_TRAMPOLINE;
	uint64_t cr3;
	__asm__ volatile("mov %%cr3, %0" : "=r"(cr3));
	uint8_t *stack = guest_alloc(stack_size, 16);
	uint64_t top = (uint64_t)(uintptr_t)(stack + stack_size);
	uint64_t ent = (uint64_t)(uintptr_t)entry;
	memcpy(base + ((char *)&guest_ap_cr3 - guest_ap_tramp_start), &cr3, 8);
	memcpy(base + ((char *)&guest_ap_stack - guest_ap_tramp_start), &top, 8);
	memcpy(base + ((char *)&guest_ap_entry - guest_ap_tramp_start), &ent, 8);
	__asm__ volatile("" ::: "memory");
	mmio_write32(LAPIC + LAPIC_ICR_HI, apic_id << 24);
	mmio_write32(LAPIC + LAPIC_ICR_LO, 0x00004500); /* INIT, assert */
	mmio_write32(LAPIC + LAPIC_ICR_HI, apic_id << 24);
	mmio_write32(LAPIC + LAPIC_ICR_LO, 0x00004600 | (GUEST_AP_TRAMPOLINE >> 12)); /* STARTUP */
}
