/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD fault injection for cp_bounds.sh: openat(..., O_TMPFILE) fails with EOPNOTSUPP, as on a
 * filesystem without unnamed temporary files, so `space cp` takes its named-temporary-file path. Every
 * other open goes through unchanged. Test-only: never installed.
 */
/* Both openat and openat64 are defined below: no header may rename one into the other. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

typedef int (*openat_fn)(int, const char *, int, ...);

static int pass(const char *name, int dirfd, const char *path, int flags, mode_t mode)
{
	if ((flags & O_TMPFILE) == O_TMPFILE) {
		errno = EOPNOTSUPP;
		return -1;
	}
	openat_fn real = (openat_fn)dlsym(RTLD_NEXT, name);
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(dirfd, path, flags, mode);
}

#define WRAP(name)                                                                                       \
	int name(int dirfd, const char *path, int flags, ...);                                           \
	int name(int dirfd, const char *path, int flags, ...)                                            \
	{                                                                                                \
		mode_t mode = 0;                                                                         \
		if (flags & (O_CREAT | __O_TMPFILE)) {                                                   \
			va_list ap;                                                                      \
			va_start(ap, flags);                                                             \
			mode = va_arg(ap, mode_t);                                                       \
			va_end(ap);                                                                      \
		}                                                                                        \
		return pass(#name, dirfd, path, flags, mode);                                            \
	}

WRAP(openat)
WRAP(openat64)
