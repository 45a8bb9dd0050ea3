/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/fleet (also `space bench`): what a fleet of disposable sandboxes costs on this host, through the
 * public API (space.h), side by side with bubblewrap running the same command over a fresh btrfs snapshot
 * of the same template tree:
 *   - TTI, create -> the first exec(`true`) returns: cold (a template clone) and from the warm pool;
 *     exec round trip in a running sandbox; destroy as the caller sees it;
 *   - burst: B creates issued at once from threads;
 *   - sustained create -> exec -> destroy loops from N clients (threads) for T seconds each;
 *   - density: K live idle sandboxes (MemAvailable delta and host-side RSS/PSS per sandbox), and TTI of
 *     one more while they live;
 *   - a leak check at the end: no process, mount, loop device, cgroup, netns or subvolume of any sandbox
 *     made is left.
 * Prints a table and one final line (issue 16's format) a script can read. Never fails on time: exit 0
 * when it measured without errors and leaks, 1 otherwise, 77 (with the reason) when it cannot run here.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet.h"
#include "util/util.h"

#define SKIP 77

void fleet_settle(struct fleet *f)
{
	fleet_settle_keep(f, 0);
}

void fleet_settle_keep(struct fleet *f, unsigned keep)
{
	if (!f->pool[0])
		return;
	char sandboxes[4300];
	snprintf(sandboxes, sizeof(sandboxes), "%s/sandboxes", f->pool);
	long ms = bu_settle(f->pool, sandboxes, keep, 60000);
	f->settles++;
	if (ms >= 0)
		f->settle_ms += (double)ms;
	else
		f->settle_timeouts++;
}

void fleet_note_id(struct fleet *f, const char *id)
{
	pthread_mutex_lock(&f->lock);
	if (f->n_ids == f->cap_ids) {
		size_t cap = f->cap_ids ? 2 * f->cap_ids : 1024;
		char (*p)[32] = realloc(f->ids, cap * sizeof(*p));
		if (p) {
			f->ids = p;
			f->cap_ids = cap;
		}
	}
	if (f->n_ids < f->cap_ids)
		snprintf(f->ids[f->n_ids++], 32, "%s", id);
	pthread_mutex_unlock(&f->lock);
}

void fleet_error(struct fleet *f, const char *fmt, ...)
{
	pthread_mutex_lock(&f->lock);
	if (!f->errors++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(f->first_error, sizeof(f->first_error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&f->lock);
}

int fleet_cycle(struct fleet *f, space_ctx *ctx, bool destroy, double *ret_tti, double *ret_create,
		double *ret_destroy, space_sandbox **ret_sb)
{
	static const char *const argv[] = { "true", NULL };
	struct space_sandbox_options so = SPACE_SANDBOX_OPTIONS_INIT;
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
	space_sandbox *sb = NULL;
	so.template_name = f->template_name;
	so.isolation = f->isolation;
	eo.argv = argv;
	uint64_t t0 = util_now_ns();
	int r = space_sandbox_create(ctx, &so, &sb);
	if (r < 0) {
		fleet_error(f, "create: %s (%s)", space_strerror(r), space_ctx_last_error(ctx));
		return r;
	}
	fleet_note_id(f, space_sandbox_id(sb));
	if (f->steps && space_sandbox_create_steps(sb))
		fleet_steps_add(f->steps, space_sandbox_create_steps(sb));
	if (ret_create)
		*ret_create = bu_ms_since(t0);
	r = space_sandbox_exec(sb, &eo, &res);
	if (ret_tti)
		*ret_tti = bu_ms_since(t0);
	if (r < 0)
		fleet_error(f, "exec: %s (%s)", space_strerror(r), space_ctx_last_error(ctx));
	else if (!res.exited || res.exit_code != 0) {
		fleet_error(f, "`true` ended with exit %d signal %d", res.exit_code, res.signal);
		r = -EPROTO;
	}
	if (destroy || r < 0) {
		uint64_t t1 = util_now_ns();
		int rd = space_sandbox_destroy(sb);
		if (ret_destroy)
			*ret_destroy = bu_ms_since(t1);
		if (rd < 0) {
			fleet_error(f, "destroy: %s (%s)", space_strerror(rd), space_ctx_last_error(ctx));
			r = r < 0 ? r : rd;
		}
		space_sandbox_free(sb);
		sb = NULL;
	}
	if (ret_sb)
		*ret_sb = sb;
	return r;
}

void fleet_steps_add(struct fleet_steps *st, const char *text)
{
	for (const char *p = text; p && *p;) {
		char name[24];
		double ms;
		int used = 0;
		/* "NAME[ NAME...] MS" up to ", " or " = " */
		const char *end = strstr(p, ", "), *eq = strstr(p, " = ");
		if (!end || (eq && eq < end))
			end = eq;
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *sp = memrchr(p, ' ', len);
		if (!sp || sscanf(sp + 1, "%lf%n", &ms, &used) != 1)
			return;
		snprintf(name, sizeof(name), "%.*s", (int)(sp - p), p);
		unsigned i = 0;
		while (i < st->n && strcmp(st->step[i].name, name))
			i++;
		if (i == st->n && st->n < FLEET_STEPS_MAX)
			snprintf(st->step[st->n++].name, sizeof(st->step[0].name), "%s", name);
		if (i < st->n)
			bu_series_add(&st->step[i].ms, ms);
		if (!end || end == eq)
			return;
		p = end + 2;
	}
}

/* ---- the table ------------------------------------------------------------------------------------- */

static void fmt_ms(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "na");
	else
		snprintf(buf, len, fabs(v) < 10 ? "%.2f" : fabs(v) < 1000 ? "%.1f" : "%.0f", v);
}

/* One row: a figure, libspace's value, the peer's and the ratio (libspace / peer). */
static void row(const char *name, double ours, double peer, const char *unit)
{
	char a[32], b[32], c[32] = "";
	fmt_ms(a, sizeof(a), ours);
	fmt_ms(b, sizeof(b), peer);
	if (!isnan(ours) && !isnan(peer) && peer > 0)
		snprintf(c, sizeof(c), "%.2fx", ours / peer);
	else
		snprintf(c, sizeof(c), "-");
	printf("  %-44s %12s %12s %9s  %s\n", name, a, isnan(peer) ? "-" : b, c, unit);
}

static void row_text(const char *name, const char *text)
{
	printf("  %-44s %s\n", name, text);
}

/* ---- host checks ----------------------------------------------------------------------------------- */

/* space_doctor's report on the state directory, parsed; NULL with why in *why. */
static cJSON *doctor_report(const char *state, char *why, size_t len)
{
	struct space_ctx_options co = SPACE_CTX_OPTIONS_INIT;
	co.state_dir = state;
	space_ctx *ctx = NULL;
	char *json = NULL;
	if (space_ctx_new(&co, &ctx) < 0 || space_doctor(ctx, 0, &json) < 0) {
		snprintf(why, len, "space_doctor failed: %s", ctx ? space_ctx_last_error(ctx) : "no context");
		space_ctx_free(ctx);
		return NULL;
	}
	space_ctx_free(ctx);
	cJSON *j = cJSON_Parse(json);
	free(json);
	if (!j)
		snprintf(why, len, "space_doctor's report does not parse");
	return j;
}

/* The report's check NAME: its status and detail, or NULL. */
static const char *doctor_check(const cJSON *report, const char *name, const char **ret_status)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(report, "checks"))
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
		if (n && !strcmp(n, name)) {
			*ret_status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "status"));
			return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "detail"));
		}
	}
	return NULL;
}

/* Why this isolation cannot run here (the report's verdict, or why there is none), or NULL. */
static const char *doctor_says(const cJSON *j, const char *isolation, char *why, size_t len)
{
	if (!j)
		return why; /* doctor_report said why */
	cJSON *iso = cJSON_GetObjectItemCaseSensitive(j, isolation);
	const char *summary = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(iso, "summary"));
	bool usable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(iso, "usable"));
	snprintf(why, len, "%s", summary ? summary : "space doctor gave no verdict");
	/* The summary points at the failed checks: name the first (for vm, the kvm check) with its detail. */
	cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "checks"))
	{
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "status"));
		const char *detail = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "detail"));
		if (!usable && name && st && detail && !strcmp(st, "fail") &&
		    (strcmp(isolation, "vm") ? true : !strcmp(name, "kvm"))) {
			size_t k = strlen(why);
			snprintf(why + k, len - k, " (%s: %s)", name, detail);
			break;
		}
	}
	return usable ? NULL : why;
}

static const char *cannot_run(char *why, size_t len)
{
	if (geteuid() != 0)
		return "needs root (loop-mounted btrfs pool, jail namespaces)";
	if (access("/dev/loop-control", F_OK) < 0)
		return "no loop devices";
	if (access("/bin/busybox", X_OK) < 0)
		return "no /bin/busybox (install busybox-static)";
	pid_t pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0);
	int status = 1;
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(why, len, "cannot create user/mount/pid/net/ipc/uts namespaces here");
		return why;
	}
	return NULL;
}

/* ---- the phases ------------------------------------------------------------------------------------ */

struct results {
	struct bu_series tti, create, destroy, peer_tti, peer_destroy, pool_tti, exec;
	struct fleet_steps cold_steps, pool_steps;
	unsigned pool_taken;
	struct fleet_burst burst;
	struct bu_series http_burst;
	unsigned http_errors;
	char http_why[256];         /* why the HTTP burst was not measured, "" when it was */
	struct fleet_sustained sus[FLEET_CONC_MAX];
	struct fleet_density dens;
	char subvol_dir[4200];
};

/* Cold TTI, alternating with the peer; the caller's destroy. */
static void phase_cold(struct fleet *f, space_ctx *ctx, struct results *R)
{
	for (unsigned i = 0; i < f->runs; i++) {
		double tti, create, destroy, ptti, pdestroy;
		fleet_settle(f);
		f->steps = &R->cold_steps;
		int r = fleet_cycle(f, ctx, true, &tti, &create, &destroy, NULL);
		f->steps = NULL;
		if (r == 0) {
			bu_series_add(&R->tti, tti);
			bu_series_add(&R->create, create);
			bu_series_add(&R->destroy, destroy);
		}
		if (f->have_peer) {
			fleet_settle(f);
			int pr = bu_peer_run(&f->peer, 0, &ptti, &pdestroy);
			if (pr == 0) {
				bu_series_add(&R->peer_tti, ptti);
				bu_series_add(&R->peer_destroy, pdestroy);
			} else
				fleet_error(f, "peer run: %s", strerror(-pr));
		}
	}
}

/* TTI from the warm pool: filled (untimed) in batches of up to 64, each pooled sandbox taken once. */
static void phase_pool(struct fleet *f, space_ctx *ctx, struct results *R)
{
	unsigned batch = f->runs < 64 ? f->runs : 64;
	int r = space_template_set_warm_pool(ctx, f->template_name, batch);
	if (r < 0) {
		fleet_error(f, "set pool: %s", space_ctx_last_error(ctx));
		return;
	}
	for (unsigned done = 0; done < f->runs;) {
		struct space_template_warm_info before = SPACE_TEMPLATE_WARM_INFO_INIT, after = SPACE_TEMPLATE_WARM_INFO_INIT;
		if ((r = space_warm_pool_fill(ctx, f->template_name)) < 0 ||
		    (r = space_template_get_warm_info(ctx, f->template_name, &before)) < 0) {
			fleet_error(f, "pool fill: %s", space_ctx_last_error(ctx));
			break;
		}
		unsigned n = before.warm_pool_ready < f->runs - done ? before.warm_pool_ready : f->runs - done;
		if (n == 0) {
			fleet_error(f, "pool fill made nothing");
			break;
		}
		for (unsigned i = 0; i < n; i++, done++) {
			double tti;
			f->steps = &R->pool_steps;
			int rc = fleet_cycle(f, ctx, true, &tti, NULL, NULL, NULL);
			f->steps = NULL;
			if (rc == 0)
				bu_series_add(&R->pool_tti, tti);
		}
		if (space_template_get_warm_info(ctx, f->template_name, &after) == 0 && before.warm_pool_ready >= after.warm_pool_ready)
			R->pool_taken += before.warm_pool_ready - after.warm_pool_ready;
	}
	if (space_template_set_warm_pool(ctx, f->template_name, 0) < 0)
		fleet_error(f, "drain pool: %s", space_ctx_last_error(ctx));
}

/* Exec round trip of `true` in one running sandbox; also learns where sandbox subvolumes live. */
static void phase_exec(struct fleet *f, space_ctx *ctx, struct results *R)
{
	space_sandbox *sb = NULL;
	if (fleet_cycle(f, ctx, false, NULL, NULL, NULL, &sb) < 0)
		return;
	struct space_sandbox_info *info = NULL;
	if (space_sandbox_get_info(sb, &info) == 0) {
		snprintf(R->subvol_dir, sizeof(R->subvol_dir), "%s", info->path);
		char *slash = strrchr(R->subvol_dir, '/');
		if (slash)
			*slash = '\0';
		space_sandbox_info_free(info);
	}
	static const char *const argv[] = { "true", NULL };
	struct space_exec_options eo = SPACE_EXEC_OPTIONS_INIT;
	eo.argv = argv;
	for (unsigned i = 0; i < f->runs; i++) {
		struct space_exec_result res = SPACE_EXEC_RESULT_INIT;
		uint64_t t0 = util_now_ns();
		int r = space_sandbox_exec(sb, &eo, &res);
		if (r == 0 && res.exited && res.exit_code == 0)
			bu_series_add(&R->exec, bu_ms_since(t0));
		else
			fleet_error(f, "exec: %s", r < 0 ? space_ctx_last_error(ctx) : "non-zero exit");
	}
	if (space_sandbox_destroy(sb) < 0)
		fleet_error(f, "destroy: %s", space_ctx_last_error(ctx));
	space_sandbox_free(sb);
}

/* Everything any sandbox made left behind; waits up to 30 s for background reclaim. */
static unsigned phase_leaks(struct fleet *f, space_ctx *ctx, struct results *R, struct bu_scan *s)
{
	bu_ids_sort(f->ids, f->n_ids);
	for (int tries = 0; tries < 60; tries++) {
		bu_scan(f->ids, f->n_ids, R->subvol_dir[0] ? R->subvol_dir : NULL, s);
		if (!bu_scan_leaks(s))
			break;
		util_sleep_ms(500);
	}
	struct space_sandbox_info **list = NULL;
	size_t n = 0;
	if (space_sandbox_list(ctx, &list, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(list[i]->template_name, f->template_name)) {
				s->subvols++; /* counted with what is left: a sandbox row not destroyed */
				if (!s->first[0])
					snprintf(s->first, sizeof(s->first), "sandbox %s still %s", list[i]->id,
						 space_sandbox_status_name(list[i]->status));
			}
	space_sandbox_info_list_free(list);
	return bu_scan_leaks(s);
}

/* ---- options and the report ------------------------------------------------------------------------ */

static int parse_conc(struct fleet *f, const char *s)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", s);
	f->n_conc = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (f->n_conc == FLEET_CONC_MAX || util_parse_uint(tok, 1, 1024, &v) < 0)
			return -EINVAL;
		f->conc[f->n_conc++] = (unsigned)v;
	}
	return f->n_conc ? 0 : -EINVAL;
}

static void usage(FILE *out, const char *prog)
{
	fprintf(out,
		"usage: %s [--short] [--runs N] [--seconds T] [--clients C1,C2,...] [--burst B] [--live K]\n"
		"       [--state DIR] [--bwrap PATH] [--vm-template NAME]\n"
		"  --short    CI mode: 20 runs, 10 s at 1 and 16 clients, burst 100, 100 live\n"
		"  default    200 runs, 60 s at 1,4,16,64,256 clients, burst 100, 1000 live\n"
		"  --state    use this initialized state directory (else a throwaway one with a loop pool)\n"
		"  --vm-template  a template with a kernel, for the VM rows where KVM is usable\n",
		prog);
}

static double p(struct bu_series *s, double pct)
{
	return bu_pct(s, pct);
}

static void print_fig(char *line, size_t len, const char *key, double v, bool last)
{
	size_t k = strlen(line);
	if (isnan(v))
		snprintf(line + k, len - k, "%s=na%s", key, last ? "" : " ");
	else
		snprintf(line + k, len - k, "%s=%.2f%s", key, v, last ? "" : " ");
}

/* Each step's p50 under the row it explains (where the milliseconds go). */
static void steps_rows(struct fleet_steps *st)
{
	for (unsigned i = 0; i < st->n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "    step %s p50", st->step[i].name);
		row(name, p(&st->step[i].ms, 50), NAN, "");
	}
}

/* Prints the table; the final line goes into line (the caller prints it last). */
static void report(struct fleet *f, struct results *R, const struct bu_scan *leaks, char *line, size_t len)
{
	char name[96];
	if (f->settles)
		printf("  every timed run and phase began settled (the previous ones' reclaim and btrfs cleaning done): "
		       "%u waits, %.1f s in all, %u timed out at 60 s\n",
		       f->settles, f->settle_ms / 1000, f->settle_timeouts);
	printf("  %-44s %12s %12s %9s\n", "figure (ms unless said)", "libspace", "bwrap", "ratio");
	row("TTI cold p50 (create -> exec true returns)", p(&R->tti, 50), p(&R->peer_tti, 50), "");
	row("TTI cold p99", p(&R->tti, 99), p(&R->peer_tti, 99), "");
	row("  create p50", p(&R->create, 50), NAN, "");
	steps_rows(&R->cold_steps);
	snprintf(name, sizeof(name), "TTI warm pool p50 (%u of %zu from the pool)", R->pool_taken, R->pool_tti.n);
	row(name, p(&R->pool_tti, 50), p(&R->peer_tti, 50), "");
	row("TTI warm pool p99", p(&R->pool_tti, 99), p(&R->peer_tti, 99), "");
	steps_rows(&R->pool_steps);
	row("exec round trip p50 (true, running sandbox)", p(&R->exec, 50), NAN, "");
	row("exec round trip p99", p(&R->exec, 99), NAN, "");
	row("destroy p50 (as the caller sees it)", p(&R->destroy, 50), p(&R->peer_destroy, 50), "peer: subvol delete");
	row("destroy p99", p(&R->destroy, 99), p(&R->peer_destroy, 99), "");
	snprintf(name, sizeof(name), "burst %u at once: p50 until interactive", f->burst);
	row(name, p(&R->burst.lib, 50), p(&R->burst.peer, 50), "");
	row("  p99", p(&R->burst.lib, 99), p(&R->burst.peer, 99), "");
	row("  max", p(&R->burst.lib, 100), p(&R->burst.peer, 100), "");
	snprintf(name, sizeof(name), "  errors: libspace %u, bwrap %u", R->burst.lib_errors, R->burst.peer_errors);
	row_text(name, "");
	if (R->http_why[0])
		row_text("burst over HTTP (space serve)", R->http_why);
	else {
		snprintf(name, sizeof(name), "burst %u over HTTP (space serve): p50", f->burst);
		row(name, p(&R->http_burst, 50), p(&R->burst.peer, 50), "");
		row("  p99", p(&R->http_burst, 99), p(&R->burst.peer, 99), "");
		row("  max", p(&R->http_burst, 100), p(&R->burst.peer, 100), "");
		snprintf(name, sizeof(name), "  errors: %u", R->http_errors);
		row_text(name, "");
	}
	for (unsigned i = 0; i < f->n_conc; i++) {
		struct fleet_sustained *s = &R->sus[i];
		snprintf(name, sizeof(name), "sustained %u client(s), %u s: cycles/s", s->clients, f->seconds);
		row(name, s->rate, f->have_peer ? s->peer_rate : NAN, "per second");
		row("  cycle p50", p(&s->lib, 50), p(&s->peer, 50), "");
		row("  cycle p99", p(&s->lib, 99), p(&s->peer, 99), "");
		snprintf(name, sizeof(name), "  errors: libspace %u, bwrap %u", s->errors, s->peer_errors);
		row_text(name, "");
	}
	struct fleet_density *d = &R->dens;
	snprintf(name, sizeof(name), "density: %u live idle sandboxes (K=%u)", d->live, f->live);
	row_text(name, "");
	row("  MemAvailable delta per sandbox", d->live ? d->mem_mib_per_sb : NAN, NAN, "MiB");
	snprintf(name, sizeof(name), "  host-side RSS per sandbox (%.1f procs)", d->procs_per_sb);
	row(name, d->live ? d->rss_mib_per_sb : NAN, NAN, "MiB");
	row("  host-side PSS per sandbox", d->live ? d->pss_mib_per_sb : NAN, NAN, "MiB");
	snprintf(name, sizeof(name), "  TTI p50 at %u live", d->live);
	row(name, p(&d->tti, 50), p(&d->peer_tti, 50), "");
	steps_rows(&d->steps);
	row("  TTI p99 at K live", p(&d->tti, 99), p(&d->peer_tti, 99), "");
	row("  TTI p50 at K live / at 0", p(&d->tti, 50) / p(&R->tti, 50),
	    p(&d->peer_tti, 50) / p(&R->peer_tti, 50), "ratio");
	snprintf(name, sizeof(name), "  the leak scan sees them: %u procs, %u mounts, %u loops, %u cgroups, %u netns",
		 d->scan.procs, d->scan.mounts, d->scan.loops, d->scan.cgroups, d->scan.netns);
	row_text(name, "");
	snprintf(name, sizeof(name), "  make all / remove all (s): %.1f / %.1f", d->create_s, d->destroy_s);
	row_text(name, "");
	snprintf(name, sizeof(name), "%u", bu_scan_leaks(leaks));
	printf("  left behind (%zu sandboxes made): %s%s%s\n", f->n_ids, name, leaks->first[0] ? ", first: " : "",
	       leaks->first);
	printf("  errors: %u%s%s\n", f->errors, f->errors ? ", first: " : "", f->first_error);

	/* the line a script reads: sustained at 16 clients (or the highest below it) */
	double sustained = NAN;
	unsigned best = 0;
	for (unsigned i = 0; i < f->n_conc; i++)
		if (R->sus[i].clients == 16 || (best != 16 && R->sus[i].clients > best)) {
			best = R->sus[i].clients;
			sustained = R->sus[i].rate;
		}
	snprintf(line, len, "fleet: ");
	double tti = p(&R->tti, 50), peer = p(&R->peer_tti, 50);
	print_fig(line, len, "tti_p50_ms", tti, false);
	print_fig(line, len, "tti_p99_ms", p(&R->tti, 99), false);
	print_fig(line, len, "tti_pool_p50_ms", p(&R->pool_tti, 50), false);
	print_fig(line, len, "exec_p50_ms", p(&R->exec, 50), false);
	print_fig(line, len, "destroy_p50_ms", p(&R->destroy, 50), false);
	print_fig(line, len, "burst100_p99_ms", f->burst == 100 ? p(&R->burst.lib, 99) : NAN, false);
	print_fig(line, len, "sustained_per_s", sustained, false);
	print_fig(line, len, "idle_mib_per_sandbox", d->live ? d->mem_mib_per_sb : NAN, false);
	print_fig(line, len, "tti_at_1000_p50_ms", p(&d->tti, 50), false);
	print_fig(line, len, "peer_p50_ms", peer, false);
	print_fig(line, len, "tti_vs_peer", peer > 0 ? tti / peer : NAN, true);
}

static void results_free(struct results *R)
{
	struct bu_series *all[] = { &R->tti, &R->create, &R->destroy, &R->peer_tti, &R->peer_destroy, &R->pool_tti,
				    &R->exec, &R->burst.lib, &R->burst.peer, &R->dens.tti, &R->dens.peer_tti, &R->http_burst };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		bu_series_free(all[i]);
	for (unsigned i = 0; i < FLEET_CONC_MAX; i++) {
		bu_series_free(&R->sus[i].lib);
		bu_series_free(&R->sus[i].peer);
	}
	for (unsigned i = 0; i < FLEET_STEPS_MAX; i++) {
		bu_series_free(&R->cold_steps.step[i].ms);
		bu_series_free(&R->pool_steps.step[i].ms);
		bu_series_free(&R->dens.steps.step[i].ms);
	}
}

static int parse_args(struct fleet *f, int argc, char **argv, const char **vm_template, const char **bwrap)
{
	static const struct option longopts[] = {
		{ "short", no_argument, NULL, 's' },	      { "runs", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 't' },  { "clients", required_argument, NULL, 'c' },
		{ "burst", required_argument, NULL, 'b' },    { "live", required_argument, NULL, 'k' },
		{ "state", required_argument, NULL, 'S' },    { "bwrap", required_argument, NULL, 'B' },
		{ "vm-template", required_argument, NULL, 'V' }, { "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	/* defaults: the full run; --short first sets the CI figures, later options override either */
	f->runs = 200, f->seconds = 60, f->burst = 100, f->live = 1000;
	parse_conc(f, "1,4,16,64,256");
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--short")) {
			f->short_mode = true;
			f->runs = 20, f->seconds = 10, f->live = 100;
			parse_conc(f, "1,16");
		}
	optind = 1;
	int c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			continue;
		case 'n':
			if (util_parse_uint(optarg, 1, 100000, &v) < 0)
				return -EINVAL;
			f->runs = (unsigned)v;
			continue;
		case 't':
			if (util_parse_uint(optarg, 1, 3600, &v) < 0)
				return -EINVAL;
			f->seconds = (unsigned)v;
			continue;
		case 'c':
			if (parse_conc(f, optarg) < 0)
				return -EINVAL;
			continue;
		case 'b':
			if (util_parse_uint(optarg, 1, 1000, &v) < 0)
				return -EINVAL;
			f->burst = (unsigned)v;
			continue;
		case 'k':
			if (util_parse_uint(optarg, 0, 5000, &v) < 0)
				return -EINVAL;
			f->live = (unsigned)v;
			continue;
		case 'S':
			f->state = optarg;
			continue;
		case 'B':
			*bwrap = optarg;
			continue;
		case 'V':
			*vm_template = optarg;
			continue;
		case 'h':
			return 1;
		default:
			return -EINVAL;
		}
	}
	return optind == argc ? 0 : -EINVAL;
}

/* Every phase for one isolation; returns what was left behind (0: nothing) or -1 when it could not run. */
static int run_isolation(struct fleet *f, struct bu_env *env, char *line, size_t len)
{
	struct results R = { 0 };
	char why[512];
	space_ctx *ctx = env->ctx;
	struct space_pool_info *pi = NULL;
	if (space_pool_get_info(ctx, &pi) == 0) {
		snprintf(f->pool, sizeof(f->pool), "%s", pi->path);
		space_pool_info_free(pi);
	}
	f->have_peer = bu_peer_open(&f->peer, ctx, f->template_name, f->peer.bwrap, why, sizeof(why)) == 0;
	if (!f->have_peer)
		printf("  peer: not measured: %s\n", why);
	/* One warm-up of each (page cache, first cgroups), not counted. */
	double ms;
	if (fleet_cycle(f, ctx, true, NULL, NULL, NULL, NULL) < 0) {
		printf("fleet: %s: skipped: the warm-up failed: %s\n", f->isolation, f->first_error);
		if (f->have_peer)
			bu_peer_close(&f->peer);
		return -1;
	}
	if (f->have_peer && bu_peer_run(&f->peer, 0, &ms, NULL) < 0) {
		printf("  peer: not measured: bwrap failed its warm-up\n");
		bu_peer_close(&f->peer);
		f->have_peer = false;
	}
	printf("  [%s] cold TTI, %u runs alternating with the peer...\n", f->isolation, f->runs);
	phase_cold(f, ctx, &R);
	printf("  [%s] warm pool TTI...\n", f->isolation);
	phase_pool(f, ctx, &R);
	phase_exec(f, ctx, &R);
	printf("  [%s] burst of %u...\n", f->isolation, f->burst);
	fleet_settle(f);
	fleet_run_burst(f, env->state, &R.burst);
	printf("  [%s] burst of %u over HTTP...\n", f->isolation, f->burst);
	fleet_settle(f);
	char hwhy[200];
	if (fleet_run_burst_http(f, env->state, f->cli, &R.http_burst, &R.http_errors, hwhy, sizeof(hwhy)) < 0)
		snprintf(R.http_why, sizeof(R.http_why), "not measured: %s", hwhy);
	/*
	 * Each concurrency in two halves, in ascending order and then in descending order (ABBA): every pass
	 * leaves the host a little slower (caches of names the sandboxes used, which the kernel keeps), and in
	 * one ascending sweep the highest concurrency would always run last, on the slowest host. Over both
	 * sweeps every concurrency has the same mean position, so a drift that is linear in time cancels.
	 */
	unsigned first = (f->seconds + 1) / 2, second = f->seconds - first;
	for (unsigned k = 0; k < 2 * f->n_conc; k++) {
		unsigned i = k < f->n_conc ? k : 2 * f->n_conc - 1 - k, secs = k < f->n_conc ? first : second;
		R.sus[i].clients = f->conc[i];
		if (!secs)
			continue;
		printf("  [%s] sustained, %u client(s) for %u s (and the peer), %s half...\n", f->isolation,
		       f->conc[i], secs, k < f->n_conc ? "first" : "second");
		fleet_run_sustained(f, env->state, secs, &R.sus[i]);
	}
	if (f->live) {
		printf("  [%s] density: %u live...\n", f->isolation, f->live);
		fleet_settle(f);
		fleet_run_density(f, env->state, &R.dens);
	}
	if (f->have_peer)
		bu_peer_close(&f->peer);
	struct bu_scan leaks;
	unsigned left = phase_leaks(f, ctx, &R, &leaks);
	report(f, &R, &leaks, line, len);
	results_free(&R);
	return (int)left;
}

int fleet_main(int argc, char **argv, const char *state_dir, const char *cli)
{
	struct fleet f = { .isolation = "jail", .template_name = "fleet-bench", .state = state_dir, .cli = cli };
	const char *vm_template = NULL, *bwrap = "/usr/bin/bwrap";
	char why[512];
	int r = parse_args(&f, argc, argv, &vm_template, &bwrap);
	if (r != 0) {
		usage(r > 0 ? stdout : stderr, argv[0]);
		return r > 0 ? 0 : 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&f.lock, NULL);
	snprintf(f.peer.bwrap, sizeof(f.peer.bwrap), "%s", bwrap);
	const char *no = cannot_run(why, sizeof(why));
	if (no) {
		printf("fleet: skipped: %s\n", no);
		return SKIP;
	}
	double load = 0;
	(void)getloadavg(&load, 1);
	char conc[96] = "";
	for (unsigned i = 0; i < f.n_conc; i++)
		snprintf(conc + strlen(conc), sizeof(conc) - strlen(conc), "%s%u", i ? "," : "", f.conc[i]);
	printf("fleet: %s mode: %u runs, burst %u, sustained %u s at %s clients, K=%u live; %ld CPUs, load %.2f\n",
	       f.short_mode ? "short" : "full", f.runs, f.burst, f.seconds, conc, f.live, sysconf(_SC_NPROCESSORS_ONLN),
	       load);

	struct bu_env env;
	/* The pool holds K live clones plus the bursts: 8 GiB sparse is plenty for busybox clones. */
	r = bu_env_open(&env, f.state, 8ull << 30, f.template_name, why, sizeof(why));
	if (r < 0) {
		bu_env_close(&env);
		bool host = r == -ENODEV || r == -ENOENT || r == -EPERM || r == -EOPNOTSUPP || strstr(why, "no loop");
		printf("fleet: %s: %s\n", host ? "skipped" : "failed", why);
		return host ? SKIP : 1;
	}
	int rc = 0;
	char line[1024] = "", dwhy[512] = "";
	cJSON *doc = doctor_report(env.state, dwhy, sizeof(dwhy));
	/* What the host does to a start that no change of ours can (the cgroup regime), before the figures. */
	const char *cg_status = NULL, *cg = doctor_check(doc, "cgroups", &cg_status);
	if (cg)
		printf("fleet: host: %s%s\n", cg_status && strcmp(cg_status, "ok") ? "warning: " : "", cg);
	if (doctor_says(doc, "jail", dwhy, sizeof(dwhy))) {
		printf("fleet: jail: skipped: %s\n", dwhy);
		rc = SKIP;
	} else {
		printf("fleet: jail isolation (template: busybox tree; peer: bwrap over a btrfs snapshot of it)\n");
		r = run_isolation(&f, &env, line, sizeof(line));
		rc = r < 0 ? SKIP : r > 0 || f.errors ? 1 : 0;
	}
	if (doctor_says(doc, "vm", dwhy, sizeof(dwhy)))
		printf("fleet: vm: skipped: %s\n", dwhy);
	else if (!vm_template)
		printf("fleet: vm: skipped: give --vm-template NAME (a template with a kernel) to measure VM sandboxes\n");
	else {
		struct fleet v = f;
		char vm_line[1024];
		v.isolation = "vm";
		v.template_name = vm_template;
		v.ids = NULL, v.n_ids = v.cap_ids = 0, v.errors = 0, v.first_error[0] = '\0';
		pthread_mutex_init(&v.lock, NULL);
		printf("fleet: vm isolation (template %s)\n", vm_template);
		r = run_isolation(&v, &env, vm_line, sizeof(vm_line));
		/* The final line stays the jail's (issue 16's figures); the VM's is a row of the table. */
		printf("  vm figures: %s\n", vm_line + strlen("fleet: "));
		if (r > 0 || v.errors)
			rc = 1;
		free(v.ids);
	}
	cJSON_Delete(doc);
	if (bu_env_close(&env) < 0)
		rc = 1;
	if (line[0])
		printf("%s\n", line);
	free(f.ids);
	return rc;
}
