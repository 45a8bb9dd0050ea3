/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's view of a hostile agent: the input is everything the "agent" says on a connection, played
 * into a socketpair, and every client call must come back with a result (never crash, hang or leak).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/agent_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT (128u << 10)

static int ignore_out(int stream, const void *buf, size_t len, void *userdata)
{
	(void)stream, (void)buf, (void)userdata;
	return (int)(len & 0); /* 0 */
}

static int ignore_dirent(const char *name, const struct agent_stat *st, void *userdata)
{
	(void)name, (void)st, (void)userdata;
	return 0;
}

static int ignore_proc(int pid, const char *const *argv, void *userdata)
{
	(void)pid, (void)argv, (void)userdata;
	return 0;
}

/* A connected socket whose peer has already said data and hung up. Returns our end or -1. */
static int scripted_peer(const uint8_t *data, size_t size, char addr[32])
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	int big = 1 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	size_t off = 0;
	while (off < size) {
		ssize_t n = send(sv[1], data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n <= 0)
			break; /* whatever did not fit is not said */
		off += (size_t)n;
	}
	/* Keep the peer open for reading (our requests land there), closed for writing. */
	shutdown(sv[1], SHUT_WR);
	snprintf(addr, 32, "fd:%d", sv[0]);
	static int peer = -1;
	if (peer >= 0)
		close(peer);
	peer = sv[1];
	return sv[0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int devnull = -1, src = -1;
	if (devnull < 0) {
		signal(SIGPIPE, SIG_IGN);
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
		src = memfd_create("src", MFD_CLOEXEC);
		if (write(src, "hello world\n", 12) != 12)
			return 0;
	}
	if (size > MAX_INPUT)
		size = MAX_INPUT;
	const char *argv[] = { "sh", "-c", "true", NULL };
	struct agent_exec_req req = { .argv = argv, .uid = PROTO_ID_INHERIT, .gid = PROTO_ID_INHERIT };
	struct agent_error err;
	struct agent_exit ex;
	struct agent_info info;
	struct agent_stat st;
	char addr[32];

	/* The first byte picks the call, the rest is what the agent says. */
	if (size < 1)
		return 0;
	int op = data[0] % 10;
	data++, size--;
	{
		int fd = scripted_peer(data, size, addr);
		if (fd < 0)
			return 0;
		switch (op) {
		case 0: agent_hello(addr, 1000, &info, &err); break;
		case 1: agent_exec_run(addr, &req, -1, ignore_out, NULL, &ex, &err); break;
		case 2: {
			struct agent_exec *x = NULL;
			if (agent_exec_start(addr, &req, &x, &err) == 0) {
				agent_exec_write_stdin(x, "in", 2);
				agent_exec_signal(x, 15);
				while (agent_exec_pump(x, ignore_out, NULL, &ex) == 0)
					;
				agent_exec_free(x);
			}
			break;
		}
		case 3: agent_file_read(addr, "/f", devnull, &st, &err); break;
		case 4:
			lseek(src, 0, SEEK_SET);
			agent_file_write(addr, "/f", 0644, true, src, &err);
			break;
		case 5: agent_stat(addr, "/f", true, &st, &err); break;
		case 6: agent_list_dir(addr, "/", ignore_dirent, NULL, &err); break;
		case 7: agent_list_procs(addr, ignore_proc, NULL, &err); break;
		case 8: agent_mkdir(addr, "/d", 0755, true, &err); break;
		case 9: agent_signal_pid(addr, 10, 9, &err); break;
		}
		close(fd);
	}
	return 0;
}
