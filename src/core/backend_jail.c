/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail isolation back-end (backend.h): a sandbox as PID 1 of fresh namespaces on the host kernel
 * (src/jail), its agent on a unix socket in the runtime directory, its output through the capping log
 * writer. The jail module's own record (struct jail_info) stays here: the rest of the library sees the
 * sandbox row and struct backend_proc.
 *
 * Runtime directory of a jail sandbox (<state>/run/<id>/, on the pool: core/init.c's run_link):
 *   agent.sock     the agent's listening socket (fd 3 of PID 1)
 *   sandbox.log    what PID 1 and its children print, capped (core/logcap.h)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/disk_tree.h"
#include "core/logcap.h"
#include "core/sandbox.h"
#include "core/trace.h"
#include "core/uids.h"
#include "jail/jail.h"
#include "net/net.h"
#include "proto/agent_client.h"
#include "proto/proto.h"
#include "store/btrfs.h"
#include "util/cgroup.h"
#include "util/cleanup.h"
#include "util/loop.h"
#include "util/stop.h"
#include "util/util.h"

#define AGENT_HELLO_TIMEOUT_MS 15000
#define KILL_TIMEOUT_MS 10000
#define RESEED_BYTES 64
#define LOOP_HINT "loop"

_Static_assert(JAIL_CGROUP_MAX == UTIL_CGROUP_SPEC_MAX, "a jail's cgroup spec fits a backend_proc's");

/* The jail_info a sandbox row describes (the jail module's view of it). */
static void row_jail_info(const struct sandbox_row *row, struct jail_info *ji)
{
	memset(ji, 0, sizeof(*ji));
	ji->pid = row->info.pid;
	ji->start_time = row->pid_start;
	ji->uid_base = row->uid_base;
	snprintf(ji->cgroup, sizeof(ji->cgroup), "%s", row->cgroup);
}

static int jail_ops_available(space_ctx *ctx)
{
	(void)ctx; /* a missing kernel feature is reported by jail_start itself, with the step that failed */
	return 0;
}

static void jail_ops_agent_addr(const char *runtime_dir, char *buf, size_t len)
{
	snprintf(buf, len, "unix:%s/agent.sock", runtime_dir);
}

static void *writer_start(void *arg)
{
	logcap_start_run(arg);
	return NULL;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 || listen(fd, 128) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/*
 * Starts the jail of a row whose disk is in place (row->info.path/rootfs.ext4) and waits for its agent.
 * On failure nothing of the jail is left running; the runtime directory stays for its log. A jail never
 * restores memory (no snapshot_find): restore is ignored.
 */
static int jail_ops_start(space_ctx *ctx, const struct sandbox_row *row, const char *hostname, uint32_t lifetime_s,
			  const char *restore, struct backend_proc *ret, struct agent_info *ai)
{
	(void)restore;
	const struct sandbox_info *b = &row->info;
	char agent[PATH_MAX];
	int r = ctx_helper_path(ctx, "space-agent", agent, sizeof(agent));
	if (r < 0)
		return r;
	char sock[PATH_MAX], image[PATH_MAX], logp[PATH_MAX];
	snprintf(sock, sizeof(sock), "%s/agent.sock", row->runtime_dir);
	snprintf(image, sizeof(image), "%s/rootfs.ext4", b->path);
	snprintf(logp, sizeof(logp), "%s/sandbox.log", row->runtime_dir);
	/* Its disk: the tree its template gave it (core/disk_tree.h), capped at the image's size, or the image. */
	char tree[PATH_MAX];
	int has_tree = disk_tree_of(b->path, tree, sizeof(tree));
	if (has_tree < 0)
		return ctx_error(ctx, has_tree, "%s", tree);
	if (has_tree) {
		struct stat ist;
		if (stat(image, &ist) < 0)
			return ctx_error(ctx, -errno, "stat %s", image);
		/* Fail closed: without its quota a sandbox could fill the pool for everyone. */
		if ((r = store_btrfs_qgroup_limit(b->path, (uint64_t)ist.st_size)) < 0)
			return ctx_error_msg(ctx, r, "cap the disk of sandbox %s at %lld bytes: %s%s", b->id,
					     (long long)ist.st_size, space_strerror(r),
					     r == -ENOTCONN ? " (the pool's btrfs has no quotas: turn them on with `btrfs "
							      "quota enable --simple`)"
							    : "");
	}
	r = util_mkdir_p(row->runtime_dir, 0700);
	if (r < 0)
		return ctx_error(ctx, r, "create %s", row->runtime_dir);
	_cleanup_close_ int lfd = listen_unix(sock);
	if (lfd < 0)
		return ctx_error(ctx, lfd, "listen on %s", sock);
	/* Output goes through a pipe to the capping log writer: no host file is open inside (core/logcap.h). */
	_cleanup_close_ int logfd = -1, logread = -1, logstatus = -1;
	if ((r = logcap_open(ctx, b->id, row->runtime_dir, &logfd, &logread)) < 0)
		return r;
	/* The agent ends the sandbox at its deadline by itself; a later library call reclaims the disk. */
	char life_arg[24], cpus_arg[16], nice_arg[16];
	snprintf(life_arg, sizeof(life_arg), "%u", lifetime_s);
	snprintf(cpus_arg, sizeof(cpus_arg), "%u", b->cpus ? b->cpus : 1);
	/* The agent runs AGENT_PRIORITY_BOOST levels above us (the jail raises it); its children at ours. */
	errno = 0;
	int nice_now = getpriority(PRIO_PROCESS, 0);
	snprintf(nice_arg, sizeof(nice_arg), "%d", nice_now == -1 && errno ? 0 : nice_now);
	/* --cpus: `nproc` inside says the sandbox's CPUs (the agent narrows its children's affinity,
	 * agent/system.c). */
	const char *agent_argv[] = { "space-agent", "--jail", "--listen-fd", "3", "--hostname", hostname,
				     "--cpus", cpus_arg, "--child-nice", nice_arg,
				     lifetime_s ? "--lifetime" : NULL, life_arg, NULL };
	struct jail_config jc = {
		.id = b->id,
		.rootfs_image = has_tree ? NULL : image,
		.rootfs_tree = has_tree ? tree : NULL,
		.agent_path = agent,
		.hostname = hostname,
		.listen_fd = lfd,
		.argv_override = agent_argv,
		.log_fd = logfd,
		.cpus = b->cpus,
		.memory_bytes = (uint64_t)b->memory_mib << 20,
		.uid_base = row->host_uid, /* its machine-wide range (core/uids.h) */
		.allow_identity_fallback = uids_identity_map_allowed(ctx),
		.agent_priority_boost = AGENT_PRIORITY_BOOST,
	};
	/*
	 * The log writer starts on a thread of its own while this one starts the jail: both mostly wait for
	 * process starts, and on a cgroup v1 host both join cgroups by migration, whose RCU grace period (5-20
	 * ms on a 2-core host, when no move happened lately) the two then wait for once, together. The writer
	 * reads nothing until it is confined, and the jail's start lines wait in the pipe. A jail that did not
	 * start gets its writer too: what it said before it failed reaches its log.
	 */
	struct logcap_start ls;
	if ((r = logcap_prepare(ctx, b->id, row->runtime_dir, b->status == SPACE_SANDBOX_CREATING, logread, &ls)) < 0)
		return r;
	/* With every signal blocked: none of the caller's handlers runs on the library's thread. */
	pthread_t writer;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	bool threaded = pthread_create(&writer, NULL, writer_start, &ls) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	char why[512] = "";
	struct jail_info ji;
	r = jail_start(&jc, &ji, why, sizeof(why));
	trace_mark(row->trace, "jail");
	if (threaded)
		pthread_join(writer, NULL);
	else
		logcap_start_run(&ls);
	close(TAKE_FD(logfd));
	close(TAKE_FD(logread));
	int rl = logcap_start_finish(ctx, row->runtime_dir, &ls, &logstatus);
	if (r < 0 && rl == 0)
		(void)logcap_wait_ready(ctx, logstatus); /* it takes over the pipe before we say why */
	if (r == -EOPNOTSUPP)
		return ctx_error_msg(ctx, r, "start jail: %s. This kernel cannot idmap the sandbox's rootfs; the operator "
					     "may allow that weaker mode for a state directory: `space init "
					     "--allow-identity-map`", why);
	if (r < 0)
		return ctx_error_msg(ctx, r, "start jail: %s", why[0] ? why : space_strerror(r));
	/* The operator's choice is said at every create (core/uids.h). */
	if (jc.allow_identity_fallback && ji.uid_base)
		ctx_log(ctx, SPACE_LOG_WARNING, "state directory %s allows the identity uid map (space init "
						"--allow-identity-map); sandbox %s did not need it", ctx->state_dir, b->id);
	else if (jc.allow_identity_fallback)
		ctx_log(ctx, SPACE_LOG_WARNING, "state directory %s allows the identity uid map and sandbox %s uses it: "
						"idmapped mounts failed, root inside is host uid 0 (a weaker boundary; "
						"see its log)", ctx->state_dir, b->id);
	/* The agent holds its own copy of the listening socket. */
	close(TAKE_FD(lfd));
	if (rl < 0) {
		(void)jail_kill(&ji, KILL_TIMEOUT_MS);
		return rl;
	}
	trace_mark(row->trace, "logcap");
	/* Which loop device holds its disk, so the stop waits for that one alone (a hint: without it every
	 * loop device of the host is looked at). */
	char loopf[PATH_MAX];
	snprintf(loopf, sizeof(loopf), "%s/" LOOP_HINT, row->runtime_dir);
	_cleanup_close_ int hfd = open(loopf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (hfd >= 0)
		(void)util_write_all(hfd, has_tree ? DISK_TREE : ji.loop, strlen(has_tree ? DISK_TREE : ji.loop));

	char addr[PATH_MAX + 16];
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	struct agent_error aerr = { 0 };
	r = agent_hello(addr, AGENT_HELLO_TIMEOUT_MS, ai, &aerr);
	trace_mark(row->trace, "agent");
	if (r < 0) {
		ctx_error_msg(ctx, r, "agent did not answer: %s (see %s)", aerr.msg[0] ? aerr.msg : space_strerror(r),
			      logp);
		(void)jail_kill(&ji, KILL_TIMEOUT_MS);
		return r;
	}
	/* Its log writer started alongside; until it is confined it reads nothing, and without it the jail
	 * does not stay (fail closed). */
	if ((r = logcap_wait_ready(ctx, logstatus)) < 0) {
		(void)jail_kill(&ji, KILL_TIMEOUT_MS);
		return r;
	}
	trace_mark(row->trace, "logcap ready");
	memset(ret, 0, sizeof(*ret));
	ret->pid = ji.pid;
	ret->start_time = ji.start_time;
	ret->uid_base = ji.uid_base;
	snprintf(ret->cgroup, sizeof(ret->cgroup), "%s", ji.cgroup);
	return 0;
}

/*
 * Everything of the jail is in its cgroup (PID 1 joins it before it runs the agent; its children inherit
 * it), whose name follows from the id: a row whose creator was killed before it recorded anything is
 * stopped all the same. The cgroup goes first, then PID 1 by pidfd should it be outside (it never is).
 */
static int jail_ops_stop(space_ctx *ctx, const struct sandbox_row *row)
{
	struct jail_info ji;
	row_jail_info(row, &ji);
	int r = 0;
	/* A checkpoint whose caller and freeze guard were both killed left the root filesystem frozen: its
	 * writers could not be killed, and the filesystem would outlive them. Thawing what is not frozen is
	 * EINVAL, ignored. */
	if (row->info.status != SPACE_SANDBOX_CREATING && core_process_alive(ji.pid, ji.start_time)) {
		char proot[64];
		snprintf(proot, sizeof(proot), "/proc/%d/root", ji.pid);
		_cleanup_close_ int fd = open(proot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			(void)ioctl(fd, FITHAW, 0);
	}
	if (!ji.cgroup[0])
		r = util_stop_cgroup_spec(row->info.id, ji.cgroup, sizeof(ji.cgroup));
	if (r == 0)
		r = util_stop_cgroup(ji.cgroup, KILL_TIMEOUT_MS);
	/* While creating, the row's pid is its creator's, never PID 1's. */
	if (row->info.status == SPACE_SANDBOX_CREATING)
		ji.pid = 0;
	if (r == 0)
		r = jail_kill(&ji, KILL_TIMEOUT_MS);
	if (r < 0)
		return ctx_error(ctx, r, "stop sandbox %s (pid %d, cgroup %s)", row->info.id, ji.pid, ji.cgroup);
	/* Its disk's loop device goes only after the kernel tears down the jail's mount namespace: wait for
	 * it, so removing the disk (or the pool, or its template) right after does not find the image busy. */
	char image[PATH_MAX], hint[PATH_MAX], dev[32] = "";
	snprintf(image, sizeof(image), "%s/rootfs.ext4", row->info.path);
	snprintf(hint, sizeof(hint), "%s/" LOOP_HINT, row->runtime_dir);
	_cleanup_close_ int hfd = row->runtime_dir[0] ? open(hint, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	ssize_t n = hfd >= 0 ? read(hfd, dev, sizeof(dev) - 1) : -1;
	dev[n > 0 ? n : 0] = '\0';
	if (!strcmp(dev, DISK_TREE))
		return 0; /* no loop device: its disk is a tree on the pool */
	if (util_loop_wait_released_dev(image, dev[0] ? dev : NULL, KILL_TIMEOUT_MS) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "loop device of %s still attached", image);
	return 0;
}

static int jail_ops_pause(space_ctx *ctx, const struct sandbox_row *row, bool pause)
{
	struct jail_info ji;
	row_jail_info(row, &ji);
	int r = jail_freeze(&ji, pause);
	if (r < 0)
		return ctx_error(ctx, r, "%s sandbox %s (cgroup %s)", pause ? "freeze" : "thaw", row->info.id, ji.cgroup);
	return 0;
}

static bool jail_ops_alive(const struct sandbox_row *row)
{
	return core_process_alive(row->info.pid, row->pid_start);
}

static int jail_ops_refresh_identity(space_ctx *ctx, const struct sandbox_row *row, const char *hostname,
				     uint32_t lifetime_s)
{
	(void)hostname; /* already its own; the clock is the host's */
	(void)lifetime_s;
	char addr[PATH_MAX + 16];
	jail_ops_agent_addr(row->runtime_dir, addr, sizeof(addr));
	uint8_t seed[RESEED_BYTES];
	struct agent_error aerr = { 0 };
	int r = util_random_bytes(seed, sizeof(seed));
	if (r == 0)
		r = agent_reseed(addr, seed, sizeof(seed), &aerr);
	explicit_bzero(seed, sizeof(seed));
	if (r < 0)
		return ctx_error_msg(ctx, r, "reseed sandbox %s: %s", row->info.id,
				     aerr.msg[0] ? aerr.msg : space_strerror(r));
	return 0;
}

/* The jail's eth0 (a veth into its network namespace) behind the gateway. */
static int jail_ops_attach_network(space_ctx *ctx, const struct sandbox_row *row, pid_t pid, const char *policy,
				   const struct net_policy_trust *t)
{
	return net_sandbox_attach(ctx, row->info.id, pid, NULL, policy, t, NULL);
}

static void jail_ops_death_reason(space_ctx *ctx, const struct sandbox_info *b, char *buf, size_t len)
{
	(void)ctx;
	(void)b;
	snprintf(buf, len, "sandbox process exited unexpectedly");
}

static int jail_ops_oom_kills(const struct sandbox_row *row, uint64_t *ret_count)
{
	return row->cgroup[0] ? util_cgroup_oom_kills(row->cgroup, ret_count) : -EOPNOTSUPP;
}

/* A tree's: what the sandbox wrote itself, against its cap (its quota group, as of the pool's last commit).
 * An image's: the file system of the jail's root as it counts itself (its PID 1's root is the disk's
 * mount). */
static int jail_ops_disk_usage(const struct sandbox_row *row, uint64_t *ret_used, uint64_t *ret_total)
{
	char tree[PATH_MAX];
	uint64_t cap = 0;
	if (disk_tree_of(row->info.path, tree, sizeof(tree)) > 0 &&
	    store_btrfs_qgroup_usage(row->info.path, ret_used, &cap) == 0 && cap) {
		*ret_total = cap;
		return 0;
	}
	char root[64];
	struct statvfs sv;
	snprintf(root, sizeof(root), "/proc/%d/root/", (int)row->info.pid);
	/* Alive before and after: the figures are then of that PID 1's root, not of a successor's. */
	if (!jail_ops_alive(row) || statvfs(root, &sv) < 0 || !jail_ops_alive(row))
		return backend_disk_image_usage(row, ret_used, ret_total);
	*ret_used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	*ret_total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}

const struct backend_ops backend_jail_ops = {
	.kind = BACKEND_JAIL,
	.name = "jail",
	.proc_name = "jail",
	.uid_kind = UIDALLOC_RANGE,
	.uid_owner = "jail",
	.uid_what = "range",
	.checkpoint_kind = "disk",
	.stop_while_creating = true, /* its PID 1 runs on once jail_start returned */
	.resume_before_restart = true,
	.available = jail_ops_available,
	.start = jail_ops_start,
	.stop = jail_ops_stop,
	.pause = jail_ops_pause,
	.alive = jail_ops_alive,
	.snapshot = NULL,
	.snapshot_find = NULL,
	.refresh_identity = jail_ops_refresh_identity,
	.agent_addr = jail_ops_agent_addr,
	.attach_network = jail_ops_attach_network,
	.death_reason = jail_ops_death_reason,
	.oom_kills = jail_ops_oom_kills,
	.disk_usage = jail_ops_disk_usage,
};
