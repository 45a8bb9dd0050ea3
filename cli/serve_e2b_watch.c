/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: envd's directory watchers (filesystem.Filesystem WatchDir, a server stream; and
 * CreateWatcher, GetWatcherEvents, RemoveWatcher, the unary calls some SDKs use instead).
 *
 * Events are found by polling: the server lists the directory through the library (the same calls for a
 * jail and a VM; the agent inside is not involved beyond listing) and compares the listing with the one
 * before, entry by entry (type, size, modification time, mode, owner). A file created and removed between
 * two listings is not seen. The sandbox is hostile, so a listing is bounded (entries, depth, bytes of
 * names), the stream's pace adapts to what a listing costs, and a flood of events ends the watch with
 * resource_exhausted rather than queueing without end.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve_e2b.h"
#include "util/cleanup.h"
#include "util/util.h"

#define WATCH_PATH_MAX 4096
#define WATCH_ENTRIES_MAX 10000          /* entries under one watched directory */
#define WATCH_NAME_BYTES_MAX (4u << 20)  /* bytes of their relative paths */
#define WATCH_DEPTH_MAX 32               /* levels below the watched directory, recursive */
#define WATCH_POLL_MS 200                /* the least time between two listings */
#define WATCH_POLL_MAX_MS 5000           /* ... and the most, however slow a listing is */
#define WATCH_EVENTS_PER_S 10000         /* a stream that must send more ends (resource_exhausted) */
#define WATCH_RENAME_PAIRS_MAX 1000000   /* removed x created pairs compared to find renames */
#define WATCH_KEEPALIVE_DEFAULT_S 50
#define WATCH_STREAMS_MAX 128            /* WatchDir streams at once, all sandboxes together */
#define WATCHERS_MAX 64                  /* CreateWatcher watchers, all sandboxes together */
#define WATCHER_IDLE_NS (600ull * 1000000000) /* one not asked for its events this long is dropped */

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* --- listings --- */

struct wentry {
	char *rel;                    /* path below the watched directory ("a", "a/b") */
	struct space_file_stat st;
	unsigned depth;               /* 1 for the directory's own entries */
};

struct listing {
	struct wentry *v;
	size_t n, cap;
	size_t bytes;                 /* of the rel strings */
};

static void listing_clear(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].rel);
	free(l->v);
	*l = (struct listing){ 0 };
}

struct walk {
	struct listing *l;
	const char *parent;           /* rel of the directory listed; "" for the watched one */
	unsigned depth;
};

static int walk_entry(const char *name, const struct space_file_stat *st, void *userdata)
{
	struct walk *w = userdata;
	struct listing *l = w->l;
	/* The agent's names: one component, at most PROTO_MAX_NAME; anything else is not an entry. */
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (l->n >= WATCH_ENTRIES_MAX)
		return -E2BIG;
	size_t plen = strlen(w->parent), nlen = strlen(name), len = plen + (plen ? 1 : 0) + nlen;
	if (len >= WATCH_PATH_MAX)
		return 0;
	if (l->bytes + len + 1 > WATCH_NAME_BYTES_MAX)
		return -E2BIG;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct wentry *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	char *rel = malloc(len + 1);
	if (!rel)
		return -ENOMEM;
	snprintf(rel, len + 1, "%s%s%s", w->parent, plen ? "/" : "", name);
	l->v[l->n++] = (struct wentry){ .rel = rel, .st = *st, .depth = w->depth };
	l->bytes += len + 1;
	return 0;
}

static int wentry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct wentry *)a)->rel, ((const struct wentry *)b)->rel);
}

/*
 * Lists root (and, recursive, the directories below it, breadth first) into *ret, sorted by path. The
 * listing of root must succeed; a directory below it that cannot be listed (removed meanwhile) counts as
 * empty. -E2BIG past WATCH_ENTRIES_MAX entries or WATCH_NAME_BYTES_MAX bytes of names.
 */
static int listing_take(space_sandbox *sb, const char *root, bool recursive, struct listing *ret)
{
	struct listing l = { 0 };
	struct walk w = { &l, "", 1 };
	int e = space_sandbox_list_dir(sb, root, walk_entry, &w);
	for (size_t i = 0; e >= 0 && recursive && i < l.n; i++) {
		if (!S_ISDIR(l.v[i].st.mode) || l.v[i].depth >= WATCH_DEPTH_MAX)
			continue;
		char path[WATCH_PATH_MAX];
		int n = snprintf(path, sizeof(path), "%s%s%s", root, strcmp(root, "/") ? "/" : "", l.v[i].rel);
		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		/* walk_entry may move l.v: the parent's name is copied first. */
		_cleanup_free_ char *parent = strdup(l.v[i].rel);
		if (!parent) {
			e = -ENOMEM;
			break;
		}
		struct walk sub = { &l, parent, l.v[i].depth + 1 };
		int r = space_sandbox_list_dir(sb, path, walk_entry, &sub);
		if (r == -E2BIG || r == -ENOMEM || r == -EBUSY || r == -ESRCH)
			e = r;
	}
	if (e < 0) {
		listing_clear(&l);
		return e;
	}
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), wentry_cmp);
	*ret = l;
	return 0;
}

/* --- differences --- */

/* EventType, as the JSON codec names it. */
enum wevent { EV_CREATE = 1, EV_WRITE = 2, EV_REMOVE = 3, EV_RENAME = 4, EV_CHMOD = 5 };

static const char *const wevent_names[] = {
	[EV_CREATE] = "EVENT_TYPE_CREATE", [EV_WRITE] = "EVENT_TYPE_WRITE", [EV_REMOVE] = "EVENT_TYPE_REMOVE",
	[EV_RENAME] = "EVENT_TYPE_RENAME", [EV_CHMOD] = "EVENT_TYPE_CHMOD",
};

/* Receives each event; a negative return stops the comparison with it. */
typedef int (*wevent_fn)(enum wevent type, const struct wentry *e, void *userdata);

static bool same_content(const struct space_file_stat *a, const struct space_file_stat *b)
{
	/* A directory's size and time change with its entries, which are events of their own (or, without
	 * recursion, not ours to report: inotify says nothing of them either). */
	if (S_ISDIR(a->mode))
		return true;
	return a->file_size == b->file_size && a->mtime_ns == b->mtime_ns;
}

/*
 * The events that turn old into new, as inotify would have shown them: an entry that went is a remove,
 * or a rename when an entry of the same type, size, time and mode appeared (the new name is then a
 * create); a new entry is a create (and a write when it is a file with bytes in it); a changed file is a
 * write; a changed mode or owner is a chmod; a changed type is a remove and a create.
 */
static int listing_diff(const struct listing *old, const struct listing *new, wevent_fn fn, void *userdata)
{
	/* 0: the same; 1: gone (old) / appeared (new); 2: matched as a rename. */
	_cleanup_free_ unsigned char *om = calloc(old->n + 1, 1), *nm = calloc(new->n + 1, 1);
	if (!om || !nm)
		return -ENOMEM;
	size_t gone = 0, came = 0;
	for (size_t i = 0, j = 0; i < old->n || j < new->n;) {
		int c = i == old->n ? 1 : j == new->n ? -1 : strcmp(old->v[i].rel, new->v[j].rel);
		if (c == 0 && (old->v[i].st.mode & S_IFMT) != (new->v[j].st.mode & S_IFMT))
			om[i] = nm[j] = 1, gone++, came++, i++, j++;
		else if (c == 0)
			i++, j++;
		else if (c < 0)
			om[i++] = 1, gone++;
		else
			nm[j++] = 1, came++;
	}
	bool pair = gone && came && gone <= WATCH_RENAME_PAIRS_MAX / came;
	int r = 0;
	for (size_t i = 0; i < old->n && r >= 0; i++) {
		if (!om[i])
			continue;
		const struct space_file_stat *a = &old->v[i].st;
		for (size_t j = 0; pair && j < new->n && om[i] == 1; j++) {
			const struct space_file_stat *b = &new->v[j].st;
			if (nm[j] == 1 && a->mode == b->mode && a->file_size == b->file_size && a->mtime_ns == b->mtime_ns)
				om[i] = nm[j] = 2;
		}
		r = fn(om[i] == 2 ? EV_RENAME : EV_REMOVE, &old->v[i], userdata);
	}
	for (size_t j = 0; j < new->n && r >= 0; j++) {
		if (!nm[j])
			continue;
		r = fn(EV_CREATE, &new->v[j], userdata);
		if (r >= 0 && nm[j] == 1 && S_ISREG(new->v[j].st.mode) && new->v[j].st.file_size)
			r = fn(EV_WRITE, &new->v[j], userdata);
	}
	for (size_t i = 0, j = 0; i < old->n && j < new->n && r >= 0;) {
		int c = strcmp(old->v[i].rel, new->v[j].rel);
		if (c < 0) {
			i++;
			continue;
		}
		if (c > 0) {
			j++;
			continue;
		}
		const struct space_file_stat *a = &old->v[i].st, *b = &new->v[j].st;
		if (!om[i] && !same_content(a, b))
			r = fn(EV_WRITE, &new->v[j], userdata);
		if (r >= 0 && !om[i] && (a->mode != b->mode || a->uid != b->uid || a->gid != b->gid))
			r = fn(EV_CHMOD, &new->v[j], userdata);
		i++, j++;
	}
	return r < 0 ? r : 0;
}

/* A FilesystemEvent message; entry: with its EntryInfo (root is the watched directory). */
static cJSON *event_json(enum wevent type, const struct wentry *e, bool entry, const char *root)
{
	cJSON *j = cJSON_CreateObject();
	_cleanup_free_ char *name = serve_utf8_clean(e->rel, strlen(e->rel), NULL, NULL);
	if (!j || !name) {
		cJSON_Delete(j);
		return NULL;
	}
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "type", wevent_names[type]);
	if (entry && type != EV_REMOVE && type != EV_RENAME) {
		char path[WATCH_PATH_MAX * 2];
		snprintf(path, sizeof(path), "%s%s%s", root, strcmp(root, "/") ? "/" : "", e->rel);
		cJSON_AddItemToObject(j, "entry", e2b_entry_json(path, &e->st));
	}
	return j;
}

/* The request's "path", "recursive" and "includeEntry"; false with *why set. */
struct watch_req {
	char path[WATCH_PATH_MAX];
	bool recursive, include_entry;
};

/* home: the request's user's, for a relative path. */
static bool watch_req_parse(const cJSON *j, const char *home, struct watch_req *w, const char **why)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "path");
	*why = "'path' must be a path";
	if ((p && !cJSON_IsString(p)) || !e2b_path(home, cJSON_GetStringValue(p), w->path, sizeof(w->path)))
		return false;
	/* "/a/b/" lists as "/a/b"; the names of events are relative to it. */
	size_t n = strlen(w->path);
	while (n > 1 && w->path[n - 1] == '/')
		w->path[--n] = '\0';
	w->recursive = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "recursive"));
	w->include_entry = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "includeEntry"));
	return true;
}

/* Whether path is a directory of the sandbox: NULL, or the Connect code of why not (the message in msg). */
static const char *watch_target_check(space_sandbox *sb, const char *path, char *msg, size_t len)
{
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	int e = space_sandbox_stat(sb, path, &st);
	if (e == -ENOENT) {
		snprintf(msg, len, "directory '%s' does not exist", path);
		return "not_found";
	}
	if (e < 0) {
		snprintf(msg, len, "stat '%s': %s", path, space_strerror(e));
		return e == -EBUSY ? "unavailable" : e2b_rpc_code(e);
	}
	if (!S_ISDIR(st.mode)) {
		snprintf(msg, len, "'%s' is not a directory", path);
		return "invalid_argument";
	}
	return NULL;
}

/* Why a listing failed, as a Connect code and message: the sandbox paused or gone says so. */
static const char *listing_error(space_sandbox *sb, const struct watch_req *w, int e, char *msg, size_t len)
{
	const char *path = w->path;
	_cleanup_sandbox_info_ struct space_sandbox_info *info = NULL;
	int r = space_sandbox_get_info(sb, &info);
	if (e == -EBUSY || (r == 0 && info->status == SPACE_SANDBOX_PAUSED)) {
		snprintf(msg, len, "sandbox %s was paused: the watch of '%s' ends", space_sandbox_id(sb), path);
		return "unavailable";
	}
	if (r < 0 || info->status != SPACE_SANDBOX_RUNNING) {
		snprintf(msg, len, "sandbox %s is no longer running: the watch of '%s' ends", space_sandbox_id(sb), path);
		return "unavailable";
	}
	if (e == -E2BIG) {
		snprintf(msg, len, "'%s' holds more than %u entries%s (or %u MiB of their names): watch a smaller directory",
			 path, WATCH_ENTRIES_MAX, w->recursive ? " at any depth" : "", WATCH_NAME_BYTES_MAX >> 20);
		return "resource_exhausted";
	}
	if (e == -ENOENT || e == -ENOTDIR) {
		snprintf(msg, len, "the watched directory '%s' was removed", path);
		return "not_found";
	}
	snprintf(msg, len, "list '%s': %s", path, space_strerror(e));
	return e2b_rpc_code(e);
}

/* --- WatchDir: a server stream --- */

static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned n_streams;            /* WatchDir streams running */

struct watch_stream {
	struct watch_req req;
	uint64_t timeout_ns;          /* Connect-Timeout-Ms; 0: none */
	unsigned keepalive_s;
	int fd;
	uint64_t second_ns;           /* the start of the current second ... */
	unsigned sent;                /* ... and the events sent in it */
};

static int stream_event(enum wevent type, const struct wentry *e, void *userdata)
{
	struct watch_stream *w = userdata;
	uint64_t now = util_now_ns();
	if (now - w->second_ns >= 1000000000ull)
		w->second_ns = now, w->sent = 0;
	if (++w->sent > WATCH_EVENTS_PER_S)
		return -EMFILE;
	cJSON *j = cJSON_CreateObject();
	cJSON *ev = event_json(type, e, w->req.include_entry, w->req.path);
	if (!j || !ev) {
		cJSON_Delete(j);
		cJSON_Delete(ev);
		return -ENOMEM;
	}
	cJSON_AddItemToObject(j, "filesystem", ev);
	return e2b_envelope_write(w->fd, 0, j) < 0 ? -EPIPE : 0;
}

/* Waits up to ms for the client to go away (the response's end of the pipe closed): true when it did. */
static bool client_gone(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = 0 };
	int n = poll(&pf, 1, ms);
	return n > 0 && (pf.revents & (POLLERR | POLLHUP));
}

static void watch_producer(struct serve_producer *pr)
{
	struct watch_stream *w = pr->arg;
	w->fd = pr->fd;
	_cleanup_(listing_clear) struct listing cur = { 0 };
	char msg[WATCH_PATH_MAX + 256];
	int e = listing_take(pr->sb, w->req.path, w->req.recursive, &cur);
	if (e < 0) {
		const char *code = listing_error(pr->sb, &w->req, e, msg, sizeof(msg));
		e2b_stream_end(pr->fd, code, "%s", msg);
		return;
	}
	cJSON *start = cJSON_CreateObject();
	cJSON_AddObjectToObject(start, "start");
	if (e2b_envelope_write(pr->fd, 0, start) < 0)
		return;
	uint64_t t0 = util_now_ns(), keepalive = t0 + (uint64_t)w->keepalive_s * 1000000000;
	unsigned interval_ms = WATCH_POLL_MS;
	for (;;) {
		if (client_gone(pr->fd, (int)interval_ms))
			return;
		uint64_t now = util_now_ns();
		if (w->timeout_ns && now - t0 >= w->timeout_ns) {
			e2b_stream_end(pr->fd, "deadline_exceeded", "the watch of '%s' reached its timeout", w->req.path);
			return;
		}
		struct listing next = { 0 };
		e = listing_take(pr->sb, w->req.path, w->req.recursive, &next);
		uint64_t took_ms = (util_now_ns() - now) / 1000000;
		/* A slow listing (a big tree, a busy sandbox) is not repeated back to back. */
		interval_ms = took_ms * 2 > WATCH_POLL_MAX_MS ? WATCH_POLL_MAX_MS
			    : took_ms * 2 > WATCH_POLL_MS    ? (unsigned)took_ms * 2
							     : WATCH_POLL_MS;
		if (e < 0) {
			const char *code = listing_error(pr->sb, &w->req, e, msg, sizeof(msg));
			if (!strcmp(code, "not_found")) {
				/* The directory went: what was in it went too. */
				struct listing none = { 0 };
				if (listing_diff(&cur, &none, stream_event, w) == -EPIPE)
					return;
			}
			e2b_stream_end(pr->fd, code, "%s", msg);
			return;
		}
		e = listing_diff(&cur, &next, stream_event, w);
		listing_clear(&cur);
		cur = next;
		if (e == -EPIPE)
			return;
		if (e == -EMFILE) {
			e2b_stream_end(pr->fd, "resource_exhausted", "more than %u events a second under '%s': the watch ends",
				       WATCH_EVENTS_PER_S, w->req.path);
			return;
		}
		if (e < 0) {
			e2b_stream_end(pr->fd, "internal", "watch '%s': %s", w->req.path, space_strerror(e));
			return;
		}
		now = util_now_ns();
		if (now >= keepalive) {
			cJSON *ka = cJSON_CreateObject();
			cJSON_AddObjectToObject(ka, "keepalive");
			if (e2b_envelope_write(pr->fd, 0, ka) < 0)
				return;
			keepalive = now + (uint64_t)w->keepalive_s * 1000000000;
		}
	}
}

static void watch_stream_free(void *arg)
{
	pthread_mutex_lock(&streams_lock);
	n_streams--;
	pthread_mutex_unlock(&streams_lock);
	free(arg);
}

enum MHD_Result e2b_fs_watch_dir(struct serve_req *r)
{
	const char *why;
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_stream_request(r, &why);
	if (!j)
		return e2b_stream_error(r, "invalid_argument", "%s", why);
	struct watch_stream *w = calloc(1, sizeof(*w));
	if (!w)
		return e2b_stream_error(r, "internal", "out of memory");
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb) {
		free(w);
		return MHD_YES;
	}
	struct e2b_user user;
	char uerr[256];
	int ue = e2b_request_user(r, sb, &user, uerr, sizeof(uerr));
	if (ue < 0) {
		free(w);
		return e2b_stream_error(r, e2b_rpc_code(ue), "%s", uerr);
	}
	if (!watch_req_parse(j, user.home, &w->req, &why)) {
		free(w);
		return e2b_stream_error(r, "invalid_argument", "%s", why);
	}
	char msg[WATCH_PATH_MAX + 64];
	const char *code = watch_target_check(sb, w->req.path, msg, sizeof(msg));
	if (code) {
		free(w);
		return e2b_stream_error(r, code, "%s", msg);
	}
	uint64_t v;
	const char *t = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	if (t && util_parse_uint(t, 1, UINT32_MAX, &v) == 0)
		w->timeout_ns = v * 1000000;
	const char *ka = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
	w->keepalive_s = ka && util_parse_uint(ka, 1, 3600, &v) == 0 ? (unsigned)v : WATCH_KEEPALIVE_DEFAULT_S;
	/* Each stream lists its directory several times a second: their number is bounded. */
	pthread_mutex_lock(&streams_lock);
	bool full = n_streams >= WATCH_STREAMS_MAX;
	if (!full)
		n_streams++;
	pthread_mutex_unlock(&streams_lock);
	if (full) {
		free(w);
		return e2b_stream_error(r, "resource_exhausted", "%u directory watches are running: stop one first",
					WATCH_STREAMS_MAX);
	}
	return serve_reply_stream(r, 200, "application/connect+json", watch_producer, w, watch_stream_free);
}

/* --- CreateWatcher, GetWatcherEvents, RemoveWatcher: the listing is compared at each GetWatcherEvents --- */

struct watcher {
	char id[40];
	char sandbox[32];
	struct watch_req req;
	struct listing cur;
	uint64_t used_ns;
	struct watcher *next;
};

static pthread_mutex_t watchers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct watcher *watchers;      /* under watchers_lock; one being used is taken out of the list */
static unsigned n_watchers;           /* in the list or taken out */

static void watcher_free(struct watcher *w)
{
	if (w)
		listing_clear(&w->cur);
	free(w);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct watcher, watcher_free)

/* Drops the watchers nobody asked for a while; called with watchers_lock held. */
static void watchers_expire(uint64_t now)
{
	for (struct watcher **pp = &watchers; *pp;) {
		struct watcher *w = *pp;
		if (now - w->used_ns < WATCHER_IDLE_NS) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		n_watchers--;
		watcher_free(w);
	}
}

/* Takes the watcher of the request's "watcherId" in sandbox out of the list (NULL if none). */
static struct watcher *watcher_take(const char *sandbox, const cJSON *j)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "watcherId"));
	struct watcher *found = NULL;
	pthread_mutex_lock(&watchers_lock);
	watchers_expire(util_now_ns());
	for (struct watcher **pp = &watchers; id && *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->id, id) && !strcmp((*pp)->sandbox, sandbox)) {
			found = *pp;
			*pp = found->next;
			break;
		}
	if (found)
		n_watchers--;
	pthread_mutex_unlock(&watchers_lock);
	return found;
}

static void watcher_put(struct watcher *w)
{
	pthread_mutex_lock(&watchers_lock);
	w->used_ns = util_now_ns();
	w->next = watchers;
	watchers = w;
	n_watchers++;
	pthread_mutex_unlock(&watchers_lock);
}

void e2b_watch_cleanup(void)
{
	pthread_mutex_lock(&watchers_lock);
	while (watchers) {
		struct watcher *w = watchers;
		watchers = w->next;
		watcher_free(w);
	}
	n_watchers = 0;
	pthread_mutex_unlock(&watchers_lock);
}

enum MHD_Result e2b_fs_create_watcher(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	if (!j)
		return MHD_YES;
	_cleanup_(watcher_freep) struct watcher *w = calloc(1, sizeof(*w));
	if (!w)
		return e2b_rpc_error(r, "internal", "out of memory");
	const char *why;
	space_sandbox *sb = e2b_sandbox(r);
	if (!sb)
		return MHD_YES;
	struct e2b_user user;
	char uerr[256];
	int ue = e2b_request_user(r, sb, &user, uerr, sizeof(uerr));
	if (ue < 0)
		return e2b_rpc_error(r, e2b_rpc_code(ue), "%s", uerr);
	if (!watch_req_parse(j, user.home, &w->req, &why))
		return e2b_rpc_error(r, "invalid_argument", "%s", why);
	char msg[WATCH_PATH_MAX + 256];
	const char *code = watch_target_check(sb, w->req.path, msg, sizeof(msg));
	if (code)
		return e2b_rpc_error(r, code, "%s", msg);
	int e = listing_take(sb, w->req.path, w->req.recursive, &w->cur);
	if (e < 0) {
		code = listing_error(sb, &w->req, e, msg, sizeof(msg));
		return e2b_rpc_error(r, code, "%s", msg);
	}
	unsigned char rnd[8];
	if (util_random_bytes(rnd, sizeof(rnd)) < 0)
		return e2b_rpc_error(r, "internal", "no random bytes for a watcher id");
	snprintf(w->id, sizeof(w->id), "w-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
		 rnd[5], rnd[6], rnd[7]);
	snprintf(w->sandbox, sizeof(w->sandbox), "%s", space_sandbox_id(sb));
	pthread_mutex_lock(&watchers_lock);
	watchers_expire(util_now_ns());
	bool full = n_watchers >= WATCHERS_MAX;
	pthread_mutex_unlock(&watchers_lock);
	if (full)
		return e2b_rpc_error(r, "resource_exhausted", "%u watchers exist: remove one first (RemoveWatcher)",
				     WATCHERS_MAX);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "watcherId", w->id);
	watcher_put(TAKE_PTR(w));
	return e2b_rpc_reply(r, out);
}

struct collect {
	cJSON *events;
	const struct watcher *w;
	unsigned n;
};

static int collect_event(enum wevent type, const struct wentry *e, void *userdata)
{
	struct collect *c = userdata;
	if (++c->n > WATCH_EVENTS_PER_S)
		return -EMFILE;
	cJSON *ev = event_json(type, e, c->w->req.include_entry, c->w->req.path);
	if (!ev)
		return -ENOMEM;
	cJSON_AddItemToArray(c->events, ev);
	return 0;
}

enum MHD_Result e2b_fs_get_watcher_events(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	space_sandbox *sb = j ? e2b_sandbox(r) : NULL;
	if (!sb)
		return MHD_YES;
	struct watcher *w = watcher_take(space_sandbox_id(sb), j);
	if (!w)
		return e2b_rpc_error(r, "not_found", "no such watcher");
	struct listing next = { 0 };
	int e = listing_take(sb, w->req.path, w->req.recursive, &next);
	char msg[WATCH_PATH_MAX + 256];
	if (e < 0) {
		const char *code = listing_error(sb, &w->req, e, msg, sizeof(msg));
		/* A watcher whose directory or sandbox is gone is of no further use. */
		watcher_free(w);
		return e2b_rpc_error(r, code, "%s", msg);
	}
	cJSON *out = cJSON_CreateObject();
	struct collect c = { cJSON_AddArrayToObject(out, "events"), w, 0 };
	e = c.events ? listing_diff(&w->cur, &next, collect_event, &c) : -ENOMEM;
	if (e < 0) {
		cJSON_Delete(out);
		listing_clear(&next);
		watcher_free(w);
		if (e == -EMFILE)
			return e2b_rpc_error(r, "resource_exhausted", "more than %u events since the last call: the watcher is removed",
					     WATCH_EVENTS_PER_S);
		return e2b_rpc_error(r, "internal", "watch: %s", space_strerror(e));
	}
	listing_clear(&w->cur);
	w->cur = next;
	watcher_put(w);
	return e2b_rpc_reply(r, out);
}

enum MHD_Result e2b_fs_remove_watcher(struct serve_req *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = e2b_rpc_body(r);
	space_sandbox *sb = j ? e2b_sandbox(r) : NULL;
	if (!sb)
		return MHD_YES;
	struct watcher *w = watcher_take(space_sandbox_id(sb), j);
	if (!w)
		return e2b_rpc_error(r, "not_found", "no such watcher");
	watcher_free(w);
	return e2b_rpc_reply(r, NULL);
}
