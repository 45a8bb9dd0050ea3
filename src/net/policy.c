/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Egress policy documents (docs/network.md): checked, secrets resolved, turned into the configuration
 * space-gateway reads on its stdin. Policy text is user input: every field is checked for type and size.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/net.h"
#include "util/cidr.h"
#include "util/cleanup.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON, cJSON_Delete)

#define SECRET_MAX NET_SECRET_MAX
#define MAX_RULES 256

static int fail(char *err, size_t len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t len, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && len)
		vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return code;
}

bool net_host_valid(const char *host)
{
	size_t n = strlen(host), label = 0;
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = host[i];
		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)c) && c != '-' && c != '_')
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0;
}

bool net_host_match(const char *pattern, const char *host)
{
	if (!strncmp(pattern, "*.", 2)) {
		size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".suffix" */
		return hl > pl && !strcasecmp(host + hl - pl, pattern + 1);
	}
	return !strcasecmp(pattern, host);
}

/* "host", "*.suffix", optionally ":port" -> {"host": .., "port": n (0 = the default ports)}. */
static int compile_allow(const char *s, cJSON *out, char *err, size_t len)
{
	char host[256];
	const char *colon = strrchr(s, ':');
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);
	uint64_t port = 0;
	if (hl == 0 || hl >= sizeof(host))
		return fail(err, len, -EINVAL, "allow '%s': bad host", s);
	memcpy(host, s, hl);
	host[hl] = '\0';
	for (char *p = host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (colon && util_parse_uint(colon + 1, 1, 65535, &port) < 0)
		return fail(err, len, -EINVAL, "allow '%s': bad port", s);
	const char *name = strncmp(host, "*.", 2) ? host : host + 2;
	if (!net_host_valid(name))
		return fail(err, len, -EINVAL, "allow '%s': not a host name or *.suffix", s);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "host", host);
	cJSON_AddNumberToObject(o, "port", (double)port);
	cJSON_AddItemToArray(out, o);
	return 0;
}

/* Reads one secret: "secret:NAME" (registered, any policy), "env:NAME" or "file:PATH" (trusted only: they
 * name the host's environment and files, which an API caller must never reach). */
static int secret_read(const struct net_policy_trust *t, const char *name, const char *ref, char **ret, char *err,
		       size_t len)
{
	if (!strncmp(ref, "secret:", 7)) {
		size_t n;
		int r = t->secrets_dir ? net_secret_read(t->secrets_dir, ref + 7, ret, &n) : -ENOENT;
		if (r == -ENOENT || r == -EINVAL)
			return fail(err, len, -EINVAL, "secrets.%s: no registered secret named '%s' (the operator "
				    "registers them: `space secret set NAME`)", name, ref + 7);
		if (r < 0) /* no path: the secrets directory is the host's business */
			return fail(err, len, r == -ENOMEM ? r : -EINVAL, "secrets.%s: registered secret '%s' cannot "
				    "be read (%s)", name, ref + 7, strerror(-r));
		return 0;
	}
	bool host = !strncmp(ref, "env:", 4) || !strncmp(ref, "file:", 5);
	if (host && !t->trusted)
		return fail(err, len, -EINVAL, "secrets.%s: env: and file: name the server's own environment and "
			    "files, which only the operator's policies may use; name a registered secret instead "
			    "(\"secret:NAME\", `space secret set NAME` on the host)", name);
	if (!host)
		return fail(err, len, -EINVAL, "secrets.%s: not secret:NAME%s", name,
			    t->trusted ? ", env:NAME or file:PATH" : " (a secret the operator registered)");
	if (!strncmp(ref, "env:", 4)) {
		const char *v = getenv(ref + 4);
		if (!v)
			return fail(err, len, -ENOENT, "secret %s: environment variable %s is not set", name, ref + 4);
		if (strlen(v) > SECRET_MAX)
			return fail(err, len, -E2BIG, "secret %s: longer than %d bytes", name, SECRET_MAX);
		*ret = strdup(v);
		return *ret ? 0 : -ENOMEM;
	}
	if (!strncmp(ref, "file:", 5)) {
		char *buf;
		size_t n;
		int r = util_read_file(ref + 5, SECRET_MAX, &buf, &n);
		if (r < 0)
			return fail(err, len, r, "secret %s: read %s: %s", name, ref + 5, strerror(-r));
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		*ret = buf;
		return 0;
	}
	return -EINVAL; /* not reached: host is env: or file: */
}

/* A header value with ${NAME} replaced by the secrets' values. */
static int expand(const char *tmpl, const cJSON *secrets, char **ret, char *err, size_t len)
{
	size_t cap = strlen(tmpl) + 1, n = 0;
	for (const cJSON *s = secrets ? secrets->child : NULL; s; s = s->next)
		cap += strlen(s->valuestring);
	_cleanup_free_ char *out = malloc(cap);
	if (!out)
		return -ENOMEM;
	for (const char *p = tmpl; *p;) {
		if (p[0] == '$' && p[1] == '{') {
			const char *end = strchr(p, '}');
			if (!end)
				return fail(err, len, -EINVAL, "inject '%s': unterminated ${", tmpl);
			char name[128];
			size_t nl = (size_t)(end - p - 2);
			if (nl == 0 || nl >= sizeof(name))
				return fail(err, len, -EINVAL, "inject '%s': bad secret name", tmpl);
			memcpy(name, p + 2, nl);
			name[nl] = '\0';
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(secrets, name);
			if (!cJSON_IsString(v))
				return fail(err, len, -ENOENT, "inject '%s': no secret named %s", tmpl, name);
			size_t vl = strlen(v->valuestring);
			if (n + vl >= cap)
				return -EOVERFLOW;
			memcpy(out + n, v->valuestring, vl);
			n += vl;
			p = end + 1;
			continue;
		}
		if (n + 1 >= cap)
			return -EOVERFLOW;
		out[n++] = *p++;
	}
	out[n] = '\0';
	/* A header value must stay one header line. */
	if (strpbrk(out, "\r\n"))
		return fail(err, len, -EINVAL, "inject '%s': the value contains a line break", tmpl);
	*ret = TAKE_PTR(out);
	return 0;
}

static bool header_name_valid(const char *h)
{
	if (!*h || strlen(h) > 64)
		return false;
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && *h != '-' && *h != '_')
			return false;
	return true;
}

static int compile_inject(const cJSON *rules, const cJSON *secrets, cJSON *out, char *err, size_t len)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, rules) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "host");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "header");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "value");
		if (!cJSON_IsString(h) || !cJSON_IsString(n) || !cJSON_IsString(v))
			return fail(err, len, -EINVAL, "inject: each rule needs string host, header and value");
		const char *name = strncmp(h->valuestring, "*.", 2) ? h->valuestring : h->valuestring + 2;
		if (!net_host_valid(name))
			return fail(err, len, -EINVAL, "inject: bad host '%s'", h->valuestring);
		if (!header_name_valid(n->valuestring))
			return fail(err, len, -EINVAL, "inject: bad header name '%s'", n->valuestring);
		_cleanup_free_ char *val = NULL;
		int rr = expand(v->valuestring, secrets, &val, err, len);
		if (rr < 0)
			return rr;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "host", h->valuestring);
		cJSON_AddStringToObject(o, "header", n->valuestring);
		cJSON_AddStringToObject(o, "value", val);
		explicit_bzero(val, strlen(val));
		cJSON_AddItemToArray(out, o);
	}
	return 0;
}

static int compile_limits(const cJSON *in, cJSON *out, char *err, size_t len)
{
	static const struct {
		const char *key;
		double def, max;
	} lim[] = {
		{ "max_connections", 64, 4096 },
		{ "bytes_per_second", 0, 1e12 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(lim); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, lim[i].key);
		double d = lim[i].def;
		if (v) {
			if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > lim[i].max)
				return fail(err, len, -EINVAL, "limits.%s: a number from 0 to %.0f", lim[i].key,
					    lim[i].max);
			d = v->valuedouble;
		}
		cJSON_AddNumberToObject(out, lim[i].key, d);
	}
	return 0;
}

int net_cidr4_parse(const char *s, uint32_t *ret_addr, uint32_t *ret_mask)
{
	return util_cidr4_parse(s, ret_addr, ret_mask); /* shared with `space serve --allow-resolve` */
}

/* Why an untrusted policy may not point a name at a (host order), or NULL. Ranges that reach the host,
 * its neighbours or nothing routable: what `resolve` would otherwise let an API caller aim the gateway
 * (which runs on the host) at. */
static const char *addr_refused(uint32_t a)
{
	static const struct {
		uint32_t net, mask;
		const char *what;
	} bad[] = {
		{ 0x00000000, 0xff000000, "an unspecified (0.0.0.0/8)" },
		{ 0x7f000000, 0xff000000, "a loopback" },
		{ 0x0a000000, 0xff000000, "a private (RFC 1918)" },
		{ 0xac100000, 0xfff00000, "a private (RFC 1918)" },
		{ 0xc0a80000, 0xffff0000, "a private (RFC 1918)" },
		{ 0x64400000, 0xffc00000, "a shared (CGNAT, 100.64.0.0/10)" },
		{ 0xa9fe0000, 0xffff0000, "a link-local" },
		{ 0xc0000000, 0xffffff00, "an IETF protocol (192.0.0.0/24)" },
		{ 0xc6120000, 0xfffe0000, "a benchmarking (198.18.0.0/15, the gateway's own DNS answers)" },
		{ 0xe0000000, 0xf0000000, "a multicast" },
		{ 0xf0000000, 0xf0000000, "a reserved or broadcast" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if ((a & bad[i].mask) == bad[i].net)
			return bad[i].what;
	return NULL;
}

/* True when a (host order) is one of this host's addresses, or a broadcast address of its networks;
 * -errno when they cannot be listed (the caller then refuses: fail closed). */
static int addr_is_host(uint32_t a)
{
	struct ifaddrs *list;
	if (getifaddrs(&list) < 0)
		return -errno;
	int found = 0;
	for (const struct ifaddrs *i = list; i && !found; i = i->ifa_next) {
		const struct sockaddr *sa[2] = { i->ifa_addr, (i->ifa_flags & IFF_BROADCAST) ? i->ifa_broadaddr : NULL };
		for (size_t k = 0; k < 2; k++)
			if (sa[k] && sa[k]->sa_family == AF_INET &&
			    ntohl(((const struct sockaddr_in *)sa[k])->sin_addr.s_addr) == a)
				found = 1;
	}
	freeifaddrs(list);
	return found;
}

/* "IPv4[:PORT]", as the gateway reads it; for an untrusted policy also a target it may use. */
static int resolve_target(const struct net_policy_trust *t, const char *name, const char *v, char *err, size_t len)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = strchr(v, ':');
	size_t n = colon ? (size_t)(colon - v) : strlen(v);
	uint64_t port;
	struct in_addr in;
	if (n == 0 || n >= sizeof(ip) || (colon && util_parse_uint(colon + 1, 1, 65535, &port) < 0))
		return fail(err, len, -EINVAL, "resolve.%s: '%s' is not IPv4[:PORT]", name, v);
	memcpy(ip, v, n);
	ip[n] = '\0';
	if (inet_pton(AF_INET, ip, &in) != 1)
		return fail(err, len, -EINVAL, "resolve.%s: '%s' is not IPv4[:PORT]", name, v);
	if (t->trusted)
		return 0;
	uint32_t a = ntohl(in.s_addr);
	for (const char *const *c = t->allow_resolve; c && *c; c++) {
		uint32_t net, mask;
		if (net_cidr4_parse(*c, &net, &mask) == 0 && (a & mask) == net)
			return 0; /* the operator's exception (space serve --allow-resolve) */
	}
	const char *what = addr_refused(a);
	int host = what ? 0 : addr_is_host(a);
	if (host < 0)
		return fail(err, len, -EINVAL, "resolve.%s: cannot check %s against this host's addresses", name, ip);
	if (what || host)
		return fail(err, len, -EINVAL, "resolve.%s: %s is %s address, which a policy from an API caller may "
			    "not point a name at (the operator may allow a range: `space serve --allow-resolve CIDR`)",
			    name, ip, what ? what : "this host's own");
	return 0;
}

static int compile_resolve(const struct net_policy_trust *t, const cJSON *in, cJSON *out, char *err, size_t len)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, in) {
		if (!cJSON_IsString(e) || !net_host_valid(e->string) || strlen(e->valuestring) > 64)
			return fail(err, len, -EINVAL, "resolve: '%s' must map a host name to \"IP[:PORT]\"",
				    e->string ? e->string : "?");
		int r = resolve_target(t, e->string, e->valuestring, err, len);
		if (r < 0)
			return r;
		cJSON_AddStringToObject(out, e->string, e->valuestring);
	}
	return 0;
}

/* "passthrough": hosts ("host" or "*.suffix", no port) whose TLS the gateway relays unopened: only the SNI
 * is checked and nothing can be injected, so a host with an inject rule cannot be one. */
static int compile_passthrough(const cJSON *in, const cJSON *inject, cJSON *out, char *err, size_t len)
{
	if (in && (!cJSON_IsArray(in) || cJSON_GetArraySize(in) > MAX_RULES))
		return fail(err, len, -EINVAL, "passthrough: an array of at most %d host names", MAX_RULES);
	const cJSON *e, *r;
	cJSON_ArrayForEach(e, in) {
		char host[256];
		if (!cJSON_IsString(e) || strlen(e->valuestring) >= sizeof(host))
			return fail(err, len, -EINVAL, "passthrough: entries are host names");
		size_t n = strlen(e->valuestring);
		for (size_t i = 0; i <= n; i++)
			host[i] = (char)tolower((unsigned char)e->valuestring[i]);
		if (!net_host_valid(strncmp(host, "*.", 2) ? host : host + 2))
			return fail(err, len, -EINVAL, "passthrough '%s': not a host name or *.suffix", e->valuestring);
		cJSON_ArrayForEach(r, inject) {
			const char *ih = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "host"));
			if (ih && (!strcasecmp(ih, host) || net_host_match(host, ih)))
				return fail(err, len, -EINVAL, "passthrough '%s': the host has an inject rule, which needs "
					    "the gateway to see its requests", e->valuestring);
		}
		cJSON_AddItemToArray(out, cJSON_CreateString(host));
	}
	return 0;
}

/* Frees a tree that held secret values, overwriting its strings first: freed heap keeps its bytes. */
static void wipe_strings(cJSON *j)
{
	for (cJSON *k = j ? j->child : NULL; k; k = k->next) {
		if (cJSON_IsString(k) && k->valuestring)
			explicit_bzero(k->valuestring, strlen(k->valuestring));
		wipe_strings(k);
	}
}
static void wipe_deletep(cJSON **j)
{
	wipe_strings(*j);
	cJSON_Delete(*j);
}

int net_policy_compile(const char *policy_json, const struct net_policy_trust *trust, char **ret_config, char *err,
		       size_t len)
{
	static const struct net_policy_trust untrusted = { 0 };
	const struct net_policy_trust *t = trust ? trust : &untrusted;
	size_t n_allowed = 0;
	for (const char *const *c = t->allow_resolve; c && *c; c++, n_allowed++) {
		uint32_t net, mask;
		if (n_allowed == NET_ALLOW_RESOLVE_MAX || net_cidr4_parse(*c, &net, &mask) < 0)
			return fail(err, len, -EINVAL, "allowed resolve ranges: '%s' is not an IPv4 CIDR (at most %d)",
				    *c, NET_ALLOW_RESOLVE_MAX);
	}
	_cleanup_(cJSON_Deletep) cJSON *p = policy_json ? cJSON_Parse(policy_json) : cJSON_CreateObject();
	if (!p || !cJSON_IsObject(p))
		return fail(err, len, -EINVAL, "network policy: not a JSON object");
	static const char *const known[] = { "allow", "secrets", "inject", "resolve", "ca_file", "limits",
					     "passthrough" };
	for (const cJSON *k = p->child; k; k = k->next) {
		bool ok = false;
		for (size_t i = 0; i < ARRAY_SIZE(known); i++)
			ok |= !strcmp(k->string, known[i]);
		if (!ok)
			return fail(err, len, -EINVAL, "network policy: unknown key '%s'", k->string);
	}
	_cleanup_(wipe_deletep) cJSON *c = cJSON_CreateObject();
	_cleanup_(wipe_deletep) cJSON *secrets = cJSON_CreateObject();
	if (!c || !secrets)
		return -ENOMEM;
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(p, "allow");
	const cJSON *inject = cJSON_GetObjectItemCaseSensitive(p, "inject");
	const cJSON *sec = cJSON_GetObjectItemCaseSensitive(p, "secrets");
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(p, "resolve");
	const cJSON *ca = cJSON_GetObjectItemCaseSensitive(p, "ca_file");
	if ((allow && !cJSON_IsArray(allow)) || (inject && !cJSON_IsArray(inject)) ||
	    (sec && !cJSON_IsObject(sec)) || (res && !cJSON_IsObject(res)) || (ca && !cJSON_IsString(ca)))
		return fail(err, len, -EINVAL,
			    "network policy: allow and inject are arrays, secrets and resolve objects, ca_file a string");
	if (cJSON_GetArraySize(allow) > MAX_RULES || cJSON_GetArraySize(inject) > MAX_RULES ||
	    cJSON_GetArraySize(res) > MAX_RULES || cJSON_GetArraySize(sec) > MAX_RULES)
		return fail(err, len, -E2BIG, "network policy: more than %d entries in a list", MAX_RULES);
	if (ca && !t->trusted) /* a host path, and a trust anchor for the gateway: the operator's */
		return fail(err, len, -EINVAL, "ca_file names a file on the server, which only the operator's "
			    "policies may use");
	cJSON *a = cJSON_AddArrayToObject(c, "allow");
	const cJSON *e;
	cJSON_ArrayForEach(e, allow) {
		if (!cJSON_IsString(e))
			return fail(err, len, -EINVAL, "allow: entries are strings");
		int r = compile_allow(e->valuestring, a, err, len);
		if (r < 0)
			return r;
	}
	cJSON_ArrayForEach(e, sec) {
		if (!cJSON_IsString(e))
			return fail(err, len, -EINVAL, "secrets.%s: a string secret:NAME%s", e->string,
				    t->trusted ? ", env:NAME or file:PATH" : "");
		char *v = NULL;
		int r = secret_read(t, e->string, e->valuestring, &v, err, len);
		if (r < 0)
			return r;
		cJSON_AddStringToObject(secrets, e->string, v);
		explicit_bzero(v, strlen(v));
		free(v);
	}
	int r = compile_inject(inject, secrets, cJSON_AddArrayToObject(c, "inject"), err, len);
	if (r == 0)
		r = compile_resolve(t, res, cJSON_AddObjectToObject(c, "resolve"), err, len);
	if (r == 0)
		r = compile_passthrough(cJSON_GetObjectItemCaseSensitive(p, "passthrough"), inject,
					cJSON_AddArrayToObject(c, "passthrough"), err, len);
	if (r == 0)
		r = compile_limits(cJSON_GetObjectItemCaseSensitive(p, "limits"), cJSON_AddObjectToObject(c, "limits"),
				   err, len);
	if (r < 0)
		return r;
	if (ca)
		cJSON_AddStringToObject(c, "ca_file", ca->valuestring);
	char *s = cJSON_PrintUnformatted(c);
	if (!s)
		return -ENOMEM;
	*ret_config = s;
	return 0;
}
