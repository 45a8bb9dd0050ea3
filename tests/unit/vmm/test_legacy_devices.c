/* SPDX-License-Identifier: Apache-2.0 */
/* The 8250 UART and the i8042, driven the way Linux's drivers drive them (no KVM needed). */
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "devices/i8042.h"
#include "devices/serial.h"

static int irqs;
static void count_irq(void *opaque)
{
	(void)opaque;
	irqs++;
}

static uint8_t rd(struct serial *s, unsigned off)
{
	uint8_t v = 0;
	serial_io(s, off, false, &v);
	return v;
}

static void wr(struct serial *s, unsigned off, uint8_t v)
{
	serial_io(s, off, true, &v);
}

static void test_serial(void)
{
	int p[2];
	CHECK(pipe(p) == 0, "pipe");
	struct serial *s;
	CHECK(serial_create(p[1], NULL, count_irq, NULL, &s) == 0, "serial_create");
	CHECK(!serial_has_output(s), "no output yet");
	/* Scratch register and divisor latch, as the 8250 probe uses them. */
	wr(s, 7, 0xa5);
	CHECK(rd(s, 7) == 0xa5, "scratch register");
	wr(s, 3, 0x80);
	wr(s, 0, 0x01);
	wr(s, 1, 0x00);
	CHECK(rd(s, 0) == 0x01, "divisor latch low");
	wr(s, 3, 0x03);
	CHECK((rd(s, 5) & 0x60) == 0x60, "transmitter empty");
	CHECK((rd(s, 2) & 0x01) == 0x01, "no interrupt pending");
	/* Enabling THRI raises an interrupt at once; reading IIR acknowledges it. */
	wr(s, 1, 0x02);
	CHECK(irqs == 1, "THRE interrupt on enable (%d)", irqs);
	CHECK((rd(s, 2) & 0x0f) == 0x02, "IIR says THR empty");
	CHECK((rd(s, 2) & 0x01) == 0x01, "acknowledged");
	/* Each byte re-arms THR empty: the line rises again only after the previous one was seen. */
	wr(s, 0, 'h');
	CHECK(irqs == 2, "interrupt after a byte (%d)", irqs);
	CHECK((rd(s, 2) & 0x0f) == 0x02, "THR empty after the byte");
	wr(s, 0, 'i');
	wr(s, 0, '\n');
	CHECK(irqs == 3, "one more edge for two unacknowledged bytes (%d)", irqs);
	char buf[8] = "";
	CHECK(read(p[0], buf, sizeof(buf)) == 3 && memcmp(buf, "hi\n", 3) == 0, "line reached the fd");
	CHECK(serial_has_output(s), "has output");
	/* Loopback mode sends nothing out. */
	wr(s, 4, 0x10);
	wr(s, 0, 'x');
	wr(s, 4, 0x00);
	wr(s, 0, '\n');
	CHECK(read(p[0], buf, sizeof(buf)) == 1 && buf[0] == '\n', "loopback byte not transmitted");
	serial_destroy(s);
	close(p[0]);
	close(p[1]);
}

static void test_i8042(void)
{
	struct i8042 *k;
	CHECK(i8042_create(&k) == 0, "i8042_create");
	uint8_t v = 0;
	CHECK(!i8042_io(k, I8042_CMD_PORT, false, &v) && !(v & 0x02), "input buffer empty");
	v = 0x20;
	CHECK(!i8042_io(k, I8042_CMD_PORT, true, &v), "read command byte");
	i8042_io(k, I8042_CMD_PORT, false, &v);
	CHECK(v & 0x01, "output buffer full");
	i8042_io(k, I8042_DATA_PORT, false, &v);
	CHECK(v == 0x30, "command byte 0x%x", v);
	v = 0xd1;
	CHECK(!i8042_io(k, I8042_CMD_PORT, true, &v), "write output port command");
	v = 0x03;
	CHECK(!i8042_io(k, I8042_DATA_PORT, true, &v), "output port with reset line high");
	v = 0xd1;
	i8042_io(k, I8042_CMD_PORT, true, &v);
	v = 0x02;
	CHECK(i8042_io(k, I8042_DATA_PORT, true, &v), "reset line pulled low resets");
	v = 0xfe;
	CHECK(i8042_io(k, I8042_CMD_PORT, true, &v), "0xfe resets");
	uint8_t a, b;
	i8042_io(k, I8042_PORT_B, false, &a);
	i8042_io(k, I8042_PORT_B, false, &b);
	CHECK((a ^ b) == 0x10, "port 0x61 refresh bit toggles");
	i8042_destroy(k);
}

int main(void)
{
	test_serial();
	test_i8042();
	return check_exit();
}
