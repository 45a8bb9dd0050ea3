/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The machine space-vmm is asked to run (docs/vmm.md, "Command line"): a kernel to boot or a snapshot
 * to restore, vCPUs, RAM, and the devices, from the command-line spellings of both `boot` and `run`
 * (options.c) to a loaded VM (vmm_devspec_create_vm, called in the jail's setup step).
 *
 * Devices are placed in this order, whatever the order of the options: disks (in their own order), rng,
 * vsock, net. A restored VM gets the same kinds in the same order as the one that was saved.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VMM_MAX_DISKS 8

struct vm;

struct vmm_devspec {
	const char *kernel, *initrd, *cmdline; /* cmdline defaults to "console=ttyS0" */
	const char *restore;                   /* a snapshot to restore instead of a kernel to boot */
	uint64_t cpus, mem_mib;                /* ignored by a restore: the snapshot fixes them */
	struct {
		const char *path;
		bool ro;
	} disks[VMM_MAX_DISKS];
	unsigned ndisks;
	bool rng;
	uint64_t vsock_cid;     /* with vsock_path */
	const char *vsock_path; /* NULL: no vsock */
	const char *net_name;   /* a TAP opened (created if missing) in the VMM's network namespace */
	int net_fd;             /* or an open TAP (--net fd:N; not owned); -1: neither */
	bool have_mac;
	uint8_t mac[6];         /* when have_mac; else a random locally administered one */
};
#define VMM_DEVSPEC_INIT { .cmdline = "console=ttyS0", .cpus = 1, .mem_mib = 256, .net_fd = -1 }

/*
 * The option spellings. Each returns 0, or -EINVAL with a reason in err for a malformed value (a usage
 * error); vmm_devspec_set_net also -EBADF for an fd:N that is not a suitable TAP (a setup error).
 * Strings are kept, not copied: they must outlive the spec (argv does).
 */
int vmm_devspec_add_disk(struct vmm_devspec *d, char *arg, char *err, size_t errlen);   /* FILE[:ro] */
int vmm_devspec_set_vsock(struct vmm_devspec *d, char *arg, char *err, size_t errlen);  /* CID:PATH */
int vmm_devspec_set_net(struct vmm_devspec *d, const char *arg, char *err, size_t errlen); /* TAP|fd:N */
int vmm_devspec_set_mac(struct vmm_devspec *d, const char *arg, char *err, size_t errlen); /* unicast MAC */

/* Reads and validates the kernel image (when booting one), so that a bad file gets its own reason on any
 * host, before anything touches KVM. Returns 0 or -errno with the reason in err. */
int vmm_devspec_check_kernel(const struct vmm_devspec *d, char *err, size_t errlen);

/* Where the guest's serial console goes (struct vm_config's console fields; none owned). */
struct vmm_console {
	int fd;          /* -1: nowhere */
	int log_fd;      /* -1: none */
	int log_old_fd;  /* with log_max: the log's cap, 0 = uncapped (util/caplog.h) */
	uint64_t log_max;
};

/*
 * Creates the VM of d on kvm_fd (an open /dev/kvm, duplicated; -1: opened here): restores the snapshot,
 * or creates the VM and loads the kernel; opens the TAP named by net_name (here, so that it lands in the
 * caller's network namespace) and adds every device. Returns 0 with *ret set, or -errno with the reason
 * in err and nothing left behind.
 */
int vmm_devspec_create_vm(const struct vmm_devspec *d, const struct vmm_console *con, int kvm_fd,
			  struct vm **ret, char *err, size_t errlen);
