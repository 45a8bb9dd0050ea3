/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the milliseconds of one operation go: named steps with their durations, marked as the operation
 * passes them and written as one line ("row 0.4, clone 2.1, jail 9.8, ... = 14.2 ms"). A NULL trace is a
 * no-op, so a step can mark unconditionally. One trace belongs to one operation on one thread.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define TRACE_STEPS_MAX 24

struct op_trace {
	uint64_t t0, last; /* CLOCK_MONOTONIC ns */
	unsigned n;
	struct {
		const char *name; /* a string literal */
		uint64_t ns;
	} step[TRACE_STEPS_MAX];
};

/* Starts (or restarts) t now. */
void trace_start(struct op_trace *t);

/* Ends the step named name (a literal) now: its duration is the time since the last mark. Steps past
 * TRACE_STEPS_MAX are folded into the last. */
void trace_mark(struct op_trace *t, const char *name);

/* Nanoseconds from trace_start to the last mark (0 for NULL). */
uint64_t trace_total_ns(const struct op_trace *t);

/* "name 1.2, name 0.3 = 1.5 ms" into buf (always NUL-terminated). */
void trace_format(const struct op_trace *t, char *buf, size_t len);
