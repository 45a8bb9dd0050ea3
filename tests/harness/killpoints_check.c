/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The invariant checker of the kill -9 harness for killpoints_worker: after the workers are gone, through
 * the public API as a user would (an explicit reap, then `space rm` of everything), on $SPACE_STATE_DIR:
 *   no doubled row    an id is listed once;
 *   no lost sandbox   every sandbox whose create or fork was confirmed in $KILLPOINTS_JOURNAL, and that no
 *                     worker began to destroy, is still listed;
 *   none mis-stated   a row says running only if its process runs and its agent answers an exec; a failed
 *                     row has a reason; no row is left "creating" (nobody is creating any more);
 *   removable         every row is removed by space_sandbox_remove, every checkpoint by
 *                     space_checkpoint_remove, and the listing is empty after;
 *   nothing leaked    no subvolume under the pool's sandboxes/ and checkpoints/, no uid slot of the state
 *                     directory under /run/space-uids, no process and no cgroup and no mount naming a
 *                     journalled sandbox id.
 * Each failed invariant prints "INVARIANT <name>: <what>"; the last line is
 * "killpoints-check: N checks, F failed" and the exit status is 0 only when F is 0.
 */
#include <dirent.h>
#include <signal.h>

#include "../api/apitest.h"

#define MAX_IDS 4096

static char ids[MAX_IDS][32];
static bool confirmed[MAX_IDS], destroy_begun[MAX_IDS];
static int nids;

static int id_index(const char *id)
{
	for (int i = 0; i < nids; i++)
		if (!strcmp(ids[i], id))
			return i;
	if (nids == MAX_IDS || strncmp(id, "sb-", 3) || strlen(id) >= 32)
		return -1;
	snprintf(ids[nids], 32, "%s", id);
	return nids++;
}

static void read_journal(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		printf("INVARIANT journal: cannot read %s\n", path);
		CHECK(!"journal");
		return;
	}
	char line[512], who[32], op[16], phase[8], target[64], rc[32], extra[64];
	while (fgets(line, sizeof(line), f)) {
		extra[0] = rc[0] = '\0';
		int n = sscanf(line, "%31s %15s %7s %63s %31s %63s", who, op, phase, target, rc, extra);
		if (n < 4)
			continue;
		bool ok = !strcmp(rc, "rc=0");
		if (!strcmp(op, "create") && !strcmp(phase, "end") && ok) {
			int i = id_index(target);
			if (i >= 0)
				confirmed[i] = true;
		} else if (!strcmp(op, "fork") && !strcmp(phase, "end") && ok && n == 6) {
			int i = id_index(extra);
			if (i >= 0)
				confirmed[i] = true;
		} else if (!strcmp(op, "destroy") && !strcmp(phase, "begin")) {
			int i = id_index(target);
			if (i >= 0)
				destroy_begun[i] = true;
		} else if (!strncmp(target, "sb-", 3)) {
			id_index(target);
		}
	}
	fclose(f);
}

/* Opens the sandbox and runs `true` in a child with a deadline: a frozen or dead agent cannot hang the
 * check. Returns 0 when it answered. */
static int probe(const char *id)
{
	pid_t pid = fork();
	if (pid == 0) {
		alarm(20);
		space_ctx *ctx = api_ctx(NULL);
		space_sandbox *sb = NULL;
		if (space_sandbox_open(ctx, id, &sb) < 0)
			_exit(2);
		struct api_capture out;
		int code = -1;
		int r = api_sh(sb, "echo alive", &out, &code);
		_exit(r == 0 && code == 0 && !strcmp(out.out, "alive\n") ? 0 : 3);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static int count_entries(const char *path, char *first, size_t len)
{
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			if (!n++)
				snprintf(first, len, "%s", e->d_name);
		}
	closedir(d);
	return n;
}

/* Host leftovers naming an id: processes (cmdline), cgroups (any hierarchy's space/<id> or space-helpers/<id>), mounts. */
static void check_host(const char *state, const char *pool)
{
	char path[4200], first[256] = "";
	int n;
	snprintf(path, sizeof(path), "%s/sandboxes", pool);
	if ((n = count_entries(path, first, sizeof(first)))) {
		printf("INVARIANT leak: %d sandbox subvolumes left (%s)\n", n, first);
		CHECK(!"sandbox subvolumes");
	}
	snprintf(path, sizeof(path), "%s/checkpoints", pool);
	if ((n = count_entries(path, first, sizeof(first)))) {
		printf("INVARIANT leak: %d checkpoint subvolumes left (%s)\n", n, first);
		CHECK(!"checkpoint subvolumes");
	}
	DIR *d = opendir("/run/space-uids");
	struct dirent *e;
	size_t sl = strlen(state);
	while (d && (e = readdir(d))) {
		char owner[512] = "";
		snprintf(path, sizeof(path), "/run/space-uids/%s", e->d_name);
		FILE *f = e->d_name[0] != '.' ? fopen(path, "re") : NULL;
		if (f) {
			if (!fgets(owner, sizeof(owner), f))
				owner[0] = '\0';
			fclose(f);
		}
		if (!strncmp(owner, state, sl) && owner[sl] == ' ') {
			printf("INVARIANT leak: uid slot %s held by \"%s\"\n", e->d_name, owner);
			CHECK(!"uid slot");
		}
	}
	if (d)
		closedir(d);
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char cmd[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		if (len <= 0)
			continue;
		for (ssize_t i = 0; i < len; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		cmd[len] = '\0';
		for (int i = 0; i < nids; i++)
			if (strstr(cmd, ids[i])) {
				printf("INVARIANT leak: process %s runs for %s: %s\n", e->d_name, ids[i], cmd);
				CHECK(!"process");
			}
	}
	if (d)
		closedir(d);
	/* Any process still holding a file of the state directory (a creator's child that outlived it). */
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
		DIR *fds = opendir(path);
		struct dirent *f;
		while (fds && (f = readdir(fds))) {
			char link[4200], target[4096];
			snprintf(link, sizeof(link), "%s/%s", path, f->d_name);
			ssize_t len = readlink(link, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			if (!strncmp(target, state, sl) && target[sl] == '/') {
				printf("INVARIANT leak: process %s holds %s\n", e->d_name, target);
				CHECK(!"process holding the state directory");
				break;
			}
		}
		if (fds)
			closedir(fds);
	}
	if (d)
		closedir(d);
	static const char *const hier[] = { "", "/pids", "/memory", "/cpu", "/freezer", "/unified", NULL };
	/* The sandbox's own cgroup and its helpers' (space-helpers/<id>, util/stop.h). */
	static const char *const parents[] = { "space", "space-helpers", "space.slice", "space-helpers.slice", NULL };
	for (int i = 0; i < nids; i++) {
		for (const char *const *h = hier; *h; h++) {
			for (const char *const *p = parents; *p; p++) {
				snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s/%s", *h, *p, ids[i]);
				if (access(path, F_OK) == 0) {
					printf("INVARIANT leak: cgroup %s\n", path);
					CHECK(!"cgroup");
				}
			}
		}
	}
	FILE *m = fopen("/proc/mounts", "re");
	char line[4096];
	while (m && fgets(line, sizeof(line), m))
		for (int i = 0; i < nids; i++)
			if (strstr(line, ids[i])) {
				printf("INVARIANT leak: mount %s", line);
				CHECK(!"mount");
			}
	if (m)
		fclose(m);
}

/* True when a process's command line holds text. */
static bool process_with(const char *text)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool found = false;
	while (d && !found && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[300], cmd[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		for (ssize_t i = 0; i < len; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		cmd[len > 0 ? len : 0] = '\0';
		found = strstr(cmd, text) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *journal = getenv("KILLPOINTS_JOURNAL"), *state = getenv("SPACE_STATE_DIR");
	if (!journal || !state) {
		fprintf(stderr, "killpoints-check: needs KILLPOINTS_JOURNAL and SPACE_STATE_DIR\n");
		return 2;
	}
	read_journal(journal);
	space_ctx *ctx = api_ctx(NULL);
	struct space_pool_info *pi = NULL;
	CHECK(space_pool_get_info(ctx, &pi) == 0);
	char pool[4096] = "";
	if (pi)
		snprintf(pool, sizeof(pool), "%s", pi->path);
	space_pool_info_free(pi);

	/* The explicit reap a user (or space serve) runs after a crash. */
	int reaped = space_sandbox_reap(ctx);
	CHECK(reaped >= 0);
	struct space_sandbox_info **l = NULL;
	size_t n = 0;
	CHECK(space_sandbox_list(ctx, &l, &n) == 0);
	int running = 0, failed = 0, other = 0;
	for (size_t i = 0; i < n; i++) {
		const struct space_sandbox_info *s = l[i];
		id_index(s->id);
		printf("killpoints-check: row %s %s pid %d%s%s\n", s->id, space_sandbox_status_name(s->status), s->pid,
		       s->reason[0] ? ": " : "", s->reason);
		for (size_t j = i + 1; j < n; j++)
			if (!strcmp(s->id, l[j]->id)) {
				printf("INVARIANT doubled: %s is listed twice\n", s->id);
				CHECK(!"doubled");
			}
		if (s->status == SPACE_SANDBOX_RUNNING) {
			running++;
			int p = probe(s->id);
			if (p != 0 || s->pid <= 0 || kill(s->pid, 0) < 0) {
				printf("INVARIANT mis-stated: %s says running (pid %d) but %s\n", s->id, s->pid,
				       p == 2 ? "does not open" : p == 3 ? "its agent does not run a command" :
				       p == 100 + SIGALRM ? "its agent hangs (frozen?)" : "its process is gone");
				CHECK(!"running means running");
			}
		} else if (s->status == SPACE_SANDBOX_FAILED) {
			failed++;
			if (!s->reason[0]) {
				printf("INVARIANT mis-stated: %s failed without a reason\n", s->id);
				CHECK(!"failed has a reason");
			}
		} else {
			other++;
			printf("INVARIANT mis-stated: %s is %s (%s) after the reap, with no worker left\n", s->id,
			       space_sandbox_status_name(s->status), s->reason);
			CHECK(!"no stale creating/paused rows");
		}
	}
	for (int i = 0; i < nids; i++) {
		if (!confirmed[i] || destroy_begun[i])
			continue;
		bool listed = false;
		for (size_t j = 0; j < n; j++)
			listed |= !strcmp(l[j]->id, ids[i]);
		if (!listed) {
			printf("INVARIANT lost: %s was created (confirmed) and never destroyed, but is not listed\n", ids[i]);
			CHECK(!"lost");
		}
	}
	/* Sandboxes that run with no row: a user cannot see them, and `space rm` cannot end them. */
	for (int i = 0; i < nids; i++) {
		bool listed = false;
		for (size_t j = 0; j < n; j++)
			listed |= !strcmp(l[j]->id, ids[i]);
		char pattern[64];
		snprintf(pattern, sizeof(pattern), "--hostname %s", ids[i]);
		if (!listed && process_with(pattern)) {
			int r = space_sandbox_remove(ctx, ids[i]);
			printf("INVARIANT lost: %s runs (its agent is alive) but has no row; space_sandbox_remove: %s\n",
			       ids[i], r ? space_strerror(r) : "ok");
			CHECK(!"no running sandbox without a row");
		}
	}
	printf("killpoints-check: %zu rows after the reap (%d reaped): %d running, %d failed, %d other; %d ids "
	       "journalled\n", n, reaped, running, failed, other, nids);

	/* Everything goes, as `space rm` of each would do; then nothing may be left. */
	for (size_t i = 0; i < n; i++) {
		int r = space_sandbox_remove(ctx, l[i]->id);
		char pattern[64];
		snprintf(pattern, sizeof(pattern), "--hostname %s", l[i]->id);
		if (r == 0 && process_with(pattern)) {
			printf("INVARIANT removable: space_sandbox_remove %s returned 0 but its agent still runs\n", l[i]->id);
			CHECK(!"removed means gone");
		}
		if (r < 0) {
			printf("INVARIANT removable: space_sandbox_remove %s: %s: %s\n", l[i]->id, space_strerror(r),
			       space_ctx_last_error(ctx));
			CHECK(!"removable");
		}
	}
	space_sandbox_info_list_free(l);
	struct space_checkpoint_info **cl = NULL;
	size_t ncp = 0;
	CHECK(space_checkpoint_list(ctx, NULL, &cl, &ncp) == 0);
	for (size_t i = 0; i < ncp; i++) {
		int r = space_checkpoint_remove(ctx, cl[i]->id);
		if (r < 0) {
			printf("INVARIANT removable: checkpoint %s: %s\n", cl[i]->id, space_ctx_last_error(ctx));
			CHECK(!"checkpoint removable");
		}
	}
	space_checkpoint_info_list_free(cl);
	l = NULL;
	n = 0;
	CHECK(space_sandbox_list(ctx, &l, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		printf("INVARIANT removable: %s still listed (%s) after its removal\n", l[i]->id,
		       space_sandbox_status_name(l[i]->status));
		CHECK(!"listing empty");
	}
	space_sandbox_info_list_free(l);
	check_host(state, pool);
	space_ctx_free(ctx);
	return check_summary("killpoints-check");
}
