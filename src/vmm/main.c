/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-vmm: the microVMM process. One VM per process; the library and `space vm-boot` exec it.
 *
 *   space-vmm boot --kernel IMG [--initrd F] [--cmdline S] [--disk FILE[:ro]]... [--cpus N]
 *                  [--rng] [--vsock CID:PATH] [--net TAP|fd:N [--mac MAC]]
 *                  [--jail-root DIR --jail-uid N --jail-gid N [--jail-bind PATH]... [--netns]]
 *                  [--memory MIB] [--timeout S] [--console-log FILE] [--quiet] [--no-seccomp]
 *   space-vmm boot --restore SNAPSHOT [the same device options as when it was taken] [--timeout S] ...
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
#include "devices/tap.h"
#include "vmm/jail.h"
#include "vmm/daemon.h"
#include "vmm/probe.h"
#include "vmm/sandbox.h"
#include "vmm/snapshot.h"
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
	"       space-vmm boot --restore SNAPSHOT [--disk FILE[:ro]]... [--rng] [--vsock CID:PATH] [...]\n"
	"                      [--rng] [--vsock CID:PATH] [--net TAP|fd:N [--mac MAC]]\n"
	"                      [--jail-root DIR --jail-uid N --jail-gid N [--jail-bind PATH]... [--netns]]\n"
	"                      [--cpus N] [--memory MIB] [--timeout S] [--console-log FILE] [--quiet]\n"
	"                      [--no-seccomp]\n"
	"       space-vmm run --kernel IMG --control SOCK --log FILE [...]   (sandbox daemon; run --help)\n"
	"       space-vmm acpi-dump DIR [--cpus N] [--disks K]\n"
	"       space-vmm probe   (times guest ring-0 code; prints JSON)\n"
	"       space-vmm seccomp-info   (rules per thread role; prints JSON)\n"
	"       space-vmm --describe-sandbox   (uid, capabilities, seccomp rules; JSON for space doctor)\n"
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

#define MAX_JAIL_BINDS 16

/* What `boot` was asked for; boot_setup() turns it into a loaded VM. */
struct boot_args {
	const char *kernel, *initrd, *cmdline;
	char *disks[MAX_DISKS];
	unsigned ndisks;
	bool rng;
	uint64_t vsock_cid;
	const char *vsock_path;
	const char *net;         /* TAP name, or NULL */
	int net_fd;              /* --net fd:N, or the TAP boot_setup opened; -1 = none */
	uint8_t mac[6];
	struct vm_config cfg;
	const char *restore;     /* --restore FILE: a snapshot instead of a kernel */
	struct vm *vm;
};

/* "aa:bb:cc:dd:ee:ff", a unicast address. */
static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;
	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6 ||
	    strlen(s) != 17 || (v[0] & 1))
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

/*
 * Every resource of the VM: TAP, KVM, guest RAM, devices, kernel. Runs before the sandbox (in the
 * jail's setup step when jailed, so a TAP is created in the jail's network namespace).
 */
static int boot_add_devices(struct vm *vm, void *userdata);

static int boot_setup(void *userdata, char *err, size_t errlen)
{
	struct boot_args *a = userdata;
	int r;
	if (a->net) {
		char ifname[32];
		a->net_fd = tap_open(a->net, ifname, sizeof(ifname));
		if (a->net_fd < 0) {
			snprintf(err, errlen, "cannot open TAP %s: %s", a->net, strerror(-a->net_fd));
			return a->net_fd;
		}
	}
	if (a->restore) {
		/* The devices come back in the same order through boot_add_devices. */
		/* boot's --console-log is the operator's own file, watched in the foreground: uncapped. */
		struct vm_restore_config rc = { .console_fd = a->cfg.console_fd, .console_log_fd = a->cfg.console_log_fd,
						.console_log_old_fd = -1, .console_log_max = 0,
						.kvm_fd = a->cfg.kvm_fd, .add_devices = boot_add_devices, .userdata = a };
		return vm_create_from_snapshot(a->restore, &rc, &a->vm, err, errlen);
	}
	if ((r = vm_create(&a->cfg, &a->vm, err, errlen)) < 0)
		return r;
	if ((r = boot_add_devices(a->vm, a)) < 0 || (r = vm_load_kernel(a->vm, a->kernel, a->initrd, a->cmdline)) < 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "%s", vm_error(a->vm));
	return r;
}

/* The devices of `boot`, in command-line order: disks, rng, vsock, net. */
static int boot_add_devices(struct vm *vm, void *userdata)
{
	struct boot_args *a = userdata;
	int r;
	for (unsigned i = 0; i < a->ndisks; i++) {
		char *path = a->disks[i];
		bool ro = false;
		size_t n = strlen(path);
		if (n > 3 && strcmp(path + n - 3, ":ro") == 0) {
			path[n - 3] = '\0';
			ro = true;
		}
		if ((r = vm_add_disk(vm, path, ro)) < 0)
			return r;
	}
	if ((a->rng && (r = vm_add_rng(vm)) < 0) ||
	    (a->vsock_path && (r = vm_add_vsock(vm, a->vsock_cid, a->vsock_path)) < 0) ||
	    (a->net_fd >= 0 && (r = vm_add_net(vm, a->net_fd, a->mac)) < 0))
		return r;
	return 0;
}

/* --net TAP or --net fd:N (an open TAP: IFF_TAP | IFF_NO_PI, no IFF_VNET_HDR). */
static int parse_net(const char *s, struct boot_args *a)
{
	if (strncmp(s, "fd:", 3) != 0) {
		a->net = s;
		return 0;
	}
	uint64_t fd;
	if (util_parse_uint(s + 3, 0, INT32_MAX, &fd) < 0)
		return fail(VMM_STATUS_USAGE, "--net fd:N wants a file descriptor number");
	int r = tap_check_fd((int)fd, NULL, 0);
	if (r < 0)
		return fail(VMM_STATUS_SETUP, "--net fd:%llu is not a TAP opened IFF_TAP|IFF_NO_PI without IFF_VNET_HDR",
			    (unsigned long long)fd);
	a->net_fd = (int)fd;
	return 0;
}

static int cmd_boot(int argc, char **argv)
{
	enum { O_NET = 256, O_MAC, O_JROOT, O_JUID, O_JGID, O_JBIND, O_NETNS, O_RESTORE };
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, 'k' },  { "initrd", required_argument, NULL, 'i' },
		{ "cmdline", required_argument, NULL, 'c' }, { "disk", required_argument, NULL, 'd' },
		{ "cpus", required_argument, NULL, 'p' },    { "memory", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' }, { "console-log", required_argument, NULL, 'l' },
		{ "quiet", no_argument, NULL, 'q' },         { "no-seccomp", no_argument, NULL, 'S' },
		{ "rng", no_argument, NULL, 'r' },           { "vsock", required_argument, NULL, 'v' },
		{ "net", required_argument, NULL, O_NET },   { "mac", required_argument, NULL, O_MAC },
		{ "jail-root", required_argument, NULL, O_JROOT }, { "jail-uid", required_argument, NULL, O_JUID },
		{ "jail-gid", required_argument, NULL, O_JGID },   { "jail-bind", required_argument, NULL, O_JBIND },
		{ "netns", no_argument, NULL, O_NETNS },
		{ "restore", required_argument, NULL, O_RESTORE },
		{ NULL, 0, NULL, 0 },
	};
	struct boot_args a = { .cmdline = "console=ttyS0", .net_fd = -1, .cfg = VM_CONFIG_INIT };
	const char *log_path = NULL;
	uint64_t cpus = 1, mem_mib = 256, timeout_s = 0, jail_uid = 0, jail_gid = 0;
	bool quiet = false, sandbox = true, have_mac = false;
	char *vsock = NULL;
	const char *jail_binds[MAX_JAIL_BINDS + 1] = { NULL };
	unsigned nbinds = 0;
	struct vmm_jail_cfg jail = { .max_files = 1024, .memlock_bytes = 0 };
	int c, e;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k': a.kernel = optarg; break;
		case 'i': a.initrd = optarg; break;
		case 'c': a.cmdline = optarg; break;
		case 'l': log_path = optarg; break;
		case 'q': quiet = true; break;
		case 'S': sandbox = false; break;
		case 'r': a.rng = true; break;
		case 'v': vsock = optarg; break;
		case O_NETNS: jail.new_netns = true; break;
		case O_JROOT: jail.root_dir = optarg; break;
		case O_RESTORE: a.restore = optarg; break;
		case O_NET:
			if ((e = parse_net(optarg, &a)) != 0)
				return e;
			break;
		case O_MAC:
			if (parse_mac(optarg, a.mac) < 0)
				return fail(VMM_STATUS_USAGE, "--mac wants a unicast aa:bb:cc:dd:ee:ff");
			have_mac = true;
			break;
		case O_JUID:
		case O_JGID:
			if (util_parse_uint(optarg, 1, UINT32_MAX - 1, c == O_JUID ? &jail_uid : &jail_gid) < 0)
				return fail(VMM_STATUS_USAGE, "--jail-uid/--jail-gid want a non-zero id");
			break;
		case O_JBIND:
			if (nbinds == MAX_JAIL_BINDS)
				return fail(VMM_STATUS_USAGE, "at most %d --jail-bind", MAX_JAIL_BINDS);
			jail_binds[nbinds++] = optarg;
			break;
		case 'd':
			if (a.ndisks == MAX_DISKS)
				return fail(VMM_STATUS_USAGE, "at most %d disks", MAX_DISKS);
			a.disks[a.ndisks++] = optarg;
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
	if (!a.kernel == !a.restore || optind != argc)
		return usage(); /* a kernel to boot or a snapshot to restore: one of them */
	if (vsock) {
		char *colon = strchr(vsock, ':');
		if (!colon || colon[1] == '\0')
			return fail(VMM_STATUS_USAGE, "--vsock wants CID:PATH");
		*colon = '\0';
		if (util_parse_uint(vsock, 3, UINT32_MAX - 1, &a.vsock_cid) < 0)
			return fail(VMM_STATUS_USAGE, "--vsock CID must be 3..4294967294");
		a.vsock_path = colon + 1;
	}
	bool jailed = jail.root_dir != NULL;
	if (jailed != (jail_uid != 0) || jailed != (jail_gid != 0) || (!jailed && (nbinds || jail.new_netns)))
		return fail(VMM_STATUS_USAGE, "--jail-root, --jail-uid and --jail-gid go together; "
					      "--jail-bind and --netns need them");
	if (!have_mac) {
		/* A random locally administered unicast address. */
		if (util_random_bytes(a.mac, sizeof(a.mac)) < 0)
			return fail(VMM_STATUS_SETUP, "cannot pick a MAC address");
		a.mac[0] = (uint8_t)((a.mac[0] & 0xfe) | 0x02);
	}

	_cleanup_close_ int log_fd = -1;
	if (log_path) {
		log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (log_fd < 0)
			return fail(VMM_STATUS_SETUP, "cannot open console log %s: %m", log_path);
	}
	a.cfg.cpus = (unsigned)cpus;
	a.cfg.mem_bytes = mem_mib << 20;
	a.cfg.console_fd = quiet ? -1 : STDOUT_FILENO;
	a.cfg.console_log_fd = log_fd;

	/* Check the image before touching KVM, so a bad file gets its own error on any host. */
	if (a.kernel) {
		_cleanup_free_ char *img = NULL;
		size_t len;
		int r = util_read_file(a.kernel, 512u << 20, &img, &len);
		if (r < 0)
			return fail(VMM_STATUS_SETUP, "cannot read kernel %s: %s", a.kernel, strerror(-r));
		struct kernel_image ki;
		char why[160];
		if (kernel_image_parse((const uint8_t *)img, len, &ki, why, sizeof(why)) < 0)
			return fail(VMM_STATUS_SETUP, "%s: %s", a.kernel, why);
	}

	char err[256] = "";
	int r;
	if (jailed) {
		jail.binds = jail_binds;
		jail.uid = (uid_t)jail_uid;
		jail.gid = (gid_t)jail_gid;
		jail.setup = boot_setup;
		jail.userdata = &a;
		/* Guest RAM is not locked; the limit only has to let glibc and KVM work. */
		jail.memlock_bytes = 8u << 20;
		r = vmm_jail_enter(&jail, err, sizeof(err));
	} else {
		r = boot_setup(&a, err, sizeof(err));
	}
	int status = VMM_STATUS_SETUP;
	if (r < 0) {
		fail(VMM_STATUS_SETUP, "%s", err);
		goto out;
	}
	/* Every resource is held now: from here on the process may only run this VM. */
	if (sandbox && (r = vmm_sandbox_apply()) < 0) {
		fail(VMM_STATUS_SETUP, "cannot install the seccomp filter: %s", strerror(-r));
		goto out;
	}
	struct vm_outcome out;
	if ((r = vm_run(a.vm, timeout_s * 1000, &out)) < 0) {
		fail(VMM_STATUS_SETUP, "%s", vm_error(a.vm));
		goto out;
	}
	status = status_of(out.reason);
	if (status != VMM_STATUS_POWEROFF)
		fail(status, "%s", out.detail);
out:
	vm_destroy(a.vm);
	if (a.net && a.net_fd >= 0)
		close(a.net_fd);
	return status;
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
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return vmm_daemon_main(argc - 1, argv + 1);
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
