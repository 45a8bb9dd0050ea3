/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the request reader of space-vmm's control socket (src/vmm/control.c read_request), which
 * reads one line from a client of `space-vmm run`. The input is written to one end of a socket pair
 * (closed after), read from the other. Invariants: no sanitizer report; success only with a
 * NUL-terminated line that fits, and the line holds no newline.
 */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The reader is static: compile the file into the target (its other symbols replace the library's). */
#include "vmm/control.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096) /* a socket buffer holds it all: the reader never waits */
		return 0;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	if (size && write(sv[1], data, size) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	close(sv[1]);
	char buf[CTL_LINE_MAX];
	memset(buf, 0x55, sizeof(buf));
	int fd = -1;
	int r = read_request(sv[0], buf, sizeof(buf), &fd);
	close(sv[0]);
	if (fd >= 0) /* nothing passes descriptors here */
		__builtin_trap();
	if (r >= 0 && (!memchr(buf, '\0', sizeof(buf)) || strchr(buf, '\n')))
		__builtin_trap();
	return 0;
}
