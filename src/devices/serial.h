/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A 16550-compatible UART (the PC's COM1 at I/O ports 0x3f8-0x3ff, IRQ 4), output only: what the guest
 * transmits goes to an output fd (stdout) and a console log, either optional. Transmission is
 * instantaneous, so the line status always shows an empty transmitter; the THR-empty interrupt is
 * raised as a guest driver expects. Received data never arrives (no input path yet).
 *
 * The guest decides how much it prints, so the console log is capped (util/caplog.h): a log of a
 * sandbox never holds more than its max bytes, in two parts, the newest kept.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ  4

struct serial;

/* Where the console log goes. The descriptors are not owned. */
struct serial_log {
	int fd;       /* the log (FILE), open for reading and appending (O_RDWR | O_APPEND); -1: no log */
	int old_fd;   /* its older part (FILE.1), open for writing; -1: a rotation only empties FILE */
	uint64_t max; /* both parts together at most this many bytes (util/caplog.h); 0: no cap (only for a
	                 log the operator watches, such as `space-vmm boot --console-log`) */
};

/*
 * irq(opaque) is called (without the device lock held) to pulse the interrupt line. out_fd is not owned;
 * log may be NULL (no log). -EINVAL for a cap outside CAPLOG_MIN_MAX..CAPLOG_MAX_MAX or a log that is not
 * a regular file when capped. A log already past its share is rotated here (before any seccomp filter).
 */
int serial_create(int out_fd, const struct serial_log *log, void (*irq)(void *opaque), void *opaque,
		  struct serial **ret);

/* A 1-byte port access at offset 0..7 from the base. Thread-safe. */
void serial_io(struct serial *s, unsigned offset, bool is_write, uint8_t *data);

/* Writes out any buffered console bytes. */
void serial_flush(struct serial *s);

/* Whether the guest has written at least one byte. */
bool serial_has_output(struct serial *s);

/* How many times the console log started again (rotations), for tests and status. */
uint64_t serial_log_rotations(struct serial *s);

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
