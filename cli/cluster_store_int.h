/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster store's back-ends (private to cluster_store*.c): cluster_store.c checks the caller's input,
 * makes keys and tokens, words the errors every back-end shares, and calls one of these. A back-end sets
 * its own message (cluster_seterr) only for what is its own: an unreachable server, a failed statement.
 *
 * cluster_store_open.c picks one by the conninfo:
 * - PostgreSQL (cluster_store_pg.c, libpq): hosts on several machines.
 * - SQLite (cluster_store_sqlite.c, conninfo "sqlite:/ABSOLUTE/PATH"): servers on one machine sharing a
 *   file (a trial cluster, tests); never on a network file system (refused).
 *
 * Both hold the same rows, in schema version CLUSTER_SCHEMA_VERSION, and are tested alike (the same
 * test_cluster_store runs against each).
 */
#pragma once

#include "cluster_store.h"

#define CLUSTER_SCHEMA_VERSION 3    /* the migrations each back-end holds */
#define CLUSTER_CLAIM_S 120         /* a placement claim holds capacity this long at most */
#define CLUSTER_DESTROYED_KEEP_S 3600 /* destroyed rows answer "was removed" this long */

struct cluster_store_ops {
	const char *name; /* "postgresql", "sqlite" */
	void (*close)(struct cluster_store *cs);
	/* key: the new incarnation's (made by the caller). -EBUSY: a server of that name serves (*ret_age_s). */
	int (*host_register)(struct cluster_store *cs, const struct cluster_host_report *h, unsigned stale_s,
			     const char *key, uint64_t *ret_incarnation, unsigned *ret_age_s);
	/* -ESTALE: no such incarnation */
	int (*host_heartbeat)(struct cluster_store *cs, const struct cluster_host_report *h, uint64_t incarnation,
			      bool *ret_was_lost);
	int (*host_stop)(struct cluster_store *cs, const char *name, uint64_t incarnation);
	int (*sweep)(struct cluster_store *cs, unsigned lost_after_s,
		     void (*fn)(const char *host, unsigned sandboxes, void *arg), void *arg);
	/* -ENOENT: no such host; -EBADMSG: a key of the wrong length */
	int (*host_key)(struct cluster_store *cs, const char *name, char ret_key[CLUSTER_KEY_HEX + 1]);
	int (*host_list)(struct cluster_store *cs, int (*fn)(const struct cluster_host_row *h, void *arg), void *arg);
	/* isolation and avoid "" for none, secrets never NULL; -EAGAIN: no host placed (the caller asks
	 * place_counts why). pull: among the hosts that do not hold the template (it is pulled there first). */
	int (*place)(struct cluster_store *cs, const char *template, const char *isolation, const char *const *secrets,
		     unsigned fresh_s, const char *avoid, bool pull, const char *token, char ret_host[CLUSTER_NAME_MAX],
		     char ret_url[CLUSTER_URL_MAX]);
	/* a host up (heartbeat within fresh_s) that holds template, the least loaded; -ENOENT: none */
	int (*holder)(struct cluster_store *cs, const char *template, unsigned fresh_s, char ret_host[CLUSTER_NAME_MAX]);
	/* hosts up (heartbeat within fresh_s), those of them holding template for isolation, and those of these
	 * holding every secret too */
	int (*place_counts)(struct cluster_store *cs, const char *template, const char *isolation,
			    const char *const *secrets, unsigned fresh_s, long *ret_up, long *ret_holding,
			    long *ret_with_secrets);
	int (*claim_drop)(struct cluster_store *cs, const char *token);
	int (*sandbox_add)(struct cluster_store *cs, const char *id, const char *host, const char *template,
			   const char *token);
	/* -ENOENT: no row */
	int (*sandbox_get)(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret);
	/* -ENOENT: no lost row of that id */
	int (*sandbox_give_up)(struct cluster_store *cs, const char *id);
	int (*sandbox_list)(struct cluster_store *cs, const char *host, bool destroyed,
			    int (*fn)(const struct cluster_sandbox *s, void *arg), void *arg);
	int (*sandbox_set)(struct cluster_store *cs, const char *id, const char *host, enum cluster_sandbox_state st);
	int (*checkpoints_publish)(struct cluster_store *cs, const char *host, const char *const *ids,
				   const char *const *sandboxes);
	/* -ENOENT: nobody published it */
	int (*checkpoint_get)(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret);
	int (*apikeys_publish)(struct cluster_store *cs, const char *host, const char *const *hex_hashes);
	/* -EACCES: nobody published it */
	int (*apikey_check)(struct cluster_store *cs, const char *hex_hash);
};

/* Every back-end's store starts with this. */
struct cluster_store {
	const struct cluster_store_ops *ops;
};

/* Sets the calling thread's message (one line) and returns e. */
int cluster_seterr(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
enum cluster_sandbox_state cluster_state_parse(const char *s);
/* "jail,vm" into out (at most 3 names, NULL-terminated), cut in buf. */
void cluster_isolations_split(const char *isolations, const char *out[4], char *buf, size_t len);

int cluster_pg_open(const char *conninfo, struct cluster_store **ret);
int cluster_sqlite_open(const char *path, struct cluster_store **ret);
