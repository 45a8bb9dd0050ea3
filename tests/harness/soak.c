/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The soak: N clients run mixed lifecycle operations for a duration on one state directory, half through
 * the library (space.h, one context per client) and half through `space serve` (HTTP/1.0 over its unix
 * socket, authorized by the uid grant: no key is sent). Each client owns at most two sandboxes and one
 * checkpoint per sandbox, so every operation must succeed: create, exec, file write + read back,
 * checkpoint (replacing the previous one), rollback, fork, pause, resume, destroy.
 *
 * Every minute the clients are held between operations and the leak check runs (leaks_of's sources, in C):
 * the rows that are not destroyed, the pool's sandbox and checkpoint subvolumes and the checkpoint rows are
 * exactly the live ones; no mount, loop device, cgroup, process or uid slot names a sandbox this run
 * destroyed. At the end the clients destroy what they own and the check runs once more (nothing may
 * be left). The RSS of `space serve` is sampled throughout: flat means the median of the last sixth of the run
 * is within 10% of the median of its second sixth.
 *
 * usage: soak --seconds S --clients N [--socket PATH --serve-pid PID] [--seed N]
 * ($SOAK_TEST_LEAK=1 leaves one sandbox behind on purpose: the leak check must fail the run.)
 * Last line: "soak: minutes=M clients=N ops=N errors=E leaks=L serve_rss_start_kib=A serve_rss_end_kib=B";
 * exit status 0 only with no error, no leak and a flat RSS.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "../api/apitest.h"

#define SOAK_OWN 2            /* sandboxes a client owns at most */
#define SOAK_MAX_CLIENTS 64
#define SOAK_MAX_DEAD 65536   /* destroyed ids remembered for the leak check */
#define SOAK_HTTP_MAX (1u << 20)

struct owned {
	char id[32];
	char cp[32];              /* its one checkpoint, "" when none */
	bool paused;
};

struct client {
	int idx;
	bool http;
	uint64_t rng;
	space_ctx *ctx;
	struct owned sb[SOAK_OWN];
	int n;
	uint64_t ops, errors;
	pthread_t thread;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool hold, stop;
	int active;
	const char *socket;
	const char *state, *pool;
	struct client clients[SOAK_MAX_CLIENTS];
	int nclients;
	char (*dead)[32];
	size_t ndead;
} soak = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static uint64_t rnd(struct client *c)
{
	uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fail_op(struct client *c, const char *op, const char *id, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->errors++;
	printf("soak: ERROR client %d (%s) %s %s: %s\n", c->idx, c->http ? "http" : "lib", op, id, msg);
}

static void remember_dead(const char *id)
{
	pthread_mutex_lock(&soak.lock);
	if (soak.ndead < SOAK_MAX_DEAD)
		snprintf(soak.dead[soak.ndead++], 32, "%s", id);
	pthread_mutex_unlock(&soak.lock);
}

/* --- HTTP/1.0 over the unix socket (the answer ends with the connection: no chunking) --- */

struct http_answer {
	int status;
	char *body;               /* NUL-terminated */
	size_t len;
};

static int write_all(int fd, const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int http(const char *method, const char *path, const void *body, size_t blen, struct http_answer *a)
{
	a->status = 0;
	a->body = NULL;
	a->len = 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", soak.socket);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 180 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int cr;
	while ((cr = connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0 && errno == EINTR)
		;
	if (cr < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	char head[512];
	int hn = snprintf(head, sizeof(head), "%s %s HTTP/1.0\r\nHost: localhost\r\nContent-Length: %zu\r\n%s\r\n", method,
			  path, blen, blen && ((const char *)body)[0] == '{' ? "Content-Type: application/json\r\n" : "");
	if (write_all(fd, head, (size_t)hn) < 0 || (blen && write_all(fd, body, blen) < 0)) {
		close(fd);
		return -EIO;
	}
	char *buf = malloc(SOAK_HTTP_MAX + 1);
	size_t len = 0;
	ssize_t n = 0;
	/* The library's helpers' SIGCHLD interrupts reads: EINTR is not the end. */
	while (buf && len < SOAK_HTTP_MAX && ((n = read(fd, buf + len, SOAK_HTTP_MAX - len)) > 0 || (n < 0 && errno == EINTR)))
		len += n > 0 ? (size_t)n : 0;
	int read_errno = n < 0 ? errno : 0;
	close(fd);
	if (!buf)
		return -ENOMEM;
	buf[len] = '\0';
	char *sep = strstr(buf, "\r\n\r\n");
	if (len < 12 || strncmp(buf, "HTTP/1.", 7) || !sep) {
		printf("soak: bad answer to %s %s (%zu bytes, read: %s): %.200s\n", method, path, len,
		       read_errno ? strerror(read_errno) : "EOF", buf);
		free(buf);
		return read_errno ? -read_errno : -EPROTO;
	}
	a->status = atoi(buf + 9);
	a->len = len - (size_t)(sep + 4 - buf);
	memmove(buf, sep + 4, a->len + 1);
	a->body = buf;
	return 0;
}

/* The value of the first "key":"prefix..." string in a JSON answer, into out. */
static bool json_id(const char *body, const char *prefix, char out[32])
{
	char pat[48];
	snprintf(pat, sizeof(pat), "\"id\":\"%s", prefix);
	const char *p = body ? strstr(body, pat) : NULL;
	if (!p)
		return false;
	p += 6;
	size_t n = strcspn(p, "\"");
	if (n == 0 || n >= 32)
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

/* One HTTP call that must answer a 2xx (want_body: and contain that text); returns the answer's body. */
static char *http_ok(struct client *c, const char *op, const char *id, const char *method, const char *path,
		     const char *body, size_t blen, const char *want_body)
{
	struct http_answer a;
	int r = http(method, path, body, blen, &a);
	if (r < 0) {
		fail_op(c, op, id, "%s %s: %s", method, path, strerror(-r));
		return NULL;
	}
	if (a.status < 200 || a.status > 299 || (want_body && !strstr(a.body, want_body))) {
		fail_op(c, op, id, "%s %s: %d %.300s", method, path, a.status, a.body);
		free(a.body);
		return NULL;
	}
	return a.body;
}

/* --- the operations, each through the client's way in --- */

static bool op_create(struct client *c, const char *fork_from_cp)
{
	char id[32] = "";
	if (c->http) {
		char path[96];
		if (fork_from_cp)
			snprintf(path, sizeof(path), "/v1/checkpoints/%s/fork", fork_from_cp);
		const char *body = fork_from_cp ? "{\"count\":1}" : "{\"template\":\"tiny\",\"isolation\":\"jail\"}";
		char *a = http_ok(c, fork_from_cp ? "fork" : "create", fork_from_cp ? fork_from_cp : "-", "POST",
				  fork_from_cp ? path : "/v1/sandboxes", body, strlen(body), NULL);
		if (!a)
			return false;
		bool got = json_id(a, "sb-", id);
		if (!got)
			fail_op(c, "create", "-", "no id in %.200s", a);
		free(a);
		if (!got)
			return false;
	} else {
		space_sandbox *sb[1] = { NULL };
		int r;
		if (fork_from_cp) {
			r = space_checkpoint_fork(c->ctx, fork_from_cp, NULL, sb);
		} else {
			struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
			so.template_name = api_template();
			so.isolation = "jail";
			r = space_sandbox_create(c->ctx, &so, sb);
		}
		if (r < 0) {
			fail_op(c, fork_from_cp ? "fork" : "create", fork_from_cp ? fork_from_cp : "-", "%s",
				space_ctx_last_error(c->ctx));
			return false;
		}
		snprintf(id, sizeof(id), "%s", space_sandbox_id(sb[0]));
		space_sandbox_free(sb[0]);
	}
	struct owned *o = &c->sb[c->n++];
	memset(o, 0, sizeof(*o));
	snprintf(o->id, sizeof(o->id), "%s", id);
	return true;
}

/* Opens o for a library call; counts the error when it does not open. */
static space_sandbox *lib_open(struct client *c, const char *op, struct owned *o)
{
	space_sandbox *sb = NULL;
	int r = space_sandbox_open(c->ctx, o->id, &sb);
	if (r < 0) {
		fail_op(c, op, o->id, "open: %s", space_ctx_last_error(c->ctx));
		return NULL;
	}
	return sb;
}

static void op_exec(struct client *c, struct owned *o)
{
	if (c->http) {
		char path[96];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", o->id);
		static const char body[] = "{\"argv\":[\"sh\",\"-c\",\"echo soak-$((6*7))\"]}";
		free(http_ok(c, "exec", o->id, "POST", path, body, sizeof(body) - 1, "\"stdout\":\"soak-42\\n\""));
		return;
	}
	space_sandbox *sb = lib_open(c, "exec", o);
	if (!sb)
		return;
	struct api_capture out;
	int code = -1, r = api_sh(sb, "echo soak-$((6*7))", &out, &code);
	if (r < 0 || code != 0 || strcmp(out.out, "soak-42\n"))
		fail_op(c, "exec", o->id, "rc %d exit %d out '%s' %s", r, code, out.out, space_ctx_last_error(c->ctx));
	space_sandbox_free(sb);
}

static void op_file(struct client *c, struct owned *o)
{
	char data[256], file[64];
	int dn = snprintf(data, sizeof(data), "client %d op %llu %016llx\n", c->idx, (unsigned long long)c->ops,
			  (unsigned long long)rnd(c));
	snprintf(file, sizeof(file), "/tmp/soak-%d", (int)(rnd(c) % 4));
	if (c->http) {
		char path[160];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=%s", o->id, file);
		char *a = http_ok(c, "file-write", o->id, "PUT", path, data, (size_t)dn, NULL);
		free(a);
		if (!a)
			return;
		struct http_answer ans;
		int r = http("GET", path, NULL, 0, &ans);
		if (r < 0 || ans.status != 200 || ans.len != (size_t)dn || memcmp(ans.body, data, (size_t)dn))
			fail_op(c, "file-read", o->id, "rc %d status %d: %.200s", r, ans.status, ans.body ? ans.body : "");
		free(ans.body);
		return;
	}
	space_sandbox *sb = lib_open(c, "file", o);
	if (!sb)
		return;
	int in = memfd_create("soak-in", MFD_CLOEXEC), outfd = memfd_create("soak-out", MFD_CLOEXEC);
	char back[sizeof(data)];
	ssize_t bn = -1;
	int r = in < 0 || outfd < 0 || write(in, data, (size_t)dn) != dn || lseek(in, 0, SEEK_SET) < 0 ? -EIO : 0;
	if (r == 0)
		r = space_sandbox_write_file(sb, file, in, 0644);
	if (r == 0)
		r = space_sandbox_read_file(sb, file, outfd);
	if (r == 0 && lseek(outfd, 0, SEEK_SET) == 0)
		bn = read(outfd, back, sizeof(back));
	if (r < 0 || bn != dn || memcmp(back, data, (size_t)dn))
		fail_op(c, "file", o->id, "rc %d read %zd of %d: %s", r, bn, dn, space_ctx_last_error(c->ctx));
	if (in >= 0)
		close(in);
	if (outfd >= 0)
		close(outfd);
	space_sandbox_free(sb);
}

static bool remove_checkpoint(struct client *c, const char *owner, const char *cp)
{
	if (c->http) {
		char path[96];
		snprintf(path, sizeof(path), "/v1/checkpoints/%s", cp);
		char *a = http_ok(c, "checkpoint-remove", owner, "DELETE", path, NULL, 0, NULL);
		free(a);
		return a != NULL;
	}
	int r = space_checkpoint_remove(c->ctx, cp);
	if (r < 0)
		fail_op(c, "checkpoint-remove", owner, "%s: %s", cp, space_ctx_last_error(c->ctx));
	return r == 0;
}

static void op_checkpoint(struct client *c, struct owned *o)
{
	char cp[32] = "";
	if (c->http) {
		char path[96];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/checkpoints", o->id);
		char *a = http_ok(c, "checkpoint", o->id, "POST", path, "{}", 2, NULL);
		if (!a)
			return;
		if (!json_id(a, "cp-", cp))
			fail_op(c, "checkpoint", o->id, "no id in %.200s", a);
		free(a);
	} else {
		space_sandbox *sb = lib_open(c, "checkpoint", o);
		if (!sb)
			return;
		char id[SPACE_CHECKPOINT_ID_MAX];
		if (space_checkpoint_create(sb, NULL, id) < 0)
			fail_op(c, "checkpoint", o->id, "%s", space_ctx_last_error(c->ctx));
		else
			snprintf(cp, sizeof(cp), "%s", id);
		space_sandbox_free(sb);
	}
	if (!cp[0])
		return;
	if (o->cp[0] && !remove_checkpoint(c, o->id, o->cp))
		remember_dead(o->cp); /* counted; the final sweep removes it */
	snprintf(o->cp, sizeof(o->cp), "%s", cp);
}

static void op_rollback(struct client *c, struct owned *o)
{
	if (c->http) {
		char path[96], body[96];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/rollback", o->id);
		int bn = snprintf(body, sizeof(body), "{\"checkpoint\":\"%s\"}", o->cp);
		free(http_ok(c, "rollback", o->id, "POST", path, body, (size_t)bn, NULL));
		return;
	}
	space_sandbox *sb = lib_open(c, "rollback", o);
	if (!sb)
		return;
	if (space_sandbox_rollback(sb, o->cp) < 0)
		fail_op(c, "rollback", o->id, "%s: %s", o->cp, space_ctx_last_error(c->ctx));
	space_sandbox_free(sb);
}

static void op_pause(struct client *c, struct owned *o, bool pause)
{
	const char *op = pause ? "pause" : "resume";
	bool ok;
	if (c->http) {
		char path[96];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", o->id, op);
		char *a = http_ok(c, op, o->id, "POST", path, NULL, 0, pause ? "\"paused\"" : "\"running\"");
		ok = a != NULL;
		free(a);
	} else {
		space_sandbox *sb = lib_open(c, op, o);
		if (!sb)
			return;
		int r = pause ? space_sandbox_pause(sb) : space_sandbox_resume(sb);
		if (r < 0)
			fail_op(c, op, o->id, "%s", space_ctx_last_error(c->ctx));
		ok = r == 0;
		space_sandbox_free(sb);
	}
	if (ok)
		o->paused = pause;
}

/* $SOAK_TEST_LEAK=1: the first library destroy only forgets its sandbox, which the leak check must find
 * (the harness's own test; the state directory's cleanup removes it). */
static atomic_bool test_leak;

/* Destroys o (and its checkpoint) and drops it from the client's list. */
static void op_destroy(struct client *c, int i)
{
	struct owned o = c->sb[i];
	c->sb[i] = c->sb[--c->n];
	if (!c->http && atomic_exchange(&test_leak, false)) {
		printf("soak: test: %s left running, forgotten as destroyed\n", o.id);
		remember_dead(o.id);
		if (o.cp[0])
			remember_dead(o.cp);
		return;
	}
	if (o.cp[0] && !remove_checkpoint(c, o.id, o.cp))
		remember_dead(o.cp);
	if (c->http) {
		char path[96];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", o.id);
		free(http_ok(c, "destroy", o.id, "DELETE", path, NULL, 0, NULL));
	} else {
		space_sandbox *sb = NULL;
		int r = space_sandbox_open(c->ctx, o.id, &sb);
		r = r == 0 ? space_sandbox_destroy(sb) : r;
		if (r < 0)
			fail_op(c, "destroy", o.id, "%s", space_ctx_last_error(c->ctx));
		space_sandbox_free(sb);
	}
	remember_dead(o.id);
}

static void one_op(struct client *c)
{
	unsigned pick = (unsigned)(rnd(c) % 100);
	c->ops++;
	if (c->n == 0 || (pick < 8 && c->n < SOAK_OWN)) {
		op_create(c, NULL);
		return;
	}
	int i = (int)(rnd(c) % (uint64_t)c->n);
	struct owned *o = &c->sb[i];
	if (o->paused) /* a paused sandbox is resumed, checkpointed or destroyed */
		pick < 15 ? op_checkpoint(c, o) : pick < 25 ? op_destroy(c, i) : op_pause(c, o, false);
	else if (pick < 30)
		op_exec(c, o);
	else if (pick < 48)
		op_file(c, o);
	else if (pick < 60)
		op_checkpoint(c, o);
	else if (pick < 70 && o->cp[0])
		op_rollback(c, o);
	else if (pick < 78 && o->cp[0] && c->n < SOAK_OWN)
		op_create(c, o->cp);
	else if (pick < 90)
		op_pause(c, o, true);
	else
		op_destroy(c, i);
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	if (!c->http)
		c->ctx = api_ctx(NULL);
	for (;;) {
		pthread_mutex_lock(&soak.lock);
		while (soak.hold && !soak.stop)
			pthread_cond_wait(&soak.cond, &soak.lock);
		bool stop = soak.stop;
		if (!stop)
			soak.active++;
		pthread_mutex_unlock(&soak.lock);
		if (stop)
			break;
		one_op(c);
		pthread_mutex_lock(&soak.lock);
		soak.active--;
		pthread_cond_broadcast(&soak.cond);
		pthread_mutex_unlock(&soak.lock);
	}
	while (c->n)
		op_destroy(c, c->n - 1);
	space_ctx_free(c->ctx);
	return NULL;
}

/* --- the leak check, with every client held between operations --- */

static bool is_dead(const char *id, size_t n)
{
	for (size_t i = 0; i < soak.ndead; i++)
		if (!strncmp(soak.dead[i], id, n) && !soak.dead[i][n])
			return true;
	return false;
}

static bool is_live(const char *id)
{
	for (int c = 0; c < soak.nclients; c++)
		for (int i = 0; i < soak.clients[c].n; i++)
			if (!strcmp(soak.clients[c].sb[i].id, id) || !strcmp(soak.clients[c].sb[i].cp, id))
				return true;
	return false;
}

/* The first id ("sb-" or "cp-" + 16 of [a-z2-7]) in text this run destroyed and holds no more, or NULL. */
static const char *names_dead(const char *text, char out[32])
{
	for (const char *p = text; (p = strpbrk(p, "sc")); p++) {
		if (strncmp(p, "sb-", 3) && strncmp(p, "cp-", 3))
			continue;
		size_t n = 3 + strspn(p + 3, "abcdefghijklmnopqrstuvwxyz234567");
		if (n != 19)
			continue;
		memcpy(out, p, n);
		out[n] = '\0';
		if (is_dead(out, n) && !is_live(out))
			return out;
	}
	return NULL;
}

static int leak(const char *what, const char *detail)
{
	printf("soak: LEAK %s: %s\n", what, detail);
	return 1;
}

/* Each line (or NUL-separated record) of a file naming a dead id. */
static int scan_file(const char *path, const char *what)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	static char buf[1 << 20];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	for (ssize_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n] = '\0';
	char id[32], detail[600];
	if (!names_dead(buf, id))
		return 0;
	snprintf(detail, sizeof(detail), "%s names %s: %.400s", path, id, buf);
	return leak(what, detail);
}

/* Entries of dir that are not live ("." ones aside); count: how many live ones. */
static int scan_dir_live(const char *dir, const char *what, int *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int leaks = 0;
	*count = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (is_live(e->d_name)) {
			(*count)++;
			continue;
		}
		char detail[600];
		snprintf(detail, sizeof(detail), "%s/%s is no sandbox's or checkpoint's of the run", dir, e->d_name);
		leaks += leak(what, detail);
	}
	if (d)
		closedir(d);
	return leaks;
}

static int leak_check(space_ctx *ctx, const char *when)
{
	int leaks = 0, live = 0, live_cp = 0, n;
	char path[4200], detail[600];
	for (int c = 0; c < soak.nclients; c++)
		for (int i = 0; i < soak.clients[c].n; i++)
			live++, live_cp += soak.clients[c].sb[i].cp[0] != '\0';
	/* rows: the ones not destroyed are the live ones */
	struct space_sandbox_info **l = NULL;
	size_t nl = 0;
	if (space_sandbox_list(ctx, &l, &nl) < 0)
		leaks += leak("rows", space_ctx_last_error(ctx));
	for (size_t i = 0; i < nl; i++)
		if (!is_live(l[i]->id) || (l[i]->status != SPACE_SANDBOX_RUNNING && l[i]->status != SPACE_SANDBOX_PAUSED)) {
			snprintf(detail, sizeof(detail), "%s is listed %s (%s)", l[i]->id, space_sandbox_status_name(l[i]->status),
				 l[i]->reason);
			leaks += leak("row", detail);
		}
	if ((int)nl != live) {
		snprintf(detail, sizeof(detail), "%zu rows listed, %d sandboxes live", nl, live);
		leaks += leak("rows", detail);
	}
	space_sandbox_info_list_free(l);
	struct space_checkpoint_info **cl = NULL;
	size_t ncl = 0;
	if (space_checkpoint_list(ctx, NULL, &cl, &ncl) == 0 && (int)ncl != live_cp) {
		snprintf(detail, sizeof(detail), "%zu checkpoint rows, %d checkpoints live", ncl, live_cp);
		leaks += leak("checkpoint rows", detail);
	}
	space_checkpoint_info_list_free(cl);
	/* subvolumes */
	snprintf(path, sizeof(path), "%s/sandboxes", soak.pool);
	leaks += scan_dir_live(path, "subvolume", &n);
	snprintf(path, sizeof(path), "%s/checkpoints", soak.pool);
	leaks += scan_dir_live(path, "checkpoint subvolume", &n);
	/* mounts, loop devices, cgroups, processes, uid slots naming a destroyed id */
	leaks += scan_file("/proc/self/mountinfo", "mount");
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		leaks += scan_file(path, "loop device");
	}
	if (d)
		closedir(d);
	static const char *const hier[] = { "", "/pids", "/memory", "/cpu", "/freezer", "/unified", NULL };
	for (const char *const *h = hier; *h; h++) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/space", *h);
		d = opendir(path);
		while (d && (e = readdir(d))) {
			char id[32];
			if (names_dead(e->d_name, id)) {
				snprintf(detail, sizeof(detail), "%s/%s", path, e->d_name);
				leaks += leak("cgroup", detail);
			}
		}
		if (d)
			closedir(d);
	}
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		leaks += scan_file(path, "process");
	}
	if (d)
		closedir(d);
	d = opendir("/run/space-uids");
	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "/run/space-uids/%s", e->d_name);
		if (e->d_name[0] != '.')
			leaks += scan_file(path, "uid slot");
	}
	if (d)
		closedir(d);
	printf("soak: leak check (%s): %d live sandboxes, %d checkpoints, %zu destroyed ids: %d leaks\n", when, live,
	       live_cp, soak.ndead, leaks);
	return leaks;
}

/* Holds every client between operations (true) or lets them go (false). */
static void hold(bool on)
{
	pthread_mutex_lock(&soak.lock);
	soak.hold = on;
	pthread_cond_broadcast(&soak.cond);
	while (on && soak.active)
		pthread_cond_wait(&soak.cond, &soak.lock);
	pthread_mutex_unlock(&soak.lock);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kib;
}

/* The median of n samples (sorts them). */
static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

static long median(long *v, size_t n)
{
	if (!n)
		return -1;
	qsort(v, n, sizeof(*v), cmp_long);
	return v[n / 2];
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	double seconds = 180;
	int clients = 16;
	pid_t serve_pid = 0;
	uint64_t seed = (uint64_t)time(NULL);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--clients"))
			clients = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--socket"))
			soak.socket = argv[i + 1];
		else if (!strcmp(argv[i], "--serve-pid"))
			serve_pid = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else {
			fprintf(stderr, "soak: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (clients < 1 || clients > SOAK_MAX_CLIENTS || seconds <= 0 || (soak.socket && serve_pid <= 0)) {
		fprintf(stderr, "usage: soak --seconds S --clients 1..%d [--socket PATH --serve-pid PID] [--seed N]\n",
			SOAK_MAX_CLIENTS);
		return 2;
	}
	printf("soak: seed %llu (rerun with --seed %llu), %d clients (%s), %.0f s\n", (unsigned long long)seed,
	       (unsigned long long)seed, clients, soak.socket ? "half through space serve" : "all through the library",
	       seconds);
	soak.dead = calloc(SOAK_MAX_DEAD, sizeof(*soak.dead));
	atomic_store(&test_leak, getenv("SOAK_TEST_LEAK") && !strcmp(getenv("SOAK_TEST_LEAK"), "1"));
	space_ctx *ctx = api_ctx(NULL);
	struct space_pool_info *pi = NULL;
	char pool[4096] = "";
	if (!soak.dead || space_pool_get_info(ctx, &pi) < 0) {
		fprintf(stderr, "soak: pool: %s\n", space_ctx_last_error(ctx));
		return 1;
	}
	snprintf(pool, sizeof(pool), "%s", pi->path);
	space_pool_info_free(pi);
	soak.pool = pool;
	soak.nclients = clients;
	for (int i = 0; i < clients; i++) {
		struct client *c = &soak.clients[i];
		c->idx = i;
		c->http = soak.socket && i % 2;
		c->rng = seed * 1000003u + (uint64_t)i;
		if (pthread_create(&c->thread, NULL, client_main, c) != 0) {
			fprintf(stderr, "soak: cannot start client %d\n", i);
			return 1;
		}
	}
	/* RSS is sampled at every turn (5 a second): a single reading catches whatever burst of requests is in
	 * flight (their threads' stacks, the allocator's arenas), so "flat" compares medians: of the samples in
	 * the second sixth of the run (the server warmed up) and of those in the last sixth. */
	double start = now_s(), next_check = start + 60;
	size_t cap = (size_t)(seconds * 5) + 16, n_early = 0, n_late = 0;
	long *early = calloc(cap, sizeof(long)), *late = calloc(cap, sizeof(long));
	if (!early || !late) {
		fprintf(stderr, "soak: out of memory\n");
		return 1;
	}
	int leaks = 0, checks = 0;
	for (double t = start; t - start < seconds; t = now_s()) {
		double part = (t - start) / seconds;
		long kib = serve_pid ? rss_kib(serve_pid) : -1;
		if (kib > 0 && part >= 1.0 / 6 && part < 2.0 / 6 && n_early < cap)
			early[n_early++] = kib;
		else if (kib > 0 && part >= 5.0 / 6 && n_late < cap)
			late[n_late++] = kib;
		if (t >= next_check) {
			hold(true);
			char when[32];
			snprintf(when, sizeof(when), "minute %d", ++checks);
			leaks += leak_check(ctx, when);
			hold(false);
			next_check += 60;
		}
		usleep(200000);
	}
	long rss_start = median(early, n_early), rss_end = median(late, n_late);
	free(early);
	free(late);
	pthread_mutex_lock(&soak.lock);
	soak.stop = true;
	pthread_cond_broadcast(&soak.cond);
	pthread_mutex_unlock(&soak.lock);
	uint64_t ops = 0, errors = 0;
	for (int i = 0; i < clients; i++) {
		pthread_join(soak.clients[i].thread, NULL);
		ops += soak.clients[i].ops;
		errors += soak.clients[i].errors;
	}
	leaks += leak_check(ctx, "end");
	space_ctx_free(ctx);
	bool flat = !serve_pid || (rss_start > 0 && rss_end > 0 && rss_end * 10 <= rss_start * 11);
	if (!flat)
		printf("soak: RSS of space serve grew from a median of %ld KiB (second sixth of the run) to %ld KiB "
		       "(last sixth): more than 10%%\n",
		       rss_start, rss_end);
	printf("soak: minutes=%g clients=%d ops=%llu errors=%llu leaks=%d serve_rss_start_kib=%ld serve_rss_end_kib=%ld\n",
	       seconds / 60, clients, (unsigned long long)ops, (unsigned long long)errors, leaks, rss_start, rss_end);
	free(soak.dead);
	return errors || leaks || !flat ? 1 : 0;
}
