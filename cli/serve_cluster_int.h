/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the parts of `space serve --cluster` share (not part of the server's interface, serve.h):
 * serve_cluster.c (membership, signatures), serve_cluster_fwd.c (dispatch, forwarding, creates),
 * serve_cluster_ops.c (listings, templates between hosts).
 */
#pragma once

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster_store.h"
#include "serve.h"

#define CLUSTER_PEERS_MAX 32

struct peer_key {
	char name[CLUSTER_NAME_MAX];
	char key[CLUSTER_KEY_HEX + 1];
	uint64_t at_ns;
};

struct serve_cluster {
	struct cluster_store *cs;
	struct serve *srv;
	char name[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
	char key[CLUSTER_KEY_HEX + 1];
	char isolations[16];
	struct cluster_tls *tls;
	struct sockaddr_in listen;
	uint64_t incarnation;
	uint32_t capacity;
	unsigned heartbeat_s, lost_after_s;

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool unreachable;             /* the last heartbeat could not reach the store (said once) */
	atomic_bool taken_over;       /* another server registered this host's name: this one stands aside */
	atomic_bool joined;           /* registered: it may place, forward and be forwarded to */

	pthread_mutex_t peers_lock;
	struct peer_key peers[CLUSTER_PEERS_MAX];
};

/* The hosts that are up and serving (at most CLUSTER_PEERS_MAX; too_many when there were more). */
struct host_ref {
	char name[CLUSTER_NAME_MAX];
	char url[CLUSTER_URL_MAX];
};
struct host_refs {
	struct host_ref v[CLUSTER_PEERS_MAX];
	size_t n;
	bool too_many;
};
int cluster_up_hosts(struct serve_cluster *c, struct host_refs *ret);

/* HMAC-SHA256 under key over "space-cluster-v1", method, target, time, from and to, in hex. */
void cluster_sign(const char *key, const char *method, const char *target, const char *time_s, const char *from,
		  const char *to, char out[65]);
/* Our headers (whole lines) of a request of method and target to host to: who signs it for whom, and (a
 * create) the placement's claim (NULL: none). */
int cluster_sign_headers(struct serve_cluster *c, const char *method, const char *target, const char *to,
			 const char *claim, char *out, size_t n);
/* A request that says it comes from a host of the cluster: 1 when it came over the cluster's listener from
 * that host and its signature holds (r->cluster_peer), else -1 after answering 401. */
int cluster_verify_peer(struct serve_req *r, const char *from);
/* What an API caller is told of the store's failure e: for an unreachable or failing store a fixed line (the
 * store's own message names its address, which is not the caller's to know; the heartbeat logs it), else
 * our own message (placement: no host, no capacity, no template). */
const char *cluster_caller_errmsg(int e);
/* 502 host_unreachable: host did not answer (e). */
enum MHD_Result cluster_host_error(struct serve_req *r, const char *host, int e);
/* Publishes the checkpoints this host holds. */
int cluster_publish_checkpoints(struct serve_cluster *c, space_ctx *ctx);
