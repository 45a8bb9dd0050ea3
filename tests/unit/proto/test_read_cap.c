/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cap of a file read against an agent that lies (src/proto/agent_client.c agent_file_read_opts): a
 * size over the cap is refused before any byte lands; a stream that passes the cap after announcing a
 * small size is cut with at most the cap written; an honest stream under the cap arrives whole (holes
 * and all); the plain agent_file_read has the default cap. The "agent" is a thread on a socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/agent_client.h"
#include "proto/proto.h"
#include "../../check.h"


struct liar {
	int fd;
	uint64_t announced;  /* the size in STAT_REPLY */
	uint64_t streamed;   /* the bytes it then sends: 'd' every 8 KiB, zeros between */
};

static int send_buf(int fd, struct proto_buf *b)
{
	while (proto_buf_pending(b) > 0) {
		ssize_t n = send(fd, b->data + b->head, proto_buf_pending(b), MSG_NOSIGNAL);
		if (n <= 0)
			return -1; /* the client hung up: a liar stops there too */
		proto_buf_consume(b, (size_t)n);
	}
	return 0;
}

static void *liar_thread(void *arg)
{
	struct liar *l = arg;
	struct proto_buf b = { 0 };
	struct proto_hello h = { .magic = PROTO_MAGIC, .major = PROTO_VERSION_MAJOR, .minor = PROTO_VERSION_MINOR,
				 .max_payload = PROTO_MAX_PAYLOAD };
	snprintf(h.version, sizeof(h.version), "liar");
	struct proto_stat st = { .mode = 0100644, .size = l->announced };
	proto_put_hello(&b, &h);
	proto_put_stat(&b, PROTO_STAT_REPLY, &st);
	int ok = send_buf(l->fd, &b);
	static unsigned char chunk[PROTO_CHUNK];
	for (size_t i = 0; i < sizeof(chunk); i += 8192)
		chunk[i] = 'd';
	for (uint64_t sent = 0; ok == 0 && sent < l->streamed;) {
		size_t n = l->streamed - sent < sizeof(chunk) ? (size_t)(l->streamed - sent) : sizeof(chunk);
		proto_put_bytes(&b, PROTO_DATA, chunk, n);
		ok = send_buf(l->fd, &b);
		sent += n;
	}
	if (ok == 0) {
		proto_put_empty(&b, PROTO_END);
		send_buf(l->fd, &b);
	}
	proto_buf_free(&b);
	/* Like an agent, read the client's requests until it hangs up (closing first would fail its send). */
	shutdown(l->fd, SHUT_WR);
	char sink[4096];
	while (read(l->fd, sink, sizeof(sink)) > 0) {
	}
	close(l->fd);
	return NULL;
}

/* Runs one read against a liar into a new file; returns its result, the file's size in *ret_size. */
static int read_from_liar(uint64_t announced, uint64_t streamed, uint64_t max, bool plain, struct agent_stat *st,
			  struct agent_error *err, off_t *ret_size)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	struct liar l = { .fd = sv[1], .announced = announced, .streamed = streamed };
	pthread_t t;
	pthread_create(&t, NULL, liar_thread, &l);
	char addr[32], path[] = "/tmp/space-read-cap-XXXXXX";
	snprintf(addr, sizeof(addr), "fd:%d", sv[0]);
	int dst = mkostemp(path, O_CLOEXEC);
	unlink(path);
	struct agent_read_opts o = { .max_bytes = max };
	int r = plain ? agent_file_read(addr, "/f", dst, st, err) : agent_file_read_opts(addr, "/f", dst, &o, st, err);
	/* The client worked on a dup: our end goes now, so a liar still sending sees the hang-up. */
	close(sv[0]);
	pthread_join(t, NULL);
	struct stat fs;
	*ret_size = fstat(dst, &fs) == 0 ? fs.st_size : -1;
	close(dst);
	return r;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct agent_stat st;
	struct agent_error err;
	off_t size;

	/* An announced size over the cap: refused before any byte, even though the stream would be short. */
	int r = read_from_liar(1ull << 40, 4096, 1ull << 30, false, &st, &err, &size);
	CHECK(r == -EFBIG);
	CHECK(size == 0);
	CHECK(strstr(err.msg, "larger than the copy limit of 1.0 GiB") && strstr(err.msg, "1.0 TiB"));

	/* A small announced size, then more than the cap: cut, at most the cap written. */
	r = read_from_liar(10, 4u << 20, 256u << 10, false, &st, &err, &size);
	CHECK(r == -EFBIG);
	CHECK(size >= 0 && size <= (off_t)(256u << 10));
	CHECK(strstr(err.msg, "larger than the copy limit of 256.0 KiB") && strstr(err.msg, "sent more"));

	/* Exactly the cap is fine; the size reported is what was streamed, not what was announced. */
	r = read_from_liar(10, 256u << 10, 256u << 10, false, &st, &err, &size);
	CHECK(r == 0);
	CHECK(size == (off_t)(256u << 10) && st.size == (256u << 10));

	/* An honest stream with a trailing partial zero run: whole. */
	r = read_from_liar(100000, 100000, 1u << 20, false, &st, &err, &size);
	CHECK(r == 0 && size == 100000 && st.size == 100000);

	/* agent_file_read has the default cap. */
	r = read_from_liar(AGENT_READ_MAX_DEFAULT + 1, 0, 0, true, &st, &err, &size);
	CHECK(r == -EFBIG && size == 0);

	return check_summary("read-cap");
}
