/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS in the gateway: the per-installation CA (<state>/gateway/ca.key, mode 0600, never leaves the host;
 * ca.crt is what sandboxes trust), leaf certificates minted per host name on first use, the client
 * context that re-originates TLS with full verification, and the ClientHello SNI parser.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "net/gw.h"
#include "util/cleanup.h"
#include "util/x509.h"

/* Loads the CA, creating it the first time (under a lock: several gateways may start at once). */
static int ca_load(struct gw *g, char *err, size_t len)
{
	char dir[4096], keyp[4200], crtp[4200], lockp[4200];
	snprintf(dir, sizeof(dir), "%s/gateway", g->state_dir);
	snprintf(keyp, sizeof(keyp), "%s/ca.key", dir);
	snprintf(crtp, sizeof(crtp), "%s/ca.crt", dir);
	snprintf(lockp, sizeof(lockp), "%s/ca.lock", dir);
	mkdir(dir, 0700);
	_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		snprintf(err, len, "lock %s: %s", lockp, strerror(errno));
		return -errno;
	}
	FILE *fk = fopen(keyp, "re"), *fc = fopen(crtp, "re");
	if (fk && fc) {
		g->ca_key = PEM_read_PrivateKey(fk, NULL, NULL, NULL);
		g->ca_cert = PEM_read_X509(fc, NULL, NULL, NULL);
	}
	if (fk)
		fclose(fk);
	if (fc)
		fclose(fc);
	if (g->ca_key && g->ca_cert)
		return 0;
	EVP_PKEY_free(g->ca_key);
	X509_free(g->ca_cert);
	g->ca_key = util_x509_key_new();
	g->ca_cert = g->ca_key ? util_x509_cert_new("libspace egress gateway CA", g->ca_key, NULL, NULL, 3650, NULL) : NULL;
	int r = g->ca_cert ? util_x509_write_pem(keyp, 0600, g->ca_key, NULL) : -ENOMEM;
	if (r == 0)
		r = util_x509_write_pem(crtp, 0644, NULL, g->ca_cert);
	if (r < 0)
		snprintf(err, len, "create the gateway CA in %s: %s", dir, strerror(-r));
	return r;
}

int gw_tls_init(struct gw *g, const char *ca_file, char *err, size_t len)
{
	int r = ca_load(g, err, len);
	if (r < 0)
		return r;
	g->leaf_key = util_x509_key_new();
	g->upstream = SSL_CTX_new(TLS_client_method());
	if (!g->leaf_key || !g->upstream) {
		snprintf(err, len, "TLS: out of memory");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(g->upstream, TLS1_2_VERSION);
	SSL_CTX_set_verify(g->upstream, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_default_verify_paths(g->upstream);
	if (ca_file && !SSL_CTX_load_verify_locations(g->upstream, ca_file, NULL)) {
		snprintf(err, len, "ca_file %s: cannot load it", ca_file);
		return -EINVAL;
	}
	return 0;
}

SSL_CTX *gw_tls_leaf(struct gw *g, const char *name)
{
	SSL_CTX *ctx = NULL;
	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < g->n_leaves && !ctx; i++)
		if (!strcmp(g->leaves[i].name, name))
			ctx = g->leaves[i].ctx;
	if (!ctx) {
		X509 *cert = util_x509_cert_new(name, g->leaf_key, g->ca_cert, g->ca_key, 30, "serverAuth");
		ctx = cert ? SSL_CTX_new(TLS_server_method()) : NULL;
		if (ctx && (!SSL_CTX_use_certificate(ctx, cert) || !SSL_CTX_use_PrivateKey(ctx, g->leaf_key) ||
			    !SSL_CTX_add1_chain_cert(ctx, g->ca_cert))) {
			SSL_CTX_free(ctx);
			ctx = NULL;
		}
		X509_free(cert);
		if (ctx) {
			/* A small cache: past its size the oldest entry is replaced (in-flight users hold a ref). */
			size_t slot = g->n_leaves < ARRAY_SIZE(g->leaves) ? g->n_leaves++ : 0;
			SSL_CTX_free(g->leaves[slot].ctx);
			snprintf(g->leaves[slot].name, sizeof(g->leaves[slot].name), "%s", name);
			g->leaves[slot].ctx = ctx;
		}
	}
	if (ctx)
		SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&g->lock);
	return ctx;
}

/* ---- ClientHello ----------------------------------------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t left;
};

static bool take(struct rd *r, size_t n, const uint8_t **ret)
{
	if (r->left < n)
		return false;
	if (ret)
		*ret = r->p;
	r->p += n;
	r->left -= n;
	return true;
}

static bool take_len(struct rd *r, size_t width, size_t *ret)
{
	const uint8_t *b;
	if (!take(r, width, &b))
		return false;
	size_t v = 0;
	for (size_t i = 0; i < width; i++)
		v = v << 8 | b[i];
	*ret = v;
	return true;
}

/* Enters a length-prefixed block: sub covers it, r moves past it. */
static bool block(struct rd *r, size_t width, struct rd *sub)
{
	size_t n;
	if (!take_len(r, width, &n) || !take(r, n, &sub->p))
		return false;
	sub->left = n;
	return true;
}

bool gw_tls_sni(const uint8_t *buf, size_t len, char *out, size_t out_len)
{
	struct rd r = { buf, len }, rec, hs, v, exts;
	const uint8_t *b;
	size_t type;
	if (!take_len(&r, 1, &type) || type != 0x16 || !take(&r, 2, NULL) || !block(&r, 2, &rec))
		return false;
	if (!take_len(&rec, 1, &type) || type != 1 || !block(&rec, 3, &hs))
		return false;
	if (!take(&hs, 2 + 32, NULL) || !block(&hs, 1, &v) || !block(&hs, 2, &v) || !block(&hs, 1, &v) ||
	    !block(&hs, 2, &exts))
		return false;
	while (exts.left) {
		size_t et;
		struct rd ext, list, name;
		if (!take_len(&exts, 2, &et) || !block(&exts, 2, &ext))
			return false;
		if (et != 0)
			continue;
		if (!block(&ext, 2, &list) || !take_len(&list, 1, &type) || type != 0 || !block(&list, 2, &name))
			return false;
		if (name.left == 0 || name.left >= out_len || !take(&name, name.left, &b))
			return false;
		size_t n = (size_t)(name.p - b);
		for (size_t i = 0; i < n; i++) {
			if (b[i] == 0)
				return false;
			out[i] = (char)((b[i] >= 'A' && b[i] <= 'Z') ? b[i] + 32 : b[i]);
		}
		out[n] = '\0';
		return true;
	}
	return false;
}
