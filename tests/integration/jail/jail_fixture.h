/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the jail integration tests: a busybox rootfs image, starting a shell as PID 1, logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "jail/jail.h"

#include "jail_check.h"

struct fixture {
	char dir[256];     /* temp dir, removed by fixture_done() */
	char image[300];   /* busybox rootfs image */
	char probe[512];   /* host path of the static probe helper */
	int seq;
	struct jail_info live[8]; /* jails started here; fixture_done() kills them (a failed CHECK returns early) */
	int nlive;
};

/* Exits 77 with a reason when this host cannot run jails (not root, no loop, no mkfs.ext4, no busybox). */
void fixture_require(void);

/* Creates the temp dir and the rootfs image (with the probe at /bin/probe). 0 or -errno. */
int fixture_init(struct fixture *f, const char *probe_path);

/* Copies the image to a new file for a second jail; path written to ret. */
int fixture_copy_image(struct fixture *f, char *ret, size_t len);

/* Kills every jail started through the fixture and removes the temp dir. */
void fixture_done(struct fixture *f);

/*
 * Starts busybox sh -c script as PID 1 with cfg's limits (cfg may be NULL); output goes to a fresh log
 * file whose path is written to ret_log. Fails the test with the jail's error message.
 */
int fixture_start(struct fixture *f, const char *image, const char *script, const struct jail_config *limits,
                  struct jail_info *ret, char *ret_log, size_t loglen);

/* Waits until the log contains needle (or timeout); returns the log (caller frees) or NULL. */
char *fixture_wait_log(const char *log, const char *needle, int timeout_ms);

/* Value after "key=" on its own line in text, copied into buf; NULL when missing. */
const char *fixture_value(const char *text, const char *key, char *buf, size_t len);

/* Runs a shell command line on the host, returns its exit status (or -1). */
int fixture_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Snapshot of host state a jail must not leave behind: mounts and loop devices of files under the
 * fixture's dir, and this test process's jail cgroups (others may run sandboxes on the same host).
 */
struct host_state {
	int mounts;
	int loops;
	int cgroups;
};
void fixture_host_state(const struct fixture *f, struct host_state *ret);

void fixture_sleep_ms(int ms);
