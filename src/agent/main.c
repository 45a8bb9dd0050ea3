/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-agent: PID 1 of a sandbox, serving the agent protocol (docs/agent-protocol.md).
 *
 *   space-agent --jail --listen-fd N [--hostname H]   jail mode: serve the listening unix socket N
 *   space-agent [--vsock-port P]                      VM mode (default as PID 1): vsock port P (1024)
 *   space-agent --listen PATH                         a unix socket at PATH, not PID 1 (tests)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/vm_sockets.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/init.h"
#include "config.h"
#include "util/util.h"

void agent_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "space-agent: %s\n", line);
}

int watch_set(struct agent *a, struct watch *w, uint32_t events)
{
	if (w->fd < 0)
		return -EBADF;
	if (events == w->events)
		return 0;
	struct epoll_event ev = { .events = events, .data.ptr = w };
	int op = w->events == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (epoll_ctl(a->epfd, op, w->fd, &ev) < 0)
		return -errno;
	w->events = events;
	return 0;
}

void watch_close(struct agent *a, struct watch *w)
{
	if (w->fd < 0)
		return;
	watch_set(a, w, 0);
	close(w->fd);
	w->fd = -1;
}

/* A PID 1 may start without stdio; pipes must never land on 0..2 by accident. */
static void ensure_stdio(void)
{
	for (int i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) < 0) {
			int fd = open("/dev/null", O_RDWR);
			if (fd >= 0 && fd != i) {
				dup2(fd, i);
				close(fd);
			}
		}
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path); /* a stale socket of an earlier run */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 512) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int listen_vsock(unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 512) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;
	while (read(a->sig.fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (si.ssi_signo == SIGALRM)
			agent_log("the sandbox's lifetime has ended: shutting down");
		else
			agent_log("signal %u: shutting down", si.ssi_signo);
		a->quit = true;
	}
	/* One wait loop for every child: a tracked exec's status goes to its connection, orphans vanish. */
	a->reap_more = proc_reap(a);
}

static int run(struct agent *a)
{
	struct epoll_event evs[64];
	while (!a->quit) {
		/* Children left to reap: look at the other events without waiting, then reap on. */
		int n = epoll_wait(a->epfd, evs, 64, a->reap_more ? 0 : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			agent_log("epoll_wait: %m");
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			switch (w->kind) {
			case W_LISTEN:
				conn_accept(a);
				break;
			case W_SIGNAL:
				on_signal(a);
				break;
			case W_CONN:
				conn_event(w->obj, evs[i].events);
				break;
			case W_PORT:
				port_event(w->obj, evs[i].events);
				break;
			default:
				proc_event(w, evs[i].events);
				break;
			}
		}
		if (a->reap_more)
			a->reap_more = proc_reap(a);
		agent_reap_dead(a);
	}
	return 0;
}

static void usage(void)
{
	fputs("usage: space-agent [--jail --listen-fd N | --listen PATH | --vsock-port P] [--hostname H]\n"
	      "                   [--lifetime SECONDS] [--cpus N] [--child-nice N]\n",
	      stderr);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "jail", no_argument, NULL, 'j' },	 { "listen-fd", required_argument, NULL, 'f' },
		{ "listen", required_argument, NULL, 'l' }, { "vsock-port", required_argument, NULL, 'p' },
		{ "hostname", required_argument, NULL, 'H' }, { "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },	 { "lifetime", required_argument, NULL, 'L' },
		{ "cpus", required_argument, NULL, 'c' }, { "child-nice", required_argument, NULL, 'n' }, { 0 },
	};
	struct agent a = { .epfd = -1 };
	const char *listen_path = NULL, *hostname = NULL;
	uint64_t listen_fd = UINT64_MAX, port = 1024, lifetime = 0, cpus = 0, nice_given = 0;
	bool have_nice = false;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'j': a.jail = true; break;
		case 'f':
			if (util_parse_uint(optarg, 0, 65535, &listen_fd) < 0)
				return usage(), 2;
			break;
		case 'l': listen_path = optarg; break;
		case 'p':
			if (util_parse_uint(optarg, 1, UINT32_MAX - 1, &port) < 0)
				return usage(), 2;
			break;
		case 'H':
			if (strlen(optarg) > PROTO_MAX_IDENT)
				return usage(), 2;
			hostname = optarg;
			break;
		case 'L':
			/* The sandbox ends itself at its deadline even when no host process is left to do it. */
			if (util_parse_uint(optarg, 1, PROTO_MAX_LIFETIME, &lifetime) < 0)
				return usage(), 2;
			break;
		case 'c':
			if (util_parse_uint(optarg, 1, 4096, &cpus) < 0)
				return usage(), 2;
			break;
		case 'n': /* -20..19: a leading '-' then the magnitude */
			if (optarg[0] == '-' ? util_parse_uint(optarg + 1, 0, 20, &nice_given) < 0 ||
						       (nice_given = 20 - nice_given, false)
					     : util_parse_uint(optarg, 0, 19, &nice_given) < 0 ||
						       (nice_given += 20, false))
				return usage(), 2;
			have_nice = true; /* nice_given holds the level + 20 */
			break;
		case 'V': puts("space-agent " SPACE_VERSION_STRING); return 0;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if (a.jail && listen_fd == UINT64_MAX) {
		agent_log("--jail needs --listen-fd");
		return 2;
	}
	/* Before anything of the jail's runs: our fds 1..3 are host-opened (docs/jail.md). */
	int hr = a.jail ? system_harden_jail() : 0;
	if (hr < 0) {
		agent_log("cannot keep the jail's processes out of PID 1 (not dumpable, no CAP_SYS_PTRACE): %s",
			  strerror(-hr));
		return 1;
	}
	a.vm = !a.jail && !listen_path;
	if (a.vm && getpid() != 1)
		agent_log("VM mode but not PID 1: not mounting anything");
	/* PID 1 of a VM: from the initramfs to the root disk; space.* kernel parameters override options. */
	struct vm_params vp = { .port = port, .lifetime = lifetime };
	if (a.vm && getpid() == 1) {
		vm_init_boot(&vp);
		port = vp.port;
		lifetime = vp.lifetime;
	}

	ensure_stdio();
	signal(SIGPIPE, SIG_IGN);
	/* Each exec holds up to five fds (connection, three pipes, timer): 1024 would cap us at ~200. */
	if (getrlimit(RLIMIT_NOFILE, &a.nofile) == 0) {
		struct rlimit more = a.nofile;
		more.rlim_cur = more.rlim_max < 65536 ? more.rlim_max : 65536;
		if (more.rlim_cur > a.nofile.rlim_cur)
			setrlimit(RLIMIT_NOFILE, &more);
	} else {
		a.nofile = (struct rlimit){ 1024, 1024 };
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGALRM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if (lifetime)
		alarm((unsigned)lifetime);

	/* Our children's level: as given (a jail's starter raised us above it), else ours, which we then
	 * raise ourselves where we may (a VM's PID 1 is root). */
	errno = 0;
	int own_nice = getpriority(PRIO_PROCESS, 0);
	if (own_nice == -1 && errno)
		own_nice = 0;
	a.child_nice = have_nice ? (int)nice_given - 20 : own_nice;
	if (!have_nice && setpriority(PRIO_PROCESS, 0, own_nice - AGENT_PRIORITY_BOOST < -20 ? -20
											     : own_nice - AGENT_PRIORITY_BOOST) < 0)
		agent_log("cannot raise the agent's priority: %s", strerror(errno));
	if (a.jail) {
		system_setup_jail(hostname);
		/* Our children run on the sandbox's CPUs; we keep all of them, so that the host's requests reach
		 * us whatever they do (a VM has its cpus as vCPUs). */
		int cr = system_child_cpus((unsigned)cpus, &a.child_cpus);
		if (cr < 0)
			agent_log("cannot narrow the CPU affinity to %u CPUs: %s", (unsigned)cpus, strerror(-cr));
		a.child_cpus_set = cr > 0;
	} else if (a.vm && getpid() == 1) {
		system_setup_vm();
	}
	if (gethostname(a.hostname, sizeof(a.hostname) - 1) < 0)
		a.hostname[0] = '\0';

	int lfd;
	if (listen_path)
		lfd = listen_unix(listen_path);
	else if (a.jail)
		lfd = fcntl((int)listen_fd, F_SETFL, O_NONBLOCK) < 0 ? -errno : (int)listen_fd;
	else
		lfd = listen_vsock((unsigned)port);
	if (lfd < 0) {
		agent_log("cannot listen: %s", strerror(-lfd));
		return 1;
	}
	fcntl(lfd, F_SETFD, FD_CLOEXEC);
	a.epfd = epoll_create1(EPOLL_CLOEXEC);
	a.sig = (struct watch){ .fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK), .kind = W_SIGNAL };
	a.listen = (struct watch){ .fd = lfd, .kind = W_LISTEN };
	if (a.epfd < 0 || watch_set(&a, &a.sig, EPOLLIN) < 0 || watch_set(&a, &a.listen, EPOLLIN) < 0) {
		agent_log("cannot set up the event loop: %m");
		return 1;
	}
	int r = run(&a);
	watch_close(&a, &a.listen);
	if (listen_path)
		unlink(listen_path);
	system_final(&a);
	return r < 0 ? 1 : 0;
}
