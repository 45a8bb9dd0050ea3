/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space events ID: a sandbox's event log (lifecycle, and the egress gateway's refusals).
 *
 * Details carry sandbox-made text (DNS names, SNI, Host headers, reasons): in text mode every control
 * byte, DEL, C1 and invalid UTF-8 is shown escaped (\xHH, one event per line; backslashes as they are, so
 * what the gateway escaped already reads the same); in JSON mode strings are valid UTF-8 (invalid bytes
 * replaced) and control characters, DEL and C1 are JSON escapes (cli_print_json).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_net.h"
#include "store/db.h"
#include "util/cleanup.h"
#include "util/escape.h"

/* One field of a row for a terminal: escaped, at most STORE_EVENT_DETAIL_MAX bytes of it (a longer one is
 * from an older store that did not cut them). */
static const char *text_field(const char *v, char *buf, size_t len)
{
	if (!v)
		return "";
	size_t n = strnlen(v, STORE_EVENT_DETAIL_MAX);
	util_escape_text(buf, len, v, n, UTIL_ESC_KEEP_BACKSLASH); /* the gateway's own escapes stay readable */
	return buf;
}

/* The same for JSON: valid UTF-8; NULL on allocation failure. */
static cJSON *json_field(const char *v)
{
	_cleanup_free_ char *clean = util_utf8_sanitize(v ? v : "", v ? strnlen(v, STORE_EVENT_DETAIL_MAX) : 0);
	return clean ? cJSON_CreateString(clean) : NULL;
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("events");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc != 2)
		return cli_usage_error(cmd, argc < 2 ? "missing sandbox ID" : "unexpected argument '%s'", argv[argc - 1]);
	const char *id = argv[1];
	/* Make sure the sandbox exists (and the state directory is initialized) before reading the log. */
	struct space_sandbox_info *list;
	size_t n;
	int r = space_sandbox_list(cli_ctx(cli), &list, &n);
	if (r < 0)
		return cli_fail(cli, r, "list sandboxes");
	free(list);
	char path[4096], err[256] = "";
	snprintf(path, sizeof(path), "%s/space.db", space_ctx_state_dir(cli_ctx(cli)));
	struct store *s;
	r = store_open(path, false, &s, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "space: open %s: %s\n", path, err[0] ? err : space_strerror(r));
		return EXIT_FAIL;
	}
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(store_db(s),
			       "SELECT ts_ms, kind, detail FROM events WHERE sandbox_id = ? ORDER BY seq", -1, &st,
			       NULL) != SQLITE_OK) {
		fprintf(stderr, "space: events: %s\n", store_errmsg(s));
		store_close(s);
		return EXIT_FAIL;
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	cJSON *a = cli->json ? cJSON_CreateArray() : NULL;
	size_t count = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t ts = sqlite3_column_int64(st, 0);
		const char *kind = (const char *)sqlite3_column_text(st, 1);
		const char *detail = (const char *)sqlite3_column_text(st, 2);
		count++;
		if (a) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "ts_ms", (double)ts);
			cJSON_AddItemToObject(e, "kind", json_field(kind));
			cJSON_AddItemToObject(e, "detail", json_field(detail));
			cJSON_AddItemToArray(a, e);
		} else {
			char tm[32], k[4 * STORE_EVENT_DETAIL_MAX + 1], d[4 * STORE_EVENT_DETAIL_MAX + 1];
			printf("%s  %-15s %s\n", cli_time(ts, tm, sizeof(tm)), text_field(kind, k, sizeof(k)),
			       text_field(detail, d, sizeof(d)));
		}
	}
	sqlite3_finalize(st);
	store_close(s);
	if (a)
		return cli_print_json(a);
	if (!count) {
		fprintf(stderr, "space: no events for %s\n", id);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
