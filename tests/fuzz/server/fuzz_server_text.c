/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's text encoding of hostile bytes (process output, file names): serve_json_quote must always
 * give a JSON string literal that parses, and cleaning a stream cut into chunks (carrying incomplete
 * UTF-8 sequences across cuts) must give exactly what cleaning it whole gives.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_assert(int cond)
{
	if (!cond)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned cut_every = (data[0] & 7) + 1;
	data++, size--;

	char *q = serve_json_quote((const char *)data, size, NULL);
	fuzz_assert(q != NULL);
	cJSON *j = cJSON_Parse(q);
	fuzz_assert(j && cJSON_IsString(j));
	cJSON_Delete(j);
	free(q);

	size_t whole_len;
	char *whole = serve_utf8_clean((const char *)data, size, NULL, &whole_len);
	fuzz_assert(whole != NULL);
	char *joined = malloc(size * 3 + 1);
	fuzz_assert(joined != NULL);
	size_t jl = 0;
	unsigned char carry[4] = { 0 };
	for (size_t off = 0; off < size; off += cut_every) {
		size_t n = size - off < cut_every ? size - off : cut_every, l;
		char *part = serve_utf8_clean((const char *)data + off, n, carry, &l);
		fuzz_assert(part != NULL && jl + l <= size * 3);
		memcpy(joined + jl, part, l);
		jl += l;
		free(part);
	}
	if (carry[3]) {
		size_t l;
		char *part = serve_utf8_clean((const char *)carry, carry[3], NULL, &l);
		fuzz_assert(part != NULL && jl + l <= size * 3);
		memcpy(joined + jl, part, l);
		jl += l;
		free(part);
	}
	fuzz_assert(jl == whole_len && !memcmp(joined, whole, jl));
	free(joined);
	free(whole);
	return 0;
}
