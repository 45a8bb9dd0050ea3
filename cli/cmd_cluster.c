/* SPDX-License-Identifier: Apache-2.0 */
/* `space cluster`: the control plane `space serve --cluster` hosts share (docs/cluster.md), read from its store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>

#include "cli.h"
#include "cluster_store.h"
#include "util/escape.h"
#include "util/x509.h"

#define CLUSTER_CA_DAYS 3650
#define CLUSTER_CERT_DAYS 825

static int pem_path(char *out, size_t n, const char *dir, const char *file)
{
	int k = snprintf(out, n, "%s/%s", dir, file);
	return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

/* `space cluster ca DIR`: the cluster's CA, made once (its key stays with the operator, off the hosts). */
static int cluster_ca(const struct cli_command *cmd, const char *dir)
{
	char key[4096], crt[4096];
	if (pem_path(key, sizeof(key), dir, "ca.key") < 0 || pem_path(crt, sizeof(crt), dir, "ca.pem") < 0)
		return cli_usage_error(cmd, "path too long: %s", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return cli_error(-errno, "cluster ca: make %s: %s", dir, strerror(errno));
	if (access(key, F_OK) == 0 || access(crt, F_OK) == 0)
		return cli_error(-EEXIST, "cluster ca: %s already holds a CA: a new one would not sign for the hosts that "
				 "trust the old one", dir);
	EVP_PKEY *k = util_x509_key_new();
	X509 *c = k ? util_x509_cert_new("libspace cluster CA", k, NULL, NULL, CLUSTER_CA_DAYS, NULL) : NULL;
	int e = c ? util_x509_write_pem(key, 0600, k, NULL) : -ENOMEM;
	if (e == 0)
		e = util_x509_write_pem(crt, 0644, NULL, c);
	EVP_PKEY_free(k);
	X509_free(c);
	if (e < 0)
		return cli_error(e, "cluster ca: write %s: %s", dir, strerror(-e));
	printf("cluster CA in %s (ca.pem for every host; keep ca.key with the operator, off the hosts)\n", dir);
	return EXIT_OK;
}

static X509 *read_cert(const char *path)
{
	FILE *f = fopen(path, "re");
	X509 *c = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	return c;
}

/* `space cluster cert NAME --ca DIR --out DIR`: a host's key and certificate (CN NAME, server and client
 * use), and the CA's certificate beside them: what --cluster-tls reads. */
static int cluster_cert(const struct cli_command *cmd, const char *name, const char *ca_dir, const char *out)
{
	if (!cluster_name_ok(name))
		return cli_usage_error(cmd, "bad host name '%s' (want 1-63 of a-z, 0-9, -)", name);
	char cakey[4096], cacrt[4096], key[4096], crt[4096], oca[4096];
	if (pem_path(cakey, sizeof(cakey), ca_dir, "ca.key") < 0 || pem_path(cacrt, sizeof(cacrt), ca_dir, "ca.pem") < 0 ||
	    pem_path(key, sizeof(key), out, "host.key") < 0 || pem_path(crt, sizeof(crt), out, "host.pem") < 0 ||
	    pem_path(oca, sizeof(oca), out, "ca.pem") < 0)
		return cli_usage_error(cmd, "path too long");
	FILE *f = fopen(cakey, "re");
	EVP_PKEY *ik = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	X509 *ic = read_cert(cacrt);
	if (!ik || !ic) {
		EVP_PKEY_free(ik);
		X509_free(ic);
		return cli_error(-ENOENT, "cluster cert: no CA in %s (`space cluster ca %s`)", ca_dir, ca_dir);
	}
	if (mkdir(out, 0700) < 0 && errno != EEXIST) {
		int e = -errno;
		EVP_PKEY_free(ik);
		X509_free(ic);
		return cli_error(e, "cluster cert: make %s: %s", out, strerror(-e));
	}
	EVP_PKEY *k = util_x509_key_new();
	X509 *c = k ? util_x509_cert_new(name, k, ic, ik, CLUSTER_CERT_DAYS, "serverAuth,clientAuth") : NULL;
	int e = c ? util_x509_write_pem(key, 0600, k, NULL) : -ENOMEM;
	if (e == 0)
		e = util_x509_write_pem(crt, 0644, NULL, c);
	if (e == 0)
		e = util_x509_write_pem(oca, 0644, NULL, ic);
	EVP_PKEY_free(k);
	X509_free(c);
	EVP_PKEY_free(ik);
	X509_free(ic);
	if (e < 0)
		return cli_error(e, "cluster cert: write %s: %s", out, strerror(-e));
	printf("host %s: %s/host.pem, host.key and ca.pem (give the directory to `space serve --cluster-tls` there)\n",
	       name, out);
	return EXIT_OK;
}

struct listing {
	cJSON *arr;
	bool json;
};

static void text(const char *s)
{
	/* What the store holds was written by hosts, not by this operator: escaped on a terminal. */
	char *e = util_escape_dup(s, 0);
	fputs(e ? e : "?", stdout);
	free(e);
}

static int host_row(const struct cluster_host_row *h, void *arg)
{
	struct listing *l = arg;
	const char *state = h->up ? (h->serving ? "up" : "up (stopping)") : "lost";
	if (l->json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", h->name);
		cJSON_AddStringToObject(o, "url", h->url);
		cJSON_AddStringToObject(o, "state", h->up ? "up" : "lost");
		cJSON_AddBoolToObject(o, "serving", h->serving);
		cJSON_AddNumberToObject(o, "capacity", h->capacity);
		cJSON_AddNumberToObject(o, "live", h->live);
		cJSON_AddNumberToObject(o, "heartbeat_age_s", h->heartbeat_age_s);
		cJSON_AddNumberToObject(o, "incarnation", (double)h->incarnation);
		cJSON_AddStringToObject(o, "version", h->version);
		cJSON_AddItemToArray(l->arr, o);
		return 0;
	}
	text(h->name);
	printf("\t%s\t%u/%u\t%.1fs\t", state, h->live, h->capacity, h->heartbeat_age_s);
	text(h->url);
	putchar('\n');
	return 0;
}

static int sandbox_row(const struct cluster_sandbox *s, void *arg)
{
	struct listing *l = arg;
	if (l->json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", s->id);
		cJSON_AddStringToObject(o, "host", s->host);
		cJSON_AddStringToObject(o, "state", cluster_sandbox_state_name(s->state));
		cJSON_AddStringToObject(o, "template", s->template);
		cJSON_AddItemToArray(l->arr, o);
		return 0;
	}
	text(s->id);
	putchar('\t');
	text(s->host);
	printf("\t%s\t", cluster_sandbox_state_name(s->state));
	text(s->template);
	putchar('\n');
	return 0;
}

int cmd_cluster(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("cluster");
	if (cli_wants_help(argc, argv) || argc < 2)
		return cli_help(cmd);
	const char *sub = argv[1], *conninfo = getenv("SPACE_CLUSTER"), *host = NULL;
	const char *ca_dir = NULL, *out = NULL, *arg = NULL;
	bool json = cli->json, all = false;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--cluster") && i + 1 < argc)
			conninfo = argv[++i];
		else if (!strcmp(argv[i], "--ca") && i + 1 < argc && !strcmp(sub, "cert"))
			ca_dir = argv[++i];
		else if (!strcmp(argv[i], "--out") && i + 1 < argc && !strcmp(sub, "cert"))
			out = argv[++i];
		else if (argv[i][0] != '-' && !arg && (!strcmp(sub, "ca") || !strcmp(sub, "cert")))
			arg = argv[i];
		else if (!strcmp(argv[i], "--host") && i + 1 < argc && !strcmp(sub, "ls"))
			host = argv[++i];
		else if (!strcmp(argv[i], "--all") && !strcmp(sub, "ls"))
			all = true;
		else
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	if (!strcmp(sub, "ca"))
		return arg ? cluster_ca(cmd, arg) : cli_usage_error(cmd, "cluster ca needs the directory to make it in");
	if (!strcmp(sub, "cert")) {
		if (!arg || !ca_dir || !out)
			return cli_usage_error(cmd, "cluster cert needs NAME, --ca DIR and --out DIR");
		return cluster_cert(cmd, arg, ca_dir, out);
	}
	if (strcmp(sub, "init") && strcmp(sub, "hosts") && strcmp(sub, "ls"))
		return cli_usage_error(cmd, "unknown subcommand '%s' (init, hosts, ls, ca, cert)", sub);
	if (!conninfo || !*conninfo)
		return cli_usage_error(cmd, "which cluster: --cluster CONNINFO (or SPACE_CLUSTER)");
	struct cluster_store *cs = NULL;
	char err[600];
	int e = cluster_open(conninfo, &cs, err, sizeof(err));
	if (e < 0)
		return cli_error(e, "cluster: %s", err);
	struct listing l = { .json = json, .arr = cJSON_CreateArray() };
	if (!strcmp(sub, "init")) {
		if (json)
			printf("{\"schema_version\":%d,\"backend\":\"%s\"}\n", cluster_schema_version(), cluster_backend(cs));
		else
			printf("cluster store ready (%s, schema version %d)\n", cluster_backend(cs), cluster_schema_version());
	} else if (!strcmp(sub, "hosts")) {
		if (!json)
			printf("HOST\tSTATE\tLIVE/CAPACITY\tHEARTBEAT\tURL\n");
		e = cluster_host_list(cs, host_row, &l);
	} else {
		if (!json)
			printf("ID\tHOST\tSTATE\tTEMPLATE\n");
		e = cluster_sandbox_list(cs, host, all, sandbox_row, &l);
	}
	cluster_close(cs);
	if (e == 0 && json && strcmp(sub, "init")) {
		cli_print_json(l.arr);
		l.arr = NULL;
	}
	cJSON_Delete(l.arr);
	if (e < 0)
		return cli_error(e, "cluster %s: %s", sub, cluster_errmsg());
	return EXIT_OK;
}
