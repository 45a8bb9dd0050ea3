/* SPDX-License-Identifier: Apache-2.0 */
/* Non-fatal checks for the store's unit tests: CHECK(cond) reports a failure and counts every check;
 * check_exit(name, dir) removes the test's directory and prints the completion line with the count. */
#pragma once

#include <stdio.h>

#include "util/util.h"

static int check_failures, check_count;

#define CHECK(cond)                                                                                 \
	do {                                                                                        \
		check_count++;                                                                      \
		if (!(cond)) {                                                                      \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
			check_failures++;                                                           \
		}                                                                                   \
	} while (0)

static inline int check_exit(const char *name, const char *dir)
{
	util_rm_rf(dir);
	if (check_failures) {
		fprintf(stderr, "%s: %d of %d check(s) failed\n", name, check_failures, check_count);
		return 1;
	}
	printf("%s: all %d checks passed\n", name, check_count);
	return 0;
}
