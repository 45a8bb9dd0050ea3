/* SPDX-License-Identifier: Apache-2.0 */
/* `space port ID PORT`: a local TCP port forwarded to a port a sandbox listens on, through its agent. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "relay.h"

/* "PORT" (1..65535, or 0 when zero_ok) into *ret; -1 when it is not one. */
static int parse_port(const char *s, bool zero_ok, uint16_t *ret)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || v > 65535 || (v == 0 && !zero_ok))
		return -1;
	*ret = (uint16_t)v;
	return 0;
}

/* Listens on "ADDR:PORT" ("[V6]:PORT" for IPv6; PORT 0: an ephemeral one); fills where in `where`. */
static int listen_on(const char *spec, char *where, size_t len)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	uint16_t port;
	if (!colon || (size_t)(colon - spec) >= sizeof(host) || parse_port(colon + 1, true, &port) < 0)
		return -EINVAL;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		host[strlen(host) - 1] = '\0';
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return -EINVAL;
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -EINVAL;
		sl = sizeof(*s4);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	char a[INET6_ADDRSTRLEN];
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
		snprintf(where, len, "[%s]:%u", inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a)), ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		snprintf(where, len, "%s:%u", inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a)), ntohs(s4->sin_port));
	}
	return fd;
}

int cmd_port(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("port");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	const char *listen_spec = NULL, *pos[2];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc)
			listen_spec = argv[++i];
		else if (argv[i][0] == '-')
			return cli_usage_error(cmd, "unknown option %s", argv[i]);
		else if (npos < 2)
			pos[npos++] = argv[i];
		else
			return cli_usage_error(cmd, "too many arguments");
	}
	uint16_t port;
	if (npos != 2)
		return cli_usage_error(cmd, "port needs a sandbox ID and a port");
	if (parse_port(pos[1], false, &port) < 0)
		return cli_usage_error(cmd, "PORT must be 1..65535, not '%s'", pos[1]);
	space_sandbox *sb;
	int r = space_sandbox_open(cli_ctx(cli), pos[0], &sb);
	if (r < 0)
		return cli_fail(cli, r, "open sandbox %s", pos[0]);
	char where[96], spec[32];
	int l;
	if (listen_spec) {
		l = listen_on(listen_spec, where, sizeof(where));
	} else {
		/* The same port on this host's loopback when it is free, else one the kernel picks. */
		snprintf(spec, sizeof(spec), "127.0.0.1:%u", port);
		l = listen_on(spec, where, sizeof(where));
		if (l < 0)
			l = listen_on("127.0.0.1:0", where, sizeof(where));
	}
	if (l < 0) {
		space_sandbox_free(sb);
		if (l == -EINVAL)
			return cli_usage_error(cmd, "--listen takes ADDR:PORT ([ADDR]:PORT for IPv6), not '%s'", listen_spec);
		return cli_fail_detail(l, strerror(-l), "listen on %s", listen_spec ? listen_spec : spec);
	}
	if (cli->json)
		printf("{\"listen\": \"%s\", \"port\": %u}\n", where, port);
	else
		printf("forwarding %s to port %u of sandbox %s (Ctrl-C stops)\n", where, port, space_sandbox_id(sb));
	fflush(stdout);
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
				if (errno == EMFILE || errno == ENFILE)
					usleep(100000);
				continue;
			}
			r = -errno;
			close(l);
			space_sandbox_free(sb);
			return cli_fail_detail(r, strerror(-r), "accept on %s", where);
		}
		/* Each connection its own through the agent; the sandbox's answer is awaited here, briefly. */
		int s = -1;
		r = space_sandbox_port_connect(sb, port, &s);
		if (r < 0) {
			fprintf(stderr, "space: port %u of sandbox %s: %s\n", port, space_sandbox_id(sb),
				space_last_error(cli_ctx(cli))[0] ? space_last_error(cli_ctx(cli)) : space_strerror(r));
			close(c);
			if (r == -ESRCH || r == -ENOENT)
				break; /* the sandbox is gone */
			continue;
		}
		if (cli_relay_detached(c, s) < 0)
			fprintf(stderr, "space: no thread for a connection\n");
	}
	close(l);
	int rc = cli_fail(cli, r, "port %u of sandbox %s", port, pos[0]);
	space_sandbox_free(sb);
	return rc;
}
