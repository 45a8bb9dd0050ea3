/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Non-fatal checks for the C tests: CHECK(cond) reports a failed condition with its place and counts every
 * check; check_summary(name) prints the completion line "<name>: N checks, F failed" (the count a runner
 * can verify) and gives the exit code.
 */
#pragma once

#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                                  \
	do {                                                                                         \
		check_count++;                                                                       \
		if (!(cond)) {                                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
			check_failures++;                                                            \
		}                                                                                    \
	} while (0)

static inline int check_summary(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
	return check_failures ? 1 : 0;
}
