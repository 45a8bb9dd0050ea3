/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the agent integration tests. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

/* Each test program defines cleanup(): it kills what the test started and removes what it created. */
static void cleanup(void);

/* Fails the test with a message (printf-style arguments) after cleaning up. */
#define CHECK(cond, ...)                                                                                 \
	do {                                                                                             \
		if (!(cond)) {                                                                           \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
			fprintf(stderr, __VA_ARGS__);                                                    \
			fputc('\n', stderr);                                                             \
			cleanup();                                                                       \
			exit(1);                                                                         \
		}                                                                                        \
	} while (0)
