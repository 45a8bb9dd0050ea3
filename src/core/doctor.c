/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space_doctor: what this host can do for libspace, and how to fix what it cannot.
 *
 * Every check is cheap and side-effect free except the ring-0 probe, which runs `space-vmm probe` (a
 * throwaway VM timing a short loop of guest kernel-mode code, a few tens of milliseconds). --verbose also
 * runs each helper with --describe-sandbox, which prints how it confines itself and does nothing else.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <mntent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "core/doctor.h"
#include "core/internal.h"
#include "store/btrfs.h"
#include "util/cgroup.h"
#include "util/cleanup.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete)

enum level { LVL_OK, LVL_WARN, LVL_FAIL };
static const char *const level_names[] = { "ok", "warn", "fail" };

static cJSON *add_check(cJSON *checks, const char *name, enum level lvl, const char *detail, const char *fix)
{
	cJSON *c = cJSON_CreateObject();
	if (!c)
		return NULL;
	cJSON_AddStringToObject(c, "name", name);
	cJSON_AddStringToObject(c, "status", level_names[lvl]);
	cJSON_AddStringToObject(c, "detail", detail);
	if (fix && *fix)
		cJSON_AddStringToObject(c, "fix", fix);
	cJSON_AddItemToArray(checks, c);
	return c;
}

static bool cpu_flag(const char *flag)
{
	_cleanup_free_ char *info = NULL;
	if (util_read_file("/proc/cpuinfo", 1 << 20, &info, NULL) < 0)
		return false;
	const char *flags = strstr(info, "\nflags");
	if (!flags)
		return false;
	const char *eol = strchr(flags + 1, '\n');
	size_t n = strlen(flag);
	for (const char *p = strstr(flags, flag); p && (!eol || p < eol); p = strstr(p + 1, flag))
		if (p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/* Why /dev/kvm is missing or closed, in words a user can act on. */
static void kvm_missing_reason(int err, char *buf, size_t len)
{
	bool hv = cpu_flag("hypervisor"), vmx = cpu_flag("vmx"), svm = cpu_flag("svm");
	if (err == -EACCES)
		snprintf(buf, len, "/dev/kvm exists but this user cannot open it");
	else if (access("/sys/module/kvm_pvm", F_OK) == 0)
		snprintf(buf, len, "/dev/kvm is missing: this kernel is itself a PVM guest (nested PVM virtualization "
				   "without a KVM device for its own guests)");
	else if (!vmx && !svm && hv)
		snprintf(buf, len, "/dev/kvm is missing: this host is a virtual machine whose CPU does not expose "
				   "VMX/SVM (nested virtualization is off)");
	else if (!vmx && !svm)
		snprintf(buf, len, "/dev/kvm is missing: the CPU shows no VMX/SVM (virtualization disabled in firmware?)");
	else
		snprintf(buf, len, "/dev/kvm is missing although the CPU has %s: the kvm module is not loaded",
			 vmx ? "VMX" : "SVM");
}

int doctor_probe_ring0(space_ctx *ctx, struct doctor_ring0 *ret)
{
	memset(ret, 0, sizeof(*ret));
	char vmm[PATH_MAX];
	int r = ctx_helper_path(ctx, "space-vmm", vmm, sizeof(vmm));
	if (r < 0) {
		snprintf(ret->error, sizeof(ret->error), "space-vmm not found at %s: %s", vmm, strerror(-r));
		return r;
	}
	const char *argv[] = { vmm, "probe", NULL };
	_cleanup_free_ char *out = NULL;
	int rr = util_run(argv, &out);
	_cleanup_(cJSON_Deletep) cJSON *j = out ? cJSON_Parse(out) : NULL;
	if (!j || !cJSON_IsObject(j)) {
		snprintf(ret->error, sizeof(ret->error), "space-vmm probe failed (%s): %.200s", strerror(-rr),
			 out ? out : "");
		return rr < 0 ? rr : -EIO;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItem(j, "kvm"))) {
		const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(j, "error"));
		snprintf(ret->error, sizeof(ret->error), "%s", e ? e : "KVM unusable");
		return -ENODEV;
	}
	const cJSON *ns = cJSON_GetObjectItem(j, "ns_per_insn");
	const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItem(j, "verdict"));
	if (!cJSON_IsNumber(ns) || !verdict) {
		snprintf(ret->error, sizeof(ret->error), "space-vmm probe printed no measurement");
		return -EIO;
	}
	ret->ns_per_insn = ns->valuedouble;
	snprintf(ret->verdict, sizeof(ret->verdict), "%s", verdict);
	return 0;
}

/*
 * A positive verdict is kept for the rest of this boot (<state>/run/vm-usable holds the boot id), so
 * creating a sandbox does not start a probe VM each time, and a loaded host cannot turn a machine it
 * has already measured as native into "emulated". A negative one is never kept: it is measured again.
 */
static void boot_id(char *buf, size_t len)
{
	_cleanup_free_ char *id = NULL;
	buf[0] = '\0';
	if (util_read_file("/proc/sys/kernel/random/boot_id", 128, &id, NULL) == 0)
		snprintf(buf, len, "%.*s", (int)strcspn(id, "\n"), id);
}

static bool verdict_cached(space_ctx *ctx)
{
	if (ctx->vm_usable)
		return true;
	char path[PATH_MAX], id[64];
	snprintf(path, sizeof(path), "%s/run/vm-usable", ctx->state_dir);
	_cleanup_free_ char *text = NULL;
	boot_id(id, sizeof(id));
	if (!id[0] || util_read_file(path, 128, &text, NULL) < 0)
		return false;
	return strncmp(text, id, strlen(id)) == 0;
}

static void verdict_keep(space_ctx *ctx)
{
	ctx->vm_usable = true;
	char dir[PATH_MAX], path[PATH_MAX + 16], id[64];
	boot_id(id, sizeof(id));
	snprintf(dir, sizeof(dir), "%s/run", ctx->state_dir);
	snprintf(path, sizeof(path), "%s/vm-usable", dir);
	if (!id[0] || util_mkdir_p(dir, 0700) < 0)
		return;
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		(void)util_write_all(fd, id, strlen(id));
}

int doctor_vm_usable(space_ctx *ctx)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		char why[256];
		kvm_missing_reason(-errno, why, sizeof(why));
		return ctx_error_msg(ctx, -ENODEV,
				     "vm isolation is not usable on this host: %s. Use --isolation jail (a weaker "
				     "boundary that shares the host kernel) or a host with hardware virtualization; "
				     "`space doctor` shows what works here",
				     why);
	}
	close(fd);
	if (verdict_cached(ctx))
		return 0;
	struct doctor_ring0 p;
	int r = doctor_probe_ring0(ctx, &p);
	if (r < 0)
		return ctx_error_msg(ctx, -ENODEV,
				     "vm isolation is not usable on this host: %s; `space doctor` shows what works here",
				     p.error);
	if (!strcmp(p.verdict, "emulated"))
		return ctx_error_msg(ctx, -ENODEV,
				     "vm isolation is not usable on this host: its KVM emulates guest kernel code "
				     "(%.0f ns per instruction; nested/emulated virtualization such as PVM), so a Linux "
				     "guest would not boot. Use --isolation jail, or a host with hardware "
				     "virtualization (VMX/SVM); `space doctor` has details",
				     p.ns_per_insn);
	verdict_keep(ctx);
	return 0;
}

/* 0 when a child can enter new user, mount, pid, net, ipc and uts namespaces. (Probes: children waited for
 * at once, no sandbox's, so plain forks rather than util_spawn.) */
static int try_namespaces(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
		if (geteuid() != 0)
			flags |= CLONE_NEWUSER;
		_exit(unshare(flags) == 0 ? 0 : (errno & 0x7f));
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -(WIFEXITED(st) ? WEXITSTATUS(st) : EIO);
}

static int try_user_namespace(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0x7f));
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -(WIFEXITED(st) ? WEXITSTATUS(st) : EIO);
}

static void check_kvm(space_ctx *ctx, cJSON *checks, bool *vm_ok, bool *vm_slow)
{
	char buf[512];
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		kvm_missing_reason(-errno, buf, sizeof(buf));
		add_check(checks, "kvm", LVL_FAIL, buf,
			  errno == EACCES ? "run as root or add the user to the kvm group"
					  : "use a host (or a VM with nested virtualization) that exposes VMX/SVM and load "
					    "kvm_intel or kvm_amd; until then use --isolation jail");
		add_check(checks, "ring0", LVL_FAIL, "not measured: no usable /dev/kvm", "see the kvm check");
		*vm_ok = false;
		return;
	}
	close(fd);
	add_check(checks, "kvm", LVL_OK, "/dev/kvm opens read-write", NULL);

	struct doctor_ring0 p;
	if (doctor_probe_ring0(ctx, &p) < 0) {
		add_check(checks, "ring0", LVL_FAIL, p.error, "check that space-vmm is installed and KVM works");
		*vm_ok = false;
		return;
	}
	if (!strcmp(p.verdict, "emulated")) {
		snprintf(buf, sizeof(buf),
			 "guest kernel code is emulated: %.0f ns per instruction (native is under 5); stock Linux "
			 "guests do not boot (nested PVM-style virtualization)",
			 p.ns_per_insn);
		add_check(checks, "ring0", LVL_FAIL, buf,
			  "use --isolation jail here, or a host with hardware virtualization");
		*vm_ok = false;
	} else {
		snprintf(buf, sizeof(buf), "guest kernel code runs %s: %.2f ns per instruction",
			 !strcmp(p.verdict, "native") ? "natively" : "slowly (nested virtualization) but usable",
			 p.ns_per_insn);
		add_check(checks, "ring0", !strcmp(p.verdict, "native") ? LVL_OK : LVL_WARN, buf,
			  !strcmp(p.verdict, "native") ? NULL : "expect slow boots; prefer a host with direct VMX/SVM");
		*vm_slow = strcmp(p.verdict, "native") != 0;
	}
}

static void check_helpers(space_ctx *ctx, cJSON *checks, bool *vm_ok, bool *jail_ok)
{
	static const char *const names[] = { "space-vmm", "space-agent" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char path[PATH_MAX], buf[PATH_MAX + 64];
		int r = ctx_helper_path(ctx, names[i], path, sizeof(path));
		if (r < 0) {
			snprintf(buf, sizeof(buf), "%s: %s", path, strerror(-r));
			add_check(checks, names[i], LVL_FAIL, buf,
				  "reinstall libspace, or point SPACE_VMM_PATH / SPACE_AGENT_PATH at the binary");
			if (i == 0)
				*vm_ok = false;
			else
				*vm_ok = *jail_ok = false;
		} else {
			add_check(checks, names[i], LVL_OK, path, NULL);
		}
	}
}

static void check_kernel(space_ctx *ctx, cJSON *checks)
{
	struct utsname u;
	char path[PATH_MAX], buf[PATH_MAX + 128];
	if (uname(&u) == 0) {
		snprintf(path, sizeof(path), "/boot/vmlinuz-%s", u.release);
		if (access(path, R_OK) == 0) {
			snprintf(buf, sizeof(buf), "the host's own kernel %s (modules from /lib/modules/%s)", path,
				 u.release);
			add_check(checks, "guest-kernel", LVL_OK, buf, NULL);
			return;
		}
	}
	snprintf(path, sizeof(path), "%s/kernels", ctx->state_dir);
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(buf, sizeof(buf), "kernels fetched under %s", path);
		add_check(checks, "guest-kernel", LVL_OK, buf, NULL);
		return;
	}
	if (util_have_program("apt-get") && util_have_program("dpkg-deb")) {
		add_check(checks, "guest-kernel", LVL_WARN,
			  "no /boot/vmlinuz for the running kernel: Debian's linux-image-cloud-amd64 will be fetched "
			  "(not installed) on first use",
			  "`space kernel fetch` fetches it now; or import templates with --kernel");
		return;
	}
	add_check(checks, "guest-kernel", LVL_WARN, "no guest kernel found and no apt-get to fetch one",
		  "import templates with --kernel FILE --modules DIR");
}

static void check_pool(space_ctx *ctx, cJSON *checks, bool *vm_ok, bool *jail_ok)
{
	struct pool_info pi;
	char buf[PATH_MAX + 128], fb[32];
	int r = core_pool_get_info(ctx, &pi);
	if (r < 0) {
		snprintf(buf, sizeof(buf), "%s", space_ctx_last_error(ctx));
		add_check(checks, "pool", LVL_FAIL, buf,
			  r == -EACCES || r == -EPERM ? "needs root: run `space doctor` as root to check the pool"
						      : "run `space init` (as root) to create the state dir and pool");
		*vm_ok = *jail_ok = false;
		return;
	}
	snprintf(buf, sizeof(buf), "btrfs pool at %s%s%s%s, %s free", pi.path, pi.loop_image[0] ? " (loop image " : "",
		 pi.loop_image, pi.loop_image[0] ? ")" : "", util_format_size(pi.free_bytes, fb, sizeof(fb)));
	add_check(checks, "pool", LVL_OK, buf, NULL);
	/* What the sandboxes' disks could grow to, against what the pool has: thin provisioning made visible. */
	char pb[32], ub[32];
	bool over = pi.promised_bytes > pi.free_bytes;
	snprintf(buf, sizeof(buf),
		 "%s promised to %u sandbox disk%s; %s used, %s free (statvfs: approximate on btrfs)%s",
		 util_format_size(pi.promised_bytes, pb, sizeof(pb)), pi.sandbox_disks, pi.sandbox_disks == 1 ? "" : "s",
		 util_format_size(pi.used_bytes, ub, sizeof(ub)), util_format_size(pi.free_bytes, fb, sizeof(fb)),
		 over ? ": the disks can fill the pool" : "");
	add_check(checks, "pool-space", over ? LVL_WARN : LVL_OK, buf,
		  over ? "remove sandboxes (`space rm`), or grow the pool; a full pool fails sandboxes' writes" : NULL);
	/* A jail's disk (core/disk_tree.h): a tree on the pool where it has quotas, else an ext4 image. */
	int q = store_btrfs_quota_mode(pi.path);
	if (q == STORE_QUOTA_SIMPLE || q == STORE_QUOTA_FULL)
		add_check(checks, "jail-disks", LVL_OK,
			  q == STORE_QUOTA_SIMPLE
				  ? "directory trees on the pool, capped by btrfs simple quotas: a full pool or disk is "
				    "ENOSPC or EDQUOT inside, and the rest stays writable"
				  : "directory trees on the pool, capped by btrfs qgroups (full accounting: simple quotas "
				    "make snapshots cheaper)",
			  NULL);
	else if (pi.loop_image[0])
		add_check(checks, "jail-disks", LVL_OK,
			  "ext4 images until the next template import turns btrfs simple quotas on in the loop pool "
			  "(templates imported after it give jails directory trees)",
			  NULL);
	else
		add_check(checks, "jail-disks", LVL_WARN,
			  "ext4 images on loop devices: the pool's btrfs has no quotas, and a full pool turns a jail's "
			  "disk read-only",
			  "turn simple quotas on (`btrfs quota enable --simple POOL`, Linux 6.7 or later), then import "
			  "templates again");
}

/* Whether a cgroup hierarchy is mounted with favordynmods: the kernel then keeps the lock a move into a
 * cgroup takes in the mode that needs no RCU grace period, for every hierarchy (and until reboot). */
static bool cgroup_favordynmods(void)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	if (!f)
		return false;
	struct mntent me;
	char buf[4096];
	bool on = false;
	while (!on && getmntent_r(f, &me, buf, sizeof(buf)))
		on = !strncmp(me.mnt_type, "cgroup", 6) && hasmntopt(&me, "favordynmods");
	endmntent(f);
	return on;
}

static void check_host(cJSON *checks, bool *vm_ok, bool *jail_ok)
{
	char buf[256];
	int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		/* A closed device is a question of who runs us, not of a missing module. */
		bool denied = errno == EACCES || errno == EPERM;
		snprintf(buf, sizeof(buf), "/dev/loop-control: %s%s", strerror(errno), denied ? " (needs root)" : "");
		add_check(checks, "loop", LVL_WARN, buf,
			  denied ? "run as root" : "modprobe loop (needed for --loop-pool and jail sandboxes)");
		*jail_ok = false;
	} else {
		close(fd);
		add_check(checks, "loop", LVL_OK, "loop devices available", NULL);
	}

	int r = try_namespaces();
	if (r < 0) {
		snprintf(buf, sizeof(buf), "cannot enter new mount/pid/net/ipc/uts namespaces: %s", strerror(-r));
		add_check(checks, "namespaces", LVL_FAIL, buf, "run as root on a kernel with namespaces enabled");
		*jail_ok = false;
	} else {
		add_check(checks, "namespaces", LVL_OK, "mount, pid, net, ipc and uts namespaces", NULL);
	}
	r = try_user_namespace();
	if (r < 0) {
		snprintf(buf, sizeof(buf), "user namespaces: %s (jail sandboxes cannot start)", strerror(-r));
		add_check(checks, "userns", LVL_FAIL, buf, "sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces");
		*jail_ok = false;
	} else {
		add_check(checks, "userns", LVL_OK, "user namespaces", NULL);
	}

	_cleanup_free_ char *actions = NULL;
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 ||
	    util_read_file("/proc/sys/kernel/seccomp/actions_avail", 4096, &actions, NULL) < 0 ||
	    !strstr(actions, "kill_process")) {
		add_check(checks, "seccomp", LVL_FAIL, "seccomp filters with kill_process are not available",
			  "a kernel with CONFIG_SECCOMP_FILTER (4.14 or newer)");
		*vm_ok = *jail_ok = false;
	} else {
		add_check(checks, "seccomp", LVL_OK, "seccomp filters (kill_process available)", NULL);
	}

	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0) {
		snprintf(buf, sizeof(buf), "Landlock: %s", errno == EOPNOTSUPP ? "disabled at boot" : strerror(errno));
		add_check(checks, "landlock", LVL_WARN, buf, "add landlock to the lsm= kernel parameter (optional layer)");
	} else {
		snprintf(buf, sizeof(buf), "Landlock ABI %ld", abi);
		add_check(checks, "landlock", LVL_OK, buf, NULL);
	}

	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		bool denied = errno == EACCES || errno == EPERM;
		snprintf(buf, sizeof(buf), "/dev/net/tun: %s%s", strerror(errno), denied ? " (needs root)" : "");
		add_check(checks, "tap", LVL_WARN, buf, denied ? "run as root" : "modprobe tun (VM sandboxes' network)");
	} else {
		close(fd);
		add_check(checks, "tap", LVL_OK, "TAP devices (/dev/net/tun)", NULL);
	}

	int cg = util_cgroup_version();
	if (cg < 0) {
		add_check(checks, "cgroups", LVL_FAIL, "neither a cgroup v2 tree nor v1 pids+freezer hierarchies",
			  "mount cgroup2 at /sys/fs/cgroup (or v1 pids, freezer, memory, cpu)");
		*jail_ok = false;
	} else if (cg == 2) {
		add_check(checks, "cgroups", LVL_OK,
			  "cgroup v2 (unified): a sandbox's first process and its helpers are created in their cgroups",
			  NULL);
	} else if (cgroup_favordynmods()) {
		add_check(checks, "cgroups", LVL_OK,
			  "cgroup v1 hierarchies, favordynmods on: a sandbox's processes are moved into their cgroups "
			  "without waiting for a kernel RCU grace period", NULL);
	} else {
		/* Measured on a 2-core host: a move 5-20 ms spaced out, 0.6 ms with favordynmods. */
		add_check(checks, "cgroups", LVL_WARN,
			  "cgroup v1 hierarchies: a sandbox's first process is moved into its cgroups, which waits for a "
			  "kernel RCU grace period (5-20 ms of every start)",
			  "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1), or mount a cgroup hierarchy with "
			  "favordynmods (`mount -o remount,favordynmods /sys/fs/cgroup/unified`: moves stop waiting, forks "
			  "and exits get slightly slower, and it stays on until reboot or a cgroup2 mount without it; "
			  "scripts/setup.sh sets it)");
	}
	if (geteuid() != 0) {
		add_check(checks, "root", LVL_FAIL, "not running as root", "run space as root");
		*vm_ok = *jail_ok = false;
	}
}

/* The state directory's identity-map setting (core/uids.h), and whether this is a test build. */
static void check_boundary_settings(space_ctx *ctx, cJSON *checks)
{
	int r = space_identity_map_allowed(ctx);
	if (r > 0)
		add_check(checks, "uid-map", LVL_WARN,
			  "identity uid map ALLOWED (space init --allow-identity-map): where the kernel cannot idmap a "
			  "jail's rootfs, root inside is host uid 0 (without capabilities), a weaker boundary",
			  "space init --refuse-identity-map");
	else if (r == 0)
		add_check(checks, "uid-map", LVL_OK,
			  "jails run root inside as a private, machine-wide unique uid range on an idmapped rootfs; "
			  "the identity uid map is refused",
			  NULL);
#if HAVE_TEST_SWITCHES
	add_check(checks, "test-build", LVL_WARN,
		  "this libspace is a test build: environment switches (SPACE_VM_JAIL=0, "
		  "SPACE_VMM_TEST_FORBIDDEN_SYSCALL, SPACE_TEST_JAIL_NO_IDMAP) can weaken sandboxes",
		  "build without -Dtest_switches for production");
#endif
}

/*
 * --verbose: how each helper runs that faces sandbox-made data or acts for a sandbox, as the installed
 * binary describes itself (`HELPER --describe-sandbox`: one JSON object with uid, capabilities,
 * no_new_privs, seccomp rules per thread role or null, default_action, note). A helper that keeps root,
 * capabilities or runs without a filter is a warning: the operator should know which processes hold
 * which boundary (docs/security.md).
 */
static void check_helper_sandbox(space_ctx *ctx, cJSON *checks, const char *helper)
{
	char path[PATH_MAX], name[32], buf[512];
	snprintf(name, sizeof(name), "helper-%s", helper + strlen("space-"));
	if (ctx_helper_path(ctx, helper, path, sizeof(path)) < 0) {
		snprintf(buf, sizeof(buf), "%s is not installed (%s)", helper, path);
		add_check(checks, name, LVL_WARN, buf, NULL);
		return;
	}
	const char *argv[] = { path, "--describe-sandbox", NULL };
	_cleanup_free_ char *out = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = util_run(argv, &out) == 0 && out ? cJSON_Parse(out) : NULL;
	if (!cJSON_IsObject(j)) {
		snprintf(buf, sizeof(buf), "%s does not describe its confinement (--describe-sandbox)", path);
		add_check(checks, name, LVL_WARN, buf, "install helpers of the same version as libspace");
		return;
	}
	/* uid: "own" (a machine-wide unique slot) or a number; capabilities: "none", "all" or a list. */
	const char *uid = cJSON_GetStringValue(cJSON_GetObjectItem(j, "uid"));
	const cJSON *cj = cJSON_GetObjectItem(j, "capabilities");
	const char *caps = cJSON_IsArray(cj) && !cJSON_GetArraySize(cj) ? "none"
			   : cJSON_IsString(cj)				 ? cj->valuestring
									 : NULL;
	const char *dflt = cJSON_GetStringValue(cJSON_GetObjectItem(j, "default_action"));
	const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(j, "note"));
	bool nnp = cJSON_IsTrue(cJSON_GetObjectItem(j, "no_new_privs"));
	bool own = uid && (!strcmp(uid, "own") || !strncmp(uid, "its own", 7));
	/* seccomp: rules per thread role, or (one filter) a count in "seccomp_rules"; null: none. */
	const cJSON *sc = cJSON_GetObjectItem(j, "seccomp");
	const cJSON *nrules = cJSON_GetObjectItem(j, "seccomp_rules");
	size_t n = (size_t)snprintf(buf, sizeof(buf), "uid %s, capabilities %s%s, seccomp",
				    own ? "of its own (machine-wide unique)" : uid ? uid : "?", caps ? caps : "?",
				    nnp ? ", no_new_privs" : "");
	const cJSON *it;
	bool filtered = false;
	if (cJSON_IsObject(sc)) {
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " rules:");
		cJSON_ArrayForEach(it, sc) if (cJSON_IsNumber(it) && n < sizeof(buf))
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s %d", it->string, it->valueint);
		filtered = true;
	} else if (cJSON_IsNumber(nrules) && !cJSON_IsNull(sc) && n < sizeof(buf)) {
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " rules: process %d", nrules->valueint);
		filtered = true;
	}
	if (filtered && n < sizeof(buf))
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " (any other syscall: %s)", dflt ? dflt : "?");
	else if (n < sizeof(buf))
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " none");
	if (note && n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, "; %s", note);
	bool confined = (own || (uid && strcmp(uid, "0"))) && caps && !strcmp(caps, "none") && nnp && filtered;
	add_check(checks, name, confined ? LVL_OK : LVL_WARN, buf, NULL);
}

/* One field of /proc/PID/status ("Uid", "CapEff", ...): its value without leading blanks. */
static bool proc_status_field(int pid, const char *key, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	_cleanup_free_ char *st = NULL;
	if (util_read_file(path, 65536, &st, NULL) < 0)
		return false;
	size_t kl = strlen(key);
	for (char *l = st; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, kl) || l[kl] != ':')
			continue;
		l += kl + 1;
		l += strspn(l, " \t");
		snprintf(buf, len, "%.*s", (int)strcspn(l, "\n"), l);
		return true;
	}
	return false;
}

/* --verbose: the gateways running now (<state>/run/<id>/gateway.pid), as the kernel sees them. */
static void check_live_gateways(space_ctx *ctx, cJSON *checks)
{
	char dir[PATH_MAX], buf[512];
	snprintf(dir, sizeof(dir), "%s/run", ctx->state_dir);
	_cleanup_(closedirp) DIR *d = opendir(dir);
	unsigned running = 0, loose = 0;
	buf[0] = '\0';
	for (struct dirent *e; d && (e = readdir(d));) {
		char pidf[PATH_MAX + 300];
		_cleanup_free_ char *txt = NULL;
		int pid = 0;
		unsigned long long start = 0;
		if (!util_name_valid(e->d_name))
			continue;
		snprintf(pidf, sizeof(pidf), "%s/%s/gateway.pid", dir, e->d_name);
		if (util_read_file(pidf, 64, &txt, NULL) < 0 || sscanf(txt, "%d %llu", &pid, &start) != 2 ||
		    !core_process_alive(pid, start))
			continue;
		running++;
		char uid[64] = "", eff[32] = "", bnd[32] = "", nnp[8] = "", sec[8] = "";
		proc_status_field(pid, "Uid", uid, sizeof(uid));
		proc_status_field(pid, "CapEff", eff, sizeof(eff));
		proc_status_field(pid, "CapBnd", bnd, sizeof(bnd));
		proc_status_field(pid, "NoNewPrivs", nnp, sizeof(nnp));
		proc_status_field(pid, "Seccomp", sec, sizeof(sec));
		bool ok = uid[0] && uid[0] != '0' && !strcmp(eff, "0000000000000000") &&
			  !strcmp(bnd, "0000000000000000") && !strcmp(nnp, "1") && !strcmp(sec, "2");
		if (!ok && !loose++)
			snprintf(buf, sizeof(buf), "gateway %d of %s is not confined: Uid %s, CapEff %s, CapBnd %s, "
						   "NoNewPrivs %s, Seccomp %s",
				 pid, e->d_name, uid, eff, bnd, nnp, sec);
	}
	if (!running)
		return;
	if (!loose)
		snprintf(buf, sizeof(buf), "%u running, each as its own uid with no capabilities, no_new_privs, seccomp",
			 running);
	add_check(checks, "gateways", loose ? LVL_FAIL : LVL_OK, buf,
		  loose ? "recreate the sandbox (its gateway predates this build) or reinstall space-gateway" : NULL);
}

static void check_helper_sandboxes(space_ctx *ctx, cJSON *checks)
{
	static const char *const helpers[] = { "space-vmm", "space-gateway", "space-snapd", "space-logcap",
					       "space-unpack" };
	for (size_t i = 0; i < ARRAY_SIZE(helpers); i++)
		check_helper_sandbox(ctx, checks, helpers[i]);
	check_live_gateways(ctx, checks);
}

SPACE_API int space_doctor(space_ctx *ctx, unsigned flags, char **ret_json)
{
	CTX_ENTER(ctx);
	if (!ctx || !ret_json || (flags & ~SPACE_DOCTOR_VERBOSE))
		return -EINVAL;
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
	cJSON *checks = root ? cJSON_AddArrayToObject(root, "checks") : NULL;
	if (!checks)
		return -ENOMEM;
	bool vm_ok = true, vm_slow = false, jail_ok = true;
	check_kvm(ctx, checks, &vm_ok, &vm_slow);
	check_helpers(ctx, checks, &vm_ok, &jail_ok);
	check_kernel(ctx, checks);
	check_host(checks, &vm_ok, &jail_ok);
	check_pool(ctx, checks, &vm_ok, &jail_ok);
	check_boundary_settings(ctx, checks);
	if (flags & SPACE_DOCTOR_VERBOSE)
		check_helper_sandboxes(ctx, checks);

	cJSON *vm = cJSON_AddObjectToObject(root, "vm");
	cJSON *jail = cJSON_AddObjectToObject(root, "jail");
	if (!vm || !jail)
		return -ENOMEM;
	cJSON_AddBoolToObject(vm, "usable", vm_ok);
	cJSON_AddStringToObject(vm, "summary",
				vm_ok ? (vm_slow ? "usable, slowly (nested virtualization)" : "usable")
				      : "not usable here: see the failed checks");
	cJSON_AddBoolToObject(jail, "usable", jail_ok);
	cJSON_AddStringToObject(jail, "summary", jail_ok ? "usable" : "not usable here: see the failed checks");
	char *s = cJSON_PrintUnformatted(root);
	if (!s)
		return -ENOMEM;
	*ret_json = s;
	return 0;
}
