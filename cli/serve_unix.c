/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space serve --unix PATH`: the API on a unix socket, for local users who are not root. The socket's mode
 * lets anyone connect; what a caller may do comes from who it is: the kernel's SO_PEERCRED uid of the
 * connection, mapped to the API key the operator granted that uid (`space apikey grant ID --uid N`). The
 * state directory stays root's alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve.h"
#include "util/cleanup.h"

/* Whether path is a socket nobody answers on (a server that died left it): then it may be replaced. */
static int serve_unix_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST; /* never remove what is not a socket */
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return -EADDRINUSE;
	if (errno != ECONNREFUSED)
		return -errno;
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int serve_unix_listen(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (!path[0] || strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "unix socket path must be 1..%zu bytes", sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int e = serve_unix_stale(path, &sa);
	if (e < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 e == -EEXIST ? "exists and is not a socket" : e == -EADDRINUSE ? "a server answers on it" : strerror(-e));
		return e;
	}
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		e = -errno;
		snprintf(err, errlen, "socket: %s", strerror(-e));
		return e;
	}
	/* The socket file gets its mode at bind, from the umask: no moment with a wider one. The server makes
	 * it before it starts any thread, so the process-wide umask is ours to borrow. */
	mode_t old = umask(~mode & 0777);
	int b = bind(fd, (const struct sockaddr *)&sa, sizeof(sa));
	e = -errno;
	umask(old);
	if (b < 0) {
		snprintf(err, errlen, "bind %s: %s", path, strerror(-e));
		return e;
	}
	/* The umask cannot add bits it never clears (a mode with setuid bits is refused by the caller), but
	 * set it exactly all the same. */
	if (chmod(path, mode) < 0 || listen(fd, SOMAXCONN) < 0) {
		e = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-e));
		unlink(path);
		return e;
	}
	return TAKE_FD(fd);
}

int serve_unix_peer_uid(struct MHD_Connection *conn, uint32_t *ret_uid)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return -EBADF;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(ci->connect_fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family != AF_UNIX)
		return -EAFNOSUPPORT;
	/* The credentials the kernel recorded at connect: the caller cannot choose them. */
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0)
		return -errno;
	if (ul != sizeof(uc) || uc.uid == (uid_t)-1)
		return -EACCES;
	*ret_uid = uc.uid;
	return 0;
}
