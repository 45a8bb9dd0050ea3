/* SPDX-License-Identifier: Apache-2.0 */
/* The jail tests' assertion: on failure, print where and why, and return 1 from the calling test. */
#pragma once

#include <stdio.h>

#define CHECK(cond, ...)                                                                                   \
	do {                                                                                               \
		if (!(cond)) {                                                                             \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                    \
			fprintf(stderr, __VA_ARGS__);                                                      \
			fprintf(stderr, "\n");                                                             \
			return 1;                                                                          \
		}                                                                                          \
	} while (0)
