/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scope-bound ownership: `_cleanup_free_ char *p = NULL;` frees p when it goes out of scope.
 * TAKE_PTR / TAKE_FD hand ownership out of such a variable (and leave it empty).
 */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void fclosep(FILE **f) { if (*f) fclose(*f); }
static inline void closedirp(DIR **d) { if (*d) closedir(*d); }

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

#define TAKE_PTR(p) ({ __typeof__(p) _tp = (p); (p) = NULL; _tp; })
#define TAKE_FD(fd) ({ int _tf = (fd); (fd) = -1; _tf; })

/* Declares `static inline void <name>p(type **p)` calling func(*p) when non-NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
	static inline void func##p(type **p)                                                        \
	{                                                                                           \
		if (*p)                                                                             \
			func(*p);                                                                   \
	}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SPACE_UNUSED __attribute__((unused))
