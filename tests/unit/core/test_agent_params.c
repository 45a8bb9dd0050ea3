/* SPDX-License-Identifier: Apache-2.0 */
/* The space.* kernel parameters space-agent reads as a VM's /init (src/agent/init.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/init.h"

static int logged;

void agent_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	putchar('\n');
	logged++;
}

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL: %s: ", #c); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); fails++; } } while (0)

int main(void)
{
	struct vm_params p = { .port = 1024, .rootwait = 30 };
	snprintf(p.root, sizeof(p.root), "/dev/vda");
	int n = vm_params_parse("console=ttyS0 panic=-1 space.port=2000 space.lifetime=600 space.hostname=sb-1 "
				"space.root=/dev/vdb space.rootfstype=xfs space.rootwait=5 quiet",
				&p);
	CHECK(n == 6, "took %d", n);
	CHECK(p.port == 2000 && p.lifetime == 600 && p.rootwait == 5, "numbers %llu %llu %llu",
	      (unsigned long long)p.port, (unsigned long long)p.lifetime, (unsigned long long)p.rootwait);
	CHECK(!strcmp(p.hostname, "sb-1") && !strcmp(p.root, "/dev/vdb") && !strcmp(p.rootfstype, "xfs"),
	      "strings %s %s %s", p.hostname, p.root, p.rootfstype);

	/* Malformed values are reported and leave the field alone. */
	logged = 0;
	n = vm_params_parse("space.port=0 space.port=abc space.lifetime=-1 space.root=vda space.root=/etc/x/../ "
			    "space.hostname= space.bogus=1 space.port space.hostname=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
			    &p);
	CHECK(n == 0, "took %d malformed values", n);
	CHECK(logged == 8, "logged %d complaints", logged);
	CHECK(p.port == 2000 && p.lifetime == 600 && !strcmp(p.root, "/dev/vdb") && !strcmp(p.hostname, "sb-1"),
	      "fields changed by malformed values");
	CHECK(vm_params_parse("", &p) == 0 && vm_params_parse(NULL, &p) == 0, "empty command line");
	if (!fails)
		printf("agent params: all checks passed\n");
	return fails ? 1 : 0;
}
