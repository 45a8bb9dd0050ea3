/* SPDX-License-Identifier: Apache-2.0 */
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

extern char **environ;

int util_mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	size_t n = strlen(p);
	if (n == 0)
		return -ENOENT;
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	/* Its parents exist, nearly always: the walk from / only when they do not. */
	int r = mkdir(p, mode);
	if (r < 0 && errno == ENOENT) {
		for (char *s = p + 1; *s; s++) {
			if (*s != '/')
				continue;
			*s = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
		r = mkdir(p, mode);
	}
	if (r == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	struct stat st;
	if (stat(p, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int rm_rf_at(int parent, const char *name, int depth)
{
	if (depth > 256)
		return -ELOOP;
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int r = -errno;
		close(fd);
		return r;
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int k = rm_rf_at(dirfd(d), de->d_name, depth + 1);
		if (k < 0 && r == 0)
			r = k;
	}
	closedir(d);
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int util_rm_rf(const char *path)
{
	return rm_rf_at(AT_FDCWD, path, 0);
}

int util_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 4096, len = 0;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap >= max)
				return -EFBIG;
			cap = cap * 2 > max ? max : cap * 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	*ret = TAKE_PTR(buf);
	return 0;
}

int util_oom_prefer_self(void)
{
	char v[16];
	int n = snprintf(v, sizeof(v), "%d\n", UTIL_SANDBOX_OOM_SCORE_ADJ);
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = util_write_all(fd, v, (size_t)n);
	close(fd);
	return r;
}

int util_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int util_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int util_read_exact(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int util_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		return -ENOMEM;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int r = util_write_all(fd, buf, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* The leading decimal digits of s (no sign, no space) into *v, *end after them. */
static int parse_digits(const char *s, unsigned long long *v, char **end)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno == ERANGE ? -ERANGE : 0;
}

int util_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	int r = parse_digits(s, &v, &end);
	if (r < 0)
		return r;
	if (*end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int util_parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	int r = parse_digits(s, &v, &end);
	if (r < 0)
		return r;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
		end += strlen(end);
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*ret = (uint64_t)v << shift;
	return 0;
}

int util_parse_mib(const char *s, uint64_t *ret_mib)
{
	uint64_t v;
	int r = util_parse_size(s, &v);
	if (r < 0)
		return r;
	if (isdigit((unsigned char)s[strlen(s) - 1])) { /* no unit: MiB, as these flags always took */
		*ret_mib = v;
		return 0;
	}
	if (v & ((1u << 20) - 1))
		return -EINVAL;
	*ret_mib = v >> 20;
	return 0;
}

int util_parse_duration(const char *s, uint64_t *ret_s)
{
	char *end;
	unsigned long long v;
	int r = parse_digits(s, &v, &end);
	if (r < 0)
		return r;
	uint64_t mult;
	switch (*end) {
	case '\0': mult = 1; break;
	case 's': mult = 1; end++; break;
	case 'm': mult = 60; end++; break;
	case 'h': mult = 3600; end++; break;
	case 'd': mult = 86400; end++; break;
	default: return -EINVAL;
	}
	if (*end)
		return -EINVAL;
	uint64_t out;
	if (__builtin_mul_overflow((uint64_t)v, mult, &out))
		return -ERANGE;
	*ret_s = out;
	return 0;
}

const char *util_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

int util_random_bytes(void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void util_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

uint64_t util_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t util_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool util_have_program(const char *name)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	_cleanup_free_ char *copy = strdup(path);
	if (!copy)
		return false;
	char *save = NULL;
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char full[PATH_MAX];
		if (snprintf(full, sizeof(full), "%s/%s", dir, name) >= (int)sizeof(full))
			continue;
		if (access(full, X_OK) == 0)
			return true;
	}
	return false;
}

int util_run(const char *const argv[], char **ret_output)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	/* Sandboxing tools expect a sane PATH even when the caller's is minimal. */
	pid_t pid;
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0) {
		close(pipefd[0]);
		return -r;
	}
	char tail[4096];
	size_t tlen = 0;
	char chunk[4096];
	for (;;) {
		ssize_t n = read(pipefd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* Keep the last sizeof(tail) bytes: the end of a tool's output names the failure. */
		if ((size_t)n >= sizeof(tail)) {
			memcpy(tail, chunk + n - sizeof(tail), sizeof(tail));
			tlen = sizeof(tail);
		} else if (tlen + (size_t)n > sizeof(tail)) {
			size_t drop = tlen + (size_t)n - sizeof(tail);
			memmove(tail, tail + drop, tlen - drop);
			tlen -= drop;
			memcpy(tail + tlen, chunk, (size_t)n);
			tlen += (size_t)n;
		} else {
			memcpy(tail + tlen, chunk, (size_t)n);
			tlen += (size_t)n;
		}
	}
	close(pipefd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (ret_output) {
		char *o = malloc(tlen + 1);
		if (o) {
			memcpy(o, tail, tlen);
			while (tlen > 0 && (o[tlen - 1] == '\n' || o[tlen - 1] == ' '))
				tlen--;
			o[tlen] = '\0';
		}
		*ret_output = o;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPROTO;
}

bool util_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > 63 || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) && c != '.' && c != '_' && c != '-')
			return false;
	}
	return true;
}

int util_errf(char *err, size_t errlen, int r, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

void util_signals_default(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Reads into buf[0..len) until it is full, EOF, the deadline or, when line, a newline; *n counts. */
static int read_timed(int fd, char *buf, size_t len, int timeout_ms, bool line, size_t *n)
{
	int64_t deadline = util_wall_ms() + timeout_ms;
	while (*n < len && !(line && memchr(buf, '\n', *n))) {
		int left = (int)(deadline - util_wall_ms());
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = left > 0 ? poll(&p, 1, left) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ETIMEDOUT;
		ssize_t k = read(fd, buf + *n, len - *n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		*n += (size_t)k;
	}
	return 0;
}

int util_read_line_timeout(int fd, char *buf, size_t len, int timeout_ms)
{
	if (len == 0)
		return -EINVAL;
	size_t n = 0;
	int r = read_timed(fd, buf, len - 1, timeout_ms, true, &n);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (r < 0)
		return r;
	return n ? 0 : -EPIPE;
}

int util_read_exact_timeout(int fd, void *buf, size_t len, int timeout_ms)
{
	size_t n = 0;
	int r = read_timed(fd, buf, len, timeout_ms, false, &n);
	return r < 0 ? r : n < len ? -EPIPE : 0;
}
