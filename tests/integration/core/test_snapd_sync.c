/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-snapd's SYNC, privilege-separated (src/core/autosnap_sync.c), as root against a fake agent on a
 * unix socket:
 *   confined  the process that talks to the agent (the caller's only child while the agent holds its
 *             reply) is not root: Uid a single uid slot, every capability set and the bounding set empty,
 *             NoNewPrivs 1, Seccomp 2; the caller's result is 0 for OK
 *   hostile   an ERR reply comes back as its errno without the agent's text; a frame announcing 2 GiB is
 *             -EBADMSG; one of the largest size allowed is handled, not a seccomp kill; a hang-up is
 *             -EPIPE; an address nobody listens on fails; the caller survives all
 *   slot      the "snapd-sync" uid slot is free again after every call
 *   plain     without ctx->sync_confined the sync runs in the caller (no child)
 * Ends with "snapd sync: N checks".
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../unit/vmm/check.h"
#include "core/autosnap.h"
#include "core/internal.h"
#include "proto/agent_client.h"
#include "proto/proto.h"
#include "util/cleanup.h"
#include "util/uidalloc.h"
#include "util/util.h"

#define SANDBOX "sb-synctest"

enum reply { REPLY_OK, REPLY_ERR, REPLY_HUGE, REPLY_BIG, REPLY_HANGUP };

struct fake {
	int listen_fd;
	enum reply reply;
	pid_t caller;
	/* what the fake agent saw of the process that wrote the request */
	int children;
	char status[4096];
	size_t got;
};

/* The caller's children right now (the test's main thread forks them). */
static int children_of(pid_t pid, pid_t *ret_first)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	_cleanup_free_ char *txt = NULL;
	if (util_read_file(path, 4096, &txt, NULL) < 0)
		return -1;
	int n = 0;
	for (char *p = txt, *end; *p; p = end) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (!n)
			*ret_first = (pid_t)v;
		n++;
	}
	return n;
}

static void *fake_agent(void *arg)
{
	struct fake *f = arg;
	int c = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return NULL;
	/* The request: HELLO then SYNC, sent together; once a byte is here the sender is blocked on us. */
	char buf[4096];
	ssize_t n = read(c, buf, sizeof(buf));
	f->got = n > 0 ? (size_t)n : 0;
	usleep(50 * 1000);
	pid_t child = 0;
	f->children = children_of(f->caller, &child);
	if (f->children == 1) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)child);
		_cleanup_free_ char *st = NULL;
		if (util_read_file(path, 65536, &st, NULL) == 0)
			snprintf(f->status, sizeof(f->status), "%s", st);
	}
	struct proto_buf b = { 0 };
	struct proto_hello h = { .magic = PROTO_MAGIC, .major = PROTO_VERSION_MAJOR, .minor = PROTO_VERSION_MINOR,
				 .max_payload = PROTO_MAX_PAYLOAD };
	snprintf(h.version, sizeof(h.version), "fake");
	snprintf(h.hostname, sizeof(h.hostname), "fake");
	if (f->reply != REPLY_HANGUP)
		proto_put_hello(&b, &h);
	if (f->reply == REPLY_OK)
		proto_put_empty(&b, PROTO_OK);
	else if (f->reply == REPLY_ERR)
		proto_put_err(&b, ENOSPC, "HOSTILE-TEXT \x1b[2J from the sandbox");
	(void)util_write_all(c, b.data + b.head, proto_buf_pending(&b));
	if (f->reply == REPLY_HUGE) {
		/* A header whose length field is all ones, whatever its layout: beyond every limit. */
		static const uint8_t huge[PROTO_HEADER_SIZE] = { 0x82, 0xff, 0xff, 0xff, 0x7f };
		(void)util_write_all(c, huge, sizeof(huge));
	}
	if (f->reply == REPLY_BIG) {
		/* A frame of the largest size allowed (length u32 little-endian, then type): the client's
		 * buffer grows to hold it. */
		static uint8_t big[PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD];
		uint32_t len = PROTO_MAX_PAYLOAD;
		memcpy(big, &len, 4);
		big[4] = PROTO_OK;
		(void)util_write_all(c, big, sizeof(big));
	}
	proto_buf_free(&b);
	shutdown(c, SHUT_WR); /* a hang-up, for REPLY_HANGUP; after the reply for the others */
	/* Until the client is done: it closes its end. */
	while (read(c, buf, sizeof(buf)) > 0)
		;
	close(c);
	return NULL;
}

static int count_owner(enum uidalloc_kind kind, uint32_t uid, const char *owner, void *userdata)
{
	(void)kind;
	(void)uid;
	const char **want = userdata;
	if (!strcmp(owner, want[0]))
		(*(int *)(void *)want[1])++;
	return 0;
}

static int slots_held(const char *owner)
{
	int n = 0;
	const char *want[2] = { owner, (const char *)(void *)&n };
	(void)uidalloc_foreach(count_owner, want);
	return n;
}

/* Field key of a /proc status text, or "" */
static void field(const char *st, const char *key, char *buf, size_t len)
{
	buf[0] = '\0';
	size_t kl = strlen(key);
	for (const char *l = st; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ':') {
			l += kl + 1;
			l += strspn(l, " \t");
			snprintf(buf, len, "%.*s", (int)strcspn(l, "\n"), l);
			return;
		}
}

static int run_one(space_ctx *ctx, const char *sock, enum reply reply, struct fake *f, struct agent_error *err)
{
	*f = (struct fake){ .reply = reply, .caller = getpid() };
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	unlink(sock);
	if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(f->listen_fd, 1) < 0) {
		perror("fake agent socket");
		exit(1);
	}
	pthread_t t;
	pthread_create(&t, NULL, fake_agent, f);
	char addr[PATH_MAX + 8];
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	int r = autosnap_sync(ctx, SANDBOX, addr, err);
	pthread_join(t, NULL);
	close(f->listen_fd);
	return r;
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root (drops to a uid slot)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN); /* the fake agent writes to clients that already gave up */
	char state[] = "/tmp/space-test-snapd-sync-XXXXXX";
	if (!mkdtemp(state))
		return 1;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = state;
	space_ctx *ctx;
	if (space_ctx_new(&o, &ctx) < 0)
		return 1;
	ctx->sync_confined = true;
	char sock[PATH_MAX], owner[PATH_MAX + 64];
	snprintf(sock, sizeof(sock), "%s/agent.sock", state);
	snprintf(owner, sizeof(owner), "%s %s snapd-sync", state, SANDBOX);
	struct fake f;
	struct agent_error err;

	/* confined */
	int r = run_one(ctx, sock, REPLY_OK, &f, &err);
	CHECK(r == 0, "sync against an OK agent: %s (%s)", strerror(-r), err.msg);
	CHECK(f.got > 0, "the fake agent got no request");
	CHECK(f.children == 1, "the caller had %d children while the agent held its reply (want the sync child)", f.children);
	char uid[64], eff[32], prm[32], bnd[32], inh[32], amb[32], nnp[8], sec[8];
	field(f.status, "Uid", uid, sizeof(uid));
	field(f.status, "CapEff", eff, sizeof(eff));
	field(f.status, "CapPrm", prm, sizeof(prm));
	field(f.status, "CapInh", inh, sizeof(inh));
	field(f.status, "CapBnd", bnd, sizeof(bnd));
	field(f.status, "CapAmb", amb, sizeof(amb));
	field(f.status, "NoNewPrivs", nnp, sizeof(nnp));
	field(f.status, "Seccomp", sec, sizeof(sec));
	unsigned u[4] = { 0 };
	enum uidalloc_kind kind;
	uint32_t first;
	CHECK(sscanf(uid, "%u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4 && u[0] && u[0] == u[1] && u[1] == u[2] &&
		  u[2] == u[3] && uidalloc_slot_of(u[0], &kind, &first) && kind == UIDALLOC_SINGLE && first == u[0],
	  "the agent's peer runs as Uid %s (want one single uid slot, never 0)", uid);
	static const char zero[] = "0000000000000000";
	CHECK(!strcmp(eff, zero) && !strcmp(prm, zero) && !strcmp(inh, zero) && !strcmp(bnd, zero) && !strcmp(amb, zero),
	  "capabilities of the agent's peer: eff %s prm %s inh %s bnd %s amb %s", eff, prm, inh, bnd, amb);
	CHECK(!strcmp(nnp, "1"), "NoNewPrivs %s", nnp);
	CHECK(!strcmp(sec, "2"), "Seccomp %s (want 2: a filter)", sec);
	CHECK(slots_held(owner) == 0, "the snapd-sync uid slot is still held after the sync");

	/* hostile */
	r = run_one(ctx, sock, REPLY_ERR, &f, &err);
	CHECK(r == -ENOSPC, "ERR ENOSPC came back as %d", r);
	CHECK(!strstr(err.msg, "HOSTILE") && !strchr(err.msg, '\x1b'), "the agent's text reached the caller: %s", err.msg);
	r = run_one(ctx, sock, REPLY_HUGE, &f, &err);
	CHECK(r == -EBADMSG, "a 2 GiB frame: %d (%s)", r, err.msg);
	r = run_one(ctx, sock, REPLY_BIG, &f, &err);
	CHECK(r == 0 || r == -EBADMSG, "a 1 MiB frame: %d (%s): the confined process must cope, not be killed", r, err.msg);
	r = run_one(ctx, sock, REPLY_HANGUP, &f, &err);
	CHECK(r == -EPIPE, "hang-up: %d (%s)", r, err.msg);
	char nowhere[PATH_MAX + 16];
	snprintf(nowhere, sizeof(nowhere), "unix:%s/nobody.sock", state);
	r = autosnap_sync(ctx, SANDBOX, nowhere, &err);
	CHECK(r == -ENOENT || r == -ECONNREFUSED, "nobody listening: %d (%s)", r, err.msg);
	CHECK(slots_held(owner) == 0, "the snapd-sync uid slot is still held after the failures");
	pid_t none;
	CHECK(children_of(getpid(), &none) == 0, "a sync child outlived its call");

	/* plain: the library's other callers keep syncing in their own process */
	ctx->sync_confined = false;
	r = run_one(ctx, sock, REPLY_OK, &f, &err);
	CHECK(r == 0 && f.children == 0, "unconfined sync: %d, %d children", r, f.children);

	unlink(sock);
	space_ctx_free(ctx);
	util_rm_rf(state);
	printf("snapd sync: %d checks\n", check_count);
	return check_exit();
}
