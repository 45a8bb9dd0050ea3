/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal assertions for the device unit tests: a failed CHECK prints where and fails the test. */
#pragma once

#include <stdio.h>

static int check_failures;

#define CHECK(cond)                                                                                 \
	do {                                                                                        \
		if (!(cond)) {                                                                      \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, __func__, \
				#cond);                                                             \
			check_failures++;                                                           \
		}                                                                                   \
	} while (0)

#define RUN(fn)                                                                                     \
	do {                                                                                        \
		int before_ = check_failures;                                                       \
		fn();                                                                               \
		printf("%s %s\n", check_failures == before_ ? "ok  " : "FAIL", #fn);                \
	} while (0)
