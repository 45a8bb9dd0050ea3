/* SPDX-License-Identifier: Apache-2.0 */
/*
 * API keys of `space serve` (`space apikey create|ls|rm`) and the server's rows in its own store
 * (serve_store.c, serve.db): sandbox metadata, envd access tokens (hashed like the keys).
 *
 * A key is "e2b_" + 64 lowercase hex digits (32 random bytes): the form every 2.x E2B SDK accepts, some
 * of which check /^e2b_[0-9a-f]+$/. Only its SHA-256 is stored; checks compare hashes in constant time.
 * A key may be granted to one local uid (`--uid`): a caller on `space serve --unix` whose SO_PEERCRED uid
 * it is acts with that key, without sending it.
 */
#include <errno.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize);

#define APIKEY_PREFIX "e2b_"
#define APIKEY_RANDOM_BYTES 32

/* --- SHA-256 (FIPS 180-4) --- */

static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64], v[8];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, h, sizeof(v));
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = v[7] + (ROR(v[4], 6) ^ ROR(v[4], 11) ^ ROR(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) +
			      sha256_k[i] + w[i];
		uint32_t t2 = (ROR(v[0], 2) ^ ROR(v[0], 13) ^ ROR(v[0], 22)) +
			      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
		memmove(v + 1, v, 7 * sizeof(uint32_t));
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		h[i] += v[i];
}

static void sha256(const void *data, size_t len, unsigned char out[32])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	const unsigned char *p = data;
	size_t left = len;
	for (; left >= 64; left -= 64, p += 64)
		sha256_block(h, p);
	unsigned char tail[128] = { 0 };
	memcpy(tail, p, left);
	tail[left] = 0x80;
	size_t tl = left < 56 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
	sha256_block(h, tail);
	if (tl == 128)
		sha256_block(h, tail + 64);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

static void hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

void serve_apikey_hash_hex(const char *key, char out[65])
{
	unsigned char h[32];
	sha256(key, strlen(key), h);
	hex(h, sizeof(h), out);
}

int serve_apikey_hashes(struct serve_store *s, char ***ret)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT hash FROM api_keys ORDER BY id", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	size_t n = 0;
	char **v = calloc(1, sizeof(char *));
	int rc = SQLITE_DONE, e = v ? 0 : -ENOMEM;
	while (e == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *h = sqlite3_column_blob(st, 0);
		if (!h || sqlite3_column_bytes(st, 0) != 32)
			continue;
		char **nv = realloc(v, (n + 2) * sizeof(char *));
		if (!nv || !(nv[n] = malloc(65))) {
			if (nv)
				v = nv;
			e = -ENOMEM;
			break;
		}
		v = nv;
		v[n + 1] = NULL;
		hex(h, 32, v[n++]);
	}
	if (e == 0 && rc != SQLITE_DONE)
		e = serve_store_errno(rc);
	if (e < 0) {
		for (size_t i = 0; v && i < n; i++)
			free(v[i]);
		free(v);
		return e;
	}
	*ret = v;
	return 0;
}

int serve_apikey_check(struct serve_store *s, const char *key)
{
	unsigned char want[32];
	sha256(key, strlen(key), want);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT id, hash FROM api_keys", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	char found[64] = "";
	int rc;
	/* Every key is compared, each in constant time, so timing tells nothing about which bytes matched. */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *h = sqlite3_column_blob(st, 1);
		if (!h || sqlite3_column_bytes(st, 1) != 32)
			continue;
		unsigned char diff = 0;
		for (int i = 0; i < 32; i++)
			diff |= (unsigned char)(h[i] ^ want[i]);
		if (!diff)
			snprintf(found, sizeof(found), "%s", (const char *)sqlite3_column_text(st, 0));
	}
	if (rc != SQLITE_DONE)
		return serve_store_errno(rc);
	if (!found[0])
		return -EACCES;
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *up = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "UPDATE api_keys SET last_used_ms = ? WHERE id = ?", -1, &up, NULL) ==
	    SQLITE_OK) {
		sqlite3_bind_int64(up, 1, util_wall_ms());
		sqlite3_bind_text(up, 2, found, -1, SQLITE_TRANSIENT);
		sqlite3_step(up); /* best effort: a busy store must not fail the request */
	}
	return 0;
}

int serve_apikey_count(struct serve_store *s)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT count(*) FROM api_keys", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	int rc = sqlite3_step(st);
	return rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : serve_store_errno(rc);
}

int serve_apikey_for_uid(struct serve_store *s, uint32_t uid, char ret_id[SERVE_APIKEY_ID_SIZE])
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT id FROM api_keys WHERE uid = ?", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, uid);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -EACCES;
	if (rc != SQLITE_ROW)
		return serve_store_errno(rc);
	const char *id = (const char *)sqlite3_column_text(st, 0);
	if (!id || strlen(id) >= SERVE_APIKEY_ID_SIZE)
		return -EIO;
	strcpy(ret_id, id);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *up = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "UPDATE api_keys SET last_used_ms = ? WHERE id = ?", -1, &up, NULL) ==
	    SQLITE_OK) {
		sqlite3_bind_int64(up, 1, util_wall_ms());
		sqlite3_bind_text(up, 2, ret_id, -1, SQLITE_STATIC);
		sqlite3_step(up); /* best effort, as for a key */
	}
	return 0;
}

int serve_metadata_set(struct serve_store *s, const char *id, const char *json)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s),
			       json ? "INSERT OR REPLACE INTO sandbox_metadata (sandbox_id, metadata) VALUES (?1, ?2)"
				    : "DELETE FROM sandbox_metadata WHERE sandbox_id = ?1",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	if (json)
		sqlite3_bind_text(st, 2, json, -1, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : serve_store_errno(rc);
}

char *serve_metadata_get(struct serve_store *s, const char *id)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT metadata FROM sandbox_metadata WHERE sandbox_id = ?", -1, &st,
			       NULL) != SQLITE_OK)
		return NULL;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_ROW)
		return NULL;
	return strdup((const char *)sqlite3_column_text(st, 0));
}

/* Deletes the rows of sandbox id from table; -errno when the store refuses. */
static int prune_rows(struct serve_store *s, const char *table, const char *id)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE sandbox_id = ?", table);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(serve_store_db(s), sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return serve_store_errno(rc);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : serve_store_errno(rc);
}

/* The sandboxes the server keeps rows of, at most max of them (the rest wait for the next round). */
#define PRUNE_BATCH 1024
static int prune_candidates(struct serve_store *s, char (*ids)[32], size_t max, size_t *ret_n)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(serve_store_db(s),
				    "SELECT sandbox_id FROM sandbox_metadata UNION SELECT sandbox_id FROM sandbox_tokens "
				    "UNION SELECT sandbox_id FROM sandbox_public",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return serve_store_errno(rc);
	size_t n = 0;
	while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		if (id && strlen(id) < sizeof(ids[0]))
			memcpy(ids[n++], id, strlen(id) + 1);
	}
	*ret_n = n;
	return n == max || rc == SQLITE_DONE ? 0 : serve_store_errno(rc);
}

int serve_metadata_prune(struct serve_store *s, space_ctx *ctx)
{
	/* Read first, then ask the library and delete: no statement of ours stays open across either. */
	_cleanup_free_ char(*ids)[32] = calloc(PRUNE_BATCH, sizeof(*ids));
	size_t n = 0;
	if (!ids)
		return -ENOMEM;
	int r = prune_candidates(s, ids, PRUNE_BATCH, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		enum space_sandbox_status status = SPACE_SANDBOX_CREATING;
		int e = space_sandbox_get_status(ctx, ids[i], &status);
		if (e < 0 && e != -ENOENT)
			continue; /* the library's store is busy: keep the rows for now */
		if (e == -ENOENT || status == SPACE_SANDBOX_DESTROYED)
			r = prune_rows(s, "sandbox_metadata", ids[i]);
		if (r == 0 && (e == -ENOENT || status == SPACE_SANDBOX_DESTROYED))
			r = prune_rows(s, "sandbox_public", ids[i]);
		/* Tokens stay while their sandbox's row does: a destroyed sandbox's token still authenticates,
		 * and the envd plane answers 502 for it like E2B's proxy. */
		if (r == 0 && e == -ENOENT)
			r = prune_rows(s, "sandbox_tokens", ids[i]);
	}
	return r;
}

int serve_public_set(struct serve_store *s, const char *id)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "INSERT OR REPLACE INTO sandbox_public (sandbox_id) VALUES (?1)", -1,
			       &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : serve_store_errno(rc);
}

bool serve_public_get(struct serve_store *s, const char *id)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT 1 FROM sandbox_public WHERE sandbox_id = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	return sqlite3_step(st) == SQLITE_ROW;
}

/* --- envd access tokens --- */

#define TOKEN_PREFIX "sbt_"

int serve_token_create(struct serve_store *s, const char *id, char ret[SERVE_TOKEN_SIZE])
{
	unsigned char raw[32], hash[32];
	char token[SERVE_TOKEN_SIZE];
	if (util_random_bytes(raw, sizeof(raw)) < 0)
		return -EIO;
	strcpy(token, TOKEN_PREFIX);
	hex(raw, sizeof(raw), token + strlen(TOKEN_PREFIX));
	explicit_bzero(raw, sizeof(raw));
	sha256(token, strlen(token), hash);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "INSERT INTO sandbox_tokens (hash, sandbox_id, created_ms) VALUES (?, ?, ?)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_blob(st, 1, hash, sizeof(hash), SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, util_wall_ms());
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return serve_store_errno(rc);
	memcpy(ret, token, sizeof(token));
	return 0;
}

int serve_token_check(struct serve_store *s, const char *token, char ret_id[32])
{
	/* The lookup is by the hash of a 256-bit random value: timing can tell nothing useful about it. */
	unsigned char hash[32];
	sha256(token, strlen(token), hash);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT sandbox_id FROM sandbox_tokens WHERE hash = ?", -1, &st, NULL) !=
	    SQLITE_OK)
		return -EIO;
	sqlite3_bind_blob(st, 1, hash, sizeof(hash), SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -EACCES;
	if (rc != SQLITE_ROW)
		return serve_store_errno(rc);
	snprintf(ret_id, 32, "%s", (const char *)sqlite3_column_text(st, 0));
	return 0;
}

/* --- `space apikey` --- */

/* "--uid" argument: a number or a user name; -1 for "none" (grant: take the uid away). */
static int apikey_parse_uid(const char *arg, int64_t *ret)
{
	uint64_t u;
	if (!strcmp(arg, "none")) {
		*ret = -1;
		return 0;
	}
	if (util_parse_uint(arg, 0, UINT32_MAX - 1, &u) == 0) {
		*ret = (int64_t)u;
		return 0;
	}
	struct passwd pw, *found = NULL;
	char buf[4096];
	if (getpwnam_r(arg, &pw, buf, sizeof(buf), &found) != 0 || !found)
		return -EINVAL;
	*ret = found->pw_uid;
	return 0;
}

/* Binds uid (or NULL when uid < 0) at position i of st. */
static void apikey_bind_uid(sqlite3_stmt *st, int i, int64_t uid)
{
	if (uid < 0)
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_int64(st, i, uid);
}

/* The message for a failed write that set a uid: a uid has one key. */
static int apikey_uid_fail(struct cli *cli, struct serve_store *s, const char *what, int64_t uid)
{
	if ((sqlite3_extended_errcode(serve_store_db(s)) & 0xff) == SQLITE_CONSTRAINT && uid >= 0)
		return cli_fail(cli, -EEXIST, "%s: uid %lld is already granted another key (`space apikey ls`)", what,
				(long long)uid);
	return cli_fail(cli, -EIO, "%s: %s", what, serve_store_errmsg(s));
}

static int apikey_create(struct cli *cli, struct serve_store *s, const char *name, int64_t uid)
{
	unsigned char raw[APIKEY_RANDOM_BYTES], hash[32], idb[5];
	char key[sizeof(APIKEY_PREFIX) + 2 * APIKEY_RANDOM_BYTES], id[16];
	if (util_random_bytes(raw, sizeof(raw)) < 0 || util_random_bytes(idb, sizeof(idb)) < 0)
		return cli_fail(cli, -EIO, "apikey create: random bytes");
	strcpy(key, APIKEY_PREFIX);
	hex(raw, sizeof(raw), key + strlen(APIKEY_PREFIX));
	sha256(key, strlen(key), hash);
	strcpy(id, "key-");
	hex(idb, sizeof(idb), id + 4);
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "INSERT INTO api_keys (id, name, hash, created_ms, uid) VALUES (?, ?, ?, ?, ?)",
			       -1, &st, NULL) != SQLITE_OK)
		return cli_fail(cli, -EIO, "apikey create: %s", serve_store_errmsg(s));
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name ? name : "", -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, hash, sizeof(hash), SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, util_wall_ms());
	apikey_bind_uid(st, 5, uid);
	if (sqlite3_step(st) != SQLITE_DONE)
		return apikey_uid_fail(cli, s, "apikey create", uid);
	if (cli->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "id", id);
		cJSON_AddStringToObject(j, "name", name ? name : "");
		if (uid >= 0)
			cJSON_AddNumberToObject(j, "uid", (double)uid);
		else
			cJSON_AddNullToObject(j, "uid");
		cJSON_AddStringToObject(j, "key", key);
		return cli_print_json(j);
	}
	printf("%s\n", key);
	fprintf(stderr, "space: API key %s created; it is shown only this once\n", id);
	if (uid >= 0)
		fprintf(stderr, "space: uid %lld acts with it on `space serve --unix`\n", (long long)uid);
	return EXIT_OK;
}

static int apikey_grant(struct cli *cli, struct serve_store *s, const char *id, int64_t uid)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "UPDATE api_keys SET uid = ? WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
		return cli_fail(cli, -EIO, "apikey grant: %s", serve_store_errmsg(s));
	apikey_bind_uid(st, 1, uid);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		return apikey_uid_fail(cli, s, "apikey grant", uid);
	if (sqlite3_changes(serve_store_db(s)) == 0) {
		_cleanup_free_ char *shown = util_escape_dup(id, 0);
		fprintf(stderr, "space: apikey grant: no API key '%s' (give its ID, from `space apikey ls`)\n",
			shown ? shown : "?");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int apikey_ls(struct cli *cli, struct serve_store *s)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "SELECT id, name, created_ms, last_used_ms, uid FROM api_keys ORDER BY created_ms",
			       -1, &st, NULL) != SQLITE_OK)
		return cli_fail(cli, -EIO, "apikey ls: %s", serve_store_errmsg(s));
	cJSON *a = cli->json ? cJSON_CreateArray() : NULL;
	if (!cli->json)
		printf("%-14s %-20s %-10s %-19s  %s\n", "ID", "NAME", "UID", "CREATED", "LAST USED");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		const char *name = (const char *)sqlite3_column_text(st, 1);
		int64_t created = sqlite3_column_int64(st, 2), used = sqlite3_column_int64(st, 3);
		bool has_uid = sqlite3_column_type(st, 4) != SQLITE_NULL;
		int64_t uid = sqlite3_column_int64(st, 4);
		if (a) {
			cJSON *j = cJSON_CreateObject();
			cJSON_AddStringToObject(j, "id", id ? id : "");
			cJSON_AddStringToObject(j, "name", name ? name : "");
			cJSON_AddNumberToObject(j, "created_ms", (double)created);
			cJSON_AddNumberToObject(j, "last_used_ms", (double)used);
			if (has_uid)
				cJSON_AddNumberToObject(j, "uid", (double)uid);
			else
				cJSON_AddNullToObject(j, "uid");
			cJSON_AddItemToArray(a, j);
			continue;
		}
		char t1[32], t2[32] = "never";
		cli_time(created, t1, sizeof(t1));
		if (used)
			cli_time(used, t2, sizeof(t2));
		char u[24] = "-";
		if (has_uid)
			snprintf(u, sizeof(u), "%lld", (long long)uid);
		printf("%-14s %-20s %-10s %-19s  %s\n", id ? id : "", name ? name : "", u, t1, t2);
	}
	return a ? cli_print_json(a) : EXIT_OK;
}

static int apikey_rm(struct cli *cli, struct serve_store *s, const char *id)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(serve_store_db(s), "DELETE FROM api_keys WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
		return cli_fail(cli, -EIO, "apikey rm: %s", serve_store_errmsg(s));
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		return cli_fail(cli, -EIO, "apikey rm: %s", serve_store_errmsg(s));
	if (sqlite3_changes(serve_store_db(s)) == 0) {
		return cli_error(-ENOENT, "apikey rm: no API key '%s'", id);
	}
	return EXIT_OK;
}

int cmd_apikey(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("apikey");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	if (argc < 2)
		return cli_usage_error(cmd, "apikey needs a subcommand");
	const char *sub = argv[1], *name = NULL, *id = NULL;
	bool create = !strcmp(sub, "create"), ls = !strcmp(sub, "ls"), rm = !strcmp(sub, "rm");
	bool grant = !strcmp(sub, "grant"), have_uid = false;
	int64_t uid = -1;
	if (!create && !ls && !rm && !grant)
		return cli_usage_error(cmd, "unknown subcommand '%s'", sub);
	if (create || grant) {
		for (int i = 2; i < argc; i++) {
			if (create && !strcmp(argv[i], "--name") && i + 1 < argc)
				name = argv[++i];
			else if (!strcmp(argv[i], "--uid") && i + 1 < argc) {
				if (apikey_parse_uid(argv[++i], &uid) < 0 || (create && uid < 0))
					return cli_usage_error(cmd, "bad --uid '%s' (a uid or a user name%s)", argv[i],
							       grant ? ", or none" : "");
				have_uid = true;
			} else if (grant && !id && argv[i][0] != '-')
				id = argv[i];
			else
				return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
		}
		if (grant && (!id || !have_uid))
			return cli_usage_error(cmd, "apikey grant needs a key ID and --uid UID|none");
	} else if ((ls && argc != 2) || (rm && argc != 3)) {
		return cli_usage_error(cmd, rm ? "apikey rm needs one ID" : "apikey ls takes no arguments");
	}
	struct serve_store *s = NULL;
	char err[512];
	int e = serve_store_open(cli_ctx(cli), &s, err, sizeof(err));
	if (e < 0) {
		return cli_error(e, "apikey: %s", err);
	}
	int rc = create ? apikey_create(cli, s, name, uid)
		 : grant ? apikey_grant(cli, s, id, uid)
		 : ls	 ? apikey_ls(cli, s)
			 : apikey_rm(cli, s, argv[2]);
	serve_store_close(s);
	return rc;
}
