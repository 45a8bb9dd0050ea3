/* SPDX-License-Identifier: Apache-2.0 */
/* 8250/16550 UART, transmit side (see serial.h). Register semantics from the 16550 data sheet. */
#include "devices/serial.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "util/caplog.h"
#include "util/util.h"

#define UART_RX_TX 0
#define UART_IER   1
#define UART_IIR   2 /* read; FCR on write */
#define UART_LCR   3
#define UART_MCR   4
#define UART_LSR   5
#define UART_MSR   6
#define UART_SCR   7

#define IER_RDI    0x01
#define IER_THRI   0x02
#define IIR_NONE   0x01
#define IIR_THRI   0x02
#define IIR_FIFO   0xc0
#define LCR_DLAB   0x80
#define MCR_LOOP   0x10
#define LSR_THRE   0x20
#define LSR_TEMT   0x40
#define MSR_DCD_DSR_CTS 0xb0

#define OUT_BUF 512

struct serial {
	pthread_mutex_t lock;
	int out_fd;
	int log_fd;        /* uncapped log (serial_log.max == 0), else -1 */
	struct caplog log; /* capped log; log.fd == -1 when none */
	void (*irq)(void *);
	void *irq_opaque;
	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm;
	bool thre_pending;  /* THR-empty interrupt waiting to be seen through IIR */
	bool irq_raised;    /* level of the (virtual) interrupt output */
	bool any_output;
	uint8_t buf[OUT_BUF];
	unsigned len;
};

int serial_create(int out_fd, const struct serial_log *log, void (*irq)(void *opaque), void *opaque,
		  struct serial **ret)
{
	struct caplog cl = { .fd = -1, .old_fd = -1 };
	int log_fd = -1, r;
	if (log && log->fd >= 0 && log->max == 0)
		log_fd = log->fd;
	else if (log && log->fd >= 0 && (r = caplog_init(&cl, log->fd, log->old_fd, log->max)) < 0)
		return r;
	struct serial *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->out_fd = out_fd;
	s->log_fd = log_fd;
	s->log = cl;
	s->irq = irq;
	s->irq_opaque = opaque;
	s->lcr = 0x03;
	s->dll = 0x0c;
	*ret = s;
	return 0;
}

static void flush_locked(struct serial *s)
{
	if (!s->len)
		return;
	/* Console output is best effort: a closed stdout must not stop the guest. */
	if (s->out_fd >= 0)
		(void)util_write_all(s->out_fd, s->buf, s->len);
	if (s->log_fd >= 0)
		(void)util_write_all(s->log_fd, s->buf, s->len);
	(void)caplog_write(&s->log, s->buf, s->len); /* nothing when there is no capped log */
	s->len = 0;
}

/* Recomputes the interrupt output; returns true when it rose (the caller then pulses the line). */
static bool update_irq(struct serial *s)
{
	bool level = (s->ier & IER_THRI) && s->thre_pending;
	bool rose = level && !s->irq_raised;
	s->irq_raised = level;
	return rose;
}

void serial_io(struct serial *s, unsigned offset, bool is_write, uint8_t *data)
{
	bool pulse = false;
	pthread_mutex_lock(&s->lock);
	bool dlab = s->lcr & LCR_DLAB;
	if (is_write) {
		uint8_t v = *data;
		switch (offset) {
		case UART_RX_TX:
			if (dlab) {
				s->dll = v;
				break;
			}
			if (!(s->mcr & MCR_LOOP)) {
				s->any_output = true;
				s->buf[s->len++] = v;
				if (v == '\n' || s->len == OUT_BUF)
					flush_locked(s);
			}
			s->thre_pending = true;
			break;
		case UART_IER:
			if (dlab) {
				s->dlm = v;
				break;
			}
			/* Enabling THRI while the transmitter is empty raises the interrupt at once. */
			if ((v & IER_THRI) && !(s->ier & IER_THRI))
				s->thre_pending = true;
			s->ier = v & 0x0f;
			break;
		case UART_IIR: s->fcr = v; break;
		case UART_LCR: s->lcr = v; break;
		case UART_MCR: s->mcr = v & 0x1f; break;
		case UART_SCR: s->scr = v; break;
		default: break; /* LSR/MSR are read-only */
		}
	} else {
		uint8_t v = 0;
		switch (offset) {
		case UART_RX_TX: v = dlab ? s->dll : 0; break;
		case UART_IER: v = dlab ? s->dlm : s->ier; break;
		case UART_IIR:
			if ((s->ier & IER_THRI) && s->thre_pending) {
				v = IIR_THRI;
				s->thre_pending = false; /* reading IIR acknowledges THR empty */
			} else {
				v = IIR_NONE;
			}
			if (s->fcr & 0x01)
				v |= IIR_FIFO;
			break;
		case UART_LCR: v = s->lcr; break;
		case UART_MCR: v = s->mcr; break;
		case UART_LSR: v = LSR_THRE | LSR_TEMT; break;
		case UART_MSR:
			/* In loopback the modem outputs read back as inputs; otherwise the line is up. */
			v = (s->mcr & MCR_LOOP) ? (uint8_t)(((s->mcr & 0x0c) << 4) | ((s->mcr & 0x03) << 4))
						: MSR_DCD_DSR_CTS;
			break;
		case UART_SCR: v = s->scr; break;
		default: break;
		}
		*data = v;
	}
	pulse = update_irq(s);
	pthread_mutex_unlock(&s->lock);
	if (pulse && s->irq)
		s->irq(s->irq_opaque);
}

void serial_flush(struct serial *s)
{
	pthread_mutex_lock(&s->lock);
	flush_locked(s);
	pthread_mutex_unlock(&s->lock);
}

bool serial_has_output(struct serial *s)
{
	pthread_mutex_lock(&s->lock);
	bool r = s->any_output;
	pthread_mutex_unlock(&s->lock);
	return r;
}

uint64_t serial_log_rotations(struct serial *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t r = s->log.rotations;
	pthread_mutex_unlock(&s->lock);
	return r;
}

void serial_save(struct serial *s, struct serial_state *ret)
{
	pthread_mutex_lock(&s->lock);
	flush_locked(s);
	*ret = (struct serial_state){
		.ier = s->ier, .lcr = s->lcr, .mcr = s->mcr, .scr = s->scr, .fcr = s->fcr, .dll = s->dll,
		.dlm = s->dlm, .thre_pending = s->thre_pending, .irq_raised = s->irq_raised,
		.any_output = s->any_output,
	};
	pthread_mutex_unlock(&s->lock);
}

void serial_restore(struct serial *s, const struct serial_state *st)
{
	pthread_mutex_lock(&s->lock);
	s->ier = st->ier & 0x0f;
	s->lcr = st->lcr;
	s->mcr = st->mcr & 0x1f;
	s->scr = st->scr;
	s->fcr = st->fcr;
	s->dll = st->dll;
	s->dlm = st->dlm;
	s->thre_pending = st->thre_pending != 0;
	s->irq_raised = st->irq_raised != 0;
	s->any_output = st->any_output != 0;
	pthread_mutex_unlock(&s->lock);
}

void serial_destroy(struct serial *s)
{
	if (!s)
		return;
	serial_flush(s);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
