/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest side of the nested vsock test (built with gcc -static into the initramfs): listens on vsock
 * port 1024 (or argv[1]), prints "VSOCK-LISTENING <port>", accepts one connection, echoes everything
 * back until the peer closes, prints "VSOCK-ECHOED <bytes>". With argv[2] = P it then connects to the
 * host (CID 2) port P, writes "GUEST-HELLO\n", expects "HOST-ACK\n" and prints
 * "VSOCK-GUEST-CONNECT-OK". Exits 0 when all of that worked.
 */
#include <linux/vm_sockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned port = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1024;
	int l = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 4) < 0) {
		perror("vsock_echo: listen");
		return 1;
	}
	printf("VSOCK-LISTENING %u\n", port);
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0) {
		perror("vsock_echo: accept");
		return 1;
	}
	char buf[4096];
	unsigned long total = 0;
	ssize_t n;
	while ((n = read(c, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(c, buf + off, (size_t)(n - off));
			if (w <= 0) {
				perror("vsock_echo: write");
				return 1;
			}
			off += w;
		}
		total += (unsigned long)n;
	}
	printf("VSOCK-ECHOED %lu\n", total);
	fflush(stdout);
	close(c);
	close(l);
	if (argc < 3)
		return 0;

	struct sockaddr_vm host = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST,
				    .svm_port = (unsigned)strtoul(argv[2], NULL, 10) };
	int s = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&host, sizeof(host)) < 0) {
		perror("vsock_echo: connect to the host");
		return 1;
	}
	char reply[16] = { 0 };
	size_t got = 0;
	if (write(s, "GUEST-HELLO\n", 12) != 12) {
		perror("vsock_echo: write to the host");
		return 1;
	}
	while (got < 9 && (n = read(s, reply + got, 9 - got)) > 0)
		got += (size_t)n;
	if (got != 9 || memcmp(reply, "HOST-ACK\n", 9) != 0) {
		fprintf(stderr, "vsock_echo: no HOST-ACK from the host\n");
		return 1;
	}
	printf("VSOCK-GUEST-CONNECT-OK\n");
	close(s);
	return 0;
}
