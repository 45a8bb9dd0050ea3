/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A 16550-compatible UART (the PC's COM1 at I/O ports 0x3f8-0x3ff, IRQ 4), output only: what the guest
 * transmits goes to an output fd (stdout) and a console log fd, either optional. Transmission is
 * instantaneous, so the line status always shows an empty transmitter; the THR-empty interrupt is
 * raised as a guest driver expects. Received data never arrives (no input path yet).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ  4

struct serial;

/* irq(opaque) is called (without the device lock held) to pulse the interrupt line. fds are not owned. */
int serial_create(int out_fd, int log_fd, void (*irq)(void *opaque), void *opaque, struct serial **ret);

/* A 1-byte port access at offset 0..7 from the base. Thread-safe. */
void serial_io(struct serial *s, unsigned offset, bool is_write, uint8_t *data);

/* Writes out any buffered console bytes. */
void serial_flush(struct serial *s);

/* Whether the guest has written at least one byte. */
bool serial_has_output(struct serial *s);

/* Register state for snapshots (no host fds, no buffered output). */
struct serial_state {
	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm;
	uint8_t thre_pending, irq_raised, any_output;
	uint8_t reserved[6];
};

/* Flushes buffered output (it belongs to this process's console) and fills *ret. */
void serial_save(struct serial *s, struct serial_state *ret);
/* Takes the registers of st back (masked to what the guest can set). */
void serial_restore(struct serial *s, const struct serial_state *st);

/* Flushes and frees; NULL is fine. */
void serial_destroy(struct serial *s);
