/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup limits for a sandbox's processes (a jail's PID 1, a space-vmm), with two back-ends chosen at run
 * time (see cgroup.h):
 *  - v2: /sys/fs/cgroup is the unified hierarchy; the sandbox gets space.slice/<id> with memory.max, cpu.max,
 *    pids.max, and cgroup.freeze for pausing. Controllers are enabled in the parents' subtree_control.
 *  - v1: one hierarchy per controller (/sys/fs/cgroup/{memory,cpu,pids,freezer}); the sandbox gets
 *    space/<id> in each, with memory.limit_in_bytes, cpu.cfs_quota_us, pids.max, freezer.state.
 * A spec string ("v1:space/<id>", "v2:space.slice/<id>") records which, so another process can clean up.
 * Moved from src/jail (issue 15): both isolation back-ends use it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "util/cgroup.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/util.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CGROUP_SUPER_MAGIC_ 0x27e0eb
#define CGROUP2_SUPER_MAGIC_ 0x63677270
#define CPU_PERIOD_US 100000 /* the kernel's default period */

/* v1 controllers a sandbox uses; "required" ones must exist, the others only when their limit is set. */
static const char *const v1_ctrls[] = { "memory", "cpu", "pids", "freezer" };

/* Formats a one-line error into buf (NULL or len 0: nothing). */
#define set_err(buf, len, ...) ((buf) && (len) ? (void)snprintf((buf), (len), __VA_ARGS__) : (void)0)

static int write_value(int fd, const char *s)
{
	size_t n = strlen(s);
	/* A value is one write, so a retry is the same write. v1's memory.limit_in_bytes fails with EINTR
	 * whenever a signal is pending for the writer (a helper's SIGCHLD), even with nothing to reclaim. */
	ssize_t w;
	int tries = 0;
	while ((w = write(fd, s, n)) < 0 && errno == EINTR && ++tries < 100)
		;
	if (w < 0)
		return -errno;
	return (size_t)w == n ? 0 : -EIO;
}

static int write_str(const char *path, const char *s)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	return fd < 0 ? -errno : write_value(fd, s);
}

static int read_line(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static bool fs_is(const char *path, long magic)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

/* Splits a spec into its version and relative path; -EINVAL if malformed. */
static int spec_parse(const char *spec, int *ret_ver, const char **ret_rel)
{
	if (!spec || strncmp(spec, "v1:", 3) != 0) {
		if (!spec || strncmp(spec, "v2:", 3) != 0)
			return -EINVAL;
		*ret_ver = 2;
	} else
		*ret_ver = 1;
	const char *rel = spec + 3;
	if (!*rel || rel[0] == '/' || strstr(rel, ".."))
		return -EINVAL;
	*ret_rel = rel;
	return 0;
}

/* Path of <file> in the sandbox's cgroup directory of hierarchy ctrl (ignored on v2). */
static int cg_path(char *buf, size_t len, int ver, const char *ctrl, const char *rel, const char *file)
{
	int n;
	if (ver == 2)
		n = snprintf(buf, len, CG_ROOT "/%s%s%s", rel, file ? "/" : "", file ? file : "");
	else
		n = snprintf(buf, len, CG_ROOT "/%s/%s%s%s", ctrl, rel, file ? "/" : "", file ? file : "");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int cg_write(int ver, const char *ctrl, const char *rel, const char *file, const char *val)
{
	char path[512];
	int r = cg_path(path, sizeof(path), ver, ctrl, rel, file);
	return r < 0 ? r : write_str(path, val);
}

static bool v1_has(const char *ctrl)
{
	char path[128];
	snprintf(path, sizeof(path), CG_ROOT "/%s", ctrl);
	return fs_is(path, CGROUP_SUPER_MAGIC_);
}

static int detect_version(void)
{
	if (fs_is(CG_ROOT, CGROUP2_SUPER_MAGIC_))
		return 2;
	if (v1_has("pids") && v1_has("freezer"))
		return 1;
	return -EOPNOTSUPP;
}

int util_cgroup_version(void)
{
	return detect_version();
}

static int rmdir_tree(const char *path)
{
	if (rmdir(path) == 0 || errno == ENOENT)
		return 0;
	if (errno != EBUSY && errno != ENOTEMPTY)
		return -errno;
	/* Sub-cgroups made inside (v2 delegation through the cgroup namespace): remove them bottom-up. */
	_cleanup_closedir_ DIR *d = opendir(path);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			char sub[1024];
			if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= sizeof(sub))
				continue;
			rmdir_tree(sub);
		}
	}
	return rmdir(path) == 0 || errno == ENOENT ? 0 : -errno;
}

/* Whether the cgroup line of pid for the hierarchy holding ctrl (v1) or the unified one (v2) names rel or a
 * cgroup below it. Lines are "ID:CONTROLLERS:PATH"; v2's is "0::PATH". */
static bool proc_in_cgroup(pid_t pid, int ver, const char *ctrl, const char *rel)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	size_t rl = strlen(rel);
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		const char *ctrls = c1 + 1, *cg = c2 + 1;
		bool ours = false;
		if (ver == 2)
			ours = !strcmp(line, "0") && !*ctrls;
		else
			for (const char *p = ctrls; *p && !ours; p += strcspn(p, ",") + (p[strcspn(p, ",")] ? 1 : 0))
				ours = strcspn(p, ",") == strlen(ctrl) && !strncmp(p, ctrl, strlen(ctrl));
		if (ours)
			return cg[0] == '/' && !strncmp(cg + 1, rel, rl) && (cg[1 + rl] == 0 || cg[1 + rl] == '/');
	}
	return false;
}

/*
 * SIGKILL to pid, only if it is a member of the cgroup: a pidfd pins the process first, its cgroup is read,
 * then the pidfd says it has not exited, so what was read was that process's and a pid reused in between
 * is never hit. Needs no freezer: on v1, freezing each cgroup to list it took the freezer's one global
 * lock, for every stop of a burst.
 */
static void kill_member(pid_t pid, int ver, const char *ctrl, const char *rel)
{
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0 || !proc_in_cgroup(pid, ver, ctrl, rel))
		return;
	struct pollfd p = { .fd = pfd, .events = POLLIN };
	if (poll(&p, 1, 0) == 0)
		(void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
}

/* Counts the processes listed in dir (ctrl's hierarchy, rel below its root) and its sub-cgroups, killing
 * each when kill_them. */
static int members(const char *dir, int ver, const char *ctrl, const char *rel, bool kill_them, int depth)
{
	char path[1024];
	int n = 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	long pid;
	while (f && fscanf(f, "%ld", &pid) == 1) {
		n++;
		if (kill_them && pid > 1)
			kill_member((pid_t)pid, ver, ctrl, rel);
	}
	_cleanup_closedir_ DIR *d = depth < 8 ? opendir(dir) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < sizeof(path))
			n += members(path, ver, ctrl, rel, kill_them, depth + 1);
	}
	return n;
}

/* The member listing of spec's cgroup: the unified directory (v2), or on v1 the freezer hierarchy's, which
 * every sandbox process joins (util_cgroup_attach), so it lists them all. *ret_empty: nothing in it. */
static int listing(const char *spec, char dir[512], int *ret_ver, const char **ret_rel, bool *ret_empty)
{
	int r = spec_parse(spec, ret_ver, ret_rel);
	if (r < 0)
		return r;
	r = cg_path(dir, 512, *ret_ver, "freezer", *ret_rel, NULL);
	if (r < 0)
		return r;
	*ret_empty = access(dir, F_OK) < 0 || members(dir, *ret_ver, "freezer", *ret_rel, false, 0) == 0;
	return 0;
}

int util_cgroup_empty(const char *spec, bool *ret_empty)
{
	char dir[512];
	const char *rel;
	int ver;
	return listing(spec, dir, &ver, &rel, ret_empty);
}

int util_cgroup_kill(const char *spec, bool *ret_empty)
{
	char dir[512];
	const char *rel;
	int ver, r = listing(spec, dir, &ver, &rel, ret_empty);
	if (r < 0 || *ret_empty)
		return r;
	bool killed = false;
	if (ver == 2) {
		char path[600];
		snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
		killed = write_str(path, "1") == 0;
	}
	/* cgroup v1, or v2 before 5.14 (no cgroup.kill): each member by pidfd. A process forked after the list
	 * was read is caught by the next call; in a jail, the death of PID 1 takes its pid namespace along. */
	if (!killed)
		(void)members(dir, ver, "freezer", rel, true, 0);
	/* A frozen cgroup keeps the killed from dying. */
	(void)cg_write(ver, "freezer", rel, ver == 2 ? "cgroup.freeze" : "freezer.state", ver == 2 ? "0" : "THAWED");
	return 0;
}

static int v2_enable(const char *dir)
{
	char path[512], avail[512];
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	int r = read_line(path, avail, sizeof(avail));
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	static const char *const want[] = { "+memory", "+cpu", "+pids" };
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		if (!strstr(avail, want[i] + 1))
			continue;
		r = write_str(path, want[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int set_limits(int ver, const char *rel, const struct util_cgroup_limits *lim, const char **ret_file)
{
	char val[64];
	int r;

	if (lim->memory_bytes) {
		snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->memory_bytes);
		*ret_file = ver == 2 ? "memory.max" : "memory.limit_in_bytes";
		r = cg_write(ver, "memory", rel, *ret_file, val);
		if (r < 0)
			return r;
		/* Without swap limited too the memory limit leaks into swap; absent files mean no swap accounting. */
		if (ver == 2)
			r = cg_write(2, NULL, rel, "memory.swap.max", "0");
		else
			r = cg_write(1, "memory", rel, "memory.memsw.limit_in_bytes", val);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	if (lim->cpus) {
		unsigned long long quota = (unsigned long long)lim->cpus * CPU_PERIOD_US;
		if (ver == 2) {
			snprintf(val, sizeof(val), "%llu %u", quota, CPU_PERIOD_US);
			*ret_file = "cpu.max";
			r = cg_write(2, NULL, rel, "cpu.max", val);
		} else {
			/* The period is the kernel's default (every cpu cgroup starts with it, and nothing of ours
			 * writes another): only the quota is written. Each write walks every cpu cgroup of the host
			 * (the kernel checks the hierarchy's bandwidth), thousands with as many live sandboxes. */
			snprintf(val, sizeof(val), "%llu", quota);
			*ret_file = "cpu.cfs_quota_us";
			r = cg_write(1, "cpu", rel, *ret_file, val);
		}
		if (r < 0)
			return r;
	}
	snprintf(val, sizeof(val), "%u", lim->pids_max);
	*ret_file = "pids.max";
	return cg_write(ver, "pids", rel, "pids.max", val);
}

int util_cgroup_create(const char *id, const struct util_cgroup_limits *lim, char *ret_spec, size_t speclen,
                       char *errbuf, size_t errlen)
{
	char spec[UTIL_CGROUP_SPEC_MAX], path[512];
	const char *rel;
	int ver = detect_version(), r;

	if (ver < 0) {
		set_err(errbuf, errlen, "cgroups: neither a cgroup v2 tree nor v1 pids+freezer under " CG_ROOT);
		return ver;
	}
	if ((size_t)snprintf(spec, sizeof(spec), "v%d:%s/%s", ver, ver == 2 ? "space.slice" : "space", id) >=
	    sizeof(spec) || strlen(spec) >= speclen)
		return -ENAMETOOLONG;
	rel = spec + 3;

	if (ver == 2) {
		r = v2_enable(CG_ROOT);
		if (r >= 0 && mkdir(CG_ROOT "/space.slice", 0755) < 0 && errno != EEXIST)
			r = -errno;
		if (r >= 0)
			r = v2_enable(CG_ROOT "/space.slice");
		if (r < 0) {
			set_err(errbuf, errlen, "cgroup v2: prepare " CG_ROOT "/space.slice: %s", strerror(-r));
			return r;
		}
		cg_path(path, sizeof(path), 2, NULL, rel, NULL);
		/* A leftover of a crashed run with the same id is removed when empty. */
		if (rmdir_tree(path) < 0 || mkdir(path, 0755) < 0) {
			r = -errno;
			set_err(errbuf, errlen, "cgroup v2: mkdir %s: %s", path, strerror(errno));
			return r;
		}
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(v1_ctrls); i++) {
			const char *c = v1_ctrls[i];
			if (!v1_has(c)) {
				bool needed = (!strcmp(c, "memory") && lim->memory_bytes) ||
				              (!strcmp(c, "cpu") && lim->cpus);
				if (!needed)
					continue;
				set_err(errbuf, errlen, "cgroup v1: no %s hierarchy under " CG_ROOT, c);
				util_cgroup_remove(spec, 0);
				return -EOPNOTSUPP;
			}
			snprintf(path, sizeof(path), CG_ROOT "/%s/space", c);
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				r = -errno;
			else {
				cg_path(path, sizeof(path), 1, c, rel, NULL);
				r = rmdir_tree(path) < 0 || mkdir(path, 0755) < 0 ? -errno : 0;
			}
			if (r < 0) {
				set_err(errbuf, errlen, "cgroup v1: mkdir %s: %s", path, strerror(-r));
				util_cgroup_remove(spec, 0);
				return r;
			}
		}
	}

	const char *file = "";
	r = set_limits(ver, rel, lim, &file);
	if (r < 0) {
		set_err(errbuf, errlen, "cgroup v%d: set %s: %s", ver, file, strerror(-r));
		util_cgroup_remove(spec, 0);
		return r;
	}
	memcpy(ret_spec, spec, strlen(spec) + 1);
	return 0;
}

int util_cgroup_helpers_create(const char *spec)
{
	char path[512];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	const char *slash = strrchr(rel, '/');
	if (!slash)
		return -EINVAL;
	/* The parent ("space-helpers" or "space-helpers.slice"), then the sandbox's own. */
	r = cg_path(path, sizeof(path), ver, "freezer", rel, NULL);
	if (r < 0)
		return r;
	size_t cut = strlen(path) - strlen(slash);
	path[cut] = '\0';
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	path[cut] = '/';
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int util_cgroup_attach(const char *spec, pid_t pid)
{
	char val[32];
	int fds[ARRAY_SIZE(v1_ctrls)];
	size_t n;
	int r = util_cgroup_procs_open(spec, fds, ARRAY_SIZE(fds), &n);
	if (r < 0)
		return r;
	snprintf(val, sizeof(val), "%d", (int)pid);
	for (size_t i = 0; i < n; i++) {
		if (r == 0)
			r = write_value(fds[i], val);
		close(fds[i]);
	}
	return r;
}

int util_cgroup_procs_open(const char *spec, int *fds, size_t max, size_t *ret_n)
{
	char path[512];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	*ret_n = 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < (ver == 2 ? 1 : ARRAY_SIZE(v1_ctrls)); i++) {
		r = cg_path(path, sizeof(path), ver, ver == 2 ? NULL : v1_ctrls[i], rel, "cgroup.procs");
		if (r < 0)
			goto fail;
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && ver == 1)
			continue; /* controller not used for this sandbox */
		if (fd < 0 || *ret_n == max) {
			r = fd < 0 ? -errno : -E2BIG;
			if (fd >= 0)
				close(fd);
			goto fail;
		}
		fds[(*ret_n)++] = fd;
	}
	return 0;
fail:
	while (*ret_n)
		close(fds[--*ret_n]);
	return r;
}

int util_cgroup_dir_fd(const char *spec)
{
	char path[512];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	if (ver != 2)
		return -EOPNOTSUPP;
	r = cg_path(path, sizeof(path), 2, NULL, rel, NULL);
	if (r < 0)
		return r;
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int util_cgroup_freeze(const char *spec, bool frozen)
{
	char path[512], state[256];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	if (ver == 2)
		r = cg_write(2, NULL, rel, "cgroup.freeze", frozen ? "1" : "0");
	else
		r = cg_write(1, "freezer", rel, "freezer.state", frozen ? "FROZEN" : "THAWED");
	if (r < 0)
		return r;

	const char *want = ver == 2 ? (frozen ? "frozen 1" : "frozen 0") : (frozen ? "FROZEN" : "THAWED");
	r = cg_path(path, sizeof(path), ver, "freezer", rel, ver == 2 ? "cgroup.events" : "freezer.state");
	if (r < 0)
		return r;
	/* Polled, 1 ms at first and then less often: reading freezer.state takes the v1 freezer's one global
	 * lock, which a burst of pollers would fight over. */
	uint64_t deadline = util_now_ns() + 5000000000ULL;
	for (int i = 0; util_now_ns() < deadline; i++) {
		if (ver == 2) {
			/* cgroup.events has several lines; read it whole. */
			_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				return -errno;
			ssize_t n = read(fd, state, sizeof(state) - 1);
			if (n < 0)
				return -errno;
			state[n] = 0;
			if (strstr(state, want))
				return 0;
		} else {
			r = read_line(path, state, sizeof(state));
			if (r < 0)
				return r;
			if (!strcmp(state, want))
				return 0;
			/* v1 can get stuck in FREEZING: writing FROZEN again retries the stragglers. */
			if (frozen && i % 50 == 49)
				cg_write(1, "freezer", rel, "freezer.state", "FROZEN");
		}
		util_sleep_ms(i < 20 ? 1 : 10);
	}
	return -ETIMEDOUT;
}

int util_cgroup_remove(const char *spec, int timeout_ms)
{
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	uint64_t deadline = util_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
	size_t n = ver == 2 ? 1 : ARRAY_SIZE(v1_ctrls);
	int result = 0;

	for (size_t i = 0; i < n; i++) {
		const char *ctrl = ver == 2 ? NULL : v1_ctrls[i];
		char path[512];
		r = cg_path(path, sizeof(path), ver, ctrl, rel, NULL);
		if (r < 0)
			return r;
		/* A frozen cgroup keeps its processes from dying: thaw it first (no-op when absent). */
		if (ver == 2)
			cg_write(2, NULL, rel, "cgroup.freeze", "0");
		else if (!strcmp(ctrl, "freezer"))
			cg_write(1, "freezer", rel, "freezer.state", "THAWED");
		for (int attempt = 0;; attempt++) {
			r = rmdir_tree(path);
			if (r >= 0 || (r != -EBUSY && r != -ENOTEMPTY))
				break;
			if (util_now_ns() >= deadline)
				break;
			if (attempt % 20 == 0) {
				bool empty;
				(void)util_cgroup_kill(spec, &empty);
			}
			util_sleep_ms(1);
		}
		if (r < 0 && result == 0)
			result = r == -EBUSY || r == -ENOTEMPTY ? -ETIMEDOUT : r;
	}
	return result;
}

int util_cgroup_read(const char *spec, const char *ctrl, const char *file, char *buf, size_t len)
{
	char path[512];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	r = cg_path(path, sizeof(path), ver, ctrl, rel, file);
	return r < 0 ? r : read_line(path, buf, len);
}

int util_cgroup_oom_kills(const char *spec, uint64_t *ret_count)
{
	char path[512];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	/* v2: memory.events counts the subtree's kills; v1: memory.oom_control has the same line since 4.13. */
	r = cg_path(path, sizeof(path), ver, "memory", rel, ver == 2 ? "memory.events" : "memory.oom_control");
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[1024];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v;
		if (!strncmp(line, "oom_kill ", 9) && sscanf(line + 9, "%llu", &v) == 1) {
			*ret_count = v;
			return 0;
		}
	}
	return -EOPNOTSUPP; /* a kernel older than the counter */
}

/* The value of "key N" lines in a flat-keyed file (memory.stat, cpu.stat) read into buf; -ENOENT if absent. */
static int keyed(const char *buf, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		unsigned long long v;
		if (!strncmp(l, key, klen) && l[klen] == ' ' && sscanf(l + klen + 1, "%llu", &v) == 1) {
			*ret = v;
			return 0;
		}
	}
	return -ENOENT;
}

static int read_all(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got < len - 1) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = 0;
	return 0;
}

/* v1 without cpuacct in the cpu hierarchy: the CPU time of the cgroup's processes, each with the children
 * it reaped (so an exited process counts once, in whoever waited for it: in a sandbox, one of its own). */
static int v1_cpu_of_members(const char *rel, uint64_t *ret_ns)
{
	char path[512];
	int r = cg_path(path, sizeof(path), 1, "cpu", rel, "cgroup.procs");
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "r");
	if (!f)
		return -errno;
	fd = -1;
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks = 0;
	int pid;
	while (fscanf(f, "%d", &pid) == 1) {
		struct util_proc_stat ps;
		if (util_proc_stat(pid, &ps) == 0)
			ticks += ps.utime + ps.stime + ps.cutime + ps.cstime;
	}
	fclose(f);
	*ret_ns = ticks * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
	return 0;
}

int util_cgroup_usage(const char *spec, struct util_cgroup_usage *ret)
{
	char path[512], buf[16384];
	const char *rel;
	int ver, r = spec_parse(spec, &ver, &rel);
	if (r < 0)
		return r;
	struct util_cgroup_usage u = { 0 };
	uint64_t v;
	/* CPU: v2 keeps it in cpu.stat whatever the controllers; v1 in cpuacct, when it shares the cpu
	 * hierarchy (cpu,cpuacct), else it is summed over the members. */
	if (ver == 2) {
		if ((r = cg_path(path, sizeof(path), 2, NULL, rel, "cpu.stat")) < 0 || (r = read_all(path, buf, sizeof(buf))) < 0)
			return r;
		if (keyed(buf, "usage_usec", &v) == 0)
			u.cpu_ns = v * 1000;
	} else {
		if ((r = cg_path(path, sizeof(path), 1, "cpu", rel, "cpuacct.usage")) < 0)
			return r;
		if (read_line(path, buf, sizeof(buf)) == 0 && sscanf(buf, "%" SCNu64, &v) == 1)
			u.cpu_ns = v;
		else if ((r = v1_cpu_of_members(rel, &u.cpu_ns)) < 0)
			return r;
	}
	if ((r = cg_path(path, sizeof(path), ver, "memory", rel, ver == 2 ? "memory.current" : "memory.usage_in_bytes")) < 0 ||
	    (r = read_line(path, buf, sizeof(buf))) < 0)
		return r;
	if (sscanf(buf, "%" SCNu64, &u.memory_bytes) != 1)
		return -EPROTO;
	if ((r = cg_path(path, sizeof(path), ver, "memory", rel, "memory.stat")) < 0 || (r = read_all(path, buf, sizeof(buf))) < 0)
		return r;
	/* v1's hierarchical totals (total_*) include sub-cgroups, as v2's figures do. */
	if (keyed(buf, ver == 2 ? "file" : "total_cache", &v) == 0 || keyed(buf, "cache", &v) == 0)
		u.memory_file_bytes = v;
	if (keyed(buf, ver == 2 ? "shmem" : "total_shmem", &v) == 0 || keyed(buf, "shmem", &v) == 0)
		u.memory_shmem_bytes = v;
	*ret = u;
	return 0;
}
