/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox can make the gateway record, and how the library takes it in (issue 14, items 4, 5, 8):
 * gw_log.c's rate limits, log rotation and caps, spool cap and "dropped" note, escaping of sandbox-made
 * names; net_events_ingest() on hostile spool lines (forged kinds, raw control bytes, invalid UTF-8, huge
 * lines, future times), with the sandbox named by the spool's place, never by its content. No privileges.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "net/gw.h"
#include "net/net.h"
#include "store/db.h"
#include "util/util.h"
#include "../../check.h"


static char dir[] = "/tmp/space-gwlog-XXXXXX";

static int open_file(const char *name)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return open(p, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

static char *slurp(const char *name, size_t *len)
{
	char p[256], *buf = NULL;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	size_t n = 0;
	if (util_read_file(p, 64 << 20, &buf, &n) < 0)
		return strdup("");
	if (len)
		*len = n;
	return buf;
}

static off_t size_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? st.st_size : -1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_escaping_and_rate(struct gw *g, int logfd, int spoolfd)
{
	char q[GW_QUOTE_BUF], longname[300];
	/* A name that retitles a terminal, through gw_quote as gw_dns.c does. */
	gw_event(g, "egress-denied", "dns %s: not in the allowlist", gw_quote(q, "\x1b]0;PWNED\x07.evil.test"));
	/* A caller that forgot to quote: the whole detail is escaped, no line can be forged. */
	gw_event(g, "egress-denied", "raw %s", "a\x1b[2Jb\nfake line\x9b, \xc2\x9b");
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	gw_quote(q, longname);
	CHECK(strlen(q) == GW_QUOTE_MAX + 3 && !strcmp(q + GW_QUOTE_MAX, "..."));
	/* The same refusal twice within 5 s: recorded once. */
	gw_event(g, "egress-denied", "tcp 203.0.113.5:22: port not allowed");
	gw_event(g, "egress-denied", "tcp 203.0.113.5:22: port not allowed");
	/* 1000 distinct ones at once: the limit lets GW_EVENTS_PER_SECOND through in a second. */
	for (int i = 0; i < 1000; i++)
		gw_event(g, "egress-denied", "dns q%d.flood.test: not in the allowlist", i);
	sleep_ms(1100);
	CHECK(gw_log_tick(g) == false);
	char *log = slurp("gateway.log", NULL), *spool = slurp(NET_EVENTS_SPOOL, NULL);
	CHECK(!strchr(log, '\x1b') && !strchr(log, '\x07') && !strchr(log, '\x9b') && !strchr(spool, '\x1b'));
	CHECK(strstr(log, "dns \\x1b]0;PWNED\\x07.evil.test: not in the allowlist"));
	CHECK(strstr(log, "raw a\\x1b[2Jb\\x0afake line\\x9b, \\xc2\\x9b"));
	CHECK(count(log, "\n") == count(log, "space-gateway sb-test"));
	CHECK(count(log, "port not allowed") == 1);
	unsigned flood = count(log, "flood.test");
	CHECK(flood + 3 <= GW_EVENTS_PER_SECOND && flood > 0);
	CHECK(strstr(log, "egress-suppressed: ") && strstr(log, "more events not recorded (more than 20 a second)"));
	CHECK(count(spool, "\n") == count(log, "\n"));
	free(log);
	free(spool);
	(void)logfd, (void)spoolfd;
}

/* Over a few seconds of events: gateway.log rotates into gateway.log.1, neither passes the cap, the newest
 * line is in gateway.log; the spool stops at its cap, and its note comes once the library emptied it. */
static void test_caps(struct gw *g, int logfd, int oldfd, int spoolfd)
{
	g->log_max = 4096;
	g->spool_max = 2048;
	CHECK(ftruncate(spoolfd, 0) == 0); /* collected */
	char last[64] = "";
	for (int s = 0; s < 3; s++) {
		for (int i = 0; i < 40; i++) {
			snprintf(last, sizeof(last), "tcp 198.51.100.%d:%d: port not allowed", s, i);
			gw_event(g, "egress-denied", "%s", last);
		}
		sleep_ms(1050);
	}
	(void)gw_log_tick(g);
	CHECK(size_of(logfd) <= 4096 && size_of(oldfd) <= 4096);
	CHECK(size_of(oldfd) > 2048); /* rotated at least once */
	char *log = slurp("gateway.log", NULL);
	CHECK(strstr(log, "egress-suppressed"));
	free(log);
	CHECK(size_of(spoolfd) <= 2048);
	CHECK(gw_log_tick(g) == true); /* events wait for room: the note is pending */
	/* The library collects: the spool is emptied, the note of what was dropped follows at the next tick. */
	CHECK(ftruncate(spoolfd, 0) == 0);
	CHECK(gw_log_tick(g) == false);
	char *spool = slurp(NET_EVENTS_SPOOL, NULL);
	CHECK(strstr(spool, "\"kind\":\"egress-dropped\"") && strstr(spool, "events not recorded: the event spool was full"));
	free(spool);
}

/* ---- the library's side ---- */

static const char *const hostile[] = {
	"{\"ts_ms\":1,\"kind\":\"egress-denied\",\"detail\":\"dns ok.test: not in the allowlist\"}",
	"{\"ts_ms\":99999999999999,\"kind\":\"egress-denied\",\"detail\":\"from the future\"}",
	"{\"kind\":\"destroyed\",\"detail\":\"a forged lifecycle event\"}",
	"{\"kind\":\"egress-DENIED\",\"detail\":\"uppercase kind\"}",
	"{\"kind\":\"egress-denied\",\"detail\":\"esc \\u001b]0;PWNED\\u0007 and newline \\n fake\"}",
	"{\"kind\":\"egress-denied\",\"detail\":\"bad utf-8 \xff\xfe\"}",
	"{\"kind\":\"egress-denied\",\"sandbox\":\"sb-other\",\"detail\":\"names another sandbox\"}",
	"not json at all",
	"[1,2,3]",
};

static void test_ingest(void)
{
	char state[256], run[300], db[300], err[256];
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(run, sizeof(run), "%s/run/sb-test", state);
	snprintf(db, sizeof(db), "%s/space.db", state);
	CHECK(util_mkdir_p(run, 0700) == 0);
	struct store *s;
	CHECK(store_open(db, true, &s, err, sizeof(err)) == 0);
	store_close(s);
	char spool[400];
	snprintf(spool, sizeof(spool), "%s/" NET_EVENTS_SPOOL, run);
	FILE *f = fopen(spool, "we");
	for (size_t i = 0; f && i < sizeof(hostile) / sizeof(hostile[0]); i++)
		fprintf(f, "%s\n", hostile[i]);
	/* A line longer than any the gateway writes, and a last line cut off mid-write. */
	for (int i = 0; f && i < 3000; i++)
		fputc('x', f);
	if (f) {
		fputs("\n{\"kind\":\"egress-denied\",\"detail\":\"cut", f);
		fclose(f);
	}

	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = state;
	space_ctx *ctx = NULL;
	CHECK(space_ctx_new(&o, &ctx) == 0);
	if (!ctx)
		return;
	int64_t before = util_wall_ms();
	CHECK(net_events_ingest(ctx, "sb-test") == 0);
	struct stat st;
	CHECK(stat(spool, &st) == 0 && st.st_size == 0);
	CHECK(net_events_ingest(ctx, "sb-test") == 0); /* nothing left: nothing added */
	CHECK(net_events_ingest(ctx, "../etc") == -EINVAL);
	CHECK(ctx_store(ctx, &s) == 0);
	sqlite3_stmt *q;
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT sandbox_id, kind, detail, ts_ms FROM events ORDER BY seq", -1, &q,
				 NULL) == SQLITE_OK);
	char all[8192] = "";
	size_t n = 0;
	unsigned rows = 0;
	bool ids_ok = true, ts_ok = true;
	while (sqlite3_step(q) == SQLITE_ROW) {
		rows++;
		ids_ok &= !strcmp((const char *)sqlite3_column_text(q, 0), "sb-test");
		ts_ok &= sqlite3_column_int64(q, 3) <= util_wall_ms() && sqlite3_column_int64(q, 3) >= before - 1;
		n += (size_t)snprintf(all + n, sizeof(all) - n, "%s|%s\n", (const char *)sqlite3_column_text(q, 1),
				      (const char *)sqlite3_column_text(q, 2));
	}
	sqlite3_finalize(q);
	CHECK(ids_ok);
	/* "ts_ms":1 is older than a month: clamped to now like the future one. */
	CHECK(ts_ok);
	CHECK(strstr(all, "egress-denied|dns ok.test: not in the allowlist\n"));
	CHECK(strstr(all, "egress-denied|from the future\n"));
	CHECK(!strstr(all, "forged") && !strstr(all, "uppercase") && !strstr(all, "not json"));
	CHECK(strstr(all, "esc \\x1b]0;PWNED\\x07 and newline \\x0a fake"));
	CHECK(strstr(all, "egress-denied|names another sandbox"));
	CHECK(strstr(all, "egress-denied|bad utf-8 \\xff\\xfe"));
	CHECK(!strchr(all, '\x1b') && !strchr(all, '\xff'));
	CHECK(strstr(all, "egress-dropped|6 malformed lines in the gateway's event spool ignored"));
	printf("ingest: %u rows\n%s", rows, all);
	/* The sweep every listing makes (space_sandbox_reap) finds spools by their directory. */
	f = fopen(spool, "ae");
	if (f) {
		fputs("{\"ts_ms\":0,\"kind\":\"egress-denied\",\"detail\":\"swept\"}\n", f);
		fclose(f);
	}
	net_events_ingest_all(ctx);
	CHECK(stat(spool, &st) == 0 && st.st_size == 0);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT count(*) FROM events WHERE sandbox_id = 'sb-test' AND detail = 'swept'",
				 -1, &q, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 1);
	sqlite3_finalize(q);
	space_ctx_free(ctx);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	int logfd = open_file("gateway.log"), oldfd = open_file("gateway.log.1"), spoolfd = open_file(NET_EVENTS_SPOOL);
	static struct gw g = { .sandbox_id = "sb-test", .lock = PTHREAD_MUTEX_INITIALIZER,
			       .ev_lock = PTHREAD_MUTEX_INITIALIZER };
	CHECK(logfd >= 0 && oldfd >= 0 && spoolfd >= 0 && gw_log_init(&g, logfd, oldfd, spoolfd) == 0);
	test_escaping_and_rate(&g, logfd, spoolfd);
	test_caps(&g, logfd, oldfd, spoolfd);
	test_ingest();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return check_summary("gw-log");
}
