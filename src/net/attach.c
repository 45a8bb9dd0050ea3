/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attaching a sandbox to its gateway: spawn space-gateway (it outlives the caller, like the sandbox),
 * hand it the compiled policy through a pipe and the files it may write (gateway.log, gateway.log.1, the
 * event spool: it cannot open any itself once confined), wait for "ready <pid> <uid>", then install the
 * gateway's CA and a resolv.conf in the sandbox through its agent. Detaching ends the gateway, which takes
 * its network namespace, the veth pair and its sockets with it, collects the events it spooled and frees
 * its uid slot.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "net/net.h"
#include "net/netcfg.h"
#include "proto/agent_client.h"
#include "util/cleanup.h"
#include "util/spawn.h"
#include "util/uidalloc.h"
#include "util/util.h"

#define GATEWAY_READY_TIMEOUT_MS 15000
#define GATEWAY_STOP_TIMEOUT_MS 5000
#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define CA_LOCAL "/usr/local/share/ca-certificates/space-gateway.crt"

static int gateway_path(space_ctx *ctx, char *buf, size_t len)
{
	return ctx_helper_path(ctx, "space-gateway", buf, len);
}

static int pidfile_path(space_ctx *ctx, const char *id, char *buf, size_t len)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "run/%s/gateway.pid", id);
	return ctx_state_path(ctx, rel, buf, len);
}

/* A memfd holding buf, positioned at 0. */
static int memfd_with(const void *buf, size_t len)
{
	int fd = memfd_create("space-net", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = util_write_all(fd, buf, len);
	if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
		r = -errno;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

static int agent_put(const char *addr, const char *path, const void *buf, size_t len, struct agent_error *aerr)
{
	_cleanup_close_ int fd = memfd_with(buf, len);
	if (fd < 0)
		return fd;
	return agent_file_write(addr, path, 0644, true, fd, aerr);
}

#define CA_BUNDLE_MAX (16u << 20)

/* The CA certificate into the sandbox's trust store (the bundle, and the local CA directory that
 * update-ca-certificates reads), and the gateway as its resolver. */
static int install_guest_files(space_ctx *ctx, const char *agent_addr)
{
	char ca_path[PATH_MAX];
	int r = ctx_state_path(ctx, "gateway/ca.crt", ca_path, sizeof(ca_path));
	if (r < 0)
		return r;
	_cleanup_free_ char *ca = NULL;
	size_t ca_len;
	r = util_read_file(ca_path, 65536, &ca, &ca_len);
	if (r < 0)
		return ctx_error(ctx, r, "read %s", ca_path);
	struct agent_error aerr = { 0 };
	r = agent_put(agent_addr, CA_LOCAL, ca, ca_len, &aerr);
	if (r < 0)
		return ctx_error(ctx, r, "install %s in the sandbox: %s", CA_LOCAL, aerr.msg);
	_cleanup_close_ int bundle = memfd_create("space-net", MFD_CLOEXEC);
	if (bundle < 0)
		return ctx_error(ctx, -errno, "memfd");
	/* The sandbox writes this file: what it can make the host hold is capped like any copy out. */
	struct agent_read_opts ro = { .max_bytes = CA_BUNDLE_MAX };
	r = agent_file_read_opts(agent_addr, CA_BUNDLE, bundle, &ro, NULL, &aerr);
	if (r < 0 && r != -ENOENT)
		return ctx_error(ctx, r, "read %s in the sandbox: %s", CA_BUNDLE, aerr.msg);
	off_t end = lseek(bundle, 0, SEEK_END);
	if (end > 0) {
		char last;
		if (pread(bundle, &last, 1, end - 1) == 1 && last != '\n')
			r = util_write_all(bundle, "\n", 1);
	}
	if ((r = util_write_all(bundle, ca, ca_len)) < 0 || lseek(bundle, 0, SEEK_SET) < 0)
		return ctx_error(ctx, r < 0 ? r : -errno, "CA bundle");
	r = agent_file_write(agent_addr, CA_BUNDLE, 0644, true, bundle, &aerr);
	if (r < 0)
		return ctx_error(ctx, r, "install %s in the sandbox: %s", CA_BUNDLE, aerr.msg);
	static const char resolv[] = "# the sandbox's egress gateway (libspace)\nnameserver " NETCFG_GW_ADDR "\n";
	r = agent_put(agent_addr, "/etc/resolv.conf", resolv, sizeof(resolv) - 1, &aerr);
	if (r < 0)
		return ctx_error(ctx, r, "write /etc/resolv.conf in the sandbox: %s", aerr.msg);
	return 0;
}

/* Opens <state>/run/<id>/<name> for the gateway to append to (read-write: it rotates gateway.log by copying
 * it). Not truncated: the spool may hold events of a previous gateway that were not collected yet. */
static int open_run_file(space_ctx *ctx, const char *id, const char *name, char *path, size_t len)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "run/%s/%s", id, name);
	int r = ctx_state_path(ctx, rel, path, len);
	if (r < 0)
		return r;
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? ctx_error(ctx, -errno, "open %s", path) : fd;
}

static void kill_child(struct util_child *c)
{
	if (c->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
}

/* Starts space-gateway in the sandbox's helpers' cgroup (util/spawn.h). *ret_child's pidfd is the caller's
 * to close; ret_uid is the uid it confined itself to. */
static int start_gateway(space_ctx *ctx, const char *path, const char *id, pid_t netns_pid, const char *tap,
			 const char *config, struct util_child *ret_child, uint32_t *ret_uid)
{
	char logp[PATH_MAX], oldp[PATH_MAX], spoolp[PATH_MAX], cgroup[UTIL_CGROUP_SPEC_MAX];
	_cleanup_close_ int logfd = open_run_file(ctx, id, "gateway.log", logp, sizeof(logp));
	if (logfd < 0)
		return logfd;
	_cleanup_close_ int oldfd = open_run_file(ctx, id, "gateway.log.1", oldp, sizeof(oldp));
	if (oldfd < 0)
		return oldfd;
	_cleanup_close_ int spoolfd = open_run_file(ctx, id, NET_EVENTS_SPOOL, spoolp, sizeof(spoolp));
	if (spoolfd < 0)
		return spoolfd;
	int r = util_spawn_helpers_cgroup(id, cgroup, sizeof(cgroup));
	if (r < 0)
		return ctx_error(ctx, r, "the helpers' cgroup of %s", id);
	int cfg[2], st[2];
	if (pipe2(cfg, O_CLOEXEC) < 0)
		return ctx_error(ctx, -errno, "pipe");
	if (pipe2(st, O_CLOEXEC) < 0) {
		r = -errno;
		close(cfg[0]);
		close(cfg[1]);
		return ctx_error(ctx, r, "pipe");
	}
	_cleanup_close_ int cfg_w = cfg[1], st_r = st[0];
	char pidarg[16];
	snprintf(pidarg, sizeof(pidarg), "%d", (int)netns_pid);
	const char *argv[] = { "space-gateway", "--state", ctx->state_dir, "--sandbox", id, "--netns-pid", pidarg,
			       "--log-old-fd", "4", "--events-fd", "5", tap ? "--tap" : NULL, tap, NULL };
	/* stdin the configuration, stdout and stderr the log, 3 the status pipe, 4 and 5 the old log and spool. */
	const int want[6] = { cfg[0], logfd, logfd, st[1], oldfd, spoolfd };
	const struct util_spawn_opts so = { .path = path, .argv = argv, .fds = want, .n_fds = 6, .detach = true,
					    .cgroup = cgroup };
	struct util_child child = { .pidfd = -1 };
	r = util_spawn(&so, &child);
	close(cfg[0]);
	close(st[1]);
	if (r < 0)
		return ctx_error(ctx, r, "start %s", path);
	/* The configuration holds secrets: it only ever travels through this pipe. */
	r = util_write_all(cfg_w, config, strlen(config));
	close(TAKE_FD(cfg_w));
	char line[512];
	int rs = util_read_line_timeout(st_r, line, sizeof(line), GATEWAY_READY_TIMEOUT_MS);
	int gpid = 0;
	unsigned uid = 0;
	if (rs < 0)
		r = ctx_error_msg(ctx, rs, "space-gateway did not start: %s (see %s)", space_strerror(rs), logp);
	/* A gateway that did not confine itself (an older build) is refused: it would run as root. */
	else if (sscanf(line, "ready %d %u", &gpid, &uid) != 2 || gpid != child.pid || uid == 0)
		r = ctx_error_msg(ctx, -EIO, "space-gateway: %.300s", line);
	else if (r < 0)
		r = ctx_error(ctx, r, "send the policy to space-gateway");
	if (r < 0) {
		kill_child(&child);
		if (child.pidfd >= 0)
			close(child.pidfd);
		return r;
	}
	*ret_child = child;
	*ret_uid = uid;
	return 0;
}

/* True when process pid shares the caller's network namespace (it has none of its own to wire). */
static bool shares_our_netns(pid_t pid)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	return stat(path, &a) == 0 && stat("/proc/thread-self/ns/net", &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

int net_sandbox_attach(space_ctx *ctx, const char *id, pid_t netns_pid, const char *tap, const char *policy_json,
		       const struct net_policy_trust *trust, const char *agent_addr)
{
	char why[512] = "", helper[PATH_MAX];
	_cleanup_free_ char *config = NULL;
	/* No policy, no egress: the sandbox's namespace keeps only lo, and no gateway runs (a third of a
	 * create's time went into starting one that could only refuse). An empty policy ("{}") still gets a
	 * gateway, which records every attempt. */
	if (!policy_json)
		return 0;
	if (shares_our_netns(netns_pid)) {
		/* A VMM started outside its jail (debugging): wiring anything there would touch the host's own
		 * network, and a policy cannot be honoured. */
		return ctx_error_msg(ctx, -EOPNOTSUPP, "sandbox %s has no network namespace of its own: "
						       "a network policy needs one", id);
	}
	int r = gateway_path(ctx, helper, sizeof(helper));
	if (r < 0)
		return r;
	r = net_policy_compile(policy_json, trust, &config, why, sizeof(why));
	if (r < 0)
		return ctx_error_msg(ctx, r, "network policy: %s", why);
	char ca_dir[PATH_MAX], pidf[PATH_MAX];
	if ((r = ctx_state_path(ctx, "gateway", ca_dir, sizeof(ca_dir))) < 0 ||
	    (r = pidfile_path(ctx, id, pidf, sizeof(pidf))) < 0)
		return r;
	r = util_mkdir_p(ca_dir, 0700);
	if (r < 0)
		return ctx_error(ctx, r, "create %s", ca_dir);
	struct util_child gw = { .pidfd = -1 };
	uint32_t guid = 0;
	r = start_gateway(ctx, helper, id, netns_pid, tap, config, &gw, &guid);
	explicit_bzero(config, strlen(config));
	if (r < 0)
		return r;
	/* pid, start time and uid: what detach needs to end it and free its slot ("pid P S gateway"). */
	char pidline[80];
	int n = snprintf(pidline, sizeof(pidline), "%d %llu %u\n", (int)gw.pid, (unsigned long long)gw.start_time,
			 guid);
	r = util_write_file_atomic(pidf, pidline, (size_t)n, 0600);
	if (r < 0)
		kill_child(&gw);
	if (gw.pidfd >= 0)
		close(gw.pidfd);
	if (r < 0)
		return ctx_error(ctx, r, "write %s", pidf);
	pid_t gpid = gw.pid;
	char jail_addr[PATH_MAX + 16];
	if (!agent_addr) {
		snprintf(jail_addr, sizeof(jail_addr), "unix:%s/run/%s/agent.sock", ctx->state_dir, id);
		agent_addr = jail_addr;
	}
	r = install_guest_files(ctx, agent_addr);
	if (r < 0) {
		char msg[sizeof(ctx->last_error)];
		snprintf(msg, sizeof(msg), "%s", ctx->last_error);
		(void)net_sandbox_detach(ctx, id);
		snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
		return r;
	}
	ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: gateway pid %d", id, (int)gpid);
	return 0;
}

/* The gateway recorded in the sandbox's pid file ("pid P S U": pid, start time, uid). */
struct gateway_rec {
	char pidf[PATH_MAX];
	int pid;
	unsigned long long start;
	unsigned uid;
};

/* 1 and *g filled; 0 when there is none (no file, or one that does not parse, then removed); -errno when
 * it cannot be read. */
static int gateway_recorded(space_ctx *ctx, const char *id, struct gateway_rec *g)
{
	int r = pidfile_path(ctx, id, g->pidf, sizeof(g->pidf));
	if (r < 0)
		return r;
	_cleanup_free_ char *txt = NULL;
	size_t len;
	r = util_read_file(g->pidf, 64, &txt, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return ctx_error(ctx, r, "read %s", g->pidf);
	g->uid = 0;
	if (sscanf(txt, "%d %llu %u", &g->pid, &g->start, &g->uid) < 2 || g->pid <= 0) {
		unlink(g->pidf);
		return 0;
	}
	return 1;
}

int net_gateway_dead(space_ctx *ctx, const char *id)
{
	struct gateway_rec g;
	int r = gateway_recorded(ctx, id, &g);
	return r <= 0 ? r : !core_process_alive(g.pid, g.start);
}

int net_sandbox_detach(space_ctx *ctx, const char *id)
{
	struct gateway_rec g;
	int r = gateway_recorded(ctx, id, &g);
	if (r <= 0)
		return r;
	int pid = g.pid;
	unsigned long long start = g.start;
	unsigned uid = g.uid;
	bool gone = true;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0 && core_process_alive(pid, start)) {
		syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		if (poll(&p, 1, GATEWAY_STOP_TIMEOUT_MS) == 0) {
			ctx_log(ctx, SPACE_LOG_WARNING, "gateway %d of %s did not exit in time", pid, id);
			gone = false;
		}
	}
	if (pfd >= 0)
		close(pfd);
	/* It writes nothing more: what it spooled goes to the store now, before its run directory goes. */
	if (net_events_ingest(ctx, id) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: gateway events not collected: %s", id, ctx->last_error);
	/* Its uid is free once it has ended (else the slot's owner text lets a later reaper free it). */
	if (uid && gone) {
		char owner[64];
		snprintf(owner, sizeof(owner), "pid %d %llu gateway", pid, start);
		r = uidalloc_release(UIDALLOC_SINGLE, uid, owner);
		if (r < 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "gateway of %s: free uid %u: %s", id, uid, strerror(-r));
	}
	unlink(g.pidf);
	return 0;
}
