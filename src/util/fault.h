/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Fault points (test builds only, meson -Dtest_switches=true): with SPACE_TEST_FAULT="OP:N" in the
 * environment, the process that reaches step N of operation OP (create, destroy, checkpoint, rollback,
 * template-import) kills itself with SIGKILL there, as a crash or a kill -9 at that very moment would.
 * tests/harness/faultwalk walks every step of every operation and checks that the library converges after
 * each. In other builds a fault point is nothing.
 */
#include "config.h"

#if HAVE_TEST_SWITCHES
void util_fault_point(const char *op, int step);
#else
static inline void util_fault_point(const char *op, int step)
{
	(void)op;
	(void)step;
}
#endif
