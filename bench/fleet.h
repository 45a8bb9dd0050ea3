/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/fleet: time to interactive, bursts, sustained rate and density of sandboxes, side by side with
 * bubblewrap (docs in bench/README.md). The same code is `space bench` (cli/cmd_bench.c).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "bench_util.h"

#define FLEET_CONC_MAX 8

struct fleet {
	/* options */
	bool short_mode;
	unsigned runs;             /* TTI samples */
	unsigned seconds;          /* per sustained concurrency */
	unsigned conc[FLEET_CONC_MAX];
	unsigned n_conc;
	unsigned burst;            /* creates at once */
	unsigned live;             /* density: K live idle sandboxes */
	const char *isolation;
	const char *template_name;
	const char *state;         /* from the caller, or NULL: the fleet makes its own */
	const char *cli;           /* the space binary (for `space serve`), or NULL */
	struct bu_peer peer;
	bool have_peer;
	char pool[4200];           /* the pool's root, for fleet_settle ("" until known) */
	double settle_ms;          /* waited in fleet_settle, in all */
	unsigned settles, settle_timeouts;
	/* while set, fleet_cycle adds each step of space_sandbox_create_steps() to it (single-threaded phases) */
	struct fleet_steps *steps;

	/* every sandbox id made, for the leak check */
	pthread_mutex_t lock;
	char (*ids)[32];
	size_t n_ids, cap_ids;
	unsigned errors;
	char first_error[512];
};

/* The steps of creates (space_sandbox_create_steps), by name, in the order first seen. */
#define FLEET_STEPS_MAX 24
struct fleet_steps {
	unsigned n;
	struct {
		char name[24];
		struct bu_series ms;
	} step[FLEET_STEPS_MAX];
};
/* Adds the steps of one "name 1.2, name 0.3 = 1.5 ms" text. */
void fleet_steps_add(struct fleet_steps *st, const char *text);

/* Before a timed run or phase: waits until the previous ones' deletions are done (bu_settle). */
void fleet_settle(struct fleet *f);
/* The same, with keep sandboxes meant to stay (the density phase's live ones). */
void fleet_settle_keep(struct fleet *f, unsigned keep);

/* Records a sandbox id (thread-safe). */
void fleet_note_id(struct fleet *f, const char *id);
/* Counts an error and keeps the first one's text (thread-safe). */
void fleet_error(struct fleet *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One create -> exec(true), optionally destroy; the phases' times in ms (NULL to skip). Returns 0 or -errno
 * (recorded with fleet_error). The handle is returned in *ret_sb when destroy is false. */
int fleet_cycle(struct fleet *f, space_ctx *ctx, bool destroy, double *ret_tti, double *ret_create,
		double *ret_destroy, space_sandbox **ret_sb);

/* Results of the load phases (fleet_load.c). */
struct fleet_burst {
	struct bu_series lib, peer;  /* each create's time from the start until interactive */
	unsigned lib_errors, peer_errors;
};
int fleet_run_burst(struct fleet *f, const char *state, struct fleet_burst *ret);
/* The same burst over HTTP through `space serve` (cli: the space binary), started on state for it. 0, or
 * -errno with why[] saying why it was not measured. */
int fleet_run_burst_http(struct fleet *f, const char *state, const char *cli, struct bu_series *out, unsigned *errors,
			 char *why, size_t len);

struct fleet_sustained {
	unsigned clients;
	double rate, peer_rate;       /* completed cycles per second, over every pass */
	struct bu_series lib, peer;   /* per-cycle latency */
	unsigned errors, peer_errors;
	double cycles, secs, peer_cycles, peer_secs; /* the passes' sums */
};
/* One pass of `seconds` at ret->clients clients, libspace's then the peer's, added to *ret. */
int fleet_run_sustained(struct fleet *f, const char *state, unsigned seconds, struct fleet_sustained *ret);

struct fleet_density {
	unsigned live;                /* how many were made */
	double mem_mib_per_sb;        /* MemAvailable delta per sandbox */
	double rss_mib_per_sb, pss_mib_per_sb;
	double procs_per_sb;
	struct bu_scan scan;          /* what the leak scan sees of them while they live (proves it looks) */
	struct bu_series tti;         /* TTI of one more while they live */
	struct bu_series peer_tti;    /* the peer's, run alternately with it while they live */
	struct fleet_steps steps;     /* where the milliseconds of those creates go */
	double create_s, destroy_s;   /* wall time to make and to remove them all */
};
int fleet_run_density(struct fleet *f, const char *state, struct fleet_density *ret);

/* The whole benchmark: parses argv (argv[0] is the program or command name), prints the table and the
 * `fleet:` line. state_dir (may be NULL) is a default for --state; cli (may be NULL) the space binary that
 * runs `space serve` for the HTTP burst. Returns 0, 1 (an error or a leak), 2
 * (usage) or 77 (cannot run on this host). */
int fleet_main(int argc, char **argv, const char *state_dir, const char *cli);
