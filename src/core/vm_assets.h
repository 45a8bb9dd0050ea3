/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a VM sandbox boots: the kernel, the generated initramfs (space-agent as /init plus the modules
 * the kernel needs) and the base command line. Private to the library; see docs/kernels.md.
 */
#pragma once

#include <limits.h>
#include <stddef.h>

#include "space.h"

struct vm_assets {
	char kernel[PATH_MAX];  /* bzImage or vmlinux */
	char initrd[PATH_MAX];  /* the generated initramfs (cached), or the template's own initrd */
	char cmdline[1024];     /* base kernel command line (the caller appends space.* parameters) */
	char kver[128];         /* kernel release, "" if unknown */
};

/* The agent's vsock port unless space.port says otherwise. */
#define VM_AGENT_PORT 1024

/*
 * For a template subvolume (its template.json may name a kernel, an initrd and a modules directory),
 * picks the kernel: the template's own; else /boot/vmlinuz-$(uname -r) with /lib/modules/$(uname -r);
 * else Debian's linux-image-cloud-amd64 already fetched under <state>/kernels/, fetching it when there
 * is none (apt-get download + dpkg-deb -x, never installed). Then builds, or reuses, the initramfs under
 * <state>/kernels/, keyed by the identity (path, size, mtime) of the kernel, the modules and the agent.
 * template_path may be NULL (no template kernel). -ENOENT with a message saying what to do when no
 * kernel can be found or fetched. out is written only on success.
 */
int vm_assets_prepare(space_ctx *ctx, const char *template_path, struct vm_assets *out);

/*
 * Appends " key=value" to the NUL-terminated command line in cmdline[len]. value may not hold spaces,
 * quotes or control characters (the kernel would split it): -EINVAL; -ENAMETOOLONG when it does not
 * fit (cmdline is left as it was).
 */
int vm_cmdline_append(char *cmdline, size_t len, const char *key, const char *value);

/*
 * Fetches Debian's cloud kernel into <state>/kernels/<package>/ unless it is there already; the kernel
 * image and the modules directory of the result go to ret_kernel / ret_moddir (PATH_MAX each, may be
 * NULL) and its release to ret_kver (128, may be NULL).
 */
int vm_kernel_fetch(space_ctx *ctx, char *ret_kernel, char *ret_moddir, char *ret_kver);

/* The release a bzImage names in its setup header ("6.1.0-28-cloud-amd64"); -ENOENT when it names none
 * (a vmlinux ELF, or an old image). buf gets at most len - 1 characters. */
int vm_kernel_release(const char *image, char *buf, size_t len);

/* One kernel space can boot: kind is "template", "host" or "fetched". */
typedef int (*vm_kernel_fn)(const char *kind, const char *kernel, const char *moddir, const char *kver,
			    void *userdata);

/* Calls fn for the host's kernel (when readable) and each fetched kernel under <state>/kernels/. */
int vm_kernel_list(space_ctx *ctx, vm_kernel_fn fn, void *userdata);
