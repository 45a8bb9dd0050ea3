/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the snapshot file parser (src/vmm/snapshot_format.c) on hostile files. Byte 0 of the
 * input chooses whether the harness repairs the CRC32C before parsing (odd: it does, so mutations reach
 * the section walk instead of stopping at the checksum); the rest is the file's header + sections.
 * Invariants: no sanitizer report; every section snap_next() and snap_find() yield lies wholly inside
 * the buffer, and the header + sections part of a file that passed snap_parse() walks to its end with
 * nsections sections.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/snapshot_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_inside(const uint8_t *buf, size_t len, const struct snap_section *s)
{
	if (s->data < buf || s->len > len || (size_t)(s->data - buf) > len - s->len)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool fix_crc = data[0] & 1;
	size_t len = size - 1;
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);
	struct snap_header h;
	if (fix_crc && len >= sizeof(h)) {
		memcpy(&h, buf, sizeof(h));
		if (h.sections_len <= len - sizeof(h)) {
			h.crc = 0;
			uint32_t crc = snap_crc32c(0, &h, sizeof(h));
			h.crc = snap_crc32c(crc, buf + sizeof(h), (size_t)h.sections_len);
			memcpy(buf, &h, sizeof(h));
		}
	}
	char err[160];
	(void)snap_parse_header(buf, len, &h, err, sizeof(err));
	if (snap_parse(buf, len, &h, err, sizeof(err)) == 0) {
		/* Restore walks the header + sections part it read (RAM follows at mem_offset). */
		len = sizeof(h) + (size_t)h.sections_len;
		size_t pos = 0, n = 0;
		struct snap_section s;
		int r;
		while ((r = snap_next(buf, len, &pos, &s)) == 1) {
			check_inside(buf, len, &s);
			n++;
		}
		if (r < 0 || n != h.nsections)
			__builtin_trap();
		for (uint32_t t = 0; t <= SNAP_SECTION_TYPES; t++)
			if (snap_find(buf, len, t, 0, &s))
				check_inside(buf, len, &s);
	}
	free(buf);
	return 0;
}
