/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the container image documents (src/image/oci.c) the library parses from an image a user
 * gives it: an index, a manifest, a config and a `docker save` manifest.json, each from the same bytes.
 * Invariants: no sanitizer report; what a parse accepts is within its bounds (digests valid, layers at most
 * OCI_LAYERS_MAX, a working directory absolute, member paths without ".."); the defaults JSON of an accepted
 * config parses again.
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has_dotdot(const char *p)
{
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return true;
		c += n;
		while (*c == '/')
			c++;
	}
	return p[0] == '/';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *doc = malloc(size + 1);
	if (!doc)
		return 0;
	memcpy(doc, data, size);
	doc[size] = '\0';
	char err[600];
	struct oci_desc d;
	bool is_index;
	if (oci_index_pick(doc, size, &d, &is_index, err, sizeof(err)) == 0 && !oci_digest_valid(d.digest))
		__builtin_trap();
	struct oci_manifest m;
	for (int docker = 0; docker < 2; docker++) {
		int r = docker ? oci_docker_manifest_parse(doc, size, &m, err, sizeof(err))
			       : oci_manifest_parse(doc, size, &m, err, sizeof(err));
		if (r < 0)
			continue;
		if (m.n_layers > OCI_LAYERS_MAX)
			__builtin_trap();
		for (size_t i = 0; i < m.n_layers; i++)
			if (docker ? !m.layers[i].path[0] || has_dotdot(m.layers[i].path)
				   : !oci_digest_valid(m.layers[i].desc.digest))
				__builtin_trap();
		if (docker && has_dotdot(m.config_path))
			__builtin_trap();
		oci_manifest_clear(&m);
	}
	struct oci_config c;
	if (oci_config_parse(doc, size, &c, err, sizeof(err)) == 0) {
		if (c.n_diff_ids > OCI_LAYERS_MAX || !c.env || !c.labels ||
		    (c.working_dir && c.working_dir[0] != '/'))
			__builtin_trap();
		char *j = oci_config_defaults_json(&c);
		cJSON *p = j ? cJSON_Parse(j) : NULL;
		if (j && !p)
			__builtin_trap();
		cJSON_Delete(p);
		free(j);
		oci_config_clear(&c);
	}
	free(doc);
	return 0;
}
