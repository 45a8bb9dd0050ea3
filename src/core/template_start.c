/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A template's start command: a process every sandbox made from the template gets at create, left running
 * on its own (space_sandbox_spawn), and optionally a port it must be listening on before the create
 * returns (a server the sandbox exists for, such as the code interpreter's kernel). It is kept in the
 * store's meta table beside the template's snapshot policy, with the template's creation time, so a
 * template removed and made again under the same name does not inherit it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/info.h"
#include "core/internal.h"
#include "core/sandbox.h"
#include "proto/agent_client.h"
#include "store/db.h"
#include "util/cleanup.h"
#include "util/util.h"

#define START_ARGS_MAX 64
#define START_ARG_BYTES_MAX 4096
#define START_BYTES_MAX 16384
/* How long a create waits for the start command's port. A VM on an emulated host boots slowly. */
#define START_WAIT_MS 60000

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete);

static void start_key(const char *name, char *key, size_t len)
{
	snprintf(key, len, "start.template.%s", name);
}

SPACE_API int space_template_set_start(space_ctx *ctx, const char *name, const char *const *argv, uint16_t wait_port)
{
	CTX_ENTER(ctx);
	if (!ctx || !name)
		return -EINVAL;
	size_t n = 0, bytes = 0;
	for (; argv && argv[n]; n++) {
		size_t l = strlen(argv[n]);
		if (n >= START_ARGS_MAX || l > START_ARG_BYTES_MAX || (bytes += l) > START_BYTES_MAX)
			return ctx_error_msg(ctx, -E2BIG, "a start command has at most %d arguments of %d bytes, %d in all",
					     START_ARGS_MAX, START_ARG_BYTES_MAX, START_BYTES_MAX);
	}
	if (n > 0 && !argv[0][0])
		return ctx_error_msg(ctx, -EINVAL, "a start command's first word is the program to run");
	if (n == 0 && wait_port)
		return ctx_error_msg(ctx, -EINVAL, "a port to wait for needs a start command");
	struct template_info t;
	int r = core_template_get(ctx, name, &t);
	if (r < 0)
		return r;
	char key[128];
	start_key(t.name, key, sizeof(key));
	struct store *s = ctx->store;
	if (n == 0) {
		r = store_meta_delete(s, key);
		return r < 0 ? ctx_error(ctx, r, "store: %s", store_errmsg(s)) : 0;
	}
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(j, "argv");
	for (size_t i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(argv[i])))
			return -ENOMEM;
	if (!cJSON_AddNumberToObject(j, "wait_port", wait_port) ||
	    !cJSON_AddNumberToObject(j, "template_created_ms", (double)t.created_ms))
		return -ENOMEM;
	_cleanup_free_ char *val = cJSON_PrintUnformatted(j);
	if (!val)
		return -ENOMEM;
	r = store_meta_set(s, key, val);
	return r < 0 ? ctx_error(ctx, r, "store: %s", store_errmsg(s)) : 0;
}

/* The start command of template t as stored (a JSON object with "argv" and "wait_port"), or NULL. */
static cJSON *start_get(space_ctx *ctx, const struct template_info *t)
{
	char key[128];
	start_key(t->name, key, sizeof(key));
	_cleanup_free_ char *val = NULL;
	if (store_meta_get(ctx->store, key, &val) < 0 || !val)
		return NULL;
	cJSON *j = cJSON_Parse(val);
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "template_created_ms");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "argv");
	if (!cJSON_IsNumber(c) || (int64_t)c->valuedouble != t->created_ms || !cJSON_IsArray(a) ||
	    cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > START_ARGS_MAX) {
		cJSON_Delete(j);
		return NULL;
	}
	for (const cJSON *e = a->child; e; e = e->next)
		if (!cJSON_IsString(e)) {
			cJSON_Delete(j);
			return NULL;
		}
	cJSON_DeleteItemFromObjectCaseSensitive(j, "template_created_ms");
	return j;
}

SPACE_API int space_template_get_start(space_ctx *ctx, const char *name, char **ret_json)
{
	CTX_ENTER(ctx);
	if (!ctx || !name || !ret_json)
		return -EINVAL;
	struct template_info t;
	int r = core_template_get(ctx, name, &t);
	if (r < 0)
		return r;
	_cleanup_(cJSON_Deletep) cJSON *j = start_get(ctx, &t);
	*ret_json = NULL;
	if (j && !(*ret_json = cJSON_PrintUnformatted(j)))
		return -ENOMEM;
	return 0;
}

static int find_pid(int pid, const char *const *argv, void *userdata)
{
	(void)argv;
	struct { int pid; bool found; } *w = userdata;
	if (pid == w->pid)
		w->found = true;
	return 0;
}

/* Waits until port accepts a connection inside sb, or the deadline, or the process's end. */
static int wait_port(space_sandbox *sb, uint16_t port, int pid)
{
	space_ctx *ctx = sandbox_ctx(sb);
	uint64_t deadline = util_now_ns() + (uint64_t)START_WAIT_MS * 1000000;
	long pause_ms = 5;
	for (unsigned round = 0;; round++) {
		int fd = -1;
		int r = space_sandbox_port_connect(sb, port, &fd);
		if (r == 0) {
			close(fd);
			return 0;
		}
		if (r != -ECONNREFUSED)
			return r; /* the message is set */
		if (util_now_ns() >= deadline)
			return ctx_error_msg(ctx, -ETIMEDOUT,
					     "the template's start command (pid %d) did not listen on port %u within %d s",
					     pid, port, START_WAIT_MS / 1000);
		if (round % 8 == 7) {
			struct { int pid; bool found; } w = { pid, false };
			struct agent_error aerr;
			if (agent_list_procs(sandbox_addr(sb), find_pid, &w, &aerr) == 0 && !w.found)
				return ctx_error_msg(ctx, -ESRCH,
						     "the template's start command (pid %d) ended before listening on port %u",
						     pid, port);
		}
		util_sleep_ms(pause_ms);
		if (pause_ms < 100)
			pause_ms *= 2;
	}
}

int template_start_run(space_ctx *ctx, space_sandbox *sb, const char *tname)
{
	struct template_info t;
	if (core_template_get(ctx, tname, &t) < 0)
		return 0; /* a template gone meanwhile has nothing to start */
	_cleanup_(cJSON_Deletep) cJSON *j = start_get(ctx, &t);
	if (!j)
		return 0;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "argv");
	const char *argv[START_ARGS_MAX + 1];
	size_t n = 0;
	for (const cJSON *e = a->child; e && n < START_ARGS_MAX; e = e->next)
		argv[n++] = e->valuestring;
	argv[n] = NULL;
	struct space_exec_options o = SPACE_EXEC_OPTIONS_INIT;
	o.argv = argv;
	int pid = 0;
	int r = space_sandbox_spawn(sb, &o, &pid);
	if (r < 0) {
		char why[sizeof(ctx->last_error)];
		snprintf(why, sizeof(why), "%s", ctx->last_error);
		return ctx_error_msg(ctx, r, "template %s: start command %s: %s", tname, argv[0], why);
	}
	double port = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "wait_port"));
	if (port >= 1 && port <= 65535)
		r = wait_port(sb, (uint16_t)port, pid);
	if (r < 0)
		return r;
	ctx_log(ctx, SPACE_LOG_DEBUG, "sandbox %s: start command %s running (pid %d)", space_sandbox_id(sb), argv[0],
		pid);
	return 0;
}

int template_start_or_destroy(space_ctx *ctx, space_sandbox **sb, const char *tname)
{
	int r = template_start_run(ctx, *sb, tname);
	if (r == 0)
		return 0;
	char msg[sizeof(ctx->last_error)];
	snprintf(msg, sizeof(msg), "%s", ctx->last_error);
	(void)space_sandbox_destroy(*sb);
	space_sandbox_free(*sb);
	*sb = NULL;
	snprintf(ctx->last_error, sizeof(ctx->last_error), "%s", msg);
	return r;
}
