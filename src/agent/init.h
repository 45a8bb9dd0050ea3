/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-agent as /init of a VM's initramfs (the archive src/core/initramfs.c writes): mounts proc,
 * sysfs and devtmpfs, reads the space.* parameters of /proc/cmdline, loads the modules listed in
 * /modules.order, waits for the root disk, mounts it and makes it the root. After it returns the agent
 * runs on the sandbox's own disk exactly as it would have started there.
 *
 * Kernel command line parameters (all optional):
 *   space.port=P          vsock port to serve (default: the --vsock-port value, 1024)
 *   space.lifetime=S      power off after S seconds
 *   space.hostname=H      the guest's hostname
 *   space.root=DEV        root disk (default /dev/vda), mounted ext4 read-write
 *   space.rootfstype=T    its filesystem type (default ext4)
 *   space.rootwait=S      how long to wait for DEV to appear (default 30 s)
 *   space.net=A/P,GW,MAC,MTU  eth0's address/prefix, default gateway, MAC and MTU (set after the switch)
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "proto/proto.h"

struct vm_params {
	uint64_t port;
	uint64_t lifetime; /* 0 = none */
	char hostname[PROTO_MAX_IDENT + 1];
	char root[64];
	char rootfstype[16];
	uint64_t rootwait;
	char net[80];
};

/* Parses the space.* parameters of a kernel command line into p (fields not named keep their values).
 * Malformed values are reported and ignored. Returns how many parameters were taken. */
int vm_params_parse(const char *cmdline, struct vm_params *p);

/*
 * The boot of a VM's /init, up to and including the switch to the root disk. Only for PID 1 inside an
 * initramfs (detected: / is a ramfs/tmpfs holding /modules.order); returns false without doing
 * anything otherwise (the agent was started from the root disk itself). A failure that leaves no usable
 * system is printed on the console and powers the VM off: this function then never returns.
 */
bool vm_init_boot(struct vm_params *p);
