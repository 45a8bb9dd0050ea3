/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-gateway: the egress gateway of one sandbox (docs/network.md). Private to the helper.
 *
 * The process owns a network namespace holding the gateway end of the sandbox's veth pair and nothing
 * else; its listening sockets live there, every upstream connection is made from the host namespace.
 * The main thread polls the listeners, the DNS socket, a packet socket watching the veth (to record what
 * no socket would see: SYNs to other ports, UDP, ICMP, spoofed sources) and the sandbox's pidfd; each
 * accepted connection is served by its own thread, up to the policy's connection limit.
 *
 * It starts as root only to build that network and load the CA; before it reads a byte from the sandbox
 * it switches to a uid of its own with no capabilities, under a seccomp allowlist (gw_confine). It never
 * opens the store: its events go to a spool the library collects (net.h, gw_log.c).
 */
#pragma once

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <openssl/ssl.h>

#include "net/net.h" /* NET_EVENT_DETAIL_MAX */
#include "util/escape.h"

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
	struct cJSON *passthrough;     /* host patterns whose TLS is relayed unopened (only the SNI checked) */
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

	/* gw_log.c: gateway.log (rotated into gateway.log.1) and the event spool, all under ev_lock. */
	pthread_mutex_t ev_lock;
	struct { uint64_t hash; int64_t ms; } recent[128];
	int64_t ev_window_ms;
	unsigned ev_in_window;
	unsigned ev_suppressed;        /* events over the rate limit since the last note */
	int64_t log_window_ms;
	unsigned log_in_window, log_suppressed;
	int log_fd, log_old_fd;        /* gateway.log (O_APPEND), gateway.log.1; -1: none */
	int spool_fd;                  /* events.jsonl; -1: events go to the log only */
	uint32_t log_max, spool_max;   /* GW_LOG_FILE_MAX, NET_EVENTS_SPOOL_MAX (tests make them small) */
	char *spool_pending;           /* lines the spool's lock kept out (the library was collecting) */
	size_t n_pending;
	unsigned spool_dropped;        /* events that found the spool full */

	SSL_CTX *upstream;             /* client side: system trust + ca_file, full verification */
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca_cert;
};

/* gw_log.c: what the gateway records. Nothing is written before the rate limits: a sandbox cannot make the
 * host store more than GW_LOG_FILE_MAX bytes per log file, and NET_EVENTS_SPOOL_MAX bytes of events. */
#define GW_LOG_FILE_MAX (2u << 20) /* gateway.log, and gateway.log.1 for the rotated-out half */
#define GW_EVENTS_PER_SECOND 20
#define GW_LOG_LINES_PER_SECOND 10 /* other lines (start, stop, errors) */
#define GW_QUOTE_MAX 96            /* bytes of one sandbox-made string (a name, SNI, Host) kept in a detail */
#define GW_QUOTE_BUF (GW_QUOTE_MAX * 4 + 4)
/* Sets the descriptors (each may be -1) and allocates the spool's pending buffer. */
int gw_log_init(struct gw *g, int log_fd, int log_old_fd, int spool_fd);
/*
 * Records a denied or notable attempt: deduplicated (the same detail within 5 s), at most
 * GW_EVENTS_PER_SECOND a second (the rest counted in one "egress-suppressed" note), then written to the
 * log and the spool. The formatted detail is escaped whole when it is not printable UTF-8 on one line
 * (callers escape and cap each sandbox-made string with gw_quote() first, so that is only a backstop) and
 * capped at NET_EVENT_DETAIL_MAX bytes.
 */
void gw_event(struct gw *g, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* An operational line for gateway.log (rate limited like everything else). */
void gw_log(struct gw *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For the main loop: writes pending notes and spool lines; true while something is still pending (poll
 * again within a second). */
bool gw_log_tick(struct gw *g);
/* s escaped (util_escape_text: no control byte, backslashes doubled) and cut to GW_QUOTE_MAX input bytes
 * with "..." marking the cut; returns out (GW_QUOTE_BUF bytes). Inline: the parsers' tests use it too. */
static inline const char *gw_quote(char *out, const char *s)
{
	size_t n = strlen(s), take = n > GW_QUOTE_MAX ? GW_QUOTE_MAX : n;
	util_escape_text(out, GW_QUOTE_BUF, s, take, 0);
	if (take < n)
		strcat(out, "...");
	return out;
}

/* gw_confine.c: after the namespace, the listeners and the CA are in hand, and before serving. */
/*
 * Switches to uid (and gid) uid, a machine-wide unique slot (src/util/uidalloc.h), with no capabilities in
 * any set (bounding and ambient included, securebits locked), not dumpable, no_new_privs, resource limits
 * (file size: GW_LOG_FILE_MAX plus slack, so the kernel caps every file the gateway can write; threads;
 * descriptors; no core files), then installs the seccomp allowlist on every thread. Fails closed.
 */
int gw_confine(struct gw *g, uint32_t uid, char *err, size_t errlen);
/* Number of rules in the gateway's seccomp allowlist (argument-filtered variants counted once each). */
size_t gw_seccomp_rule_count(void);
/* `space-gateway --describe-sandbox`: one JSON object on stdout for `space doctor --verbose`. */
int gw_describe_sandbox(void);

/* gw_main.c */
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
