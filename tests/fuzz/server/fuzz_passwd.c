/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's /etc/passwd as the server reads it for a request's `user` (e2b_passwd_find): any bytes.
 * A user found has the name asked for, and a home that is absolute, fits, and holds no control byte.
 * The first byte picks the name looked up: "root", "user", or the input's first line's text before ':'.
 */
#include <stdint.h>
#include <string.h>

#include "serve_e2b.h"

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
	unsigned pick = data[0] % 3;
	data++, size--;
	char name[E2B_USER_NAME_MAX + 1] = "root";
	if (pick == 1)
		strcpy(name, "user");
	else if (pick == 2) {
		size_t n = 0;
		while (n < size && n < E2B_USER_NAME_MAX && data[n] != ':' && data[n] != '\n' && data[n])
			n++;
		memcpy(name, data, n);
		name[n] = '\0';
	}
	struct e2b_user u;
	memset(&u, 0xa5, sizeof(u));
	if (e2b_passwd_find((const char *)data, size, name, &u) == 0) {
		fuzz_assert(u.given && !strcmp(u.name, name));
		size_t h = strnlen(u.home, sizeof(u.home));
		fuzz_assert(h > 0 && h < sizeof(u.home) && u.home[0] == '/');
		for (size_t i = 0; i < h; i++)
			fuzz_assert((unsigned char)u.home[i] >= 0x20 && u.home[i] != 0x7f);
		fuzz_assert(u.uid != UINT32_MAX && u.gid != UINT32_MAX);
	}
	return 0;
}
