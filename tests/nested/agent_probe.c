/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usage: agent_probe ADDR TIMEOUT_MS
 * Talks to a space-agent through src/proto's client: HELLO (retried until TIMEOUT_MS), an exec of
 * `uname -r`, a detached `sleep 60` still listed after its connection closed, then SHUTDOWN. Prints
 * "AGENT-HELLO version=V hostname=H", "AGENT-UNAME <release>", "AGENT-DETACH-OK pid=N" and
 * "AGENT-SHUTDOWN-OK"; exits 0 only when all four worked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent_client.h"
#include "util/util.h"

static int find_pid(int pid, const char *const *argv, void *userdata)
{
	(void)argv;
	if (pid == *(int *)userdata)
		*(int *)userdata = -pid; /* found */
	return 0;
}

struct out {
	char buf[256];
	size_t len;
};

static int collect(int stream, const void *buf, size_t len, void *userdata)
{
	struct out *o = userdata;
	if (stream != 1) {
		fwrite(buf, 1, len, stderr);
		return 0;
	}
	size_t n = len < sizeof(o->buf) - 1 - o->len ? len : sizeof(o->buf) - 1 - o->len;
	memcpy(o->buf + o->len, buf, n);
	o->len += n;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: agent_probe ADDR TIMEOUT_MS\n");
		return 2;
	}
	const char *addr = argv[1];
	int timeout = atoi(argv[2]);
	struct agent_info info;
	struct agent_error err = { 0 };
	uint64_t t0 = util_now_ns();
	int r = agent_hello(addr, timeout, &info, &err);
	if (r < 0) {
		fprintf(stderr, "agent_probe: hello: %s (%s)\n", strerror(-r), err.msg);
		return 1;
	}
	printf("AGENT-HELLO version=%s hostname=%s after %.1f s\n", info.version, info.hostname,
	       (double)(util_now_ns() - t0) / 1e9);
	const char *cmd[] = { "uname", "-r", NULL };
	struct agent_exec_req req = { .argv = cmd, .uid = PROTO_ID_INHERIT, .gid = PROTO_ID_INHERIT };
	struct agent_exit ex;
	struct out o = { .len = 0 };
	t0 = util_now_ns();
	r = agent_exec_run(addr, &req, -1, collect, &o, &ex, &err);
	if (r < 0 || !ex.exited || ex.code != 0) {
		fprintf(stderr, "agent_probe: exec uname -r: %s (%s) exited=%d code=%d\n", strerror(-r), err.msg,
			ex.exited, ex.code);
		return 1;
	}
	o.buf[strcspn(o.buf, "\n")] = '\0';
	printf("AGENT-UNAME %s (exec took %.3f s)\n", o.buf, (double)(util_now_ns() - t0) / 1e9);
	/* A detached process outlives the connection that started it. */
	const char *sleeper[] = { "sleep", "60", NULL };
	struct agent_exec_req dreq = { .argv = sleeper, .uid = PROTO_ID_INHERIT, .gid = PROTO_ID_INHERIT, .detach = true };
	struct agent_exec *x = NULL;
	r = agent_exec_start(addr, &dreq, &x, &err);
	if (r < 0) {
		fprintf(stderr, "agent_probe: detached exec: %s (%s)\n", strerror(-r), err.msg);
		return 1;
	}
	int pid = agent_exec_pid(x);
	agent_exec_free(x);
	util_sleep_ms(500);
	int seen = pid;
	r = agent_list_procs(addr, find_pid, &seen, &err);
	if (r < 0 || seen != -pid) {
		fprintf(stderr, "agent_probe: the detached sleep (pid %d) is %s\n", pid, r < 0 ? err.msg : "gone");
		return 1;
	}
	printf("AGENT-DETACH-OK pid=%d\n", pid);
	r = agent_shutdown(addr, &err);
	if (r < 0) {
		fprintf(stderr, "agent_probe: shutdown: %s (%s)\n", strerror(-r), err.msg);
		return 1;
	}
	printf("AGENT-SHUTDOWN-OK\n");
	return 0;
}
