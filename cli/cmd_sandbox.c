/* SPDX-License-Identifier: Apache-2.0 */
/* space run, create, exec, rm, logs (cp: cmd_cp.c) */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "cli_net.h"
#include "config.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

#define MAX_ENV 256

struct run_opts {
	struct space_sandbox_options sb;
	const char *env[MAX_ENV + 1];
	size_t nenv;
	const char *cwd;
	bool interactive;
	bool tty;
	uint32_t exec_timeout_ms;
	bool user_set;      /* --user: run as uid:gid, root included */
	uint32_t uid, gid;
	char **argv;  /* the command, after "--" */
	char **image_argv;  /* run without a command: the template's Entrypoint and Cmd (owned) */
	struct cli_net net; /* --allow, --secret, --inject, --policy, --resolve, --ca-file */
};

static void cli_strv_free(char **v);

/* What parse_run_opts and run allocated: the policy document built from the network flags, an image's
 * command. */
static void run_opts_done(struct run_opts *o)
{
	free((char *)o->sb.network_policy);
	o->sb.network_policy = NULL;
	cli_strv_free(o->image_argv);
	o->image_argv = NULL;
}

static int parse_u32(const struct cli_command *cmd, const char *opt, const char *s, uint64_t min, uint64_t max,
		     uint32_t *ret)
{
	uint64_t v;
	if (util_parse_uint(s, min, max, &v) < 0) {
		cli_usage_error(cmd, "%s needs a number from %llu to %llu, not '%s'", opt, (unsigned long long)min,
				(unsigned long long)max, s);
		return -1;
	}
	*ret = (uint32_t)v;
	return 0;
}

/*
 * Parses the sandbox and process options shared by run, create and exec. want_cmd: whether a command after
 * the options is required (exec), optional (run: the template's own otherwise) or none (create);
 * positional: where the remaining non-option arguments go (exec's ID).
 */
enum { CMD_NONE, CMD_REQUIRED, CMD_OPTIONAL };

static int parse_run_opts(const struct cli_command *cmd, int argc, char **argv, struct run_opts *o, bool sandbox_opts,
			  int want_cmd, char **positional)
{
	static const struct option opts[] = {
		{ "template", required_argument, NULL, 'T' },
		{ "isolation", required_argument, NULL, 'I' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "env", required_argument, NULL, 'e' },
		{ "cwd", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 'O' },
		{ "exec-timeout", required_argument, NULL, 'X' },
		{ "hostname", required_argument, NULL, 'H' },
		{ "interactive", no_argument, NULL, 'i' },
		{ "tty", no_argument, NULL, 't' },
		{ "user", required_argument, NULL, 'u' },
		{ "snapshot-every", required_argument, NULL, 0x4f0 },
		{ "snapshot-keep", required_argument, NULL, 0x4f1 },
		CLI_NET_OPTIONS,
		{ 0 },
	};
	memset(o, 0, sizeof(*o));
	o->sb = (struct space_sandbox_options)SPACE_SANDBOX_OPTIONS_INIT;
	o->sb.env = o->env;
	int c;
	optind = 1;
	opterr = 0;
	/* "+": options end at the first non-option (the command, or exec's ID is taken below). */
	while ((c = getopt_long(argc, argv, "+e:w:it", opts, NULL)) != -1) {
		if (!sandbox_opts && (strchr("TIcmOH", c) || CLI_NET_IS_OPTION(c) || c == 0x4f0 || c == 0x4f1))
			return cli_usage_error(cmd, "option '%s' applies when the sandbox is created", argv[optind - 1]);
		switch (c) {
		case 'T': o->sb.template_name = optarg; break;
		case 'I':
			if (strcmp(optarg, "vm") && strcmp(optarg, "jail"))
				return cli_usage_error(cmd, "--isolation must be vm or jail, not '%s'", optarg);
			o->sb.isolation = optarg;
			break;
		case 'c':
			if (parse_u32(cmd, "--cpus", optarg, 1, 256, &o->sb.cpus) < 0)
				return EXIT_USAGE;
			break;
		case 'm':
			if (cli_parse_mib(cmd, "--memory", optarg, 16, 1 << 20, &o->sb.memory_mib) < 0)
				return EXIT_USAGE;
			break;
		case 'O':
			if (cli_parse_duration(cmd, "--timeout", optarg, 1, SPACE_TIMEOUT_MAX_S, &o->sb.timeout_s) < 0)
				return EXIT_USAGE;
			break;
		case 'X':
			if (cli_parse_duration(cmd, "--exec-timeout", optarg, 1, 24u * 3600, &o->exec_timeout_ms) < 0)
				return EXIT_USAGE;
			o->exec_timeout_ms *= 1000;
			break;
		case 'H': o->sb.hostname = optarg; break;
		case 0x4f0: /* periodic file snapshots */
			if (cli_parse_duration(cmd, "--snapshot-every", optarg, 1, 7u * 24 * 3600, &o->sb.snapshot_every_s) < 0)
				return EXIT_USAGE;
			break;
		case 0x4f1:
			if (parse_u32(cmd, "--snapshot-keep", optarg, 1, 100, &o->sb.snapshot_keep) < 0)
				return EXIT_USAGE;
			break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=')
				return cli_usage_error(cmd, "--env needs KEY=VALUE, not '%s'", optarg);
			if (o->nenv == MAX_ENV)
				return cli_usage_error(cmd, "too many --env (at most %d)", MAX_ENV);
			o->env[o->nenv++] = optarg;
			break;
		case 'w': o->cwd = optarg; break;
		case 'u': {
			/* UID or UID:GID: numbers inside the sandbox (0: root, even where the template names a user) */
			char *colon = strchr(optarg, ':');
			uint64_t u, g;
			if (colon)
				*colon = '\0';
			bool ok = util_parse_uint(optarg, 0, UINT32_MAX - 1, &u) == 0 &&
				  (!colon || util_parse_uint(colon + 1, 0, UINT32_MAX - 1, &g) == 0);
			if (colon)
				*colon = ':';
			if (!ok)
				return cli_usage_error(cmd, "--user needs UID or UID:GID (numbers), not '%s'", optarg);
			o->user_set = true;
			o->uid = (uint32_t)u;
			o->gid = colon ? (uint32_t)g : (uint32_t)u;
			break;
		}
		case 'i': o->interactive = true; break;
		case 't': o->tty = true; break;
		case 0x4e0 ... 0x4e5: {
			char why[256];
			if (cli_net_flag(&o->net, c, optarg, why, sizeof(why)) < 0)
				return cli_usage_error(cmd, "%s: %s", argv[optind - 1], why);
			break;
		}
		default:
			return cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (o->sb.snapshot_keep && !o->sb.snapshot_every_s)
		return cli_usage_error(cmd, "--snapshot-keep needs --snapshot-every SECONDS");
	if (positional) {
		if (optind >= argc || !strcmp(argv[optind], "--"))
			return cli_usage_error(cmd, "missing sandbox ID");
		*positional = argv[optind++];
	}
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (want_cmd == CMD_REQUIRED && optind >= argc)
		return cli_usage_error(cmd, "missing command (put it after --)");
	if (want_cmd == CMD_NONE && optind < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	o->argv = argv + optind;
	char why[512];
	if (cli_net_policy(&o->net, (char **)&o->sb.network_policy, why, sizeof(why)) < 0)
		return cli_usage_error(cmd, "%s", why);
	o->sb.network_policy_trusted = true; /* the operator's own flags: env:, file: allowed (cli/net_flags.c) */
	return 0;
}

static void warn_jail(struct cli *cli, const char *iso)
{
	bool quiet = false;
#if HAVE_TEST_SWITCHES
	quiet = getenv("SPACE_QUIET_JAIL") != NULL; /* test builds only: keeps test output short */
#endif
	if (iso && !strcmp(iso, "jail") && !cli->json && !quiet)
		fprintf(stderr, "space: note: jail isolation shares the host kernel: a weaker boundary than a VM\n");
}

/* ---- streaming a process to the terminal ----------------------------------------------------------- */

static int sigpipe_fds[2] = { -1, -1 };

static void on_signal(int sig)
{
	unsigned char s = (unsigned char)sig;
	int saved = errno;
	if (write(sigpipe_fds[1], &s, 1) < 0) { /* the pipe is full: the signal is already pending */ }
	errno = saved;
}

static int to_fd(int stream, const void *data, size_t len, void *userdata)
{
	int r = util_write_all(stream == 2 ? STDERR_FILENO : STDOUT_FILENO, data, len);
	/* A closed stdout (| head) stops the output, not the sandbox's cleanup. */
	return r == -EPIPE ? 0 : r;
}

static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
	tio_saved = false;
}

static int exit_status_of(space_sandbox *sb, const struct space_exec_result *res)
{
	if (res->timed_out) {
		fprintf(stderr, "space: the command timed out and was killed\n");
		return 124;
	}
	struct space_sandbox_info *info = NULL;
	if (res->oom_killed && space_sandbox_get_info(sb, &info) == 0 && info->memory_mib)
		fprintf(stderr, "space: killed: out of memory (limit %u MiB)\n", info->memory_mib);
	else if (res->oom_killed)
		fprintf(stderr, "space: killed: out of memory\n");
	space_sandbox_info_free(info);
	return res->exited ? res->exit_code : 128 + res->signal;
}

/*
 * Runs argv in sb with stdout/stderr (or the terminal) wired to ours; forwards SIGINT, SIGTERM, SIGHUP
 * (and, with a tty, window size changes). Returns the exit status to use, or EXIT_FAIL.
 */
static int stream_process(struct cli *cli, space_sandbox *sb, const struct run_opts *o)
{
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = (const char *const *)o->argv;
	eo.cwd = o->cwd;
	if (o->user_set) {
		eo.uid = o->uid;
		eo.gid = o->gid;
		eo.flags |= SPACE_EXEC_USER;
	}
	eo.env = o->sb.env; /* for exec; create already applied them sandbox-wide */
	eo.timeout_ms = o->exec_timeout_ms;
	eo.output = to_fd;
	eo.stdin_fd = o->interactive || o->tty ? STDIN_FILENO : -1;
	eo.flags |= eo.stdin_fd >= 0 ? SPACE_EXEC_STDIN : 0; /* options version 2: a stdin only with the flag */
	bool tty = o->tty && isatty(STDIN_FILENO);
	if (tty) {
		struct winsize ws;
		eo.pty = true;
		if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
			eo.rows = ws.ws_row;
			eo.cols = ws.ws_col;
		}
	} else if (o->tty) {
		eo.pty = true;
	}
	if (sigpipe_fds[0] < 0 && pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return cli_fail(cli, -errno, "signal pipe");
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	space_process *p;
	int r = space_process_start(sb, &eo, &p);
	if (r < 0) {
		cli_fail(cli, r, "exec in %s", space_sandbox_id(sb));
		/* Like a shell: 127 for a command that is not there, 126 for one that cannot run. */
		return r == -ENOENT ? 127 : r == -EACCES || r == -ENOEXEC ? 126 : EXIT_FAIL;
	}
	if (tty && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		struct termios raw = saved_tio;
		cfmakeraw(&raw);
		tio_saved = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
		atexit(restore_tty);
	}
	bool stdin_open = eo.stdin_fd >= 0;
	int interrupts = 0;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	int status = EXIT_FAIL;
	for (;;) {
		struct pollfd pf[3] = {
			{ .fd = space_process_fd(p), .events = POLLIN },
			{ .fd = sigpipe_fds[0], .events = POLLIN },
			{ .fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
		};
		if (poll(pf, 3, space_process_pending(p) ? 0 : -1) < 0) {
			if (errno == EINTR)
				continue;
			cli_fail(cli, -errno, "poll");
			break;
		}
		if (pf[1].revents & POLLIN) {
			unsigned char s;
			while (read(sigpipe_fds[0], &s, 1) == 1) {
				if (s == SIGWINCH) {
					struct winsize ws;
					if (tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
						space_process_resize(p, ws.ws_row, ws.ws_col);
					continue;
				}
				/* The first interrupt is forwarded; a third one gives up on the process. */
				space_process_signal(p, ++interrupts >= 3 ? SIGKILL : s);
			}
		}
		if (pf[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[65536];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n > 0) {
				if (space_process_write_stdin(p, buf, (size_t)n) < 0)
					stdin_open = false;
			} else if (n == 0 || errno != EINTR) {
				space_process_write_stdin(p, NULL, 0);
				stdin_open = false;
			}
		}
		if (pf[0].revents || space_process_pending(p)) {
			r = space_process_pump(p, &res);
			if (r < 0) {
				cli_fail(cli, r, "exec in %s", space_sandbox_id(sb));
				break;
			}
			if (r == 1) {
				status = exit_status_of(sb, &res);
				break;
			}
		}
	}
	restore_tty();
	space_process_free(p);
	return status;
}

/* ---- commands ---------------------------------------------------------------------------------------- */

static void cli_strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* The command an image template runs without one: Entrypoint then Cmd (*ret NULL when it names none). */
static int image_command(struct cli *cli, const char *name, char ***ret)
{
	*ret = NULL;
	struct space_template_info *t;
	int r = space_template_get(cli_ctx(cli), name, &t);
	if (r < 0)
		return r;
	bool has = t->size >= offsetof(struct space_template_info, image_config) + sizeof(t->image_config) &&
		   t->image_config[0];
	cJSON *j = has ? cJSON_Parse(t->image_config) : NULL;
	space_template_info_free(t);
	const cJSON *parts[2] = { cJSON_GetObjectItemCaseSensitive(j, "entrypoint"),
				  cJSON_GetObjectItemCaseSensitive(j, "cmd") };
	size_t n = 0;
	for (int i = 0; i < 2; i++)
		n += cJSON_IsArray(parts[i]) ? (size_t)cJSON_GetArraySize(parts[i]) : 0;
	if (!n) {
		cJSON_Delete(j);
		return 0;
	}
	char **v = calloc(n + 1, sizeof(char *));
	size_t k = 0;
	for (int i = 0; v && i < 2; i++) {
		const cJSON *e;
		cJSON_ArrayForEach(e, parts[i]) {
			if (cJSON_IsString(e) && !(v[k++] = strdup(e->valuestring))) {
				cli_strv_free(v);
				v = NULL;
				break;
			}
		}
	}
	cJSON_Delete(j);
	if (!v)
		return -ENOMEM;
	*ret = v;
	return 0;
}

int cmd_run(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("run");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	_cleanup_(run_opts_done) struct run_opts o = { 0 };
	int r = parse_run_opts(cmd, argc, argv, &o, true, CMD_OPTIONAL, NULL);
	if (r)
		return r;
	if (!o.argv[0]) {
		const char *t = o.sb.template_name ? o.sb.template_name : "base";
		if ((r = image_command(cli, t, &o.image_argv)) < 0)
			return cli_fail(cli, r, "run");
		if (!o.image_argv)
			return cli_usage_error(cmd, "missing command (put it after --): template %s has no Entrypoint or Cmd "
						    "of an image to run instead",
					       t);
		o.argv = o.image_argv;
	}
	warn_jail(cli, o.sb.isolation);
	space_sandbox *sb;
	r = space_sandbox_create(cli_ctx(cli), &o.sb, &sb);
	if (r < 0)
		return cli_fail(cli, r, "create sandbox");
	/* The sandbox ends with this process, however it ends (SIGKILL too): no orphan runs on. */
	r = space_sandbox_tether(sb);
	if (r < 0) {
		int rc = cli_fail(cli, r, "run");
		(void)space_sandbox_destroy(sb);
		space_sandbox_free(sb);
		return rc;
	}
	o.sb.env = NULL; /* applied sandbox-wide already */
	int status = stream_process(cli, sb, &o);
	r = space_sandbox_destroy(sb);
	if (r < 0) {
		cli_fail(cli, r, "destroy sandbox %s", space_sandbox_id(sb));
		if (status == 0)
			status = EXIT_FAIL;
	}
	space_sandbox_free(sb);
	return status;
}

int cmd_create(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("create");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	_cleanup_(run_opts_done) struct run_opts o = { 0 };
	int r = parse_run_opts(cmd, argc, argv, &o, true, CMD_NONE, NULL);
	if (r)
		return r;
	if (o.cwd || o.interactive || o.tty || o.exec_timeout_ms || o.user_set)
		return cli_usage_error(cmd, "--cwd, --user, -i, -t and --exec-timeout apply to exec, not create");
	warn_jail(cli, o.sb.isolation);
	space_sandbox *sb;
	r = space_sandbox_create(cli_ctx(cli), &o.sb, &sb);
	if (r < 0)
		return cli_fail(cli, r, "create sandbox");
	int rc = EXIT_OK;
	if (cli->json) {
		cJSON *j = cli_sandbox_handle_json(sb);
		if (j)
			rc = cli_print_json(j);
	} else {
		printf("%s\n", space_sandbox_id(sb));
	}
	space_sandbox_free(sb);
	return rc;
}

enum { STEP_ROLLBACK = 1, STEP_CHECKPOINT_FIRST = 2 };

/* exec as a guarded step: on failure the sandbox returns to its newest checkpoint (or the one taken first). */
static int run_step(struct cli *cli, space_sandbox *sb, const struct run_opts *o, unsigned step)
{
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = (const char *const *)o->argv;
	eo.cwd = o->cwd;
	if (o->user_set) {
		eo.uid = o->uid;
		eo.gid = o->gid;
		eo.flags |= SPACE_EXEC_USER;
	}
	eo.env = o->sb.env;
	eo.timeout_ms = o->exec_timeout_ms;
	eo.output = to_fd;
	signal(SIGPIPE, SIG_IGN);
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	char cp[SPACE_CHECKPOINT_ID_MAX];
	int r = space_sandbox_exec_step(sb, &eo, step & STEP_CHECKPOINT_FIRST ? SPACE_STEP_CHECKPOINT_FIRST : 0, &res,
					cp);
	if (r < 0) {
		cli_fail(cli, r, "step in %s", space_sandbox_id(sb));
		return r == -ENOENT && !strstr(space_ctx_last_error(cli_ctx(cli)), "checkpoint") ? 127 : EXIT_FAIL;
	}
	if (cp[0])
		fprintf(stderr, "space: the step failed; sandbox %s rolled back to checkpoint %s\n", space_sandbox_id(sb),
			cp);
	/* The step's own checkpoint is dropped when it succeeds and kept when it fails: say so. */
	if (cp[0] && (step & STEP_CHECKPOINT_FIRST))
		fprintf(stderr, "space: checkpoint %s (before-step) is kept: `space checkpoint rm %s` removes it\n", cp,
			cp);
	return exit_status_of(sb, &res);
}

int cmd_exec(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("exec");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	/* --rollback-on-failure and --checkpoint-first (before "--") make the command a guarded step. */
	unsigned step = 0;
	int kept = 0;
	bool after_dashes = false;
	for (int i = 0; i < argc; i++) {
		if (!after_dashes && !strcmp(argv[i], "--rollback-on-failure"))
			step |= STEP_ROLLBACK;
		else if (!after_dashes && !strcmp(argv[i], "--checkpoint-first"))
			step |= STEP_ROLLBACK | STEP_CHECKPOINT_FIRST;
		else {
			after_dashes = after_dashes || !strcmp(argv[i], "--");
			argv[kept++] = argv[i];
		}
	}
	argc = kept;
	_cleanup_(run_opts_done) struct run_opts o = { 0 };
	char *id = NULL;
	int r = parse_run_opts(cmd, argc, argv, &o, false, CMD_REQUIRED, &id);
	if (r)
		return r;
	if (step && (o.tty || o.interactive))
		return cli_usage_error(cmd, "--rollback-on-failure runs the command without a terminal or stdin");
	space_sandbox *sb;
	r = space_sandbox_open(cli_ctx(cli), id, &sb);
	if (r < 0)
		return cli_fail(cli, r, "open sandbox %s", id);
	int status = step ? run_step(cli, sb, &o, step) : stream_process(cli, sb, &o);
	space_sandbox_free(sb);
	return status;
}

int cmd_rm(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("rm");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	/* Options anywhere among the ids: --keep-events keeps the rows of `space events` (until the log's
	 * retention); --all / --older-than pick the sandboxes (cli/rm_select.c); -f: a gone one is no error. */
	unsigned flags = 0;
	bool all = false, older = false, force = false;
	uint32_t older_s = 0;
	_cleanup_free_ char **ids = calloc((size_t)argc + 1, sizeof(*ids));
	size_t nids = 0;
	if (!ids)
		return cli_fail(cli, -ENOMEM, "rm");
	for (int i = 1; i < argc; i++) {
		const char *v = !strncmp(argv[i], "--older-than=", 13) ? argv[i] + 13 : NULL;
		if (!strcmp(argv[i], "--keep-events"))
			flags |= SPACE_REMOVE_KEEP_EVENTS;
		else if (!strcmp(argv[i], "--with-checkpoints"))
			flags |= SPACE_REMOVE_WITH_CHECKPOINTS;
		else if (!strcmp(argv[i], "--all"))
			all = true;
		else if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--force"))
			force = true;
		else if (v || !strcmp(argv[i], "--older-than")) {
			if (!v && !(v = i + 1 < argc ? argv[++i] : NULL))
				return cli_usage_error(cmd, "--older-than needs a duration (30s, 10m, 2h, 1d)");
			if (cli_parse_duration(cmd, "--older-than", v, 0, UINT32_MAX, &older_s) < 0)
				return EXIT_USAGE;
			older = true;
		} else if (argv[i][0] == '-')
			return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
		else
			ids[nids++] = argv[i];
	}
	if ((all || older) && nids)
		return cli_usage_error(cmd, "--all and --older-than pick the sandboxes: give no ID with them");
	if (!all && !older && nids == 0)
		return cli_usage_error(cmd, "rm needs at least one sandbox ID (or --all, --older-than DURATION)");
	_cleanup_(cli_rm_select_free) struct cli_rm_selection sel = { 0 };
	if (all || older) {
		int r = cli_rm_select(cli, older ? (int64_t)older_s : -1, &sel);
		if (r < 0)
			return cli_fail(cli, r, "list sandboxes to remove");
		if (sel.n == 0 && !cli->json)
			fprintf(stderr, "space: no sandbox to remove\n");
	}
	size_t total = (all || older) ? sel.n : nids;
	int rc = EXIT_OK;
	cJSON *a = cli->json ? cJSON_CreateArray() : NULL;
	for (size_t i = 0; i < total; i++) {
		const char *id = (all || older) ? sel.ids[i] : ids[i];
		int r = space_sandbox_remove_v2(cli_ctx(cli), id, flags);
		/* Gone already (no row, or destroyed): what was asked holds. A picked one a reap took meanwhile too. */
		bool gone = r == -ENOENT && (force || all || older);
		if (r < 0 && !gone)
			rc = cli_fail(cli, r, "remove %s", id);
		else if (r >= 0)
			cli_report_kept_checkpoints(cli, id);
		if (r >= 0 && a)
			cJSON_AddItemToArray(a, cJSON_CreateString(id));
		if (r >= 0 && total > 1 && !a)
			fprintf(stderr, "space: removed %s (%zu/%zu)\n", id, i + 1, total);
	}
	if (a) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddItemToObject(j, "removed", a);
		/* Some removed, some not: one document says both (the first failure, as every --json failure). */
		cJSON *e = rc != EXIT_OK ? cli_json_error() : NULL;
		if (e)
			cJSON_AddItemToObject(j, "error", e);
		cli_print_json(j);
	}
	return rc;
}

/* ---- space logs ---- */

#define LOGS_CHUNK 65536

struct log_reader {
	space_ctx *ctx;
	const char *id;
	int fd; /* the pipe's write end, closed by the reader when done */
	int r;
	char err[1024]; /* the library's detail of a failure: last errors are per thread */
};

static void *log_reader_main(void *arg)
{
	struct log_reader *lr = arg;
	lr->r = space_sandbox_read_log(lr->ctx, lr->id, lr->fd);
	if (lr->r < 0)
		snprintf(lr->err, sizeof(lr->err), "%s", space_last_error(lr->ctx));
	close(lr->fd);
	return NULL;
}

/* Copies fd to stdout with control bytes, DEL, C1 and invalid UTF-8 escaped (\xHH), newlines, tabs and
 * backslashes kept; a UTF-8 character cut by a chunk boundary is held for the next chunk, not escaped. */
static int logs_escape_stream(int fd)
{
	static char in[LOGS_CHUNK + 4], out[4 * (LOGS_CHUNK + 4) + 1];
	size_t held = 0;
	int r = 0;
	for (;;) {
		ssize_t n = read(fd, in + held, LOGS_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		size_t len = held + (size_t)n, keep = n ? util_utf8_partial_tail(in, len) : 0;
		util_escape_text(out, sizeof(out), in, len - keep,
				 UTIL_ESC_KEEP_NL | UTIL_ESC_KEEP_TAB | UTIL_ESC_KEEP_BACKSLASH);
		if (r == 0)
			r = util_write_all(STDOUT_FILENO, out, strlen(out)); /* on EPIPE: drain, so the reader ends */
		memmove(in, in + len - keep, keep);
		held = keep;
		if (n == 0)
			return r;
	}
}

/*
 * space logs [--raw] ID. The log holds what the sandbox wrote (a VM's serial console, a jail's output):
 * by default every control byte but newline and tab, DEL, C1 and invalid UTF-8 is shown escaped, whether
 * stdout is a terminal or not (a file or a pager shown later is a terminal too); --raw gives the bytes
 * as stored, for tools.
 */
int cmd_logs(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("logs");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	bool raw = false;
	const char *id = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--raw"))
			raw = true;
		else if (argv[i][0] == '-' || id)
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
		else
			id = argv[i];
	}
	if (!id)
		return cli_usage_error(cmd, "logs needs one sandbox ID");
	space_ctx *ctx = cli_ctx(cli);
	if (raw) {
		int r = space_sandbox_read_log(ctx, id, STDOUT_FILENO);
		return r < 0 ? cli_fail(cli, r, "logs of %s", id) : EXIT_OK;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return cli_fail(cli, -errno, "logs of %s: pipe", id);
	_cleanup_close_ int rd = p[0];
	struct log_reader lr = { .ctx = ctx, .id = id, .fd = p[1] };
	pthread_t t;
	int e = pthread_create(&t, NULL, log_reader_main, &lr);
	if (e) {
		close(p[1]);
		return cli_fail(cli, -e, "logs of %s: thread", id);
	}
	int r = logs_escape_stream(rd);
	pthread_join(t, NULL);
	if (lr.r < 0)
		return cli_fail_detail(lr.r, lr.err, "logs of %s", id);
	return r < 0 && r != -EPIPE ? cli_fail(cli, r, "logs of %s: write", id) : EXIT_OK;
}

/* space timeout ID SECONDS: a new lifetime, counted from now (0: none). */
int cmd_timeout(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("timeout");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	uint32_t seconds;
	if (argc != 3)
		return cli_usage_error(cmd, "timeout needs a sandbox ID and a duration");
	if (cli_parse_duration(cmd, "DURATION", argv[2], 0, SPACE_TIMEOUT_MAX_S, &seconds) < 0)
		return EXIT_USAGE;
	space_sandbox *sb;
	int r = space_sandbox_open(cli_ctx(cli), argv[1], &sb);
	if (r < 0)
		return cli_fail(cli, r, "open sandbox %s", argv[1]);
	int rc = EXIT_OK;
	cJSON *j = NULL;
	r = space_sandbox_set_timeout(sb, seconds);
	if (r == 0 && cli->json && !(j = cli_sandbox_handle_json(sb)))
		r = -ENOMEM;
	if (r < 0)
		rc = cli_fail(cli, r, "timeout %s", argv[1]);
	else if (j)
		rc = cli_print_json(j);
	space_sandbox_free(sb);
	return rc;
}
