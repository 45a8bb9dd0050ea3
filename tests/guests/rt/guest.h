/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runtime for the freestanding test guests. A guest is entered exactly like Linux (64-bit boot
 * protocol: long mode, paging identity-mapped, RSI = boot_params) at _start (rt/start.S), which sets a
 * stack and calls guest_main(bp). guest_main returns nothing: it ends with guest_ok() or guest_fail(),
 * which print the verdict line on the 8250 UART at 0x3f8 and ask the VMM to shut the VM down.
 * Ring 0 is emulated on some hosts at ~1 us per instruction: keep loops short.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct boot_params; /* Linux zero page; the guest reads fields at their documented offsets */

void guest_main(const uint8_t *boot_params);

/* Serial output. */
void guest_puts(const char *s);
void guest_put_hex(uint64_t v);
void guest_put_dec(uint64_t v);

/* Verdicts: print "GUEST-OK <name>\n" / "GUEST-FAIL <name>: <why>\n", then shut down. Never return. */
__attribute__((noreturn)) void guest_ok(const char *name);
__attribute__((noreturn)) void guest_fail(const char *name, const char *why);

/* Kernel command line from boot_params (cmd_line_ptr), or "" when none. */
const char *guest_cmdline(const uint8_t *boot_params);

/* Finds "key=" in the command line and copies its value (up to a space) into buf; false if absent. */
bool guest_cmdline_value(const uint8_t *boot_params, const char *key, char *buf, size_t len);

/* MMIO accessors (volatile, exactly-sized loads/stores: each one exits to the VMM). */
static inline uint32_t mmio_read32(uint64_t addr) { return *(volatile uint32_t *)(uintptr_t)addr; }
static inline void mmio_write32(uint64_t addr, uint32_t v) { *(volatile uint32_t *)(uintptr_t)addr = v; }
static inline uint8_t mmio_read8(uint64_t addr) { return *(volatile uint8_t *)(uintptr_t)addr; }
static inline void mmio_write8(uint64_t addr, uint8_t v) { *(volatile uint8_t *)(uintptr_t)addr = v; }

/* Port I/O. */
static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port) { uint8_t v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port)); return v; }

/* Freestanding libc bits. */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strncmp(const char *a, const char *b, size_t n);
/* Parses hex ("0x..") or decimal, with optional K/M/G suffix; stops at the first other char. */
uint64_t guest_parse_num(const char *s, const char **end);

/* A bump allocator over a static arena (page-aligned allocations possible); never freed. */
void *guest_alloc(size_t size, size_t align);

/* Little-endian field readers for boot_params and ACPI tables (no alignment assumptions). */
static inline uint16_t guest_rd16(const void *p) { const uint8_t *b = p; return (uint16_t)(b[0] | b[1] << 8); }
static inline uint32_t guest_rd32(const void *p) { return guest_rd16(p) | (uint32_t)guest_rd16((const uint8_t *)p + 2) << 16; }
static inline uint64_t guest_rd64(const void *p) { return guest_rd32(p) | (uint64_t)guest_rd32((const uint8_t *)p + 4) << 32; }

/* Debug exit port of space-vmm: outb(code) ends the VM (0 = success). */
#define GUEST_DEBUG_EXIT_PORT 0x501

/* AP bring-up (rt/start.S): the trampoline copied to GUEST_AP_TRAMPOLINE (SIPI vector 0x08). */
#define GUEST_AP_TRAMPOLINE 0x8000
extern char guest_ap_tramp_start[], guest_ap_tramp_end[];
extern uint64_t guest_ap_cr3, guest_ap_stack, guest_ap_entry;

/*
 * Starts the AP with the given local APIC ID with INIT + SIPI; it runs entry() on its own stack
 * (stack_size bytes from guest_alloc). Copies the trampoline on first use.
 */
void guest_start_ap(unsigned apic_id, void (*entry)(void), size_t stack_size);
