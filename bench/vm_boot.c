/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/vm_boot: space-vmm vs QEMU (-M microvm -accel kvm) booting the same minimal guest
 * (tests/guests/bench.c, which carries a PVH note for QEMU): process start to guest exit, i.e. to the
 * guest's first serial byte and back. Reports medians of N runs each, side by side: time to the first
 * console byte, wall time, peak RSS (wait4), and the ratios. Needs /dev/kvm (exit 77 without).
 *
 * usage: vm_boot --vmm PATH --guest ELF [--qemu PATH] [--runs N]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

extern char **environ;

struct sample {
	double ms;
	double first_ms; /* to the guest's first console byte */
	long rss_kib;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

/*
 * Runs argv with stdout on a pipe: times the first byte the guest prints and the process's end.
 * Returns the exit status, or -1 when it could not run or never printed want.
 */
static int run_once(char *const argv[], const char *want, struct sample *s)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	uint64_t t0 = util_now_ns(), first = 0;
	pid_t pid;
	int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (r) {
		close(p[0]);
		fprintf(stderr, "vm_boot: cannot run %s: %s\n", argv[0], strerror(r));
		return -1;
	}
	char buf[4096];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(p[0], buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (!first)
			first = util_now_ns();
		len += (size_t)n;
		if (len == sizeof(buf) - 1)
			len = 0; /* keep reading; only the tail matters */
	}
	buf[len] = 0;
	close(p[0]);
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
		;
	s->ms = (double)(util_now_ns() - t0) / 1e6;
	s->first_ms = first ? (double)(first - t0) / 1e6 : s->ms;
	s->rss_kib = ru.ru_maxrss;
	if (!strstr(buf, want)) {
		fprintf(stderr, "vm_boot: %s did not print '%s' (output: %.200s)\n", argv[0], want, buf);
		return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int measure(const char *label, char *const argv[], int ok_status, int runs, double *ret_ms, long *ret_rss)
{
	double *ms = calloc((size_t)runs, sizeof(*ms)), *first = calloc((size_t)runs, sizeof(*first));
	long *rss = calloc((size_t)runs, sizeof(*rss));
	if (!ms || !rss || !first)
		return -1;
	for (int i = 0; i < runs; i++) {
		struct sample s;
		int st = run_once(argv, "GUEST-OK bench", &s);
		if (st != ok_status) {
			fprintf(stderr, "vm_boot: %s run %d ended with status %d\n", label, i, st);
			free(ms);
			free(rss);
			free(first);
			return -1;
		}
		ms[i] = s.ms;
		first[i] = s.first_ms;
		rss[i] = s.rss_kib;
	}
	qsort(ms, (size_t)runs, sizeof(*ms), cmp_double);
	qsort(first, (size_t)runs, sizeof(*first), cmp_double);
	qsort(rss, (size_t)runs, sizeof(*rss), cmp_long);
	*ret_ms = ms[runs / 2];
	*ret_rss = rss[runs / 2];
	printf("%-10s median first byte %8.1f ms   median wall %8.1f ms (min %.1f, max %.1f)   "
	       "median peak RSS %6.1f MiB   (%d runs)\n", label, first[runs / 2], *ret_ms, ms[0], ms[runs - 1],
	       *ret_rss / 1024.0, runs);
	free(first);
	free(ms);
	free(rss);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vmm", required_argument, NULL, 'v' }, { "guest", required_argument, NULL, 'g' },
		{ "qemu", required_argument, NULL, 'q' }, { "runs", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	char *vmm = getenv("SPACE_VMM_PATH"), *guest = NULL, *qemu = "/usr/bin/qemu-system-x86_64";
	int runs = 10, c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'v': vmm = optarg; break;
		case 'g': guest = optarg; break;
		case 'q': qemu = optarg; break;
		case 'n': runs = atoi(optarg); break;
		default: return 2;
		}
	}
	if (!vmm || !guest || runs < 1) {
		fprintf(stderr, "usage: vm_boot --vmm PATH --guest ELF [--qemu PATH] [--runs N]\n");
		return 2;
	}
	if (access("/dev/kvm", R_OK | W_OK) < 0) {
		printf("SKIP: no /dev/kvm\n");
		return 77;
	}
	char *vmm_argv[] = { vmm, "boot", "--kernel", guest, "--memory", "64", "--cmdline", "", NULL };
	char *qemu_argv[] = { qemu, "-M", "microvm", "-accel", "kvm", "-cpu", "host", "-m", "64", "-smp", "1",
			      "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-serial", "stdio",
			      "-device", "isa-debug-exit,iobase=0x501,iosize=1", "-kernel", guest, NULL };
	double vmm_ms, qemu_ms;
	long vmm_rss, qemu_rss;
	printf("vm_boot: process start -> guest prints and exits; %d runs each\n", runs);
	if (measure("space-vmm", vmm_argv, 0, runs, &vmm_ms, &vmm_rss) < 0)
		return 1;
	/* isa-debug-exit turns the guest's code 0 into QEMU exit status 1. */
	if (access(qemu, X_OK) < 0 || measure("qemu", qemu_argv, 1, runs, &qemu_ms, &qemu_rss) < 0) {
		printf("qemu: not measured (%s missing or failed)\n", qemu);
		return 0;
	}
	printf("ratio      wall: qemu/space-vmm = %.1fx faster   peak RSS: space-vmm/qemu = 1/%.1f\n",
	       qemu_ms / vmm_ms, (double)qemu_rss / (double)vmm_rss);
	return 0;
}
