/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the gateway records: gateway.log and the event spool (gw.h; net.h for the spool's format).
 *
 * A sandbox can trigger refusals as fast as it sends packets (200,000 DNS queries take it a few seconds),
 * so nothing is written before the rate limits: duplicates within EVENT_DEDUP_MS are dropped, at most
 * GW_EVENTS_PER_SECOND events a second are recorded and the rest counted in one note. gateway.log is
 * rotated into gateway.log.1 at GW_LOG_FILE_MAX bytes (the gateway cannot create files: both were opened
 * by the library), and the spool stops at NET_EVENTS_SPOOL_MAX bytes until the library collects it. The
 * kernel backs both caps with RLIMIT_FSIZE (gw_confine.c). Sandbox-made text never reaches either raw:
 * gw_quote() escapes and caps each string, and a detail that still holds a control byte is escaped whole.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/gw.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define EVENT_DEDUP_MS 5000
#define PENDING_MAX 16384u    /* spool lines kept while the library holds the spool's lock */
#define SPOOL_NOTE_ROOM 256u  /* kept free at the spool's end for the "dropped" note */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* fmt with its arguments as one log line's worth of text (util_text_one_line). */
static void format_line(char *out, size_t outlen, const char *fmt, va_list ap)
{
	char raw[1024];
	vsnprintf(raw, sizeof(raw), fmt, ap);
	util_text_one_line(raw, out, outlen);
}

/* "2024-05-01T12:00:00.123Z " without the C library's time zone machinery (no files to read). */
static size_t stamp(char *buf, size_t len, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n;
}

/* ---- gateway.log ---------------------------------------------------------------------------------- */

/* gateway.log.1 becomes a copy of the full gateway.log, which starts again: the newest lines are always
 * kept, 2 x GW_LOG_FILE_MAX bytes at most. */
static void rotate(struct gw *g)
{
	if (g->log_old_fd >= 0 && ftruncate(g->log_old_fd, 0) == 0) {
		char buf[16384];
		off_t off = 0;
		ssize_t k;
		while (off < (off_t)g->log_max && (k = pread(g->log_fd, buf, sizeof(buf), off)) > 0) {
			if (util_write_all(g->log_old_fd, buf, (size_t)k) < 0)
				break;
			off += k;
		}
	}
	(void)ftruncate(g->log_fd, 0);
}

static void log_write(struct gw *g, const char *line, size_t len)
{
	if (g->log_fd < 0)
		return;
	struct stat st;
	if (fstat(g->log_fd, &st) == 0 && (uint64_t)st.st_size + len > g->log_max)
		rotate(g);
	(void)util_write_all(g->log_fd, line, len);
}

/* ---- the spool ------------------------------------------------------------------------------------- */

/* Appends {"ts_ms":N,"kind":K,"detail":D}\n to buf; D is util_text_one_line() text, so only '"' and '\' need escaping. */
static size_t spool_line(char *buf, size_t len, int64_t ms, const char *kind, const char *detail)
{
	int n = snprintf(buf, len, "{\"ts_ms\":%lld,\"kind\":\"%s\",\"detail\":\"", (long long)ms, kind);
	if (n < 0 || (size_t)n >= len)
		return 0;
	size_t at = (size_t)n;
	for (const char *p = detail; *p && at + 8 < len; p++) {
		if (*p == '"' || *p == '\\')
			buf[at++] = '\\';
		buf[at++] = *p;
	}
	memcpy(buf + at, "\"}\n", 4);
	return at + 3;
}

static unsigned count_lines(const char *p, size_t len)
{
	unsigned n = 0;
	for (const char *e = p + len; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
		n++;
	return n;
}

/* Moves pending lines into the spool while they fit (the rest is counted as dropped), then the note of
 * what was dropped once there is room. Never waits for the lock: the library may be collecting. */
static void spool_flush(struct gw *g, int64_t now)
{
	if (g->spool_fd < 0 || (!g->n_pending && !g->spool_dropped))
		return;
	if (flock(g->spool_fd, LOCK_EX | LOCK_NB) < 0)
		return;
	struct stat st;
	uint64_t size = fstat(g->spool_fd, &st) == 0 ? (uint64_t)st.st_size : g->spool_max;
	size_t take = 0;
	while (take < g->n_pending) {
		const char *nl = memchr(g->spool_pending + take, '\n', g->n_pending - take);
		size_t len = (size_t)(nl - (g->spool_pending + take)) + 1;
		if (size + take + len + SPOOL_NOTE_ROOM > g->spool_max)
			break;
		take += len;
	}
	if (take && util_write_all(g->spool_fd, g->spool_pending, take) < 0)
		g->spool_dropped += count_lines(g->spool_pending, take);
	g->spool_dropped += count_lines(g->spool_pending + take, g->n_pending - take);
	g->n_pending = 0;
	if (g->spool_dropped && fstat(g->spool_fd, &st) == 0 &&
	    (uint64_t)st.st_size + SPOOL_NOTE_ROOM <= g->spool_max) {
		char note[160], line[SPOOL_NOTE_ROOM];
		snprintf(note, sizeof(note), "%u events not recorded: the event spool was full (%u bytes not yet collected)",
			 g->spool_dropped, g->spool_max);
		size_t n = spool_line(line, sizeof(line), now, "egress-dropped", note);
		if (n && util_write_all(g->spool_fd, line, n) == 0)
			g->spool_dropped = 0;
	}
	(void)flock(g->spool_fd, LOCK_UN);
}

static void spool_put(struct gw *g, int64_t now, const char *kind, const char *detail)
{
	if (g->spool_fd < 0)
		return;
	char line[2 * NET_EVENT_DETAIL_MAX + 128];
	size_t n = spool_line(line, sizeof(line), now, kind, detail);
	if (!n || g->n_pending + n > PENDING_MAX) {
		g->spool_dropped++;
	} else {
		memcpy(g->spool_pending + g->n_pending, line, n);
		g->n_pending += n;
	}
	spool_flush(g, now);
}

/* ---- events and lines ------------------------------------------------------------------------------ */

/* One event that passed the limits: to the log and the spool. Called under ev_lock. */
static void record(struct gw *g, int64_t now, const char *kind, const char *detail)
{
	char line[64 + 96 + NET_EVENT_DETAIL_MAX];
	size_t n = stamp(line, sizeof(line), now);
	int k = snprintf(line + n, sizeof(line) - n, "space-gateway %.64s %s: %s\n", g->sandbox_id, kind, detail);
	if (k > 0)
		log_write(g, line, n + ((size_t)k < sizeof(line) - n ? (size_t)k : sizeof(line) - n - 1));
	spool_put(g, now, kind, detail);
}

/* Starts a new one-second window when the last one is over, first noting what it suppressed. */
static void event_window(struct gw *g, int64_t now)
{
	if (now - g->ev_window_ms < 1000)
		return;
	if (g->ev_suppressed) {
		char note[160];
		snprintf(note, sizeof(note), "%u more events not recorded (more than %d a second)", g->ev_suppressed,
			 GW_EVENTS_PER_SECOND);
		g->ev_suppressed = 0;
		record(g, now, "egress-suppressed", note);
	}
	g->ev_window_ms = now;
	g->ev_in_window = 0;
}

void gw_event(struct gw *g, const char *kind, const char *fmt, ...)
{
	char detail[NET_EVENT_DETAIL_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	format_line(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&g->ev_lock);
	int64_t now = util_wall_ms();
	event_window(g, now);
	uint64_t h = fnv1a(detail) ^ fnv1a(kind);
	bool dup = false;
	size_t slot = 0;
	for (size_t i = 0; i < ARRAY_SIZE(g->recent); i++) {
		if (g->recent[i].hash == h && now - g->recent[i].ms < EVENT_DEDUP_MS)
			dup = true;
		if (g->recent[i].ms < g->recent[slot].ms)
			slot = i;
	}
	if (!dup && g->ev_in_window >= GW_EVENTS_PER_SECOND) {
		g->ev_suppressed++;
	} else if (!dup) {
		g->recent[slot].hash = h;
		g->recent[slot].ms = now;
		g->ev_in_window++;
		record(g, now, kind, detail);
	}
	pthread_mutex_unlock(&g->ev_lock);
}

void gw_log(struct gw *g, const char *fmt, ...)
{
	char text[512], line[640];
	va_list ap;
	va_start(ap, fmt);
	format_line(text, sizeof(text), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&g->ev_lock);
	int64_t now = util_wall_ms();
	if (now - g->log_window_ms >= 1000) {
		if (g->log_suppressed) {
			size_t n = stamp(line, sizeof(line), now);
			int k = snprintf(line + n, sizeof(line) - n, "space-gateway %.64s: %u log lines suppressed\n",
					 g->sandbox_id, g->log_suppressed);
			if (k > 0)
				log_write(g, line, n + (size_t)k);
			g->log_suppressed = 0;
		}
		g->log_window_ms = now;
		g->log_in_window = 0;
	}
	if (g->log_in_window >= GW_LOG_LINES_PER_SECOND) {
		g->log_suppressed++;
	} else {
		g->log_in_window++;
		size_t n = stamp(line, sizeof(line), now);
		int k = snprintf(line + n, sizeof(line) - n, "space-gateway %.64s: %s\n", g->sandbox_id, text);
		if (k > 0)
			log_write(g, line, n + ((size_t)k < sizeof(line) - n ? (size_t)k : sizeof(line) - n - 1));
	}
	pthread_mutex_unlock(&g->ev_lock);
}

bool gw_log_tick(struct gw *g)
{
	pthread_mutex_lock(&g->ev_lock);
	int64_t now = util_wall_ms();
	event_window(g, now);
	spool_flush(g, now);
	bool pending = g->ev_suppressed || g->n_pending || g->spool_dropped;
	pthread_mutex_unlock(&g->ev_lock);
	return pending;
}

int gw_log_init(struct gw *g, int log_fd, int log_old_fd, int spool_fd)
{
	g->log_fd = log_fd;
	g->log_old_fd = log_old_fd;
	g->spool_fd = spool_fd;
	g->log_max = GW_LOG_FILE_MAX;
	g->spool_max = NET_EVENTS_SPOOL_MAX;
	if (spool_fd >= 0 && !(g->spool_pending = malloc(PENDING_MAX)))
		return -ENOMEM;
	return 0;
}
