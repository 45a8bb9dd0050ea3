/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster store's one interface (cluster_store.h) over its back-ends (cluster_store_int.h): the checks of
 * the caller's input, the keys and tokens, and the errors every back-end words alike. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cluster_store_int.h"

static __thread char errbuf[512];

const char *cluster_errmsg(void) { return errbuf; }

int cluster_seterr(int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	/* a server's messages span lines (and end with a newline): one line, for logs and JSON */
	for (char *p = errbuf; *p; p++)
		if (*p == '\n' || *p == '\t' || *p == '\r')
			*p = ' ';
	size_t n = strlen(errbuf);
	while (n && errbuf[n - 1] == ' ')
		errbuf[--n] = '\0';
	return e;
}

int cluster_schema_version(void) { return CLUSTER_SCHEMA_VERSION; }

const char *cluster_sandbox_state_name(enum cluster_sandbox_state s)
{
	switch (s) {
	case CLUSTER_SANDBOX_RUNNING:
		return "running";
	case CLUSTER_SANDBOX_LOST:
		return "lost";
	case CLUSTER_SANDBOX_DESTROYED:
		return "destroyed";
	}
	return "unknown";
}

enum cluster_sandbox_state cluster_state_parse(const char *s)
{
	if (!strcmp(s, "running"))
		return CLUSTER_SANDBOX_RUNNING;
	if (!strcmp(s, "lost"))
		return CLUSTER_SANDBOX_LOST;
	return CLUSTER_SANDBOX_DESTROYED;
}

void cluster_isolations_split(const char *isolations, const char *out[4], char *buf, size_t len)
{
	size_t n = 0;
	snprintf(buf, len, "%s", isolations ? isolations : "");
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < 3; t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	out[n] = NULL;
}

static int random_hex(char *out, size_t bytes)
{
	unsigned char b[64];
	if (bytes > sizeof(b))
		return -EINVAL;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, b, bytes);
	close(fd);
	if (n != (ssize_t)bytes)
		return -EIO;
	for (size_t i = 0; i < bytes; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return 0;
}

void cluster_close(struct cluster_store *cs)
{
	if (cs)
		cs->ops->close(cs);
}

const char *cluster_backend(const struct cluster_store *cs) { return cs->ops->name; }

/* --- hosts ------------------------------------------------------------------------------------------------ */

int cluster_host_register(struct cluster_store *cs, const struct cluster_host_report *h, unsigned stale_s,
			  uint64_t *ret_incarnation, char ret_key[CLUSTER_KEY_HEX + 1], unsigned *ret_age_s)
{
	if (!cluster_name_ok(h->name))
		return cluster_seterr(-EINVAL, "bad host name '%s' (want 1-63 of a-z, 0-9, -)", h->name);
	int e = random_hex(ret_key, CLUSTER_KEY_HEX / 2);
	if (e < 0)
		return cluster_seterr(e, "random host key: %s", strerror(-e));
	*ret_age_s = 0;
	e = cs->ops->host_register(cs, h, stale_s, ret_key, ret_incarnation, ret_age_s);
	if (e == -EBUSY)
		cluster_seterr(e, "host name '%s' is in use: its server heartbeat %u s ago", h->name, *ret_age_s);
	return e;
}

int cluster_host_heartbeat(struct cluster_store *cs, const struct cluster_host_report *h, uint64_t incarnation,
			   bool *ret_was_lost)
{
	int e = cs->ops->host_heartbeat(cs, h, incarnation, ret_was_lost);
	if (e == -ESTALE)
		cluster_seterr(e, "host name '%s' was taken over by another server", h->name);
	return e;
}

int cluster_host_stop(struct cluster_store *cs, const char *name, uint64_t incarnation)
{
	return cs->ops->host_stop(cs, name, incarnation);
}

int cluster_sweep(struct cluster_store *cs, unsigned lost_after_s,
		  void (*fn)(const char *host, unsigned sandboxes, void *arg), void *arg)
{
	return cs->ops->sweep(cs, lost_after_s, fn, arg);
}

int cluster_host_key(struct cluster_store *cs, const char *name, char ret_key[CLUSTER_KEY_HEX + 1])
{
	int e = cs->ops->host_key(cs, name, ret_key);
	if (e == -ENOENT)
		cluster_seterr(e, "no host '%s' in the cluster", name);
	else if (e == -EBADMSG)
		e = cluster_seterr(-EIO, "host '%s' has a malformed key in the cluster store", name);
	return e;
}

int cluster_host_list(struct cluster_store *cs, int (*fn)(const struct cluster_host_row *h, void *arg), void *arg)
{
	return cs->ops->host_list(cs, fn, arg);
}

/* --- placement ------------------------------------------------------------------------------------------- */

/* "a, b, c" of names (cut to fit). */
static void names_join(const char *const *v, char *out, size_t n)
{
	size_t len = 0;
	out[0] = '\0';
	for (size_t i = 0; v[i] && len < n; i++) {
		int k = snprintf(out + len, n - len, "%s'%s'", i ? ", " : "", v[i]);
		if (k < 0)
			break;
		len += (size_t)k;
	}
}

int cluster_place(struct cluster_store *cs, const char *template, const char *isolation, const char *const *secrets,
		  unsigned fresh_s, const char *avoid, char ret_host[CLUSTER_NAME_MAX], char ret_url[CLUSTER_URL_MAX],
		  char ret_token[33], char ret_pull_from[CLUSTER_NAME_MAX])
{
	ret_pull_from[0] = '\0';
	static const char *const none[] = { NULL };
	size_t ns = 0;
	while (secrets && secrets[ns])
		ns++;
	if (ns > CLUSTER_PLACE_SECRETS_MAX)
		return cluster_seterr(-E2BIG, "a create names %zu registered secrets, over %d", ns, CLUSTER_PLACE_SECRETS_MAX);
	secrets = secrets ? secrets : none;
	int e = random_hex(ret_token, 16);
	if (e < 0)
		return cluster_seterr(e, "random claim token: %s", strerror(-e));
	isolation = isolation ? isolation : "";
	e = cs->ops->place(cs, template, isolation, secrets, fresh_s, avoid ? avoid : "", false, ret_token, ret_host,
			   ret_url);
	if (e != -EAGAIN)
		return e;
	/* why nothing was placed */
	long up = 0, holding = 0, with_secrets = 0;
	if ((e = cs->ops->place_counts(cs, template, isolation, secrets, fresh_s, &up, &holding, &with_secrets)) < 0)
		return e;
	if (!up)
		return cluster_seterr(-EHOSTDOWN, "no host of the cluster is up");
	if (!holding)
		return cluster_seterr(-ENOENT, "no host that is up holds template '%s'%s%s", template,
				      *isolation ? " for isolation " : "", isolation);
	if (!with_secrets) {
		char names[256];
		names_join(secrets, names, sizeof(names));
		return cluster_seterr(-ENOENT,
				      "no host that is up and holds template '%s' has every registered secret the policy names "
				      "(%s): register them with `space secret set` on the hosts that may run it",
				      template, names);
	}
	/* Every holder is full: a host with room that does not hold it, the template pulled there first. */
	char from[CLUSTER_NAME_MAX];
	if ((e = cs->ops->holder(cs, template, fresh_s, from)) == 0 &&
	    (e = cs->ops->place(cs, template, isolation, secrets, fresh_s, avoid ? avoid : "", true, ret_token, ret_host,
				ret_url)) == 0) {
		snprintf(ret_pull_from, CLUSTER_NAME_MAX, "%s", from);
		return 0;
	}
	if (e != -EAGAIN && e != -ENOENT)
		return e;
	return cluster_seterr(-ENOSPC, "every host holding template '%s'%s is at its capacity, and no other host has "
				       "room", template, ns ? " and the secrets" : "");
}

int cluster_claim_drop(struct cluster_store *cs, const char *token) { return cs->ops->claim_drop(cs, token); }

/* --- sandboxes ------------------------------------------------------------------------------------------- */

int cluster_sandbox_add(struct cluster_store *cs, const char *id, const char *host, const char *template,
			const char *token)
{
	return cs->ops->sandbox_add(cs, id, host, template ? template : "", token ? token : "");
}

int cluster_sandbox_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret)
{
	int e = cs->ops->sandbox_get(cs, id, ret);
	return e == -ENOENT ? cluster_seterr(e, "sandbox %s is not in the cluster", id) : e;
}

int cluster_sandbox_give_up(struct cluster_store *cs, const char *id)
{
	int e = cs->ops->sandbox_give_up(cs, id);
	return e == -ENOENT ? cluster_seterr(e, "sandbox %s is not lost", id) : e;
}

int cluster_sandbox_list(struct cluster_store *cs, const char *host, bool destroyed,
			 int (*fn)(const struct cluster_sandbox *s, void *arg), void *arg)
{
	return cs->ops->sandbox_list(cs, host ? host : "", destroyed, fn, arg);
}

int cluster_sandbox_set(struct cluster_store *cs, const char *id, const char *host, enum cluster_sandbox_state st)
{
	return cs->ops->sandbox_set(cs, id, host, st);
}

/* --- checkpoints and API keys ---------------------------------------------------------------------------- */

int cluster_checkpoints_publish(struct cluster_store *cs, const char *host, const char *const *ids,
				const char *const *sandboxes)
{
	return cs->ops->checkpoints_publish(cs, host, ids, sandboxes);
}

int cluster_checkpoint_get(struct cluster_store *cs, const char *id, struct cluster_sandbox *ret)
{
	int e = cs->ops->checkpoint_get(cs, id, ret);
	return e == -ENOENT ? cluster_seterr(e, "checkpoint %s is not in the cluster", id) : e;
}

int cluster_apikeys_publish(struct cluster_store *cs, const char *host, const char *const *hex_hashes)
{
	return cs->ops->apikeys_publish(cs, host, hex_hashes);
}

int cluster_apikey_check(struct cluster_store *cs, const char *hex_hash) { return cs->ops->apikey_check(cs, hex_hash); }
