/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS between the hosts of a cluster (`space serve --cluster-tls DIR`, docs/cluster.md): TLS 1.3 only,
 * both sides show a certificate the cluster's CA signed (`space cluster ca` / `space cluster cert`), and
 * a certificate names its host (its CN).
 *
 * Listening: each accepted connection is handshaken on a thread of its own (10 s at most); one whose client
 * certificate holds becomes a plain connection of the cluster's MHD daemon through a socket pair, its
 * client address naming the host ("space-cluster:NAME", read back by cluster_tls_conn_peer), and the thread
 * then relays bytes between the pair and TLS until either side ends. Connecting is the mirror image: the
 * forwarding code gets the plain end of a pair. No other code touches TLS.
 *
 * Kept connections: a forwarded request's connection whose answer was read whole comes back to a small
 * pool (cluster_tls_give) and serves the next request to that host (cluster_tls_take) if it is taken
 * within TLS_POOL_IDLE_MS (the far side keeps an idle connection 60 s) and nothing came on it meanwhile
 * (a host that restarted closed it). The TLS sockets probe an idle peer (TCP keepalive) and give up on
 * bytes unacknowledged for TLS_USER_TIMEOUT_MS: a host that vanished ends its connections, in use or kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "serve.h"
#include "cluster_store.h"
#include "util/util.h"

#define TLS_HANDSHAKE_TIMEOUT_MS 10000
#define TLS_CONNECT_TIMEOUT_MS 3000
#define TLS_PEER_PREFIX "space-cluster:"
#define TLS_POOL_MAX 16               /* kept connections, all hosts together */
#define TLS_POOL_IDLE_MS 5000
#define TLS_USER_TIMEOUT_MS 10000

struct kept {
	int fd;
	char peer[CLUSTER_NAME_MAX];
	uint64_t since_ns;
};

struct cluster_tls {
	SSL_CTX *server, *client;
	char host[CLUSTER_NAME_MAX];
	int listen_fd;
	struct MHD_Daemon *daemon;
	pthread_t acceptor;
	bool accepting;
	atomic_bool stop;
	atomic_int handshakes;        /* accepted connections not yet handed to the daemon (or dropped) */
	pthread_mutex_t pool_lock;
	struct kept pool[TLS_POOL_MAX];
	unsigned n_pool;
};

static void ssl_err(char *err, size_t n, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";
	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, n, "%s%s%s", what, *buf ? ": " : "", buf);
	ERR_clear_error();
}

/* The CN of a certificate into name; false when it has none or it is not a host name. */
static bool cert_host(X509 *cert, char name[CLUSTER_NAME_MAX])
{
	if (!cert)
		return false;
	int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, CLUSTER_NAME_MAX);
	return n > 0 && n < CLUSTER_NAME_MAX && cluster_name_ok(name);
}

static SSL_CTX *ctx_new(const char *dir, bool server, char *err, size_t n)
{
	char ca[4200], crt[4200], key[4200];
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(crt, sizeof(crt), "%s/host.pem", dir);
	snprintf(key, sizeof(key), "%s/host.key", dir);
	SSL_CTX *c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!c) {
		ssl_err(err, n, "TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (server)
		SSL_CTX_set_num_tickets(c, 0); /* no resumption: every connection shows its certificate */
	if (SSL_CTX_load_verify_locations(c, ca, NULL) != 1) {
		ssl_err(err, n, ca);
	} else if (SSL_CTX_use_certificate_file(c, crt, SSL_FILETYPE_PEM) != 1) {
		ssl_err(err, n, crt);
	} else if (SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(c) != 1) {
		ssl_err(err, n, key);
	} else {
		return c;
	}
	SSL_CTX_free(c);
	return NULL;
}

int cluster_tls_load(const char *dir, const char *host, struct cluster_tls **ret, char *err, size_t errlen)
{
	struct cluster_tls *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->listen_fd = -1;
	pthread_mutex_init(&t->pool_lock, NULL);
	snprintf(t->host, sizeof(t->host), "%s", host);
	t->server = ctx_new(dir, true, err, errlen);
	t->client = t->server ? ctx_new(dir, false, err, errlen) : NULL;
	if (!t->client) {
		cluster_tls_free(t);
		return -EINVAL;
	}
	/* Our own certificate must name this host and hold against the CA, or no peer will take it. */
	X509 *own = SSL_CTX_get0_certificate(t->server);
	char cn[CLUSTER_NAME_MAX];
	X509_STORE_CTX *vs = X509_STORE_CTX_new();
	bool ok = vs && X509_STORE_CTX_init(vs, SSL_CTX_get_cert_store(t->server), own, NULL) == 1 &&
		  X509_verify_cert(vs) == 1;
	X509_STORE_CTX_free(vs);
	if (!cert_host(own, cn) || strcmp(cn, host)) {
		snprintf(err, errlen, "%s/host.pem names host '%s', not '%s'", dir, cert_host(own, cn) ? cn : "?", host);
		cluster_tls_free(t);
		return -EINVAL;
	}
	if (!ok) {
		snprintf(err, errlen, "%s/host.pem is not signed by %s/ca.pem (or has expired)", dir, dir);
		cluster_tls_free(t);
		return -EINVAL;
	}
	*ret = t;
	return 0;
}

void cluster_tls_free(struct cluster_tls *t)
{
	if (!t)
		return;
	cluster_tls_stop(t);
	for (unsigned i = 0; i < t->n_pool; i++)
		close(t->pool[i].fd);
	pthread_mutex_destroy(&t->pool_lock);
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->client);
	free(t);
}

/* --- the relay between a plain socket and TLS ------------------------------------------------------------ */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Until either side ends. The TLS socket is non-blocking: a record that is not complete, or a message that
 * carries no data, never holds the other direction. */
static void relay(SSL *ssl, int tls_fd, int plain)
{
	char in[16384], out[16384];
	size_t out_len = 0, out_off = 0;
	bool want_write = false;
	fcntl(tls_fd, F_SETFL, fcntl(tls_fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		if (!SSL_pending(ssl)) {
			struct pollfd p[2] = { { .fd = tls_fd, .events = POLLIN | (want_write ? POLLOUT : 0) },
					       { .fd = plain, .events = out_len ? 0 : POLLIN } };
			if (poll(p, 2, -1) < 0 && errno != EINTR)
				return;
			if (!out_len && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
				ssize_t m = recv(plain, out, sizeof(out), 0);
				if (m <= 0)
					return; /* the plain side ended */
				out_len = (size_t)m;
				out_off = 0;
			}
		}
		int n = SSL_read(ssl, in, sizeof(in));
		if (n > 0) {
			if (write_all(plain, in, (size_t)n) < 0)
				return;
		} else {
			int e = SSL_get_error(ssl, n);
			if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
				return; /* the TLS side ended (close_notify, EOF, error) */
		}
		want_write = false;
		while (out_len) {
			int k = SSL_write(ssl, out + out_off, (int)out_len);
			if (k > 0) {
				out_off += (size_t)k;
				out_len -= (size_t)k;
				continue;
			}
			int e = SSL_get_error(ssl, k);
			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
				want_write = true;
				break;
			}
			return;
		}
	}
}

/* Requests and answers are written in pieces (a head, then a body): no waiting for an ACK between them. */
static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A peer that vanished ends the connection: probes after 5 s of silence (3, 2 s apart), and bytes
 * unacknowledged for TLS_USER_TIMEOUT_MS. */
static void peer_watch(int fd)
{
	int one = 1, idle = 5, intvl = 2, cnt = 3, user = TLS_USER_TIMEOUT_MS;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
}

/* Handshake on a blocking socket with a deadline (SO_RCVTIMEO/SO_SNDTIMEO). */
static void timeouts(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* --- listening ------------------------------------------------------------------------------------------- */

struct accepted {
	struct cluster_tls *t;
	int fd;
	struct sockaddr_storage addr;
};

static void *accepted_main(void *arg)
{
	struct accepted *a = arg;
	SSL *ssl = SSL_new(a->t->server);
	int pair[2] = { -1, -1 };
	char peer[CLUSTER_NAME_MAX] = "";
	bool handed = false;
	nodelay(a->fd);
	peer_watch(a->fd);
	timeouts(a->fd, TLS_HANDSHAKE_TIMEOUT_MS);
	if (!ssl || SSL_set_fd(ssl, a->fd) != 1 || SSL_accept(ssl) != 1) {
		ERR_clear_error();
		goto out;
	}
	X509 *cert = SSL_get1_peer_certificate(ssl);
	bool named = cert_host(cert, peer);
	X509_free(cert);
	if (!named || SSL_get_verify_result(ssl) != X509_V_OK) {
		char ip[64] = "?";
		getnameinfo((struct sockaddr *)&a->addr, sizeof(a->addr), ip, sizeof(ip), NULL, 0, NI_NUMERICHOST);
		fprintf(stderr, "space serve: cluster: a TLS connection from %s shows no host certificate of the cluster: "
				"closed\n", ip);
		goto out;
	}
	timeouts(a->fd, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
		goto out;
	/* The daemon takes pair[1] (and closes it in any case); its client address names the host. */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), TLS_PEER_PREFIX "%s", peer);
	int theirs = pair[1];
	pair[1] = -1;
	bool added = MHD_add_connection(a->t->daemon, theirs, (const struct sockaddr *)&sa, sizeof(sa)) == MHD_YES;
	atomic_fetch_sub(&a->t->handshakes, 1); /* the daemon is not touched again */
	handed = true;
	if (added) {
		relay(ssl, a->fd, pair[0]);
		SSL_shutdown(ssl);
	}
out:
	if (!handed)
		atomic_fetch_sub(&a->t->handshakes, 1);
	SSL_free(ssl);
	close(a->fd);
	if (pair[0] >= 0)
		close(pair[0]);
	if (pair[1] >= 0)
		close(pair[1]);
	free(a);
	return NULL;
}

static void *acceptor_main(void *arg)
{
	struct cluster_tls *t = arg;
	while (!atomic_load(&t->stop)) {
		struct pollfd p = { .fd = t->listen_fd, .events = POLLIN };
		if (poll(&p, 1, 500) <= 0)
			continue;
		struct accepted *a = calloc(1, sizeof(*a));
		if (!a)
			continue;
		socklen_t len = sizeof(a->addr);
		a->t = t;
		a->fd = accept4(t->listen_fd, (struct sockaddr *)&a->addr, &len, SOCK_CLOEXEC);
		if (a->fd < 0) {
			free(a);
			continue;
		}
		pthread_t th;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		atomic_fetch_add(&t->handshakes, 1);
		if (pthread_create(&th, &attr, accepted_main, a) != 0) {
			atomic_fetch_sub(&t->handshakes, 1);
			close(a->fd);
			free(a);
		}
		pthread_attr_destroy(&attr);
	}
	return NULL;
}

int cluster_tls_listen(struct cluster_tls *t, const struct sockaddr_in *sa, struct MHD_Daemon *d, char *err,
		       size_t errlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = -errno;
		snprintf(err, errlen, "listen for the cluster's TLS: %s", strerror(-e));
		if (fd >= 0)
			close(fd);
		return e;
	}
	t->listen_fd = fd;
	t->daemon = d;
	if (pthread_create(&t->acceptor, NULL, acceptor_main, t) != 0) {
		snprintf(err, errlen, "cannot start the cluster's TLS listener");
		close(fd);
		t->listen_fd = -1;
		return -EAGAIN;
	}
	t->accepting = true;
	return 0;
}

void cluster_tls_stop(struct cluster_tls *t)
{
	if (!t || !t->accepting)
		return;
	atomic_store(&t->stop, true);
	pthread_join(t->acceptor, NULL);
	t->accepting = false;
	close(t->listen_fd);
	t->listen_fd = -1;
	/* A handshake under way still hands its connection to the daemon: the daemon stops after it (the
	 * handshake's deadline bounds the wait). */
	while (atomic_load(&t->handshakes) > 0)
		usleep(10000);
}

bool cluster_tls_conn_peer(struct MHD_Connection *conn, char name[CLUSTER_NAME_MAX])
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr || ci->client_addr->sa_family != AF_UNIX)
		return false;
	const struct sockaddr_un *sa = (const struct sockaddr_un *)ci->client_addr;
	size_t pl = strlen(TLS_PEER_PREFIX);
	if (strncmp(sa->sun_path, TLS_PEER_PREFIX, pl))
		return false;
	snprintf(name, CLUSTER_NAME_MAX, "%s", sa->sun_path + pl);
	return cluster_name_ok(name);
}

/* --- connecting ------------------------------------------------------------------------------------------ */

struct outgoing {
	SSL *ssl;
	int fd, plain;
};

static void *outgoing_main(void *arg)
{
	struct outgoing *o = arg;
	relay(o->ssl, o->fd, o->plain);
	SSL_shutdown(o->ssl);
	SSL_free(o->ssl);
	close(o->fd);
	close(o->plain);
	free(o);
	return NULL;
}

/* A TCP connection to HOST:PORT of an https:// URL within the timeout, blocking; or -errno. */
static int tcp_connect(const char *url)
{
	if (strncmp(url, "https://", 8))
		return -EPROTONOSUPPORT;
	char host[CLUSTER_URL_MAX];
	snprintf(host, sizeof(host), "%s", url + 8);
	host[strcspn(host, "/")] = '\0';
	char *colon = strrchr(host, ':');
	const char *port = "443";
	if (colon) {
		*colon = '\0';
		port = colon + 1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
		return -EHOSTUNREACH;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int e = fd < 0 ? -errno : 0;
	if (e == 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
		e = -errno;
	freeaddrinfo(ai);
	if (e == 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int n = poll(&p, 1, TLS_CONNECT_TIMEOUT_MS);
		int soe = 0;
		socklen_t sl = sizeof(soe);
		if (n == 0)
			e = -ETIMEDOUT;
		else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soe, &sl) < 0)
			e = -errno;
		else if (soe)
			e = -soe;
	}
	if (e == 0 && fcntl(fd, F_SETFL, 0) < 0)
		e = -errno;
	if (e < 0) {
		if (fd >= 0)
			close(fd);
		return e;
	}
	return fd;
}

int cluster_tls_connect(struct cluster_tls *t, const char *url, const char *peer)
{
	int fd = tcp_connect(url);
	if (fd < 0)
		return fd;
	nodelay(fd);
	peer_watch(fd);
	timeouts(fd, TLS_HANDSHAKE_TIMEOUT_MS);
	SSL *ssl = SSL_new(t->client);
	char cn[CLUSTER_NAME_MAX];
	int e = -ECONNREFUSED;
	if (ssl && SSL_set_fd(ssl, fd) == 1 && SSL_connect(ssl) == 1) {
		X509 *cert = SSL_get1_peer_certificate(ssl);
		/* The host at that URL must be the one the cluster store says owns the sandbox. */
		e = SSL_get_verify_result(ssl) == X509_V_OK && cert_host(cert, cn) && !strcmp(cn, peer) ? 0 : -EPERM;
		X509_free(cert);
	}
	ERR_clear_error();
	int pair[2];
	if (e == 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
		e = -errno;
	struct outgoing *o = e == 0 ? malloc(sizeof(*o)) : NULL;
	if (e == 0 && !o) {
		close(pair[0]);
		close(pair[1]);
		e = -ENOMEM;
	}
	if (e < 0) {
		SSL_free(ssl);
		close(fd);
		return e;
	}
	timeouts(fd, 0);
	*o = (struct outgoing){ .ssl = ssl, .fd = fd, .plain = pair[1] };
	pthread_t th;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, outgoing_main, o) != 0) {
		pthread_attr_destroy(&attr);
		SSL_free(ssl);
		close(fd);
		close(pair[0]);
		close(pair[1]);
		free(o);
		return -EAGAIN;
	}
	pthread_attr_destroy(&attr);
	return pair[0];
}

/* --- kept connections ------------------------------------------------------------------------------------ */

int cluster_tls_take(struct cluster_tls *t, const char *url, const char *peer)
{
	for (;;) {
		struct kept k = { .fd = -1 };
		pthread_mutex_lock(&t->pool_lock);
		for (unsigned i = t->n_pool; i-- > 0;) { /* the newest first */
			if (strcmp(t->pool[i].peer, peer))
				continue;
			k = t->pool[i];
			memmove(t->pool + i, t->pool + i + 1, (t->n_pool - i - 1) * sizeof(t->pool[0]));
			t->n_pool--;
			break;
		}
		pthread_mutex_unlock(&t->pool_lock);
		if (k.fd < 0)
			return cluster_tls_connect(t, url, peer);
		/* Idle too long, or closed (or spoken on) by the far side meanwhile: not used again. */
		struct pollfd p = { .fd = k.fd, .events = POLLIN | POLLRDHUP };
		if (util_now_ns() - k.since_ns < TLS_POOL_IDLE_MS * 1000000ull && poll(&p, 1, 0) == 0)
			return k.fd;
		close(k.fd);
	}
}

void cluster_tls_give(void *arg, const char *peer, int fd)
{
	struct cluster_tls *t = arg;
	struct kept k = { .fd = fd };
	snprintf(k.peer, sizeof(k.peer), "%s", peer);
	k.since_ns = util_now_ns();
	int old = -1;
	pthread_mutex_lock(&t->pool_lock);
	if (t->n_pool == TLS_POOL_MAX) { /* full: the oldest goes */
		old = t->pool[0].fd;
		memmove(t->pool, t->pool + 1, (TLS_POOL_MAX - 1) * sizeof(t->pool[0]));
		t->n_pool--;
	}
	t->pool[t->n_pool++] = k;
	pthread_mutex_unlock(&t->pool_lock);
	if (old >= 0)
		close(old);
}
