/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-gateway: the egress gateway of one sandbox (docs/network.md). Private to the helper.
 *
 * The process owns a network namespace holding the gateway end of the sandbox's veth pair and nothing
 * else; its listening sockets live there, every upstream connection is made from the host namespace.
 * The main thread polls the listeners, the DNS socket, a packet socket watching the veth (to record what
 * no socket would see: SYNs to other ports, UDP, ICMP, spoofed sources) and the sandbox's pidfd; each
 * accepted connection is served by its own thread, up to the policy's connection limit.
 */
#pragma once

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "store/db.h"

#define GW_MAX_PORTS 32
#define GW_MAX_NAMES 4096
#define GW_SYNTH_BASE 0xc6120000u /* 198.18.0.0/15: answers of the gateway's DNS */
#define GW_SYNTH_MASK 0xfffe0000u

struct gw_allow {
	char host[256];           /* exact or "*.suffix", lowercase */
	uint16_t port;            /* 0: the default ports */
};

struct gw_inject {
	char host[256];
	char header[65];
	char *value;              /* final value: holds a secret */
};

struct gw_leaf {
	char name[256];
	SSL_CTX *ctx;
};

struct gw {
	const char *state_dir;
	const char *sandbox_id;
	const char *tap;               /* a VM sandbox: its TAP in the VMM's namespace (NULL: a jail) */
	struct gw_allow *allow;
	size_t n_allow;
	struct gw_inject *inject;
	size_t n_inject;
	struct cJSON *resolve;         /* name -> "ip[:port]" */
	uint16_t ports[GW_MAX_PORTS];  /* TCP ports served */
	size_t n_ports;
	unsigned max_conns;
	uint64_t bytes_per_second;     /* 0: unlimited */
	uint32_t guest_addr, gw_addr;  /* network byte order */
	uint8_t guest_mac[6];          /* the sandbox's eth0 as created */

	pthread_mutex_t lock;          /* names, leaves, bucket */
	char (*names)[256];            /* synthetic address index -> name */
	uint32_t n_names;
	struct gw_leaf leaves[64];
	size_t n_leaves;
	double tokens;
	int64_t bucket_ns;
	atomic_uint conns;

	struct store *store;
	pthread_mutex_t ev_lock;
	struct { uint64_t hash; int64_t ms; } recent[128];
	int64_t ev_window_ms;
	unsigned ev_in_window;

	SSL_CTX *upstream;             /* client side: system trust + ca_file, full verification */
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca_cert;
};

/* gw_main.c */
/* Records a denied or notable attempt in the store's event log (deduplicated, rate limited). */
void gw_event(struct gw *g, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Allowed by the policy: host on port (port 0: any port). */
bool gw_allowed(const struct gw *g, const char *host, uint16_t port);
/* Blocks until n bytes may pass the sandbox's bandwidth limit. */
void gw_throttle(struct gw *g, size_t n);

/* gw_dns.c: answers one query in buf (len bytes) into out; returns the answer's length or -1 to drop. */
int gw_dns_answer(struct gw *g, const uint8_t *buf, size_t len, uint8_t *out, size_t out_len);
/* The name a synthetic address stands for, copied to buf; false if the address is not one. */
bool gw_dns_name_of(struct gw *g, uint32_t addr_be, char *buf, size_t len);

/* gw_tls.c */
/* Loads or creates <state>/gateway/ca.{key,crt} (key mode 0600) and the upstream client context. */
int gw_tls_init(struct gw *g, const char *ca_file, char *err, size_t errlen);
/* A server context presenting a certificate for name, signed by the CA (cached). */
SSL_CTX *gw_tls_leaf(struct gw *g, const char *name);
/* Extracts the SNI host name from a TLS ClientHello record; false if there is none or it is malformed. */
bool gw_tls_sni(const uint8_t *buf, size_t len, char *out, size_t out_len);

/* gw_conn.c: serves one accepted guest connection (takes ownership of fd); runs in its own thread. */
void gw_conn_serve(struct gw *g, int fd);
