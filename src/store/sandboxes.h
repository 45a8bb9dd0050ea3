/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox rows: the only code that reads or writes the sandboxes table. Private.
 *
 * Typed rows: every value the library reads back has its own column (uid_base, warm-pool membership,
 * the snapshot helper's pid); metadata is JSON the library stores for the caller (env, hostname, policy)
 * and hands back as it was given.
 *
 * Status is a state machine. Every change is a compare-and-set (UPDATE ... WHERE id = ? AND status IN
 * (the allowed predecessors)); a row whose current status is not one of them is left alone and the call
 * answers -ESTALE, so e.g. a late "failed" never turns a destroyed sandbox back into a live-looking one.
 *
 *   from \ to    creating running paused stopped failed destroyed
 *   (insert)        x
 *   creating                x       x              x       x
 *   running                 x       x       x      x       x
 *   paused                  x       x       x      x       x
 *   stopped                 x                      x       x
 *   failed                                                 x
 *   destroyed                                                          (final: the row stays for events)
 *
 *   creating -> running     the creator recorded the sandbox's process (create, fork)
 *   running  -> running     a new process replaced the old one (restart, rollback); pid columns change
 *   running <-> paused      pause/resume; a warm-pool sandbox is filled running, then parked paused
 *   *        -> stopped     the agent shut down on request (no process left, disk kept)
 *   *        -> failed      its process died, or a multi-step operation failed half-way
 *   *        -> destroyed   destroy / remove / lifetime reaped: disk and runtime files are gone
 *
 * Multi-step operations on one sandbox (create, restart/rollback, checkpoint, fork, destroy) also hold
 * its lock (store/lock.h) across the steps; a transition is one transaction either way.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* The same values as enum space_sandbox_status (core checks it at compile time). */
enum store_status {
	STORE_CREATING = 0,
	STORE_RUNNING = 1,
	STORE_PAUSED = 2,
	STORE_STOPPED = 3,
	STORE_FAILED = 4,
	STORE_DESTROYED = 5,
	STORE_STATUS_COUNT
};

/* A set of statuses, for the predecessors of a transition and for list filters. */
#define STORE_ST(s) (1u << (s))
#define STORE_ST_LIVE (STORE_ST(STORE_CREATING) | STORE_ST(STORE_RUNNING) | STORE_ST(STORE_PAUSED))
#define STORE_ST_ANY ((1u << STORE_STATUS_COUNT) - 1)

/* "creating", "running", ...; NULL for a value out of range. parse: -EINVAL for an unknown name. */
const char *store_status_name(enum store_status s);
int store_status_parse(const char *name);

/* The statuses a row may be in to move to `to` (the table above); 0 for none. */
unsigned store_status_predecessors(enum store_status to);
bool store_status_allowed(enum store_status from, enum store_status to);

/* A process recorded with the pid namespace it was seen in (util/procstat.h). */
struct store_proc {
	int32_t pid;         /* 0: none */
	uint64_t start_time; /* /proc/PID/stat field 22, against pid reuse; 0: unknown */
	uint64_t pidns;      /* inode of the recorder's /proc/self/ns/pid; 0: not recorded (before schema 7) */
};

struct store_sandbox {
	char id[32];
	char template_name[64];
	char isolation[8];
	enum store_status status;
	char reason[256];
	struct store_proc proc;   /* the sandbox's host process (space-vmm / the jail's PID 1); while
	                             creating, the creator's */
	struct store_proc helper; /* the periodic snapshot helper (space-snapd); pid 0: none */
	uint32_t cpus;
	uint32_t memory_mib;
	int64_t created_ms;
	int64_t updated_ms;
	int64_t expires_ms; /* 0: no lifetime limit */
	uint32_t host_uid;  /* the machine-wide uid slot (util/uidalloc.h); 0: none */
	uint32_t uid_base;  /* jail: host uid of root inside; 0: the identity map */
	char pool[64];      /* warm pool: the template it waits for; "": a user's sandbox */
	char path[PATH_MAX];
	char runtime_dir[PATH_MAX];
	char cgroup[256];
	char *metadata;     /* the caller's JSON (env, hostname, policy, snapshot policy), malloc'd; may be NULL */
};

/* Frees what a row owns (its metadata); the row may be reused. NULL is fine. */
void store_sandbox_clear(struct store_sandbox *row);
/* Frees a list from store_sandbox_list. */
void store_sandbox_list_free(struct store_sandbox *list, size_t n);

/* Loads one row; -ENOENT when there is none. */
int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *ret);

/* Which rows store_sandbox_list returns. */
struct store_sandbox_filter {
	unsigned statuses;          /* STORE_ST() set; 0: any */
	bool pooled;                /* true: only warm-pool rows; false: only user sandboxes */
	const char *pool;           /* with pooled: only that template's pool (NULL: every pool) */
	const char *template_name;  /* NULL: any */
	int64_t expired_at;         /* > 0: only rows with 0 < expires_ms <= expired_at */
	size_t max;                 /* 0: no limit */
};

/* Rows matching f, oldest first (created_ms, id). *ret is an array of *ret_n rows (NULL when none);
 * free with store_sandbox_list_free. */
int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f, struct store_sandbox **ret,
		       size_t *ret_n);

/* Number of rows whose status is in statuses (a STORE_ST() set), or -errno. */
int store_sandbox_count(struct store *s, unsigned statuses);

/* Inserts a row in status creating with row's id, template, isolation, proc, cpus, memory, path,
 * runtime_dir, created_ms (also updated_ms), expires_ms, uid_base and metadata. -EEXIST if the id is
 * taken. Inside or outside a transaction. */
int store_sandbox_insert(struct store *s, const struct store_sandbox *row);

/*
 * The compare-and-set: moves id to `to` when its status is one of `from` (a STORE_ST() set, which is
 * narrowed to the predecessors the state machine allows), sets reason (NULL: cleared) and updated_ms.
 * -ESTALE when the row is in another status (nothing changed; *ret_current, if given, says which),
 * -ENOENT when there is no such row. Inside or outside a transaction; the caller adds the event.
 */
int store_sandbox_transition(struct store *s, const char *id, unsigned from, enum store_status to,
			     const char *reason, enum store_status *ret_current);

/* The same, recording the sandbox's new process and cgroup with it (start, restart, rollback, fork). */
int store_sandbox_transition_proc(struct store *s, const char *id, unsigned from, enum store_status to,
				  const struct store_proc *proc, const char *cgroup, uint32_t uid_base);

/* Single-column updates; -ENOENT when no row, -ESTALE when `only_if` (a STORE_ST() set, 0: any) does not
 * hold the row's current status. */
int store_sandbox_set_expires(struct store *s, const char *id, unsigned only_if, int64_t expires_ms);
int store_sandbox_set_host_uid(struct store *s, const char *id, uint32_t host_uid);
int store_sandbox_set_metadata(struct store *s, const char *id, const char *metadata);
/* The snapshot helper (pid 0: none). */
int store_sandbox_set_helper(struct store *s, const char *id, const struct store_proc *helper);

/* Warm pool: mark a row as waiting in template's pool (pool NULL: a user's sandbox again). */
int store_sandbox_set_pool(struct store *s, const char *id, const char *pool);
/* Claims the oldest paused row of template's pool with isolation iso and makes it a user's sandbox
 * (pool cleared, created_ms = now) in one statement, so two processes never take the same one. Its id
 * goes to ret_id (idlen bytes). 1 when one was taken, 0 when the pool is empty, or -errno. */
int store_sandbox_pool_take(struct store *s, const char *template_name, const char *iso, char *ret_id,
			    size_t idlen);

/* Status of a row (-ENOENT when none): for callers that need nothing else (uid slot checks). */
int store_sandbox_status(struct store *s, const char *id, enum store_status *ret);

/* The same in the store at db_path, opened read-only for this one query (another state directory's, whose
 * uid slots a machine-wide reclaim checks), waiting up to STORE_PEEK_BUSY_MS for its writers. -ENOENT when
 * it has no such row; other -errno (a store that cannot be read) say nothing either way. */
#define STORE_PEEK_BUSY_MS 2000
int store_sandbox_status_peek(const char *db_path, const char *id, enum store_status *ret);
