/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Machine-wide uid slots (issue 14, item 9), as root:
 *   alloc  src/util/uidalloc.c: slots are distinct, claim/set_owner/release keep to their owners, bad
 *          owner texts and non-slot uids are refused, foreach sees what is held
 *   vmm    the VMM of a vm sandbox runs as the single uid its sandbox holds: two sandboxes of two state
 *          directories get two different ones (a stand-in space-vmm records its command line; no KVM needed)
 *   jail   jail_start without a range takes one in PID 1's name, jail_kill frees it; where idmapped mounts
 *          fail (test builds: SPACE_TEST_JAIL_NO_IDMAP=1) it refuses, leaving nothing, unless the identity
 *          map is allowed; a release build ignores the switch
 * Ends with "uid slots: N checks".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../unit/vmm/check.h"
#include "config.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "core/uids.h"
#include "core/vm_backend.h"
#include "jail/jail.h"
#include "proto/agent_client.h"
#include "util/cleanup.h"
#include "util/uidalloc.h"
#include "util/util.h"

#define NSINGLE 400
#define NRANGE 40

struct seen {
	const char *owner;
	int n;
};

static int count_mine(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata)
{
	struct seen *s = userdata;
	(void)kind;
	(void)uid;
	s->n += !strcmp(owner, s->owner);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void test_alloc(void)
{
	/* Owned in the name of this process: were the test to crash, `space init` frees them. */
	char me[64], other[64];
	snprintf(me, sizeof(me), "pid %d %llu test-uids", (int)getpid(), (unsigned long long)core_process_start_time(getpid()));
	snprintf(other, sizeof(other), "pid %d %llu test-uids-other", (int)getpid(),
		 (unsigned long long)core_process_start_time(getpid()));
	static uint32_t singles[NSINGLE], ranges[NRANGE];
	int r;
	for (int i = 0; i < NSINGLE; i++) {
		r = uidalloc_acquire(UIDALLOC_SINGLE, me, &singles[i]);
		CHECK(r == 0, "acquire single %d: %s", i, strerror(-r));
	}
	for (int i = 0; i < NRANGE; i++) {
		r = uidalloc_acquire(UIDALLOC_RANGE, me, &ranges[i]);
		CHECK(r == 0, "acquire range %d: %s", i, strerror(-r));
	}
	qsort(singles, NSINGLE, sizeof(singles[0]), cmp_u32);
	qsort(ranges, NRANGE, sizeof(ranges[0]), cmp_u32);
	int dup = 0;
	for (int i = 1; i < NSINGLE; i++)
		dup += singles[i] == singles[i - 1];
	for (int i = 1; i < NRANGE; i++)
		dup += ranges[i] < ranges[i - 1] + UIDALLOC_RANGE_SIZE;
	CHECK(dup == 0, "%d overlapping slots", dup);
	CHECK(singles[0] >= 0x90000000u && singles[NSINGLE - 1] < 0xa0000000u, "singles outside their area");
	CHECK(ranges[0] >= 0x40000000u && ranges[NRANGE - 1] <= 0x80000000u - UIDALLOC_RANGE_SIZE, "ranges outside their area");
	struct seen s = { .owner = me };
	CHECK(uidalloc_foreach(count_mine, &s) == 0 && s.n == NSINGLE + NRANGE, "foreach saw %d of %d", s.n,
	  NSINGLE + NRANGE);

	uint32_t u = singles[0], g = ranges[0];
	char buf[300];
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, u, buf, sizeof(buf)) == 0 && !strcmp(buf, me), "owner: '%s'", buf);
	CHECK(uidalloc_claim(UIDALLOC_SINGLE, u, me) == 0, "claim of a slot held by the same owner");
	CHECK(uidalloc_claim(UIDALLOC_SINGLE, u, other) == -EEXIST, "claim of another's slot");
	CHECK(uidalloc_claim(UIDALLOC_RANGE, g + 1, me) == -EINVAL, "claim of a uid inside a range");
	CHECK(uidalloc_claim(UIDALLOC_RANGE, 1000, me) == -EINVAL, "claim of a system uid");
	CHECK(uidalloc_set_owner(UIDALLOC_SINGLE, u, other, me) == -ESTALE, "set_owner with the wrong old owner");
	CHECK(uidalloc_set_owner(UIDALLOC_SINGLE, u, me, other) == 0 &&
		  uidalloc_owner(UIDALLOC_SINGLE, u, buf, sizeof(buf)) == 0 && !strcmp(buf, other),
	  "set_owner: '%s'", buf);
	CHECK(uidalloc_release(UIDALLOC_SINGLE, u, me) == 0 && uidalloc_owner(UIDALLOC_SINGLE, u, buf, sizeof(buf)) == 0,
	  "a release in another's name freed the slot");
	CHECK(uidalloc_release(UIDALLOC_SINGLE, u, other) == 0 &&
		  uidalloc_owner(UIDALLOC_SINGLE, u, buf, sizeof(buf)) == -ENOENT,
	  "release by its owner");
	CHECK(uidalloc_claim(UIDALLOC_SINGLE, u, me) == 0, "claim of a free slot");

	char longer[UIDALLOC_OWNER_MAX + 2];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	uint32_t x;
	CHECK(uidalloc_acquire(UIDALLOC_SINGLE, longer, &x) == -ENAMETOOLONG, "owner too long");
	CHECK(uidalloc_acquire(UIDALLOC_SINGLE, "two\nlines", &x) == -EINVAL, "owner with a newline");
	CHECK(uidalloc_acquire(UIDALLOC_SINGLE, "", &x) == -EINVAL, "empty owner");
	uint32_t first;
	enum uidalloc_kind kind;
	CHECK(uidalloc_slot_of(g + 77, &kind, &first) && kind == UIDALLOC_RANGE && first == g, "slot of a uid in a range");
	CHECK(!uidalloc_slot_of(0, &kind, &first) && !uidalloc_slot_of(0x8fffffffu, &kind, &first), "uids outside");

	for (int i = 0; i < NSINGLE; i++)
		(void)uidalloc_release(UIDALLOC_SINGLE, singles[i], me);
	for (int i = 0; i < NRANGE; i++)
		(void)uidalloc_release(UIDALLOC_RANGE, ranges[i], me);
	s.n = 0;
	CHECK(uidalloc_foreach(count_mine, &s) == 0 && s.n == 0, "%d slots left", s.n);
}

/* A space-vmm stand-in: records its arguments, reports a setup failure on the ready fd (3). */
static const char fake_vmm[] = "#!/bin/sh\n"
			       "echo \"$@\" > \"$FAKE_VMM_ARGS\"\n"
			       "echo 'error stand-in space-vmm' >&3\n"
			       "exit 1\n";

struct sbx {
	space_ctx *ctx;
	char state[64];
	struct sandbox_row row;
};

static int sandbox_new(struct sbx *x, const char *id)
{
	snprintf(x->state, sizeof(x->state), "/tmp/space-test-uids-XXXXXX");
	if (!mkdtemp(x->state))
		return -errno;
	struct space_ctx_options o = { .version = 1, .state_dir = x->state };
	int r = space_ctx_new(&o, &x->ctx);
	char db[128], msg[256];
	snprintf(db, sizeof(db), "%s/space.db", x->state);
	struct store *s;
	if (r == 0 && (r = store_open(db, true, &s, msg, sizeof(msg))) == 0)
		store_close(s);
	if (r == 0)
		r = ctx_store(x->ctx, &s);
	if (r < 0)
		return r;
	memset(&x->row, 0, sizeof(x->row));
	struct sandbox_info *b = &x->row.info;
	snprintf(b->id, sizeof(b->id), "%s", id);
	snprintf(b->isolation, sizeof(b->isolation), "vm");
	b->cpus = 1;
	b->memory_mib = 64;
	snprintf(b->path, sizeof(b->path), "%s/disk", x->state);
	snprintf(x->row.runtime_dir, sizeof(x->row.runtime_dir), "%s/run/%s", x->state, id);
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "INSERT INTO sandboxes(id, template, isolation, status, cpus, memory_mib, path, runtime_dir, created_ms,"
		 " updated_ms) VALUES ('%s', 't', 'vm', 'creating', 1, 64, '%s', '%s', 0, 0)",
		 id, b->path, x->row.runtime_dir);
	if ((r = store_exec(s, sql)) < 0)
		return r;
	return uids_acquire(x->ctx, &x->row);
}

/* The --jail-uid space-vmm was started with, 0 if none. */
static uint32_t started_uid(struct sbx *x, const char *args_path, char *status_arg, size_t len)
{
	unlink(args_path);
	struct backend_proc ji;
	struct agent_info ai;
	char snap[128];
	snprintf(snap, sizeof(snap), "%s/no-snapshot", x->state);
	int r = vm_backend_start(x->ctx, &x->row, "h", 0, snap, &ji, &ai);
	CHECK(r < 0 && strstr(space_ctx_last_error(x->ctx), "stand-in"), "stand-in VMM: %d %s", r,
	  space_ctx_last_error(x->ctx));
	_cleanup_free_ char *args = NULL;
	if (util_read_file(args_path, 65536, &args, NULL) < 0)
		return 0;
	char *s = strstr(args, "--status ");
	snprintf(status_arg, len, "%.*s", s ? (int)strcspn(s + 9, " \n") : 0, s ? s + 9 : "");
	s = strstr(args, "--jail-uid ");
	return s ? (uint32_t)strtoul(s + 11, NULL, 10) : 0;
}

static void test_vmm_uid(void)
{
	char dir[] = "/tmp/space-fakevmm-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char vmm[128], args[128];
	snprintf(vmm, sizeof(vmm), "%s/space-vmm", dir);
	snprintf(args, sizeof(args), "%s/args", dir);
	CHECK(util_write_file_atomic(vmm, fake_vmm, strlen(fake_vmm), 0755) == 0, "write stand-in");
	setenv("SPACE_VMM_PATH", vmm, 1);
	setenv("FAKE_VMM_ARGS", args, 1);
	unsetenv("SPACE_VM_JAIL");

	/* The same sandbox id in two state directories: still two different uids. */
	struct sbx a, b;
	int r = sandbox_new(&a, "sb-uidtestuidtest00");
	CHECK(r == 0, "sandbox a: %s (%s)", strerror(-r), a.ctx ? space_ctx_last_error(a.ctx) : "");
	r = sandbox_new(&b, "sb-uidtestuidtest00");
	CHECK(r == 0, "sandbox b: %s (%s)", strerror(-r), b.ctx ? space_ctx_last_error(b.ctx) : "");
	char st[256], owner[300];
	uint32_t ua = started_uid(&a, args, st, sizeof(st));
	CHECK(ua == a.row.host_uid && ua >= 0x90000000u, "space-vmm of a runs as %u, its slot is %u", ua, a.row.host_uid);
	char want[600];
	snprintf(want, sizeof(want), "%s/vmm.status", a.row.runtime_dir);
	CHECK(!strcmp(st, want), "space-vmm --status '%s', wanted '%s'", st, want);
	uint32_t ub = started_uid(&b, args, st, sizeof(st));
	CHECK(ub == b.row.host_uid && ub != ua, "space-vmm of b runs as %u (a: %u)", ub, ua);
	snprintf(want, sizeof(want), "%s %s vmm", a.state, a.row.info.id);
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, ua, owner, sizeof(owner)) == 0 && !strcmp(owner, want), "owner of %u: '%s'",
	  ua, owner);
	/* A restart takes the same uid again. */
	struct sandbox_row again = a.row;
	CHECK(uids_reclaim(a.ctx, &again) == 0 && again.host_uid == ua, "reclaim: %u, had %u", again.host_uid, ua);

#if HAVE_TEST_SWITCHES
	/* The test switch: no jail, no uid of its own (test builds only; release builds do not read it). */
	setenv("SPACE_VM_JAIL", "0", 1);
	CHECK(started_uid(&a, args, st, sizeof(st)) == 0, "SPACE_VM_JAIL=0 in a test build still jailed the VMM");
	unsetenv("SPACE_VM_JAIL");
#else
	setenv("SPACE_VM_JAIL", "0", 1);
	CHECK(started_uid(&a, args, st, sizeof(st)) == ua, "SPACE_VM_JAIL=0 unjailed the VMM of a release build");
	unsetenv("SPACE_VM_JAIL");
#endif

	/* A helper's uid (the gateway's) is owned like the sandbox's own. */
	uint32_t gw = 0;
	CHECK(uids_helper_acquire(a.ctx, a.row.info.id, "gateway", &gw) == 0 && gw >= 0x90000000u && gw != ua && gw != ub,
	  "gateway uid %u", gw);
	snprintf(want, sizeof(want), "%s %s gateway", a.state, a.row.info.id);
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, gw, owner, sizeof(owner)) == 0 && !strcmp(owner, want), "gateway owner '%s'",
	  owner);

	/* Stale slots: a's row destroyed frees a's two; b's row (another state directory) keeps b's until
	 * that state directory's store is gone. */
	struct store *sa;
	CHECK(ctx_store(a.ctx, &sa) == 0 && store_exec(sa, "UPDATE sandboxes SET status = 'destroyed'") == 0, "destroy a");
	int freed = uids_reap_stale(a.ctx);
	CHECK(freed >= 2, "reaped %d", freed);
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, ua, owner, sizeof(owner)) == -ENOENT, "slot of destroyed a kept");
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, gw, owner, sizeof(owner)) == -ENOENT, "gateway slot of destroyed a kept");
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, ub, owner, sizeof(owner)) == 0, "slot of live b (other state dir) freed");
	char dbb[128];
	snprintf(dbb, sizeof(dbb), "%s/space.db", b.state);
	space_ctx_free(b.ctx);
	b.ctx = NULL;
	unlink(dbb);
	CHECK(uids_reap_stale(a.ctx) >= 1 && uidalloc_owner(UIDALLOC_SINGLE, ub, owner, sizeof(owner)) == -ENOENT,
	  "slot of b kept after its state directory's store went away");

	uids_release(a.ctx, &a.row);
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, ua, owner, sizeof(owner)) == -ENOENT, "slot of a still held");
	CHECK(uidalloc_owner(UIDALLOC_SINGLE, ub, owner, sizeof(owner)) == -ENOENT, "slot of b still held");
	space_ctx_free(a.ctx);
	space_ctx_free(b.ctx);
	util_rm_rf(a.state);
	util_rm_rf(b.state);
	util_rm_rf(dir);
}

/* A busybox ext4 image in dir; 0 or -1 (no busybox or mkfs.ext4 on this host). */
static int make_image(const char *dir, char *img, size_t len)
{
	snprintf(img, len, "%s/rootfs.ext4", dir);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/scripts/busybox-tree.sh %s/tree >/dev/null 2>&1 && mkfs.ext4 -q -d %s/tree %s 32M >/dev/null 2>&1",
		 getenv("SPACE_SOURCE_DIR") ? getenv("SPACE_SOURCE_DIR") : ".", dir, dir, img);
	return system(cmd) == 0 ? 0 : -1;
}

static int jail_go(const char *img, const char *id, bool allow, struct jail_info *ji, char *err, size_t errlen)
{
	const char *argv[] = { "sh", "-c", "sleep 1000", NULL };
	struct jail_config cfg = { .id = id, .rootfs_image = img, .agent_path = "/bin/busybox", .listen_fd = -1,
				   .log_fd = -1, .argv_override = argv, .allow_identity_fallback = allow };
	return jail_start(&cfg, ji, err, errlen);
}

static void test_jail(void)
{
	char dir[] = "/var/tmp/space-test-uidjail-XXXXXX", img[256], err[512], owner[300], want[64];
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	if (access("/bin/busybox", X_OK) < 0 || make_image(dir, img, sizeof(img)) < 0) {
		CHECK(0, "no busybox image (busybox-static and e2fsprogs are test dependencies)");
		util_rm_rf(dir);
		return;
	}
	struct jail_info ji;
	int r = jail_go(img, "sb-uidjailtest0001", false, &ji, err, sizeof(err));
	CHECK(r == 0 && ji.uid_base >= 0x40000000u && ji.uid_slot == ji.uid_base, "own range: %d %s (base %u, slot %u)", r,
	  err, ji.uid_base, ji.uid_slot);
	snprintf(want, sizeof(want), "pid %d %llu jail", (int)ji.pid, (unsigned long long)ji.start_time);
	CHECK(r == 0 && uidalloc_owner(UIDALLOC_RANGE, ji.uid_slot, owner, sizeof(owner)) == 0 && !strcmp(owner, want),
	  "owner of the jail's own range: '%s', wanted '%s'", owner, want);
	if (r == 0) {
		CHECK(jail_kill(&ji, 5000) == 0, "kill");
		CHECK(uidalloc_owner(UIDALLOC_RANGE, ji.uid_slot, owner, sizeof(owner)) == -ENOENT, "jail_kill kept the range");
	}

	setenv("SPACE_TEST_JAIL_NO_IDMAP", "1", 1);
#if HAVE_TEST_SWITCHES
	r = jail_go(img, "sb-uidjailtest0002", false, &ji, err, sizeof(err));
	CHECK(r == -EOPNOTSUPP && strstr(err, "refusing the identity uid map"), "no idmap: %d '%s'", r, err);
	/* Refused: no cgroup left, nor its range (held in this process's name: main counts them). */
	CHECK(system("find /sys/fs/cgroup -name '*uidjailtest0002*' | grep -q .") != 0, "cgroup left by a refused jail");
	r = jail_go(img, "sb-uidjailtest0003", true, &ji, err, sizeof(err));
	CHECK(r == 0 && ji.uid_base == 0 && ji.uid_slot == 0, "allowed identity fallback: %d %s (base %u, slot %u)", r, err,
	  ji.uid_base, ji.uid_slot);
	if (r == 0)
		CHECK(jail_kill(&ji, 5000) == 0, "kill");
#else
	r = jail_go(img, "sb-uidjailtest0002", false, &ji, err, sizeof(err));
	CHECK(r == 0 && ji.uid_base >= 0x40000000u, "a release build obeyed SPACE_TEST_JAIL_NO_IDMAP: %d %s (base %u)", r,
	  err, ji.uid_base);
	if (r == 0)
		CHECK(jail_kill(&ji, 5000) == 0, "kill");
#endif
	unsetenv("SPACE_TEST_JAIL_NO_IDMAP");
	util_rm_rf(dir);
}

/* Slots held in this process's name or a jail's of this test: none may be left. */
static int count_test_slots(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata)
{
	(void)kind;
	(void)uid;
	char mine[32];
	snprintf(mine, sizeof(mine), "pid %d ", (int)getpid());
	*(int *)userdata += !strncmp(owner, mine, strlen(mine));
	return 0;
}

int main(int argc, char **argv)
{
	if (geteuid() != 0) {
		printf("SKIP: needs root\n");
		return 77;
	}
	const char *which = argc > 1 ? argv[1] : "all";
	if (!strcmp(which, "all") || !strcmp(which, "alloc"))
		test_alloc();
	if (!strcmp(which, "all") || !strcmp(which, "vmm"))
		test_vmm_uid();
	if (!strcmp(which, "all") || !strcmp(which, "jail"))
		test_jail();
	int left = 0;
	CHECK(uidalloc_foreach(count_test_slots, &left) == 0 && left == 0, "%d slots of this test left", left);
	printf("uid slots: %d checks\n", check_count);
	return check_exit();
}
