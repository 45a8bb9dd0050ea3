/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libspace — disposable sandboxes for AI agents.
 *
 * A host program links libspace to create sandboxes in-process: each sandbox is a KVM microVM (or, where
 * hardware virtualization is not usable and the caller asks for it explicitly, a `jail`: namespaces,
 * seccomp and cgroups around a shared kernel — a weaker boundary), its root disk a btrfs copy-on-write
 * clone of a template, its state kept in SQLite under a state directory.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 *  - Functions returning int return 0 (or a non-negative count) on success and a negative errno-style
 *    code on failure. space_strerror() names the code; space_last_error() gives the detail of the
 *    calling thread's last failure on that context ("what failed: why"); every call clears it first.
 *  - Output parameters are named ret_* and are written only on success.
 *  - Strings passed in are copied; the caller keeps ownership. Objects returned through ret_* are owned
 *    by the caller and freed with the matching *_free() function; *_free(NULL) is a no-op.
 *  - Output structs start with uint32_t size, so later versions can add fields at their end:
 *     . Objects (the *_info structs holding strings, and every element of a list) are allocated by the
 *       library: size is the sizeof of the struct the library filled. Their strings are const char *
 *       owned by the object (never NULL; "" when empty) and go with it. A list is a NULL-terminated array
 *       of pointers to objects (plus its count), freed with its element type's *_list_free(); one object
 *       with its *_free(). No struct holding an inline string or a 4096-byte path is part of the ABI.
 *     . Records (fixed-size structs of numbers: space_exec_result, space_file_stat,
 *       space_template_warm_info, space_snapshot_policy, space_sandbox_usage) are the caller's: set size to the sizeof of the
 *       struct you were built with (their *_INIT macro does) before the call. The library writes at most
 *       size bytes and sets size to how many it wrote; a size below the struct's first version is
 *       refused with -EINVAL. Records the library passes to a callback have size set like objects.
 *    A program built against a later header reads a field only when size covers it
 *    (offsetof(struct, field) + sizeof(field) <= size); an older library leaves it out.
 *  - The object a call acts on is its first argument. A sandbox is named by its handle (space_sandbox *,
 *    from space_sandbox_create or space_sandbox_open, which checks it runs) in every call that acts on
 *    its processes, its agent or its files, and in the handle's own reads (id, info, log path). It is
 *    named by ctx and its id in the calls that must also work when it cannot be opened (failed, still
 *    being created, destroyed with its row kept): the store's records of it (status, log, snapshot
 *    policy) and its removal. Templates, checkpoints, secrets and the pool have no handles: ctx and the
 *    name or id. Getters are space_<object>_get_<what> (space_<object>_get for a lookup by name or id).
 *  - "pool" is the btrfs storage pool (space_pool_*); the sandboxes a template keeps ready ahead of time
 *    are its "warm pool" (space_warm_pool_*, space_template_set_warm_pool).
 *  - Option structs carry a version field first; initialize them with their *_INIT macro or their
 *    space_*_options_init(opts, VERSION) function (the safe defaults; zero means "none" or "the default"
 *    for every field of the current versions), so that later versions of the library can add fields
 *    without breaking callers. A struct of an older version keeps the meaning it had; version 0 (a struct
 *    nobody initialized) and a version newer than the linked library are refused with -EINVAL. Fields
 *    are only ever added at the end, with a new version number; a changed signature gets a new _v2 name.
 *
 * Thread safety: a space_ctx and the objects obtained from it may be used by one thread at a time.
 * Different contexts are independent and may be used concurrently, from several threads or several
 * processes sharing one state directory (the store serializes writers; every lifecycle change is one
 * transaction). space_last_error() may be called from any thread: each thread sees its own last error.
 *
 * Processes, fork and signals: the library never installs a signal handler, leaves the calling thread's
 * signal mask and the process umask as it found them, and never reaps children it did not start (it waits
 * only for its own, by pid: never wait(), waitpid(-1) or a SIGCHLD handler). Calls that start helpers (space-vmm, the jail's first
 * process, space-gateway, space-snapd, space-logcap, mkfs and friends) fork or posix_spawn a short-lived
 * child and wait for it before returning; the long-lived processes of a sandbox are detached (own session,
 * reparented away from the caller), so they never become the caller's zombies, never send it SIGCHLD after
 * the call returns, and outlive it. Callers may install a SIGCHLD handler, but while a library call runs
 * it must not reap children it does not know (no wait(), waitpid(-1, ...)), and SIGCHLD must not be
 * SIG_IGN nor SA_NOCLDWAIT (the library would lose its children's exit status and fail with -ECHILD).
 * Writes to a peer that hung up use MSG_NOSIGNAL: the library raises no SIGPIPE. After fork(), the child
 * must not use a space_ctx (or any object from it) made by the parent (its database connection and
 * descriptors are the parent's): create a new context in the child, or exec. The library registers no
 * pthread_atfork handlers, and all its descriptors are close-on-exec.
 */
#ifndef SPACE_H
#define SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SPACE_BUILDING_LIBRARY)
#define SPACE_API __attribute__((visibility("default")))
#else
#define SPACE_API
#endif

/* ---------------------------------------------------------------------------------------------------
 * Versions
 */
#define SPACE_VERSION_MAJOR 0
#define SPACE_VERSION_MINOR 1
#define SPACE_VERSION_PATCH 0
#define SPACE_VERSION_STRING "0.1.0"
/* Single number for comparisons: 0x00MMmmpp. */
#define SPACE_VERSION_NUMBER ((SPACE_VERSION_MAJOR << 16) | (SPACE_VERSION_MINOR << 8) | SPACE_VERSION_PATCH)

/* The version of the library actually linked, e.g. "0.1.0". Static string. The shared library's soname
 * is libspace.so.1: ABI 1, the one deliberate break (version 0.1); from then on fields and functions are only
 * added. */
SPACE_API const char *space_version(void);

/* ---------------------------------------------------------------------------------------------------
 * Errors
 *
 * Codes are negative errno values (-ENOENT, -EEXIST, ...). A few carry a libspace meaning:
 *   -ENOMEDIUM   the state directory has not been initialized (run `space init`)
 *   -EMEDIUMTYPE the pool is not on btrfs
 *   -EBUSY       the object is in use (a template with dependent sandboxes)
 */

/* Static, human-readable description of an error code (positive or negative). Never NULL. */
SPACE_API const char *space_strerror(int err);

/* ---------------------------------------------------------------------------------------------------
 * Context
 */
typedef struct space_ctx space_ctx;

enum space_log_level {
	SPACE_LOG_ERROR = 3,
	SPACE_LOG_WARNING = 4,
	SPACE_LOG_INFO = 6,
	SPACE_LOG_DEBUG = 7,
};

/* Receives the library's log lines (no trailing newline). The library never prints by itself. */
typedef void (*space_log_fn)(int level, const char *message, void *userdata);

/* Progress of long operations: a stage name, and done/total units (total 0 = unknown). */
typedef void (*space_progress_fn)(const char *stage, uint64_t done, uint64_t total, void *userdata);

/* Receives a process's output as it is produced: stream 1 = stdout, 2 = stderr. Return 0 to go on, or a
 * negative errno to stop (the process is then killed). */
typedef int (*space_output_fn)(int stream, const void *data, size_t len, void *userdata);

#define SPACE_CTX_OPTIONS_VERSION 1
struct space_ctx_options {
	uint32_t version;         /* SPACE_CTX_OPTIONS_VERSION */
	const char *state_dir;    /* NULL: $SPACE_STATE_DIR, else /var/lib/space */
	space_log_fn log;         /* NULL: no logging */
	void *log_userdata;
	int log_level;            /* highest level passed to log; 0 = SPACE_LOG_INFO */
	const char *libexec_dir;  /* where space-vmm and space-agent live; NULL: $SPACE_LIBEXEC_DIR, else
	                             the install location (individual $SPACE_VMM_PATH, $SPACE_AGENT_PATH win) */
};
#define SPACE_CTX_OPTIONS_INIT { .version = SPACE_CTX_OPTIONS_VERSION }

/*
 * The space_*_options_init() functions fill opts with the defaults of that version of the struct (the
 * same as its _INIT macro with that version): pass the SPACE_*_OPTIONS_VERSION your program was built
 * with. Only that version's fields are written (a program built against an older header has a smaller
 * struct). 0 or -EINVAL for version 0, a version newer than the library or a NULL opts.
 */
SPACE_API int space_ctx_options_init(struct space_ctx_options *opts, uint32_t version);

/*
 * Creates a context over a state directory. Touches nothing on disk: the store is opened on first use.
 * opts may be NULL for defaults. On success *ret_ctx is owned by the caller (space_ctx_free).
 */
SPACE_API int space_ctx_new(const struct space_ctx_options *opts, space_ctx **ret_ctx);

/* Frees the context. Sandboxes it created keep running (they outlive the process); see destroy. */
SPACE_API void space_ctx_free(space_ctx *ctx);

/*
 * Detail of the calling thread's last failure on ctx ("open store: database is locked"), or "". Every
 * call that takes ctx, a sandbox or a process of it clears it first, so after a failed call it says why
 * that call failed (after a successful one it is usually "", but may hold a failure the call recovered
 * from: read it only after a failure). Each thread sees its own: a call of another thread on the same ctx neither clears nor overwrites it
 * (kept for the 8 threads that used ctx most recently). May be called from any thread. The string is
 * the thread's own copy, valid until the thread's next call of space_last_error or space_ctx_last_error.
 */
SPACE_API const char *space_last_error(const space_ctx *ctx);

/* The same as space_last_error (its older name). */
SPACE_API const char *space_ctx_last_error(const space_ctx *ctx);

/* The state directory this context uses. Valid for the context's lifetime. */
SPACE_API const char *space_ctx_state_dir(const space_ctx *ctx);

/* ---------------------------------------------------------------------------------------------------
 * State directory and storage pool
 *
 * A state directory holds space.db (SQLite, WAL) and refers to a pool: a btrfs filesystem in which
 * templates, sandboxes and checkpoints are subvolumes, so a sandbox's disk is a copy-on-write snapshot
 * made in milliseconds whatever the template's size.
 */
#define SPACE_INIT_OPTIONS_VERSION 2 /* 2 added identity_map */
struct space_init_options {
	uint32_t version;         /* SPACE_INIT_OPTIONS_VERSION */
	const char *pool_path;    /* an existing directory on a btrfs filesystem, or NULL */
	uint64_t loop_pool_size;  /* if pool_path is NULL: create (or reuse) <state_dir>/pool.img of this many
	                             bytes, formatted btrfs, mounted at <state_dir>/pool; 0 = no loop pool */
	const char *isolation;    /* default isolation for new sandboxes: "vm" (NULL) or "jail" */
	space_progress_fn progress;
	void *progress_userdata;
	/* Version 2. Jails on a kernel that cannot idmap their rootfs are refused (the default). The operator
	 * may allow them to run with the identity uid map instead: root inside is then host uid 0 (without
	 * host capabilities), a weaker boundary, warned about at every create and by space_doctor. One of
	 * SPACE_IDENTITY_MAP_*; 0 leaves the state directory's setting as it is. */
	int identity_map;
};
#define SPACE_IDENTITY_MAP_ALLOW 1
#define SPACE_IDENTITY_MAP_REFUSE (-1)
#define SPACE_INIT_OPTIONS_INIT { .version = SPACE_INIT_OPTIONS_VERSION }
SPACE_API int space_init_options_init(struct space_init_options *opts, uint32_t version);

/*
 * Prepares the state directory: creates it, the store (or migrates an older schema), and the pool.
 * Idempotent: on an initialized state directory it checks the pool, re-mounts a loop pool if needed and
 * applies changed settings. A pool that is not btrfs fails with -EMEDIUMTYPE and a message with the fix.
 */
SPACE_API int space_init(space_ctx *ctx, const struct space_init_options *opts);

/* An object (see Conventions): free with space_pool_info_free(). */
struct space_pool_info {
	uint32_t size;            /* sizeof(struct space_pool_info) as the library filled it */
	const char *path;         /* pool root */
	const char *loop_image;   /* backing image of a loop pool, "" otherwise */
	const char *isolation;    /* default isolation of new sandboxes: "vm" or "jail" */
	uint64_t total_bytes;     /* filesystem size */
	uint64_t free_bytes;      /* available to unprivileged writers */
	bool mounted;
	/* Since pool accounting (read them only when size covers them): */
	uint64_t used_bytes;      /* written on the filesystem (statvfs: total minus free blocks). btrfs shares
	                             extents between snapshots and keeps metadata apart, so statvfs's used and
	                             free bytes are an approximation there */
	uint64_t promised_bytes;  /* what the sandboxes' disks could grow to: the sum of each sandbox's disk
	                             image's apparent size (rootfs.ext4), however little of it is written; more
	                             than free_bytes means a pool that sandboxes can fill (their writes then
	                             fail with ENOSPC) */
	uint32_t sandbox_disks;   /* how many sandbox disks promised_bytes counts */
};

/* 1 if the state directory lets jails run with the identity uid map where idmapped mounts fail
 * (space_init_options.identity_map), 0 if it refuses them (the default), or -errno. */
SPACE_API int space_identity_map_allowed(space_ctx *ctx);

/* Reports where the pool is and how full. Re-mounts a loop pool that is not mounted. *ret_info is the
 * caller's: space_pool_info_free(). */
SPACE_API int space_pool_get_info(space_ctx *ctx, struct space_pool_info **ret_info);
SPACE_API void space_pool_info_free(struct space_pool_info *info);

/* Unmounts a loop pool (its loop device is released). Nothing else changes; the next use re-mounts it.
 * Returns -EBUSY while sandboxes are running. A pool on an existing btrfs path is left alone. */
SPACE_API int space_pool_unmount(space_ctx *ctx);

/* ---------------------------------------------------------------------------------------------------
 * Host checks
 *
 * space_doctor() reports what this host can do: /dev/kvm access, whether guest kernel code runs natively
 * or is emulated (timed in a throwaway VM: a few tens of milliseconds), the helpers, a guest kernel, the
 * pool, loop devices, namespaces, seccomp, Landlock, TAP and cgroups. The result is a JSON document:
 *   {"checks":[{"name":"kvm","status":"ok"|"warn"|"fail","detail":"...","fix":"..."},...],
 *    "vm":{"usable":true,"summary":"..."},"jail":{"usable":true,"summary":"..."}}
 * which the caller frees with free(). Works on a state directory that was never initialized (the pool
 * check then fails, saying to run space_init).
 */
#define SPACE_DOCTOR_VERBOSE 1u  /* also the size of space-vmm's seccomp allowlists */
SPACE_API int space_doctor(space_ctx *ctx, unsigned flags, char **ret_json);

/* ---------------------------------------------------------------------------------------------------
 * Templates
 *
 * A template is a read-only root disk image (rootfs.ext4) plus optionally a kernel and an initrd, in a
 * subvolume of the pool. Sandboxes are copy-on-write snapshots of it.
 */
#define SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION 3 /* 2 added modules_dir, 3 image and force */
struct space_template_import_options {
	uint32_t version;         /* SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION */
	const char *name;         /* 1..63 chars of [A-Za-z0-9._-], not starting with '.' or '-' */
	const char *rootfs;       /* a directory tree, a tarball (plain, gz, xz, zst, bz2) or an ext4 image; one that
	                             looks like a container image (manifest.json, oci-layout or index.json at its
	                             top, no etc/) is imported as one (version 3; before: refused). NULL with image */
	const char *kernel;       /* optional: vmlinux or bzImage for VM sandboxes */
	const char *initrd;       /* optional */
	uint64_t size_bytes;      /* rootfs.ext4 size; 0 = content size plus headroom (at least 64 MiB) */
	space_progress_fn progress;
	void *progress_userdata;
	/* The modules directory of kernel (its lib/modules/<release>, with modules.dep and modules.builtin).
	 * The modules a VM sandbox needs (virtio-mmio, virtio-blk, vsock, ext4 and their dependencies) are
	 * copied, decompressed, into the template's modules/ and put in its initramfs. Needs kernel. NULL: the
	 * kernel has them built in, or /lib/modules/<release> of the host has them. */
	const char *modules_dir;
	/* Version 3. A container image instead of rootfs: an OCI image layout (a directory, or a tar of one as
	 * `skopeo copy ... oci-archive:` writes it) or a `docker save` archive (legacy or OCI manifest.json).
	 * A host path: a program serving others takes the bytes itself (space serve: an upload, capped) and
	 * never lets a caller name a path. There is no registry pull: a reference such as docker://debian or
	 * debian:12 is refused, and the message says how to make a layout on a machine that reaches a
	 * registry. The index's linux/amd64 image is taken; every document and layer is checked against its
	 * digest; the layers are applied in order (whiteouts, opaque directories, hard links, symlinks,
	 * ownership, set-id bits, device nodes, xattrs and file capabilities kept inside the image) by a
	 * confined helper, space-unpack, that writes only into the new rootfs.ext4. The config's Env,
	 * WorkingDir and User become the defaults of every process in the template's sandboxes; Entrypoint and
	 * Cmd are recorded (space_template_info.image_config). Importing an image whose config digest a
	 * template already has reads no layer: the new template shares that one's disk (copy-on-write), and
	 * importing it again under the same name is 0 with nothing done. progress gets stage "layer N/M
	 * sha256:...: verify" / ": apply" with the layer's bytes done and total. */
	const char *image;
	/* Version 3. Import a root file system that has no /bin/sh all the same (without it, such a rootfs is
	 * refused: most likely not a root file system at all). */
	bool force;
};
#define SPACE_TEMPLATE_IMPORT_OPTIONS_INIT { .version = SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION }
SPACE_API int space_template_import_options_init(struct space_template_import_options *opts, uint32_t version);

/* Imports a template. On any failure nothing of it remains (no subvolume, no row). -EEXIST if the name
 * is taken (by another image, for an image import), -EINVAL for a bad name, a rootfs that is neither
 * directory, tarball nor ext4 image, one without /bin/sh (unless force) or an image that cannot be read
 * (the message says why), -ENOEXEC for an image of another platform than linux/amd64, -EBADMSG for a
 * document or layer that does not match its digest, -EPERM for a layer that tries to write outside the
 * root file system ("..": refused, never clamped). */
SPACE_API int space_template_import(space_ctx *ctx, const struct space_template_import_options *opts);

#define SPACE_TEMPLATE_EXPORT_OPTIONS_VERSION 1
struct space_template_export_options {
	uint32_t version;         /* SPACE_TEMPLATE_EXPORT_OPTIONS_VERSION */
	int fd;                   /* where the archive is written, from its current position (a file, a pipe, a
	                             socket); not closed. Required: 0 is refused (a zero-filled struct would write
	                             to stdin) */
	const char *format;       /* "rootfs" (NULL): a tar of the tree, for space_template_import's rootfs;
	                             "oci": an OCI image archive (one layer, uncompressed) whose config carries
	                             the template's image defaults (env, working directory, user, entrypoint,
	                             cmd, labels), for space_template_import's image */
	space_progress_fn progress;
	void *progress_userdata;
};
#define SPACE_TEMPLATE_EXPORT_OPTIONS_INIT { .version = SPACE_TEMPLATE_EXPORT_OPTIONS_VERSION }
SPACE_API int space_template_export_options_init(struct space_template_export_options *opts, uint32_t version);

/*
 * Writes template name's root file system to opts->fd as an archive that space_template_import takes on
 * another host: the whole tree (ownership, permission and set-id bits, device nodes, hard links, symlinks,
 * xattrs; mkfs's lost+found left out), read by the confined helper space-unpack (a template's disk may be a
 * sandbox's work). Neither a kernel, initrd or modules nor a booted memory snapshot travel with it: the
 * importing host gives its own kernel (a snapshot is tied to the host and VMM that took it; take one again
 * there). On failure bytes may have been written to fd: write into a temporary file. -ENOENT for an unknown
 * template, -EINVAL for an unknown format or a bad fd.
 */
SPACE_API int space_template_export(space_ctx *ctx, const char *name, const struct space_template_export_options *opts);

#define SPACE_TEMPLATE_SEND_OPTIONS_VERSION 1
struct space_template_send_options {
	uint32_t version;         /* SPACE_TEMPLATE_SEND_OPTIONS_VERSION */
	int fd;                   /* where the stream is written (a file, a pipe, a socket); not closed. Required:
	                             0 is refused */
	const char *parent;       /* a template the receiving host has (received from here or from the same
	                             origin): only what differs from it is sent. NULL: see receiver_ids */
	const char *const *receiver_ids; /* with parent NULL: the ids (space_template_info's id) of the templates
	                             the receiving host has, NULL-terminated: of the local templates with one of
	                             these ids, the one whose disk shares the most data with name's becomes the
	                             parent. NULL, or none sharing any: the whole template */
	space_progress_fn progress;
	void *progress_userdata;
};
#define SPACE_TEMPLATE_SEND_OPTIONS_INIT { .version = SPACE_TEMPLATE_SEND_OPTIONS_VERSION }

struct space_template_send_info {
	char parent[64];          /* the template it was sent against; "" when whole */
	char digest[72];          /* "sha256:..." of its files, as the header says */
	uint64_t stream_bytes;    /* written to fd */
};
SPACE_API int space_template_send_options_init(struct space_template_send_options *opts, uint32_t version);

/*
 * Writes template name to opts->fd as a template stream that space_template_receive takes on another host:
 * a header (the template's identity, its parent's, the digest of its files, its image defaults) and a btrfs
 * send stream of its subvolume made by the kernel (version 1; incremental against opts->parent), less what
 * belongs to this host: the booted memory snapshot and the jails' copy of the tree (the receiver makes its
 * own). Needs root (the kernel's send). On failure bytes may have been written to fd. -ENOENT for an
 * unknown template or parent, -EINVAL for a bad fd or parent == name. ret (may be NULL): what was sent.
 */
SPACE_API int space_template_send(space_ctx *ctx, const char *name, const struct space_template_send_options *opts,
				  struct space_template_send_info *ret);

#define SPACE_TEMPLATE_RECEIVE_OPTIONS_VERSION 1
struct space_template_receive_options {
	uint32_t version;         /* SPACE_TEMPLATE_RECEIVE_OPTIONS_VERSION */
	int fd;                   /* the stream, read from its start to its end; not closed. Required */
	const char *name;         /* the template to make; NULL: the name it was sent as */
	uint64_t max_bytes;       /* at most this much data (0: the pool's free space) */
	space_progress_fn progress;
	void *progress_userdata;
};
#define SPACE_TEMPLATE_RECEIVE_OPTIONS_INIT { .version = SPACE_TEMPLATE_RECEIVE_OPTIONS_VERSION }
SPACE_API int space_template_receive_options_init(struct space_template_receive_options *opts, uint32_t version);

struct space_template_receive_info {
	char name[64];            /* the template made */
	char parent[64];          /* the local template an incremental stream was applied to; "" for a whole one */
	char digest[72];          /* "sha256:..." of its files, checked against the sender's */
	uint64_t stream_bytes;    /* read from fd */
	uint64_t data_bytes;      /* file data written or cloned */
	uint64_t entries;         /* files, directories and links made */
};

/*
 * Makes a template from a stream of space_template_send. The stream is hostile input: its header is
 * bounded and checked here; the btrfs stream is applied by the confined space-unpack (no host privilege,
 * chrooted into a quarantine subvolume, every command checked first) into a new subvolume, or into a
 * snapshot of the local template whose identity the header names as parent; then the digest of the files
 * made must equal the sender's, and only then is the template committed (a jails' tree made where the
 * pool gives them one). Nothing is left on failure. -EEXIST for a taken name, -ENOENT when the parent is
 * not here (send it whole), -EBADMSG for a malformed stream or a digest that differs.
 */
SPACE_API int space_template_receive(space_ctx *ctx, const struct space_template_receive_options *opts,
				     struct space_template_receive_info *ret);

#define SPACE_TEMPLATE_BUILD_OPTIONS_VERSION 1
struct space_template_build_options {
	uint32_t version;         /* SPACE_TEMPLATE_BUILD_OPTIONS_VERSION */
	const char *name;         /* the template to make (replaced when it exists: not while sandboxes or
	                             checkpoints use it) */
	const char *dockerfile;   /* path of the Dockerfile */
	const char *context;      /* the build context directory; NULL: the Dockerfile's directory. COPY and ADD
	                             read only from it (symlinks are followed as if it were the root; ".." above
	                             it is refused), leaving out what its .dockerignore names */
	const char *const *build_args; /* "NAME=VALUE" for ARG, NULL-terminated; may be NULL */
	bool no_cache;            /* run every step again (the results still fill the cache) */
	const char *isolation;    /* of the sandboxes RUN runs in: "jail" or "vm"; NULL: the state dir's default */
	const char *network_policy; /* their egress policy (as space_sandbox_options.network_policy); NULL: none */
	bool network_policy_trusted;
	uint32_t cpus, memory_mib; /* of those sandboxes; 0: the defaults */
	space_progress_fn progress; /* stage "step N/M (line L): INSTRUCTION ..." (", cached" when the cache had it) */
	void *progress_userdata;
	space_output_fn output;   /* what RUN's commands write (stream 1, 2); NULL: dropped */
	void *output_userdata;
	const char *context_archive; /* instead of context: a tar (plain, gzip, zstd) holding the context, taken
	                             as it is (no .dockerignore: a client leaves out what it names); dockerfile is
	                             then a path inside it (NULL: "Dockerfile"). It is made a file system by
	                             space-unpack, never extracted on the host; COPY takes named sources from it
	                             (owned by root unless --chown; no wildcards, no ADD) */
};
#define SPACE_TEMPLATE_BUILD_OPTIONS_INIT { .version = SPACE_TEMPLATE_BUILD_OPTIONS_VERSION }
SPACE_API int space_template_build_options_init(struct space_template_build_options *opts, uint32_t version);

/*
 * Builds a template from a Dockerfile (docs/templates.md): FROM a template, an earlier stage (FROM x AS
 * name; COPY --from=name), an image (an OCI layout or docker save archive path) or scratch; RUN in a
 * sandbox of the step's disk (a jail or a VM; no egress unless network_policy says); COPY and ADD from the
 * context (ADD extracts local tar archives; no URLs), applied by space-unpack; ENV, WORKDIR, USER, ARG,
 * LABEL, ENTRYPOINT, CMD. Every other instruction is refused with its line number before anything runs.
 * Each step's result is cached (a read-only btrfs snapshot of the disk, keyed by its parent's key and
 * the instruction, with the copied files' contents), so a changed line reruns from that line on. A step
 * that fails leaves no template: -ECANCELED with "line N: ...: exit status S" (RUN's output went to
 * output). The result is a normal template (its config digest: the build's final key), whose sandboxes
 * get the Dockerfile's ENV, WORKDIR and USER like an image's.
 */
SPACE_API int space_template_build(space_ctx *ctx, const struct space_template_build_options *opts);

/* An object (see Conventions). */
struct space_template_info {
	uint32_t size;            /* sizeof(struct space_template_info) as the library filled it */
	const char *name;
	const char *path;         /* the template's subvolume */
	uint64_t rootfs_bytes;    /* size of rootfs.ext4 */
	bool has_kernel;
	bool has_initrd;
	int64_t created_ms;       /* Unix time in milliseconds */
	uint32_t sandboxes;       /* sandboxes (not destroyed) made from it */
	uint32_t checkpoints;     /* checkpoints that depend on it */
	/* Since templates from images (read them only when size covers them): */
	const char *image_digest; /* the image config's digest, "sha256:<64 hex>"; "" for a template not made
	                             from an image */
	const char *image_config; /* what the image gives processes, a JSON object: "env" (array of KEY=VALUE),
	                             "working_dir", "user" (as the image says) with "uid", "gid", "home" (as
	                             the image's /etc/passwd resolved it), "entrypoint", "cmd" (arrays; absent:
	                             none), "labels" (object), "os", "architecture", "format" ("oci-layout",
	                             "oci-archive", "docker-archive"), "ref" (its name there, if any); "" for a
	                             template not made from an image. Sandboxes of the template get env, the
	                             working directory and the user as their processes' defaults (an exec's own
	                             env entries, cwd, and uid/gid with SPACE_EXEC_USER, win); entrypoint and cmd
	                             are for callers that run the image's command (`space run --template NAME`
	                             without one): space_sandbox_exec never adds them. */
	/* Since template streams (read it only when size covers it): */
	const char *id;           /* the template's identity, a uuid: the same on every host it reached through
	                             space_template_send and space_template_receive (a stream names its parent
	                             by it); "" when it cannot be read */
};

/* Lists templates sorted by name: *ret_list is a NULL-terminated array of *ret_count objects (ret_count
 * may be NULL), freed with space_template_info_list_free(). */
SPACE_API int space_template_list(space_ctx *ctx, struct space_template_info ***ret_list, size_t *ret_count);
SPACE_API void space_template_info_list_free(struct space_template_info **list);

/* Looks up one template; -ENOENT if there is none of that name. *ret_info: space_template_info_free(). */
SPACE_API int space_template_get(space_ctx *ctx, const char *name, struct space_template_info **ret_info);
SPACE_API void space_template_info_free(struct space_template_info *info);

/* Removes a template. -EBUSY while a sandbox or checkpoint depends on it, unless force is set (then the
 * template's own subvolume goes; dependent sandboxes keep their own copy-on-write disks). */
SPACE_API int space_template_remove(space_ctx *ctx, const char *name, bool force);

/* ---------------------------------------------------------------------------------------------------
 * Sandboxes (listing; the lifecycle functions are declared with their capability)
 */
enum space_sandbox_status {
	SPACE_SANDBOX_CREATING = 0,
	SPACE_SANDBOX_RUNNING,
	SPACE_SANDBOX_PAUSED,
	SPACE_SANDBOX_STOPPED,
	SPACE_SANDBOX_FAILED,
	SPACE_SANDBOX_DESTROYED,
};

/* "creating", "running", ... Static string; "unknown" for values outside the enum. */
SPACE_API const char *space_sandbox_status_name(enum space_sandbox_status status);

/* An object (see Conventions). */
struct space_sandbox_info {
	uint32_t size;            /* sizeof(struct space_sandbox_info) as the library filled it */
	const char *id;           /* "sb-" + 16 base32 characters */
	const char *template_name;
	const char *isolation;    /* "vm" or "jail" */
	enum space_sandbox_status status;
	const char *reason;       /* why it failed or stopped, "" otherwise */
	int32_t pid;              /* the sandbox's host process (space-vmm, or the jail's PID 1); 0 if none */
	uint32_t cpus;
	uint32_t memory_mib;
	int64_t created_ms;
	int64_t updated_ms;
	int64_t expires_ms;       /* 0 = no lifetime limit */
	const char *path;         /* the sandbox's subvolume */
};

/* Lists sandboxes that are not destroyed, oldest first. Writes nothing: a sandbox whose process is gone
 * is shown failed (with the reason), as space_sandbox_reap() would mark it, and one past its lifetime is
 * left out, so the listing tells the truth after a crash of whatever created them. A pid recorded in
 * another pid namespace is not judged: such a sandbox is shown as stored. Call space_sandbox_reap()
 * first to record those changes and reclaim what they leave. *ret_list is a NULL-terminated array of
 * *ret_count objects (ret_count may be NULL), freed with space_sandbox_info_list_free(). */
SPACE_API int space_sandbox_list(space_ctx *ctx, struct space_sandbox_info ***ret_list, size_t *ret_count);
SPACE_API void space_sandbox_info_list_free(struct space_sandbox_info **list);

/* ---------------------------------------------------------------------------------------------------
 * Sandbox lifecycle
 *
 * A sandbox is created from a template (its disk is a copy-on-write snapshot of the template's), runs
 * space-agent as PID 1 behind the isolation boundary, and lives until it is destroyed, its lifetime ends,
 * or its process dies. It outlives the process that created it: any process using the same state
 * directory can open it by id. A space_sandbox handle is only a reference: freeing it leaves the sandbox
 * running; space_sandbox_destroy() ends it.
 */
typedef struct space_sandbox space_sandbox;

/* The longest lifetime a sandbox takes, in seconds (366 days): timeout_s, space_sandbox_set_timeout and
 * space_checkpoint_fork's timeout_s refuse more with -EINVAL; the CLI and `space serve`'s APIs use the same limit. */
#define SPACE_TIMEOUT_MAX_S (366u * 24 * 3600)

#define SPACE_SANDBOX_OPTIONS_VERSION 4 /* 2 added network_policy, 3 snapshot_every_s/snapshot_keep,
                                           4 network_policy_trusted/network_allow_resolve */
struct space_sandbox_options {
	uint32_t version;         /* SPACE_SANDBOX_OPTIONS_VERSION */
	const char *template_name; /* NULL: "base" */
	const char *isolation;    /* "vm" or "jail"; NULL: the state directory's default (see space_init).
	                             jail shares the host kernel: a weaker boundary than a VM. */
	uint32_t cpus;            /* 0: 1 */
	uint32_t memory_mib;      /* 0: 512 */
	uint32_t timeout_s;       /* lifetime in seconds after which the sandbox is stopped and reclaimed;
	                             0: none; at most SPACE_TIMEOUT_MAX_S */
	const char *hostname;     /* NULL: the sandbox id */
	const char *const *env;   /* NULL-terminated "KEY=VALUE" list applied to every process; may be NULL */
	const char *network_policy; /* egress policy, JSON (docs/network.md): allowed hosts, secrets and the
	                             headers they are injected as, limits. NULL: no egress at all (the sandbox
	                             has its own network namespace with only lo, and no gateway runs: attempts
	                             fail at once and are not recorded). "{}": no egress either, but a gateway
	                             refuses each attempt and records it as an event. Secrets are registered
	                             ones ("secret:NAME", see space_secret_set), or with network_policy_trusted
	                             also read from the caller's environment or files ("env:VAR", "file:PATH");
	                             they are resolved at creation and again when the policy is re-applied
	                             (rollback, fork), and never enter the sandbox. A refused policy is -EINVAL
	                             before anything is created; the message names the entry, never a secret's
	                             value. */
	uint32_t snapshot_every_s; /* periodic file snapshots (see space_snapshot_policy): every this many
	                             seconds (1..604800); 0: the template's default, if it has one */
	uint32_t snapshot_keep;   /* how many of them to keep (1..100); 0: 5 */
	/* Version 4. Whether network_policy is the operator's own. false (the default, and what a program
	 * must keep for a policy that came from someone else, as space serve does for its API callers): its
	 * secrets may only be registered ones, it may not set ca_file (a host file), and its resolve entries
	 * may not point at loopback, link-local, private (RFC 1918, CGNAT), unspecified, multicast or
	 * broadcast addresses nor at this host's own, unless they lie in network_allow_resolve. true: env:,
	 * file:, ca_file and any resolve target are allowed, as from the operator's command line. Both are
	 * stored with the sandbox, so a re-applied policy keeps its trust. */
	bool network_policy_trusted;
	const char *const *network_allow_resolve; /* NULL-terminated IPv4 CIDRs ("10.1.0.0/16", at most 64)
	                             an untrusted policy's resolve may point into despite the above; NULL:
	                             none. Copied; -EINVAL for one that is not a CIDR. */
};
#define SPACE_SANDBOX_OPTIONS_INIT { .version = SPACE_SANDBOX_OPTIONS_VERSION }
SPACE_API int space_sandbox_options_init(struct space_sandbox_options *opts, uint32_t version);

/*
 * Creates a sandbox and returns once its agent answers. On failure nothing of it is left running or on
 * disk (its row stays, marked destroyed with the reason, for the event log). -ENOENT for an unknown
 * template, -ENODEV when the isolation is not usable on this host (the message says why and what to do).
 */
SPACE_API int space_sandbox_create(space_ctx *ctx, const struct space_sandbox_options *opts,
				   space_sandbox **ret_sandbox);

/* Opens an existing sandbox by id (-ENOENT if there is none, -ESRCH if it is no longer running). */
SPACE_API int space_sandbox_open(space_ctx *ctx, const char *id, space_sandbox **ret_sandbox);

/* Releases the handle. The sandbox keeps running. NULL is fine. */
SPACE_API void space_sandbox_free(space_sandbox *sb);

/* The sandbox's id ("sb-..."). Valid for the handle's lifetime. */
SPACE_API const char *space_sandbox_id(const space_sandbox *sb);

/* Where the milliseconds of making this handle's sandbox went, for benchmarks and diagnosis: its steps in
 * order with their durations and the total, e.g. "checks 0.4, lock 0.1, row 0.8, uids 0.1, clone 1.9,
 * jail 7.2, logcap 0.6, agent 0.4, logcap ready 0.0, network 0.0, running 0.6 = 12.6 ms" (a create; the
 * step names are the back-end's and may change), or "claim 1.5, lock 0.0, open 0.2, resume 0.3, refresh
 * 0.2, lifetime 0.0 = 2.2 ms" (taken from the warm pool). NULL for a handle from space_sandbox_open().
 * Valid for the handle's lifetime. */
SPACE_API const char *space_sandbox_create_steps(const space_sandbox *sb);

/* Current state from the store (with the liveness check of space_sandbox_list). *ret_info is the
 * caller's: space_sandbox_info_free(). */
SPACE_API int space_sandbox_get_info(space_sandbox *sb, struct space_sandbox_info **ret_info);
SPACE_API void space_sandbox_info_free(struct space_sandbox_info *info);

/* A record (see Conventions): the caller's, size set before the call (SPACE_SANDBOX_USAGE_INIT). What a
 * sandbox uses, as the host sees it at one moment. */
struct space_sandbox_usage {
	uint32_t size;            /* the struct's size */
	uint32_t cpus;            /* its CPUs (space_sandbox_info.cpus) */
	uint64_t cpu_ns;          /* CPU time its processes used since it started (a VM: its space-vmm's, the
	                             vCPUs included), from its cgroup; the CPU share over a while is the
	                             difference of two readings over the wall time between them (time_ms) */
	uint64_t memory_bytes;    /* memory charged to it now, without the page cache the kernel can reclaim
	                             (shared memory and tmpfs files count; a VM: its guest's RAM as far as the
	                             guest touched it, and the VMM's own) */
	uint64_t memory_cache_bytes; /* the reclaimable page cache charged to it besides */
	uint64_t memory_limit_bytes; /* its memory (space_sandbox_info.memory_mib) */
	uint64_t disk_used_bytes; /* its disk: a jail's on a directory tree, what it wrote itself (its btrfs quota's
	                             count, as of the pool's last commit: up to 30 s late); a jail's on an image,
	                             as its file system counts it (statvfs); a VM's, what its disk image takes on
	                             the host (blocks allocated), which does not shrink when the guest deletes
	                             files */
	uint64_t disk_total_bytes; /* the size of its disk */
	int64_t time_ms;          /* when it was read: wall clock, milliseconds since the epoch */
};
#define SPACE_SANDBOX_USAGE_INIT { .size = sizeof(struct space_sandbox_usage) }

/* What the sandbox uses now (running or paused): CPU time and memory from its cgroup (v1 or v2), its disk.
 * -ESRCH when it no longer runs, -EOPNOTSUPP when it has no cgroup (a host without usable cgroups). */
SPACE_API int space_sandbox_get_usage(space_sandbox *sb, struct space_sandbox_usage *ret_usage);

/* Stops the sandbox and deletes its disk and runtime files. The handle must still be freed. */
SPACE_API int space_sandbox_destroy(space_sandbox *sb);

/* Destroys a sandbox by id whatever its state (running, failed, half-created after a crash): the cleanup
 * behind `space rm`. -ENOENT if there is no such sandbox. Its event log rows are deleted with it (as by
 * space_sandbox_destroy and a lifetime's end): space_sandbox_remove_v2 can keep them. */
SPACE_API int space_sandbox_remove(space_ctx *ctx, const char *id);

/* Flags of space_sandbox_remove_v2. */
#define SPACE_REMOVE_KEEP_EVENTS 1u /* keep its rows in the event log (`space events ID` still shows them,
                                       until the log's retention prunes them: docs/architecture.md) */
#define SPACE_REMOVE_WITH_CHECKPOINTS 2u /* its checkpoints go too (without it they stay, automatic ones
                                            excepted: space_checkpoint_list(ctx, id) lists what stayed); with
                                            it a sandbox already gone whose checkpoints remain is not -ENOENT */
/* space_sandbox_remove with flags (SPACE_REMOVE_*; -EINVAL for unknown ones). */
SPACE_API int space_sandbox_remove_v2(space_ctx *ctx, const char *id, unsigned flags);

/*
 * Sets a running sandbox's lifetime to end seconds_from_now seconds from now (0: no lifetime limit),
 * replacing the one it was created with: shorter or longer. Its agent re-arms its shutdown alarm and
 * the store's deadline (space_sandbox_info.expires_ms) moves with it, in one transaction. -EBUSY for a
 * paused sandbox (resume it first), -ESRCH for one that is not running or whose lifetime has already
 * ended, -EINVAL above 366 days, -EOPNOTSUPP when the sandbox's agent predates this call.
 */
SPACE_API int space_sandbox_set_timeout(space_sandbox *sb, uint32_t seconds_from_now);

/*
 * Tethers a running sandbox to the calling process: the sandbox shuts down when the process ends, however
 * it ends (exit, crash, SIGKILL: the kernel closes the connection the sandbox's agent holds), or when sb
 * is freed, and the next space_sandbox_reap() destroys it ("its tether holder exited"). The row records the
 * holder (pid, start time, pid namespace), so a reap also destroys a tethered sandbox whose agent could
 * not act (paused). A rollback through sb tethers the new agent again; forks are not tethered; a child
 * made with fork() shares the connection until it execs (it is close-on-exec). Tethering a tethered handle
 * is a no-op. -EBUSY for a paused sandbox, -ESRCH for one that is not running, -EOPNOTSUPP (nothing
 * changed) when the sandbox's agent predates tethers (a template snapshot made by an older version).
 */
SPACE_API int space_sandbox_tether(space_sandbox *sb);

/*
 * Connects to TCP port (1..65535) of a running sandbox, where a server inside listens, and returns the
 * connected stream in *ret_fd (close-on-exec, blocking; the caller owns it and closes it). The connection
 * goes through the sandbox's agent, which connects to its own loopback (127.0.0.1, else ::1) and then
 * relays bytes both ways: the host gets no route into the sandbox, the sandbox's network policy is
 * untouched, and no other address is ever reached (not another sandbox, not the host). shutdown(SHUT_WR)
 * on *ret_fd reaches the server as a half-close; its close reads as EOF. Each call is its own connection;
 * any number may be open at once, and they outlive nothing: destroying or pausing the sandbox breaks them.
 * -ECONNREFUSED when nothing listens on the port (last error: "port N is not listening"), -EINVAL for port
 * 0, -EBUSY for a paused sandbox, -ESRCH for one that is not running, -EOPNOTSUPP when the sandbox's agent
 * predates ports (a template snapshot made by an older version). Thread safety as for any call on sb; the
 * returned descriptor is independent of sb and of ctx, and may be used from any thread.
 */
SPACE_API int space_sandbox_port_connect(space_sandbox *sb, uint16_t port, int *ret_fd);

/* Destroys every sandbox whose lifetime has ended, and marks dead ones failed. Returns how many it
 * destroyed. Long-running hosts (space serve) call it periodically, `space ls` before listing;
 * space_sandbox_list does not (it only shows what this would do). */
SPACE_API int space_sandbox_reap(space_ctx *ctx);

/* ---------------------------------------------------------------------------------------------------
 * Running processes in a sandbox
 */


#define SPACE_EXEC_OPTIONS_VERSION 2 /* 2 added flags: a stdin only with SPACE_EXEC_STDIN */
struct space_exec_options {
	uint32_t version;         /* SPACE_EXEC_OPTIONS_VERSION */
	const char *const *argv;  /* NULL-terminated; argv[0] is looked up in the sandbox's PATH */
	const char *const *env;   /* extra "KEY=VALUE" entries on top of the sandbox's; may be NULL */
	const char *cwd;          /* NULL: the template's working directory (an image's WorkingDir), else /root
	                             if it exists, else / */
	uint32_t uid, gid;        /* 0/0: the template's user (an image's User), else root; with SPACE_EXEC_USER
	                             in flags exactly these (0/0: root in any sandbox) */
	bool pty;                 /* run on a terminal (stdout and stderr merge into stream 1) */
	uint16_t rows, cols;      /* terminal size when pty (0: 24x80) */
	uint32_t timeout_ms;      /* kill the process group after this long; 0: no limit */
	int stdin_fd;             /* Version 2: used only with SPACE_EXEC_STDIN in flags (then
	                             space_sandbox_exec reads it to EOF and feeds it to the process; 0 is the
	                             caller's own stdin); without the flag 0 and -1 mean no stdin, and a
	                             descriptor above 0 is refused (-EINVAL: the flag was forgotten).
	                             Version 1: space_sandbox_exec: -1 = no stdin, any other value (0, the
	                             host's stdin, included) is read to EOF; space_process_start: -1 = no
	                             stdin, else stdin is fed through space_process_write_stdin() */
	space_output_fn output;   /* may be NULL: output discarded */
	void *userdata;
	/* Version 2. SPACE_EXEC_* flags; 0: no stdin (a zero-filled struct never reads the caller's stdin). */
	uint32_t flags;
};
/* The process has a stdin: space_sandbox_exec reads stdin_fd (>= 0) to EOF and feeds it; for
 * space_process_start it is fed through space_process_write_stdin() (stdin_fd is not used). */
#define SPACE_EXEC_STDIN 1u
/* uid and gid are the ones to run as even when they are 0/0 (root, in a sandbox whose template names
 * another user). Without it, 0/0 means the template's user. */
#define SPACE_EXEC_USER 2u
#define SPACE_EXEC_OPTIONS_INIT { .version = SPACE_EXEC_OPTIONS_VERSION, .stdin_fd = -1 }
/* The version's defaults; stdin_fd is -1. */
SPACE_API int space_exec_options_init(struct space_exec_options *opts, uint32_t version);

/* A record (see Conventions): the caller's, size set before the call (SPACE_EXEC_RESULT_INIT). */
struct space_exec_result {
	uint32_t size;            /* in: sizeof(struct space_exec_result); out: the bytes the library wrote */
	bool exited;              /* exited normally: exit_code is valid */
	int exit_code;
	int signal;               /* !exited: the signal that ended it */
	bool timed_out;           /* killed at timeout_ms */
	bool oom_killed;          /* ended by SIGKILL (or exit code 137, a shell passing on its child's) while
	                             the out-of-memory killer killed in the sandbox: a jail's at its memory
	                             limit (space_sandbox_info.memory_mib), seen in its cgroup; a VM's in its
	                             guest kernel, reported by its agent (VMs booted with agent protocol 1.5 or
	                             later). An "oom" event records it */
};
#define SPACE_EXEC_RESULT_INIT { .size = sizeof(struct space_exec_result) }

/* Runs a process to its end, streaming its output. -ENOENT (with message) if argv[0] does not exist in
 * the sandbox. A non-zero exit code is a result, not an error. */
SPACE_API int space_sandbox_exec(space_sandbox *sb, const struct space_exec_options *opts,
				 struct space_exec_result *ret_result);

/* An interactive process: input, signals and terminal size while it runs. */
typedef struct space_process space_process;

SPACE_API int space_process_start(space_sandbox *sb, const struct space_exec_options *opts,
				  space_process **ret_process);
/* Starts a process that runs on its own (a server, a start command): no stdin, no terminal (opts.pty and
 * SPACE_EXEC_STDIN are refused), its output dropped, its opts.output unused. It is not tied to the caller:
 * it ends by itself, at opts.timeout_ms, by a signal sent inside (`kill PID` through space_sandbox_exec), or with
 * the sandbox. *ret_pid (may be NULL): its pid inside. -EOPNOTSUPP (with message) from an agent older than
 * this call (a VM restored from a template snapshot made by an older version). */
SPACE_API int space_sandbox_spawn(space_sandbox *sb, const struct space_exec_options *opts, int *ret_pid);
/* A file descriptor that polls readable when space_process_pump() has new input. Owned by the process.
 * Output may already be buffered when it does not poll readable: check space_process_pending() first. */
SPACE_API int space_process_fd(space_process *p);
/* True when space_process_pump() has buffered work and would not block. */
SPACE_API bool space_process_pending(space_process *p);
/* The process id inside the sandbox. */
SPACE_API int space_process_pid(space_process *p);
/* Feeds stdin (needs SPACE_EXEC_STDIN, or with version 1 options stdin_fd != -1, at start); len 0 closes
 * it (EOF). -EPIPE for data when the process has ended; closing the stdin of an ended process is 0. */
SPACE_API int space_process_write_stdin(space_process *p, const void *data, size_t len);
SPACE_API int space_process_signal(space_process *p, int sig);
SPACE_API int space_process_resize(space_process *p, uint16_t rows, uint16_t cols);
/* Delivers pending output to opts.output: what is buffered (space_process_pending()) without blocking, else
 * blocking until some arrives. Returns 1 when the process has ended (*ret_result filled), 0 while it runs,
 * or -errno. */
SPACE_API int space_process_pump(space_process *p, struct space_exec_result *ret_result);
/* Frees the handle; a process still running is killed. NULL is fine. */
SPACE_API void space_process_free(space_process *p);

/* ---------------------------------------------------------------------------------------------------
 * Files in a sandbox (streamed; any size)
 */

/* Writes src_fd's content (to EOF) to path in the sandbox with mode, creating missing parent directories.
 * The file appears whole or not at all. */
SPACE_API int space_sandbox_write_file(space_sandbox *sb, const char *path, int src_fd, uint32_t mode);

/* Streams the file at path in the sandbox into dst_fd: space_sandbox_read_file_v2 with default options,
 * so at most SPACE_READ_MAX_DEFAULT bytes (-EFBIG beyond). */
SPACE_API int space_sandbox_read_file(space_sandbox *sb, const char *path, int dst_fd);

/* A record (see Conventions): the caller's for space_sandbox_stat and space_sandbox_read_file_v2, size set
 * before the call (SPACE_FILE_STAT_INIT); the library's (size set) when passed to a space_dirent_fn. */
struct space_file_stat {
	uint32_t size;            /* the struct's size, not the file's: that is file_size */
	uint32_t mode;            /* st_mode bits (type and permissions) */
	uint32_t uid, gid;
	uint64_t file_size;       /* bytes */
	int64_t mtime_ns;
};
#define SPACE_FILE_STAT_INIT { .size = sizeof(struct space_file_stat) }

SPACE_API int space_sandbox_stat(space_sandbox *sb, const char *path, struct space_file_stat *ret_stat);

/* The cap of a read whose options leave max_bytes at 0. */
#define SPACE_READ_MAX_DEFAULT (1ull << 30)

#define SPACE_READ_OPTIONS_VERSION 1
struct space_read_options {
	uint32_t version;         /* SPACE_READ_OPTIONS_VERSION */
	uint64_t max_bytes;       /* the most bytes the read may deliver; 0: SPACE_READ_MAX_DEFAULT; UINT64_MAX:
	                             no cap. Counted on the bytes streamed, zeros of a sparse file included (the
	                             sandbox decides the stream) */
	space_progress_fn progress; /* stage "copy", bytes so far, the size the sandbox announced (a hint);
	                             may be NULL */
	void *progress_userdata;
};
#define SPACE_READ_OPTIONS_INIT { .version = SPACE_READ_OPTIONS_VERSION }
SPACE_API int space_read_options_init(struct space_read_options *opts, uint32_t version);

/*
 * Streams the file at path in the sandbox into dst_fd, at most opts->max_bytes (opts may be NULL: the
 * defaults). A file larger than the cap fails with -EFBIG and a message naming the cap: before any byte
 * is written when the sandbox's own size says so, else as soon as the stream passes it. When dst_fd is a
 * regular file written at or past its end (a new or truncated file), runs of zero bytes are left as holes,
 * so a sparse file stays sparse. On failure, bytes already written to dst_fd stay there: write into a
 * temporary file and discard it (see `space cp`). ret_stat (may be NULL; else its size set) gets the file's
 * attributes, with file_size the count of bytes delivered. Only regular files can be read (-EISDIR, -EINVAL otherwise).
 */
SPACE_API int space_sandbox_read_file_v2(space_sandbox *sb, const char *path, int dst_fd,
					 const struct space_read_options *opts, struct space_file_stat *ret_stat);

/* Calls fn for each entry of a directory (not "." or ".."); a negative return from fn stops with it. */
typedef int (*space_dirent_fn)(const char *name, const struct space_file_stat *st, void *userdata);
SPACE_API int space_sandbox_list_dir(space_sandbox *sb, const char *path, space_dirent_fn fn, void *userdata);

SPACE_API int space_sandbox_mkdir(space_sandbox *sb, const char *path, uint32_t mode, bool parents);
SPACE_API int space_sandbox_remove_path(space_sandbox *sb, const char *path, bool recursive);
SPACE_API int space_sandbox_rename(space_sandbox *sb, const char *from, const char *to);

/* Copies the sandbox's log (the agent's own messages: start-up, errors) to dst_fd, oldest first. Works for
 * failed sandboxes too, until they are removed. A jail's log is capped (8 MiB, the newest kept): its older
 * half, once rotated, is in "<log path>.1", which this copies first. */
SPACE_API int space_sandbox_read_log(space_ctx *ctx, const char *id, int dst_fd);

/* Path of the sandbox's log (the agent's output: boot messages, errors). Valid for the handle's lifetime. */
SPACE_API const char *space_sandbox_log_path(const space_sandbox *sb);

/* ---------------------------------------------------------------------------------------------------
 * Pause, checkpoints, rollback and fork
 *
 * For jail sandboxes a checkpoint is a crash-consistent snapshot of the disk (the filesystem is synced
 * and frozen, the processes are frozen, the subvolume is snapshotted read-only), not of memory: a
 * rollback or a fork starts fresh processes on that disk. For VM sandboxes a checkpoint is "full": the
 * disk and the whole machine (memory, vCPU and device state, taken while its vCPUs are paused), so a
 * rollback or a fork continues the same processes from that instant (docs/checkpoints.md).
 * Checkpoints outlive their sandbox (they are separate subvolumes) until space_checkpoint_remove().
 */

/* Freezes every process of the sandbox (cgroup freezer); its status becomes "paused" and exec and the file
 * calls (read, write, stat, list, mkdir, remove, rename) fail with -EBUSY until space_sandbox_resume().
 * Pausing a paused sandbox (or resuming a running one) is a no-op. */
SPACE_API int space_sandbox_pause(space_sandbox *sb);
SPACE_API int space_sandbox_resume(space_sandbox *sb);

#define SPACE_CHECKPOINT_ID_MAX 32

/* An object (see Conventions). */
struct space_checkpoint_info {
	uint32_t size;            /* sizeof(struct space_checkpoint_info) as the library filled it */
	const char *id;           /* "cp-" + 16 base32 characters (shorter than SPACE_CHECKPOINT_ID_MAX) */
	const char *sandbox_id;   /* the sandbox it was taken of (may be destroyed since) */
	const char *template_name;
	const char *name;         /* "" if none was given */
	const char *kind;         /* "disk" (jail) or "full" (VM: memory and devices too) */
	const char *path;         /* its read-only subvolume */
	int64_t created_ms;
};

/* Takes a checkpoint of a running or paused sandbox; name may be NULL. The sandbox is frozen for the
 * duration of the snapshot (milliseconds) and left in the state it was in. */
SPACE_API int space_checkpoint_create(space_sandbox *sb, const char *name, char ret_id[SPACE_CHECKPOINT_ID_MAX]);

/* Lists checkpoints, oldest first, of one sandbox (sandbox_id) or of all (NULL): *ret_list is a
 * NULL-terminated array of *ret_count objects (ret_count may be NULL), freed with
 * space_checkpoint_info_list_free(). */
SPACE_API int space_checkpoint_list(space_ctx *ctx, const char *sandbox_id, struct space_checkpoint_info ***ret_list,
				    size_t *ret_count);
SPACE_API void space_checkpoint_info_list_free(struct space_checkpoint_info **list);

/* Looks up a checkpoint by id; -ENOENT if there is none. *ret_info: space_checkpoint_info_free(). */
SPACE_API int space_checkpoint_get(space_ctx *ctx, const char *id, struct space_checkpoint_info **ret_info);
SPACE_API void space_checkpoint_info_free(struct space_checkpoint_info *info);

/* Looks up a checkpoint by id, or else by name among the checkpoints of sandbox_id (NULL: of every
 * sandbox). -ENOENT when none matches, -EINVAL (with a message listing their ids) when several have that
 * name. *ret_info: space_checkpoint_info_free(). */
SPACE_API int space_checkpoint_find(space_ctx *ctx, const char *sandbox_id, const char *id_or_name,
				    struct space_checkpoint_info **ret_info);

/* Deletes a checkpoint's subvolume and row. Sandboxes forked or rolled back from it are not affected. */
SPACE_API int space_checkpoint_remove(space_ctx *ctx, const char *id);

/* Returns the sandbox to a checkpoint of its own, named by its id or by its name (space_checkpoint_find
 * within the sandbox; -EINVAL for another sandbox's: fork that one instead).
 * Jail: the processes running inside are lost; the sandbox restarts on the checkpoint's disk with the same
 * id, hostname, limits and environment, and this returns once its agent answers. */
SPACE_API int space_sandbox_rollback(space_sandbox *sb, const char *checkpoint_id);

/*
 * Automatic rollback: runs opts like space_sandbox_exec and, when the step fails (non-zero exit, a signal
 * or its timeout), returns the sandbox to its newest checkpoint with space_sandbox_rollback, so the next
 * step starts from the last known-good state. With SPACE_STEP_CHECKPOINT_FIRST a checkpoint ("before-step")
 * is taken first and is the one returned to; it is removed when the step succeeds and kept when it fails.
 * ret_rolled_back (may be NULL) receives the checkpoint rolled back to, "" when the step succeeded. *ret_result is the step's own result either way. -ENOENT (with a
 * message) when the step failed and the sandbox has no checkpoint; errors of the rollback itself are
 * returned as they are (the sandbox is then marked failed, see space_sandbox_rollback).
 */
#define SPACE_STEP_CHECKPOINT_FIRST 1u
SPACE_API int space_sandbox_exec_step(space_sandbox *sb, const struct space_exec_options *opts, unsigned flags,
				      struct space_exec_result *ret_result,
				      char ret_rolled_back[SPACE_CHECKPOINT_ID_MAX]);

#define SPACE_CHECKPOINT_FORK_OPTIONS_VERSION 1
struct space_checkpoint_fork_options {
	uint32_t version;         /* SPACE_CHECKPOINT_FORK_OPTIONS_VERSION */
	uint32_t count;           /* how many sandboxes (1..64); 0: 1 */
	uint32_t timeout_s;       /* each new sandbox's lifetime in seconds (at most SPACE_TIMEOUT_MAX_S);
	                             0: what is left of the checkpointed sandbox's (none if it had none) */
};
#define SPACE_CHECKPOINT_FORK_OPTIONS_INIT { .version = SPACE_CHECKPOINT_FORK_OPTIONS_VERSION }
SPACE_API int space_checkpoint_fork_options_init(struct space_checkpoint_fork_options *opts, uint32_t version);

/* Starts opts->count new sandboxes (opts NULL: one) whose disks are writable snapshots of the checkpoint,
 * with the limits and environment of the checkpointed sandbox. Each is independent of the others and of
 * the original. ret_sandboxes has room for that many handles; all or nothing. Without opts->timeout_s each
 * takes what is left of the checkpointed sandbox's lifetime; -ETIME (with a message) when that has ended
 * (give opts->timeout_s then). */
SPACE_API int space_checkpoint_fork(space_ctx *ctx, const char *checkpoint_id,
				    const struct space_checkpoint_fork_options *opts, space_sandbox **ret_sandboxes);

/* ---------------------------------------------------------------------------------------------------
 * Template snapshots and the warm pool
 *
 * A template can carry a booted snapshot: the memory, vCPU and device state of a VM that booted it and
 * whose agent answered (vmstate.snap in the template's subvolume). A VM sandbox created from such a
 * template is restored from it instead of booted: a disk clone plus a restore whose memory is mapped
 * copy-on-write from the snapshot file, shared by every sandbox of the template. The snapshot fixes the
 * cpus and memory of those sandboxes.
 *
 * The warm pool keeps up to warm_pool_size sandboxes of a template created ahead of time and paused (jail:
 * frozen cgroup; VM: vCPUs parked). space_sandbox_create with default options (no env, hostname,
 * network policy, cpus or memory; any timeout) hands one out: it is resumed, given fresh entropy (and,
 * VM, the time) and keeps its own id, which is also its hostname. Pooled sandboxes are not user
 * sandboxes: space_sandbox_list and a template's sandbox count leave them out.
 */
/* A record (see Conventions): the caller's, size set before the call (SPACE_TEMPLATE_WARM_INFO_INIT). */
struct space_template_warm_info {
	uint32_t size;                 /* in: sizeof(struct space_template_warm_info); out: bytes written */
	bool has_snapshot;             /* the template carries a booted snapshot */
	uint32_t snapshot_cpus;        /* the cpus and memory it was taken with */
	uint32_t snapshot_memory_mib;
	int64_t snapshot_created_ms;
	uint32_t warm_pool_size;       /* the warm pool's target size (0: no warm pool) */
	uint32_t warm_pool_ready;      /* pooled sandboxes ready now */
};
#define SPACE_TEMPLATE_WARM_INFO_INIT { .size = sizeof(struct space_template_warm_info) }

/* The snapshot and warm pool state of a template; -ENOENT if there is no such template. */
SPACE_API int space_template_get_warm_info(space_ctx *ctx, const char *name,
					   struct space_template_warm_info *ret_info);

#define SPACE_TEMPLATE_SNAPSHOT_OPTIONS_VERSION 1
struct space_template_snapshot_options {
	uint32_t version;         /* SPACE_TEMPLATE_SNAPSHOT_OPTIONS_VERSION */
	uint32_t cpus;            /* the vCPUs of the VM it boots, fixed for the template's sandboxes; 0: 1 */
	uint32_t memory_mib;      /* its memory; 0: 512 */
};
#define SPACE_TEMPLATE_SNAPSHOT_OPTIONS_INIT { .version = SPACE_TEMPLATE_SNAPSHOT_OPTIONS_VERSION }
SPACE_API int space_template_snapshot_options_init(struct space_template_snapshot_options *opts, uint32_t version);

/*
 * Gives a template a booted snapshot: boots a VM sandbox from it (opts: its cpus and memory; NULL: the
 * defaults), waits for
 * its agent, takes a checkpoint of it, and replaces the template's subvolume with that checkpoint (read-
 * only, swapped in atomically); the sandbox and checkpoint are removed. On failure the template is left as
 * it was. -ENODEV when vm isolation does not work on this host (the message says why), -EEXIST when the
 * template already has a snapshot (drop it first), -EBUSY while sandboxes or checkpoints use it.
 */
SPACE_API int space_template_snapshot(space_ctx *ctx, const char *name,
				      const struct space_template_snapshot_options *opts);

/* Removes a template's booted snapshot (VM sandboxes of it boot again); -ENOENT if it has none. Drains its
 * warm pool. -EBUSY while sandboxes or checkpoints use it. */
SPACE_API int space_template_snapshot_drop(space_ctx *ctx, const char *name);

/* Sets the warm pool size of a template (0..64; 0 removes the warm pool and its sandboxes). Filling is
 * space_warm_pool_fill's job. */
SPACE_API int space_template_set_warm_pool(space_ctx *ctx, const char *name, uint32_t warm_pool_size);

/*
 * Tops up the warm pool of template_name (NULL: of every template): removes pooled sandboxes that died or
 * exceed the pool size, creates and pauses new ones up to it. One filler runs at a time per state
 * directory (others wait). Returns how many sandboxes it created, or -errno (the ones made before the
 * failure stay pooled). Long-running hosts (space serve) call it in the background.
 */
SPACE_API int space_warm_pool_fill(space_ctx *ctx, const char *template_name);

/*
 * A template's start command: space_sandbox_create (and the warm pool's filler) runs it in every sandbox
 * made from the template, as space_sandbox_spawn does (as the template's user, output dropped, running on
 * its own), and with wait_port != 0 returns only once something listens on that port inside (at most
 * 60 s; else the create fails and the sandbox is destroyed). Forks, rollbacks and template snapshots do not
 * run it. argv NULL or empty removes it. At most 64 arguments of 4096 bytes, 16 KiB in all (-E2BIG).
 */
SPACE_API int space_template_set_start(space_ctx *ctx, const char *name, const char *const *argv, uint16_t wait_port);
/* *ret_json: {"argv": [...], "wait_port": N} (malloc'd; free()), or NULL when the template has none. */
SPACE_API int space_template_get_start(space_ctx *ctx, const char *name, char **ret_json);

/* ---------------------------------------------------------------------------------------------------
 * Periodic file snapshots
 *
 * A sandbox may carry a policy: every every_s seconds while it runs, a read-only snapshot of its disk is
 * taken as a checkpoint named "auto-<unix seconds>" (kind "disk", also for VM sandboxes: their memory is
 * not saved, so rolling a VM back to one reboots it on that disk), and the oldest automatic checkpoints
 * beyond keep are removed; named checkpoints are never touched. Snapshots are skipped while the sandbox is
 * paused (its disk does not change). A small helper process (space-snapd, one per sandbox, found like
 * space-agent; $SPACE_SNAPD_PATH overrides) takes them; it is started with the sandbox and again after a
 * rollback, and ends with it. Destroying the sandbox removes its automatic checkpoints (named ones stay).
 * The policy comes from space_sandbox_options.snapshot_every_s/snapshot_keep or else the template's
 * default (space_template_set_snapshot_policy).
 */
/* A record (see Conventions): the caller's, size set before the call (SPACE_SNAPSHOT_POLICY_INIT). */
struct space_snapshot_policy {
	uint32_t size;            /* in: sizeof(struct space_snapshot_policy); out: the bytes written */
	uint32_t every_s;         /* 0: no periodic snapshots */
	uint32_t keep;
	int32_t pid;              /* the helper taking them, 0 when none runs */
};
#define SPACE_SNAPSHOT_POLICY_INIT { .size = sizeof(struct space_snapshot_policy) }

/* The policy of a sandbox (every_s, keep and pid 0 if it has none). */
SPACE_API int space_sandbox_get_snapshot_policy(space_ctx *ctx, const char *id, struct space_snapshot_policy *ret);

/* Sets (every_s > 0; keep 0 = 5) or clears (every_s = 0) the default policy of sandboxes created from a
 * template. -ENOENT for an unknown template, -EINVAL (with a message) for values out of range. */
SPACE_API int space_template_set_snapshot_policy(space_ctx *ctx, const char *name, uint32_t every_s, uint32_t keep);
SPACE_API int space_template_get_snapshot_policy(space_ctx *ctx, const char *name, struct space_snapshot_policy *ret);

/* True for a checkpoint taken by a periodic snapshot policy (its name is "auto-<digits>"). */
SPACE_API bool space_checkpoint_is_automatic(const struct space_checkpoint_info *c);

/* ---------------------------------------------------------------------------------------------------
 * Registered secrets
 *
 * Values the operator stores on the host so that network policies written by others (API callers of
 * space serve; any policy without network_policy_trusted) can have them injected as headers by naming
 * them, "secret:NAME", instead of naming a host file or environment variable (docs/network.md). They
 * live in <state>/secrets (directory 0700, one file 0600 per secret, the state directory owner's), are
 * read when a policy is applied, and are never returned by any call. Every sandbox policy of the state
 * directory may name every registered secret.
 */
#define SPACE_SECRET_VALUE_MAX 8192
/* An object (see Conventions). */
struct space_secret_info {
	uint32_t size;            /* sizeof(struct space_secret_info) as the library filled it */
	const char *name;         /* 1..63 of [A-Za-z0-9._-], not starting with '.' or '-' */
	int64_t created_ms;       /* when its current value was set */
};

/* Stores secret name, replacing any value it had (atomically: a reader sees the old value or the new).
 * value: len bytes, 1..SPACE_SECRET_VALUE_MAX, without NUL, CR or LF (it becomes a header value); the
 * caller keeps it and should wipe it. -EINVAL for a bad name or value; -EPERM when <state>/secrets is
 * not the caller's. Running sandboxes keep the value their gateway was given. */
SPACE_API int space_secret_set(space_ctx *ctx, const char *name, const void *value, size_t len);

/* The registered secrets, by name: names and times only. *ret_list is a NULL-terminated array of
 * *ret_count objects (ret_count may be NULL), freed with space_secret_info_list_free(). */
SPACE_API int space_secret_list(space_ctx *ctx, struct space_secret_info ***ret_list, size_t *ret_count);
SPACE_API void space_secret_info_list_free(struct space_secret_info **list);

/* Removes secret name (-ENOENT if there is none). Running sandboxes keep the value their gateway has; a
 * policy naming it is refused from then on: a fork of such a sandbox fails, and a rollback leaves it
 * without egress. */
SPACE_API int space_secret_remove(space_ctx *ctx, const char *name);

/* ---------------------------------------------------------------------------------------------------
 * The event log, kernels, recorded status (what the CLI and space serve need, like any client)
 *
 * The outputs below are structs the library allocates and fills, never the caller: each starts with
 * size, the sizeof of the struct the library filled, so a caller built against a later header reads a
 * field only when size says the library has it (offsetof(struct, field) < size). Their strings are
 * owned by the library: valid during the callback, or until the matching *_free().
 */

/* The caps of an event's kind and detail (longer text is cut when the event is recorded). */
#define SPACE_EVENT_KIND_MAX 64
#define SPACE_EVENT_DETAIL_MAX 1024

/*
 * One event of a state directory's log: lifecycle steps ("creating", "running", "destroyed", ...) and
 * what a sandbox's gateway refused ("egress-denied", ...). kind and detail may quote text the sandbox
 * made (DNS names, Host headers): they are raw bytes, not valid UTF-8 nor free of control characters;
 * escape them before showing them to a terminal or putting them in JSON.
 */
struct space_event {
	uint32_t size;            /* sizeof(struct space_event) as the library filled it */
	int64_t seq;              /* the log's order, increasing: a cursor for space_event_query.after_seq */
	int64_t ts_ms;            /* when it happened, Unix time in milliseconds */
	const char *sandbox_id;   /* NULL for an event of no sandbox */
	const char *kind;         /* at most SPACE_EVENT_KIND_MAX bytes */
	const char *detail;       /* at most SPACE_EVENT_DETAIL_MAX bytes; NULL when none */
};

/* Receives one event (valid during the call only). Return 0 to go on, or a negative errno to stop: the
 * listing then returns it. */
typedef int (*space_event_fn)(const struct space_event *event, void *userdata);

#define SPACE_EVENT_QUERY_VERSION 1
struct space_event_query {
	uint32_t version;         /* SPACE_EVENT_QUERY_VERSION */
	const char *sandbox_id;   /* NULL: the events of every sandbox (and of none) */
	const char *kind;         /* NULL: every kind */
	int64_t after_seq;        /* only events with a larger seq: 0 for all, the last seq seen to follow */
	uint32_t limit;           /* at most this many; 0: no limit */
};
#define SPACE_EVENT_QUERY_INIT { .version = SPACE_EVENT_QUERY_VERSION }
/* Like the space_*_options_init() functions: query gets the defaults of that version (everything, from the
 * start, no limit). -EINVAL for version 0, a version newer than the library or a NULL query. */
SPACE_API int space_event_query_init(struct space_event_query *query, uint32_t version);

/*
 * Calls fn for each event matching query (NULL: every event), oldest first (by seq). First moves what the
 * egress gateways have spooled (of the query's sandbox, or of all) into the log, so a refusal shows as
 * soon as the gateway wrote it; nothing is reaped. A sandbox's events go with it when it is removed (space_sandbox_remove_v2 can keep
 * them), and the log's retention prunes old ones (docs/architecture.md). -ENOMEDIUM when the state
 * directory is not initialized; -EINVAL for a query of version 0 or from a later library.
 */
SPACE_API int space_event_list(space_ctx *ctx, const struct space_event_query *query, space_event_fn fn,
			       void *userdata);

/* How many events match query (its limit is ignored) into *ret_count, after collecting the spools like
 * space_event_list. Errors as space_event_list. */
SPACE_API int space_event_count(space_ctx *ctx, const struct space_event_query *query, uint64_t *ret_count);

/*
 * The status recorded for sandbox id, destroyed sandboxes included while their row remains (a sandbox
 * whose create failed, or that was destroyed by its lifetime or space_sandbox_destroy). Read-only: unlike
 * space_sandbox_list and space_sandbox_get_info, the sandbox's process is not checked, so a sandbox that
 * died and was not reaped yet still reads running. -ENOENT when there is no row for id.
 */
SPACE_API int space_sandbox_get_status(space_ctx *ctx, const char *id, enum space_sandbox_status *ret_status);

/* A kernel VM sandboxes can boot (docs/kernels.md). */
struct space_kernel_info {
	uint32_t size;            /* sizeof(struct space_kernel_info) as the library filled it */
	const char *kind;         /* "template", "host" or "fetched" */
	const char *kernel;       /* the image: bzImage or vmlinux */
	const char *modules;      /* its modules directory, "" if none */
	const char *release;      /* "6.1.0-28-cloud-amd64", "" if unknown */
};

/* Receives one kernel (valid during the call only); a negative return stops the listing with it. */
typedef int (*space_kernel_fn)(const struct space_kernel_info *kernel, void *userdata);

/* Calls fn for the host's kernel (/boot/vmlinuz-$(uname -r), when readable) and for each kernel fetched
 * under <state>/kernels/. Needs no initialized state directory. */
SPACE_API int space_kernel_list(space_ctx *ctx, space_kernel_fn fn, void *userdata);

/*
 * Fetches Debian's cloud kernel (linux-image-cloud-amd64: apt-get download and dpkg-deb -x into
 * <state>/kernels/, never installed) unless it is there already. *ret_kernel (kind "fetched") is the
 * caller's: space_kernel_info_free(). -ENOENT with a message saying what to do when it cannot be fetched.
 */
SPACE_API int space_kernel_fetch(space_ctx *ctx, struct space_kernel_info **ret_kernel);
SPACE_API void space_kernel_info_free(struct space_kernel_info *kernel);

/* What a VM sandbox boots: a kernel, the initramfs libspace generated for it, the base command line. */
struct space_boot_assets {
	uint32_t size;            /* sizeof(struct space_boot_assets) as the library filled it */
	const char *kernel;       /* bzImage or vmlinux */
	const char *initrd;       /* the generated initramfs (cached under <state>/kernels/), or the
	                             template's own */
	const char *cmdline;      /* base kernel command line (space.* parameters are added per sandbox) */
	const char *release;      /* kernel release, "" if unknown */
};

/*
 * Picks the kernel a VM sandbox of template would boot (the template's own; else the host's with its
 * modules; else a fetched Debian kernel, fetching one when there is none) and builds, or reuses, its
 * initramfs: what a create would do, ahead of time. template: a template name, a path to a template
 * directory (any string holding '/'), or NULL for no template. *ret_assets is the caller's:
 * space_boot_assets_free(). -ENOENT for an unknown template, or (with a message saying what to do) when
 * no kernel can be found or fetched.
 */
SPACE_API int space_kernel_prepare(space_ctx *ctx, const char *template_name, struct space_boot_assets **ret_assets);
SPACE_API void space_boot_assets_free(struct space_boot_assets *assets);

#ifdef __cplusplus
}
#endif

#endif /* SPACE_H */
