/* SPDX-License-Identifier: Apache-2.0 */
/*
 * killpoints: a kill -9 harness. Runs N workers (commands sharing one state directory) and kills one of
 * them with SIGKILL at seeded random moments, restarting it each time, until K kills are done; then stops
 * the workers (SIGTERM: they end after their current operation) and runs the invariant checker, whose exit
 * status is the harness's. The seed fixes the kill schedule (which worker, after how long) and each
 * worker start's own seed; the moment a kill lands in an operation still depends on timing.
 *
 *   killpoints [--seed N] [--kills K] [--workers N] [--min-ms A] [--max-ms B] [--journal FILE]
 *              --worker 'COMMAND' [--check 'COMMAND'] [--victims 'COMMAND' [--after-kill 'COMMAND']]
 *
 * Commands run through /bin/sh -c "exec COMMAND", so the killed process is the worker itself (a kill of
 * the caller mid-call, as a crash would). Each gets in its environment:
 *   KILLPOINTS_WORKER   its index (0..N-1)          KILLPOINTS_SEED     a seed for this start
 *   KILLPOINTS_START    how many starts before it    KILLPOINTS_JOURNAL  a file to append to (O_APPEND,
 *                                                    one write per line: what it began and finished)
 * The checker gets KILLPOINTS_JOURNAL and KILLPOINTS_SEED (the run's). Output: "killpoints: seed S" first,
 * one line per kill, and "killpoints: K kills, W worker exits, check passed|failed (seed S)" last.
 * With --victims, a kill lands on a process of a sandbox instead of a worker: before each kill the victims
 * command prints the candidates, one a line, "LABEL PID COMM ID" (LABEL: what it is to the sandbox, agent,
 * logcap, gateway, snapd, serve; COMM: the process's /proc/PID/comm; ID: its sandbox or "-"); one is
 * picked by the seed and killed through a pidfd, after checking while the pidfd is held that its comm is
 * still COMM (the pid was not reused); the seed picks a kind (LABEL) first, then one of that kind. No candidate: a worker is killed, as without --victims. Then the
 * after-kill command runs with KILLPOINTS_VICTIM="LABEL PID COMM ID"; its failure is counted and printed
 * ("killpoints: after-kill check failed ..."), and fails the run. The last line then also says
 * "H helper kills, C after-kill checks (F failed)".
 * Exit: the checker's status (0 = invariants hold; 1 when an after-kill check failed), 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 16

static uint64_t rng_state;

/* splitmix64: small, seedable, the same sequence on every machine. */
static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static pid_t start(const char *cmd, int index, uint64_t seed, int starts, const char *journal)
{
	/* The child must not inherit our SIGTERM handler even for an instant: a stop sent right after a
	 * restart would be caught by the copy of the handler and lost. Blocked across fork, reset, unblocked. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &old);
	pid_t pid = fork();
	if (pid != 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return pid;
	}
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	char buf[32];
	snprintf(buf, sizeof(buf), "%d", index);
	setenv("KILLPOINTS_WORKER", buf, 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, seed);
	setenv("KILLPOINTS_SEED", buf, 1);
	snprintf(buf, sizeof(buf), "%d", starts);
	setenv("KILLPOINTS_START", buf, 1);
	setenv("KILLPOINTS_JOURNAL", journal, 1);
	size_t len = strlen(cmd) + 6;
	char *line = malloc(len);
	if (!line)
		_exit(127);
	snprintf(line, len, "exec %s", cmd);
	execl("/bin/sh", "sh", "-c", line, (char *)NULL);
	_exit(127);
}

/* Waits up to ms for pid; true if it ended (*status set). */
static bool wait_for(pid_t pid, int ms, int *status)
{
	for (int waited = 0;; waited += 10) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid || (r < 0 && errno == ECHILD))
			return true;
		if (waited >= ms)
			return false;
		usleep(10000);
	}
}

/* Kills the victim of a "LABEL PID COMM ID" line through a pidfd, if its comm is still COMM. */
static bool kill_victim(const char *line)
{
	char label[32], comm[32], id[64], path[64], now[32] = "";
	int pid;
	if (sscanf(line, "%31s %d %31s %63s", label, &pid, comm, id) != 4 || pid <= 1)
		return false;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	FILE *f = fopen(path, "re");
	if (f) {
		if (!fgets(now, sizeof(now), f))
			now[0] = '\0';
		fclose(f);
	}
	now[strcspn(now, "\n")] = '\0';
	bool ok = !strcmp(now, comm) && syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0;
	if (ok) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		poll(&p, 1, 5000); /* readable once it is dead */
	}
	close(pfd);
	return ok;
}

/* The candidates' lines, picked one by r; false if none or the victim could not be killed. */
static bool kill_one_victim(const char *cmd, uint64_t r, char *chosen, size_t len)
{
	FILE *p = popen(cmd, "re");
	if (!p)
		return false;
	char lines[64][160];
	int n = 0;
	while (n < 64 && fgets(lines[n], sizeof(lines[n]), p))
		if (strchr(lines[n], ' '))
			lines[n][strcspn(lines[n], "\n")] = '\0', n++;
	pclose(p);
	if (!n)
		return false;
	/* A kind of victim first (LABEL), then one of that kind: rare kinds are killed as often as common ones. */
	int kinds = 0, first[64];
	for (int i = 0; i < n; i++) {
		bool seen = false;
		for (int k = 0; k < kinds && !seen; k++)
			seen = !strncmp(lines[first[k]], lines[i], strcspn(lines[i], " ") + 1);
		if (!seen)
			first[kinds++] = i;
	}
	const char *kind = lines[first[r % (uint64_t)kinds]];
	size_t klen = strcspn(kind, " ") + 1;
	int of_kind = 0, pick[64];
	for (int i = 0; i < n; i++)
		if (!strncmp(lines[i], kind, klen))
			pick[of_kind++] = i;
	snprintf(chosen, len, "%s", lines[pick[(r / (uint64_t)kinds) % (uint64_t)of_kind]]);
	return kill_victim(chosen);
}

static int usage(void)
{
	fprintf(stderr, "usage: killpoints [--seed N] [--kills K] [--workers N (1..%d)] [--min-ms A] [--max-ms B] "
			"[--journal FILE] --worker 'COMMAND' [--check 'COMMAND'] [--victims 'COMMAND' [--after-kill 'COMMAND']]\n",
		MAX_WORKERS);
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t seed = 0;
	bool have_seed = false;
	long kills = 50, nworkers = 2, min_ms = 200, max_ms = 2000;
	const char *worker = NULL, *check = NULL, *journal = NULL, *victims = NULL, *after = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--seed")) {
			seed = strtoull(v, NULL, 0);
			have_seed = true;
		} else if (!strcmp(a, "--kills")) {
			kills = strtol(v, NULL, 0);
		} else if (!strcmp(a, "--workers")) {
			nworkers = strtol(v, NULL, 0);
		} else if (!strcmp(a, "--min-ms")) {
			min_ms = strtol(v, NULL, 0);
		} else if (!strcmp(a, "--max-ms")) {
			max_ms = strtol(v, NULL, 0);
		} else if (!strcmp(a, "--worker")) {
			worker = v;
		} else if (!strcmp(a, "--check")) {
			check = v;
		} else if (!strcmp(a, "--victims")) {
			victims = v;
		} else if (!strcmp(a, "--after-kill")) {
			after = v;
		} else if (!strcmp(a, "--journal")) {
			journal = v;
		} else {
			return usage();
		}
	}
	if (!worker || kills < 0 || nworkers < 1 || nworkers > MAX_WORKERS || min_ms < 0 || max_ms < min_ms)
		return usage();
	if (!have_seed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
	}
	char jbuf[] = "/tmp/killpoints-journal-XXXXXX";
	if (!journal) {
		int fd = mkstemp(jbuf);
		if (fd < 0)
			return perror("mkstemp"), 1;
		close(fd);
		journal = jbuf;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("killpoints: seed %" PRIu64 " (rerun with --seed %" PRIu64 "), %ld kills, %ld workers, %ld..%ld ms, "
	       "journal %s\n", seed, seed, kills, nworkers, min_ms, max_ms, journal);
	rng_state = seed;
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	pid_t pids[MAX_WORKERS];
	int starts = 0, self_exits = 0, failed_exits = 0;
	for (int i = 0; i < nworkers; i++)
		pids[i] = start(worker, i, rng_next(), starts++, journal);
	uint64_t t0 = now_ms();
	long done = 0, helper_kills = 0, after_checks = 0, after_failed = 0;
	while (done < kills && !interrupted) {
		uint64_t delay = (uint64_t)min_ms + rng_next() % (uint64_t)(max_ms - min_ms + 1);
		int victim = (int)(rng_next() % (uint64_t)nworkers);
		uint64_t next_seed = rng_next();
		uint64_t until = now_ms() + delay;
		/* Meanwhile, a worker that ends by itself is restarted (and counted: workers loop until told). */
		while (now_ms() < until && !interrupted) {
			for (int i = 0; i < nworkers; i++) {
				int st;
				if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
					self_exits++;
					if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
						failed_exits++;
					printf("killpoints: worker %d (pid %d) ended by itself: %s %d; restarted\n", i, pids[i],
					       WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
					pids[i] = start(worker, i, rng_next(), starts++, journal);
				}
			}
			usleep(5000);
		}
		if (interrupted)
			break;
		char chosen[160];
		uint64_t pick = victims ? rng_next() : 0; /* no draw without: old seeds replay */
		if (victims && kill_one_victim(victims, pick, chosen, sizeof(chosen))) {
			done++;
			helper_kills++;
			printf("killpoints: kill %ld: %s at %" PRIu64 " ms\n", done, chosen, now_ms() - t0);
			if (after) {
				setenv("KILLPOINTS_VICTIM", chosen, 1);
				int st = system(after);
				after_checks++;
				if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
					after_failed++;
					printf("killpoints: after-kill check failed for %s (seed %" PRIu64 ")\n", chosen, seed);
				}
			}
			continue;
		}
		int st;
		kill(pids[victim], SIGKILL);
		waitpid(pids[victim], &st, 0);
		done++;
		printf("killpoints: kill %ld: worker %d (pid %d) at %" PRIu64 " ms\n", done, victim, pids[victim],
		       now_ms() - t0);
		pids[victim] = start(worker, victim, next_seed, starts++, journal);
	}
	/* Stop: SIGTERM lets a worker finish its operation; one that does not within 20 s (a hung call) is killed. */
	for (int i = 0; i < nworkers; i++)
		kill(pids[i], SIGTERM);
	for (int i = 0; i < nworkers; i++) {
		int st;
		if (!wait_for(pids[i], 20000, &st)) {
			printf("killpoints: worker %d (pid %d) ignored SIGTERM for 20 s (a hung call?): killed\n", i, pids[i]);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &st, 0);
		}
	}
	if (interrupted) {
		printf("killpoints: interrupted after %ld kills (seed %" PRIu64 ")\n", done, seed);
		return 1;
	}
	int rc = 0;
	if (check) {
		char sbuf[32];
		snprintf(sbuf, sizeof(sbuf), "%" PRIu64, seed);
		setenv("KILLPOINTS_SEED", sbuf, 1);
		setenv("KILLPOINTS_JOURNAL", journal, 1);
		int st = system(check);
		rc = st == -1 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	char helpers[96] = "";
	if (victims)
		snprintf(helpers, sizeof(helpers), ", %ld helper kills, %ld after-kill checks (%ld failed)", helper_kills,
			 after_checks, after_failed);
	printf("killpoints: %ld kills in %" PRIu64 " s, %d worker exits (%d failed), check %s%s (seed %" PRIu64 ")\n",
	       done, (now_ms() - t0) / 1000, self_exits, failed_exits, !check ? "not run" : rc ? "FAILED" : "passed",
	       helpers, seed);
	if (!rc && (failed_exits || after_failed))
		rc = 1;
	return rc;
}
