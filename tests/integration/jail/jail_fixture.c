/* SPDX-License-Identifier: Apache-2.0 */
#include "jail_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

static void skip(const char *why)
{
	printf("SKIP: %s\n", why);
	exit(77);
}

void fixture_require(void)
{
	if (geteuid() != 0)
		skip("jail tests need root");
	if (access("/dev/loop-control", R_OK | W_OK) < 0)
		skip("no /dev/loop-control");
	if (!util_have_program("mkfs.ext4"))
		skip("mkfs.ext4 (e2fsprogs) not installed");
	if (access("/bin/busybox", X_OK) < 0)
		skip("no static /bin/busybox (busybox-static)");
	char *s = NULL;
	if (util_read_file("/proc/sys/user/max_user_namespaces", 64, &s, NULL) == 0 && atoi(s) == 0) {
		free(s);
		skip("user namespaces disabled (user.max_user_namespaces = 0)");
	}
	free(s);
}

int fixture_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st < 0 ? -1 : WEXITSTATUS(st);
}

void fixture_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int fixture_init(struct fixture *f, const char *probe_path)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/var/tmp/space-jail-test-XXXXXX");
	if (!mkdtemp(f->dir))
		return -errno;
	snprintf(f->probe, sizeof(f->probe), "%s", probe_path ? probe_path : "");
	snprintf(f->image, sizeof(f->image), "%s/rootfs.ext4", f->dir);
	int r = fixture_sh("set -e; t=%s/tree; mkdir -p $t/bin $t/dev $t/proc $t/sys $t/tmp $t/run $t/root $t/etc $t/mnt;"
	                   "cp /bin/busybox $t/bin/busybox;"
	                   "for a in $(/bin/busybox --list); do [ -e $t/bin/$a ] || ln -s busybox $t/bin/$a; done;"
	                   "echo 'root:x:0:0:root:/root:/bin/sh' > $t/etc/passwd;"
	                   "echo 'root:x:0:' > $t/etc/group; chmod 1777 $t/tmp;"
	                   "if [ -n '%s' ]; then cp '%s' $t/bin/probe; fi;"
	                   "mkfs.ext4 -q -d $t -L rootfs %s 64M",
	                   f->dir, f->probe, f->probe, f->image);
	return r == 0 ? 0 : -EIO;
}

int fixture_copy_image(struct fixture *f, char *ret, size_t len)
{
	snprintf(ret, len, "%s/copy%d.ext4", f->dir, ++f->seq);
	return fixture_sh("cp --sparse=always %s %s", f->image, ret) == 0 ? 0 : -EIO;
}

void fixture_done(struct fixture *f)
{
	for (int i = 0; i < f->nlive; i++)
		jail_kill(&f->live[i], 5000);
	if (f->dir[0])
		util_rm_rf(f->dir);
}

int fixture_start(struct fixture *f, const char *image, const char *script, const struct jail_config *limits,
                  struct jail_info *ret, char *ret_log, size_t loglen)
{
	snprintf(ret_log, loglen, "%s/log%d", f->dir, ++f->seq);
	int log = open(ret_log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	CHECK(log >= 0, "open log: %m");
	const char *argv[] = { "sh", "-c", script, NULL };
	struct jail_config cfg = { 0 };
	if (limits)
		cfg = *limits;
	char id[64];
	snprintf(id, sizeof(id), "sb-test-%d-%d", (int)getpid(), f->seq);
	cfg.id = id;
	cfg.rootfs_image = image;
	cfg.agent_path = "/bin/busybox";
	cfg.hostname = cfg.hostname ? cfg.hostname : "jailtest";
	cfg.listen_fd = -1;
	cfg.log_fd = log;
	cfg.argv_override = argv;
	char err[256];
	int r = jail_start(&cfg, ret, err, sizeof(err));
	close(log);
	CHECK(r == 0, "jail_start: %s (%s)", strerror(-r), err);
	if (f->nlive < (int)(sizeof(f->live) / sizeof(f->live[0])))
		f->live[f->nlive++] = *ret;
	return 0;
}

char *fixture_wait_log(const char *log, const char *needle, int timeout_ms)
{
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	for (;;) {
		char *s = NULL;
		/* Match whole lines only: the script text itself (in /proc/1/cmdline) may contain the needle. */
		if (util_read_file(log, 1 << 20, &s, NULL) == 0)
			for (char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
				if ((p == s || p[-1] == '\n') && p[strlen(needle)] == '\n')
					return s;
		if (util_now_ns() > deadline) {
			fprintf(stderr, "log %s without '%s':\n%s\n", log, needle, s ? s : "(unreadable)");
			free(s);
			return NULL;
		}
		free(s);
		fixture_sleep_ms(10);
	}
}

const char *fixture_value(const char *text, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			const char *v = p + klen + 1;
			size_t n = strcspn(v, "\n");
			if (n >= len)
				n = len - 1;
			memcpy(buf, v, n);
			buf[n] = 0;
			return buf;
		}
	}
	return NULL;
}

/* Lines of a file that contain needle. */
static int count_matching_lines(const char *path, const char *needle)
{
	char *s = NULL;
	int n = 0;
	if (util_read_file(path, 1 << 22, &s, NULL) < 0)
		return -1;
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
		n += strstr(line, needle) != NULL;
	free(s);
	return n;
}

static int count_dirs(const char *path, const char *prefix)
{
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_type == DT_DIR && !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

void fixture_host_state(const struct fixture *f, struct host_state *ret)
{
	memset(ret, 0, sizeof(*ret));
	/* Anything of ours in the host's mount table: the image, or the staging tree (the stager mounts the
	 * rootfs on /tmp and /tmp/dev, /tmp/proc, /tmp/sys in its private namespace; none may leak). */
	ret->mounts = count_matching_lines("/proc/self/mountinfo", f->dir);
	static const char *const staged[] = { " /tmp ", " /tmp/dev ", " /tmp/dev/", " /tmp/proc ", " /tmp/sys " };
	for (size_t i = 0; i < sizeof(staged) / sizeof(staged[0]); i++)
		ret->mounts += count_matching_lines("/proc/self/mountinfo", staged[i]);
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[512];
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		ret->loops += count_matching_lines(path, f->dir) > 0;
	}
	if (d)
		closedir(d);
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "sb-test-%d-", (int)getpid());
	static const char *const roots[] = { "/sys/fs/cgroup/space.slice", "/sys/fs/cgroup/memory/space",
		                             "/sys/fs/cgroup/cpu/space", "/sys/fs/cgroup/pids/space",
		                             "/sys/fs/cgroup/freezer/space" };
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		ret->cgroups += count_dirs(roots[i], prefix);
}
