/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Isolation back-ends behind one ops table. A sandbox's isolation ("vm": a space-vmm microVM,
 * core/vm_backend.c; "jail": namespaces on the host kernel, core/backend_jail.c) is chosen once, by name,
 * and from then on the lifecycle code (sandbox*.c, checkpoint.c, warm_pool.c, autosnap.c, uids.c) only
 * calls through the table: no other file of src/core decides anything on the isolation's name
 * (tests/unit/core_no_iso_branching.sh checks). A name this build does not know is refused (-EINVAL),
 * never treated as one of the others. Private to the library.
 *
 * Unless said otherwise, functions return 0 or -errno with the context's last error set.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/internal.h"
#include "util/cgroup.h"
#include "util/uidalloc.h"

struct agent_info;
struct net_policy_trust;
struct sandbox_row;

enum backend_kind {
	BACKEND_VM,   /* the default: a KVM microVM per sandbox */
	BACKEND_JAIL, /* the weaker boundary: never chosen silently */
};

/* The isolation of a state directory that never chose one (`space init --isolation`). */
#define BACKEND_DEFAULT BACKEND_VM

/*
 * What a back-end's start made, in the caller's pid namespace, for the sandbox row (pid, pid_start,
 * cgroup, metadata uid_base): plain data, usable by another process later, as the sandbox outlives its
 * creator. Both back-ends fill it; neither's private records reach the rest of the library.
 */
struct backend_proc {
	pid_t pid;                          /* the jail's PID 1, or the space-vmm daemon */
	uint64_t start_time;                /* /proc/PID/stat field 22: guards against pid reuse */
	uint32_t uid_base;                  /* jail: host uid of root inside (0: identity map); vm: the VMM's uid */
	char cgroup[UTIL_CGROUP_SPEC_MAX];  /* its cgroup spec (util/cgroup.h); "" = none */
};

struct backend_ops {
	enum backend_kind kind;
	const char *name;            /* in rows, options and messages: "vm", "jail" */
	const char *proc_name;       /* what runs a sandbox, in log lines: "space-vmm", "jail" */
	/* Its machine-wide host uid slot (core/uids.c): the VMM's single uid, or a jail's range. */
	enum uidalloc_kind uid_kind;
	const char *uid_owner;       /* the last word of the slot's owner text: "vmm", "jail" */
	const char *uid_what;        /* in "no free host uid <what>": "for space-vmm", "range" */
	const char *checkpoint_kind; /* what space_checkpoint_create makes: "full" (memory too) or "disk" */
	/* A row still "creating" whose creator died may have left this back-end's process running, found
	 * without the row's pid (the sandbox's cgroup follows from its id, util/stop.h): destroy always stops
	 * it now (both back-ends set this; kept for the table's readers). */
	bool stop_while_creating;
	/* A paused sandbox is resumed (best effort) before a restart stops it (a frozen jail then takes its
	 * SIGKILL at once; a VMM stops paused). */
	bool resume_before_restart;

	/* 0 when this host can run such sandboxes; else -ENODEV (or so) saying why and what to do. Fast. */
	int (*available)(space_ctx *ctx);
	/*
	 * Starts the sandbox of a row whose disk is in place (row->info.path/rootfs.ext4) and waits until its
	 * agent answers HELLO (*ai). restore: a memory snapshot (snapshot_find) to restore instead of a boot,
	 * after which the guest gets a fresh identity; only for a back-end with snapshot_find. Fills *ret. On
	 * failure nothing is left running (the runtime directory stays for its log).
	 */
	int (*start)(space_ctx *ctx, const struct sandbox_row *row, const char *hostname, uint32_t lifetime_s,
		     const char *restore, struct backend_proc *ret, struct agent_info *ai);
	/* Stops what the row records (pid, pid_start, cgroup, runtime_dir) and removes its cgroup. Fine on a
	 * stopped sandbox (idempotent). */
	int (*stop)(space_ctx *ctx, const struct sandbox_row *row);
	/* Pauses (vCPUs parked / cgroup frozen) or resumes the sandbox. */
	int (*pause)(space_ctx *ctx, const struct sandbox_row *row, bool pause);
	/* Whether the process the row records still runs (the same start time: no reused pid). */
	bool (*alive)(const struct sandbox_row *row);
	/*
	 * Saves the running or paused sandbox's memory and device state into its own subvolume
	 * (row->info.path), as the files snapshot_find finds (backend_snapshot_files_drop removes them); the
	 * sandbox is left running or paused as it was. NULL: this back-end has no memory snapshots (its
	 * checkpoints are of the disk alone, taken frozen).
	 */
	int (*snapshot)(space_ctx *ctx, const struct sandbox_row *row);
	/* Whether the subvolume dir carries a memory snapshot this back-end restores: 0 with its file in snap
	 * and the vCPUs and RAM it was taken with; -ENOENT if none; no context. NULL: never restores. */
	int (*snapshot_find)(const char *dir, char *snap, size_t len, uint32_t *ret_cpus, uint32_t *ret_memory_mib);
	/*
	 * After a restore or a stay in the warm pool, where siblings may share its RNG state: fresh entropy;
	 * the vm also sets the guest's clock, hostname and lifetime (0: none); a jail shares the host's clock
	 * and keeps its hostname.
	 */
	int (*refresh_identity)(space_ctx *ctx, const struct sandbox_row *row, const char *hostname,
				uint32_t lifetime_s);
	/* The agent's address ("unix:...", "vsock-uds:...") of a sandbox with this runtime directory. */
	void (*agent_addr)(const char *runtime_dir, char *buf, size_t len);
	/* Gives the sandbox whose network namespace is pid's its egress gateway with the policy (NULL: none)
	 * and trust (net/net.h net_sandbox_attach): the jail's eth0, the VM's TAP. */
	int (*attach_network)(space_ctx *ctx, const struct sandbox_row *row, pid_t pid, const char *policy,
			      const struct net_policy_trust *t);
	/* Why a sandbox whose process is gone ended, for its failure reason (escaped, one line). */
	void (*death_reason)(space_ctx *ctx, const struct sandbox_info *b, char *buf, size_t len);
	/* How many of the sandbox's processes the OOM killer has killed so far (its cgroup's counter), so an
	 * exec can tell an OOM kill from another SIGKILL; -EOPNOTSUPP when it cannot tell. NULL: never (a
	 * VM's guest kernel kills unseen by the host). */
	int (*oom_kills)(const struct sandbox_row *row, uint64_t *ret_count);
	/* The sandbox's disk: bytes used and its size (space_sandbox_usage's disk figures). No context. */
	int (*disk_usage)(const struct sandbox_row *row, uint64_t *ret_used, uint64_t *ret_total);
	/* 1 when the sandbox's disk writes wait for room in a full pool (the VM's space-vmm holds them:
	 * docs/vmm.md, "A full pool"), 0 when not, -errno when it cannot tell soon. NULL: never (a jail's
	 * disk fails instead). Asked at every reap: fast. */
	int (*disk_full)(const char *runtime_dir);
};

/* The host's view of a sandbox's disk image (row->info.path/rootfs.ext4): blocks allocated, apparent size. */
int backend_disk_image_usage(const struct sandbox_row *row, uint64_t *ret_used, uint64_t *ret_total);

/* The back-ends' tables (core/vm_backend.c, core/backend_jail.c). */
extern const struct backend_ops backend_vm_ops;
extern const struct backend_ops backend_jail_ops;

/* An isolation name to its kind: 0, or -EINVAL for a name this build does not know (no context). */
int backend_kind_parse(const char *name, enum backend_kind *ret);

/* THE back-end choice: the table of a kind (never NULL for a valid kind). */
const struct backend_ops *backend_of(enum backend_kind kind);

/* The back-end by isolation name; -EINVAL with "unknown isolation '<name>': use vm or jail". */
int backend_by_name(space_ctx *ctx, const char *name, const struct backend_ops **ret);

/* The back-end of a row; -EINVAL with a message naming the sandbox when its isolation is unknown. */
int backend_for_row(space_ctx *ctx, const struct sandbox_row *row, const struct backend_ops **ret);

/* The back-end of a listed sandbox, or NULL for an isolation this build does not know (no context). */
const struct backend_ops *backend_for_info(const struct sandbox_info *b);

/*
 * The back-end a create without an isolation gets: the state directory's choice (`space init
 * --isolation`), else BACKEND_DEFAULT. -EINVAL (with a message) if the stored name is unknown.
 */
int backend_default(space_ctx *ctx, struct store *s, const struct backend_ops **ret);

/* The back-end whose checkpoints are of this kind ("full": memory too; "disk"), or NULL. For a fork whose
 * source sandbox is gone. */
const struct backend_ops *backend_for_checkpoint_kind(const char *kind);

/* Removes the memory snapshot files a subvolume may carry (a clone must not keep a copy: restores map
 * the source's; a checkpoint taken, the live subvolume drops them). */
void backend_snapshot_files_drop(const char *dir);

/* Stops what a start just made (proc), before the row records it. Errors are dropped: for undo paths. */
void backend_stop_started(space_ctx *ctx, const struct backend_ops *ops, const struct sandbox_row *row,
			  const struct backend_proc *proc);
