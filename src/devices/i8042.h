/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Just enough of the PC keyboard controller (ports 0x60 data, 0x64 status/command) for a guest to
 * reset the machine: command 0xfe (pulse reset line), or writing the output port (0xd1) with bit 0
 * clear. Also a stub for port 0x61 (system control port B) when nothing else answers it.
 * No keyboard or mouse is attached.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define I8042_DATA_PORT   0x60
#define I8042_PORT_B      0x61
#define I8042_CMD_PORT    0x64

struct i8042;

int i8042_create(struct i8042 **ret);

/* A 1-byte access to one of the ports above. Returns true when the guest asked for a reset. */
bool i8042_io(struct i8042 *k, uint16_t port, bool is_write, uint8_t *data);

/* Register state for snapshots. */
struct i8042_state {
	uint8_t cmd_byte, out, out_full, pending_cmd, port_b;
	uint8_t reserved[3];
};

void i8042_save(struct i8042 *k, struct i8042_state *ret);
void i8042_restore(struct i8042 *k, const struct i8042_state *st);

void i8042_destroy(struct i8042 *k);
