/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the benchmarks that drive libspace through space.h: sample series and percentiles,
 * a busybox root tree, a throwaway state directory with a loop pool and a template, the bubblewrap peer
 * over btrfs snapshots, and a scan of the host for what sandboxes (by id) left behind or hold.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "space.h"

/* Samples in milliseconds; grows as needed. */
struct bu_series {
	double *ms;
	size_t n, cap;
};

int bu_series_add(struct bu_series *s, double ms);
void bu_series_free(struct bu_series *s);
/* Nearest-rank percentile (sorts in place); NAN when empty (a figure not measured). */
double bu_pct(struct bu_series *s, double pct);

double bu_ms_since(uint64_t t0_ns);

/* A busybox root tree at root (/bin/busybox and one link per applet, /etc/passwd, /etc/group). */
int bu_busybox_tree(const char *root);

/* A throwaway state directory: dir/state with a loop pool of pool_bytes, template `name` imported from a
 * busybox tree. bu_env_close undoes everything it made (removes sandboxes left, the template, the pool). */
struct bu_env {
	char dir[64];       /* the temp directory ("" when the state was given) */
	char state[128];
	bool made_state;    /* we made and own the state directory */
	bool imported;
	char template_name[64];
	space_ctx *ctx;
};

/* 0, or -errno with why[] saying what failed; -ENODEV/-ENOTSUP style failures the host's fault. When
 * state is not NULL it is used (initialized already), and only the template is made in it. */
int bu_env_open(struct bu_env *e, const char *state, uint64_t pool_bytes, const char *template_name, char *why,
		size_t why_len);
int bu_env_close(struct bu_env *e);

/* The peer: bwrap running a command with user, pid, mount, net, ipc, uts and cgroup namespaces over a fresh
 * writable btrfs snapshot of the template's tree. */
struct bu_peer {
	char bwrap[256];
	char base[4200];    /* a subvolume with the template's tree (copied out of its ext4 image) */
	char dir[4200];     /* where per-run snapshots go */
};

/* Makes the base subvolume from the template's rootfs.ext4 (loop-mounted read-only once). */
int bu_peer_open(struct bu_peer *p, space_ctx *ctx, const char *template_name, const char *bwrap, char *why,
		 size_t why_len);
void bu_peer_close(struct bu_peer *p);
/*
 * Waits, up to max_ms, until the host is quiet for the next timed phase: at most keep sandbox directories
 * left under sandboxes_dir (NULL: not checked; libspace's background reclaim of the phase's destroys; keep
 * counts those meant to stay, the density phase's live ones) and no deleted
 * subvolume left for the btrfs of fs_path to clean (the kernel's cleaner works after a deletion returns;
 * libspace's and the peer's alike). Without it a phase's timings carry the previous phase's deletions, and
 * each phase more than the one before. Returns the ms waited, or -errno (-ETIMEDOUT at max_ms).
 */
long bu_settle(const char *fs_path, const char *sandboxes_dir, unsigned keep, unsigned max_ms);
/* Snapshot `slot` of the base and run argv (NULL: `true`) in it. *ret_tti_ms from the snapshot to the
 * command's exit; *ret_destroy_ms (may be NULL) the snapshot's deletion. */
int bu_peer_run(struct bu_peer *p, unsigned slot, double *ret_tti_ms, double *ret_destroy_ms);

/* What a set of sandbox ids holds on the host: processes whose command line, cgroup or open files name
 * one (space-agent PID 1, space-logcap, space-gateway), mounts, loop devices, cgroups and network
 * namespaces naming one, and entries of subvol_dir (may be NULL) naming one. */
struct bu_scan {
	unsigned procs, mounts, loops, cgroups, netns, subvols;
	uint64_t rss_kib, pss_kib; /* summed over those processes */
	char first[256];           /* the first thing found, for the report */
};

/* ids: sorted (bu_ids_sort) array of n ids of 32 bytes. */
void bu_ids_sort(char (*ids)[32], size_t n);
void bu_scan(char (*ids)[32], size_t n, const char *subvol_dir, struct bu_scan *ret);
static inline unsigned bu_scan_leaks(const struct bu_scan *s)
{
	return s->procs + s->mounts + s->loops + s->cgroups + s->netns + s->subvols;
}

/* MemAvailable of /proc/meminfo in KiB; 0 when unknown. */
uint64_t bu_mem_available_kib(void);

/* --- a minimal HTTP/1.1 client for `space serve` (one connection per request, Content-Length bodies) --- */

/* Sends one request to 127.0.0.1:port with the API key; returns the status (or -errno). *ret_body (may be
 * NULL) gets the body, NUL-terminated (caller frees). */
int bu_http(uint16_t port, const char *key, const char *method, const char *path, const char *body, char **ret_body);
/* A free loopback port (bound, released, then used by the server: a small race, fine for a bench); 0 on
 * failure. */
uint16_t bu_free_port(void);
/* Starts argv (argv[0] a path) with stdout and stderr appended to log; the pid in *ret_pid. */
int bu_spawn_logged(const char *const argv[], const char *log, pid_t *ret_pid);
