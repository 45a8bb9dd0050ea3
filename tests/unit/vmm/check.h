/* SPDX-License-Identifier: Apache-2.0 */
/* Non-fatal checks for the vmm unit tests: CHECK(cond, fmt, ...) reports failures and counts every check
 * (check_count, for a completion line); check_exit(). */
#pragma once

#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                      \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

static inline int check_exit(void)
{
	if (check_failures) {
		fprintf(stderr, "%d check(s) failed\n", check_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
