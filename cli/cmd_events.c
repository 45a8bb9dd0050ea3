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
#include "util/cleanup.h"
#include "util/escape.h"

/* One field of an event for a terminal: escaped (the library caps its length), backslashes as they are
 * so the gateway's own escapes stay readable. */
static const char *text_field(const char *v, char *buf, size_t len)
{
	if (!v)
		return "";
	util_escape_text(buf, len, v, strnlen(v, SPACE_EVENT_DETAIL_MAX), UTIL_ESC_KEEP_BACKSLASH);
	return buf;
}

/* The same for JSON: valid UTF-8; NULL on allocation failure. */
static cJSON *json_field(const char *v)
{
	_cleanup_free_ char *clean = util_utf8_sanitize(v ? v : "", v ? strnlen(v, SPACE_EVENT_DETAIL_MAX) : 0);
	return clean ? cJSON_CreateString(clean) : NULL;
}

struct events_out {
	cJSON *arr;                   /* --json */
	size_t count;
};

static int print_event(const struct space_event *ev, void *userdata)
{
	struct events_out *o = userdata;
	o->count++;
	if (o->arr) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "ts_ms", (double)ev->ts_ms);
		cJSON_AddItemToObject(e, "kind", json_field(ev->kind));
		cJSON_AddItemToObject(e, "detail", json_field(ev->detail));
		cJSON_AddItemToArray(o->arr, e);
		return 0;
	}
	char tm[32], k[4 * SPACE_EVENT_DETAIL_MAX + 1], d[4 * SPACE_EVENT_DETAIL_MAX + 1];
	printf("%s  %-15s %s\n", cli_time(ev->ts_ms, tm, sizeof(tm)), text_field(ev->kind, k, sizeof(k)),
	       text_field(ev->detail, d, sizeof(d)));
	return 0;
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("events");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc != 2)
		return cli_usage_error(cmd, argc < 2 ? "missing sandbox ID" : "unexpected argument '%s'", argv[argc - 1]);
	if (argv[1][0] == '-')
		return cli_usage_error(cmd, "unknown option '%s'", argv[1]);
	const char *id = argv[1];
	struct space_event_query q = SPACE_EVENT_QUERY_INIT;
	q.sandbox_id = id;
	struct events_out o = { cli->json ? cJSON_CreateArray() : NULL, 0 };
	int r = space_event_list(cli_ctx(cli), &q, print_event, &o);
	if (r < 0) {
		cJSON_Delete(o.arr);
		return cli_fail(cli, r, "events of %s", id);
	}
	/* Every sandbox has at least its creation's event: none means an unknown id, in both modes. */
	if (!o.count) {
		cJSON_Delete(o.arr);
		return cli_error(-ENOENT, "no events for %s", id);
	}
	return o.arr ? cli_print_json(o.arr) : EXIT_OK;
}
