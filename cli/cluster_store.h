/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster store: the control plane several `space serve --cluster` hosts share. Two back-ends behind
 * this one interface (cluster_store_int.h), holding the same rows and tested alike:
 * - PostgreSQL (libpq; any libpq conninfo): hosts on several machines. PostgreSQL's own replication and
 *   failover are the distributed engine; nothing here votes.
 * - SQLite ("sqlite:/ABSOLUTE/PATH"): servers on one machine sharing a file (a trial cluster, tests).
 *
 * Rows (schema and migrations in cluster_store_pg.c and cluster_store_sqlite.c, docs/cluster.md):
 * - hosts: name, the URL other hosts reach it at, its capacity (live sandboxes it takes), what it can
 *   run (isolations, templates, warm-pool stock, the names of its registered secrets: never a value), its
 *   heartbeat, state up|lost, and its key (signs the requests it forwards; docs/cluster.md says who can
 *   read it);
 * - sandboxes: global id -> owning host, state running|lost|destroyed, template;
 * - placements: a claim on a host's capacity between placement and the owner's create;
 * - api_keys: SHA-256 of every host's API keys, so a key made on one host opens every host;
 * - checkpoints: which host holds a checkpoint (calls by checkpoint id go there).
 *
 * The store is safe to share between threads. PostgreSQL: every call takes a connection from a small pool
 * (made on demand, dropped when the server is gone); a call that cannot reach the server fails within the
 * connect timeout (3 s unless the conninfo says otherwise) with -EHOSTUNREACH and a message, and so does one
 * whose bytes go unacknowledged for 3 s (tcp_user_timeout); a statement over 5 s is cancelled by the server
 * (statement_timeout). SQLite: one connection, a call waits at most 5 s for another process's write.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct cluster_store;

#define CLUSTER_NAME_MAX 64           /* host names: [a-z0-9-], 1..63 */
#define CLUSTER_URL_MAX 128
#define CLUSTER_KEY_HEX 64            /* a host key: 32 random bytes in hex */
#define CLUSTER_ID_MAX 32             /* sandbox ids */
#define CLUSTER_TEMPLATES_MAX 256     /* templates a host reports */
#define CLUSTER_SECRETS_MAX 256       /* secret names a host reports */
#define CLUSTER_PLACE_SECRETS_MAX 32  /* secret names a create may need */

/* Connects (checking the server answers) and creates or migrates the schema (under a lock, so hosts
 * starting together migrate once). conninfo: "sqlite:/ABSOLUTE/PATH", or a libpq keyword string or URI. */
int cluster_open(const char *conninfo, struct cluster_store **ret, char *err, size_t errlen);
void cluster_close(struct cluster_store *cs);
/* Whether conninfo names the SQLite back-end. */
bool cluster_conninfo_sqlite(const char *conninfo);
/* "postgresql" or "sqlite". */
const char *cluster_backend(const struct cluster_store *cs);
/* The message of the calling thread's last failed call. */
const char *cluster_errmsg(void);
/* The schema version this build writes. */
int cluster_schema_version(void);

/* Whether name is a valid host name: 1..63 of a-z, 0-9 and -, not starting with -. (Inline: the CLI checks
 * names without the store.) */
static inline bool cluster_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	return n > 0 && n < CLUSTER_NAME_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n &&
	       name[0] != '-';
}

/* What a host reports of itself at registration and on every heartbeat. */
struct cluster_host_report {
	const char *name;
	const char *url;
	uint32_t capacity;            /* live sandboxes it takes */
	uint32_t cpus;
	uint64_t mem_total, mem_available, pool_free;
	const char *isolations;       /* "jail" or "jail,vm" */
	const char *const *templates; /* NULL-terminated */
	const char *const *secrets;   /* the names of its registered secrets, NULL-terminated (NULL: none) */
	const char *pool_stock_json;  /* {"template": ready clones, ...} */
	const char *version;
};

/* Registers the host (a new incarnation, a new key in ret_key) and marks it up and serving. -EBUSY when
 * another server of that name heartbeats and serves (younger than stale_s): *ret_age_s says how old its
 * heartbeat is. */
int cluster_host_register(struct cluster_store *cs, const struct cluster_host_report *h, unsigned stale_s,
			  uint64_t *ret_incarnation, char ret_key[CLUSTER_KEY_HEX + 1], unsigned *ret_age_s);
/* A heartbeat: updates the report and the time. *ret_was_lost: the cluster had marked the host lost.
 * -ESTALE when another server took over the name (a newer incarnation). */
int cluster_host_heartbeat(struct cluster_store *cs, const struct cluster_host_report *h, uint64_t incarnation,
			   bool *ret_was_lost);
/* The server stops serving (its heartbeat then ages until the host is lost). */
int cluster_host_stop(struct cluster_store *cs, const char *name, uint64_t incarnation);
/* Marks hosts without a heartbeat for lost_after_s lost, and their running sandboxes with them; calls fn
 * for each host so marked with the number of its sandboxes. Returns how many hosts, or -errno. */
int cluster_sweep(struct cluster_store *cs, unsigned lost_after_s,
		  void (*fn)(const char *host, unsigned sandboxes, void *arg), void *arg);
/* The key of a host (to check the requests it forwards); -ENOENT when there is no such host. */
int cluster_host_key(struct cluster_store *cs, const char *name, char ret_key[CLUSTER_KEY_HEX + 1]);

/* Picks the host for a new sandbox of template (isolation NULL: any) and claims a place on it: among hosts
 * up, heartbeating within fresh_s, holding the template and every registered secret in secrets (names,
 * NULL-terminated; NULL: none), under capacity and not avoid (NULL: none), one with the template's warm
 * pool stocked first, then the lowest live/capacity ratio. ret_token names the claim (for
 * cluster_sandbox_add). When every host holding the template (and the secrets) is full, a host that does not
 * hold it, with room and the secrets, is placed and claimed instead, with ret_pull_from a host up that holds
 * it (the template is pulled from there first; "" otherwise). -ENOENT: no live host holds the template (or,
 * holding it, the secrets); -ENOSPC: all that do are full and no other host has room; -EHOSTDOWN: no host is
 * up; -E2BIG: more than CLUSTER_PLACE_SECRETS_MAX secrets. */
int cluster_place(struct cluster_store *cs, const char *template, const char *isolation, const char *const *secrets,
		  unsigned fresh_s, const char *avoid, char ret_host[CLUSTER_NAME_MAX], char ret_url[CLUSTER_URL_MAX],
		  char ret_token[33], char ret_pull_from[CLUSTER_NAME_MAX]);
/* Drops a placement claim whose create failed (its capacity is free again). */
int cluster_claim_drop(struct cluster_store *cs, const char *token);
/* Records a sandbox the host made (running) and drops its placement claim (token may be NULL). */
int cluster_sandbox_add(struct cluster_store *cs, const char *id, const char *host, const char *template,
			const char *token);

enum cluster_sandbox_state {
	CLUSTER_SANDBOX_RUNNING = 0,  /* its host is up (it may be paused there) */
	CLUSTER_SANDBOX_LOST,         /* its host stopped heartbeating */
	CLUSTER_SANDBOX_DESTROYED,    /* gone, or given up on while lost */
};
const char *cluster_sandbox_state_name(enum cluster_sandbox_state s);

struct cluster_sandbox {
	char id[CLUSTER_ID_MAX];
	char host[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];    /* the host's */
	char template[64];
	enum cluster_sandbox_state state;
	bool host_up;
};
/* The sandbox's row; -ENOENT when the cluster never had it. */
int cluster_sandbox_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret);
/* A lost sandbox the cluster gives up on: destroyed (its host destroys it when it comes back). -ENOENT
 * when it is not lost. */
int cluster_sandbox_give_up(struct cluster_store *cs, const char *id);
/* Rows of sandboxes, host NULL for all (destroyed ones only with destroyed true), in id order; fn returns
 * 0 to go on. */
int cluster_sandbox_list(struct cluster_store *cs, const char *host, bool destroyed,
			 int (*fn)(const struct cluster_sandbox *s, void *arg), void *arg);
/* Sets the state of the host's sandbox id (reconciliation). */
int cluster_sandbox_set(struct cluster_store *cs, const char *id, const char *host, enum cluster_sandbox_state st);

struct cluster_host_row {
	char name[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
	bool up, serving;
	uint32_t capacity, live;
	double heartbeat_age_s;
	uint64_t incarnation;
	char version[32];
};
int cluster_host_list(struct cluster_store *cs, int (*fn)(const struct cluster_host_row *h, void *arg), void *arg);

/* Checkpoints: the host publishes the ids of the checkpoints it holds (NULL-terminated, with their
 * sandboxes' ids in the same order); those it published before and no longer holds are withdrawn. */
int cluster_checkpoints_publish(struct cluster_store *cs, const char *host, const char *const *ids,
				const char *const *sandboxes);
/* The host of checkpoint id into ret (id, host, url, host_up; state running when its host is up, lost
 * otherwise); -ENOENT when no host published it. */
int cluster_checkpoint_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret);

/* API keys: the host publishes the SHA-256 (hex) of its keys; hashes not in hex_hashes (NULL-terminated)
 * that it published before are withdrawn. */
int cluster_apikeys_publish(struct cluster_store *cs, const char *host, const char *const *hex_hashes);
/* 0 when some host published hex_hash, -EACCES when none did. */
int cluster_apikey_check(struct cluster_store *cs, const char *hex_hash);
