/* The public header compiles alone, pedantic, and its basics link. */
#include <space.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	if (strcmp(space_version(), SPACE_VERSION_STRING) != 0) {
		fprintf(stderr, "space_version() %s != SPACE_VERSION_STRING %s\n", space_version(), SPACE_VERSION_STRING);
		return 1;
	}
	if (strcmp(space_strerror(-2), "No such file or directory") != 0 || !space_strerror(-99999)) {
		fprintf(stderr, "space_strerror is wrong: %s\n", space_strerror(-2));
		return 1;
	}
	space_ctx *ctx = NULL;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = "/nonexistent/state";
	if (space_ctx_new(&o, &ctx) != 0 || strcmp(space_ctx_state_dir(ctx), "/nonexistent/state") != 0)
		return 1;
	struct space_template_info **list;
	size_t n;
	int r = space_template_list(ctx, &list, &n);
	/* An uninitialized state dir is a clear error, not a crash or an empty answer. */
	if (r != -123 /* ENOMEDIUM */ || !strstr(space_ctx_last_error(ctx), "space init")) {
		fprintf(stderr, "uninitialized state: r=%d msg=%s\n", r, space_ctx_last_error(ctx));
		return 1;
	}
	space_ctx_free(ctx);
	space_ctx_free(NULL);
	puts("header: ok");
	return 0;
}
