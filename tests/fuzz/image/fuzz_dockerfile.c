/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the Dockerfile parser and its variable substitution (src/image/dockerfile.c), which read a
 * file a build is given (over an API, a hostile upload). Invariants: no sanitizer report; an accepted
 * Dockerfile starts with FROM (after ARGs), every instruction within its bounds; every argument expands
 * without a crash, to at most DF_EXPAND_MAX bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct dockerfile df;
	if (dockerfile_parse((const char *)data, size, &df, err, sizeof(err)) < 0)
		return 0;
	size_t i = 0;
	while (i < df.n && df.v[i].op == DF_ARG)
		i++;
	if (i == df.n || df.v[i].op != DF_FROM || df.n > DF_INSTRS_MAX)
		__builtin_trap();
	static const char *const vars[] = { "A=1", "B=$A", "EMPTY=", "LONG=xxxxxxxxxxxxxxxx", NULL };
	for (size_t k = 0; k < df.n; k++) {
		const struct df_instr *in = &df.v[k];
		if (strlen(in->text) > DF_INSTR_MAX || in->n_args > DF_ARGS_MAX)
			__builtin_trap();
		for (size_t a = 0; a < in->n_args; a++) {
			char *out;
			if (dockerfile_expand(in->args[a], vars, &out, err, sizeof(err)) == 0) {
				if (strlen(out) > DF_EXPAND_MAX)
					__builtin_trap();
				free(out);
			}
		}
	}
	dockerfile_free(&df);
	return 0;
}
