/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CLI's sizes and durations (src/util/util.h: util_parse_mib, util_parse_duration): the units a user
 * types ("--memory 1G", "--timeout 10m"), a bare number as the flags always took it (MiB, seconds), and
 * every bad input refused with the right errno: junk, signs, empty, unknown units, fractions, overflow.
 */
#include <errno.h>
#include <stdint.h>

#include "../../check.h"
#include "util/util.h"

static void test_mib(void)
{
	uint64_t v = 7;
	CHECK(util_parse_mib("512", &v) == 0 && v == 512);       /* bare: MiB, as --memory always took */
	CHECK(util_parse_mib("1G", &v) == 0 && v == 1024);
	CHECK(util_parse_mib("1g", &v) == 0 && v == 1024);
	CHECK(util_parse_mib("1GiB", &v) == 0 && v == 1024);
	CHECK(util_parse_mib("1GB", &v) == 0 && v == 1024);
	CHECK(util_parse_mib("1536M", &v) == 0 && v == 1536);
	CHECK(util_parse_mib("2048K", &v) == 0 && v == 2);
	CHECK(util_parse_mib("1T", &v) == 0 && v == 1u << 20);
	CHECK(util_parse_mib("0", &v) == 0 && v == 0);           /* the caller's range refuses it */
	v = 7;
	CHECK(util_parse_mib("", &v) == -EINVAL);
	CHECK(util_parse_mib("1X", &v) == -EINVAL);
	CHECK(util_parse_mib("-1", &v) == -EINVAL);
	CHECK(util_parse_mib("-1G", &v) == -EINVAL);
	CHECK(util_parse_mib("+1G", &v) == -EINVAL);
	CHECK(util_parse_mib(" 1G", &v) == -EINVAL);
	CHECK(util_parse_mib("1G ", &v) == -EINVAL);
	CHECK(util_parse_mib("G", &v) == -EINVAL);
	CHECK(util_parse_mib("1.5G", &v) == -EINVAL);
	CHECK(util_parse_mib("1GiBB", &v) == -EINVAL);
	CHECK(util_parse_mib("100K", &v) == -EINVAL);            /* not a whole MiB */
	CHECK(util_parse_mib("1025K", &v) == -EINVAL);
	CHECK(util_parse_mib("99999999999999999999", &v) == -ERANGE);
	CHECK(util_parse_mib("99999999999T", &v) == -ERANGE);
	CHECK(util_parse_mib(NULL, &v) == -EINVAL);
	CHECK(v == 7); /* outputs only on success */
}

static void test_duration(void)
{
	uint64_t v = 7;
	CHECK(util_parse_duration("90", &v) == 0 && v == 90);   /* bare: seconds, as --timeout always took */
	CHECK(util_parse_duration("0", &v) == 0 && v == 0);
	CHECK(util_parse_duration("45s", &v) == 0 && v == 45);
	CHECK(util_parse_duration("10m", &v) == 0 && v == 600);
	CHECK(util_parse_duration("2h", &v) == 0 && v == 7200);
	CHECK(util_parse_duration("366d", &v) == 0 && v == 366u * 86400);
	v = 7;
	CHECK(util_parse_duration("", &v) == -EINVAL);
	CHECK(util_parse_duration("1X", &v) == -EINVAL);
	CHECK(util_parse_duration("-1", &v) == -EINVAL);
	CHECK(util_parse_duration("-1m", &v) == -EINVAL);
	CHECK(util_parse_duration("+5", &v) == -EINVAL);
	CHECK(util_parse_duration("m", &v) == -EINVAL);
	CHECK(util_parse_duration("10ms", &v) == -EINVAL);       /* no sub-second unit: not "10 minutes" */
	CHECK(util_parse_duration("10M", &v) == -EINVAL);        /* M is a size (MiB), not minutes */
	CHECK(util_parse_duration("1h30m", &v) == -EINVAL);
	CHECK(util_parse_duration("1.5h", &v) == -EINVAL);
	CHECK(util_parse_duration(" 5", &v) == -EINVAL);
	CHECK(util_parse_duration("5 ", &v) == -EINVAL);
	CHECK(util_parse_duration("99999999999999999999", &v) == -ERANGE);
	CHECK(util_parse_duration("18446744073709551615d", &v) == -ERANGE); /* UINT64_MAX days */
	CHECK(util_parse_duration("213503982334602d", &v) == -ERANGE);     /* just over UINT64_MAX s */
	CHECK(util_parse_duration(NULL, &v) == -EINVAL);
	CHECK(v == 7);
}

int main(void)
{
	test_mib();
	test_duration();
	return check_summary("util_parse");
}
