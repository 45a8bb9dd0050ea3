/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy compiler's two trust levels (docs/network.md, "Who may write a policy") and the registered
 * secrets store: an API caller's (untrusted) policy cannot name the host's files or environment, a CA
 * file, or point a name at loopback, link-local, private or the host's own addresses unless the operator
 * allowed the range; the operator's (trusted) can. Registered secrets work in both. No privileges needed
 * except for the host-address check, which makes an address in a network namespace of its own.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/net.h"
#include "net/secrets.h"
#include "../../check.h"


#define HOSTFILE_TEXT "host-file-content-7f3a"
#define ENV_TEXT "server-env-secret-91c2"
#define REG_TEXT "registered-value-55e1"

static char dir[64] = "/tmp/space-policy-trust-XXXXXX", secrets[128], hostfile[128];

/* Compiles p; returns the result code, the config in *cfg (or NULL) and the message in err. */
static int compile(const char *p, const struct net_policy_trust *t, char **cfg, char *err, size_t len)
{
	*cfg = NULL;
	err[0] = '\0';
	return net_policy_compile(p, t, cfg, err, len);
}

/* The refusal is a 400 for an API caller (-EINVAL) with a message that shows nothing of the host. */
static void refused(const char *p, const struct net_policy_trust *t, const char *says)
{
	char err[512], *cfg;
	int r = compile(p, t, &cfg, err, sizeof(err));
	if (r != -EINVAL || !strstr(err, says))
		fprintf(stderr, "policy %s: %d '%s' (want -EINVAL and '%s')\n", p, r, err, says);
	CHECK(r == -EINVAL && !cfg && strstr(err, says));
	CHECK(!strstr(err, HOSTFILE_TEXT) && !strstr(err, ENV_TEXT) && !strstr(err, REG_TEXT));
	CHECK(!strstr(err, dir)); /* neither the secrets directory nor a host file's path */
	free(cfg);
}

/* The value injected by the first inject rule of a compiled policy, or "". */
static void injected(const char *p, const struct net_policy_trust *t, char *out, size_t len)
{
	char err[512], *cfg;
	out[0] = '\0';
	int r = compile(p, t, &cfg, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "policy %s: %d %s\n", p, r, err);
	CHECK(r == 0);
	cJSON *c = cfg ? cJSON_Parse(cfg) : NULL;
	const char *v = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "inject"), 0), "value"));
	snprintf(out, len, "%s", v ? v : "");
	cJSON_Delete(c);
	free(cfg);
}

static void test_store(void)
{
	CHECK(net_secret_write(secrets, "tok", REG_TEXT, strlen(REG_TEXT)) == 0);
	CHECK(net_secret_write(secrets, "other.key_2", "x", 1) == 0);
	struct stat st;
	CHECK(stat(secrets, &st) == 0 && (st.st_mode & 0777) == 0700);
	char path[256];
	snprintf(path, sizeof(path), "%s/tok", secrets);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_uid == geteuid());
	/* Bad names (a path, a hidden file) and values that could not be one header value. */
	CHECK(net_secret_write(secrets, "../x", "v", 1) == -EINVAL);
	CHECK(net_secret_write(secrets, ".hidden", "v", 1) == -EINVAL);
	CHECK(net_secret_write(secrets, "nl", "a\nb", 3) == -EINVAL);
	CHECK(net_secret_write(secrets, "nul", "a\0b", 3) == -EINVAL);
	CHECK(net_secret_write(secrets, "empty", "", 0) == -EINVAL);
	static char big[NET_SECRET_MAX + 1];
	memset(big, 'a', sizeof(big));
	CHECK(net_secret_write(secrets, "big", big, sizeof(big)) == -EINVAL);
	CHECK(net_secret_write(secrets, "max", big, NET_SECRET_MAX) == 0);
	/* Replacing is atomic and leaves no temporary file. */
	CHECK(net_secret_write(secrets, "other.key_2", "y", 1) == 0);
	struct net_secret_info *list = NULL;
	size_t n = 0;
	CHECK(net_secret_list(secrets, &list, &n) == 0);
	CHECK(n == 3 && list && !strcmp(list[0].name, "max") && !strcmp(list[1].name, "other.key_2") &&
	      !strcmp(list[2].name, "tok") && list[2].created_ms > 0);
	free(list);
	char *v = NULL;
	size_t vl = 0;
	CHECK(net_secret_read(secrets, "other.key_2", &v, &vl) == 0 && vl == 1 && v && !strcmp(v, "y"));
	free(v);
	CHECK(net_secret_read(secrets, "max", &v, &vl) == 0 && vl == NET_SECRET_MAX);
	free(v);
	CHECK(net_secret_read(secrets, "missing", &v, &vl) == -ENOENT);
	CHECK(net_secret_remove(secrets, "max") == 0);
	CHECK(net_secret_remove(secrets, "max") == -ENOENT);
	/* A symlink planted as a secret is not followed. */
	snprintf(path, sizeof(path), "%s/link", secrets);
	CHECK(symlink(hostfile, path) == 0);
	CHECK(net_secret_read(secrets, "link", &v, &vl) == -EINVAL);
	CHECK(net_secret_list(secrets, &list, &n) == 0 && n == 2);
	free(list);
	unlink(path);
	/* A directory someone widened is narrowed again on the next write. */
	CHECK(chmod(secrets, 0755) == 0);
	CHECK(net_secret_write(secrets, "tok", REG_TEXT, strlen(REG_TEXT)) == 0);
	CHECK(stat(secrets, &st) == 0 && (st.st_mode & 0777) == 0700);
	/* No directory yet: nothing registered. */
	char none[160];
	snprintf(none, sizeof(none), "%s/none", dir);
	CHECK(net_secret_list(none, &list, &n) == 0 && n == 0);
	free(list);
	CHECK(net_secret_read(none, "tok", &v, &vl) == -ENOENT);
}

static void test_untrusted(void)
{
	const char *allow[] = { "127.0.0.2/32", "10.9.0.0/16", NULL };
	struct net_policy_trust api = { .secrets_dir = secrets, .allow_resolve = allow };
	char p[1024], v[256];
	/* Host files and the server's environment: refused, by trust level, whatever they name. */
	snprintf(p, sizeof(p), "{\"secrets\":{\"K\":\"file:%s\"}}", hostfile);
	refused(p, &api, "only the operator's policies");
	refused("{\"secrets\":{\"K\":\"file:/etc/hostname\"}}", &api, "only the operator's policies");
	refused("{\"secrets\":{\"K\":\"env:NET_TRUST_TEST_ENV\"}}", &api, "only the operator's policies");
	refused("{\"secrets\":{\"K\":\"plain\"}}", &api, "not secret:NAME");
	snprintf(p, sizeof(p), "{\"ca_file\":\"%s\"}", hostfile);
	refused(p, &api, "ca_file");
	/* Registered secrets: by name; an unknown or malformed one is a clear refusal. */
	injected("{\"secrets\":{\"K\":\"secret:tok\"},\"inject\":[{\"host\":\"a.test\",\"header\":\"Authorization\","
		 "\"value\":\"Bearer ${K}\"}]}", &api, v, sizeof(v));
	CHECK(!strcmp(v, "Bearer " REG_TEXT));
	refused("{\"secrets\":{\"K\":\"secret:nope\"}}", &api, "no registered secret named 'nope'");
	refused("{\"secrets\":{\"K\":\"secret:../tok\"}}", &api, "no registered secret");
	struct net_policy_trust none = { 0 }; /* no secrets directory at all */
	refused("{\"secrets\":{\"K\":\"secret:tok\"}}", &none, "no registered secret");
	refused("{\"secrets\":{\"K\":\"secret:tok\"}}", NULL, "no registered secret");
	/* resolve: local and special ranges refused, the operator's ranges and public addresses not. */
	static const char *const bad[] = { "127.0.0.1", "127.0.0.1:8080", "127.1.2.3", "10.0.0.5", "172.16.0.1",
					   "192.168.1.1:443", "100.64.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.1",
					   "255.255.255.255", "198.18.0.1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(p, sizeof(p), "{\"resolve\":{\"api.test\":\"%s\"}}", bad[i]);
		refused(p, &api, "may not point a name at");
	}
	refused("{\"resolve\":{\"api.test\":\"localhost\"}}", &api, "not IPv4[:PORT]");
	refused("{\"resolve\":{\"api.test\":\"::1\"}}", &api, "not IPv4[:PORT]");
	refused("{\"resolve\":{\"api.test\":\"1.2.3.4:0\"}}", &api, "not IPv4[:PORT]");
	char err[512], *cfg;
	CHECK(compile("{\"resolve\":{\"a.test\":\"127.0.0.2:8080\",\"b.test\":\"10.9.3.4\",\"c.test\":\"93.184.216.34:443\"}}",
		      &api, &cfg, err, sizeof(err)) == 0);
	free(cfg);
	/* The same, without the operator's ranges. */
	struct net_policy_trust strict = { .secrets_dir = secrets };
	refused("{\"resolve\":{\"a.test\":\"127.0.0.2:8080\"}}", &strict, "--allow-resolve");
	refused("{\"resolve\":{\"b.test\":\"10.9.3.4\"}}", NULL, "a private");
	/* A malformed operator range is the operator's error, refused whatever the policy. */
	const char *badr[] = { "10.0.0.0/33", NULL };
	struct net_policy_trust broken = { .allow_resolve = badr };
	refused("{}", &broken, "not an IPv4 CIDR");
}

static void test_trusted(void)
{
	struct net_policy_trust op = { .trusted = true, .secrets_dir = secrets };
	char p[1024], v[256], err[512], *cfg;
	snprintf(p, sizeof(p), "{\"secrets\":{\"F\":\"file:%s\"},\"inject\":[{\"host\":\"a.test\",\"header\":\"X\","
		 "\"value\":\"${F}\"}]}", hostfile);
	injected(p, &op, v, sizeof(v));
	CHECK(!strcmp(v, HOSTFILE_TEXT));
	injected("{\"secrets\":{\"E\":\"env:NET_TRUST_TEST_ENV\"},\"inject\":[{\"host\":\"a.test\",\"header\":\"X\","
		 "\"value\":\"${E}\"}]}", &op, v, sizeof(v));
	CHECK(!strcmp(v, ENV_TEXT));
	injected("{\"secrets\":{\"R\":\"secret:tok\"},\"inject\":[{\"host\":\"a.test\",\"header\":\"X\","
		 "\"value\":\"${R}\"}]}", &op, v, sizeof(v));
	CHECK(!strcmp(v, REG_TEXT));
	snprintf(p, sizeof(p), "{\"ca_file\":\"%s\",\"resolve\":{\"a.test\":\"127.0.0.1:8080\",\"b.test\":\"10.1.1.1\"}}",
		 hostfile);
	CHECK(compile(p, &op, &cfg, err, sizeof(err)) == 0);
	cJSON *c = cJSON_Parse(cfg);
	CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "ca_file")), hostfile));
	CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "resolve"), "a.test")),
		      "127.0.0.1:8080"));
	cJSON_Delete(c);
	free(cfg);
	/* Still a well-formed target: the gateway reads IPv4[:PORT] only. */
	CHECK(compile("{\"resolve\":{\"a.test\":\"nope\"}}", &op, &cfg, err, sizeof(err)) == -EINVAL);
}

/* The host's own addresses: in a network namespace of our own, an address that is public by its range
 * (TEST-NET-3) put on lo is refused; its neighbour is not. Needs root (or a user namespace) and ip(8). */
static void test_host_address(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		if ((unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) || system("ip link set lo up && ip addr add 203.0.113.77/32 dev lo") != 0)
			_exit(77);
		struct net_policy_trust api = { .secrets_dir = secrets };
		char err[512], *cfg = NULL;
		int r1 = net_policy_compile("{\"resolve\":{\"a.test\":\"203.0.113.77:443\"}}", &api, &cfg, err, sizeof(err));
		bool said = strstr(err, "this host's own") != NULL;
		free(cfg);
		cfg = NULL;
		int r2 = net_policy_compile("{\"resolve\":{\"a.test\":\"203.0.113.78:443\"}}", &api, &cfg, err, sizeof(err));
		free(cfg);
		const char *allow[] = { "203.0.113.77/32", NULL };
		api.allow_resolve = allow;
		cfg = NULL;
		int r3 = net_policy_compile("{\"resolve\":{\"a.test\":\"203.0.113.77\"}}", &api, &cfg, err, sizeof(err));
		free(cfg);
		_exit(r1 == -EINVAL && said && r2 == 0 && r3 == 0 ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		printf("host-address check skipped: no network namespace or ip(8) here\n");
		return;
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	snprintf(secrets, sizeof(secrets), "%s/secrets", dir);
	snprintf(hostfile, sizeof(hostfile), "%s/hostfile", dir);
	FILE *f = fopen(hostfile, "w");
	if (!f)
		return 1;
	fputs(HOSTFILE_TEXT "\n", f);
	fclose(f);
	setenv("NET_TRUST_TEST_ENV", ENV_TEXT, 1);
	test_store();
	test_untrusted();
	test_trusted();
	test_host_address();
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return check_summary("policy trust");
}
