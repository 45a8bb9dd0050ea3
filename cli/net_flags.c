/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --allow, --secret, --inject, --policy, --resolve, --ca-file: one network policy document. The operator's
 * own: the commands that use it mark it trusted (space_sandbox_options.network_policy_trusted), so its
 * secrets may be env:VAR and file:PATH as well as registered ones (docs/network.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_net.h"
#include "util/util.h"

int cli_net_flag(struct cli_net *n, int c, const char *arg, char *err, size_t len)
{
	const char **list = NULL;
	size_t *count = NULL;
	switch (c) {
	case 0x4e0: list = n->allow, count = &n->n_allow; break;
	case 0x4e1: list = n->secret, count = &n->n_secret; break;
	case 0x4e2: list = n->inject, count = &n->n_inject; break;
	case 0x4e4: list = n->resolve, count = &n->n_resolve; break;
	case 0x4e3: n->policy_file = arg; break;
	case 0x4e5: n->ca_file = arg; break;
	default: snprintf(err, len, "unknown network option"); return -1;
	}
	n->any = true;
	if (!list)
		return 0;
	if (*count == CLI_NET_MAX) {
		snprintf(err, len, "too many network options of one kind (at most %d)", CLI_NET_MAX);
		return -1;
	}
	/* --secret NAME alone: the registered secret NAME (space secret set), under its own name. */
	if (c == 0x4e1 && !strchr(arg, '=') && !util_name_valid(arg)) {
		snprintf(err, len, "'%s' is neither NAME=REF nor the name of a registered secret", arg);
		return -1;
	}
	if (c == 0x4e4 && (!strchr(arg, '=') || arg[0] == '=')) {
		snprintf(err, len, "'%s' is not NAME=VALUE", arg);
		return -1;
	}
	if (c == 0x4e1 && arg[0] == '=') {
		snprintf(err, len, "'%s' is not NAME=REF", arg);
		return -1;
	}
	list[(*count)++] = arg;
	return 0;
}

static cJSON *child(cJSON *o, const char *key, bool array)
{
	cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!j)
		j = array ? cJSON_AddArrayToObject(o, key) : cJSON_AddObjectToObject(o, key);
	return j;
}

/* NAME=VALUE into object o. */
static void add_pair(cJSON *o, const char *s)
{
	char name[256];
	const char *eq = strchr(s, '=');
	snprintf(name, sizeof(name), "%.*s", (int)(eq - s), s);
	cJSON_DeleteItemFromObjectCaseSensitive(o, name);
	cJSON_AddStringToObject(o, name, eq + 1);
}

int cli_net_policy(const struct cli_net *n, char **ret, char *err, size_t len)
{
	*ret = NULL;
	if (!n->any)
		return 0;
	cJSON *p = NULL;
	if (n->policy_file) {
		char *text;
		size_t tl;
		int r = util_read_file(n->policy_file, 1 << 20, &text, &tl);
		if (r < 0) {
			snprintf(err, len, "--policy %s: %s", n->policy_file, strerror(-r));
			return -1;
		}
		p = cJSON_Parse(text);
		free(text);
		if (!cJSON_IsObject(p)) {
			cJSON_Delete(p);
			snprintf(err, len, "--policy %s: not a JSON object", n->policy_file);
			return -1;
		}
	} else {
		p = cJSON_CreateObject();
	}
	for (size_t i = 0; i < n->n_allow; i++)
		cJSON_AddItemToArray(child(p, "allow", true), cJSON_CreateString(n->allow[i]));
	for (size_t i = 0; i < n->n_secret; i++) {
		char pair[128];
		const char *s = n->secret[i];
		if (!strchr(s, '=')) { /* a registered secret, named as in the policy */
			snprintf(pair, sizeof(pair), "%s=secret:%s", s, s);
			s = pair;
		}
		add_pair(child(p, "secrets", false), s);
	}
	for (size_t i = 0; i < n->n_resolve; i++)
		add_pair(child(p, "resolve", false), n->resolve[i]);
	for (size_t i = 0; i < n->n_inject; i++) {
		/* HOST:Header=Value (the value may hold ':' and '='; the host may not hold '=') */
		const char *s = n->inject[i], *colon = strchr(s, ':'), *eq = colon ? strchr(colon, '=') : NULL;
		if (!colon || colon == s || !eq || eq == colon + 1) {
			cJSON_Delete(p);
			snprintf(err, len, "--inject '%s': expected HOST:Header=Value", s);
			return -1;
		}
		cJSON *r = cJSON_CreateObject();
		char buf[320];
		snprintf(buf, sizeof(buf), "%.*s", (int)(colon - s), s);
		cJSON_AddStringToObject(r, "host", buf);
		snprintf(buf, sizeof(buf), "%.*s", (int)(eq - colon - 1), colon + 1);
		cJSON_AddStringToObject(r, "header", buf);
		cJSON_AddStringToObject(r, "value", eq + 1);
		cJSON_AddItemToArray(child(p, "inject", true), r);
	}
	if (n->ca_file) {
		cJSON_DeleteItemFromObjectCaseSensitive(p, "ca_file");
		cJSON_AddStringToObject(p, "ca_file", n->ca_file);
	}
	*ret = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	if (!*ret) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	return 0;
}
