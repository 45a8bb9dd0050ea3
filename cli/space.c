/* SPDX-License-Identifier: Apache-2.0 */
/* `space`: a thin command line over libspace. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_net.h"
#include "util/escape.h"
#include "util/util.h"

static const struct cli_command commands[] = {
	{ "init", cmd_init, "prepare a state directory and its btrfs pool",
	  "init [--pool PATH | --loop-pool SIZE] [--isolation vm|jail] [--state DIR] [--json]",
	  "  --pool PATH        keep templates and sandboxes under PATH, which must be on btrfs\n"
	  "  --loop-pool SIZE   create a btrfs image of SIZE (e.g. 20G) at <state>/pool.img, mounted at\n"
	  "                     <state>/pool (re-mounted automatically when needed)\n"
	  "  --isolation MODE   default isolation for new sandboxes: vm (default) or jail (namespaces;\n"
	  "                     a weaker boundary that shares the host kernel)\n"
	  "  --allow-identity-map   where the kernel cannot idmap a jail's rootfs, run the jail with the\n"
	  "                     identity uid map (root inside = host uid 0, without capabilities) instead\n"
	  "                     of refusing it: a weaker boundary, warned about at every create\n"
	  "  --refuse-identity-map  refuse such jails again (the default)\n"
	  "Running it again on an initialized state directory checks and re-mounts the pool.\n" },
	{ "pool", cmd_pool, "show the pool, unmount a loop pool, or fill templates' warm pools",
	  "pool [info | unmount | fill [TEMPLATE]] [--json]" },
	{ "template", cmd_template, "import, build, export, list, remove and snapshot templates; size their warm pools",
	  "template import NAME --rootfs DIR|FILE.tar|FILE.ext4 | --image OCI-DIR|OCI.tar|DOCKER-SAVE.tar\n"
	  "       [--kernel FILE [--modules DIR]] [--initrd FILE] [--size SIZE] [--force] [--json]\n"
	  "       (--image: an OCI image layout or a `docker save` archive; no registry pulls: make one with\n"
	  "       `skopeo copy docker://IMAGE oci-archive:FILE` or `docker save -o FILE IMAGE` where a registry\n"
	  "       is reachable. --force: a rootfs or image without /bin/sh)\n"
	  "       space template build NAME [-f Dockerfile] [CONTEXT] [--no-cache] [--build-arg K=V]...\n"
	  "       [--isolation vm|jail] [--cpus N] [--memory SIZE] [NETWORK of `space run`]   (each step cached;\n"
	  "       CONTEXT may be a tar of the context: -f then names a file inside it)\n"
	  "       space template export NAME -o FILE|- [--format rootfs|oci]   (a tar of the tree, or an OCI image\n"
	  "       archive with the image's Env/WorkingDir/User/Entrypoint/Cmd; no kernel, no memory snapshot)\n"
	  "       space template send NAME [--parent P] -o FILE|-   (a btrfs send stream of the template behind a\n"
	  "       header: its identity and its files' digest; --parent: only what differs from P, a template the\n"
	  "       receiving host has; no memory snapshot, no jails' tree)\n"
	  "       space template receive [NAME] [-i FILE|-] [--max-bytes SIZE] [--json]   (applied by a confined\n"
	  "       helper into a quarantine subvolume; kept only when its files' digest is the sender's)\n"
	  "       space template ls [--json]\n"
	  "       space template rm NAME [--force]\n"
	  "       space template snapshot NAME [--cpus N] [--memory SIZE] | --drop\n"
	  "       space template set-pool NAME N\n"
	  "       space template set-snapshots NAME --every DURATION [--keep K] | --off\n"
	  "       space template set-start NAME [--wait-port P] -- CMD... | --none   (run in every sandbox made\n"
	  "       from it, on its own; with --wait-port a create returns once P listens inside, at most 60 s)\n"
	  "       space template push|pull NAME HOST [--server http://H:P|unix:/PATH] [--key-file F] [--json]\n"
	  "       (a cluster: NAME to or from host HOST, asked of --server, default $SPACE_SERVER or\n"
	  "       http://127.0.0.1:8080; the key from $SPACE_API_KEY or --key-file; docs/cluster.md)" },
	{ "run", cmd_run, "run a command in a fresh sandbox, then destroy it",
	  "run [--template T] [--isolation vm|jail] [--cpus N] [--memory SIZE] [--env K=V]... [--cwd D]\n"
	  "       [--timeout D] [--exec-timeout D] [--snapshot-every D [--snapshot-keep K]] [-i] [-t] [NETWORK]\n"
	  "       [--user UID[:GID]] [-- CMD...]   (no CMD: the template image's Entrypoint and Cmd)\n"
	  "NETWORK (default: no egress): [--allow HOST[:PORT]]... [--secret NAME=env:VAR|file:PATH|secret:REG]...\n"
	  "       [--secret REG]... (REG: a registered secret, see `space secret`)\n"
	  "       [--inject 'HOST:Header=Value ${NAME}']... [--policy FILE.json] [--resolve NAME=IP[:PORT]]... "
	  "[--ca-file F]",
	  "Creates a sandbox from the template (default base), runs CMD in it with its output streamed,\n"
	  "destroys the sandbox and exits with CMD's exit status (128+N if a signal N ended it, 124 on\n"
	  "--exec-timeout). Ctrl-C is forwarded to CMD. The sandbox is tethered to this process: if it\n"
	  "is killed (even with SIGKILL), the sandbox shuts down and the next `space ls` removes it.\n\n"
	  "  --template T       template to clone (default: base)\n"
	  "  --isolation MODE   vm or jail (namespaces: a weaker boundary, shares the host kernel); default:\n"
	  "                     the state directory's (`space init --isolation`)\n"
	  "  --cpus N           CPUs (default 1; `nproc` inside says N: docs/jail.md)\n"
	  "  --memory SIZE      memory limit: 512 (MiB), 1G, 1536M (default 512 MiB)\n"
	  "  --env K=V          environment for CMD (repeatable)\n"
	  "  --cwd DIR          working directory\n"
	  "  --timeout D        lifetime of the sandbox: 90 (seconds), 10m, 2h, 1d (at most 366d)\n"
	  "  --exec-timeout D   kill CMD after D (at most 1d)\n"
	  "  --user UID[:GID]   run CMD as this user (default: the template's, an image's User, else root)\n"
	  "  -i, -t             forward stdin; run on a terminal\n\n"
	  "Without CMD, runs what the template's image names: its Entrypoint followed by its Cmd.\n" },
	{ "create", cmd_create, "create a sandbox and print its id",
	  "create [--template T] [--isolation vm|jail] [--cpus N] [--memory SIZE] [--env K=V]... [--timeout D] "
	  "[NETWORK] [--json]\n"
	  "       [--snapshot-every D [--snapshot-keep K]]   (a read-only disk snapshot every D, the\n"
	  "       last K (default 5) kept, as checkpoints named auto-<unix time>)" },
	{ "events", cmd_events, "show a sandbox's events (lifecycle, refused egress)", "events ID [--json]" },
	{ "exec", cmd_exec, "run a command in a sandbox",
	  "exec [--env K=V]... [--cwd DIR] [--user UID[:GID]] [-i] [-t] [--exec-timeout D] ID -- CMD...\n"
	  "       (defaults: the template image's Env, WorkingDir and User; never its Entrypoint or Cmd)\n"
	  "       space exec --rollback-on-failure [--checkpoint-first] ID -- CMD...   (a failed command returns\n"
	  "       the sandbox to its newest checkpoint, or to one taken just before it)" },
	{ "cp", cmd_cp, "copy a file into or out of a sandbox", "cp [--max-size SIZE] SRC DST   (one of them ID:/path)",
	  "One side is ID:/path in a sandbox, the other a local path or - (stdin/stdout); a local\n"
	  "directory receives the file under its own name. A copy out of a sandbox is refused above\n"
	  "--max-size (default 1G; units K, M, G, T), keeps holes, and leaves nothing behind when\n"
	  "it fails or is interrupted (an existing destination is kept as it was).\n" },
	{ "port", cmd_port, "forward a local TCP port to a port a sandbox listens on (until Ctrl-C)",
	  "port ID PORT [--listen ADDR:PORT] [--json]   (default 127.0.0.1:PORT, or an ephemeral port when it is\n"
	  "       taken; each connection goes through the sandbox's agent to its own 127.0.0.1:PORT; --json\n"
	  "       prints {\"listen\": \"ADDR:PORT\", \"port\": PORT})" },
	{ "ls", cmd_ls, "list sandboxes (EXPIRES: time left of its lifetime, - for none)", "ls [--json]" },
	{ "rm", cmd_rm, "destroy sandboxes (running, failed or half-created) and their events",
	  "rm [--keep-events] [--with-checkpoints] [-f] ID... | --all | --older-than DURATION [--json]" },
	{ "logs", cmd_logs, "show a sandbox's own log: start-up lines and errors, not commands' output",
	  "logs [--raw] ID\n"
	  "       (commands' output goes to whoever ran them: `space run` and `space exec` stream it; control\n"
	  "       bytes are escaped, --raw prints the log as stored)" },
	{ "timeout", cmd_timeout, "set a sandbox's lifetime to end DURATION from now (0: no limit; at most 366d)",
	  "timeout ID DURATION [--json]   (DURATION: 90 (seconds), 10m, 2h, 1d)" },
	{ "stats", cmd_stats, "show what a sandbox uses now: CPU (over half a second), memory, disk", "stats ID [--json]" },
	{ "pause", cmd_pause, "freeze every process of a sandbox", "pause ID [--json]" },
	{ "resume", cmd_resume, "thaw a paused sandbox", "resume ID [--json]" },
	{ "checkpoint", cmd_checkpoint,
	  "snapshot a sandbox (vm: disk, memory and devices; jail: disk) and print the checkpoint id",
	  "checkpoint ID [--name NAME] [--json]\n"
	  "       space checkpoint rm CP..." },
	{ "checkpoints", cmd_checkpoints, "list checkpoints, of one sandbox or all", "checkpoints [ID] [--json]" },
	{ "rollback", cmd_rollback,
	  "return a sandbox to one of its checkpoints (vm: its processes continue from it; jail: they restart)",
	  "rollback ID CP [--json]   (CP: a checkpoint id, or the name of one of ID's)" },
	{ "fork", cmd_fork, "start new sandboxes from a checkpoint",
	  "fork [ID] CP [--count N] [--timeout DURATION] [--json]   (CP: a checkpoint id, or a name: of sandbox ID's, "
	  "else unique; a fork's lifetime is what is left of the sandbox's unless --timeout)" },
	{ "kernel", cmd_kernel, "list, fetch and prepare the kernels VM sandboxes boot",
	  "kernel ls [--json]\n       space kernel fetch [--json]\n       space kernel prepare [--template NAME|DIR] [--json]" },
	{ "vm-boot", cmd_vm_boot, "boot a kernel in the microVMM and stream its serial console",
	  "vm-boot --kernel IMG [--initrd F] [--cmdline S] [--disk FILE[:ro]]... [--cpus N] [--memory SIZE] "
	  "[--timeout D]",
	  "Boots IMG (bzImage or vmlinux ELF) with the Linux 64-bit boot protocol and streams the serial\n"
	  "console to stdout. Exits 0 when the guest powers off; see `space-vmm --help` for the other\n"
	  "exit statuses.\n" },
	{ "serve", cmd_serve, "serve the HTTP API (native /v1) over this state directory",
	  "serve [--listen 127.0.0.1:8080] [--unix PATH [--unix-mode 0666]] [--max-upload SIZE]\n"
	  "       [--max-image-upload SIZE] [--max-download SIZE]\n"
	  "       [--max-connections N] [--connection-timeout D]\n"
	  "       [--request-timeout D] [--allow-resolve CIDR]... [--domain DOMAIN] [--state DIR]\n"
	  "       [--cluster CONNINFO --cluster-listen IP:PORT --cluster-url https://HOST:PORT --cluster-tls DIR\n"
	  "        [--cluster-host NAME] [--cluster-capacity N] [--cluster-heartbeat D] [--cluster-lost-after D]]\n"
	  "       (one host of a cluster: docs/cluster.md)\n"
	  "       (a request with E2b-Sandbox-Id and E2b-Sandbox-Port headers, or for Host PORT-ID.DOMAIN, goes to\n"
	  "       that port of the sandbox, with its access token: docs/e2b.md)" },
	{ "cluster", cmd_cluster, "the hosts and sandboxes of a cluster of `space serve --cluster` hosts",
	  "cluster init --cluster CONNINFO [--json]   (creates or migrates the schema; CONNINFO: libpq's, or\n"
	  "       sqlite:/ABSOLUTE/PATH for servers on one machine)\n"
	  "       space cluster hosts --cluster CONNINFO [--json]\n"
	  "       space cluster ls --cluster CONNINFO [--host NAME] [--all] [--json]   (--all: also destroyed ones)\n"
	  "       space cluster ca DIR   (the cluster's CA: DIR/ca.pem, DIR/ca.key)\n"
	  "       space cluster cert NAME --ca DIR --out DIR   (host NAME's certificate, for serve --cluster-tls)\n"
	  "       (CONNINFO: a PostgreSQL connection string or URI; SPACE_CLUSTER is the default)" },
	{ "secret", cmd_secret, "register, list and remove the secrets network policies name (secret:NAME)",
	  "secret set NAME [--from-file FILE | --from-env VAR]   (else the value is read from stdin)\n"
	  "       space secret ls [--json]   (names and times, never values)\n"
	  "       space secret rm NAME..." },
	{ "apikey", cmd_apikey, "create, list and remove API keys of `space serve`",
	  "apikey create [--name NAME] [--uid UID|USER] [--json]\n"
	  "       space apikey grant ID --uid UID|USER|none   (a caller of serve --unix with that uid acts with it)\n"
	  "       space apikey ls [--json]\n"
	  "       space apikey rm ID" },
	{ "doctor", cmd_doctor, "check what this host can run (KVM, emulation, pool, namespaces...)",
	  "doctor [--json] [--verbose]",
	  "Checks /dev/kvm, whether guest kernel code runs natively or is emulated (timed in a throwaway\n"
	  "VM), the helpers, a guest kernel, the pool, loop devices, namespaces, seccomp, Landlock, TAP and\n"
	  "cgroups. Exit status 0 when at least one isolation mode is usable, 1 otherwise.\n"
	  "\n--verbose also lists each helper (space-vmm, space-gateway, space-snapd, space-logcap) with the\n"
	  "uid it runs as, its capabilities and the size of its seccomp filter (rules per thread role), as\n"
	  "the installed binary describes itself (`HELPER --describe-sandbox`), and checks that every\n"
	  "gateway running now has its own uid, no capabilities and its filter.\n" },
	{ "bench", cmd_bench, "measure sandbox TTI, bursts, sustained rate and density here, beside bubblewrap",
	  "bench [--short] [--runs N] [--seconds T] [--clients C1,C2,...] [--burst B] [--live K] [--bwrap PATH]\n"
	  "       [--vm-template NAME]   (root; a throwaway state directory unless --state DIR is given)",
	  "  --short    CI mode: 20 runs, 10 s at 1 and 16 clients, burst 100, 100 live\n"
	  "  default    200 runs, 60 s at 1,4,16,64,256 clients, burst 100, 1000 live\n"
	  "  --state    use this initialized state directory (else a throwaway one with a loop pool)\n"
	  "  --vm-template  a template with a kernel, for the VM rows where KVM is usable\n"
	  "Prints a text report (figures, and ratios against bubblewrap); it has no --json output.\n" },
	{ "version", cmd_version, "print the version", "version [--json]" },
};

const char *const cli_global_options[][2] = {
	{ "--state DIR", "state directory (default $SPACE_STATE_DIR, else /var/lib/space)" },
	{ "--json", "machine-readable output; a failure is a JSON document too (docs/cli-json.md)" },
	{ "-v", "log what the library does (on stderr)" },
	{ NULL, NULL },
};

const struct cli_command *cli_commands(size_t *ret_n)
{
	*ret_n = sizeof(commands) / sizeof(commands[0]);
	return commands;
}

const struct cli_command *cli_find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void print_help(FILE *f)
{
	fprintf(f,
		"space %s — disposable sandboxes for AI agents\n\n"
		"usage: space [--state DIR] [--json] [-v] COMMAND [ARGS...]\n\n"
		"commands:\n",
		space_version());
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].usage)
			fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nglobal options (anywhere before \"--\"):\n");
	for (size_t i = 0; cli_global_options[i][0]; i++)
		fprintf(f, "  %-11s  %s\n", cli_global_options[i][0], cli_global_options[i][1]);
	fprintf(f, "\n`space COMMAND --help` describes a command. Exit status: 0 ok, 1 failure, 2 usage error.\n");
}

static void log_to_stderr(int level, const char *msg, void *userdata)
{
	const char *tag = level <= SPACE_LOG_ERROR ? "error" : level <= SPACE_LOG_WARNING ? "warning" : "info";
	if (level >= SPACE_LOG_DEBUG)
		tag = "debug";
	/* Library lines may quote a sandbox (its agent's errors, names it chose): escaped, one line each. */
	char safe[4 * 1024 + 1];
	util_escape_text(safe, sizeof(safe), msg, strlen(msg), UTIL_ESC_KEEP_TAB | UTIL_ESC_KEEP_BACKSLASH);
	fprintf(stderr, "space: %s: %s\n", tag, safe);
}

space_ctx *cli_ctx(struct cli *cli)
{
	if (cli->ctx)
		return cli->ctx;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = cli->state_dir;
	o.log = log_to_stderr;
	o.log_level = cli->verbose >= 2 ? SPACE_LOG_DEBUG : cli->verbose ? SPACE_LOG_INFO : SPACE_LOG_WARNING;
	int r = space_ctx_new(&o, &cli->ctx);
	if (r < 0) {
		cli_fail_detail(r, NULL, "create context");
		cli_json_error_flush();
		exit(EXIT_FAIL);
	}
	return cli->ctx;
}

/* --json: the first failure of the command, printed as a JSON document when it fails (cli.h). */
static struct {
	bool on, printed, have;
	char code[32];
	char message[1024];
	const char *usage;
} json_err;

static void record_error(const char *code, const char *message, const char *usage)
{
	if (!json_err.on || json_err.have)
		return;
	json_err.have = true;
	snprintf(json_err.code, sizeof(json_err.code), "%s", code);
	snprintf(json_err.message, sizeof(json_err.message), "%s", message);
	json_err.usage = usage;
}

static const char *errno_code(int r)
{
	const char *name = r < 0 ? strerrorname_np(-r) : NULL;
	return name ? name : "EIO";
}

void cli_json_errors(bool on)
{
	json_err.on = on;
}

cJSON *cli_json_error(void)
{
	if (!json_err.have)
		return NULL;
	cJSON *e = cJSON_CreateObject();
	if (!e)
		return NULL;
	cJSON_AddStringToObject(e, "code", json_err.code);
	cJSON_AddStringToObject(e, "message", json_err.message);
	if (json_err.usage) {
		char u[4096];
		snprintf(u, sizeof(u), "space %s", json_err.usage);
		cJSON_AddStringToObject(e, "usage", u);
	}
	return e;
}

void cli_json_error_flush(void)
{
	if (!json_err.on || !json_err.have || json_err.printed)
		return;
	cJSON *j = cJSON_CreateObject();
	if (j)
		cJSON_AddItemToObject(j, "error", cli_json_error());
	cli_print_json(j);
}

static void print_error(int r, const char *message)
{
	fprintf(stderr, "space: %s\n", message);
	record_error(errno_code(r), message, NULL);
}

static int fail_v(int r, const char *detail, const char *fmt, va_list ap)
{
	char what[512], msg[512 + 4 * 1024 + 3];
	vsnprintf(what, sizeof(what), fmt, ap);
	if (detail && *detail) {
		/* The detail may quote the sandbox (see log_to_stderr). */
		char safe[4 * 1024 + 1];
		util_escape_text(safe, sizeof(safe), detail, strlen(detail),
				 UTIL_ESC_KEEP_TAB | UTIL_ESC_KEEP_BACKSLASH);
		snprintf(msg, sizeof(msg), "%s: %s", what, safe);
	} else
		snprintf(msg, sizeof(msg), "%s: %s", what, space_strerror(r));
	print_error(r, msg);
	return EXIT_FAIL;
}

int cli_fail(struct cli *cli, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fail_v(r, cli->ctx ? space_ctx_last_error(cli->ctx) : "", fmt, ap);
	va_end(ap);
	return EXIT_FAIL;
}

int cli_fail_detail(int r, const char *detail, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fail_v(r, detail, fmt, ap);
	va_end(ap);
	return EXIT_FAIL;
}

int cli_error(int r, const char *fmt, ...)
{
	char msg[1024], safe[4 * 1024 + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* It may quote what the caller or a sandbox named (an id, a path). */
	util_escape_text(safe, sizeof(safe), msg, strlen(msg), UTIL_ESC_KEEP_TAB | UTIL_ESC_KEEP_BACKSLASH);
	print_error(r, safe);
	return EXIT_FAIL;
}

int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "space: %s\n", msg);
	if (cmd && cmd->usage)
		fprintf(stderr, "usage: space %s\n(see `space %s --help`)\n", cmd->usage, cmd->name);
	record_error("usage", msg, cmd ? cmd->usage : NULL);
	return EXIT_USAGE;
}

int cli_parse_mib(const struct cli_command *cmd, const char *opt, const char *s, uint64_t min, uint64_t max,
		  uint32_t *ret)
{
	uint64_t v;
	if (util_parse_mib(s, &v) < 0 || v < min || v > max) {
		char lo[32], hi[32];
		cli_usage_error(cmd, "%s needs a size from %s to %s (a bare number is MiB; units K, M, G, T), not '%s'",
				opt, util_format_size(min << 20, lo, sizeof(lo)), util_format_size(max << 20, hi, sizeof(hi)),
				s);
		return -1;
	}
	*ret = (uint32_t)v;
	return 0;
}

int cli_parse_duration(const struct cli_command *cmd, const char *opt, const char *s, uint64_t min, uint64_t max,
		       uint32_t *ret)
{
	uint64_t v;
	if (util_parse_duration(s, &v) < 0 || v < min || v > max) {
		char lo[32], hi[32];
		cli_usage_error(cmd, "%s needs a duration from %s to %s (a bare number is seconds; units s, m, h, d), "
				"not '%s'", opt, cli_duration(min, lo, sizeof(lo)), cli_duration(max, hi, sizeof(hi)), s);
		return -1;
	}
	*ret = (uint32_t)v;
	return 0;
}

const char *cli_duration(uint64_t s, char *buf, size_t len)
{
	/* The two largest units are enough to read at a glance; 0 is "0s". */
	static const struct { char unit; uint64_t secs; } units[] = { { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 },
								       { 's', 1 } };
	size_t i = 0, used = 0, shown = 0;
	buf[0] = '\0';
	while (i < sizeof(units) / sizeof(units[0]) && units[i].secs > s && units[i].secs > 1)
		i++;
	for (; i < sizeof(units) / sizeof(units[0]) && shown < 2 && used < len; i++, shown++) {
		uint64_t n = s / units[i].secs;
		s %= units[i].secs;
		if (!n && shown)
			break;
		used += (size_t)snprintf(buf + used, len - used, "%llu%c", (unsigned long long)n, units[i].unit);
		if (!s)
			break;
	}
	return buf;
}

int cli_help(const struct cli_command *cmd)
{
	printf("usage: space %s\n\n%s.\n", cmd->usage, cmd->summary);
	if (cmd->help)
		printf("\n%s", cmd->help);
	return EXIT_OK;
}

bool cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

int cli_print_json(cJSON *j)
{
	if (!j) {
		fprintf(stderr, "space: out of memory\n");
		return EXIT_FAIL;
	}
	char *s = cJSON_Print(j);
	cJSON_Delete(j);
	/* Strings may hold sandbox-made text: no DEL or C1 control reaches the terminal raw, nor bad UTF-8. */
	char *safe = s ? util_json_terminal_safe(s, strlen(s)) : NULL;
	free(s);
	if (!safe) {
		fprintf(stderr, "space: out of memory\n");
		return EXIT_FAIL;
	}
	puts(safe);
	free(safe);
	json_err.printed = true;
	return EXIT_OK;
}

void cli_progress(const char *stage, uint64_t done, uint64_t total, void *userdata)
{
	if (total)
		fprintf(stderr, "space: %s (%llu/%llu)\n", stage, (unsigned long long)done, (unsigned long long)total);
	else
		fprintf(stderr, "space: %s...\n", stage);
}

static char progress_stage[160];
static bool progress_open; /* a terminal line without its newline */
static bool progress_done; /* the stage's last line is out */

void cli_progress_end(void)
{
	if (progress_open)
		fputc('\n', stderr);
	progress_open = false;
	progress_stage[0] = '\0';
}

void cli_progress_bytes(const char *stage, uint64_t done, uint64_t total, void *userdata)
{
	bool tty = isatty(STDERR_FILENO);
	bool same = !strcmp(stage, progress_stage);
	if (!same) {
		cli_progress_end();
		snprintf(progress_stage, sizeof(progress_stage), "%s", stage);
		progress_done = false;
	}
	if (progress_done)
		return;
	char d[32], t[32];
	if (!total) {
		if (!same)
			fprintf(stderr, "space: %s...\n", stage);
		return;
	}
	util_format_size(done, d, sizeof(d));
	util_format_size(total, t, sizeof(t));
	if (tty) {
		fprintf(stderr, "\r\033[Kspace: %s %s/%s (%llu%%)", stage, d, t,
			(unsigned long long)(done * 100 / total));
		progress_open = true;
		if (done >= total) {
			fputc('\n', stderr);
			progress_open = false;
		}
	} else if (!same || done >= total) {
		fprintf(stderr, "space: %s %s/%s\n", stage, d, t);
	}
	progress_done = done >= total;
	fflush(stderr);
}

const char *cli_time(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "%lld", (long long)ms);
	return buf;
}

int cmd_version(struct cli *cli, int argc, char **argv)
{
	if (cli_wants_help(argc, argv))
		return cli_help(cli_find_command("version"));
	if (argc > 1)
		return cli_usage_error(cli_find_command("version"), "unexpected argument '%s'", argv[1]);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "version", space_version());
		return cli_print_json(j);
	}
	printf("space %s\n", space_version());
	return EXIT_OK;
}

/*
 * Takes the global options out of argv (up to a "--"), so they may stand anywhere on the line:
 * `space template ls --json --state /tmp/s`. Returns -1 on a usage error.
 */
static int take_global_options(struct cli *cli, int *argc, char **argv)
{
	int out = 0;
	bool rest = false;
	for (int i = 0; i < *argc; i++) {
		const char *a = argv[i];
		if (!rest && !strcmp(a, "--")) {
			rest = true;
		} else if (!rest && !strcmp(a, "--json")) {
			cli->json = true;
			continue;
		} else if (!rest && (!strcmp(a, "-v") || !strcmp(a, "--verbose"))) {
			cli->verbose++;
			continue;
		} else if (!rest && !strcmp(a, "--state")) {
			if (i + 1 >= *argc)
				return -1;
			cli->state_dir = argv[++i];
			continue;
		} else if (!rest && !strncmp(a, "--state=", 8)) {
			cli->state_dir = a + 8;
			continue;
		}
		argv[out++] = argv[i];
	}
	argv[out] = NULL;
	*argc = out;
	return 0;
}

int main(int argc, char **argv)
{
	struct cli cli = { 0 };
	int rc = take_global_options(&cli, &argc, argv);
	cli_json_errors(cli.json);
	if (rc < 0) {
		cli_usage_error(NULL, "--state needs a directory");
		cli_json_error_flush();
		return EXIT_USAGE;
	}
	if (argc < 2) {
		print_help(stderr);
		cli_usage_error(NULL, "no command given");
		cli_json_error_flush();
		return EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "help") && argc == 3 && !strcmp(argv[2], "--man"))
		return cli_man(stdout) < 0 ? EXIT_FAIL : EXIT_OK; /* hidden: the build makes space(1) with it */
	if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
		print_help(stdout);
		return EXIT_OK;
	}
	if (!strcmp(name, "--version"))
		name = "version";
	const struct cli_command *cmd = cli_find_command(name);
	if (!cmd) {
		cli_usage_error(NULL, "unknown command '%s' (see `space --help`)", name);
		cli_json_error_flush();
		return EXIT_USAGE;
	}
	rc = cmd->run(&cli, argc - 1, argv + 1);
	if (rc != EXIT_OK)
		cli_json_error_flush();
	space_ctx_free(cli.ctx);
	return rc;
}
