/* SPDX-License-Identifier: Apache-2.0 */
/* The `space` command line: shared state and helpers of the subcommands. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "space.h"

/* Exit codes: 0 success, 1 the operation failed, 2 the command line was wrong. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct cli {
	const char *state_dir;  /* --state, or NULL */
	bool json;              /* --json */
	int verbose;            /* -v */
	space_ctx *ctx;         /* opened by cli_ctx() */
};

struct cli_command {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv); /* argv[0] is the command name */
	const char *summary;
	const char *usage;      /* text after "usage: space "; NULL for hidden commands */
	const char *help;       /* more of `space NAME --help` (options, behaviour), or NULL */
};

/* The command table (cli/space.c): what `space --help`, `space NAME --help` and the manual page show. */
const struct cli_command *cli_commands(size_t *ret_n);
/* The global options, as `space --help` lists them: { "--state DIR", "what it does" }, NULL-terminated. */
extern const char *const cli_global_options[][2];
/* `space help --man`: space(1) in roff from the command table, on f (cli/man.c). Prose around it comes from
 * docs/man/space.1.in (docs/man/mkman.sh puts the two together). */
int cli_man(FILE *f);

/* The context, created on first use. Exits the process with EXIT_FAIL if it cannot be created. */
space_ctx *cli_ctx(struct cli *cli);

/* Prints "space: <what>: <detail>" where detail is the context's last error, or space_strerror(r). Returns
 * EXIT_FAIL. */
int cli_fail(struct cli *cli, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with the detail given: a library call made on another thread left its last error there. */
int cli_fail_detail(int r, const char *detail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prints "space: <message>" on stderr (escaped as cli_fail does), r being the -errno it stands for. Returns
 * EXIT_FAIL. */
int cli_error(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * With --json every failure is also one JSON document on stdout (docs/cli-json.md):
 * {"error": {"code": "ENOENT" | "usage" | ..., "message": "..."}}. cli_fail, cli_fail_detail, cli_error and
 * cli_usage_error record the first failure of the command; main() prints it when the command fails and has
 * printed no JSON document of its own. cli_json_error() gives that record as a cJSON object (NULL when none),
 * for a command that puts it in its own document (`space rm` of several sandboxes).
 */
void cli_json_errors(bool on);
cJSON *cli_json_error(void);
/* Prints the recorded failure as the JSON document, if --json, one was recorded and none printed yet. */
void cli_json_error_flush(void);

/* Prints "space: <message>" and the command's usage hint. Returns EXIT_USAGE. */
int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The one reading of a size and a duration flag (util_parse_mib, util_parse_duration): "--memory 1G" (a bare
 * number is MiB), "--timeout 10m" (a bare number is seconds; s, m, h, d), in [min, max]. On a bad value
 * prints a usage error naming opt and the range, and returns -1. */
int cli_parse_mib(const struct cli_command *cmd, const char *opt, const char *s, uint64_t min, uint64_t max,
		  uint32_t *ret);
int cli_parse_duration(const struct cli_command *cmd, const char *opt, const char *s, uint64_t min, uint64_t max,
		       uint32_t *ret);

/* "9m58s", "3d4h", "45s": a count of seconds for a column. */
const char *cli_duration(uint64_t s, char *buf, size_t len);

/* Prints "usage: space <usage>" and the summary to stdout. Returns EXIT_OK. */
int cli_help(const struct cli_command *cmd);

/* True if argv holds -h or --help before any "--". */
bool cli_wants_help(int argc, char **argv);

/* Prints a cJSON value on stdout (and frees it). Returns EXIT_OK, or EXIT_FAIL when j is NULL. */
int cli_print_json(cJSON *j);

/* Progress on stderr when it is a terminal ("\r<stage>..."), else one line per stage. */
void cli_progress(const char *stage, uint64_t done, uint64_t total, void *userdata);
/* Progress with byte counts (template import): on a terminal one line per stage, redrawn as it goes; else a
 * line when a stage starts and when it is done. cli_progress_end() ends a line left open. */
void cli_progress_bytes(const char *stage, uint64_t done, uint64_t total, void *userdata);
void cli_progress_end(void);

/* Formats a Unix time in ms as "2026-12-02 13:45:01" (local time). */
const char *cli_time(int64_t ms, char *buf, size_t len);

const struct cli_command *cli_find_command(const char *name);

/* Subcommands. */
int cmd_init(struct cli *cli, int argc, char **argv);
int cmd_pool(struct cli *cli, int argc, char **argv);
/* `space pool fill [TEMPLATE]` (cmd_template.c); argv[0] is "fill". */
/* Prints the pool's "promised to N sandbox disks; used, free" line on stdout after prefix, and a warning line
 * on warn when the disks are promised more than the pool has free (cmd_init.c). */
void cli_pool_space(const struct space_pool_info *p, const char *prefix, FILE *warn);
int cli_pool_fill(struct cli *cli, const struct cli_command *cmd, int argc, char **argv);
int cmd_template(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_run(struct cli *cli, int argc, char **argv);
int cmd_create(struct cli *cli, int argc, char **argv);
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_cp(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
int cmd_logs(struct cli *cli, int argc, char **argv);
int cmd_stats(struct cli *cli, int argc, char **argv);
int cmd_pause(struct cli *cli, int argc, char **argv);
int cmd_resume(struct cli *cli, int argc, char **argv);
int cmd_timeout(struct cli *cli, int argc, char **argv);
int cmd_checkpoint(struct cli *cli, int argc, char **argv);
int cmd_checkpoints(struct cli *cli, int argc, char **argv);
int cmd_rollback(struct cli *cli, int argc, char **argv);
int cmd_fork(struct cli *cli, int argc, char **argv);
int cmd_version(struct cli *cli, int argc, char **argv);
int cmd_vm_boot(struct cli *cli, int argc, char **argv);
int cmd_serve(struct cli *cli, int argc, char **argv);
int cmd_apikey(struct cli *cli, int argc, char **argv);
int cmd_cluster(struct cli *cli, int argc, char **argv);
int cmd_doctor(struct cli *cli, int argc, char **argv);
int cmd_bench(struct cli *cli, int argc, char **argv);
int cmd_kernel(struct cli *cli, int argc, char **argv);
int cmd_port(struct cli *cli, int argc, char **argv);

/* A checkpoint as JSON (`space checkpoints --json`); the API leaves the host path out (with_path false). */
cJSON *cli_checkpoint_json(const struct space_checkpoint_info *c, bool with_path);
/* After `space rm ID`: says on stderr which checkpoints of ID stayed, and how to remove them. */
void cli_report_kept_checkpoints(struct cli *cli, const char *sandbox_id);
/* "a (cp-x), cp-y" of the checkpoints in list (name and id, or the id) into buf, cut with "..." when long. */
void cli_checkpoint_names(struct space_checkpoint_info *const *list, size_t n, char *buf, size_t len);

/* The sandboxes `space rm --all` / `--older-than` remove (cli/rm_select.c): after a reap (which destroys
 * those past their lifetime or tether), every user sandbox not destroyed, created at least older_than_s
 * seconds ago (-1: any age). Free with cli_rm_select_free. */
struct cli_rm_selection {
	char (*ids)[32];
	size_t n;
};
int cli_rm_select(struct cli *cli, int64_t older_than_s, struct cli_rm_selection *ret);
void cli_rm_select_free(struct cli_rm_selection *sel);

/* A sandbox as JSON (the shape of `space ls --json` entries). */
cJSON *cli_sandbox_json(const struct space_sandbox_info *b);
/* The same of a handle's current info (space_sandbox_get_info); NULL when it cannot be read. */
cJSON *cli_sandbox_handle_json(space_sandbox *sb);

/* Path of a helper binary: $SPACE_VMM_PATH / $SPACE_AGENT_PATH, else $SPACE_LIBEXEC_DIR or the install
 * location. 0 if it exists and is executable, else -errno (buf still holds the path tried). */
int cli_helper_path(const char *name, char *buf, size_t len);

/* Periodic file snapshots (cmd_autosnap.c): "snapshots": {"every", "keep"[, "pid"]} or null added to j,
 * and `space template set-snapshots`. */
void cli_sandbox_snapshots_json(struct cli *cli, cJSON *j, const char *id);
void cli_template_snapshots_json(struct cli *cli, cJSON *j, const char *name);
int cli_template_set_snapshots(struct cli *cli, const struct cli_command *cmd, int argc, char **argv);
/* `space template push|pull NAME HOST`: asked of a cluster host's API (cli/cmd_template_move.c). */
int cli_template_move(struct cli *cli, const struct cli_command *cmd, int argc, char **argv, bool push);
/* -o FILE|- of a command that writes an archive or a stream (what: "an archive"): written whole or not at
 * all, into FILE.partial (created, 0644) renamed over FILE when complete; "-" is standard output, refused
 * on a terminal. cli_out_open returns 0, or the command's exit status after saying why (a terminal: a usage
 * error); cli_out_close ends it with
 * the writer's result r (r, or -errno of the rename), removing FILE.partial on failure. */
struct cli_out {
	int fd;
	bool to_stdout;
	char tmp[4200];
};
int cli_out_open(const struct cli_command *cmd, const char *out, const char *what, struct cli_out *ret);
int cli_out_close(struct cli_out *o, const char *out, int r);
/* A received template's "parent", "digest", "stream_bytes", "data_bytes", "entries" (the CLI's and the
 * server's answers). */
cJSON *cli_received_json(const struct space_template_receive_info *info);
/* template send / receive (cmd_template_stream.c). */
int cli_template_send(struct cli *cli, const struct cli_command *cmd, int argc, char **argv);
int cli_template_receive(struct cli *cli, const struct cli_command *cmd, int argc, char **argv);
