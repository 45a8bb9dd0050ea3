/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one front end of the commands that run a guest: `space-vmm run`, the per-sandbox VMM daemon, and
 * `space-vmm boot`, which is run in the foreground (see daemon.h, options.h and docs/vmm.md).
 *
 * Order: parse -> open the status file, the console's files -> wait for the caller's go (with --gate: it
 * places us in the sandbox's cgroup first) -> check the kernel image -> open /dev/kvm and the control
 * socket -> detach (run without --foreground) -> enter the jail, which forks (KVM binds a VM to the
 * process that created it, so the VM is made in the jail's setup step, in the child, while it is still
 * root and sees the host's files) -> drop privileges -> start the control thread -> seccomp -> report
 * "ok" -> run until the guest ends.
 *
 * Why it ended goes to --status FILE (besides a "space-vmm: " line in the log for people): the log also
 * holds the guest's serial console, so a guest could print any "space-vmm: " line there; the status file
 * is written only by this program (opened by root before the jail, the supervisor adds the signal that
 * killed the VMM). The library reads the reason from it (src/core/vm_backend.c).
 */
#include "vmm/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/control.h"
#include "vmm/jail.h"
#include "vmm/sandbox.h"
#include "vmm/vmm.h"

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

/* The exit status of `boot`: the guest's outcome. */
static int outcome_status(enum vm_exit_reason r)
{
	switch (r) {
	case VM_EXIT_POWEROFF: return VMM_STATUS_POWEROFF;
	case VM_EXIT_GUEST_FAILURE: return VMM_STATUS_GUEST_FAIL;
	case VM_EXIT_RESET: return VMM_STATUS_RESET;
	case VM_EXIT_TRIPLE_FAULT: return VMM_STATUS_TRIPLE_FAULT;
	case VM_EXIT_TIMEOUT: return VMM_STATUS_TIMEOUT;
	default: return VMM_STATUS_INTERNAL;
	}
}

/* Everything the jail's setup step needs to make the VM. */
struct run_setup {
	const struct vmm_options *o;
	struct vmm_console con;
	int kvm_fd;
	struct vm *vm;
};

static int run_setup_vm(void *userdata, char *err, size_t errlen)
{
	struct run_setup *s = userdata;
	return vmm_devspec_create_vm(&s->o->dev, &s->con, s->kvm_fd, &s->vm, err, errlen);
}

/* The console's files: --log (capped together with FILE.1, which is opened now since the jailed VMM can
 * open nothing later; readable for the rotation's copy, devices/serial.h) or --console-log (the operator's
 * own file, watched in the foreground: uncapped). Returns 0 or -errno with the reason in err. */
static int open_console(const struct vmm_options *o, struct vmm_console *con, char *err, size_t errlen)
{
	const char *path = o->log ? o->log : o->console_log;
	if (!path)
		return 0;
	con->log_fd = o->log ? open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600)
			     : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (con->log_fd < 0)
		goto fail;
	if (!o->log)
		return 0;
	char old_path[4096];
	if ((size_t)snprintf(old_path, sizeof(old_path), "%s.1", path) >= sizeof(old_path)) {
		snprintf(err, errlen, "log path too long: %s", path);
		return -ENAMETOOLONG;
	}
	path = old_path;
	if ((con->log_old_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		goto fail;
	con->log_max = o->log_max;
	return 0;
fail:;
	int e = errno;
	snprintf(err, errlen, "cannot open %s %s: %s", o->log ? "log" : "console log", path, strerror(e));
	return -e;
}

int vmm_run_main(enum vmm_verb verb, int argc, char **argv)
{
	struct vmm_options o;
	int r = vmm_options_parse(verb, argc, argv, &o);
	if (r >= 0)
		return r;
	int ready = o.ready_fd, status_fd = -1;
	if (ready >= 0 && fcntl(ready, F_SETFD, FD_CLOEXEC) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_USAGE, "--ready-fd %d is not open", ready);
	_cleanup_close_ int status_owned = -1;
	if (o.status) {
		/* Opened first, so that every later failure has its reason there. A new file, not the old one
		 * truncated: the supervisor of a VMM this one replaces (a restart) may still write to that. */
		(void)unlink(o.status);
		status_owned = open(o.status, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (status_owned < 0)
			return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot open status file %s: %s", o.status,
					   strerror(errno));
		status_fd = status_owned;
		vmm_seccomp_set_report_fd(status_fd);
	}
	char err[256] = "";
	/* The console goes to stdout only in the foreground without a log: a daemon's stdout is its log. */
	struct run_setup s = { .o = &o, .con = { .fd = o.quiet || o.log ? -1 : STDOUT_FILENO, .log_fd = -1,
						 .log_old_fd = -1 }, .kvm_fd = -1 };
	r = open_console(&o, &s.con, err, sizeof(err));
	_cleanup_close_ int log_fd = s.con.log_fd, log_old_fd = s.con.log_old_fd;
	if (r < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "%s", err);
	if (o.gate) {
		/* The caller moves us into the sandbox's cgroup, then says go: every later fork and page is
		 * accounted there. */
		char go;
		if (read(ready, &go, 1) != 1)
			return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "the caller went away before starting the VM");
	}
	/* Before KVM is touched, so that a bad file gets its own reason on any host. */
	if ((r = vmm_devspec_check_kernel(&o.dev, err, sizeof(err))) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "%s", err);
	_cleanup_close_ int kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot open /dev/kvm: %s", strerror(errno));
	s.kvm_fd = kvm_fd;
	_cleanup_close_ int ctl_fd = o.control ? vmm_control_listen(o.control) : -1;
	if (o.control && ctl_fd < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot listen on %s: %s", o.control,
				   strerror(-ctl_fd));
	if (!o.foreground && (r = detach(log_fd)) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot detach: %s", strerror(-r));
	int child_fds[] = { ready, kvm_fd, ctl_fd };
	if (!o.foreground && (r = supervise(log_fd, status_fd, child_fds, ARRAY_SIZE(child_fds))) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot fork: %s", strerror(-r));

	if (o.jail_root) {
		struct vmm_jail_cfg jc = {
			.root_dir = o.jail_root,
			.binds = o.binds,
			.uid = o.uid,
			.gid = o.gid,
			.new_netns = o.netns,
			.max_files = 4096,
			.memlock_bytes = 0, /* guest RAM is not locked */
			.setup = run_setup_vm,
			.userdata = &s,
		};
		r = vmm_jail_enter(&jc, err, sizeof(err));
	} else {
		r = run_setup_vm(&s, err, sizeof(err));
	}
	if (r < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "%s", err[0] ? err : strerror(-r));
	close(TAKE_FD(kvm_fd));
	struct vmm_control ctl = { .fd = ctl_fd, .vm = s.vm, .started_ns = util_now_ns(), .cpus = o.dev.cpus,
				   .mem_mib = o.dev.mem_mib, .seccomp = o.seccomp };
	if (ctl_fd >= 0 && (r = vmm_control_start(&ctl)) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot start the control thread: %s",
				   strerror(-r));
	/* Every resource is held now: from here on the process may only run this VM. */
	if (o.seccomp && (r = vmm_seccomp_apply(VMM_THREAD_MAIN, err, sizeof(err))) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "cannot install the seccomp filter: %s",
				   err[0] ? err : strerror(-r));
	/* The daemon tells its log what it does; boot says nothing on success. */
	bool chatty = verb == VMM_VERB_RUN;
	if (chatty)
		fprintf(stderr, "space-vmm: running (pid %d, %llu vCPUs, %llu MiB)\n", (int)getpid(),
			(unsigned long long)o.dev.cpus, (unsigned long long)o.dev.mem_mib);
	if (ready >= 0) {
		char line[32];
		int n = snprintf(line, sizeof(line), "ok %d\n", (int)getpid());
		(void)util_write_all(ready, line, (size_t)n);
		close(ready);
		ready = -1;
	}
	struct vm_outcome out;
	if ((r = vm_run(s.vm, o.timeout_s * 1000, &out)) < 0)
		return fail_report(&ready, status_fd, VMM_STATUS_SETUP, "%s", vm_error(s.vm));
	if (chatty || out.reason != VM_EXIT_POWEROFF)
		fprintf(stderr, "space-vmm: %s\n", out.detail);
	status_line(status_fd, out.detail);
	/* With a control thread, exit without tearing the VM down: it may still be inside a request (and the
	 * kernel frees the VM faster than vm_destroy). */
	if (ctl_fd < 0)
		vm_destroy(s.vm);
	if (verb == VMM_VERB_BOOT)
		return outcome_status(out.reason);
	return out.reason == VM_EXIT_POWEROFF ? VMM_STATUS_POWEROFF : VMM_STATUS_SETUP;
}
