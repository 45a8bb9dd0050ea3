/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one command-line parser of the commands that run a guest (docs/vmm.md, "Command line"):
 * `space-vmm boot` is `space-vmm run` in the foreground, with the console on stdout (unless --quiet) and
 * --console-log, --control and --log optional, and the guest's outcome as its exit status. Both verbs take
 * every option; they differ only in what is required and in what they report (daemon.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/devspec.h"

#define VMM_MAX_BINDS 16

/* Exit statuses. `boot` reports the guest's outcome with all of them; `run` with 0 (powered off or
 * stopped), 1 (any other end, or a setup error) and 2 (usage). */
enum {
	VMM_STATUS_POWEROFF = 0,   /* guest shut down (ACPI S5, debug exit 0), or a `stop` request */
	VMM_STATUS_SETUP = 1,      /* could not start: bad image, missing file, no KVM, ... */
	VMM_STATUS_USAGE = 2,      /* bad command line */
	VMM_STATUS_RESET = 3,      /* guest asked for a reset (i8042, ACPI reset register) */
	VMM_STATUS_TRIPLE_FAULT = 4,
	VMM_STATUS_INTERNAL = 5,   /* KVM internal error, failed entry, unexpected exit */
	VMM_STATUS_TIMEOUT = 6,    /* --timeout elapsed */
	VMM_STATUS_GUEST_FAIL = 7, /* guest wrote a non-zero code to the debug exit port */
};

enum vmm_verb {
	VMM_VERB_BOOT, /* foreground; exit status = the guest's outcome */
	VMM_VERB_RUN,  /* the sandbox daemon: --control and --log required, detaches unless --foreground */
};

struct vmm_options {
	enum vmm_verb verb;
	struct vmm_devspec dev;
	const char *log;         /* --log: console and the VMM's lines, capped by log_max with FILE.1 */
	uint64_t log_max;
	const char *console_log; /* --console-log: the operator's own copy of the console, uncapped */
	bool quiet;              /* no console on stdout */
	const char *control;     /* --control SOCK, or NULL */
	const char *status;      /* --status FILE: why the VMM ended, written only by the VMM */
	int ready_fd;            /* -1: none */
	bool gate, foreground, seccomp;
	uint64_t timeout_s;      /* 0: none */
	/* the jail: all of root, uid and gid, or none */
	const char *jail_root;
	const char *binds[VMM_MAX_BINDS + 1]; /* NULL-terminated */
	unsigned nbinds;
	uid_t uid;
	gid_t gid;
	bool netns;
};

/* The usage text of every command (stderr on a usage error, stdout with --help). */
extern const char vmm_usage_text[];

/* Writes "space-vmm: <reason>\n" to stderr. Returns status. */
int vmm_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints the usage text and what the exit statuses mean on stdout. Returns 0. */
int vmm_help(void);

/*
 * Parses argv (argv[0] is the verb) into *o. Returns -1 to go on, or the status to exit with: 0 after
 * --help, VMM_STATUS_USAGE after a bad command line (a "space-vmm: <reason>" line or the usage text on
 * stderr), VMM_STATUS_SETUP for a --net fd:N that is not a suitable TAP. Nothing is opened.
 */
int vmm_options_parse(enum vmm_verb verb, int argc, char **argv, struct vmm_options *o);
