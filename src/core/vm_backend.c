/* SPDX-License-Identifier: Apache-2.0 */
/* The vm isolation back-end: space-vmm daemons started, watched, paused and stopped (see vm_backend.h);
 * its ops table (core/backend.h) at the end. */
#include "core/disk_tree.h"
#include "core/vm_backend.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/logcap.h"
#include "core/doctor.h"
#include "core/vm_assets.h"
#include "net/net.h"
#include "net/netcfg.h"
#include "proto/agent_client.h"
#include "util/caplog.h"
#include "util/cgroup.h"
#include "util/stop.h"
#include "util/cleanup.h"
#include "util/procstat.h"
#include "util/spawn.h"
#include "util/uidalloc.h"
#include "util/util.h"


#define VM_GUEST_CID 3
#define VM_READY_TIMEOUT_MS 60000      /* setup: read kernel and initrd, create the VM */
#define VM_BOOT_TIMEOUT_S 120          /* to the agent's HELLO; nested KVM needs tens of seconds */
#define VM_HELLO_SLICE_MS 2000         /* between checks that the VMM still lives */
#define VM_STOP_GRACE_MS 3000          /* after a control stop, before SIGKILL */
#define VM_KILL_TIMEOUT_MS 30000         /* after SIGKILL: tearing a VM down is slow under nested emulation */
#define VM_CTL_TIMEOUT_MS 5000
#define VM_SNAPSHOT_TIMEOUT_MS 300000   /* writing guest RAM out (slow disks, nested KVM) */
#define VM_MEM_OVERHEAD_MIB 192        /* VMM beyond guest RAM: kernel+initrd copies, stacks, buffers */
#define VM_PIDS_MAX 64                 /* jail supervisor, VMM, vCPU/device/control threads */
#define VM_STATUS_FILE "vmm.status"    /* in the runtime directory: why the VMM ended (space-vmm --status) */
#define VM_STATUS_MAX 4096             /* the tail of it that is read */

int vm_backend_available(space_ctx *ctx)
{
	/* /dev/kvm opens and runs guest ring-0 code at hardware speed (src/core/doctor.c): the same
	 * verdict and words as `space doctor`. */
	return doctor_vm_usable(ctx);
}

void vm_backend_agent_addr(const char *runtime_dir, char *buf, size_t len)
{
	snprintf(buf, len, "vsock-uds:%s/vm/vsock.sock:%d", runtime_dir, VM_AGENT_PORT);
}

/* ---- why did it end ---- */

/*
 * The reason comes from the VMM's status file (space-vmm run --status), never from sandbox.log: the log
 * also holds the guest's serial console, where a guest can print any line it likes, "space-vmm: ..."
 * included. Only space-vmm and its supervisor write the status file, one line per reason.
 */
void vm_backend_death_reason(const char *runtime_dir, int pid, char *buf, size_t len)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" VM_STATUS_FILE, runtime_dir);
	snprintf(buf, len, "space-vmm (pid %d) ended without giving a reason (killed?); log: %s/sandbox.log", pid,
		 runtime_dir);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	/* Bounded and escaped all the same: a VMM that a guest took over could write anything here. */
	char tail[VM_STATUS_MAX];
	off_t from = st.st_size > (off_t)sizeof(tail) - 1 ? st.st_size - (off_t)sizeof(tail) + 1 : 0;
	ssize_t n = pread(fd, tail, sizeof(tail) - 1, from);
	if (n <= 0)
		return;
	tail[n] = '\0';
	/* The last line; when it only names the signal that killed the VMM (the supervisor's line), the one
	 * before it says why (a seccomp violation) if there is one. */
	const char *last = NULL, *prev = NULL;
	for (char *line = tail, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!*line)
			continue;
		prev = last;
		last = line;
	}
	if (!last)
		return;
	char text[1024];
	if (prev && !strncmp(last, "killed by signal", 16))
		snprintf(text, sizeof(text), "space-vmm: %s (%s)", prev, last);
	else
		snprintf(text, sizeof(text), "space-vmm: %s", last);
	size_t k = 0;
	for (const char *p = text; *p && k + 1 < len; p++)
		if ((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f)
			buf[k++] = *p;
	buf[k] = '\0';
}

/* ---- control socket ---- */

/*
 * Reads one line from the daemon (its ready report or a control reply) within timeout_ms, without the
 * newline. *ret_pid gets the sender's pid from SCM_CREDENTIALS when the socket has SO_PASSCRED (the
 * kernel translates it into our pid namespace: the jailed VMM is PID 1 of its own), else 0.
 */
static int read_line(int fd, int timeout_ms, char *line, size_t len, pid_t *ret_pid)
{
	size_t got = 0;
	pid_t pid = 0;
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (got + 1 < len) {
		uint64_t now = util_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int pr = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr <= 0)
			continue;
		struct iovec iov = { line + got, len - 1 - got };
		union {
			char buf[CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} cm;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
		ssize_t k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
				struct ucred uc;
				memcpy(&uc, CMSG_DATA(c), sizeof(uc));
				if (uc.pid > 0)
					pid = uc.pid;
			}
		got += (size_t)k;
		if (memchr(line, '\n', got))
			break;
	}
	line[got] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (got == 0)
		return -EPIPE;
	*ret_pid = pid;
	return 0;
}


/* One request to the daemon's control socket, with fd (if >= 0) passed along (SCM_RIGHTS). */
static int control_request_fd(const char *runtime_dir, const char *req, int fd, int timeout_ms, char *reply,
			      size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/control.sock", runtime_dir) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	_cleanup_close_ int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	char line[64];
	int n = snprintf(line, sizeof(line), "%s\n", req);
	struct iovec iov = { line, (size_t)n };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) != n)
		return -errno;
	pid_t unused;
	int r = read_line(sock, timeout_ms, reply, len, &unused);
	if (r < 0)
		return r;
	return strncmp(reply, "ok", 2) ? -EIO : 0;
}

static int control_request(const char *runtime_dir, const char *req, char *reply, size_t len)
{
	return control_request_fd(runtime_dir, req, -1, VM_CTL_TIMEOUT_MS, reply, len);
}

#define VM_STATUS_TIMEOUT_MS 500 /* a reap asks every VM: a VMM that does not answer soon is not waited for */

int vm_backend_disk_full(const char *runtime_dir)
{
	char reply[256];
	int r = control_request_fd(runtime_dir, "status", -1, VM_STATUS_TIMEOUT_MS, reply, sizeof(reply));
	if (r < 0 && r != -EIO) /* -EIO: a reply that is not "ok ...", as status's is */
		return r;
	if (strncmp(reply, "running ", 8) && strncmp(reply, "paused ", 7))
		return -EPROTO;
	return strstr(reply, " disk=pool-full") != NULL;
}

int vm_backend_snapshot(space_ctx *ctx, const struct sandbox_row *row, const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return ctx_error(ctx, -errno, "create %s", path);
	char reply[512];
	uint64_t t0 = util_now_ns();
	int r = control_request_fd(row->runtime_dir, "snapshot-fd", fd, VM_SNAPSHOT_TIMEOUT_MS, reply, sizeof(reply));
	if (r == -EIO)
		r = ctx_error_msg(ctx, r, "snapshot of sandbox %s: space-vmm says: %s", row->info.id, reply);
	else if (r < 0)
		r = ctx_error(ctx, r, "snapshot of sandbox %s (control socket in %s)", row->info.id, row->runtime_dir);
	if (r < 0) {
		(void)unlink(path);
		return r;
	}
	ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: memory and device state saved to %s in %llu ms", row->info.id, path,
		(unsigned long long)((util_now_ns() - t0) / 1000000ull));
	return 0;
}

int vm_backend_pause(space_ctx *ctx, const struct sandbox_row *row, bool pause)
{
	char reply[256];
	int r = control_request(row->runtime_dir, pause ? "pause" : "resume", reply, sizeof(reply));
	if (r == -EIO)
		return ctx_error_msg(ctx, r, "%s sandbox %s: space-vmm says: %s", pause ? "pause" : "resume",
				     row->info.id, reply);
	if (r < 0)
		return ctx_error(ctx, r, "%s sandbox %s (control socket in %s)", pause ? "pause" : "resume",
				 row->info.id, row->runtime_dir);
	return 0;
}

/* ---- stop ---- */

/* Waits up to timeout_ms for pid (not our child) to be gone; true if it is. */
static bool wait_gone(int pid, uint64_t start_time, int timeout_ms)
{
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0 || !core_process_alive(pid, start_time))
		return !core_process_alive(pid, start_time);
	struct pollfd p = { .fd = pfd, .events = POLLIN };
	(void)poll(&p, 1, timeout_ms);
	return !core_process_alive(pid, start_time);
}

/* A VMM that outlived SIGKILL: say where it is stuck (state and kernel wait channel) for a report. */
static int stuck_error(space_ctx *ctx, int pid)
{
	char path[64], wchan[64] = "?";
	_cleanup_free_ char *wc = NULL;
	struct util_proc_stat ps = { .state = '?' };
	(void)util_proc_stat(pid, &ps);
	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	if (util_read_file(path, 128, &wc, NULL) == 0)
		snprintf(wchan, sizeof(wchan), "%s", wc);
	return ctx_error_msg(ctx, -ETIMEDOUT, "space-vmm (pid %d) did not die within %d s of SIGKILL (state %c, waiting in %s)",
			     pid, VM_KILL_TIMEOUT_MS / 1000, ps.state, wchan);
}

static int stop_pid(space_ctx *ctx, const char *runtime_dir, int pid, uint64_t start_time, const char *cgroup)
{
	char reply[128];
	if (pid > 0 && pid == getpid()) {
		/* A creation of ours that failed before the VMM was recorded: nothing of it runs. */
	} else if (!core_process_alive(pid, start_time)) {
		/* The row may name an interrupted creator rather than the VMM: a VMM still answering stops. */
		(void)control_request(runtime_dir, "stop", reply, sizeof(reply));
	} else {
		if (control_request(runtime_dir, "stop", reply, sizeof(reply)) < 0 ||
		    !wait_gone(pid, start_time, VM_STOP_GRACE_MS)) {
			ctx_log(ctx, SPACE_LOG_DEBUG, "space-vmm %d did not stop on request: SIGKILL", pid);
			/* Through a pidfd checked against the start time: a reused pid is never hit. */
			if (util_stop_pid(pid, start_time, SIGKILL, VM_KILL_TIMEOUT_MS) < 0 &&
			    !wait_gone(pid, start_time, 0))
				return stuck_error(ctx, pid);
		}
	}
	/* Whatever else of the sandbox is left in its cgroup (a VMM its killed creator never recorded). */
	if (cgroup && cgroup[0]) {
		int r = util_stop_cgroup(cgroup, VM_KILL_TIMEOUT_MS);
		if (r < 0)
			return ctx_error(ctx, r, "remove cgroup %s", cgroup);
	}
	return 0;
}

int vm_backend_kill(space_ctx *ctx, const struct sandbox_row *row)
{
	/* The cgroup follows from the id: a row whose creator died before it recorded one has it too. */
	char cgroup[UTIL_CGROUP_SPEC_MAX];
	snprintf(cgroup, sizeof(cgroup), "%s", row->cgroup);
	if (!cgroup[0] && util_stop_cgroup_spec(row->info.id, cgroup, sizeof(cgroup)) < 0)
		cgroup[0] = '\0';
	return stop_pid(ctx, row->runtime_dir, row->info.pid, row->pid_start, cgroup);
}

/* ---- start ---- */

struct vm_spawn {
	char vmm[PATH_MAX], log[PATH_MAX], control[PATH_MAX], vsock_dir[PATH_MAX], vsock[PATH_MAX + 8];
	char root[PATH_MAX], disk[PATH_MAX], cmdline[2048], restore[PATH_MAX], status[PATH_MAX];
	char cpus[16], mem[24], uid[16], vsock_arg[PATH_MAX + 16], log_max[24];
	struct vm_assets assets;
	bool jail;
	uint32_t vmm_uid;
};

static int build_cmdline(space_ctx *ctx, struct vm_spawn *s, const char *hostname, uint32_t lifetime_s)
{
	char life[16], port[16];
	snprintf(life, sizeof(life), "%u", lifetime_s);
	snprintf(port, sizeof(port), "%d", VM_AGENT_PORT);
	snprintf(s->cmdline, sizeof(s->cmdline), "%s", s->assets.cmdline);
	int r = vm_cmdline_append(s->cmdline, sizeof(s->cmdline), "space.hostname", hostname);
	if (r == 0)
		r = vm_cmdline_append(s->cmdline, sizeof(s->cmdline), "space.port", port);
	if (r == 0 && lifetime_s)
		r = vm_cmdline_append(s->cmdline, sizeof(s->cmdline), "space.lifetime", life);
	/* eth0 behind the TAP: the same address and MAC in every VM (snapshots move between sandboxes) */
	if (r == 0)
		r = vm_cmdline_append(s->cmdline, sizeof(s->cmdline), "space.net", NETCFG_VM_CMDLINE);
	return r < 0 ? ctx_error(ctx, r, "kernel command line") : 0;
}

/* Paths, assets, ids and the directories the VMM writes into. */
static int prepare(space_ctx *ctx, const struct sandbox_row *row, const char *hostname, uint32_t lifetime_s,
		   const char *restore, struct vm_spawn *s)
{
	const char *rd = row->runtime_dir;
	int r = ctx_helper_path(ctx, "space-vmm", s->vmm, sizeof(s->vmm));
	if (r < 0)
		return r;
	if (restore) {
		/* A snapshot holds the booted kernel: no kernel, initramfs or command line to prepare. */
		if ((size_t)snprintf(s->restore, sizeof(s->restore), "%s", restore) >= sizeof(s->restore))
			return ctx_error_msg(ctx, -ENAMETOOLONG, "snapshot path too long: %s", restore);
	} else {
		if ((r = vm_assets_prepare(ctx, row->info.path, &s->assets)) < 0)
			return r;
		if ((r = build_cmdline(ctx, s, hostname, lifetime_s)) < 0)
			return r;
	}
	snprintf(s->log, sizeof(s->log), "%s/sandbox.log", rd);
	snprintf(s->status, sizeof(s->status), "%s/" VM_STATUS_FILE, rd);
	snprintf(s->control, sizeof(s->control), "%s/control.sock", rd);
	snprintf(s->vsock_dir, sizeof(s->vsock_dir), "%s/vm", rd);
	snprintf(s->vsock, sizeof(s->vsock), "%s/vsock.sock", s->vsock_dir);
	snprintf(s->vsock_arg, sizeof(s->vsock_arg), "%d:%s", VM_GUEST_CID, s->vsock);
	snprintf(s->root, sizeof(s->root), "%s/root", rd);
	snprintf(s->disk, sizeof(s->disk), "%s/rootfs.ext4", row->info.path);
	disk_tree_retire(ctx, row->info.path); /* its disk is the image: a tree beside it would go stale */
	snprintf(s->cpus, sizeof(s->cpus), "%u", row->info.cpus);
	snprintf(s->mem, sizeof(s->mem), "%u", row->info.memory_mib);
	uint64_t log_max;
	if ((r = logcap_max_bytes(ctx, &log_max)) < 0)
		return r;
	snprintf(s->log_max, sizeof(s->log_max), "%llu", (unsigned long long)log_max);
	s->jail = true;
#if HAVE_TEST_SWITCHES
	/* Test builds only: SPACE_VM_JAIL=0 runs the VMM unjailed, as root (debugging a VMM that cannot
	 * enter its jail). Release builds have no such switch. */
	const char *j = getenv("SPACE_VM_JAIL");
	s->jail = !(j && !strcmp(j, "0"));
#endif
	/* The VMM's own uid: the machine-wide single slot the sandbox holds (core/uids.h). */
	enum uidalloc_kind kind;
	uint32_t first;
	if (s->jail && (!uidalloc_slot_of(row->host_uid, &kind, &first) || kind != UIDALLOC_SINGLE))
		return ctx_error_msg(ctx, -EINVAL, "sandbox %s has no host uid of its own for space-vmm (%u)",
				     row->info.id, row->host_uid);
	s->vmm_uid = s->jail ? row->host_uid : 0;
	snprintf(s->uid, sizeof(s->uid), "%u", s->vmm_uid);
	/* The VMM opens its disk, kernel and sockets before it drops root and pivots into root/, which
	 * stays empty: nothing of the host is visible to it afterwards. */
	if ((r = util_mkdir_p(rd, 0700)) < 0 || (r = util_mkdir_p(s->vsock_dir, 0700)) < 0 ||
	    (s->jail && (r = util_mkdir_p(s->root, 0755)) < 0))
		return ctx_error(ctx, r, "create %s", rd);
	return 0;
}

static int spawn_vmm(space_ctx *ctx, const struct vm_spawn *s, int ready_fd, const char *cgroup, pid_t *ret)
{
	const char *argv[48];
	int n = 0;
	argv[n++] = "space-vmm";
	argv[n++] = "run";
	if (s->restore[0]) {
		argv[n++] = "--restore", argv[n++] = s->restore;
	} else {
		argv[n++] = "--kernel", argv[n++] = s->assets.kernel;
		if (s->assets.initrd[0])
			argv[n++] = "--initrd", argv[n++] = s->assets.initrd;
		argv[n++] = "--cmdline", argv[n++] = s->cmdline;
	}
	argv[n++] = "--disk", argv[n++] = s->disk;
	argv[n++] = "--cpus", argv[n++] = s->cpus;
	argv[n++] = "--memory", argv[n++] = s->mem;
	argv[n++] = "--rng";
	argv[n++] = "--vsock", argv[n++] = s->vsock_arg;
	argv[n++] = "--control", argv[n++] = s->control;
	argv[n++] = "--log", argv[n++] = s->log;
	argv[n++] = "--log-max", argv[n++] = s->log_max; /* the guest's console, capped (sandbox.log + .1) */
	argv[n++] = "--status", argv[n++] = s->status;
	argv[n++] = "--ready-fd", argv[n++] = "3";
	argv[n++] = "--gate";
	if (s->jail) {
		argv[n++] = "--jail-root", argv[n++] = s->root;
		argv[n++] = "--jail-uid", argv[n++] = s->uid;
		argv[n++] = "--jail-gid", argv[n++] = s->uid;
		/* Its own network namespace holding one TAP for the guest's virtio-net (eth0). Nothing is
		 * behind the TAP: the guest's packets reach no network. */
		argv[n++] = "--netns";
		argv[n++] = "--net", argv[n++] = "tap0";
	}
	argv[n] = NULL;

	/* As ever: stdin /dev/null, stdout and stderr appended to the log, 3 the ready socket, the caller's
	 * session; in the sandbox's cgroup before it runs (it forks and touches guest memory after the gate). */
	_cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int log = open(s->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (null < 0 || log < 0)
		return ctx_error(ctx, -errno, "open %s", null < 0 ? "/dev/null" : s->log);
	const int want[4] = { null, log, log, ready_fd };
	const struct util_spawn_opts so = { .path = s->vmm, .argv = argv, .fds = want, .n_fds = ready_fd >= 0 ? 4 : 3,
					    .cgroup = cgroup[0] ? cgroup : NULL };
	struct util_child child;
	int e = util_spawn(&so, &child);
	if (e < 0)
		return ctx_error(ctx, e, "start %s (cgroup %s)", s->vmm, cgroup[0] ? cgroup : "none");
	if (child.pidfd >= 0)
		close(child.pidfd);
	*ret = child.pid;
	return 0;
}

static int boot_timeout_ms(void)
{
	/* An operator setting (docs/configuration.md); ignored in setuid contexts. */
	const char *t = secure_getenv("SPACE_VM_BOOT_TIMEOUT");
	uint64_t v;
	if (t && util_parse_uint(t, 1, 86400, &v) == 0)
		return (int)v * 1000;
	return VM_BOOT_TIMEOUT_S * 1000;
}

/* Waits for the agent's HELLO while the VMM lives. */
static int wait_agent(space_ctx *ctx, const struct sandbox_row *row, pid_t pid, uint64_t start,
		      struct agent_info *ai)
{
	char addr[PATH_MAX + 32];
	vm_backend_agent_addr(row->runtime_dir, addr, sizeof(addr));
	int timeout = boot_timeout_ms();
	uint64_t deadline = util_now_ns() + (uint64_t)timeout * 1000000ull;
	struct agent_error aerr = { 0 };
	int r = -ETIMEDOUT;
	for (;;) {
		if (!core_process_alive(pid, start)) {
			char why[512];
			vm_backend_death_reason(row->runtime_dir, pid, why, sizeof(why));
			return ctx_error_msg(ctx, -ESRCH, "the VM ended while booting: %s", why);
		}
		uint64_t now = util_now_ns();
		if (now >= deadline)
			break;
		uint64_t left = (deadline - now) / 1000000ull;
		r = agent_hello(addr, left < VM_HELLO_SLICE_MS ? (int)left + 1 : VM_HELLO_SLICE_MS, ai, &aerr);
		if (r == 0)
			return 0;
		if (r != -ETIMEDOUT && r != -ECONNREFUSED && r != -ENOENT && r != -ECONNRESET && r != -EPIPE)
			break;
	}
	return ctx_error_msg(ctx, r, "the guest's agent did not answer within %d s: %s (see %s/sandbox.log; "
				     "SPACE_VM_BOOT_TIMEOUT sets the limit)",
			     timeout / 1000, aerr.msg[0] ? aerr.msg : space_strerror(r), row->runtime_dir);
}

int vm_backend_refresh_identity(space_ctx *ctx, const struct sandbox_row *row, const char *hostname,
				uint32_t lifetime_s)
{
	char addr[PATH_MAX + 32];
	vm_backend_agent_addr(row->runtime_dir, addr, sizeof(addr));
	uint8_t seed[64];
	struct timespec now;
	struct agent_error aerr = { 0 };
	const char *what = "entropy";
	int r = util_random_bytes(seed, sizeof(seed));
	if (r == 0 && (r = agent_reseed(addr, seed, sizeof(seed), &aerr)) == 0) {
		what = "clock";
		clock_gettime(CLOCK_REALTIME, &now);
		r = agent_set_time(addr, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, &aerr);
	}
	explicit_bzero(seed, sizeof(seed));
	if (r == 0) {
		what = "hostname";
		r = agent_set_hostname(addr, hostname, &aerr);
	}
	if (r == 0) {
		what = "lifetime";
		r = agent_set_lifetime(addr, lifetime_s, &aerr); /* 0 disarms what the snapshot carried */
	}
	if (r < 0)
		return ctx_error_msg(ctx, r, "sandbox %s: give the restored guest its %s: %s", row->info.id, what,
				     aerr.msg[0] ? aerr.msg : space_strerror(r));
	return 0;
}

int vm_backend_start(space_ctx *ctx, const struct sandbox_row *row, const char *hostname, uint32_t lifetime_s,
		     const char *restore, struct backend_proc *ji, struct agent_info *ai)
{
	int r;
	_cleanup_free_ struct vm_spawn *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if ((r = prepare(ctx, row, hostname, lifetime_s, restore, s)) < 0)
		return r;
	char cgroup[UTIL_CGROUP_SPEC_MAX] = "", why[256] = "";
	struct util_cgroup_limits lim = {
		.cpus = row->info.cpus,
		.memory_bytes = ((uint64_t)row->info.memory_mib + VM_MEM_OVERHEAD_MIB) << 20,
		.pids_max = VM_PIDS_MAX,
	};
	if ((r = util_cgroup_create(row->info.id, &lim, cgroup, sizeof(cgroup), why, sizeof(why))) < 0)
		return ctx_error_msg(ctx, r, "cgroup for sandbox %s: %s", row->info.id, why[0] ? why : space_strerror(r));

	_cleanup_close_ int mine = -1, theirs = -1;
	int sp[2], one = 1, status = 0;
	pid_t child = 0, pid = 0;
	char line[600];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		r = ctx_error(ctx, -errno, "socketpair");
		goto fail_cgroup;
	}
	mine = sp[0];
	theirs = sp[1];
	(void)setsockopt(mine, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	if ((r = spawn_vmm(ctx, s, theirs, cgroup, &child)) < 0)
		goto fail_cgroup;
	close(TAKE_FD(theirs));
	(void)send(mine, "g", 1, MSG_NOSIGNAL); /* a VMM that already died is reported below */
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	r = read_line(mine, VM_READY_TIMEOUT_MS, line, sizeof(line), &pid);
	if (r < 0 || strncmp(line, "ok ", 3) || pid <= 0) {
		if (r == 0 && !strncmp(line, "error ", 6))
			r = ctx_error_msg(ctx, -EIO, "space-vmm: %s", line + 6);
		else if (r == 0)
			r = ctx_error_msg(ctx, -EPROTO, "space-vmm said '%s'", line);
		else if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
			r = ctx_error_msg(ctx, -EINVAL, "space-vmm refused its command line (see %s)", s->log);
		else
			r = ctx_error(ctx, r, "space-vmm did not report (see %s)", s->log);
		goto fail_cgroup; /* the cgroup removal kills whatever is left in it */
	}
	memset(ji, 0, sizeof(*ji));
	ji->pid = pid;
	ji->start_time = core_process_start_time(pid);
	ji->uid_base = s->vmm_uid;
	snprintf(ji->cgroup, sizeof(ji->cgroup), "%s", cgroup);
	ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: space-vmm pid %d %s %s", row->info.id, pid,
		restore ? "restoring" : "booting", restore ? restore : s->assets.kernel);
	if ((r = wait_agent(ctx, row, pid, ji->start_time, ai)) < 0 ||
	    (restore && (r = vm_backend_refresh_identity(ctx, row, hostname, lifetime_s)) < 0)) {
		char msg[sizeof(ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", ctx->last_error);
		(void)stop_pid(ctx, row->runtime_dir, pid, ji->start_time, cgroup);
		snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
		return r;
	}
	return 0;

fail_cgroup: {
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	(void)util_cgroup_remove(cgroup, VM_KILL_TIMEOUT_MS);
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
	return r;
}
}

/* ---- snapshots carried by a subvolume (VM checkpoints, template snapshots) ---- */

int vm_backend_snapshot_meta_write(const char *dir, uint32_t cpus, uint32_t memory_mib)
{
	char path[PATH_MAX], text[128];
	snprintf(path, sizeof(path), "%s/%s", dir, VM_SNAPSHOT_META);
	int n = snprintf(text, sizeof(text), "{\"cpus\": %u, \"memory_mib\": %u}\n", cpus, memory_mib);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	return util_write_all(fd, text, (size_t)n);
}

int vm_backend_snapshot_find(const char *dir, char *snap, size_t len, uint32_t *ret_cpus, uint32_t *ret_memory_mib)
{
	char meta[PATH_MAX];
	snprintf(meta, sizeof(meta), "%s/%s", dir, VM_SNAPSHOT_META);
	if ((size_t)snprintf(snap, len, "%s/%s", dir, VM_SNAPSHOT_FILE) >= len)
		return -ENAMETOOLONG;
	struct stat st;
	if (lstat(snap, &st) < 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	_cleanup_free_ char *text = NULL;
	size_t n;
	int r = util_read_file(meta, 4096, &text, &n);
	if (r < 0)
		return r;
	cJSON *j = cJSON_ParseWithLength(text, n);
	cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cpus");
	cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "memory_mib");
	r = -EBADMSG;
	if (cJSON_IsNumber(c) && cJSON_IsNumber(m) && c->valuedouble >= 1 && c->valuedouble <= 256 &&
	    m->valuedouble >= 1 && m->valuedouble <= (double)(1u << 22)) {
		*ret_cpus = (uint32_t)c->valuedouble;
		*ret_memory_mib = (uint32_t)m->valuedouble;
		r = 0;
	}
	cJSON_Delete(j);
	return r;
}

/* ---- the ops table (core/backend.h) ---- */

static bool vm_ops_alive(const struct sandbox_row *row)
{
	return core_process_alive(row->info.pid, row->pid_start);
}

/* The VM's state into its own subvolume, as the files vm_backend_snapshot_find finds there. */
static int vm_ops_snapshot(space_ctx *ctx, const struct sandbox_row *row)
{
	char snap[PATH_MAX];
	snprintf(snap, sizeof(snap), "%s/%s", row->info.path, VM_SNAPSHOT_FILE);
	int r = vm_backend_snapshot(ctx, row, snap);
	if (r == 0 && (r = vm_backend_snapshot_meta_write(row->info.path, row->info.cpus, row->info.memory_mib)) < 0)
		ctx_error(ctx, r, "write %s/%s", row->info.path, VM_SNAPSHOT_META);
	return r;
}

/* The guest's eth0 is behind the TAP in the VMM's network namespace; the gateway reaches its agent too. */
static int vm_ops_attach_network(space_ctx *ctx, const struct sandbox_row *row, pid_t pid, const char *policy,
				 const struct net_policy_trust *t)
{
	char agent[PATH_MAX + 64];
	vm_backend_agent_addr(row->runtime_dir, agent, sizeof(agent));
	return net_sandbox_attach(ctx, row->info.id, pid, NETCFG_VM_TAP, policy, t, agent);
}

static void vm_ops_death_reason(space_ctx *ctx, const struct sandbox_info *b, char *buf, size_t len)
{
	char rd[PATH_MAX];
	snprintf(rd, sizeof(rd), "%s/run/%s", ctx->state_dir, b->id);
	vm_backend_death_reason(rd, b->pid, buf, len);
}

const struct backend_ops backend_vm_ops = {
	.kind = BACKEND_VM,
	.name = "vm",
	.proc_name = "space-vmm",
	.uid_kind = UIDALLOC_SINGLE,
	.uid_owner = "vmm",
	.uid_what = "for space-vmm",
	.checkpoint_kind = "full",
	.stop_while_creating = true,
	.resume_before_restart = false,
	.available = vm_backend_available,
	.start = vm_backend_start,
	.stop = vm_backend_kill,
	.pause = vm_backend_pause,
	.disk_full = vm_backend_disk_full,
	.alive = vm_ops_alive,
	.snapshot = vm_ops_snapshot,
	.snapshot_find = vm_backend_snapshot_find,
	.refresh_identity = vm_backend_refresh_identity,
	.agent_addr = vm_backend_agent_addr,
	.attach_network = vm_ops_attach_network,
	.death_reason = vm_ops_death_reason,
	/* The guest's file system is the guest's: the host sees the image's allocated blocks. */
	.disk_usage = backend_disk_image_usage,
};
