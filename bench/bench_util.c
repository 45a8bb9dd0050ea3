/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the benchmarks (bench_util.h). */
#include "bench_util.h"

#include <arpa/inet.h>
#include <btrfsutil.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <math.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

extern char **environ;

/* ---- series ---------------------------------------------------------------------------------------- */

int bu_series_add(struct bu_series *s, double ms)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		double *p = realloc(s->ms, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->ms = p;
		s->cap = cap;
	}
	s->ms[s->n++] = ms;
	return 0;
}

void bu_series_free(struct bu_series *s)
{
	free(s->ms);
	*s = (struct bu_series){ 0 };
}

static int cmp_ms(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bu_pct(struct bu_series *s, double pct)
{
	if (!s->n)
		return NAN;
	qsort(s->ms, s->n, sizeof(double), cmp_ms);
	size_t i = (size_t)(pct / 100.0 * (double)s->n + 0.999999);
	i = i < 1 ? 1 : i > s->n ? s->n : i;
	return s->ms[i - 1];
}

double bu_ms_since(uint64_t t0_ns)
{
	return (double)(util_now_ns() - t0_ns) / 1e6;
}

/* ---- the busybox tree ------------------------------------------------------------------------------ */

int bu_busybox_tree(const char *root)
{
	static const char *const dirs[] = { "bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "run", "root",
					    "usr/bin", "usr/sbin" };
	char p[4200], line[256];
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		if (util_mkdir_p(p, 0755) < 0)
			return -errno;
	}
	snprintf(p, sizeof(p), "%s/tmp", root);
	(void)chmod(p, 01777);
	snprintf(p, sizeof(p), "%s/bin/busybox", root);
	int r = util_read_file("/bin/busybox", 64u << 20, &data, &len);
	if (r < 0 || (r = util_write_file_atomic(p, data, len, 0755)) < 0)
		return r;
	snprintf(p, sizeof(p), "%s/bin/busybox --list-full", root);
	FILE *f = popen(p, "re");
	if (!f)
		return -errno;
	int links = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || strstr(line, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, line);
		if (symlink("/bin/busybox", p) == 0)
			links++;
	}
	if (pclose(f) != 0 || links == 0)
		return -EPROTO;
	static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
	static const char group[] = "root:x:0:\nnogroup:x:65534:\n";
	snprintf(p, sizeof(p), "%s/etc/passwd", root);
	if ((r = util_write_file_atomic(p, passwd, sizeof(passwd) - 1, 0644)) < 0)
		return r;
	snprintf(p, sizeof(p), "%s/etc/group", root);
	return util_write_file_atomic(p, group, sizeof(group) - 1, 0644);
}

/* ---- the state directory --------------------------------------------------------------------------- */

int bu_env_open(struct bu_env *e, const char *state, uint64_t pool_bytes, const char *template_name, char *why,
		size_t why_len)
{
	char tree[128];
	int r;
	*e = (struct bu_env){ 0 };
	snprintf(e->template_name, sizeof(e->template_name), "%s", template_name);
	snprintf(e->dir, sizeof(e->dir), "/tmp/space-bench-fleet-XXXXXX");
	if (!mkdtemp(e->dir))
		return util_errf(why, why_len, -errno, "mkdtemp");
	if (state)
		snprintf(e->state, sizeof(e->state), "%s", state);
	else {
		snprintf(e->state, sizeof(e->state), "%s/state", e->dir);
		e->made_state = true;
	}
	snprintf(tree, sizeof(tree), "%s/tree", e->dir);
	if ((r = bu_busybox_tree(tree)) < 0)
		return util_errf(why, why_len, r, "busybox tree in %s", tree);
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = e->state;
	if ((r = space_ctx_new(&co, &e->ctx)) < 0)
		return util_errf(why, why_len, r, "context");
	if (e->made_state) {
		struct space_init_options io = SPACE_INIT_OPTIONS_INIT;
		io.loop_pool_size = pool_bytes;
		io.isolation = "jail";
		if ((r = space_init(e->ctx, &io)) < 0)
			return util_errf(why, why_len, r, "no loop-mounted btrfs pool here: %s",
					 space_ctx_last_error(e->ctx));
	}
	struct space_template_import_options ti = SPACE_TEMPLATE_IMPORT_OPTIONS_INIT;
	ti.name = e->template_name;
	ti.rootfs = tree;
	if ((r = space_template_import(e->ctx, &ti)) < 0)
		return util_errf(why, why_len, r, "import: %s", space_ctx_last_error(e->ctx));
	e->imported = true;
	util_rm_rf(tree);
	return 0;
}

int bu_env_close(struct bu_env *e)
{
	int r = 0;
	if (!e->ctx)
		goto rm;
	if (e->imported) {
		(void)space_template_set_warm_pool(e->ctx, e->template_name, 0);
		if (space_template_remove(e->ctx, e->template_name, true) < 0) {
			fprintf(stderr, "bench: remove template: %s\n", space_ctx_last_error(e->ctx));
			r = -1;
		}
	}
	if (e->made_state && space_pool_unmount(e->ctx) < 0) {
		fprintf(stderr, "bench: unmount pool: %s\n", space_ctx_last_error(e->ctx));
		r = -1;
	}
	space_ctx_free(e->ctx);
	e->ctx = NULL;
	if (e->made_state) {
		char pool[160];
		snprintf(pool, sizeof(pool), "%s/pool", e->state);
		/* Never recurse into a pool that is still mounted (say, after a half-done init). */
		if (umount2(pool, 0) < 0 && errno != EINVAL && errno != ENOENT) {
			fprintf(stderr, "bench: %s still mounted (%m): %s left in place\n", pool, e->dir);
			return -1;
		}
	}
rm:
	if (e->dir[0] && util_rm_rf(e->dir) < 0)
		r = -1;
	return r;
}

/* ---- the bubblewrap peer --------------------------------------------------------------------------- */

static int subvol_delete(const char *dir, const char *name)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct btrfs_ioctl_vol_args va = { 0 };
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (dfd < 0 || ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &va) < 0)
		return -errno;
	return 0;
}

int bu_peer_open(struct bu_peer *p, space_ctx *ctx, const char *template_name, const char *bwrap, char *why,
		 size_t why_len)
{
	struct space_template_info *ti = NULL;
	struct space_pool_info *pi = NULL;
	int r;
	char path[sizeof(p->bwrap)];
	snprintf(path, sizeof(path), "%s", bwrap); /* bwrap may be p->bwrap itself */
	*p = (struct bu_peer){ 0 };
	snprintf(p->bwrap, sizeof(p->bwrap), "%s", path);
	bwrap = p->bwrap;
	if (access(bwrap, X_OK) < 0)
		return util_errf(why, why_len, -ENOENT, "peer missing: %s (install bubblewrap)", bwrap);
	if ((r = space_template_get(ctx, template_name, &ti)) < 0 || (r = space_pool_get_info(ctx, &pi)) < 0) {
		space_template_info_free(ti);
		return util_errf(why, why_len, r, "template or pool: %s", space_ctx_last_error(ctx));
	}
	char img[4200], mnt[64] = "/tmp/space-bench-peer-XXXXXX", runs[4200];
	snprintf(img, sizeof(img), "%s/rootfs.ext4", ti->path);
	snprintf(p->base, sizeof(p->base), "%s/bench-peer-%d", pi->path, (int)getpid());
	snprintf(runs, sizeof(runs), "%s/bench-peer-%d-runs", pi->path, (int)getpid());
	space_template_info_free(ti);
	space_pool_info_free(pi);
	if (!mkdtemp(mnt))
		return util_errf(why, why_len, -errno, "mkdtemp");
	const char *const mount_argv[] = { "mount", "-o", "ro,loop", img, mnt, NULL };
	const char *const mkvol[] = { "btrfs", "-q", "subvolume", "create", p->base, NULL };
	char src[80];
	snprintf(src, sizeof(src), "%s/.", mnt);
	const char *const cp[] = { "cp", "-a", src, p->base, NULL };
	_cleanup_free_ char *out = NULL;
	if ((r = util_run(mount_argv, &out)) < 0) {
		rmdir(mnt);
		return util_errf(why, why_len, r, "mount %s: %s", img, out ? out : "");
	}
	if ((r = util_run(mkvol, NULL)) == 0 && (r = util_run(cp, NULL)) == 0 && mkdir(runs, 0700) < 0)
		r = -errno;
	(void)umount2(mnt, MNT_DETACH);
	rmdir(mnt);
	if (r < 0) {
		bu_peer_close(p);
		return util_errf(why, why_len, r, "copy the template's tree into %s", p->base);
	}
	snprintf(p->dir, sizeof(p->dir), "%s", runs);
	return 0;
}

void bu_peer_close(struct bu_peer *p)
{
	if (p->dir[0]) {
		DIR *d = opendir(p->dir);
		for (struct dirent *e; d && (e = readdir(d));)
			if (e->d_name[0] != '.')
				(void)subvol_delete(p->dir, e->d_name);
		if (d)
			closedir(d);
		rmdir(p->dir);
	}
	if (p->base[0]) {
		char parent[4200];
		snprintf(parent, sizeof(parent), "%s", p->base);
		char *slash = strrchr(parent, '/');
		if (slash) {
			*slash = '\0';
			(void)subvol_delete(parent, slash + 1);
		}
	}
	p->dir[0] = p->base[0] = '\0';
}

/* Whether the directory at path holds at most max entries (a missing one holds none). */
static bool dir_at_most(const char *path, unsigned max)
{
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return true;
	struct dirent *de;
	unsigned n = 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && ++n > max)
			return false;
	return true;
}

long bu_settle(const char *fs_path, const char *sandboxes_dir, unsigned keep, unsigned max_ms)
{
	uint64_t t0 = util_now_ns();
	for (;;) {
		uint64_t *ids = NULL;
		size_t n = 0;
		enum btrfs_util_error e = btrfs_util_deleted_subvolumes(fs_path, &ids, &n);
		free(ids);
		if (e != BTRFS_UTIL_OK)
			return -(errno ? errno : EIO);
		long waited = (long)((util_now_ns() - t0) / 1000000);
		if (n == 0 && (!sandboxes_dir || dir_at_most(sandboxes_dir, keep)))
			return waited;
		if (waited >= (long)max_ms)
			return -ETIMEDOUT;
		/* The cleaner runs after a transaction commits; on an idle file system that is up to 30 s away. */
		if (n)
			(void)btrfs_util_sync(fs_path);
		util_sleep_ms(20);
	}
}

int bu_peer_run(struct bu_peer *p, unsigned slot, double *ret_tti_ms, double *ret_destroy_ms)
{
	char name[32], snap[4300];
	snprintf(name, sizeof(name), "run-%u", slot);
	snprintf(snap, sizeof(snap), "%s/%s", p->dir, name);
	const char *argv[] = { p->bwrap,	 "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
			       "--unshare-uts",	 "--unshare-cgroup", "--bind",	     snap,	     "/",
			       "--proc",	 "/proc",	   "--dev",	      "/dev",	      "true",
			       NULL };
	uint64_t t0 = util_now_ns();
	_cleanup_close_ int dfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int src = open(p->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct btrfs_ioctl_vol_args_v2 va = { .fd = src };
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (dfd < 0 || src < 0 || ioctl(dfd, BTRFS_IOC_SNAP_CREATE_V2, &va) < 0)
		return -errno;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	pid_t pid;
	int r = -posix_spawn(&pid, p->bwrap, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	int status = 0;
	if (r == 0)
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR) {
				r = -errno;
				break;
			}
	*ret_tti_ms = bu_ms_since(t0);
	if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		r = -EPROTO;
	t0 = util_now_ns();
	struct btrfs_ioctl_vol_args dv = { 0 };
	snprintf(dv.name, sizeof(dv.name), "%s", name);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &dv) < 0 && r == 0)
		r = -errno;
	if (ret_destroy_ms)
		*ret_destroy_ms = bu_ms_since(t0);
	return r;
}

/* ---- what sandboxes hold on the host --------------------------------------------------------------- */

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

void bu_ids_sort(char (*ids)[32], size_t n)
{
	qsort(ids, n, sizeof(ids[0]), cmp_id);
}

/* True when text names one of the ids ("sb-" and 16 base32 characters). */
static bool names_id(const char *text, size_t len, char (*ids)[32], size_t n)
{
	for (const char *q = text; n && (q = memmem(q, len - (size_t)(q - text), "sb-", 3)); q += 3) {
		char key[32] = { 0 };
		size_t k = 0;
		while (k < 19 && q + k < text + len && k < sizeof(key) - 1) {
			key[k] = q[k];
			k++;
		}
		if (k == 19 && bsearch(key, ids, n, sizeof(ids[0]), cmp_id))
			return true;
	}
	return false;
}

static void note(struct bu_scan *s, const char *what, const char *detail)
{
	if (!s->first[0])
		snprintf(s->first, sizeof(s->first), "%s: %.200s", what, detail);
}

static uint64_t status_kib(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Whether one process belongs to a sandbox: its command line, its cgroup or one of its open files. */
static bool proc_names_id(const char *pid, char (*ids)[32], size_t n)
{
	char path[300], link[4200];
	_cleanup_free_ char *text = NULL;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	if (util_read_file(path, 65536, &text, &len) == 0 && names_id(text, len, ids, n))
		return true;
	free(text);
	text = NULL;
	snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
	if (util_read_file(path, 65536, &text, &len) == 0 && names_id(text, len, ids, n))
		return true;
	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	DIR *d = opendir(path);
	bool found = false;
	for (struct dirent *e; d && !found && (e = readdir(d));) {
		char fdp[600];
		snprintf(fdp, sizeof(fdp), "%s/%s", path, e->d_name);
		ssize_t k = readlink(fdp, link, sizeof(link) - 1);
		if (k > 0)
			found = names_id(link, (size_t)k, ids, n);
	}
	if (d)
		closedir(d);
	return found;
}

static void scan_procs(char (*ids)[32], size_t n, struct bu_scan *s)
{
	DIR *d = opendir("/proc");
	char self[16];
	snprintf(self, sizeof(self), "%d", (int)getpid());
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || !strcmp(e->d_name, self))
			continue;
		if (!proc_names_id(e->d_name, ids, n))
			continue;
		char path[300];
		_cleanup_free_ char *st = NULL, *cmd = NULL;
		s->procs++;
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		if (util_read_file(path, 65536, &st, NULL) == 0)
			s->rss_kib += status_kib(st, "VmRSS:");
		free(st);
		st = NULL;
		snprintf(path, sizeof(path), "/proc/%s/smaps_rollup", e->d_name);
		if (util_read_file(path, 65536, &st, NULL) == 0)
			s->pss_kib += status_kib(st, "\nPss:");
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		if (util_read_file(path, 256, &cmd, NULL) == 0) {
			cmd[strcspn(cmd, "\n")] = '\0';
			char what[300];
			snprintf(what, sizeof(what), "process %s (%s)", e->d_name, cmd);
			note(s, what, "");
		}
	}
	if (d)
		closedir(d);
}

static void scan_cgroups(const char *dir, int depth, char (*ids)[32], size_t n, struct bu_scan *s)
{
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		char sub[4200];
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		if (names_id(e->d_name, strlen(e->d_name), ids, n)) {
			s->cgroups++;
			note(s, "cgroup", sub);
		} else if (depth > 1)
			scan_cgroups(sub, depth - 1, ids, n, s);
	}
	if (d)
		closedir(d);
}

static void scan_dir_names(const char *dir, char (*ids)[32], size_t n, unsigned *count, struct bu_scan *s,
			   const char *what)
{
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));)
		if (names_id(e->d_name, strlen(e->d_name), ids, n)) {
			(*count)++;
			note(s, what, e->d_name);
		}
	if (d)
		closedir(d);
}

void bu_scan(char (*ids)[32], size_t n, const char *subvol_dir, struct bu_scan *ret)
{
	struct bu_scan s = { 0 };
	_cleanup_free_ char *mi = NULL;
	size_t len;
	if (util_read_file("/proc/self/mountinfo", 64u << 20, &mi, &len) == 0)
		for (char *line = mi; line && *line;) {
			char *end = strchr(line, '\n');
			size_t l = end ? (size_t)(end - line) : strlen(line);
			if (names_id(line, l, ids, n)) {
				s.mounts++;
				char copy[256];
				snprintf(copy, sizeof(copy), "%.*s", (int)(l < 200 ? l : 200), line);
				note(&s, "mount", copy);
			}
			line = end ? end + 1 : NULL;
		}
	DIR *d = opendir("/sys/block");
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300];
		_cleanup_free_ char *bf = NULL;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		if (!strncmp(e->d_name, "loop", 4) && util_read_file(path, 8192, &bf, &len) == 0 &&
		    names_id(bf, len, ids, n)) {
			s.loops++;
			note(&s, "loop device", e->d_name);
		}
	}
	if (d)
		closedir(d);
	scan_cgroups("/sys/fs/cgroup", 4, ids, n, &s);
	scan_dir_names("/run/netns", ids, n, &s.netns, &s, "netns");
	if (subvol_dir)
		scan_dir_names(subvol_dir, ids, n, &s.subvols, &s, "subvolume");
	scan_procs(ids, n, &s);
	*ret = s;
}

uint64_t bu_mem_available_kib(void)
{
	_cleanup_free_ char *mi = NULL;
	if (util_read_file("/proc/meminfo", 65536, &mi, NULL) < 0)
		return 0;
	return status_kib(mi, "MemAvailable:");
}

/* ---- HTTP to `space serve` ------------------------------------------------------------------------- */

#define BU_RESPONSE_MAX (1u << 20)

int bu_http(uint16_t port, const char *key, const char *method, const char *path, const char *body, char **ret_body)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	char head[512];
	size_t blen = body ? strlen(body) : 0;
	int hn = snprintf(head, sizeof(head),
			  "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: %s\r\nConnection: close\r\n"
			  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			  method, path, key ? key : "", blen);
	if (hn < 0 || (size_t)hn >= sizeof(head))
		return -ENAMETOOLONG;
	int r = util_write_all(fd, head, (size_t)hn);
	if (r == 0 && blen)
		r = util_write_all(fd, body, blen);
	if (r < 0)
		return r;
	_cleanup_free_ char *buf = malloc(BU_RESPONSE_MAX + 1);
	if (!buf)
		return -ENOMEM;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, BU_RESPONSE_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0 || (len += (size_t)n) == BU_RESPONSE_MAX)
			break;
	}
	buf[len] = '\0';
	int status;
	char *sep = strstr(buf, "\r\n\r\n");
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !sep)
		return -EBADMSG;
	if (ret_body && !(*ret_body = strdup(sep + 4)))
		return -ENOMEM;
	return status;
}

uint16_t bu_free_port(void)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		return 0;
	return ntohs(sa.sin_port);
}

int bu_spawn_logged(const char *const argv[], const char *log, pid_t *ret_pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
	int r = posix_spawn(ret_pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return -r;
}
