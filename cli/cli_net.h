/* SPDX-License-Identifier: Apache-2.0 */
/* Network policy flags of `space run/create` and `space events`. */
#pragma once

#include <stddef.h>

#include "cli.h"

#define CLI_NET_MAX 64

/* The network flags seen so far; turned into one policy document by cli_net_policy(). */
struct cli_net {
	const char *allow[CLI_NET_MAX];
	size_t n_allow;
	const char *secret[CLI_NET_MAX];   /* NAME=env:VAR | NAME=file:PATH | NAME=secret:REG | REG */
	size_t n_secret;
	const char *inject[CLI_NET_MAX];   /* HOST:Header=Value */
	size_t n_inject;
	const char *resolve[CLI_NET_MAX];  /* NAME=IP[:PORT] */
	size_t n_resolve;
	const char *policy_file;
	const char *ca_file;
	bool any;
};

/* getopt_long entries for the flags (codes 0x4e0..0x4e5), to append to a command's table. */
#define CLI_NET_OPTIONS                                                                              \
	{ "allow", required_argument, NULL, 0x4e0 }, { "secret", required_argument, NULL, 0x4e1 },    \
	{ "inject", required_argument, NULL, 0x4e2 }, { "policy", required_argument, NULL, 0x4e3 },   \
	{ "resolve", required_argument, NULL, 0x4e4 }, { "ca-file", required_argument, NULL, 0x4e5 }
#define CLI_NET_IS_OPTION(c) ((c) >= 0x4e0 && (c) <= 0x4e5)

/* Records one flag; on a bad value returns -1 with a message in err. */
int cli_net_flag(struct cli_net *n, int c, const char *arg, char *err, size_t len);

/* The policy JSON (malloc'd) for the flags: --policy FILE as the base, the other flags added to it;
 * NULL in *ret when no flag was given. -1 with a message in err on a bad file or value. */
int cli_net_policy(const struct cli_net *n, char **ret, char *err, size_t len);

int cmd_events(struct cli *cli, int argc, char **argv);

/* `space secret set|ls|rm` (cmd_secret.c): the registered secrets policies may name. */
int cmd_secret(struct cli *cli, int argc, char **argv);
