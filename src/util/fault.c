/* SPDX-License-Identifier: Apache-2.0 */
#include "util/fault.h"

#if HAVE_TEST_SWITCHES
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void util_fault_point(const char *op, int step)
{
	const char *v = getenv("SPACE_TEST_FAULT");
	size_t n = strlen(op);
	if (!v || strncmp(v, op, n) || v[n] != ':' || atoi(v + n + 1) != step)
		return;
	/* Said on stderr, so the harness knows the point was reached (and not some other death). */
	char line[96];
	int len = snprintf(line, sizeof(line), "fault point %s:%d reached\n", op, step);
	if (len > 0)
		(void)!write(STDERR_FILENO, line, (size_t)len);
	raise(SIGKILL);
}
#endif
