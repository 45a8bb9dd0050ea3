/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket of a running VM (see control.h; the protocol is in docs/vmm.md, "Control protocol"):
 * one request line per connection, one reply line, served by one thread that never runs a vCPU.
 */
#include "vmm/control.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/sandbox.h"
#include "vmm/snapshot.h"
#include "vmm/vmm.h"

#define CTL_LINE_MAX 128
#define CTL_READ_TIMEOUT_MS 1000
/* Why a VM whose disk waits for room cannot be paused or saved: a request is half done in its vCPU. */
#define DISK_FULL_TEXT "the pool is full and the VM's disk writes wait for room; free space in the pool first"

int vmm_control_listen(const char *path)
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
static void control_snapshot(struct vmm_control *d, int file_fd, char *reply, size_t len)
{
	bool was_paused = vm_paused(d->vm);
	uint64_t t0 = util_now_ns();
	int r;
	if (file_fd < 0) {
		snprintf(reply, len, "error snapshot-fd: no file descriptor came with the request\n");
		return;
	}
	if (vm_disk_full(d->vm)) {
		snprintf(reply, len, "error snapshot-fd: " DISK_FULL_TEXT "\n");
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

static void control_serve(struct vmm_control *d, int fd)
{
	char req[CTL_LINE_MAX], reply[256];
	bool stop = false;
	_cleanup_close_ int file_fd = -1;
	int r = read_request(fd, req, sizeof(req), &file_fd);
	if (r < 0) {
		snprintf(reply, sizeof(reply), "error bad request: %s\n", strerror(-r));
	} else if (!strcmp(req, "status")) {
		snprintf(reply, sizeof(reply), "%s pid=%d cpus=%llu memory_mib=%llu uptime_ms=%llu%s\n",
			 vm_paused(d->vm) ? "paused" : "running", (int)getpid(), (unsigned long long)d->cpus,
			 (unsigned long long)d->mem_mib,
			 (unsigned long long)((util_now_ns() - d->started_ns) / 1000000ull),
			 vm_disk_full(d->vm) ? " disk=pool-full" : "");
	} else if (!strcmp(req, "pause") && vm_disk_full(d->vm)) {
		snprintf(reply, sizeof(reply), "error pause: " DISK_FULL_TEXT "\n");
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
		if (vm_disk_full(d->vm)) {
			snprintf(reply, sizeof(reply), "error snapshot: " DISK_FULL_TEXT "\n");
		} else if (d->seccomp) {
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
		stop = true;
		snprintf(reply, sizeof(reply), "ok stopping\n");
	} else {
		snprintf(reply, sizeof(reply),
			 "error unknown request (status, pause, resume, snapshot-fd, snapshot PATH, stop)\n");
	}
	(void)util_write_all(fd, reply, strlen(reply));
	/* Asked for once answered: the main thread may end the process before this thread could write. */
	if (stop)
		vm_request_stop(d->vm, VM_EXIT_POWEROFF, "stopped on request");
}

static void *control_thread(void *arg)
{
	struct vmm_control *d = arg;
	for (;;) {
		int c = accept4(d->fd, NULL, NULL, SOCK_CLOEXEC);
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

int vmm_control_start(struct vmm_control *c)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t t;
	int e = pthread_create(&t, NULL, control_thread, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		return -e;
	pthread_detach(t);
	return 0;
}
