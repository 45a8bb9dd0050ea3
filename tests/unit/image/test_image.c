/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/image: the tar reader (ustar, GNU long names, pax records and xattrs; every malformed input refused
 * with its reason) and the container image documents (platform choice, media types, config bounds).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/dockerfile.h"
#include "image/oci.h"
#include "image/tar.h"

#include "../../check.h"

/* ---- a tar writer for the tests ---- */

struct buf {
	unsigned char d[1 << 16];
	size_t n, pos;
};

static void hdr(struct buf *b, const char *name, char type, size_t size, const char *link, int bad_sum)
{
	unsigned char *h = b->d + b->n;
	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 1000);
	snprintf((char *)h + 116, 8, "%07o", 1000);
	snprintf((char *)h + 124, 12, "%011zo", size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	h[156] = (unsigned char)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum + (unsigned)bad_sum);
	b->n += 512;
}

static void data(struct buf *b, const void *p, size_t n)
{
	memcpy(b->d + b->n, p, n);
	b->n += (n + 511) & ~(size_t)511;
}

static void pax(struct buf *b, const char *records)
{
	hdr(b, "PaxHeaders/x", 'x', strlen(records), NULL, 0);
	data(b, records, strlen(records));
}

/* Appends the pax record "LEN kv\n" (LEN counting the whole record) to out. */
static void record(char *out, size_t len, const char *kv)
{
	size_t body = strlen(kv) + 2, n = body + 1;
	while (n != body + (size_t)snprintf(NULL, 0, "%zu", n))
		n = body + (size_t)snprintf(NULL, 0, "%zu", n);
	snprintf(out + strlen(out), len - strlen(out), "%zu %s\n", n, kv);
}

static void end(struct buf *b)
{
	b->n += 1024;
}

static int64_t rd(void *u, void *out, size_t len)
{
	struct buf *b = u;
	size_t n = b->n - b->pos < len ? b->n - b->pos : len;
	memcpy(out, b->d + b->pos, n);
	b->pos += n;
	return (int64_t)n;
}

/* Reads all of b: entries seen, the last error code (0 at a clean end), its message. */
static int read_all(struct buf *b, int *ret_entries, char *err, size_t errlen, struct tar_reader **keep)
{
	struct tar_reader *t;
	b->pos = 0;
	CHECK(tar_reader_new(rd, NULL, b, &t) == 0);
	const struct tar_entry *e;
	int r, n = 0;
	while ((r = tar_next(t, &e)) > 0)
		n++;
	snprintf(err, errlen, "%s", tar_error(t));
	*ret_entries = n;
	if (keep)
		*keep = t;
	else
		tar_reader_free(t);
	return r;
}

static void test_tar_basic(void)
{
	static struct buf b;
	memset(&b, 0, sizeof(b));
	hdr(&b, "etc/", '5', 0, NULL, 0);
	hdr(&b, "etc/hello", '0', 6, NULL, 0);
	data(&b, "hello\n", 6);
	hdr(&b, "etc/sym", '2', 0, "hello", 0);
	hdr(&b, "etc/hard", '1', 0, "etc/hello", 0);
	hdr(&b, "dev/null", '3', 0, NULL, 0);
	/* pax: a long name, size, uid, a fractional mtime, an xattr with a NUL in its value */
	char recs[600] = "", longname[300], rec[512];
	memset(longname, 'n', 299);
	longname[299] = '\0';
	snprintf(rec, sizeof(rec), "path=%s", longname);
	record(recs, sizeof(recs), rec);
	record(recs, sizeof(recs), "uid=4000000");
	record(recs, sizeof(recs), "mtime=1700000000.5000000001");
	pax(&b, recs);
	hdr(&b, "short", '0', 3, NULL, 0);
	data(&b, "abc", 3);
	/* a binary xattr value: "SCHILY.xattr.security.capability=" + 4 bytes with a NUL */
	static const char xrec[] = "41 SCHILY.xattr.security.capability=\x01\x00\x00\x02\n";
	hdr(&b, "PaxHeaders/y", 'x', sizeof(xrec) - 1, NULL, 0);
	data(&b, xrec, sizeof(xrec) - 1);
	hdr(&b, "capfile", '0', 0, NULL, 0);
	/* GNU long name */
	hdr(&b, "././@LongLink", 'L', 201, NULL, 0);
	char ln[201];
	memset(ln, 'g', 200);
	ln[200] = '\0';
	data(&b, ln, 201);
	hdr(&b, "truncated-name", '0', 0, NULL, 0);
	end(&b);

	struct tar_reader *t;
	b.pos = 0;
	CHECK(tar_reader_new(rd, NULL, &b, &t) == 0);
	const struct tar_entry *e;
	CHECK(tar_next(t, &e) == 1 && e->type == TAR_DIR && !strcmp(e->path, "etc/") && e->uid == 1000);
	CHECK(tar_next(t, &e) == 1 && e->type == TAR_REG && e->size == 6 && e->mode == 0644);
	char buf[16];
	CHECK(tar_read(t, buf, 4) == 4 && tar_read(t, buf + 4, 16) == 2 && !memcmp(buf, "hello\n", 6));
	CHECK(tar_read(t, buf, 16) == 0);
	CHECK(tar_next(t, &e) == 1 && e->type == TAR_SYMLINK && !strcmp(e->link, "hello") && e->size == 0);
	CHECK(tar_next(t, &e) == 1 && e->type == TAR_HARDLINK && !strcmp(e->link, "etc/hello"));
	CHECK(tar_next(t, &e) == 1 && e->type == TAR_CHR);
	CHECK(tar_next(t, &e) == 1 && !strcmp(e->path, longname) && e->uid == 4000000 && e->gid == 1000 &&
	      e->mtime == 1700000000 && e->mtime_ns == 500000000 && e->size == 3);
	CHECK(tar_next(t, &e) == 1 && !strcmp(e->path, "capfile") && e->n_xattrs == 1 &&
	      !strcmp(e->xattrs[0].name, "security.capability") && e->xattrs[0].len == 4 &&
	      !memcmp(e->xattrs[0].value, "\x01\x00\x00\x02", 4));
	CHECK(tar_next(t, &e) == 1 && !strcmp(e->path, ln));
	CHECK(tar_next(t, &e) == 0 && tar_next(t, &e) == 0);
	tar_reader_free(t);
}

static void expect_refused(struct buf *b, const char *why)
{
	int n;
	char err[256];
	int r = read_all(b, &n, err, sizeof(err), NULL);
	CHECK(r == -EBADMSG);
	if (!strstr(err, why))
		fprintf(stderr, "wanted '%s', got '%s'\n", why, err);
	CHECK(strstr(err, why) != NULL);
}

static void test_tar_refused(void)
{
	static struct buf b;
#define CASE(...)                                  \
	do {                                       \
		memset(&b, 0, sizeof(b));          \
		__VA_ARGS__;                       \
	} while (0)
	CASE(hdr(&b, "x", '0', 0, NULL, 1); end(&b); expect_refused(&b, "bad header checksum"));
	CASE(hdr(&b, "x", '0', 100, NULL, 0); b.n += 50; expect_refused(&b, "ends inside"));
	CASE(hdr(&b, "x", 'S', 0, NULL, 0); end(&b); expect_refused(&b, "sparse files are not supported"));
	CASE(hdr(&b, "x", 'M', 0, NULL, 0); end(&b); expect_refused(&b, "multi-volume"));
	CASE(hdr(&b, "x", 'Q', 0, NULL, 0); end(&b); expect_refused(&b, "entry type 'Q' is not supported"));
	CASE(pax(&b, "20 GNU.sparse.map=0\n"); hdr(&b, "x", '0', 0, NULL, 0); end(&b);
	     expect_refused(&b, "sparse files (GNU.sparse)"));
	CASE(pax(&b, "99 path=x\n"); hdr(&b, "x", '0', 0, NULL, 0); end(&b); expect_refused(&b, "malformed pax record"));
	CASE(pax(&b, "11 size=-1\n"); hdr(&b, "x", '0', 0, NULL, 0); end(&b); expect_refused(&b, "pax size"));
	CASE(pax(&b, "8 path=\n"); hdr(&b, "x", '0', 0, NULL, 0); end(&b); expect_refused(&b, "pax path of 0 bytes"));
	CASE(pax(&b, "9 path=x\n"); end(&b); expect_refused(&b, "ends after an extended header"));
	CASE(hdr(&b, "l", '2', 0, NULL, 0); end(&b); expect_refused(&b, "a link without a target"));
	/* a pax header larger than the bound is refused before it is read */
	CASE(hdr(&b, "PaxHeaders/big", 'x', (2u << 20), NULL, 0); end(&b); expect_refused(&b, "pax header of"));
	/* an octal field with garbage after its digits */
	CASE(hdr(&b, "x", '0', 0, NULL, 0); memcpy(b.d + 108, "12x4567", 7); memset(b.d + 148, ' ', 8);
	     unsigned sum = 0; for (int i = 0; i < 512; i++) sum += b.d[i]; snprintf((char *)b.d + 148, 8, "%06o", sum);
	     end(&b); expect_refused(&b, "uid is not an octal number"));
	/* the end of the stream right after a header block is a clean end only with nothing pending */
	CASE(hdr(&b, "x", '0', 0, NULL, 0); int n; char err[256]; CHECK(read_all(&b, &n, err, sizeof(err), NULL) == 0);
	     CHECK(n == 1));
#undef CASE
}

static void test_normalize(void)
{
	char out[64];
	CHECK(tar_path_normalize("./a//b/./c/", out, sizeof(out)) == 0 && !strcmp(out, "a/b/c"));
	CHECK(tar_path_normalize("/etc/passwd", out, sizeof(out)) == 0 && !strcmp(out, "etc/passwd"));
	CHECK(tar_path_normalize("./", out, sizeof(out)) == 0 && !strcmp(out, ""));
	CHECK(tar_path_normalize("a/../b", out, sizeof(out)) == -EINVAL);
	CHECK(tar_path_normalize("..", out, sizeof(out)) == -EINVAL);
	CHECK(tar_path_normalize("a/..b/c..", out, sizeof(out)) == 0 && !strcmp(out, "a/..b/c.."));
	CHECK(tar_path_normalize("aaaaaaaaaa/bbbbbbbbbb", out, 10) == -ENAMETOOLONG);
}

#define DG "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DG2 "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define MAN "application/vnd.oci.image.manifest.v1+json"

static void test_oci(void)
{
	char err[600];
	struct oci_desc d;
	bool idx;
	const char *multi = "{\"manifests\":["
			    "{\"mediaType\":\"" MAN "\",\"digest\":\"" DG2 "\",\"size\":1,"
			    "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
			    "{\"mediaType\":\"" MAN "\",\"digest\":\"" DG2 "\",\"size\":1,"
			    "\"platform\":{\"os\":\"unknown\",\"architecture\":\"unknown\"}},"
			    "{\"mediaType\":\"" MAN "\",\"digest\":\"" DG "\",\"size\":7,"
			    "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}";
	CHECK(oci_index_pick(multi, strlen(multi), &d, &idx, err, sizeof(err)) == 0 && !strcmp(d.digest, DG) &&
	      d.size == 7 && !idx);
	const char *arm = "{\"manifests\":[{\"mediaType\":\"" MAN "\",\"digest\":\"" DG "\",\"size\":1,"
			  "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}}]}";
	CHECK(oci_index_pick(arm, strlen(arm), &d, &idx, err, sizeof(err)) == -ENOEXEC && strstr(err, "linux/arm64"));
	const char *two = "{\"manifests\":[{\"digest\":\"" DG "\",\"size\":1},{\"digest\":\"" DG2 "\",\"size\":1}]}";
	CHECK(oci_index_pick(two, strlen(two), &d, &idx, err, sizeof(err)) == -EINVAL && strstr(err, "several images"));
	const char *sha512 = "{\"manifests\":[{\"digest\":\"sha512:00\",\"size\":1}]}";
	CHECK(oci_index_pick(sha512, strlen(sha512), &d, &idx, err, sizeof(err)) == -EOPNOTSUPP);

	struct oci_manifest m;
	const char *man = "{\"schemaVersion\":2,\"mediaType\":\"" MAN "\",\"config\":{\"mediaType\":"
			  "\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" DG "\",\"size\":3},\"layers\":["
			  "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"" DG "\",\"size\":9},"
			  "{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\",\"digest\":\"" DG2
			  "\",\"size\":5}]}";
	CHECK(oci_manifest_parse(man, strlen(man), &m, err, sizeof(err)) == 0 && m.n_layers == 2 &&
	      m.layers[0].comp == OCI_COMP_ZSTD && m.layers[1].comp == OCI_COMP_GZIP && m.config.size == 3);
	oci_manifest_clear(&m);
	const char *foreign = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" DG "\",\"size\":3},\"layers\":["
			      "{\"mediaType\":\"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip\",\"digest\":\"" DG
			      "\",\"size\":9}]}";
	CHECK(oci_manifest_parse(foreign, strlen(foreign), &m, err, sizeof(err)) == -EOPNOTSUPP);
	const char *v1 = "{\"schemaVersion\":1}";
	CHECK(oci_manifest_parse(v1, strlen(v1), &m, err, sizeof(err)) == -EOPNOTSUPP);

	const char *dm = "[{\"Config\":\"abc.json\",\"RepoTags\":[\"a:b\"],\"Layers\":[\"x/layer.tar\",\"./y/layer.tar\"]}]";
	CHECK(oci_docker_manifest_parse(dm, strlen(dm), &m, err, sizeof(err)) == 0 && m.n_layers == 2 &&
	      !strcmp(m.layers[1].path, "y/layer.tar") && !strcmp(m.ref, "a:b") && !strcmp(m.config_path, "abc.json"));
	oci_manifest_clear(&m);
	const char *dmesc = "[{\"Config\":\"abc.json\",\"Layers\":[\"../../etc/shadow\"]}]";
	CHECK(oci_docker_manifest_parse(dmesc, strlen(dmesc), &m, err, sizeof(err)) == -EINVAL);
	const char *dm2 = "[{\"Config\":\"a.json\",\"RepoTags\":[\"one\"],\"Layers\":[]},{\"Config\":\"b.json\",\"Layers\":[]}]";
	CHECK(oci_docker_manifest_parse(dm2, strlen(dm2), &m, err, sizeof(err)) == -EINVAL && strstr(err, "one"));

	struct oci_config c;
	const char *cfg = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":{\"Env\":[\"A=1\",\"NOEQ\",\"=x\"],"
			  "\"WorkingDir\":\"srv\",\"User\":\"app:staff\",\"Entrypoint\":[\"/e\"],\"Cmd\":null,"
			  "\"Labels\":{\"k\":\"v\"}},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" DG "\"]}}";
	CHECK(oci_config_parse(cfg, strlen(cfg), &c, err, sizeof(err)) == 0);
	CHECK(c.env[0] && !strcmp(c.env[0], "A=1") && !c.env[1] && !strcmp(c.working_dir, "/srv") &&
	      !strcmp(c.user, "app:staff") && c.entrypoint && !c.cmd && c.n_diff_ids == 1 && !strcmp(c.labels[1], "v"));
	char *j = oci_config_defaults_json(&c);
	CHECK(j && strstr(j, "\"working_dir\":\"/srv\"") && !strstr(j, "\"cmd\""));
	free(j);
	oci_config_clear(&c);
	const char *bad_user = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":{\"User\":\"a;rm -rf\"},"
			       "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";
	CHECK(oci_config_parse(bad_user, strlen(bad_user), &c, err, sizeof(err)) == -EINVAL && strstr(err, "User"));
	const char *win = "{\"os\":\"windows\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";
	CHECK(oci_config_parse(win, strlen(win), &c, err, sizeof(err)) == -ENOEXEC && strstr(err, "windows/amd64"));
	const char *notdg = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"x\"]}}";
	CHECK(oci_config_parse(notdg, strlen(notdg), &c, err, sizeof(err)) == -EINVAL);
	CHECK(oci_config_parse("[", 1, &c, err, sizeof(err)) == -EINVAL);
	CHECK(oci_digest_valid(DG) && !oci_digest_valid("sha256:ABC") && !oci_digest_valid(NULL));
}

static char *ex(const char *w, const char *const *vars)
{
	char err[256], *out = NULL;
	return dockerfile_expand(w, vars, &out, err, sizeof(err)) == 0 ? out : NULL;
}

static void test_dockerfile(void)
{
	char err[512];
	struct dockerfile df;
	static const char text[] = "# syntax=docker/dockerfile:1\n"
				   "ARG BASE=base\n"
				   "FROM ${BASE} AS b\n"
				   "RUN apt-get update && \\\n"
				   "  # a comment inside\n"
				   "    apt-get install -y x\n"
				   "ENV A=1 B=\"two words\" C='$A'\n"
				   "ENV LEGACY a value\n"
				   "COPY --from=b --chown=app:staff src/ /dst/\n"
				   "ADD [\"a b\", \"/c\"]\n"
				   "cmd [\"x\", \"y\"]\n"
				   "ENTRYPOINT echo $HOME\n"
				   "ARG NODEF\n";
	CHECK(dockerfile_parse(text, strlen(text), &df, err, sizeof(err)) == 0);
	CHECK(df.n == 10);
	CHECK(df.v[0].op == DF_ARG && df.v[0].line == 2 && df.v[0].has_value[0]);
	CHECK(df.v[1].op == DF_FROM && !strcmp(df.v[1].args[0], "${BASE}") && !strcmp(df.v[1].as, "b"));
	CHECK(df.v[2].op == DF_RUN && df.v[2].line == 4 && !df.v[2].json &&
	      !strcmp(df.v[2].args[0], "apt-get update && apt-get install -y x"));
	CHECK(df.v[3].op == DF_ENV && df.v[3].n_args == 6 && !strcmp(df.v[3].args[3], "\"two words\""));
	CHECK(df.v[4].n_args == 2 && !strcmp(df.v[4].args[0], "LEGACY") && !strcmp(df.v[4].args[1], "a value"));
	CHECK(df.v[5].op == DF_COPY && !strcmp(df.v[5].from, "b") && !strcmp(df.v[5].chown, "app:staff") &&
	      df.v[5].n_args == 2);
	CHECK(df.v[6].op == DF_ADD && df.v[6].json && !strcmp(df.v[6].args[0], "a b"));
	CHECK(df.v[7].op == DF_CMD && df.v[7].json && df.v[7].n_args == 2);
	CHECK(df.v[8].op == DF_ENTRYPOINT && !df.v[8].json && !strcmp(df.v[8].args[0], "echo $HOME"));
	CHECK(df.v[9].op == DF_ARG && !df.v[9].has_value[0]);
	dockerfile_free(&df);

	static const char *const refused[][2] = {
		{ "FROM a\nEXPOSE 80\n", "line 2: instruction EXPOSE is not supported" },
		{ "RUN x\n", "the first instruction must be FROM" },
		{ "FROM a\nRUN --mount=type=cache x\n", "RUN flags" },
		{ "FROM a\nCOPY onlyone\n", "needs a source and a destination" },
		{ "FROM a\nENV A=\"open\n", "unterminated quote" },
		{ "FROM a b c\n", "FROM takes BASE [AS NAME]" },
		{ "FROM --platform=linux/arm64 a\n", "is not supported" },
		{ "# escape=`\nFROM a\n", "escape directive" },
		{ "", "no instruction" },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		err[0] = '\0';
		CHECK(dockerfile_parse(refused[i][0], strlen(refused[i][0]), &df, err, sizeof(err)) < 0);
		if (!strstr(err, refused[i][1]))
			fprintf(stderr, "wanted '%s', got '%s'\n", refused[i][1], err);
		CHECK(strstr(err, refused[i][1]) != NULL);
	}
	static const char *const vars[] = { "A=1", "B=two words", "E=", "A=override", NULL };
	char *o;
	CHECK((o = ex("$A-${A}-${B}", vars)) && !strcmp(o, "override-override-two words"));
	free(o);
	CHECK((o = ex("${E:-dflt}|${A:-x}|${A:+set}|${E:+no}|${NONE}", vars)) && !strcmp(o, "dflt|override|set||"));
	free(o);
	CHECK((o = ex("'$A' \"$A\" \\$A", vars)) && !strcmp(o, "$A override $A"));
	free(o);
	CHECK((o = ex("${E:-${A}}", vars)) && !strcmp(o, "override"));
	free(o);
	CHECK(ex("${A", vars) == NULL && ex("${A?x}", vars) == NULL && ex("'open", vars) == NULL);
}

int main(void)
{
	test_dockerfile();
	test_tar_basic();
	test_tar_refused();
	test_normalize();
	test_oci();
	return check_summary("image");
}
