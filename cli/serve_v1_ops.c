/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: the native API's pause, resume, lifetime, checkpoint, rollback, fork and event routes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define EVENTS_LIMIT_DEFAULT 100
#define EVENTS_LIMIT_MAX 1000
#define FORK_MAX 64

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* The body of a route whose fields are all optional: none, or a JSON object of allowed fields. *ret is
 * an empty object for no body. NULL after answering 400. */
static cJSON *optional_body(struct serve_req *r, const char *const *allowed)
{
	if (!r->body_len)
		return cJSON_CreateObject();
	return serve_body_fields(r, allowed);
}

/* Answers status with the sandbox of r->sb as the API shows it. */
static enum MHD_Result reply_sandbox(struct serve_req *r, unsigned status)
{
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	int e = space_sandbox_get_info(r->sb, &info);
	if (e < 0)
		return serve_reply_space_error(r, e, "sandbox info");
	return serve_reply_json(r, status, serve_v1_sandbox_json(r, info));
}

static enum MHD_Result pause_resume(struct serve_req *r, bool pause)
{
	static const char *const none[] = { NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = optional_body(r, none);
	if (!j || !serve_req_sandbox(r))
		return MHD_YES;
	int e = pause ? space_sandbox_pause(r->sb) : space_sandbox_resume(r->sb);
	if (e < 0)
		return serve_reply_space_error(r, e, pause ? "pause" : "resume");
	return reply_sandbox(r, 200);
}

enum MHD_Result serve_v1_pause(struct serve_req *r)
{
	return pause_resume(r, true);
}

enum MHD_Result serve_v1_resume(struct serve_req *r)
{
	return pause_resume(r, false);
}

enum MHD_Result serve_v1_timeout(struct serve_req *r)
{
	static const char *const fields[] = { "timeout_s", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = serve_body_fields(r, fields);
	if (!j)
		return MHD_YES;
	uint64_t timeout;
	if (!serve_json_uint(r, j, "timeout_s", SPACE_TIMEOUT_MAX_S, UINT64_MAX, &timeout))
		return MHD_YES;
	if (timeout == UINT64_MAX)
		return serve_reply_error(r, 400, "invalid", "'timeout_s' (seconds from now, 0: no limit) is required");
	if (!serve_req_sandbox(r))
		return MHD_YES;
	int e = space_sandbox_set_timeout(r->sb, (uint32_t)timeout);
	if (e < 0)
		return serve_reply_space_error(r, e, "set timeout");
	return reply_sandbox(r, 200);
}

/* --- checkpoints --- */

/* The checkpoint named by params[0] into *ret (the caller frees it); false after answering. */
static bool find_checkpoint(struct serve_req *r, struct space_checkpoint_info **ret)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return false;
	int e = space_checkpoint_get(ctx, r->params[0], ret);
	if (e == -ENOENT)
		serve_reply_error(r, 404, "not_found", "no checkpoint '%s'", r->params[0]);
	else if (e < 0)
		serve_reply_space_error(r, e, "checkpoint");
	return e == 0;
}

enum MHD_Result serve_v1_checkpoint_create(struct serve_req *r)
{
	static const char *const fields[] = { "name", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = optional_body(r, fields);
	const char *name = NULL;
	if (!j || !serve_json_str(r, j, "name", &name) || !serve_req_sandbox(r))
		return MHD_YES;
	char id[SPACE_CHECKPOINT_ID_MAX];
	int e = space_checkpoint_create(r->sb, name, id);
	if (e < 0)
		return serve_reply_space_error(r, e, "checkpoint");
	_cleanup_checkpoint_info_ struct space_checkpoint_info *info = NULL;
	e = space_checkpoint_get(r->ctx, id, &info);
	if (e < 0)
		return serve_reply_space_error(r, e, "checkpoint");
	return serve_reply_json(r, 201, cli_checkpoint_json(info, false));
}

/* The checkpoints of a sandbox, oldest first (also after the sandbox is gone: they outlive it). */
enum MHD_Result serve_v1_checkpoint_list(struct serve_req *r)
{
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	struct space_checkpoint_info **list = NULL;
	size_t n = 0;
	int e = space_checkpoint_list(ctx, r->params[0], &list, &n);
	if (e < 0)
		return serve_reply_space_error(r, e, "list checkpoints");
	cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "checkpoints");
	for (size_t i = 0; i < n && a; i++)
		cJSON_AddItemToArray(a, cli_checkpoint_json(list[i], false));
	space_checkpoint_info_list_free(list);
	return serve_reply_json(r, 200, j);
}

enum MHD_Result serve_v1_checkpoint_get(struct serve_req *r)
{
	_cleanup_checkpoint_info_ struct space_checkpoint_info *info = NULL;
	if (!find_checkpoint(r, &info))
		return MHD_YES;
	return serve_reply_json(r, 200, cli_checkpoint_json(info, false));
}

enum MHD_Result serve_v1_checkpoint_delete(struct serve_req *r)
{
	_cleanup_checkpoint_info_ struct space_checkpoint_info *info = NULL;
	if (!find_checkpoint(r, &info))
		return MHD_YES;
	int e = space_checkpoint_remove(r->ctx, info->id);
	if (e < 0)
		return serve_reply_space_error(r, e, "remove checkpoint");
	return serve_reply_empty(r, 204);
}

enum MHD_Result serve_v1_rollback(struct serve_req *r)
{
	static const char *const fields[] = { "checkpoint", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = serve_body_fields(r, fields);
	const char *cp = NULL;
	if (!j || !serve_json_str(r, j, "checkpoint", &cp))
		return MHD_YES;
	if (!cp)
		return serve_reply_error(r, 400, "invalid", "'checkpoint' (a checkpoint id) is required");
	if (!serve_req_sandbox(r))
		return MHD_YES;
	int e = space_sandbox_rollback(r->sb, cp);
	if (e < 0)
		return serve_reply_space_error(r, e, "rollback");
	return reply_sandbox(r, 200);
}

enum MHD_Result serve_v1_fork(struct serve_req *r)
{
	static const char *const fields[] = { "count", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = optional_body(r, fields);
	uint64_t count;
	if (!j || !serve_json_uint(r, j, "count", FORK_MAX, 1, &count))
		return MHD_YES;
	if (count < 1)
		return serve_reply_error(r, 400, "invalid", "'count' must be from 1 to %d", FORK_MAX);
	_cleanup_checkpoint_info_ struct space_checkpoint_info *info = NULL;
	if (!find_checkpoint(r, &info))
		return MHD_YES;
	space_sandbox *sbs[FORK_MAX];
	struct space_checkpoint_fork_options fo = SPACE_CHECKPOINT_FORK_OPTIONS_INIT;
	fo.count = (uint32_t)count;
	int e = space_checkpoint_fork(r->ctx, info->id, &fo, sbs);
	if (e < 0)
		return serve_reply_space_error(r, e, "fork");
	cJSON *out = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(out, "sandboxes");
	for (uint64_t i = 0; i < count; i++) {
		_cleanup_sandbox_info_ struct space_sandbox_info *si = NULL;
		if (a && space_sandbox_get_info(sbs[i], &si) == 0)
			cJSON_AddItemToArray(a, serve_v1_sandbox_json(r, si));
		space_sandbox_free(sbs[i]);
	}
	return serve_reply_json(r, 201, out);
}

/* --- events --- */

struct v1_events {
	cJSON *arr;
	int64_t last;                 /* the seq of the last event, the cursor of the next page */
};

/* One event as JSON. Its strings may quote the sandbox (DNS names, Host headers): valid UTF-8 for JSON,
 * null when absent. */
static int v1_event_json(const struct space_event *ev, void *userdata)
{
	struct v1_events *o = userdata;
	cJSON *e = cJSON_CreateObject();
	if (!e || !cJSON_AddItemToArray(o->arr, e)) {
		cJSON_Delete(e);
		return -ENOMEM;
	}
	cJSON_AddNumberToObject(e, "seq", (double)ev->seq);
	cJSON_AddNumberToObject(e, "ts_ms", (double)ev->ts_ms);
	const char *const names[] = { "sandbox", "kind", "detail" };
	const char *const values[] = { ev->sandbox_id, ev->kind, ev->detail };
	for (size_t i = 0; i < 3; i++) {
		_cleanup_free_ char *clean = values[i] ? util_utf8_sanitize(values[i], strlen(values[i])) : NULL;
		if (clean)
			cJSON_AddStringToObject(e, names[i], clean);
		else
			cJSON_AddNullToObject(e, names[i]);
	}
	o->last = ev->seq;
	return 0;
}

/* GET /v1/events?sandbox=ID&after=SEQ&limit=N: the event log, oldest first; next_after continues it. */
enum MHD_Result serve_v1_events(struct serve_req *r)
{
	const char *id = serve_query(r, "sandbox"), *after_s = serve_query(r, "after");
	const char *limit_s = serve_query(r, "limit");
	uint64_t after = 0, limit = EVENTS_LIMIT_DEFAULT;
	if (after_s && util_parse_uint(after_s, 0, INT64_MAX, &after) < 0)
		return serve_reply_error(r, 400, "invalid", "'after' must be an event sequence number");
	if (limit_s && util_parse_uint(limit_s, 1, EVENTS_LIMIT_MAX, &limit) < 0)
		return serve_reply_error(r, 400, "invalid", "'limit' must be from 1 to %d", EVENTS_LIMIT_MAX);
	space_ctx *ctx = serve_req_ctx(r);
	if (!ctx)
		return MHD_YES;
	struct space_event_query q = SPACE_EVENT_QUERY_INIT;
	q.sandbox_id = id && *id ? id : NULL;
	q.after_seq = (int64_t)after;
	q.limit = (uint32_t)limit;
	struct v1_events ev = { cJSON_CreateArray(), (int64_t)after };
	int e = ev.arr ? space_event_list(ctx, &q, v1_event_json, &ev) : -ENOMEM;
	if (e < 0) {
		cJSON_Delete(ev.arr);
		return serve_reply_error(r, 500, "internal", "read events: %s", space_strerror(e));
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "next_after", (double)ev.last);
	cJSON *a = ev.arr;
	cJSON_AddItemToObject(j, "events", a);
	return serve_reply_json(r, 200, j);
}
