/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by the library, the CLI and the helper binaries. All return 0 or -errno. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Creates path and its missing parents with mode. Existing directories are fine. */
int util_mkdir_p(const char *path, mode_t mode);

/* Removes path recursively (files, directories, symlinks; never follows links). Missing is fine. */
int util_rm_rf(const char *path);

/* Reads a whole file of at most max bytes (-EFBIG beyond) into a NUL-terminated buffer. */
int util_read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Writes a file atomically: temp file in the same directory, fsync, rename. */
int util_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode);

/* Parses "4096", "512K", "64M", "4G", "1T" (binary units; optional trailing "iB"/"B"). */
int util_parse_size(const char *s, uint64_t *ret);

/* Parses a decimal unsigned integer in [min, max]; rejects sign, junk and overflow. */
int util_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/* Parses a size in MiB: a bare number is MiB ("512"), else a size with a binary unit as util_parse_size
 * ("1G", "1536M", "1GiB") that must be a whole number of MiB. -EINVAL on junk or a fraction of a MiB,
 * -ERANGE on overflow. */
int util_parse_mib(const char *s, uint64_t *ret_mib);

/* Parses a duration in seconds: a bare number is seconds ("90"), else one unit s, m, h or d ("10m", "2h",
 * "1d"). -EINVAL on junk (sign, "1X", "", "10ms"), -ERANGE on overflow. */
int util_parse_duration(const char *s, uint64_t *ret_s);

/* Formats bytes for humans ("1.5 GiB") into buf. */
const char *util_format_size(uint64_t bytes, char *buf, size_t len);

/* Fills buf from getrandom(2), retrying on EINTR and short reads. */
int util_random_bytes(void *buf, size_t len);

/* Monotonic and wall clocks. */
uint64_t util_now_ns(void);
int64_t util_wall_ms(void);
/* Sleeps ms milliseconds (a signal may end it early: callers poll a condition in a loop). */
void util_sleep_ms(long ms);

/*
 * Runs argv[0] (looked up in PATH) with stdin from /dev/null, waits for it and returns 0 when it exited 0.
 * Its combined stdout+stderr is captured (last 4 KiB) into *ret_output when ret_output is non-NULL
 * (caller frees), so a failure can be reported with the tool's own words.
 * Returns -ENOENT if the program is missing, -EPROTO if it exited non-zero or died by a signal.
 * For host tools waited for at once; a sandbox's helpers start through util_spawn (util/spawn.h).
 */
int util_run(const char *const argv[], char **ret_output);

/* Every signal's handler back to the default, then an empty mask (in that order: a signal let through
 * meets a default action, never a handler inherited from a caller sharing our memory). For a child about
 * to exec: SIG_IGN and the mask survive an exec. System calls only. */
void util_signals_default(void);

/* A sandbox's helpers start through util_spawn (util/spawn.h), its one spawn path. */

/*
 * Reads one status line (up to len - 1 bytes, ending at the first newline, which is cut) from fd within
 * timeout_ms into buf, NUL-terminated. Returns 0, -ETIMEDOUT, -EPIPE when nothing came before EOF, or -errno.
 */
int util_read_line_timeout(int fd, char *buf, size_t len, int timeout_ms);

/* Reads exactly len bytes from fd within timeout_ms: 0, -ETIMEDOUT, -EPIPE on early EOF, or -errno. */
int util_read_exact_timeout(int fd, void *buf, size_t len, int timeout_ms);

/* Formats a message into err (when err and errlen are non-zero) and returns r, for
 * `return util_errf(err, errlen, -EINVAL, "bad %s", what);` in code that reports through a buffer. */
int util_errf(char *err, size_t errlen, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Whether a program is found in PATH. */
bool util_have_program(const char *name);

/* Validates a user-chosen name: 1..63 chars of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool util_name_valid(const char *name);

/* Writes all of buf to fd, retrying on EINTR and short writes. */
int util_write_all(int fd, const void *buf, size_t len);
/* pwrite of all len bytes at off (-EIO when the file takes none). */
int util_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/*
 * The host's out-of-memory killer takes a sandbox before the host's own processes: the calling process's
 * oom_score_adj becomes UTIL_SANDBOX_OOM_SCORE_ADJ, inherited by everything it starts. A process without
 * CAP_SYS_RESOURCE on the host (every sandbox process) may lower its own value to 0, the host processes'
 * default, never below. Returns 0 or -errno.
 */
#define UTIL_SANDBOX_OOM_SCORE_ADJ 500
int util_oom_prefer_self(void);

/* Reads exactly len bytes; -EPIPE on early EOF. */
int util_read_exact(int fd, void *buf, size_t len);
