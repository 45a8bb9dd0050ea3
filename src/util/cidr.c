/* SPDX-License-Identifier: Apache-2.0 */
#include "util/cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "util/util.h"

int util_cidr4_parse(const char *s, uint32_t *ret_addr, uint32_t *ret_mask)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	uint64_t bits = 32;
	struct in_addr a;
	if (n == 0 || n >= sizeof(ip) || (slash && util_parse_uint(slash + 1, 0, 32, &bits) < 0))
		return -EINVAL;
	memcpy(ip, s, n);
	ip[n] = '\0';
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	uint32_t mask = bits ? ~0u << (32 - bits) : 0;
	*ret_addr = ntohl(a.s_addr) & mask;
	*ret_mask = mask;
	return 0;
}
