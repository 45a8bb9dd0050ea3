/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-gateway's confinement (gw.h, docs/network.md "The gateway process"): the gateway parses hostile
 * DNS, TLS and HTTP, so once its network is built it keeps nothing of root. Its own machine-wide unique uid
 * (a compromised gateway can signal or trace no other sandbox's processes), no capability in any set, no
 * way back (securebits locked, no_new_privs), not dumpable, every file it writes capped by RLIMIT_FSIZE,
 * and a seccomp allowlist with a reason per entry. A syscall outside the list kills the process; its name
 * goes to gateway.log first.
 */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "net/gw.h"
#include "util/cleanup.h"
#include "util/confine.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)

/* Sanitizer runtimes need far more than the gateway: only a sanitized *test* build (meson
 * -Dtest_switches=true) leaves the filter out, as for space-vmm (src/vmm/sandbox.c). */
#if HAVE_TEST_SWITCHES
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GW_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define GW_SANITIZED 1
#endif
#endif
#endif

#define FSIZE_SLACK (64u << 10) /* lines the C library or OpenSSL write to stderr past our own accounting */
#define THREADS_SPARE 16u
#define FILES_SPARE 128u

enum arg_check {
	ARGS_ANY,
	ARG0_THREAD,   /* clone: CLONE_THREAD set (threads, never processes) */
	ARG0_NE,       /* any first argument but value */
	ARG1_EQ,       /* ioctl: this request */
	ARG2_NO_EXEC,  /* mmap, mprotect: no PROT_EXEC */
	ARG2_EXEC,     /* the same with PROT_EXEC: refused with an error, so a dlopen() fails cleanly */
	ARG0_INET,     /* socket: this family */
	ARG0_BELOW,    /* socket: family below value */
	ARG0_ABOVE,    /* socket: family above value */
	ARG2_READ,     /* openat: read-only, creating and truncating nothing */
	ARG2_WRITE,    /* openat: anything else */
};

static const struct rule {
	int nr;
	enum arg_check check;
	unsigned long value;
	int err; /* 0: allow; else refused with this errno */
	const char *why;
} rules[] = {
	/* Descriptors opened before the filter: listeners, DNS, packet watch, pidfd, log files, spool. */
	{ SCMP_SYS(read), ARGS_ANY, 0, 0, "sockets (guest and upstream), configuration files" },
	{ SCMP_SYS(write), ARGS_ANY, 0, 0, "sockets, gateway.log, the event spool" },
	{ SCMP_SYS(writev), ARGS_ANY, 0, 0, "the C library's stdio" },
	{ SCMP_SYS(pread64), ARGS_ANY, 0, 0, "log rotation copies gateway.log into gateway.log.1" },
	{ SCMP_SYS(ftruncate), ARGS_ANY, 0, 0, "log rotation (the kernel caps sizes: RLIMIT_FSIZE)" },
	{ SCMP_SYS(flock), ARGS_ANY, 0, 0, "the event spool is shared with the library's collector" },
	{ SCMP_SYS(lseek), ARGS_ANY, 0, 0, "stdio on configuration files" },
	{ SCMP_SYS(fstat), ARGS_ANY, 0, 0, "log and spool sizes, stdio" },
	{ SCMP_SYS(newfstatat), ARGS_ANY, 0, 0, "fstat through the C library; resolv.conf change checks" },
	{ SCMP_SYS(close), ARGS_ANY, 0, 0, "finished connections" },
	{ SCMP_SYS(fcntl), ARGS_ANY, 0, 0, "blocking mode of upstream sockets after a timed connect" },
	/* Reading only: /etc/hosts, resolv.conf, gai.conf for the host resolver, OpenSSL's CA directory. The
	 * uid owns nothing, so only world-readable files open; nothing can be created or written. */
	{ SCMP_SYS(openat), ARG2_READ, 0, 0, "the host resolver's files and OpenSSL's trust store, read-only" },
	{ SCMP_SYS(openat), ARG2_WRITE, 0, EACCES, "no file is written but those opened before the filter" },
	/* Network: upstream connections (made from the host namespace) and the resolver's DNS queries. */
	{ SCMP_SYS(socket), ARG0_INET, AF_INET, 0, "upstream TCP, resolver UDP" },
	{ SCMP_SYS(socket), ARG0_INET, AF_INET6, 0, "upstream TCP, resolver UDP over IPv6" },
	{ SCMP_SYS(socket), ARG0_BELOW, AF_INET, EAFNOSUPPORT,
	  "no unix sockets (nscd, D-Bus): the resolver falls back without nscd" },
	{ SCMP_SYS(socket), ARG0_ABOVE, AF_INET6, EAFNOSUPPORT,
	  "no netlink or packet sockets: getaddrinfo's address checks fall back without netlink" },
	{ SCMP_SYS(connect), ARGS_ANY, 0, 0, "upstream connections, resolver queries" },
	{ SCMP_SYS(accept4), ARGS_ANY, 0, 0, "the sandbox's connections on the listeners" },
	{ SCMP_SYS(recvfrom), ARGS_ANY, 0, 0, "DNS queries, packet watch, MSG_PEEK of ClientHellos" },
	{ SCMP_SYS(sendto), ARGS_ANY, 0, 0, "DNS answers, send() on sockets" },
	{ SCMP_SYS(recvmsg), ARGS_ANY, 0, 0, "resolver answers" },
	{ SCMP_SYS(sendmsg), ARGS_ANY, 0, 0, "resolver queries" },
	{ SCMP_SYS(sendmmsg), ARGS_ANY, 0, 0, "the resolver sends A and AAAA queries at once" },
	{ SCMP_SYS(getsockopt), ARGS_ANY, 0, 0, "SO_ERROR after a non-blocking connect" },
	{ SCMP_SYS(setsockopt), ARGS_ANY, 0, 0, "timeouts on connections" },
	{ SCMP_SYS(getsockname), ARGS_ANY, 0, 0, "the address a sandbox connection was made to" },
	{ SCMP_SYS(getpeername), ARGS_ANY, 0, 0, "the source of a sandbox connection" },
	{ SCMP_SYS(shutdown), ARGS_ANY, 0, 0, "half-close in the relay" },
	{ SCMP_SYS(bind), ARGS_ANY, 0, 0, "the resolver binds its query sockets to a random port" },
	{ SCMP_SYS(ioctl), ARG1_EQ, FIONREAD, 0, "the resolver sizes a pending DNS answer" },
	{ SCMP_SYS(poll), ARGS_ANY, 0, 0, "the main loop, relays, timed connects" },
	{ SCMP_SYS(ppoll), ARGS_ANY, 0, 0, "poll through the C library" },
	/* Memory: never executable (no code can be loaded after the filter). */
	{ SCMP_SYS(mmap), ARG2_NO_EXEC, 0, 0, "malloc, thread stacks" },
	{ SCMP_SYS(mmap), ARG2_EXEC, 0, EPERM, "dlopen() of a resolver module fails instead of mapping code" },
	{ SCMP_SYS(mprotect), ARG2_NO_EXEC, 0, 0, "thread stack guards, malloc arenas" },
	{ SCMP_SYS(mprotect), ARG2_EXEC, 0, EPERM, "no page becomes executable" },
	{ SCMP_SYS(munmap), ARGS_ANY, 0, 0, "free, thread stacks" },
	{ SCMP_SYS(madvise), ARGS_ANY, 0, 0, "the C library frees thread stacks and arenas" },
	{ SCMP_SYS(mremap), ARGS_ANY, 0, 0, "realloc of large buffers" },
	{ SCMP_SYS(brk), ARGS_ANY, 0, 0, "malloc" },
	/* Threads: one per connection. */
	{ SCMP_SYS(clone), ARG0_THREAD, 0, 0, "connection threads (threads only: no new processes)" },
	{ SCMP_SYS(clone3), ARGS_ANY, 0, ENOSYS, "its flags are in memory seccomp cannot read: glibc falls back to clone" },
	{ SCMP_SYS(set_robust_list), ARGS_ANY, 0, 0, "new threads (glibc)" },
	{ SCMP_SYS(rseq), ARGS_ANY, 0, 0, "new threads (glibc registers rseq)" },
	{ SCMP_SYS(futex), ARGS_ANY, 0, 0, "mutexes, thread exit" },
	{ SCMP_SYS(rt_sigprocmask), ARGS_ANY, 0, 0, "glibc masks signals around thread start and exit" },
	{ SCMP_SYS(rt_sigaction), ARG0_NE, SIGSYS, 0,
	  "glibc installs its setxid handler at the first thread; never SIGSYS, so the reporter stays" },
	{ SCMP_SYS(exit), ARGS_ANY, 0, 0, "thread exit" },
	{ SCMP_SYS(exit_group), ARGS_ANY, 0, 0, "process exit (the sandbox ended)" },
	{ SCMP_SYS(getpid), ARGS_ANY, 0, 0, "OpenSSL and the C library check for forks" },
	{ SCMP_SYS(gettid), ARGS_ANY, 0, 0, "the C library's locks" },
	/* Time and randomness. */
	{ SCMP_SYS(clock_gettime), ARGS_ANY, 0, 0, "timestamps, rate limits (when the vDSO is not used)" },
	{ SCMP_SYS(gettimeofday), ARGS_ANY, 0, 0, "the resolver's timeouts (when the vDSO is not used)" },
	{ SCMP_SYS(nanosleep), ARGS_ANY, 0, 0, "the bandwidth limit" },
	{ SCMP_SYS(clock_nanosleep), ARGS_ANY, 0, 0, "the bandwidth limit (glibc)" },
	{ SCMP_SYS(getrandom), ARGS_ANY, 0, 0, "TLS keys and nonces, resolver query ids" },
	{ SCMP_SYS(sched_yield), ARGS_ANY, 0, 0, "lock contention" },
	{ SCMP_SYS(uname), ARGS_ANY, 0, 0, "the resolver's own host name" },
};


size_t gw_seccomp_rule_count(void)
{
	return ARRAY_SIZE(rules);
}

/* Unused only in a sanitized test build, which runs without the filter (as space-vmm does). */
__attribute__((unused)) static int add_rule(scmp_filter_ctx ctx, const struct rule *r)
{
	uint32_t act = r->err ? SCMP_ACT_ERRNO((uint32_t)r->err) : SCMP_ACT_ALLOW;
	int acc = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE;
	switch (r->check) {
	case ARG0_NE:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A0(SCMP_CMP_NE, r->value));
	case ARG1_EQ:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A1(SCMP_CMP_EQ, r->value));
	case ARG0_THREAD:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	case ARG2_NO_EXEC:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	case ARG2_EXEC:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
	case ARG0_INET:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, r->value));
	case ARG0_BELOW:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A0(SCMP_CMP_LT, r->value));
	case ARG0_ABOVE:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A0(SCMP_CMP_GT, r->value));
	case ARG2_READ:
		return seccomp_rule_add(ctx, act, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)acc, 0));
	case ARG2_WRITE:
		/* The complement of ARG2_READ, one flag at a time (libseccomp ANDs the comparisons of a rule). */
		for (int bit = 0; bit < 32; bit++)
			if ((acc >> bit) & 1) {
				int e = seccomp_rule_add(ctx, act, r->nr, 1,
							 SCMP_A2(SCMP_CMP_MASKED_EQ, 1u << bit, 1u << bit));
				if (e < 0)
					return e;
			}
		return 0;
	case ARGS_ANY:
		break;
	}
	return seccomp_rule_add(ctx, act, r->nr, 0);
}

__attribute__((unused)) static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char msg[160];
	unsigned nr = (unsigned)si->si_syscall;
	size_t n = confine_put(msg, 0, sizeof(msg), "space-gateway: seccomp: ");
	n = confine_put(msg, n, sizeof(msg), confine_syscall_name(nr));
	n = confine_put(msg, n, sizeof(msg), " (");
	n = confine_put_uint(msg, n, sizeof(msg), nr);
	n = confine_put(msg, n, sizeof(msg), ") is not allowed: the gateway ends\n");
	ssize_t w = write(STDERR_FILENO, msg, n);
	(void)w;
	confine_sigsys_die();
}

static int seccomp_install(char *err, size_t errlen)
{
#ifdef GW_SANITIZED
	(void)err;
	(void)errlen;
	return 0; /* sanitized test builds are for finding bugs, not for facing sandboxes */
#else
	int r = confine_sigsys_install(on_sigsys, err, errlen);
	if (r < 0)
		return r;
	/* Outside the list: SIGSYS, whose handler names the call, then the kill. rt_sigaction of SIGSYS is not
	 * in the list, so the handler cannot be replaced; a blocked SIGSYS makes the kernel kill at once. */
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx)
		return util_errf(err, errlen, -ENOMEM, "seccomp_init failed");
	r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, CONFINE_KILL_SYSCALL, 0);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(rules); i++)
		if ((r = add_rule(ctx, &rules[i])) < 0)
			return util_errf(err, errlen, r, "seccomp rule for syscall %d: %s", rules[i].nr, strerror(-r));
	/* Every thread: there are none yet, but a library may have started one. */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (r == 0)
		r = seccomp_load(ctx);
	if (r < 0)
		return util_errf(err, errlen, r, "cannot load the seccomp filter: %s", strerror(-r));
	return 0;
#endif
}

static int set_limit(int res, rlim_t v)
{
	struct rlimit rl;
	if (getrlimit(res, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < v)
		v = rl.rlim_max;
	rl.rlim_cur = rl.rlim_max = v;
	return setrlimit(res, &rl) < 0 ? -errno : 0;
}

int gw_confine(struct gw *g, uint32_t uid, char *err, size_t errlen)
{
	if (uid == 0)
		return util_errf(err, errlen, -EINVAL, "refusing to run the gateway as uid 0");
	/* A file written past its cap fails with EFBIG instead of killing the gateway. */
	signal(SIGXFSZ, SIG_IGN);
	int r;
	if ((r = set_limit(RLIMIT_FSIZE, GW_LOG_FILE_MAX + FSIZE_SLACK)) < 0 || (r = set_limit(RLIMIT_CORE, 0)) < 0 ||
	    (r = set_limit(RLIMIT_NPROC, g->max_conns + THREADS_SPARE)) < 0 ||
	    (r = set_limit(RLIMIT_NOFILE, 3 * (rlim_t)g->max_conns + FILES_SPARE)) < 0)
		return util_errf(err, errlen, r, "setrlimit: %s", strerror(-r));
	if ((r = confine_drop_to_uid(uid, err, errlen)) < 0)
		return r;
	return seccomp_install(err, errlen);
}

int gw_describe_sandbox(void)
{
#ifdef GW_SANITIZED
	const char *filter = "null", *note = ",\"note\":\"sanitized test build: no seccomp filter\"";
#else
	const char *filter = "", *note = "";
#endif
	char rules_json[64];
	snprintf(rules_json, sizeof(rules_json), "{\"process\":%zu}", gw_seccomp_rule_count());
	printf("{\"helper\":\"space-gateway\",\"uid\":\"own\",\"capabilities\":\"none\",\"no_new_privs\":true,"
	       "\"dumpable\":false,\"seccomp\":%s,\"default_action\":\"kill process\"%s}\n",
	       filter[0] ? filter : rules_json, note);
	return 0;
}
