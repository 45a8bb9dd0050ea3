/* SPDX-License-Identifier: Apache-2.0 */
/* The store's unit tests: the shared CHECK and completion line (tests/check.h), and check_exit(name, dir),
 * which also removes the test's directory. */
#pragma once

#include "../../check.h"
#include "util/util.h"

static inline int check_exit(const char *name, const char *dir)
{
	util_rm_rf(dir);
	return check_summary(name);
}
