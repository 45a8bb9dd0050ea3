/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collecting the gateway's spooled events into the store (net.h, docs/network.md "The gateway process").
 * The spool is written by a process that parses sandbox traffic: every line is checked as hostile input,
 * and nothing in it chooses which sandbox a row belongs to.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/internal.h"
#include "net/net.h"
#include "store/db.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define LINE_MAX_BYTES 2048
#define LOCK_TRIES 25 /* x 2 ms: an honest gateway holds the lock for one write */
#define READ_MAX (NET_EVENTS_SPOOL_MAX + (64u << 10))
#define KIND_MAX 40
#define TS_PAST_MS (30LL * 24 * 3600 * 1000)

/* "egress-" then lowercase letters and '-': the gateway cannot forge lifecycle events. */
static bool kind_valid(const char *k)
{
	size_t n = strlen(k);
	if (n <= 7 || n > KIND_MAX || strncmp(k, "egress-", 7))
		return false;
	for (size_t i = 7; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || k[i] == '-'))
			return false;
	return true;
}

/* One spool line into the store; false when it is malformed. */
static bool ingest_line(struct store *s, const char *id, const char *line, size_t len, int64_t now, int *ret_err)
{
	if (len == 0 || len > LINE_MAX_BYTES)
		return false;
	cJSON *j = cJSON_ParseWithLength(line, len);
	const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "kind"));
	const char *detail = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "detail"));
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "ts_ms");
	bool ok = cJSON_IsObject(j) && kind && detail && kind_valid(kind);
	if (ok) {
		char clean[NET_EVENT_DETAIL_MAX + 1];
		/* A newline would let a detail forge a line of `space events`. */
		util_text_one_line(detail, clean, sizeof(clean));
		/* The gateway's clock reading, within reason: never in the future, never before a month ago. */
		int64_t t = cJSON_IsNumber(ts) ? (int64_t)ts->valuedouble : now;
		if (t > now || t < now - TS_PAST_MS)
			t = now;
		*ret_err = store_event_at(s, id, kind, clean, t);
	}
	cJSON_Delete(j);
	return ok;
}

/* Reads the whole spool (at most READ_MAX bytes) into a malloc'd, NUL-terminated buffer. */
static int read_spool(int fd, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *buf = malloc(READ_MAX + 1);
	if (!buf)
		return -ENOMEM;
	size_t n = 0;
	while (n < READ_MAX) {
		ssize_t k = pread(fd, buf + n, READ_MAX - n, (off_t)n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = n;
	return 0;
}

static int store_rows(space_ctx *ctx, const char *id, const char *buf, size_t len)
{
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	if ((r = store_begin(s)) < 0)
		return ctx_error(ctx, r, "store: %s", store_errmsg(s));
	int64_t now = util_wall_ms();
	unsigned rows = 0, bad = 0, over = 0;
	for (size_t at = 0; at < len && r == 0;) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - buf) : len;
		if (!nl) {
			bad++; /* a cut-off last line (a gateway killed mid-write): not a record */
		} else if (rows >= NET_EVENTS_INGEST_MAX) {
			over++;
		} else if (ingest_line(s, id, buf + at, end - at, now, &r)) {
			rows++;
		} else {
			bad++;
		}
		at = end + 1;
	}
	char note[160];
	if (r == 0 && over) {
		snprintf(note, sizeof(note), "%u more events from the gateway not recorded (more than %d at once)", over,
			 NET_EVENTS_INGEST_MAX);
		r = store_event(s, id, "egress-dropped", note);
	}
	if (r == 0 && bad) {
		snprintf(note, sizeof(note), "%u malformed lines in the gateway's event spool ignored", bad);
		r = store_event(s, id, "egress-dropped", note);
	}
	if (r == 0)
		r = store_commit(s);
	if (r < 0) {
		store_rollback(s);
		return ctx_error(ctx, r, "store the events of %s: %s", id, store_errmsg(s));
	}
	return 0;
}

int net_events_ingest(space_ctx *ctx, const char *id)
{
	if (!util_name_valid(id))
		return -EINVAL;
	char rel[128], path[PATH_MAX];
	snprintf(rel, sizeof(rel), "run/%s/" NET_EVENTS_SPOOL, id);
	int r = ctx_state_path(ctx, rel, path, sizeof(path));
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? 0 : ctx_error(ctx, -errno, "open %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "stat %s", path);
	if (!S_ISREG(st.st_mode))
		return ctx_error_msg(ctx, -EINVAL, "%s is not a regular file", path);
	if (st.st_size == 0)
		return 0;
	int tries = 0;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || ++tries >= LOCK_TRIES) {
			ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: event spool busy; collected next time", id);
			return 0;
		}
		usleep(2000);
	}
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	r = read_spool(fd, &buf, &len);
	if (r < 0)
		return ctx_error(ctx, r, "read %s", path);
	/* Emptied only once the rows are committed: a busy store keeps them for the next collection. */
	r = store_rows(ctx, id, buf, len);
	if (r == 0 && ftruncate(fd, 0) < 0)
		r = ctx_error(ctx, -errno, "empty %s", path);
	(void)flock(fd, LOCK_UN);
	return r;
}

void net_events_ingest_all(space_ctx *ctx)
{
	char dir[PATH_MAX];
	if (ctx_state_path(ctx, "run", dir, sizeof(dir)) < 0)
		return;
	_cleanup_closedir_ DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		char spool[PATH_MAX + 300];
		struct stat st;
		if (!util_name_valid(e->d_name))
			continue;
		snprintf(spool, sizeof(spool), "%s/%s/" NET_EVENTS_SPOOL, dir, e->d_name);
		if (lstat(spool, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
			continue;
		if (net_events_ingest(ctx, e->d_name) < 0)
			ctx_log(ctx, SPACE_LOG_WARNING, "sandbox %s: gateway events not collected: %s", e->d_name,
				space_ctx_last_error(ctx));
	}
}
