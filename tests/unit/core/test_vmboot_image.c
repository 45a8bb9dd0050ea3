/* SPDX-License-Identifier: Apache-2.0 */
/* The boot image parser (src/vmm/boot.c) on Debian's real vmlinuz, as nested-kvm caches it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "vmm/boot.h"

int main(void)
{
	const char *cache = getenv("NESTED_KVM_CACHE") ? getenv("NESTED_KVM_CACHE") : "/var/cache/nested-kvm";
	char p[512], kernel[700];
	char *kver = NULL, *data = NULL;
	size_t len;
	snprintf(p, sizeof(p), "%s/ready", cache);
	if (util_read_file(p, 256, &kver, &len) < 0) {
		printf("SKIP: nested-kvm has cached no Debian kernel (%s)\n", p);
		return 77;
	}
	kver[strcspn(kver, "\n")] = '\0';
	snprintf(kernel, sizeof(kernel), "%s/root/boot/vmlinuz-%s", cache, kver);
	if (util_read_file(kernel, 256u << 20, &data, &len) < 0) {
		printf("SKIP: %s is not readable\n", kernel);
		return 77;
	}
	struct kernel_image img;
	char err[256] = "";
	int fails = 0;
	int r = kernel_image_parse((const uint8_t *)data, len, &img, err, sizeof(err));
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL: %s: ", #c); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); fails++; } } while (0)
	CHECK(r == 0, "parse %s: %s", kernel, err);
	if (r == 0) {
		unsigned sects = (uint8_t)data[0x1f1];
		CHECK(img.kind == KERNEL_BZIMAGE, "kind %d", img.kind);
		CHECK(img.version >= 0x20f, "boot protocol %x (Linux 6.1 speaks 2.15)", img.version);
		CHECK(img.setup_size == (uint64_t)(sects + 1) * 512, "setup %llu bytes for %u sects",
		      (unsigned long long)img.setup_size, sects);
		CHECK(img.kernel_alignment >= 0x200000 && !(img.kernel_alignment & (img.kernel_alignment - 1)),
		      "kernel alignment %#x", img.kernel_alignment);
		CHECK(img.relocatable, "Debian's kernel is relocatable");
		CHECK(img.entry == BOOT_BZIMAGE_LOAD + 0x200, "entry %#llx", (unsigned long long)img.entry);
		CHECK(img.cmdline_size >= 2047, "cmdline size %u", img.cmdline_size);
		printf("%s: protocol %u.%02u, %u setup sects, alignment %#x, relocatable %d, init_size %u\n", kernel,
		       img.version >> 8, img.version & 0xff, sects, img.kernel_alignment, img.relocatable, img.init_size);
	}
	free(data);
	free(kver);
	return fails ? 1 : 0;
}
