/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The initramfs of a VM sandbox: a newc cpio archive written by our own code, holding
 *   /init                   space-agent (static), which loads the modules and switches to /dev/vda
 *   /dev/console            character device 5:1, so the kernel gives /init the console as stdio
 *   /dev /proc /sys /newroot   empty mount points
 *   /lib/modules/<name>.ko  the kernel modules the guest needs (decompressed), and
 *   /modules.order          their load order, one archive path per line, every dependency first.
 * Private to the library.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the agent finds the load order inside the initramfs (shared with src/agent/init.c). */
#define INITRAMFS_ORDER_FILE "/modules.order"
#define INITRAMFS_MODULE_DIR "/lib/modules"

/* ---- newc cpio writer ---------------------------------------------------------------------------- */

struct cpio_writer {
	int fd;           /* not owned */
	uint32_t ino;     /* next inode number */
	uint64_t offset;  /* bytes written so far */
};

void cpio_init(struct cpio_writer *w, int fd);
/* One entry with its contents in memory (len 0 for a directory or device). mode includes the type bits
 * (S_IFREG, S_IFDIR, S_IFCHR...); rdev is used for device nodes. Names are archive paths without the
 * leading "/" ("init", "lib/modules/x.ko"). -ENAMETOOLONG past PATH_MAX, -EFBIG past 4 GiB - 1. */
int cpio_add(struct cpio_writer *w, const char *name, mode_t mode, dev_t rdev, const void *data, size_t len);
/* A regular file copied from path (its size is taken when it is opened). */
int cpio_add_file(struct cpio_writer *w, const char *name, mode_t mode, const char *path);
/* The TRAILER!!! entry; the archive is complete afterwards. */
int cpio_finish(struct cpio_writer *w);

/* ---- kernel modules ------------------------------------------------------------------------------ */

struct kmod {
	char name[64];    /* normalized: '-' written as '_' */
	char *path;       /* relative to the modules directory, as modules.dep names it (may end .xz/.zst) */
};

struct kmod_list {
	struct kmod *mods; /* load order: each module after all of its dependencies */
	size_t n;
};

/* The modules a sandbox needs, in the order the agent should try them. Required ones must be either a
 * module or built in; optional ones (rng, net, crc32c implementations) are taken when present. */
extern const char *const initramfs_required_modules[];
extern const char *const initramfs_optional_modules[];

/*
 * Resolves the wanted modules (and their dependencies, from <moddir>/modules.dep) into load order,
 * skipping any that <moddir>/modules.builtin lists. A required module that is neither a module nor
 * built in fails with -ENOENT and a message naming it; a dependency cycle with -ELOOP. required and
 * optional are NULL-terminated name arrays (either may be NULL). Free the result with kmod_list_free.
 */
int kmod_resolve(const char *moddir, const char *const *required, const char *const *optional,
		 struct kmod_list *ret, char *err, size_t errlen);
void kmod_list_free(struct kmod_list *l);

/* "virtio-rng" -> "virtio_rng"; the module name of a path ("kernel/x/virtio-rng.ko.xz" -> "virtio_rng").
 * Returns -ENAMETOOLONG when it does not fit. */
int kmod_name_of(const char *path, char *buf, size_t len);

/*
 * Copies the resolved modules of moddir into dst as a self-contained modules tree (the same relative
 * paths, decompressed, with a modules.dep naming only them and a copy of modules.builtin), so a
 * template can carry the few modules its kernel needs.
 */
int kmod_copy_tree(const char *moddir, const struct kmod_list *l, const char *dst, char *err, size_t errlen);

/* ---- the archive --------------------------------------------------------------------------------- */

/*
 * Writes the initramfs to out (through out.tmp-XXXXXX and a rename, so a reader never sees half of
 * it): /init from agent_path, the modules of mods (NULL or empty: none) read from moddir and
 * decompressed with xz/zstd when needed, and /modules.order. scratch is a directory for decompression.
 */
int initramfs_write(const char *out, const char *agent_path, const char *moddir, const struct kmod_list *mods,
		    const char *scratch, char *err, size_t errlen);
