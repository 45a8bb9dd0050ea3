/* SPDX-License-Identifier: Apache-2.0 */
/* Keys and certificates (OpenSSL): the egress gateway's CA and leaves, and the cluster's CA and host certificates. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "util/x509.h"

static int ext_add(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ext)
		return -EINVAL;
	int ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -ENOMEM;
}

EVP_PKEY *util_x509_key_new(void)
{
	return EVP_EC_gen("P-256");
}

X509 *util_x509_cert_new(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, int days, const char *eku)
{
	X509 *c = X509_new();
	if (!c)
		return NULL;
	uint8_t serial[16];
	RAND_bytes(serial, sizeof(serial));
	serial[0] &= 0x7f;
	BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
	bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c));
	BN_free(bn);
	ok = ok && X509_set_version(c, 2) && X509_gmtime_adj(X509_getm_notBefore(c), -3600) &&
	     X509_gmtime_adj(X509_getm_notAfter(c), (long)days * 86400) && X509_set_pubkey(c, key);
	X509_NAME *name = X509_get_subject_name(c);
	ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0);
	ok = ok && X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name);
	X509 *iss = issuer ? issuer : c;
	ok = ok && ext_add(c, iss, NID_subject_key_identifier, "hash") == 0;
	if (!issuer) {
		ok = ok && ext_add(c, iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == 0 &&
		     ext_add(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign") == 0;
	} else {
		char san[300];
		snprintf(san, sizeof(san), "DNS:%s", cn);
		ok = ok && ext_add(c, iss, NID_authority_key_identifier, "keyid:always") == 0 &&
		     ext_add(c, iss, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
		     ext_add(c, iss, NID_key_usage, "critical,digitalSignature") == 0 &&
		     ext_add(c, iss, NID_ext_key_usage, eku ? eku : "serverAuth") == 0 &&
		     ext_add(c, iss, NID_subject_alt_name, san) == 0;
	}
	ok = ok && X509_sign(c, issuer_key ? issuer_key : key, EVP_sha256()) > 0;
	if (!ok) {
		X509_free(c);
		return NULL;
	}
	return c;
}

int util_x509_write_pem(const char *path, mode_t mode, EVP_PKEY *key, X509 *cert)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -errno;
	}
	bool ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, cert);
	ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
	fclose(f);
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

