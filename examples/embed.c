/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Embedding libspace: create a sandbox, run a command with its output streamed to a callback, move a
 * file in and out, destroy the sandbox.
 *
 *   cc embed.c $(pkg-config --cflags --libs libspace) -o embed
 *   ./embed [TEMPLATE [ISOLATION]]        (state directory: $SPACE_STATE_DIR or /var/lib/space)
 */
#include <errno.h>
#include <fcntl.h>
#include <space.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct captured {
	char out[4096];
	size_t len;
};

/* Called as output is produced: stream 1 is stdout, 2 is stderr. */
static int on_output(int stream, const void *data, size_t len, void *userdata)
{
	struct captured *c = userdata;
	fprintf(stderr, "[%s] %.*s", stream == 1 ? "stdout" : "stderr", (int)len, (const char *)data);
	if (stream == 1 && c->len + len < sizeof(c->out)) {
		memcpy(c->out + c->len, data, len);
		c->len += len;
	}
	return 0;
}

static int fail(space_ctx *ctx, const char *what, int r)
{
	const char *detail = space_ctx_last_error(ctx);
	fprintf(stderr, "embed: %s: %s\n", what, detail && *detail ? detail : space_strerror(r));
	return 1;
}

int main(int argc, char **argv)
{
	space_ctx *ctx;
	int r = space_ctx_new(NULL, &ctx);
	if (r < 0) {
		fprintf(stderr, "embed: %s\n", space_strerror(r));
		return 1;
	}

	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	so.template_name = argc > 1 ? argv[1] : "base";
	so.isolation = argc > 2 ? argv[2] : NULL;
	const char *env[] = { "GREETING=hello from the sandbox", NULL };
	so.env = env;
	space_sandbox *sb;
	r = space_sandbox_create(ctx, &so, &sb);
	if (r < 0)
		return fail(ctx, "create", r);
	printf("sandbox %s created\n", space_sandbox_id(sb));

	int status = 1;
	struct captured cap = { .len = 0 };
	const char *cmd[] = { "sh", "-c", "echo \"$GREETING\"; echo to-stderr >&2; exit 5", NULL };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = cmd;
	eo.output = on_output;
	eo.userdata = &cap;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	r = space_sandbox_exec(sb, &eo, &res);
	if (r < 0) {
		fail(ctx, "exec", r);
		goto out;
	}
	printf("exit code %d, stdout: %.*s", res.exit_code, (int)cap.len, cap.out);
	if (!res.exited || res.exit_code != 5 || strcmp(cap.out, "hello from the sandbox\n") != 0) {
		fprintf(stderr, "embed: unexpected result\n");
		goto out;
	}

	/* A file in and back out, through pipes (any fd works: files, sockets). */
	int in[2], back[2];
	if (pipe(in) < 0 || pipe(back) < 0)
		goto out;
	const char text[] = "written by the host\n";
	if (write(in[1], text, sizeof(text) - 1) != (ssize_t)(sizeof(text) - 1))
		goto out;
	close(in[1]);
	r = space_sandbox_write_file(sb, "/root/notes/hello.txt", in[0], 0644);
	close(in[0]);
	if (r < 0) {
		fail(ctx, "write file", r);
		goto out;
	}
	r = space_sandbox_read_file(sb, "/root/notes/hello.txt", back[1]);
	close(back[1]);
	if (r < 0) {
		fail(ctx, "read file", r);
		goto out;
	}
	char buf[256] = "";
	ssize_t n = read(back[0], buf, sizeof(buf) - 1);
	close(back[0]);
	if (n != (ssize_t)(sizeof(text) - 1) || memcmp(buf, text, (size_t)n) != 0) {
		fprintf(stderr, "embed: file came back different: %s\n", buf);
		goto out;
	}
	struct space_file_stat st = SPACE_FILE_STAT_INIT;
	r = space_sandbox_stat(sb, "/root/notes/hello.txt", &st);
	if (r < 0 || st.file_size != sizeof(text) - 1) {
		fail(ctx, "stat", r);
		goto out;
	}
	printf("file round trip ok (%llu bytes)\n", (unsigned long long)st.file_size);
	status = 0;
out:
	r = space_sandbox_destroy(sb);
	if (r < 0) {
		fail(ctx, "destroy", r);
		status = 1;
	}
	space_sandbox_free(sb);
	space_ctx_free(ctx);
	return status;
}
