/* SPDX-License-Identifier: Apache-2.0 */
/* Step timings of one operation (trace.h). */
#include <stdio.h>

#include "core/trace.h"
#include "util/util.h"

void trace_start(struct op_trace *t)
{
	if (!t)
		return;
	t->n = 0;
	t->t0 = t->last = util_now_ns();
}

void trace_mark(struct op_trace *t, const char *name)
{
	if (!t)
		return;
	uint64_t now = util_now_ns();
	if (t->n == TRACE_STEPS_MAX) {
		t->step[t->n - 1].ns += now - t->last;
	} else {
		t->step[t->n].name = name;
		t->step[t->n].ns = now - t->last;
		t->n++;
	}
	t->last = now;
}

uint64_t trace_total_ns(const struct op_trace *t)
{
	return t ? t->last - t->t0 : 0;
}

void trace_format(const struct op_trace *t, char *buf, size_t len)
{
	size_t off = 0;
	if (!len)
		return;
	buf[0] = '\0';
	for (unsigned i = 0; t && i < t->n && off < len; i++) {
		int k = snprintf(buf + off, len - off, "%s%s %.1f", i ? ", " : "", t->step[i].name, t->step[i].ns / 1e6);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	if (off < len)
		snprintf(buf + off, len - off, " = %.1f ms", trace_total_ns(t) / 1e6);
}
