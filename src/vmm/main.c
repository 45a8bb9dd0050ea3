/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-vmm: the microVMM process. One VM per process; the library and `space vm-boot` exec it.
 *
 *   space-vmm boot --kernel IMG [--initrd F] [--cmdline S] [--disk FILE[:ro]]... [--cpus N]
 *                  [--rng] [--vsock CID:PATH]
 *                  [--memory MIB] [--timeout S] [--console-log FILE] [--quiet] [--no-seccomp]
 *   space-vmm acpi-dump DIR [--cpus N] [--disks K]
 *   space-vmm --version | --help
 *
 * Exit status of `boot` (the guest's outcome): see the VMM_STATUS_* values below and docs/vmm.md.
 * Errors go to stderr as "space-vmm: <reason>".
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/acpi.h"
#include "vmm/boot.h"
#include "vmm/sandbox.h"
#include "vmm/vmm.h"

enum {
	VMM_STATUS_POWEROFF = 0,     /* guest shut down (ACPI S5, debug exit 0) */
	VMM_STATUS_SETUP = 1,        /* could not start: bad image, missing file, no KVM, ... */
	VMM_STATUS_USAGE = 2,        /* bad command line */
	VMM_STATUS_RESET = 3,        /* guest asked for a reset (i8042, ACPI reset register) */
	VMM_STATUS_TRIPLE_FAULT = 4,
	VMM_STATUS_INTERNAL = 5,     /* KVM internal error, failed entry, unexpected exit */
	VMM_STATUS_TIMEOUT = 6,      /* --timeout elapsed */
	VMM_STATUS_GUEST_FAIL = 7,   /* guest wrote a non-zero code to the debug exit port */
};

#define MAX_DISKS 8

static const char usage_text[] =
	"usage: space-vmm boot --kernel IMG [--initrd F] [--cmdline S] [--disk FILE[:ro]]...\n"
	"                      [--rng] [--vsock CID:PATH]\n"
	"                      [--cpus N] [--memory MIB] [--timeout S] [--console-log FILE] [--quiet]\n"
	"                      [--no-seccomp]\n"
	"       space-vmm acpi-dump DIR [--cpus N] [--disks K]\n"
	"       space-vmm --version | --help\n";

static int usage(void)
{
	fputs(usage_text, stderr);
	return VMM_STATUS_USAGE;
}

static int help(void)
{
	fputs(usage_text, stdout);
	printf("\nboot runs the kernel (bzImage or x86_64 ELF) and streams its serial console to stdout.\n"
	       "Exit status: 0 guest powered off, 1 setup error, 2 usage, 3 guest reset, 4 triple fault,\n"
	       "5 KVM internal error, 6 timeout, 7 guest reported failure (debug exit port 0x501).\n");
	return 0;
}

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("space-vmm: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return status;
}

static int status_of(enum vm_exit_reason r)
{
	switch (r) {
	case VM_EXIT_POWEROFF: return VMM_STATUS_POWEROFF;
	case VM_EXIT_GUEST_FAILURE: return VMM_STATUS_GUEST_FAIL;
	case VM_EXIT_RESET: return VMM_STATUS_RESET;
	case VM_EXIT_TRIPLE_FAULT: return VMM_STATUS_TRIPLE_FAULT;
	case VM_EXIT_TIMEOUT: return VMM_STATUS_TIMEOUT;
	default: return VMM_STATUS_INTERNAL;
	}
}

static int cmd_boot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, 'k' },  { "initrd", required_argument, NULL, 'i' },
		{ "cmdline", required_argument, NULL, 'c' }, { "disk", required_argument, NULL, 'd' },
		{ "cpus", required_argument, NULL, 'p' },    { "memory", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' }, { "console-log", required_argument, NULL, 'l' },
		{ "quiet", no_argument, NULL, 'q' },         { "no-seccomp", no_argument, NULL, 'S' },
		{ "rng", no_argument, NULL, 'r' },           { "vsock", required_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	const char *kernel = NULL, *initrd = NULL, *cmdline = "console=ttyS0", *log_path = NULL;
	char *disks[MAX_DISKS];
	unsigned ndisks = 0;
	uint64_t cpus = 1, mem_mib = 256, timeout_s = 0;
	bool quiet = false, sandbox = true, rng = false;
	char *vsock = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k': kernel = optarg; break;
		case 'i': initrd = optarg; break;
		case 'c': cmdline = optarg; break;
		case 'l': log_path = optarg; break;
		case 'q': quiet = true; break;
		case 'S': sandbox = false; break;
		case 'r': rng = true; break;
		case 'v': vsock = optarg; break;
		case 'd':
			if (ndisks == MAX_DISKS)
				return fail(VMM_STATUS_USAGE, "at most %d disks", MAX_DISKS);
			disks[ndisks++] = optarg;
			break;
		case 'p':
			if (util_parse_uint(optarg, 1, VM_MAX_VCPUS, &cpus) < 0)
				return fail(VMM_STATUS_USAGE, "--cpus wants 1..%d", VM_MAX_VCPUS);
			break;
		case 'm':
			if (util_parse_uint(optarg, 16, 1u << 20, &mem_mib) < 0)
				return fail(VMM_STATUS_USAGE, "--memory wants MiB in 16..1048576");
			break;
		case 't':
			if (util_parse_uint(optarg, 0, 86400 * 365, &timeout_s) < 0)
				return fail(VMM_STATUS_USAGE, "--timeout wants seconds");
			break;
		default:
			return usage();
		}
	}
	if (!kernel || optind != argc)
		return usage();
	uint64_t vsock_cid = 0;
	const char *vsock_path = NULL;
	if (vsock) {
		char *colon = strchr(vsock, ':');
		if (!colon || colon[1] == '\0')
			return fail(VMM_STATUS_USAGE, "--vsock wants CID:PATH");
		*colon = '\0';
		if (util_parse_uint(vsock, 3, UINT32_MAX - 1, &vsock_cid) < 0)
			return fail(VMM_STATUS_USAGE, "--vsock CID must be 3..4294967294");
		vsock_path = colon + 1;
	}

	_cleanup_close_ int log_fd = -1;
	if (log_path) {
		log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (log_fd < 0)
			return fail(VMM_STATUS_SETUP, "cannot open console log %s: %m", log_path);
	}
	struct vm_config cfg = VM_CONFIG_INIT;
	cfg.cpus = (unsigned)cpus;
	cfg.mem_bytes = mem_mib << 20;
	cfg.console_fd = quiet ? -1 : STDOUT_FILENO;
	cfg.console_log_fd = log_fd;

	/* Check the image before touching KVM, so a bad file gets its own error on any host. */
	{
		_cleanup_free_ char *img = NULL;
		size_t len;
		int e = util_read_file(kernel, 512u << 20, &img, &len);
		if (e < 0)
			return fail(VMM_STATUS_SETUP, "cannot read kernel %s: %s", kernel, strerror(-e));
		struct kernel_image ki;
		char why[160];
		if (kernel_image_parse((const uint8_t *)img, len, &ki, why, sizeof(why)) < 0)
			return fail(VMM_STATUS_SETUP, "%s: %s", kernel, why);
	}

	struct vm *vm = NULL;
	char err[256];
	int r = vm_create(&cfg, &vm, err, sizeof(err));
	if (r < 0)
		return fail(VMM_STATUS_SETUP, "%s", err);
	for (unsigned i = 0; i < ndisks; i++) {
		char *path = disks[i];
		bool ro = false;
		size_t n = strlen(path);
		if (n > 3 && strcmp(path + n - 3, ":ro") == 0) {
			path[n - 3] = '\0';
			ro = true;
		}
		if ((r = vm_add_disk(vm, path, ro)) < 0)
			goto setup_fail;
	}
	if (rng && (r = vm_add_rng(vm)) < 0)
		goto setup_fail;
	if (vsock_path && (r = vm_add_vsock(vm, vsock_cid, vsock_path)) < 0)
		goto setup_fail;
	if ((r = vm_load_kernel(vm, kernel, initrd, cmdline)) < 0)
		goto setup_fail;
	/* Every resource is held now: from here on the process may only run this VM. */
	if (sandbox && (r = vmm_sandbox_apply()) < 0) {
		fail(VMM_STATUS_SETUP, "cannot install the seccomp filter: %s", strerror(-r));
		vm_destroy(vm);
		return VMM_STATUS_SETUP;
	}
	struct vm_outcome out;
	if ((r = vm_run(vm, timeout_s * 1000, &out)) < 0)
		goto setup_fail;
	int status = status_of(out.reason);
	if (status != VMM_STATUS_POWEROFF)
		fail(status, "%s", out.detail);
	vm_destroy(vm);
	return status;
setup_fail:
	fail(VMM_STATUS_SETUP, "%s", vm_error(vm));
	vm_destroy(vm);
	return VMM_STATUS_SETUP;
}

static int write_table(const char *dir, const char *name, const uint8_t *p, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.dat", dir, name);
	int r = util_write_file_atomic(path, p, len, 0644);
	if (r < 0)
		return fail(VMM_STATUS_SETUP, "cannot write %s: %s", path, strerror(-r));
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
		return fail(VMM_STATUS_SETUP, "cannot build ACPI tables: %s", strerror(-r));
	int e = util_mkdir_p(dir, 0755);
	if (e < 0)
		return fail(VMM_STATUS_SETUP, "cannot create %s: %s", dir, strerror(-e));
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
		return help();
	if (argc >= 2 && strcmp(argv[1], "boot") == 0)
		return cmd_boot(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "acpi-dump") == 0)
		return cmd_acpi_dump(argc - 1, argv + 1);
	return usage();
}
