/* SPDX-License-Identifier: Apache-2.0 */
/* Keys and certificates (OpenSSL), for the egress gateway's CA and the cluster's (src/util/x509.c). */
#pragma once

#include <sys/types.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* A new P-256 key, or NULL. */
EVP_PKEY *util_x509_key_new(void);
/* A certificate for cn with key, valid from an hour ago for days: a CA (self-signed, path length 0) when
 * issuer is NULL, else a leaf signed by issuer_key with subjectAltName DNS:cn and the extended key usage
 * eku ("serverAuth", "serverAuth,clientAuth"; NULL: serverAuth). NULL on failure. */
X509 *util_x509_cert_new(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, int days, const char *eku);
/* Writes key (else cert) as PEM to path with mode, through a temporary file and a rename. */
int util_x509_write_pem(const char *path, mode_t mode, EVP_PKEY *key, X509 *cert);
