/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A log whose size a writer caps: what a sandbox makes the host store (a VM's serial console, by
 * space-vmm) stays under a fixed number of bytes however much it writes, and the newest bytes are kept.
 *
 * Two parts, the layout of every sandbox log (docs/architecture.md, "What a sandbox can make the host
 * store"): FILE holds at most max/2 bytes, FILE.1 the part before it. When the next write would take FILE
 * past max/2, FILE.1 becomes a copy of (the last max/2 bytes of) FILE and FILE starts again empty; reading
 * FILE.1 then FILE gives the log in order. Both descriptors are opened by the caller beforehand, so a
 * writer inside a jail and under seccomp needs no open(): only pread64 (the copy, from FILE), pwrite64 (into
 * FILE.1), ftruncate (both) and write.
 *
 * Other processes may append to FILE too (O_APPEND: a rotation then loses at most what they wrote while
 * it copied). Not thread-safe: the caller serializes (the serial device's lock).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define CAPLOG_DEFAULT_MAX (8ull << 20) /* both parts together */
#define CAPLOG_MIN_MAX (8ull << 10)
#define CAPLOG_MAX_MAX (1ull << 40)

struct caplog {
	int fd;             /* FILE: open for reading and appending (O_RDWR | O_APPEND); not owned */
	int old_fd;         /* FILE.1: open for writing, not O_APPEND; not owned. -1: a rotation only empties FILE */
	uint64_t half;      /* FILE's share: max / 2 */
	uint64_t size;      /* bytes in FILE as far as this writer knows (its size at init, plus its writes) */
	uint64_t rotations; /* how many times FILE started again */
};

/*
 * Sets l up over fd and old_fd for a cap of max bytes (CAPLOG_MIN_MAX..CAPLOG_MAX_MAX, else -EINVAL).
 * Learns FILE's size (fstat) and, when FILE already holds more than max/2 (left by earlier runs), rotates
 * at once. Call before a seccomp filter without fstat is installed.
 */
int caplog_init(struct caplog *l, int fd, int old_fd, uint64_t max);

/*
 * Appends buf[0..len) to FILE, rotating first when FILE would pass max/2. Of a single write longer than
 * max/2 only the last max/2 bytes are kept. Returns 0 or the -errno of the failed write (a full disk):
 * best effort for a console, the caller may ignore it. Never blocks on anything but the disk.
 */
int caplog_write(struct caplog *l, const void *buf, size_t len);

/* The rotation: FILE.1 = the last max/2 bytes of FILE (when FILE is readable and old_fd is open), FILE
 * emptied. FILE is emptied even when the copy fails (the cap holds, the older part is lost); -errno only
 * when FILE could not be emptied, and caplog_write then stores nothing more. */
int caplog_rotate(struct caplog *l);
