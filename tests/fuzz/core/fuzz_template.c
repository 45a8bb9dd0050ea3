/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: template import's rootfs detection (src/core/template_import.c detect_rootfs), which reads the
 * head of a user-supplied file and decides between an ext4 image and a tarball (plain, gzip, xz, zstd,
 * bzip2). The bytes are written to a memfd and detected through /proc/self/fd, as import would read a
 * file. The file's contents beyond the head go to mkfs.ext4/e2fsck/tar, which are not ours to fuzz.
 * Invariant: no sanitizer report; a verdict only for inputs that carry the magic it names.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The parser is static: compile the file into the target (its other symbols replace libspace's). */
#include "core/template_import.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	if (fd < 0 && (fd = memfd_create("fuzz-rootfs", MFD_CLOEXEC)) < 0)
		return 0;
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	enum rootfs_kind kind;
	if (detect_rootfs(path, &kind) < 0)
		return 0;
	if (kind == ROOTFS_EXT4 && !(size >= 1082 && data[1080] == 0x53 && data[1081] == 0xef))
		__builtin_trap();
	if (kind == ROOTFS_DIR)
		__builtin_trap(); /* a regular file is never a directory */
	return 0;
}
