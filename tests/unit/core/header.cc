// The public header is usable from C++.
#include <space.h>
#include <cstring>

int main()
{
	space_ctx *ctx = nullptr;
	struct space_ctx_options o = {};
	o.version = SPACE_CTX_OPTIONS_VERSION;
	if (space_ctx_new(&o, &ctx) != 0)
		return 1;
	space_ctx_free(ctx);
	return std::strlen(space_version()) > 0 ? 0 : 1;
}
