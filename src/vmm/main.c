/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-vmm: the microVMM process. One VM per process; the library and `space vm-boot` exec it.
 *
 *   space-vmm boot|run ...     a guest: in the foreground, or as a sandbox's daemon (daemon.c, options.h)
 *   space-vmm acpi-dump DIR [--cpus N] [--disks K]
 *   space-vmm probe | seccomp-info | --describe-sandbox | --version | --help
 *
 * The usage text and the exit statuses are in options.{c,h} and docs/vmm.md. Errors go to stderr as
 * "space-vmm: <reason>".
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "util/util.h"
#include "vmm/acpi.h"
#include "vmm/daemon.h"
#include "vmm/probe.h"
#include "vmm/sandbox.h"
#include "vmm/vmm.h"

static int usage(void)
{
	fputs(vmm_usage_text, stderr);
	return VMM_STATUS_USAGE;
}

static int write_table(const char *dir, const char *name, const uint8_t *p, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.dat", dir, name);
	int r = util_write_file_atomic(path, p, len, 0644);
	if (r < 0)
		return vmm_fail(VMM_STATUS_SETUP, "cannot write %s: %s", path, strerror(-r));
	return 0;
}

static int cmd_acpi_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cpus", required_argument, NULL, 'p' }, { "disks", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t cpus = 1, disks = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p' && util_parse_uint(optarg, 1, VM_MAX_VCPUS, &cpus) == 0)
			continue;
		if (c == 'd' && util_parse_uint(optarg, 0, VM_MAX_MMIO_DEVS, &disks) == 0)
			continue;
		return usage();
	}
	if (optind + 1 != argc)
		return usage();
	const char *dir = argv[optind];
	struct acpi_config ac = { .cpus = (unsigned)cpus, .nmmio = (unsigned)disks };
	for (unsigned i = 0; i < disks; i++)
		ac.mmio[i] = (struct acpi_mmio_dev){ VM_MMIO_BASE + i * VM_MMIO_STRIDE, VM_MMIO_WINDOW,
						     VM_MMIO_FIRST_GSI + i };
	static uint8_t buf[0x20000];
	struct acpi_layout l;
	int r = acpi_build(&ac, buf, sizeof(buf), 0xe0000, &l);
	if (r < 0)
		return vmm_fail(VMM_STATUS_SETUP, "cannot build ACPI tables: %s", strerror(-r));
	int e = util_mkdir_p(dir, 0755);
	if (e < 0)
		return vmm_fail(VMM_STATUS_SETUP, "cannot create %s: %s", dir, strerror(-e));
	if (write_table(dir, "rsdp", buf + l.rsdp, l.rsdp_len) || write_table(dir, "xsdt", buf + l.xsdt, l.xsdt_len) ||
	    write_table(dir, "facp", buf + l.facp, l.facp_len) || write_table(dir, "apic", buf + l.apic, l.apic_len) ||
	    write_table(dir, "dsdt", buf + l.dsdt, l.dsdt_len))
		return VMM_STATUS_SETUP;
	return 0;
}

int main(int argc, char **argv)
{
	/* A reader of the console that goes away (`| head`) must not kill the VM: writes just fail. */
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		printf("space-vmm %s\n", SPACE_VERSION_STRING);
		return 0;
	}
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return vmm_help();
	if (argc >= 2 && (strcmp(argv[1], "boot") == 0 || strcmp(argv[1], "run") == 0))
		return vmm_run_main(argv[1][0] == 'b' ? VMM_VERB_BOOT : VMM_VERB_RUN, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "acpi-dump") == 0)
		return cmd_acpi_dump(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "probe") == 0)
		return vmm_probe_main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], "--describe-sandbox") == 0) {
		/* For `space doctor --verbose`: how `run` confines itself (src/vmm/jail.c, sandbox.c). */
		printf("{\"helper\":\"space-vmm\",\"uid\":\"own\",\"capabilities\":\"none\",\"no_new_privs\":true,"
		       "\"dumpable\":false,\"seccomp\":{");
		for (int role = 0; role < VMM_THREAD_ROLES; role++)
			printf("%s\"%s\":%zu", role ? "," : "", vmm_seccomp_role_name((enum vmm_thread_role)role),
			       vmm_seccomp_rule_count((enum vmm_thread_role)role));
		printf("},\"default_action\":\"kill process\"}\n");
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "seccomp-info") == 0) {
		/* The size of each thread role's allowlist, for `space doctor --verbose`. */
		printf("{");
		for (int role = 0; role < VMM_THREAD_ROLES; role++)
			printf("%s\"%s\":%zu", role ? "," : "", vmm_seccomp_role_name((enum vmm_thread_role)role),
			       vmm_seccomp_rule_count((enum vmm_thread_role)role));
		printf("}\n");
		return 0;
	}
	return usage();
}
