/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space-vmm run`: the per-sandbox VMM daemon (see daemon.h and docs/vmm.md).
 *
 * Order: parse -> open the log, /dev/kvm and the control socket -> wait for the caller's go (it
 * places us in the sandbox's cgroup first) -> detach -> enter the jail, which forks (KVM binds a VM to
 * the process that created it, so the VM is made in the jail's setup step, in the child, while it is
 * still root and sees the host's files) -> drop privileges -> start the control thread -> seccomp ->
 * report "ok" -> run until the guest ends.
 *
 * Why it ended goes to --status FILE (besides a "space-vmm: " line in the log for people): the log also
 * holds the guest's serial console, so a guest could print any "space-vmm: " line there; the status file
 * is written only by this program (opened by root before the jail, the supervisor adds the signal that
 * killed the VMM). The library reads the reason from it (src/core/vm_backend.c).
 */
#include "vmm/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devices/tap.h"
#include "util/caplog.h"
#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/sandbox.h"
#include "vmm/snapshot.h"
#include "vmm/vmm.h"
#include "vmm/jail.h"

#define RUN_MAX_DISKS 8
#define RUN_MAX_BINDS 16
#define CTL_LINE_MAX 128
#define CTL_READ_TIMEOUT_MS 1000

struct run_opts {
	const char *kernel, *initrd, *cmdline, *control, *log;
	const char *status;  /* --status FILE: why the VMM ended, one line each, written only by the VMM */
	uint64_t log_max;    /* --log-max: the log and its older part FILE.1 together (util/caplog.h) */
	const char *restore; /* a snapshot to restore instead of a kernel to boot */
	char *disks[RUN_MAX_DISKS];
	unsigned ndisks;
	uint64_t cpus, mem_mib;
	char *vsock;
	const char *net;      /* TAP name (created inside the VMM's network namespace) */
	bool rng, seccomp, gate, foreground;
	int ready_fd;
	/* jail */
	const char *jail_root;
	const char *binds[RUN_MAX_BINDS + 1];
	unsigned nbinds;
	uint64_t uid, gid;
	bool netns;
};

struct daemon {
	int kvm_fd, log_fd;
	int log_old_fd; /* FILE.1 of the console log's cap */
	struct vm *vm;
	int ctl_fd;
	uint64_t started_ns;
	const struct run_opts *o;
};

static const char run_usage[] =
	"usage: space-vmm run (--kernel IMG [--initrd F] [--cmdline S] | --restore SNAPSHOT)\n"
	"                     --control SOCK --log FILE\n"
	"                     [--disk FILE[:ro]]... [--cpus N] [--memory MIB] [--rng] [--vsock CID:PATH]\n"
	"                     [--net TAP]\n"
	"                     [--ready-fd N [--gate]] [--status FILE] [--log-max BYTES] [--foreground]\n"
	"                     [--no-seccomp]\n"
	"                     [--jail-root DIR --jail-uid N --jail-gid N [--jail-bind PATH]... [--netns]]\n";

/* The line "<msg>\n" in the status file (when open); never more than one line, whatever msg holds. */
static void status_line(int status_fd, const char *msg)
{
	if (status_fd < 0)
		return;
	char line[512];
	size_t n = strcspn(msg, "\n");
	n = n < sizeof(line) - 1 ? n : sizeof(line) - 2;
	memcpy(line, msg, n);
	line[n++] = '\n';
	(void)util_write_all(status_fd, line, n);
}

/* One "space-vmm: ..." line on stderr (the log once detached), the reason in the status file and, when
 * ready_fd is open, the "error <reason>" report there. Returns status. */
static int fail_report(int *ready_fd, int status_fd, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_report(int *ready_fd, int status_fd, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "space-vmm: %s\n", msg);
	status_line(status_fd, msg);
	if (*ready_fd >= 0) {
		char line[600];
		int n = snprintf(line, sizeof(line), "error %s\n", msg);
		(void)util_write_all(*ready_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
		close(*ready_fd);
		*ready_fd = -1;
	}
	return status;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, 'k' },   { "initrd", required_argument, NULL, 'i' },
		{ "cmdline", required_argument, NULL, 'c' },  { "disk", required_argument, NULL, 'd' },
		{ "cpus", required_argument, NULL, 'p' },     { "memory", required_argument, NULL, 'm' },
		{ "rng", no_argument, NULL, 'r' },            { "vsock", required_argument, NULL, 'v' },
		{ "control", required_argument, NULL, 'C' },  { "log", required_argument, NULL, 'l' },
		{ "ready-fd", required_argument, NULL, 'R' }, { "gate", no_argument, NULL, 'g' },
		{ "foreground", no_argument, NULL, 'f' },     { "no-seccomp", no_argument, NULL, 'S' },
		{ "jail-root", required_argument, NULL, 'J' }, { "jail-uid", required_argument, NULL, 'U' },
		{ "jail-gid", required_argument, NULL, 'G' }, { "jail-bind", required_argument, NULL, 'B' },
		{ "netns", no_argument, NULL, 'N' },          { "help", no_argument, NULL, 'h' },
		{ "net", required_argument, NULL, 'n' },      { "restore", required_argument, NULL, 'T' },
		{ "status", required_argument, NULL, 'X' },   { "log-max", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct run_opts){ .cmdline = "console=ttyS0", .cpus = 1, .mem_mib = 256, .seccomp = true,
				.log_max = CAPLOG_DEFAULT_MAX,
				.ready_fd = -1, .uid = UINT64_MAX, .gid = UINT64_MAX };
	uint64_t v;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k': o->kernel = optarg; break;
		case 'i': o->initrd = optarg; break;
		case 'c': o->cmdline = optarg; break;
		case 'r': o->rng = true; break;
		case 'v': o->vsock = optarg; break;
		case 'C': o->control = optarg; break;
		case 'l': o->log = optarg; break;
		case 'g': o->gate = true; break;
		case 'f': o->foreground = true; break;
		case 'S': o->seccomp = false; break;
		case 'J': o->jail_root = optarg; break;
		case 'N': o->netns = true; break;
		case 'n': o->net = optarg; break;
		case 'T': o->restore = optarg; break;
		case 'X': o->status = optarg; break;
		case 'h': return 1;
		case 'd':
			if (o->ndisks == RUN_MAX_DISKS)
				return -E2BIG;
			o->disks[o->ndisks++] = optarg;
			break;
		case 'B':
			if (o->nbinds == RUN_MAX_BINDS)
				return -E2BIG;
			o->binds[o->nbinds++] = optarg;
			break;
		case 'p':
			if (util_parse_uint(optarg, 1, VM_MAX_VCPUS, &o->cpus) < 0)
				return -EINVAL;
			break;
		case 'm':
			if (util_parse_uint(optarg, 16, 1u << 20, &o->mem_mib) < 0)
				return -EINVAL;
			break;
		case 'L':
			/* The guest writes the console: its log is always capped, within sane bounds. */
			if (util_parse_size(optarg, &o->log_max) < 0 || o->log_max < CAPLOG_MIN_MAX ||
			    o->log_max > CAPLOG_MAX_MAX)
				return -EINVAL;
			break;
		case 'R':
			if (util_parse_uint(optarg, 3, 1 << 20, &v) < 0)
				return -EINVAL;
			o->ready_fd = (int)v;
			break;
		case 'U':
		case 'G':
			if (util_parse_uint(optarg, 1, UINT32_MAX - 1, &v) < 0)
				return -EINVAL;
			*(c == 'U' ? &o->uid : &o->gid) = v;
			break;
		default:
			return -EINVAL;
		}
	}
	if (!o->kernel == !o->restore || !o->control || !o->log || optind != argc || (o->gate && o->ready_fd < 0))
		return -EINVAL;
	if (o->jail_root && (o->uid == UINT64_MAX || o->gid == UINT64_MAX))
		return -EINVAL;
	return 0;
}

static int listen_control(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)unlink(path);
	mode_t old = umask(0077);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 16) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/* Leaves the caller's session and process tree: the VM outlives whoever started it. */
static int detach(int log_fd)
{
	pid_t p = fork();
	if (p < 0)
		return -errno;
	if (p > 0)
		_exit(0);
	if (setsid() < 0)
		return -errno;
	p = fork();
	if (p < 0)
		return -errno;
	if (p > 0)
		_exit(0);
	if (chdir("/") < 0)
		return -errno;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return -errno;
	if (dup2(null, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) {
		int r = -errno;
		close(null);
		return r;
	}
	close(null);
	return 0;
}

/*
 * Forks; the child goes on to run the VM, the parent only waits for it and, when it was killed by a
 * signal (directly, or as the jail's waiter reports it: 128 + signal), writes "killed by signal N (name)"
 * to the status file (and "space-vmm: killed by ..." to the log), which then hold the reason of even a
 * SIGKILL. Returns in the child.
 */
static int supervise(int log_fd, int status_fd, int keep_fds[], size_t nkeep)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		return 0;
	for (size_t i = 0; i < nkeep; i++)
		if (keep_fds[i] >= 0)
			close(keep_fds[i]); /* the child's: the caller must see EOF on them when it ends */
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	int sig = WIFSIGNALED(st) ? WTERMSIG(st) : WIFEXITED(st) && WEXITSTATUS(st) > 128 ? WEXITSTATUS(st) - 128 : 0;
	if (sig) {
		char msg[128];
		snprintf(msg, sizeof(msg), "killed by signal %d (%s)", sig, strsignal(sig));
		dprintf(log_fd, "space-vmm: %s\n", msg);
		status_line(status_fd, msg);
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + sig);
}

/* ---- control socket: one request line per connection, one reply line ---- */

/* One request line; *ret_fd gets a descriptor passed with it (SCM_RIGHTS), else -1. */
static int read_request(int fd, char *buf, size_t len, int *ret_fd)
{
	size_t n = 0;
	*ret_fd = -1;
	uint64_t deadline = util_now_ns() + CTL_READ_TIMEOUT_MS * 1000000ull;
	while (n + 1 < len) {
		uint64_t now = util_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		struct iovec iov = { buf + n, len - 1 - n };
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cm;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
				     .msg_controllen = sizeof(cm.b) };
		ssize_t k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (k < 0 && errno != EINTR)
			return -errno;
		for (struct cmsghdr *c = k > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int fds[4];
			memcpy(fds, CMSG_DATA(c), (nfds < 4 ? nfds : 4) * sizeof(int));
			for (size_t i = 0; i < nfds && i < 4; i++) {
				if (*ret_fd < 0)
					*ret_fd = fds[i];
				else
					close(fds[i]); /* one descriptor per request */
			}
		}
		if (k == 0)
			break;
		if (k > 0)
			n += (size_t)k;
		if (memchr(buf, '\n', n))
			break;
	}
	buf[n] = '\0';
	char *nl = strchr(buf, '\n');
	if (!nl)
		return n + 1 >= len ? -EMSGSIZE : -EBADMSG;
	*nl = '\0';
	return 0;
}

/* snapshot-fd: pauses if running, saves the whole VM into the file passed with the request, resumes
 * if it paused. The jailed VMM can open no file itself: the caller opens it. */
static void control_snapshot(struct daemon *d, int file_fd, char *reply, size_t len)
{
	bool was_paused = vm_paused(d->vm);
	uint64_t t0 = util_now_ns();
	int r;
	if (file_fd < 0) {
		snprintf(reply, len, "error snapshot-fd: no file descriptor came with the request\n");
		return;
	}
	if (!was_paused && (r = vm_pause(d->vm)) < 0) {
		snprintf(reply, len, "error snapshot-fd: cannot pause: %s\n", strerror(-r));
		return;
	}
	if ((r = vm_snapshot_save_fd(d->vm, file_fd)) < 0) {
		snprintf(reply, len, "error snapshot-fd: %s\n", vm_error(d->vm));
	} else {
		snprintf(reply, len, "ok snapshot\n");
		fprintf(stderr, "space-vmm: snapshot saved in %llu ms\n",
			(unsigned long long)((util_now_ns() - t0) / 1000000ull));
	}
	if (!was_paused)
		(void)vm_resume(d->vm);
}

static void control_serve(struct daemon *d, int fd)
{
	char req[CTL_LINE_MAX], reply[256];
	_cleanup_close_ int file_fd = -1;
	int r = read_request(fd, req, sizeof(req), &file_fd);
	if (r < 0) {
		snprintf(reply, sizeof(reply), "error bad request: %s\n", strerror(-r));
	} else if (!strcmp(req, "status")) {
		snprintf(reply, sizeof(reply), "%s pid=%d cpus=%llu memory_mib=%llu uptime_ms=%llu\n",
			 vm_paused(d->vm) ? "paused" : "running", (int)getpid(), (unsigned long long)d->o->cpus,
			 (unsigned long long)d->o->mem_mib,
			 (unsigned long long)((util_now_ns() - d->started_ns) / 1000000ull));
	} else if (!strcmp(req, "pause") || !strcmp(req, "resume")) {
		bool pause = req[0] == 'p';
		r = pause ? vm_pause(d->vm) : vm_resume(d->vm);
		if (r < 0)
			snprintf(reply, sizeof(reply), "error %s: %s\n", req, strerror(-r));
		else
			snprintf(reply, sizeof(reply), "ok %s\n", pause ? "paused" : "running");
		fprintf(stderr, "space-vmm: %s%s%s\n", pause ? "paused" : "resumed", r < 0 ? " failed: " : "",
			r < 0 ? strerror(-r) : "");
	} else if (!strcmp(req, "snapshot-fd")) {
		control_snapshot(d, file_fd, reply, sizeof(reply));
	} else if (!strncmp(req, "snapshot ", 9) && req[9] == '/') {
		/* snapshot /ABS/PATH: like snapshot-fd with a file the VMM opens itself, which only an
		 * unjailed VMM without seccomp (--no-seccomp) can do. */
		bool was_paused = vm_paused(d->vm);
		if (d->o->seccomp) {
			snprintf(reply, sizeof(reply), "error snapshot: needs --no-seccomp; use snapshot-fd\n");
		} else if (!was_paused && (r = vm_pause(d->vm)) < 0) {
			snprintf(reply, sizeof(reply), "error snapshot: cannot pause: %s\n", strerror(-r));
		} else {
			if ((r = vm_snapshot_save(d->vm, req + 9)) < 0)
				snprintf(reply, sizeof(reply), "error snapshot: %s\n", vm_error(d->vm));
			else
				snprintf(reply, sizeof(reply), "ok snapshot %s\n", req + 9);
			if (!was_paused)
				(void)vm_resume(d->vm);
		}
	} else if (!strcmp(req, "stop")) {
		vm_request_stop(d->vm, VM_EXIT_POWEROFF, "stopped on request");
		snprintf(reply, sizeof(reply), "ok stopping\n");
	} else {
		snprintf(reply, sizeof(reply),
			 "error unknown request (status, pause, resume, snapshot-fd, snapshot PATH, stop)\n");
	}
	(void)util_write_all(fd, reply, strlen(reply));
}

static void *control_thread(void *arg)
{
	struct daemon *d = arg;
	for (;;) {
		int c = accept4(d->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
		/* Narrows this thread to the control role once the process filter is in place. */
		if (vmm_seccomp_thread_enter(VMM_THREAD_CONTROL) < 0) {
			fprintf(stderr, "space-vmm: control thread: cannot install its seccomp filter\n");
			if (c >= 0)
				close(c);
			return NULL;
		}
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				continue;
			fprintf(stderr, "space-vmm: control socket: %s\n", strerror(errno));
			return NULL;
		}
		control_serve(d, c);
		close(c);
	}
}

/* ---- setup and run ---- */

static int add_devices(struct vm *vm, const struct run_opts *o)
{
	int r;
	for (unsigned i = 0; i < o->ndisks; i++) {
		char *path = o->disks[i];
		size_t n = strlen(path);
		bool ro = n > 3 && !strcmp(path + n - 3, ":ro");
		if (ro)
			path[n - 3] = '\0';
		if ((r = vm_add_disk(vm, path, ro)) < 0)
			return r;
	}
	if (o->rng && (r = vm_add_rng(vm)) < 0)
		return r;
	if (o->vsock) {
		char *colon = strchr(o->vsock, ':');
		uint64_t cid;
		if (!colon || colon[1] == '\0')
			return -EINVAL;
		*colon = '\0';
		if (util_parse_uint(o->vsock, 3, UINT32_MAX - 1, &cid) < 0)
			return -EINVAL;
		if ((r = vm_add_vsock(vm, cid, colon + 1)) < 0)
			return r;
	}
	if (o->net) {
		/* Created here, inside the VMM's own network namespace when --netns; the fd is duplicated by
		 * vm_add_net and the TAP goes away with the namespace. */
		char ifname[32];
		_cleanup_close_ int tap = tap_open(o->net, ifname, sizeof(ifname));
		if (tap < 0)
			return tap;
		uint8_t mac[6];
		if ((r = util_random_bytes(mac, sizeof(mac))) < 0)
			return r;
		mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
		if ((r = vm_add_net(vm, tap, mac)) < 0)
			return r;
	}
	return 0;
}

/* Acquires the VM and everything it uses (the jail's setup step: still root, host files visible). */
static int restore_devices(struct vm *vm, void *userdata)
{
	return add_devices(vm, userdata);
}

static int vm_setup(void *userdata, char *err, size_t errlen)
{
	struct daemon *d = userdata;
	const struct run_opts *o = d->o;
	if (o->restore) {
		/* The snapshot fixes vCPUs and RAM; the devices are made again, the same kinds in the same
		 * order as when it was taken (the library starts every VM with the same device options). */
		struct vm_restore_config rc = VM_RESTORE_CONFIG_INIT;
		rc.console_log_fd = d->log_fd;
		rc.console_log_old_fd = d->log_old_fd;
		rc.console_log_max = o->log_max;
		rc.kvm_fd = d->kvm_fd;
		rc.add_devices = restore_devices;
		rc.userdata = (void *)o;
		return vm_create_from_snapshot(o->restore, &rc, &d->vm, err, errlen);
	}
	struct vm_config cfg = VM_CONFIG_INIT;
	cfg.cpus = (unsigned)o->cpus;
	cfg.mem_bytes = o->mem_mib << 20;
	cfg.console_log_fd = d->log_fd;
	cfg.console_log_old_fd = d->log_old_fd;
	cfg.console_log_max = o->log_max;
	cfg.kvm_fd = d->kvm_fd;
	int r = vm_create(&cfg, &d->vm, err, errlen);
	if (r < 0)
		return r;
	if ((r = add_devices(d->vm, o)) < 0 ||
	    (r = vm_load_kernel(d->vm, o->kernel, o->initrd, o->cmdline)) < 0) {
		snprintf(err, errlen, "%s", vm_error(d->vm)[0] ? vm_error(d->vm) : strerror(-r));
		vm_destroy(d->vm);
		d->vm = NULL;
		return r;
	}
	return 0;
}

int vmm_daemon_main(int argc, char **argv)
{
	struct run_opts o;
	int ready = -1, status_fd = -1;
	int r = parse(argc, argv, &o);
	if (r != 0) {
		fputs(run_usage, r > 0 ? stdout : stderr);
		return r > 0 ? 0 : 2;
	}
	ready = o.ready_fd;
	if (ready >= 0 && fcntl(ready, F_SETFD, FD_CLOEXEC) < 0)
		return fail_report(&ready, status_fd, 2, "--ready-fd %d is not open", ready);
	_cleanup_close_ int status_owned = -1;
	if (o.status) {
		/* Opened first, so that every later failure has its reason there. A new file, not the old one
		 * truncated: the supervisor of a VMM this one replaces (a restart) may still write to that. */
		(void)unlink(o.status);
		status_owned = open(o.status, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (status_owned < 0)
			return fail_report(&ready, status_fd, 1, "cannot open status file %s: %s", o.status,
					   strerror(errno));
		status_fd = status_owned;
		vmm_seccomp_set_report_fd(status_fd);
	}
	/* The guest's console goes to the log, capped (devices/serial.h): readable for the rotation's copy, and
	 * its older part FILE.1 opened now, since the jailed VMM can open nothing later. */
	_cleanup_close_ int log_fd = open(o.log, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log_fd < 0)
		return fail_report(&ready, status_fd, 1, "cannot open log %s: %s", o.log, strerror(errno));
	char old_path[4096];
	if ((size_t)snprintf(old_path, sizeof(old_path), "%s.1", o.log) >= sizeof(old_path))
		return fail_report(&ready, status_fd, 1, "log path too long: %s", o.log);
	_cleanup_close_ int log_old_fd = open(old_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log_old_fd < 0)
		return fail_report(&ready, status_fd, 1, "cannot open log %s: %s", old_path, strerror(errno));
	if (o.gate) {
		/* The caller moves us into the sandbox's cgroup, then says go: every later fork and page is
		 * accounted there. */
		char go;
		if (read(ready, &go, 1) != 1)
			return fail_report(&ready, status_fd, 1, "the caller went away before starting the VM");
	}
	_cleanup_close_ int kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		return fail_report(&ready, status_fd, 1, "cannot open /dev/kvm: %s", strerror(errno));
	_cleanup_close_ int ctl_fd = listen_control(o.control);
	if (ctl_fd < 0)
		return fail_report(&ready, status_fd, 1, "cannot listen on %s: %s", o.control, strerror(-ctl_fd));
	if (!o.foreground && (r = detach(log_fd)) < 0)
		return fail_report(&ready, status_fd, 1, "cannot detach: %s", strerror(-r));
	int child_fds[] = { ready, kvm_fd, ctl_fd };
	if (!o.foreground && (r = supervise(log_fd, status_fd, child_fds, ARRAY_SIZE(child_fds))) < 0)
		return fail_report(&ready, status_fd, 1, "cannot fork: %s", strerror(-r));

	struct daemon d = { .kvm_fd = kvm_fd, .log_fd = log_fd, .log_old_fd = log_old_fd, .ctl_fd = ctl_fd, .o = &o };
	char err[256] = "";
	if (o.jail_root) {
		const char *binds[RUN_MAX_BINDS + 1] = { 0 };
		memcpy(binds, o.binds, o.nbinds * sizeof(binds[0]));
		struct vmm_jail_cfg jc = {
			.root_dir = o.jail_root,
			.binds = binds,
			.uid = (uid_t)o.uid,
			.gid = (gid_t)o.gid,
			.new_netns = o.netns,
			.max_files = 4096,
			.memlock_bytes = 0,
			.setup = vm_setup,
			.userdata = &d,
		};
		r = vmm_jail_enter(&jc, err, sizeof(err));
	} else {
		r = vm_setup(&d, err, sizeof(err));
	}
	if (r < 0)
		return fail_report(&ready, status_fd, 1, "%s", err[0] ? err : strerror(-r));
	close(TAKE_FD(kvm_fd));
	struct vm *vm = d.vm;
	d.started_ns = util_now_ns();
	/* The control thread never enters KVM_RUN; it must not take the vCPU kick signal either. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t ctl;
	int e = pthread_create(&ctl, NULL, control_thread, &d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		return fail_report(&ready, status_fd, 1, "cannot start the control thread: %s", strerror(e));
	/* Every resource is held now: from here on the process may only run this VM. */
	if (o.seccomp && (r = vmm_seccomp_apply(VMM_THREAD_MAIN, err, sizeof(err))) < 0)
		return fail_report(&ready, status_fd, 1, "cannot install the seccomp filter: %s", err[0] ? err : strerror(-r));
	fprintf(stderr, "space-vmm: running (pid %d, %llu vCPUs, %llu MiB)\n", (int)getpid(),
		(unsigned long long)o.cpus, (unsigned long long)o.mem_mib);
	if (ready >= 0) {
		char line[32];
		int n = snprintf(line, sizeof(line), "ok %d\n", (int)getpid());
		(void)util_write_all(ready, line, (size_t)n);
		close(ready);
		ready = -1;
	}
	struct vm_outcome out;
	if ((r = vm_run(vm, 0, &out)) < 0) {
		fprintf(stderr, "space-vmm: %s\n", vm_error(vm));
		status_line(status_fd, vm_error(vm));
		return 1;
	}
	fprintf(stderr, "space-vmm: %s\n", out.detail);
	status_line(status_fd, out.detail);
	/* Exit without tearing the VM down: the kernel frees it faster than vm_destroy, and the control
	 * thread may still be inside a request. */
	return out.reason == VM_EXIT_POWEROFF ? 0 : 1;
}
