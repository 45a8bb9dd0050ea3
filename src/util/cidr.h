/* SPDX-License-Identifier: Apache-2.0 */
/* IPv4 CIDR text, shared by the egress policy (src/net/policy.c) and `space serve --allow-resolve`. */
#pragma once

#include <stdint.h>

/* Parses "A.B.C.D/N" (N 0..32) or "A.B.C.D" (/32) into a host-order address (host bits cleared) and
 * mask; -EINVAL otherwise. */
int util_cidr4_parse(const char *s, uint32_t *ret_addr, uint32_t *ret_mask);
