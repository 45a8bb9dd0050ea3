/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered secrets, the store behind space_secret_*() (src/core/secret.c). Reading one is
 * net_secret_read() in net/net.h, which the policy compiler uses. dir is <state>/NET_SECRETS_DIR.
 * Every call returns 0 or -errno: -EINVAL for a bad name or value, -ENOENT for a secret (or a
 * directory) that is not there, -EPERM for a directory that is not the caller's, -ENOTDIR for a symlink.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "space.h"

/* True for a value a secret may hold: 1..NET_SECRET_MAX bytes, no NUL, CR or LF (it becomes a header
 * value, which must stay one line). */
bool net_secret_value_valid(const void *value, size_t len);

/* Stores (or replaces, atomically) secret name. Creates dir (0700) when needed. */
int net_secret_write(const char *dir, const char *name, const void *value, size_t len);

/* Removes secret name. */
int net_secret_remove(const char *dir, const char *name);

/* A registered secret as net_secret_list reports it (core/api_out.c makes the public object of it). */
struct net_secret_info {
	char name[64];
	int64_t created_ms;
};

/* The secrets in dir, by name (none when dir does not exist): names and times, never values.
 * *ret is one allocation (free()). */
int net_secret_list(const char *dir, struct net_secret_info **ret, size_t *ret_count);
