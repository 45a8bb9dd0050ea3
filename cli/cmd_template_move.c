/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space template push NAME HOST` and `space template pull NAME HOST`: a template moved between two hosts
 * of a cluster (docs/cluster.md), asked of a cluster host's API. The CLI only asks: the host it asks
 * (--server, default the local `space serve`) streams the template over the cluster's TLS as
 * POST /v1/templates/NAME/push and /pull do. The API key comes from SPACE_API_KEY or --key-file (never the
 * command line, which other users can read); a unix socket whose server grants the caller's uid needs none.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cluster_store.h"
#include "http_chunked.h"
#include "util/cleanup.h"
#include "util/util.h"

#define ANSWER_MAX (1u << 20) /* the server's answer is a small JSON document */
#define SERVER_DEFAULT "http://127.0.0.1:8080"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

/* A connected socket to "http://HOST[:PORT]" or "unix:/PATH", its Host header value into host; -errno. */
static int server_connect(const char *server, char *host, size_t hostlen)
{
	if (!strncmp(server, "unix:", 5)) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(server + 5) >= sizeof(sa.sun_path) || server[5] != '/')
			return -EINVAL;
		strcpy(sa.sun_path, server + 5);
		snprintf(host, hostlen, "localhost");
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			int e = -errno;
			close(fd);
			return e;
		}
		return fd;
	}
	if (strncmp(server, "http://", 7))
		return -EPROTONOSUPPORT;
	char hp[256], *port = NULL;
	snprintf(hp, sizeof(hp), "%s", server + 7);
	hp[strcspn(hp, "/")] = '\0';
	snprintf(host, hostlen, "%s", hp);
	char *name = hp;
	if (hp[0] == '[') { /* [v6]:port */
		char *end = strchr(hp, ']');
		if (!end)
			return -EINVAL;
		*end = '\0';
		name = hp + 1;
		port = end[1] == ':' ? end + 2 : NULL;
	} else if ((port = strrchr(hp, ':'))) {
		*port++ = '\0';
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL, *a;
	if (!*name || getaddrinfo(name, port && *port ? port : "80", &hints, &ai) != 0)
		return -EHOSTUNREACH;
	int fd = -ECONNREFUSED;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		int e = -errno;
		close(fd);
		fd = e;
	}
	freeaddrinfo(ai);
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The body of a chunked answer, decoded in place; false when it is not well formed or not whole. */
static bool dechunk(char *body, size_t len, size_t *ret_len)
{
	struct http_chunked c = HTTP_CHUNKED_INIT;
	size_t used, made;
	if (http_chunked_feed(&c, body, len, body, len, &used, &made) < 0 || !c.done)
		return false;
	body[made] = '\0';
	*ret_len = made;
	return true;
}

/* One request; the answer's status and JSON body (NULL when it has none or it does not parse). */
static int request(const char *server, const char *key, const char *path, const char *json, unsigned *ret_status,
		   cJSON **ret_body)
{
	char host[256];
	int fd = server_connect(server, host, sizeof(host));
	if (fd < 0)
		return fd;
	_cleanup_free_ char *head = NULL;
	int n = asprintf(&head,
			 "POST %s HTTP/1.1\r\nHost: %s\r\n%s%s%sContent-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 path, host, key ? "X-API-Key: " : "", key ? key : "", key ? "\r\n" : "", strlen(json));
	int e = n < 0 ? -ENOMEM : send_all(fd, head, (size_t)n);
	if (e == 0)
		e = send_all(fd, json, strlen(json));
	_cleanup_free_ char *ans = malloc(ANSWER_MAX + 1);
	size_t len = 0;
	while (e == 0 && ans) {
		ssize_t k = recv(fd, ans + len, ANSWER_MAX - len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			e = -errno;
		if (k <= 0)
			break;
		len += (size_t)k;
		if (len == ANSWER_MAX)
			e = -EMSGSIZE;
	}
	close(fd);
	if (!ans)
		return -ENOMEM;
	if (e < 0)
		return e;
	ans[len] = '\0';
	unsigned st;
	char *body = strstr(ans, "\r\n\r\n");
	if (!body || sscanf(ans, "HTTP/1.%*1[01] %3u", &st) != 1)
		return -EBADMSG;
	*body = '\0';
	body += 4;
	size_t blen = len - (size_t)(body - ans);
	if (strcasestr(ans, "\r\nTransfer-Encoding: chunked") && !dechunk(body, blen, &blen))
		return -EBADMSG;
	*ret_status = st;
	*ret_body = cJSON_ParseWithLength(body, blen);
	return 0;
}

/* The first line of file (an API key), or NULL. */
static char *key_from_file(const char *file)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return NULL;
	char buf[512];
	char *k = fgets(buf, sizeof(buf), f) ? strndup(buf, strcspn(buf, "\r\n")) : NULL;
	fclose(f);
	return k;
}

int cli_template_move(struct cli *cli, const struct cli_command *cmd, int argc, char **argv, bool push)
{
	const char *verb = push ? "push" : "pull", *server = getenv("SPACE_SERVER"), *key_file = NULL;
	const char *pos[2] = { NULL, NULL };
	size_t np = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--server") && i + 1 < argc)
			server = argv[++i];
		else if (!strcmp(argv[i], "--key-file") && i + 1 < argc)
			key_file = argv[++i];
		else if (argv[i][0] == '-' || np == 2)
			return cli_usage_error(cmd, "template %s: unexpected '%s'", verb, argv[i]);
		else
			pos[np++] = argv[i];
	}
	if (np != 2)
		return cli_usage_error(cmd, "template %s needs NAME and HOST", verb);
	if (!util_name_valid(pos[0]))
		return cli_usage_error(cmd, "template %s: bad template name '%s'", verb, pos[0]);
	if (!cluster_name_ok(pos[1]))
		return cli_usage_error(cmd, "template %s: bad host name '%s' (1-63 of a-z, 0-9, -)", verb, pos[1]);
	server = server && *server ? server : SERVER_DEFAULT;
	_cleanup_free_ char *key = NULL;
	if (key_file && !(key = key_from_file(key_file)))
		return cli_error(-errno, "template %s: read the API key from %s: %s", verb, key_file, strerror(errno));
	if (!key && getenv("SPACE_API_KEY") && *getenv("SPACE_API_KEY"))
		key = strdup(getenv("SPACE_API_KEY"));
	if (key && strpbrk(key, "\r\n"))
		return cli_usage_error(cmd, "template %s: the API key holds a line break", verb);
	char path[128], body[128];
	snprintf(path, sizeof(path), "/v1/templates/%s/%s", pos[0], verb);
	snprintf(body, sizeof(body), "{\"%s\": \"%s\"}", push ? "to" : "from", pos[1]);
	if (!cli->json && isatty(STDERR_FILENO))
		fprintf(stderr, "space: %s template %s %s %s through %s...\n", push ? "pushing" : "pulling", pos[0],
			push ? "to" : "from", pos[1], server);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned status = 0;
	_cleanup_(cJSON_Deletep) cJSON *ans = NULL;
	int e = request(server, key, path, body, &status, &ans);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (e < 0)
		return cli_error(e, "template %s: the server %s: %s", verb, server,
				 e == -EBADMSG ? "its answer is not HTTP" : e == -EPROTONOSUPPORT ? "want http://HOST[:PORT] or unix:/PATH"
									    : strerror(-e));
	if (status != 201) {
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(ans, "error");
		const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(err, "message"));
		const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(err, "code"));
		int r = status == 404 ? -ENOENT : status == 401 || status == 403 ? -EACCES : status == 503 ? -EAGAIN : -EIO;
		return cli_error(r, "template %s %s %s: %u %s: %s", verb, pos[0], pos[1], status, code ? code : "",
				 msg ? msg : "(no message)");
	}
	if (cli->json) {
		cJSON *out = ans;
		ans = NULL;
		return cli_print_json(out);
	}
	double bytes = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ans, "bytes"));
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	const char *parent = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "parent"));
	const char *as = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "as"));
	char how[96];
	if (parent)
		snprintf(how, sizeof(how), ", only what differs from %s", parent);
	else
		snprintf(how, sizeof(how), "%s%s", as ? ", as " : "", as ? (!strcmp(as, "image") ? "an image" : "a whole stream") : "");
	if (push)
		printf("pushed template %s to %s: %.1f MiB in %.1f s%s\n", pos[0], pos[1], bytes / 1048576.0, secs, how);
	else
		printf("pulled template %s from %s: %.1f MiB in %.1f s%s\n", pos[0], pos[1], bytes / 1048576.0, secs, how);
	return EXIT_OK;
}
