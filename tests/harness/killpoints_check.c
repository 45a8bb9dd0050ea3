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
 *
 * Two more modes serve the helper kills (killpoints --victims / --after-kill), while the workers run:
 *   killpoints_check --victims   prints the processes of the state directory's running sandboxes, one a
 *                                line "LABEL PID COMM ID": the jail's PID 1 (agent, from the row), the log
 *                                writer (logcap: the space-logcap holding <state>/run/<id>/sandbox.log), the
 *                                egress gateway (gateway: <state>/run/<id>/gateway.pid) and the snapshot
 *                                helper (snapd: the space-snapd given --state <state> --sandbox <id>);
 *                                plus "serve PID COMM -" from the pid file $KILLPOINTS_SERVE_PID if set.
 *   killpoints_check --after     for the victim $KILLPOINTS_VICTIM: within 10 s, after a reap, its sandbox
 *                                converges: gone (a worker destroyed it), failed with a reason, or running
 *                                with an agent that runs a command and, for a killed gateway, snapshot
 *                                helper or log writer, a new one running (the reap starts it). Exit 0 if so.
 */
#include <dirent.h>
#include <limits.h>
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

/* /proc/PID/cmdline with each argument followed by a space; false when there is none to read. */
static bool read_cmdline(const char *pid, char *cmd, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, cmd, len - 1);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (!cmd[i])
			cmd[i] = ' ';
	cmd[n > 0 ? n : 0] = '\0';
	return n > 0;
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
		if (!read_cmdline(e->d_name, cmd, sizeof(cmd)))
			continue;
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
		char cmd[4096];
		found = read_cmdline(e->d_name, cmd, sizeof(cmd)) && strstr(cmd, text) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

static int read_comm(int pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	buf[ok ? strcspn(buf, "\n") : 0] = '\0';
	return ok ? 0 : -1;
}

static int read_pidfile(const char *path)
{
	FILE *f = fopen(path, "re");
	int pid = 0;
	if (f) {
		if (fscanf(f, "%d", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return pid;
}

static void print_victim(const char *label, int pid, const char *id)
{
	char comm[32];
	if (pid > 1 && read_comm(pid, comm, sizeof(comm)) == 0)
		printf("%s %d %s %s\n", label, pid, comm, id);
}

/* logcap: holds <state>/run/<id>/sandbox.log as fd 3; snapd: --state <state> --sandbox <id> in its cmdline. */
static void print_helpers(const char *state, const char *id)
{
	char want_log[4200], want_args[4200], run[PATH_MAX + 8], real[PATH_MAX];
	/* <state>/run links into the pool (docs/architecture.md): the writer's descriptor names the real path. */
	snprintf(run, sizeof(run), "%s/run", state);
	snprintf(want_log, sizeof(want_log), "%s/%s/sandbox.log", realpath(run, real) ? real : run, id);
	snprintf(want_args, sizeof(want_args), "--state %s --sandbox %s ", state, id);
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		char comm[32], path[300], target[4200], cmd[4096];
		if (pid <= 1 || read_comm(pid, comm, sizeof(comm)) < 0)
			continue;
		if (!strcmp(comm, "space-logcap")) {
			snprintf(path, sizeof(path), "/proc/%d/fd/3", pid);
			ssize_t n = readlink(path, target, sizeof(target) - 1);
			if (n > 0 && (target[n] = '\0', !strcmp(target, want_log)))
				printf("logcap %d %s %s\n", pid, comm, id);
		} else if (!strcmp(comm, "space-snapd")) {
			if (read_cmdline(e->d_name, cmd, sizeof(cmd)) && strstr(cmd, want_args))
				printf("snapd %d %s %s\n", pid, comm, id);
		}
	}
	if (d)
		closedir(d);
}

static int list_victims(const char *state)
{
	space_ctx *ctx = api_ctx(NULL);
	struct space_sandbox_info **l = NULL;
	size_t n = 0;
	if (space_sandbox_list(ctx, &l, &n) < 0)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		if (l[i]->status != SPACE_SANDBOX_RUNNING)
			continue;
		char path[4200];
		print_victim("agent", l[i]->pid, l[i]->id);
		snprintf(path, sizeof(path), "%s/run/%s/gateway.pid", state, l[i]->id);
		print_victim("gateway", read_pidfile(path), l[i]->id);
		print_helpers(state, l[i]->id);
	}
	space_sandbox_info_list_free(l);
	const char *serve = getenv("KILLPOINTS_SERVE_PID");
	if (serve)
		print_victim("serve", read_pidfile(serve), "-");
	space_ctx_free(ctx);
	return 0;
}

/* After the reap, a running sandbox whose gateway, snapshot helper or log writer was killed has a new one
 * (2), or not yet (0); 1 for the other victims. */
static int helper_after(space_ctx *ctx, const char *state, const char *label, const char *id, int killed)
{
	int now = -1;
	if (!strcmp(label, "gateway")) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/run/%s/gateway.pid", state, id);
		now = read_pidfile(path);
	} else if (!strcmp(label, "snapd")) {
		struct space_snapshot_policy p = SPACE_SNAPSHOT_POLICY_INIT;
		now = space_sandbox_get_snapshot_policy(ctx, id, &p) == 0 ? p.pid : 0;
	} else if (!strcmp(label, "logcap")) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/run/%s/logcap.pid", state, id);
		now = read_pidfile(path);
	}
	if (now < 0)
		return 1;
	return now > 0 && now != killed && kill(now, 0) == 0 ? 2 : 0;
}

/* The victim's sandbox converges within 10 s: gone, failed with a reason, or running and answering. */
static int after_kill(const char *state)
{
	const char *v = getenv("KILLPOINTS_VICTIM");
	char label[32], comm[32], id[64], last[600] = "";
	int pid;
	if (!v || sscanf(v, "%31s %d %31s %63s", label, &pid, comm, id) != 4)
		return 2;
	if (strncmp(id, "sb-", 3))
		return 0; /* not a sandbox's (space serve): the final check judges */
	space_ctx *ctx = api_ctx(NULL);
	int rc = 1;
	for (int t = 0; t < 20 && rc; t++) {
		if (t)
			usleep(500000);
		space_sandbox_reap(ctx);
		struct space_sandbox_info **l = NULL;
		size_t n = 0;
		if (space_sandbox_list(ctx, &l, &n) < 0) {
			snprintf(last, sizeof(last), "list: %s", space_ctx_last_error(ctx));
			continue;
		}
		const struct space_sandbox_info *s = NULL;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(l[i]->id, id))
				s = l[i];
		if (!s) {
			rc = 0;
			snprintf(last, sizeof(last), "gone");
		} else if (s->status == SPACE_SANDBOX_FAILED) {
			rc = s->reason[0] ? 0 : 1;
			snprintf(last, sizeof(last), "failed: %s", s->reason[0] ? s->reason : "(no reason)");
		} else if (s->status == SPACE_SANDBOX_RUNNING) {
			int p = probe(id), helper = helper_after(ctx, state, label, id, pid);
			rc = p == 0 && helper > 0 ? 0 : 1;
			snprintf(last, sizeof(last), "running, exec %s%s", p == 0 ? "works" : "FAILS",
				 helper == 0 ? ", but no new helper yet" : helper == 2 ? ", a new helper runs" : "");
		} else {
			snprintf(last, sizeof(last), "%s (%s)", space_sandbox_status_name(s->status), s->reason);
		}
		space_sandbox_info_list_free(l);
	}
	printf("killpoints-check: after the kill of %s %d (%s): %s %s\n", label, pid, comm, id, last);
	if (rc)
		printf("INVARIANT converges: %s did not converge in 10 s after its %s was killed: %s\n", id, label, last);
	space_ctx_free(ctx);
	return rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--victims"))
		return getenv("SPACE_STATE_DIR") ? list_victims(getenv("SPACE_STATE_DIR")) : 2;
	if (argc > 1 && !strcmp(argv[1], "--after"))
		return getenv("SPACE_STATE_DIR") ? after_kill(getenv("SPACE_STATE_DIR")) : 2;
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
