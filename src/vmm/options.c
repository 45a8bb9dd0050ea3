/* SPDX-License-Identifier: Apache-2.0 */
/* The command line of `space-vmm boot` and `space-vmm run`: one parser for both (see options.h). */
#include "vmm/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/caplog.h"
#include "util/util.h"
#include "vmm/vmm.h"

const char vmm_usage_text[] =
	"usage: space-vmm boot (--kernel IMG [--initrd F] [--cmdline S] | --restore SNAPSHOT)\n"
	"                      [--disk FILE[:ro]]... [--cpus N] [--memory MIB]\n"
	"                      [--rng] [--vsock CID:PATH] [--net TAP|fd:N [--mac MAC]]\n"
	"                      [--jail-root DIR --jail-uid N --jail-gid N [--jail-bind PATH]... [--netns]]\n"
	"                      [--timeout S] [--console-log FILE] [--quiet] [--no-seccomp]\n"
	"                      [--control SOCK] [--log FILE [--log-max BYTES]] [--status FILE]\n"
	"       space-vmm run  (the same) --control SOCK --log FILE\n"
	"                      [--ready-fd N [--gate]] [--foreground]   (the sandbox daemon)\n"
	"       space-vmm acpi-dump DIR [--cpus N] [--disks K]\n"
	"       space-vmm probe   (times guest ring-0 code; prints JSON)\n"
	"       space-vmm seccomp-info   (rules per thread role; prints JSON)\n"
	"       space-vmm --describe-sandbox   (uid, capabilities, seccomp rules; JSON for space doctor)\n"
	"       space-vmm --version | --help\n";

int vmm_help(void)
{
	fputs(vmm_usage_text, stdout);
	printf("\nboot runs the kernel (bzImage or x86_64 ELF) and streams its serial console to stdout; run is\n"
	       "the same VM as a daemon (detached unless --foreground) answering its --control socket.\n"
	       "Exit status of boot: 0 guest powered off, 1 setup error, 2 usage, 3 guest reset, 4 triple fault,\n"
	       "5 KVM internal error, 6 timeout, 7 guest reported failure (debug exit port 0x501).\n"
	       "Exit status of run: 0 guest powered off or stopped, 1 any other end or a setup error, 2 usage.\n");
	return 0;
}

int vmm_fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("space-vmm: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return status;
}

enum {
	OPT_KERNEL = 256, OPT_INITRD, OPT_CMDLINE, OPT_RESTORE, OPT_DISK, OPT_CPUS, OPT_MEMORY, OPT_RNG,
	OPT_VSOCK, OPT_NET, OPT_MAC, OPT_TIMEOUT, OPT_CONSOLE_LOG, OPT_QUIET, OPT_NO_SECCOMP, OPT_CONTROL,
	OPT_LOG, OPT_LOG_MAX, OPT_STATUS, OPT_READY_FD, OPT_GATE, OPT_FOREGROUND, OPT_JAIL_ROOT, OPT_JAIL_UID,
	OPT_JAIL_GID, OPT_JAIL_BIND, OPT_NETNS, OPT_HELP,
};

static const struct option options_table[] = {
	{ "kernel", required_argument, NULL, OPT_KERNEL }, { "initrd", required_argument, NULL, OPT_INITRD },
	{ "cmdline", required_argument, NULL, OPT_CMDLINE }, { "restore", required_argument, NULL, OPT_RESTORE },
	{ "disk", required_argument, NULL, OPT_DISK },     { "cpus", required_argument, NULL, OPT_CPUS },
	{ "memory", required_argument, NULL, OPT_MEMORY }, { "rng", no_argument, NULL, OPT_RNG },
	{ "vsock", required_argument, NULL, OPT_VSOCK },   { "net", required_argument, NULL, OPT_NET },
	{ "mac", required_argument, NULL, OPT_MAC },       { "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "console-log", required_argument, NULL, OPT_CONSOLE_LOG }, { "quiet", no_argument, NULL, OPT_QUIET },
	{ "no-seccomp", no_argument, NULL, OPT_NO_SECCOMP }, { "control", required_argument, NULL, OPT_CONTROL },
	{ "log", required_argument, NULL, OPT_LOG },       { "log-max", required_argument, NULL, OPT_LOG_MAX },
	{ "status", required_argument, NULL, OPT_STATUS }, { "ready-fd", required_argument, NULL, OPT_READY_FD },
	{ "gate", no_argument, NULL, OPT_GATE },           { "foreground", no_argument, NULL, OPT_FOREGROUND },
	{ "jail-root", required_argument, NULL, OPT_JAIL_ROOT }, { "jail-uid", required_argument, NULL, OPT_JAIL_UID },
	{ "jail-gid", required_argument, NULL, OPT_JAIL_GID }, { "jail-bind", required_argument, NULL, OPT_JAIL_BIND },
	{ "netns", no_argument, NULL, OPT_NETNS },         { "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

/* One option with an argument or a flag; returns -1 when taken, else the status to exit with. */
static int options_one(struct vmm_options *o, int c, char *arg, uint64_t *uid, uint64_t *gid)
{
	struct vmm_devspec *d = &o->dev;
	char err[160];
	uint64_t v;
	int r = 0;
	switch (c) {
	case OPT_KERNEL: d->kernel = arg; break;
	case OPT_INITRD: d->initrd = arg; break;
	case OPT_CMDLINE: d->cmdline = arg; break;
	case OPT_RESTORE: d->restore = arg; break;
	case OPT_RNG: d->rng = true; break;
	case OPT_CONSOLE_LOG: o->console_log = arg; break;
	case OPT_QUIET: o->quiet = true; break;
	case OPT_NO_SECCOMP: o->seccomp = false; break;
	case OPT_CONTROL: o->control = arg; break;
	case OPT_LOG: o->log = arg; break;
	case OPT_STATUS: o->status = arg; break;
	case OPT_GATE: o->gate = true; break;
	case OPT_FOREGROUND: o->foreground = true; break;
	case OPT_JAIL_ROOT: o->jail_root = arg; break;
	case OPT_NETNS: o->netns = true; break;
	case OPT_HELP: return vmm_help();
	case OPT_DISK: r = vmm_devspec_add_disk(d, arg, err, sizeof(err)); break;
	case OPT_VSOCK: r = vmm_devspec_set_vsock(d, arg, err, sizeof(err)); break;
	case OPT_NET: r = vmm_devspec_set_net(d, arg, err, sizeof(err)); break;
	case OPT_MAC: r = vmm_devspec_set_mac(d, arg, err, sizeof(err)); break;
	case OPT_CPUS:
		if (util_parse_uint(arg, 1, VM_MAX_VCPUS, &d->cpus) < 0)
			return vmm_fail(VMM_STATUS_USAGE, "--cpus wants 1..%d", VM_MAX_VCPUS);
		break;
	case OPT_MEMORY:
		/* `space vm-boot` hands its flags here: the CLI's units (a bare number is MiB; 1G). */
		if (util_parse_mib(arg, &d->mem_mib) < 0 || d->mem_mib < 16 || d->mem_mib > (1u << 20))
			return vmm_fail(VMM_STATUS_USAGE, "--memory wants 16M..1T (a bare number is MiB)");
		break;
	case OPT_TIMEOUT:
		if (util_parse_duration(arg, &o->timeout_s) < 0 || o->timeout_s > 86400 * 365)
			return vmm_fail(VMM_STATUS_USAGE, "--timeout wants 0..365d (a bare number is seconds; s, m, h, d)");
		break;
	case OPT_LOG_MAX:
		/* The guest writes the console: a log is always capped, within sane bounds, never "no cap". */
		if (util_parse_size(arg, &o->log_max) < 0 || o->log_max < CAPLOG_MIN_MAX || o->log_max > CAPLOG_MAX_MAX)
			return vmm_fail(VMM_STATUS_USAGE, "--log-max wants bytes in 8K..1T");
		break;
	case OPT_READY_FD:
		if (util_parse_uint(arg, 3, 1 << 20, &v) < 0)
			return vmm_fail(VMM_STATUS_USAGE, "--ready-fd wants a descriptor number >= 3");
		o->ready_fd = (int)v;
		break;
	case OPT_JAIL_UID:
	case OPT_JAIL_GID:
		if (util_parse_uint(arg, 1, UINT32_MAX - 1, c == OPT_JAIL_UID ? uid : gid) < 0)
			return vmm_fail(VMM_STATUS_USAGE, "--jail-uid/--jail-gid want a non-zero id");
		break;
	case OPT_JAIL_BIND:
		if (o->nbinds == VMM_MAX_BINDS)
			return vmm_fail(VMM_STATUS_USAGE, "at most %d --jail-bind", VMM_MAX_BINDS);
		o->binds[o->nbinds++] = arg;
		break;
	default:
		fputs(vmm_usage_text, stderr);
		return VMM_STATUS_USAGE;
	}
	if (r == -EINVAL)
		return vmm_fail(VMM_STATUS_USAGE, "%s", err);
	if (r < 0) {
		fprintf(stderr, "space-vmm: %s\n", err);
		return VMM_STATUS_SETUP;
	}
	return -1;
}

int vmm_options_parse(enum vmm_verb verb, int argc, char **argv, struct vmm_options *o)
{
	*o = (struct vmm_options){ .verb = verb, .dev = VMM_DEVSPEC_INIT, .log_max = CAPLOG_DEFAULT_MAX,
				   .ready_fd = -1, .seccomp = true, .foreground = verb == VMM_VERB_BOOT };
	uint64_t uid = 0, gid = 0;
	int c, r;
	while ((c = getopt_long(argc, argv, "", options_table, NULL)) != -1)
		if ((r = options_one(o, c, optarg, &uid, &gid)) >= 0)
			return r;
	if (!o->dev.kernel == !o->dev.restore || optind != argc) {
		fputs(vmm_usage_text, stderr); /* a kernel to boot or a snapshot to restore: one of them */
		return VMM_STATUS_USAGE;
	}
	bool jailed = o->jail_root != NULL;
	if (jailed != (uid != 0) || jailed != (gid != 0) || (!jailed && (o->nbinds || o->netns)))
		return vmm_fail(VMM_STATUS_USAGE, "--jail-root, --jail-uid and --jail-gid go together; "
				     "--jail-bind and --netns need them");
	o->uid = (uid_t)uid;
	o->gid = (gid_t)gid;
	if (verb == VMM_VERB_RUN && (!o->control || !o->log))
		return vmm_fail(VMM_STATUS_USAGE, "run needs --control SOCK and --log FILE");
	if (o->log && o->console_log)
		return vmm_fail(VMM_STATUS_USAGE, "--log and --console-log both name the console's file: give one");
	if (o->gate && o->ready_fd < 0)
		return vmm_fail(VMM_STATUS_USAGE, "--gate needs --ready-fd");
	return -1;
}
