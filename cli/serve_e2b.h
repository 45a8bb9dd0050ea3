/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve`: the E2B-compatible plane (docs/e2b.md). The control plane (/sandboxes, /v2/sandboxes)
 * and the in-sandbox "envd" API (/files, process.Process, filesystem.Filesystem, Connect protocol
 * with the JSON codec) share the server's port; envd requests name their sandbox with E2b-Sandbox-Id.
 */
#pragma once

#include "serve.h"

#define E2B_ENVD_VERSION "0.6.13"
#define E2B_HOME "/root"

extern const struct serve_plane serve_e2b_plane;

/* Control-plane and /files error: {"code": status, "message": ...}. */
enum MHD_Result e2b_api_error(struct serve_req *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Connect unary error: {"code": "<connect code>", "message": ...} with the code's HTTP status. */
enum MHD_Result e2b_rpc_error(struct serve_req *r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The Connect code of a libspace error (-ENOENT "not_found", ...). */
const char *e2b_rpc_code(int err);
/* A Connect unary request's JSON object; NULL after answering invalid_argument. */
cJSON *e2b_rpc_body(struct serve_req *r);
/* A unary success: status 200 with j (takes it; NULL means "{}"). */
enum MHD_Result e2b_rpc_reply(struct serve_req *r, cJSON *j);
/* Checks an envd request's X-Access-Token: it must be a token the control plane handed out for the
 * sandbox that E2b-Sandbox-Id names (or, without that header, for any sandbox, which it then names).
 * Sets r->envd_sandbox; false after answering 401 (JSON with an integer code on /files, a Connect
 * error elsewhere). */
bool e2b_envd_authenticate(struct serve_req *r);
/* The sandbox of an envd request (see e2b_envd_authenticate); NULL after answering 502 (the E2B proxy's
 * answer for a sandbox that is not there). */
space_sandbox *e2b_sandbox(struct serve_req *r);
/* An envd path: absolute, or relative to E2B_HOME; "" or "~" is the home. false when too long. */
bool e2b_path(const char *in, char *out, size_t size);

/* Connect server streams: a stream is a series of envelopes (a flags byte, the big-endian length, the
 * JSON); flags 2 marks the end-of-stream message, which carries the error if there is one. */
/* One envelope of j (taken) in a new buffer of *ret_len bytes, or NULL. */
char *e2b_envelope(unsigned flags, cJSON *j, size_t *ret_len);
/* Writes one envelope of j (taken) to fd: 0 or -errno (-EPIPE: the client went away). */
int e2b_envelope_write(int fd, unsigned flags, cJSON *j);
/* Writes the end-of-stream envelope; an error when code is not NULL. */
int e2b_stream_end(int fd, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Answers a streaming call with a stream that only carries an error (a refused request). */
enum MHD_Result e2b_stream_error(struct serve_req *r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The JSON object of a streaming call's request (one envelope; the body is already capped); NULL with
 * *why set. */
cJSON *e2b_stream_request(struct serve_req *r, const char **why);

/* serve_e2b_fs.c: /files and filesystem.Filesystem. */
enum MHD_Result e2b_files_get(struct serve_req *r);
enum MHD_Result e2b_files_post_start(struct serve_req *r);
enum MHD_Result e2b_files_post(struct serve_req *r);
enum MHD_Result e2b_fs_list_dir(struct serve_req *r);
enum MHD_Result e2b_fs_make_dir(struct serve_req *r);
enum MHD_Result e2b_fs_remove(struct serve_req *r);
enum MHD_Result e2b_fs_stat(struct serve_req *r);
enum MHD_Result e2b_fs_move(struct serve_req *r);
/* An EntryInfo message for path with the stat st. */
cJSON *e2b_entry_json(const char *path, const struct space_file_stat *st);

/* serve_e2b_watch.c: filesystem.Filesystem's watchers, found by polling (docs/e2b.md). */
enum MHD_Result e2b_fs_watch_dir(struct serve_req *r);
enum MHD_Result e2b_fs_create_watcher(struct serve_req *r);
enum MHD_Result e2b_fs_get_watcher_events(struct serve_req *r);
enum MHD_Result e2b_fs_remove_watcher(struct serve_req *r);
/* Drops every watcher of CreateWatcher (at the server's exit). */
void e2b_watch_cleanup(void);

/* serve_e2b_process.c: process.Process. */
enum MHD_Result e2b_proc_start(struct serve_req *r);
enum MHD_Result e2b_proc_list(struct serve_req *r);
enum MHD_Result e2b_proc_send_input(struct serve_req *r);
enum MHD_Result e2b_proc_send_signal(struct serve_req *r);
enum MHD_Result e2b_proc_close_stdin(struct serve_req *r);
enum MHD_Result e2b_unimplemented(struct serve_req *r);

/* serve_usage.c: GET /sandboxes/{id}/metrics (getMetrics). */
enum MHD_Result e2b_sandbox_metrics(struct serve_req *r);

/* Standard base64 (decode also takes URL-safe and missing padding). Both return malloc'd buffers. */
char *e2b_base64_encode(const void *data, size_t len);
int e2b_base64_decode(const char *s, unsigned char **ret, size_t *ret_len);
