/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket of space-vmm (docs/vmm.md, "Control protocol"): status, pause, resume, snapshot-fd,
 * snapshot PATH, stop. One request per connection, served one at a time by a control thread that never
 * enters KVM_RUN and narrows itself to the CONTROL seccomp role (sandbox.h) after each accept.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct vm;

struct vmm_control {
	int fd;              /* the listening socket (vmm_control_listen); not owned */
	struct vm *vm;
	uint64_t started_ns; /* for the uptime in `status` */
	uint64_t cpus, mem_mib;
	bool seccomp;        /* the filter will be in place: `snapshot PATH` (the VMM opens PATH) is refused */
};

/* A listening unix stream socket at path (mode 0600; a stale file there is replaced). Returns it or -errno. */
int vmm_control_listen(const char *path);

/*
 * Starts the control thread on c (which must outlive the process's run) with every signal blocked: it
 * must not take the vCPU kick signal. Call before the process filter, after the VM exists. Returns 0 or
 * -errno. The thread is never joined: the process exits under it.
 */
int vmm_control_start(struct vmm_control *c);
