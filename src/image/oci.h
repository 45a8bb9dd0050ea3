/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON documents of a container image, as the OCI image spec and Docker's `docker save` write them:
 * an image index (index.json, or a nested index / Docker manifest list), an image manifest (OCI or Docker
 * schema 2), an image config, and a `docker save` archive's manifest.json. Every document is hostile:
 * these functions parse a buffer (at most OCI_DOC_MAX bytes) into bounded, checked values, and refuse with
 * a message (-EINVAL, -EOPNOTSUPP) what they cannot take: a digest that is not sha256, a layer media type
 * they do not know, an image for another platform, a config whose diff ids do not match its layers. They
 * read no file: the caller finds the blobs. Private; fuzzed (tests/fuzz/image).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_DOC_MAX (4u << 20)   /* one index, manifest or config */
#define OCI_LAYERS_MAX 128u      /* as space-unpack takes them (Docker's own limit is 127) */
#define OCI_DIGEST_LEN 71        /* "sha256:" + 64 hex digits */
#define OCI_STRS_MAX 4096u       /* entries of Env, Entrypoint, Cmd (the agent's argv/env bound) */
#define OCI_STR_MAX (128u << 10) /* one of them (Linux's MAX_ARG_STRLEN) */
#define OCI_LABELS_MAX 256u
#define OCI_PATH_MAX 4095u

enum oci_comp { OCI_COMP_NONE, OCI_COMP_GZIP, OCI_COMP_ZSTD };

struct oci_desc {
	char media_type[128];
	char digest[OCI_DIGEST_LEN + 1];
	uint64_t size;
	char ref[256];           /* org.opencontainers.image.ref.name or io.containerd.image.name, "" */
};

struct oci_layer {
	struct oci_desc desc;    /* desc.digest "" for a docker-save layer named by path only */
	enum oci_comp comp;
	char path[OCI_PATH_MAX + 1]; /* docker-save: the layer's member name; "" otherwise */
};

struct oci_manifest {
	struct oci_desc config;
	char config_path[OCI_PATH_MAX + 1]; /* docker-save: its member name */
	struct oci_layer *layers;            /* n_layers, calloc'd: oci_manifest_clear */
	size_t n_layers;
	char ref[256];
};

/* What the image config says processes should get, bounded and checked. */
struct oci_config {
	char **env;              /* "KEY=VALUE", NULL-terminated (maybe empty); never NULL after a parse */
	char **entrypoint;       /* NULL: none */
	char **cmd;              /* NULL: none */
	char *working_dir;       /* NULL: none; else absolute */
	char *user;              /* NULL: none; else 1..255 of [A-Za-z0-9._-] with at most one ':' */
	char **labels;           /* "key", "value" pairs, NULL-terminated; never NULL after a parse */
	char diff_ids[OCI_LAYERS_MAX][OCI_DIGEST_LEN + 1];
	size_t n_diff_ids;
	char os[32], architecture[32];
};

/* True for "sha256:" and 64 lowercase hex digits. */
bool oci_digest_valid(const char *s);

/*
 * An image index (index.json, a nested index, a Docker manifest list): the one manifest descriptor for
 * linux/amd64 into *ret. Descriptors whose platform is "unknown/unknown" (build attestations) are not
 * images. One descriptor without a platform is taken as it is; several without one, or several for the
 * platform, are -EINVAL with their refs in the message. *ret_is_index: the descriptor is an index itself
 * (look one level down).
 */
int oci_index_pick(const char *json, size_t len, struct oci_desc *ret, bool *ret_is_index, char *err,
		   size_t errlen);

/* An OCI image manifest or Docker schema 2 manifest: config and layers (at most OCI_LAYERS_MAX). */
int oci_manifest_parse(const char *json, size_t len, struct oci_manifest *ret, char *err, size_t errlen);

/* A `docker save` manifest.json: its one image (several: -EINVAL naming their tags). Layers by path. */
int oci_docker_manifest_parse(const char *json, size_t len, struct oci_manifest *ret, char *err, size_t errlen);

void oci_manifest_clear(struct oci_manifest *m);

/* An image config: refused when it is not for linux/amd64. */
int oci_config_parse(const char *json, size_t len, struct oci_config *ret, char *err, size_t errlen);
void oci_config_clear(struct oci_config *c);

/*
 * The process defaults of c as the library keeps them with a template (a JSON object, malloc'd):
 * {"env":[...],"working_dir":"...","user":"...","entrypoint":[...],"cmd":[...],"labels":{...},
 *  "os":"linux","architecture":"amd64"} with absent values left out.
 */
char *oci_config_defaults_json(const struct oci_config *c);
