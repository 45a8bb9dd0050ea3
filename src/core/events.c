/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event log and recorded statuses as public calls: what `space events`, GET /v1/events, the server's
 * metrics and its pruning of its own rows read, so that they need no SQL on the library's store.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "core/internal.h"
#include "net/net.h"
#include "store/sandboxes.h"

_Static_assert(SPACE_EVENT_KIND_MAX == STORE_EVENT_KIND_MAX, "the public cap is the store's");
_Static_assert(SPACE_EVENT_DETAIL_MAX == STORE_EVENT_DETAIL_MAX, "the public cap is the store's");

struct events_call {
	space_event_fn fn;
	void *userdata;
};

static int events_one(const struct store_event_row *row, void *userdata)
{
	struct events_call *c = userdata;
	struct space_event ev = {
		.size = sizeof(ev),
		.seq = row->seq,
		.ts_ms = row->ts_ms,
		.sandbox_id = row->sandbox_id,
		.kind = row->kind ? row->kind : "",
		.detail = row->detail,
	};
	return c->fn(&ev, c->userdata);
}

/* The store's filter for a query (NULL: everything), the store, and what the gateways spooled (of the
 * query's sandbox, or of all) moved into the log first, so a listing shows a refusal as soon as the
 * gateway wrote it rather than at the next reap (net.h; best effort: a spool that cannot be read now
 * stays for the next call). -EINVAL for a query version this library does not know. */
static int events_begin(space_ctx *ctx, const struct space_event_query *q, struct store_events_filter *f,
			struct store **ret_store)
{
	*f = (struct store_events_filter){ 0 };
	if (q && (q->version < 1 || q->version > SPACE_EVENT_QUERY_VERSION))
		return ctx_error_msg(ctx, -EINVAL, "event query version %u (this library knows 1..%d)", q->version,
				     SPACE_EVENT_QUERY_VERSION);
	if (q && q->after_seq < 0)
		return ctx_error_msg(ctx, -EINVAL, "event query: after_seq %lld is negative", (long long)q->after_seq);
	if (q)
		*f = (struct store_events_filter){ q->sandbox_id, q->kind, q->after_seq, q->limit };
	int r = ctx_store(ctx, ret_store);
	if (r < 0)
		return r;
	if (f->sandbox_id)
		(void)net_events_ingest(ctx, f->sandbox_id);
	else
		net_events_ingest_all(ctx);
	return 0;
}

SPACE_API int space_event_query_init(struct space_event_query *query, uint32_t version)
{
	if (!query || version < 1 || version > SPACE_EVENT_QUERY_VERSION)
		return -EINVAL;
	/* Version 1 is the whole struct today; a later version writes only its own prefix. */
	memset(query, 0, sizeof(*query));
	query->version = version;
	return 0;
}

SPACE_API int space_event_list(space_ctx *ctx, const struct space_event_query *query, space_event_fn fn, void *userdata)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	if (!fn)
		return ctx_error_msg(ctx, -EINVAL, "list events: no callback");
	struct store_events_filter f;
	struct store *s;
	int r = events_begin(ctx, query, &f, &s);
	if (r < 0)
		return r;
	struct events_call c = { fn, userdata };
	r = store_events_query(s, &f, events_one, &c);
	return r < 0 ? ctx_error(ctx, r, "list events") : 0;
}

SPACE_API int space_event_count(space_ctx *ctx, const struct space_event_query *query, uint64_t *ret_count)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	if (!ret_count)
		return ctx_error_msg(ctx, -EINVAL, "count events: no result pointer");
	struct store_events_filter f;
	struct store *s;
	uint64_t n;
	int r = events_begin(ctx, query, &f, &s);
	if (r < 0)
		return r;
	r = store_events_count(s, &f, &n);
	if (r < 0)
		return ctx_error(ctx, r, "count events");
	*ret_count = n;
	return 0;
}

SPACE_API int space_sandbox_get_status(space_ctx *ctx, const char *id, enum space_sandbox_status *ret_status)
{
	CTX_ENTER(ctx);
	if (!ctx)
		return -EINVAL;
	if (!id || !*id || !ret_status)
		return ctx_error_msg(ctx, -EINVAL, "sandbox status: no id or no result pointer");
	struct store *s;
	int r = ctx_store(ctx, &s);
	if (r < 0)
		return r;
	enum store_status status;
	r = store_sandbox_status(s, id, &status);
	if (r == -ENOENT)
		return ctx_error_msg(ctx, r, "no sandbox %s", id);
	if (r < 0)
		return ctx_error(ctx, r, "sandbox %s: read its status", id);
	*ret_status = (enum space_sandbox_status)status;
	return 0;
}
