/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal i8042 (see i8042.h). */
#include "devices/i8042.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define STS_OBF        0x01
#define STS_SYS        0x04
#define CMD_READ_CB    0x20
#define CMD_WRITE_CB   0x60
#define CMD_WRITE_OUT  0xd1
#define CMD_RESET      0xfe

struct i8042 {
	pthread_mutex_t lock;
	uint8_t cmd_byte;
	uint8_t out;          /* byte waiting in the output buffer */
	bool out_full;
	uint8_t pending_cmd;  /* command waiting for its data byte on port 0x60 */
	uint8_t port_b;
};

int i8042_create(struct i8042 **ret)
{
	struct i8042 *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	pthread_mutex_init(&k->lock, NULL);
	k->cmd_byte = 0x30; /* both ports disabled, no interrupts */
	*ret = k;
	return 0;
}

bool i8042_io(struct i8042 *k, uint16_t port, bool is_write, uint8_t *data)
{
	bool reset = false;
	pthread_mutex_lock(&k->lock);
	switch (port) {
	case I8042_CMD_PORT:
		if (!is_write) {
			*data = STS_SYS | (k->out_full ? STS_OBF : 0);
			break;
		}
		k->pending_cmd = 0;
		if (*data == CMD_RESET) {
			reset = true;
		} else if (*data == CMD_READ_CB) {
			k->out = k->cmd_byte;
			k->out_full = true;
		} else if (*data == CMD_WRITE_CB || *data == CMD_WRITE_OUT) {
			k->pending_cmd = *data;
		}
		break;
	case I8042_DATA_PORT:
		if (!is_write) {
			*data = k->out;
			k->out_full = false;
			break;
		}
		if (k->pending_cmd == CMD_WRITE_CB)
			k->cmd_byte = *data;
		else if (k->pending_cmd == CMD_WRITE_OUT && !(*data & 0x01))
			reset = true; /* output port bit 0 is the CPU reset line (active low) */
		k->pending_cmd = 0;
		break;
	case I8042_PORT_B:
		if (is_write) {
			k->port_b = *data & 0x0f;
		} else {
			/* Toggle the refresh bit (4) so delay loops that watch it make progress. */
			k->port_b ^= 0x10;
			*data = k->port_b;
		}
		break;
	default:
		if (!is_write)
			*data = 0xff;
		break;
	}
	pthread_mutex_unlock(&k->lock);
	return reset;
}

void i8042_save(struct i8042 *k, struct i8042_state *ret)
{
	pthread_mutex_lock(&k->lock);
	*ret = (struct i8042_state){ .cmd_byte = k->cmd_byte, .out = k->out, .out_full = k->out_full,
				     .pending_cmd = k->pending_cmd, .port_b = k->port_b };
	pthread_mutex_unlock(&k->lock);
}

void i8042_restore(struct i8042 *k, const struct i8042_state *st)
{
	pthread_mutex_lock(&k->lock);
	k->cmd_byte = st->cmd_byte;
	k->out = st->out;
	k->out_full = st->out_full != 0;
	/* Only the two commands that take a data byte can be pending. */
	k->pending_cmd = st->pending_cmd == CMD_WRITE_CB || st->pending_cmd == CMD_WRITE_OUT ? st->pending_cmd : 0;
	k->port_b = st->port_b & 0x1f;
	pthread_mutex_unlock(&k->lock);
}

void i8042_destroy(struct i8042 *k)
{
	if (!k)
		return;
	pthread_mutex_destroy(&k->lock);
	free(k);
}
