/* SPDX-License-Identifier: Apache-2.0 */
/*
 * space-unpack: builds a template's root file system from hostile tar streams, and reads one back.
 *
 *   space-unpack apply --uid UID --max-bytes N [--user SPEC] [--workdir DIR] --layer FD,OFFSET,LENGTH,COMP,DIGEST,DIFFID...
 *     fd 3  rootfs.ext4, read-write: empty until the library says "go" (it makes the file system between
 *           the two passes, at the size the first one measured)
 *     fd 4  the control socket to the library: status lines out, "go" or "stop" in
 *     fd 5+ the layers' sources (a blob each, or one image archive holding them at their offsets)
 *   space-unpack check --uid UID       fd 3 an ext4 image, read-only: "shell 1" when /bin/sh is there
 *   space-unpack export --uid UID      fd 3 an ext4 image, read-only; fd 5 its tree as a tar stream
 *   space-unpack copy --max-bytes N --max-entries N
 *     fd 3  the source tree's root directory; fd 5 the destination's root directory, empty: both detached,
 *           idmapped mounts; fd 4 the control socket
 *   space-unpack --describe-sandbox    how it confines itself, as JSON (space doctor --verbose)
 *
 * apply reads every layer twice. The first pass verifies (the blob's digest, the uncompressed tar's diff
 * id, every header within the tar reader's bounds) and measures (data blocks and entries, an upper bound
 * of what the tree needs); nothing is written before all layers passed it. The second applies them in
 * order into the image with libext2fs (apply.c), checking both digests again: a blob that changed between
 * the passes fails the import. Then the image's user and shell are looked up in the tree it made.
 *
 * It runs as a uid of its own (a machine-wide unique slot the library holds), with no capabilities nor
 * any way to gain one, no_new_privs, not dumpable, RLIMIT_FSIZE at the image's size (0 until the image is
 * made, under a hard limit the library set), and
 * a seccomp allowlist of the calls the passes make, each on the descriptors it needs: it opens nothing, so
 * no name in a layer can reach the host's file system, and a compromised helper can write only into the
 * one image file it was handed.
 *
 * copy (copy.c; confined and run by copy_main.c) runs otherwise: as uid 0 of a user namespace the library
 * made, whose 0..65535 is a host range of its own, refusing the initial one. It unshares a mount namespace,
 * chroots into the destination (every path it names is there; the source is only fd 3, a detached mount
 * whose ".." stays at its root), keeps only the capabilities a file's owner has (chown, DAC override and
 * read-search, fowner, fsetid, setfcap), no_new_privs, not dumpable, and installs an allowlist of the *at
 * calls the walk makes (the table below, as for the other modes).
 *
 * Status lines on fd 4: "ready", "progress verify|apply LAYER DONE TOTAL", "progress copy ENTRIES BYTES",
 * "measure BYTES ENTRIES", "warn TEXT", "user UID GID HOME", "shell 0|1", "image-like NAME", "counts ...",
 * "done", or "error ERRNO TEXT" (then exit 1).
 */
#include <errno.h>
#include <et/com_err.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "unpack/unpack.h"
#include "util/cleanup.h"
#include "util/confine.h"
#include "util/uidalloc.h"
#include "util/util.h"

/* Sanitizer runtimes need far more than the passes: only a sanitized test build leaves the filter out, as
 * for space-vmm and space-gateway. */
#if HAVE_TEST_SWITCHES
#if defined(__SANITIZE_ADDRESS__)
#define UNPACK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNPACK_SANITIZED 1
#endif
#endif
#endif

#define AS_LIMIT (3ull << 30) /* zstd's 128 MiB window, xz's 256 MiB, libext2fs's bitmaps: well below */
#define PROGRESS_EVERY (8u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(void, seccomp_release)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct applier, applier_free)

/* What a rule lets through: any arguments, a descriptor in its first argument, or the flags named. */
enum fd_rule {
	ENOTTY_ANY, ANY, FD_IMAGE, FD_CTL, FD_SOURCES, FD_OUT, NO_EXEC, FSTAT_IMAGE, FSIZE_SELF, GETFD_IMAGE,
	PRCTL_GET_DUMPABLE,
	FD_STREAM,       /* the first argument 0: receive's stream */
	OPEN_NOFOLLOW,   /* openat with O_NOFOLLOW */
	STAT_NOFOLLOW,   /* newfstatat with exactly AT_SYMLINK_NOFOLLOW */
	STAT_FD,         /* newfstatat with exactly AT_EMPTY_PATH: glibc's fstat */
	AT4_NOFOLLOW,    /* the fifth argument (fchownat's flags) exactly AT_SYMLINK_NOFOLLOW */
	AT4_ZERO,        /* the fifth argument (linkat's flags) 0: neither followed nor by descriptor */
	TIMES_FD,        /* utimensat on a descriptor: no path, no flags (futimens) */
	TIMES_NOFOLLOW,  /* utimensat with exactly AT_SYMLINK_NOFOLLOW */
	MKNOD_FIFO,      /* mknodat of a FIFO only */
};

static const struct rule {
	int nr;
	enum fd_rule on;
	unsigned modes; /* 1 << enum unpack_mode */
	const char *why;
} rules[] = {
#define IMAGE ((1u << MODE_APPLY) | (1u << MODE_CHECK) | (1u << MODE_EXPORT) | (1u << MODE_ADD))
#define COPY (1u << MODE_COPY)
#define RECV (1u << MODE_RECEIVE)
#define TREES (COPY | RECV)
#define ALL (IMAGE | TREES)
#define WRITES ((1u << MODE_APPLY) | (1u << MODE_ADD))
	{ SCMP_SYS(read), FD_CTL, 1u << MODE_APPLY, "the library's go or stop" },
	{ SCMP_SYS(read), FD_STREAM, RECV, "the btrfs send stream (fd 0)" },
	{ SCMP_SYS(write), FD_CTL, ALL, "status lines" },
	{ SCMP_SYS(write), FD_OUT, 1u << MODE_EXPORT, "the exported tar stream" },
	{ SCMP_SYS(pread64), FD_IMAGE, IMAGE, "the image (libext2fs through e2fd.c)" },
	{ SCMP_SYS(pread64), FD_SOURCES, WRITES, "the layers' bytes" },
	{ SCMP_SYS(pwrite64), FD_IMAGE, WRITES, "the image; RLIMIT_FSIZE keeps it at its size" },
	{ SCMP_SYS(prlimit64), FSIZE_SELF, 1u << MODE_APPLY,
	  "its own RLIMIT_FSIZE down to the image's size, once the library made it (never above the hard limit "
	  "the library set)" },
	{ SCMP_SYS(fdatasync), FD_IMAGE, WRITES, "the image is flushed when libext2fs closes it" },
	{ SCMP_SYS(mmap), NO_EXEC, ALL, "memory (never executable)" },
	{ SCMP_SYS(munmap), ANY, ALL, "memory" },
	{ SCMP_SYS(mremap), ANY, ALL, "memory" },
	{ SCMP_SYS(brk), ANY, ALL, "memory" },
	{ SCMP_SYS(madvise), ANY, ALL, "the allocator gives memory back" },
	{ SCMP_SYS(clock_gettime), ANY, ALL, "time stamps of new inodes (where the vDSO cannot answer)" },
	{ SCMP_SYS(gettimeofday), ANY, ALL, "the same" },
	{ SCMP_SYS(getuid), ANY, IMAGE, "libext2fs's safe_getenv asks whether it runs set-id (it does not)" },
	{ SCMP_SYS(geteuid), ANY, IMAGE, "the same" },
	{ SCMP_SYS(getgid), ANY, IMAGE, "the same" },
	{ SCMP_SYS(getegid), ANY, IMAGE, "the same" },
	{ SCMP_SYS(prctl), PRCTL_GET_DUMPABLE, IMAGE, "the same: not dumpable, so it reads no environment" },
	{ SCMP_SYS(rt_sigreturn), ANY, ALL, "return from the SIGSYS reporter" },
	{ SCMP_SYS(exit_group), ANY, ALL, "the end" },
	/* copy: chrooted into the destination, so a path can name nothing else; the source is fd 3 only. */
	{ SCMP_SYS(openat), OPEN_NOFOLLOW, COPY,
	  "an entry of either tree, by its name relative to its directory's descriptor; never through a symlink" },
	{ SCMP_SYS(newfstatat), STAT_NOFOLLOW, COPY, "an entry's type, owner, mode and times, itself not followed" },
	{ SCMP_SYS(newfstatat), STAT_FD, COPY, "fstat: an opened entry is the one its stat saw" },
	{ SCMP_SYS(getdents64), ANY, COPY, "the names in a source directory" },
	{ SCMP_SYS(close), ANY, COPY, "each directory and file when done with it" },
	{ SCMP_SYS(copy_file_range), ANY, COPY, "a file's data extents, in the kernel" },
	{ SCMP_SYS(pread64), ANY, COPY, "the same where copy_file_range cannot (ext4 to btrfs: EXDEV)" },
	{ SCMP_SYS(pwrite64), ANY, COPY, "the same, into the destination file" },
	{ SCMP_SYS(lseek), ANY, COPY, "SEEK_DATA and SEEK_HOLE: holes stay holes" },
	{ SCMP_SYS(ftruncate), ANY, COPY, "a file's size past its last data extent" },
	{ SCMP_SYS(mkdirat), ANY, COPY, "a directory" },
	{ SCMP_SYS(readlinkat), ANY, COPY, "a symlink's target, through its O_PATH descriptor" },
	{ SCMP_SYS(symlinkat), ANY, COPY, "a symlink" },
	{ SCMP_SYS(linkat), AT4_ZERO, COPY, "a hard link to the first copy, by its path in the destination" },
	{ SCMP_SYS(mknodat), MKNOD_FIFO, COPY, "a FIFO (device nodes are skipped)" },
	{ SCMP_SYS(fchown), ANY, COPY, "a file's or directory's owner" },
	{ SCMP_SYS(fchownat), AT4_NOFOLLOW, COPY, "a symlink's or FIFO's owner, the name not followed" },
	{ SCMP_SYS(fchmod), ANY, COPY, "a file's or directory's mode, set-id bits included" },
	{ SCMP_SYS(fchmodat), ANY, COPY,
	  "a FIFO's mode (the name just made by mknodat, in a directory only this copy writes)" },
	{ SCMP_SYS(utimensat), TIMES_FD, COPY, "futimens: a file's or directory's atime and mtime" },
	{ SCMP_SYS(utimensat), TIMES_NOFOLLOW, COPY, "a symlink's or FIFO's, the name not followed" },
	{ SCMP_SYS(flistxattr), ANY, COPY, "extended attributes, by descriptor" },
	{ SCMP_SYS(fgetxattr), ANY, COPY, "the same" },
	{ SCMP_SYS(fsetxattr), ANY, TREES, "the same" },
	/* receive: chrooted into the quarantine subvolume; every name is checked (bstream.c) before use; the
	 * parent's files (clone sources) are reached through fd 3 by openat2, beneath it, no symlink. */
	{ SCMP_SYS(openat), OPEN_NOFOLLOW, RECV, "a new file (mkfile: O_CREAT | O_EXCL), never through a symlink" },
	{ SCMP_SYS(openat2), ANY, RECV,
	  "a file to write, clone from or give attributes, beneath its root and without symlinks (checked by "
	  "the kernel: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)" },
	{ SCMP_SYS(close), ANY, RECV, "each file when done with it" },
	{ SCMP_SYS(mkdirat), ANY, RECV, "mkdir" },
	{ SCMP_SYS(mknodat), MKNOD_FIFO, RECV, "mkfifo (device nodes and sockets are refused)" },
	{ SCMP_SYS(symlinkat), ANY, RECV, "symlink" },
	{ SCMP_SYS(renameat), ANY, RECV, "rename" },
	{ SCMP_SYS(renameat2), ANY, RECV, "the same, where the C library uses it" },
	{ SCMP_SYS(linkat), AT4_ZERO, RECV, "link, the target not followed" },
	{ SCMP_SYS(unlinkat), ANY, RECV, "unlink and rmdir" },
	{ SCMP_SYS(pwrite64), ANY, RECV, "write, and clones copied" },
	{ SCMP_SYS(pread64), ANY, RECV, "clones copied where copy_file_range cannot" },
	{ SCMP_SYS(copy_file_range), ANY, RECV, "clone: shared extents, in the kernel" },
	{ SCMP_SYS(ftruncate), ANY, RECV, "truncate" },
	{ SCMP_SYS(fchmodat), ANY, RECV, "chmod, set-id bits included" },
	{ SCMP_SYS(fchownat), AT4_NOFOLLOW, RECV, "chown, the name not followed" },
	{ SCMP_SYS(utimensat), TIMES_NOFOLLOW, RECV, "utimes, the name not followed" },
	{ SCMP_SYS(fremovexattr), ANY, RECV, "remove_xattr (user.* and security.capability only)" },
#undef ALL
#undef TREES
#undef RECV
#undef IMAGE
#undef WRITES
#undef COPY
};

static enum unpack_mode run_mode;
static int n_sources; /* fds UNPACK_FIRST_FD .. + n_sources - 1 */

void unpack_status(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	/* One line whatever a name in a layer holds: the library escapes the rest when it shows it. */
	for (int i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20)
			line[i] = '?';
	line[n++] = '\n';
	(void)util_write_all(UNPACK_CTL_FD, line, (size_t)n);
}

const char *unpack_e2err(long code)
{
	return error_message(code);
}

_Noreturn void unpack_die_err(int err, const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	unpack_status("error %d %s", err < 0 ? -err : err ? err : EINVAL, msg);
	syscall(SYS_exit_group, 1);
	_exit(1);
}

#define die(...) unpack_die_err(EINVAL, __VA_ARGS__)

static int add_rule(scmp_filter_ctx ctx, const struct rule *r)
{
	switch (r->on) {
	case ENOTTY_ANY:
		return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTTY), r->nr, 0);
	case ANY:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 0);
	case FD_IMAGE:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, UNPACK_IMAGE_FD));
	case FD_CTL:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, UNPACK_CTL_FD));
	case FD_STREAM:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, RECEIVE_STREAM_FD));
	case FD_OUT:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, UNPACK_FIRST_FD));
	case FD_SOURCES:
		/* Descriptors above the sources are closed, and none can be opened: "from the first on" is
		 * exactly the sources (libseccomp takes one comparison per argument). */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_GE, UNPACK_FIRST_FD));
	case NO_EXEC:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	case GETFD_IMAGE:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 2, SCMP_A0(SCMP_CMP_EQ, UNPACK_IMAGE_FD),
					SCMP_A1(SCMP_CMP_EQ, F_GETFD));
	case PRCTL_GET_DUMPABLE:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, PR_GET_DUMPABLE));
	case FSIZE_SELF:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 2, SCMP_A0(SCMP_CMP_EQ, 0),
					SCMP_A1(SCMP_CMP_EQ, RLIMIT_FSIZE));
	case FSTAT_IMAGE:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 2, SCMP_A0(SCMP_CMP_EQ, UNPACK_IMAGE_FD),
					SCMP_A3(SCMP_CMP_EQ, AT_EMPTY_PATH));
	case OPEN_NOFOLLOW:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, O_NOFOLLOW, O_NOFOLLOW));
	case STAT_NOFOLLOW:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A3(SCMP_CMP_EQ, AT_SYMLINK_NOFOLLOW));
	case STAT_FD:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A3(SCMP_CMP_EQ, AT_EMPTY_PATH));
	case AT4_NOFOLLOW:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A4(SCMP_CMP_EQ, AT_SYMLINK_NOFOLLOW));
	case AT4_ZERO:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A4(SCMP_CMP_EQ, 0));
	case TIMES_FD:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 2, SCMP_A1(SCMP_CMP_EQ, 0), SCMP_A3(SCMP_CMP_EQ, 0));
	case TIMES_NOFOLLOW:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A3(SCMP_CMP_EQ, AT_SYMLINK_NOFOLLOW));
	case MKNOD_FIFO:
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO));
	}
	return -EINVAL;
}

static size_t rule_count(enum unpack_mode m)
{
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
		n += (rules[i].modes >> m) & 1;
	return n;
}

__attribute__((unused)) static int build_filter(enum unpack_mode m, scmp_filter_ctx *ret)
{
	/* Outside the list: SIGSYS, whose handler reports the call on the control socket, then the kill. */
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx)
		return -ENOMEM;
	int r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, CONFINE_KILL_SYSCALL, 0);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(rules); i++)
		if ((rules[i].modes >> m) & 1)
			r = add_rule(ctx, &rules[i]);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(ctx);
	return 0;
}

__attribute__((unused)) static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char msg[160];
	unsigned nr = (unsigned)si->si_syscall;
	size_t n = confine_put(msg, 0, sizeof(msg), "error 5 seccomp: ");
	n = confine_put(msg, n, sizeof(msg), confine_syscall_name(nr));
	n = confine_put(msg, n, sizeof(msg), " (");
	n = confine_put_uint(msg, n, sizeof(msg), nr);
	n = confine_put(msg, n, sizeof(msg), ") is not allowed\n");
	ssize_t w = write(UNPACK_CTL_FD, msg, n);
	(void)w;
	confine_sigsys_die();
}

static int describe(void)
{
	printf("{\"name\":\"space-unpack\",\"uid\":\"its own (a machine-wide unique uid slot)\",\"capabilities\":[],"
	       "\"no_new_privs\":true,\"dumpable\":false,\"seccomp\":{\"apply\":%zu,\"add\":%zu,\"check\":%zu,"
	       "\"export\":%zu,\"copy\":%zu,\"receive\":%zu},"
	       "\"default_action\":\"kill\",\"note\":\"image layers and rootfs tarballs are parsed and applied "
	       "here, into the image file only; it opens nothing. copy: root of a user namespace of its own, "
	       "chrooted into the destination tree\","
	       "\"copy_note\":\"copy runs as uid 0 of a user namespace the library made (a host uid range of its "
	       "own; refused in the initial one), in a mount namespace of its own chrooted into the destination, "
	       "with only CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID and CAP_SETFCAP "
	       "in that namespace, no_new_privs, not dumpable; the source is reachable only through its descriptor "
	       "(a detached mount), and every open is O_NOFOLLOW\"}\n",
	       rule_count(MODE_APPLY), rule_count(MODE_ADD), rule_count(MODE_CHECK), rule_count(MODE_EXPORT),
	       rule_count(MODE_COPY), rule_count(MODE_RECEIVE));
	return 0;
}

int unpack_set_limit(int res, rlim_t v)
{
	struct rlimit rl = { v, v };
	return setrlimit(res, &rl) < 0 ? -errno : 0;
}

int unpack_limit_memory(void)
{
#ifdef UNPACK_SANITIZED
	return 0; /* a sanitizer's shadow memory alone is terabytes of address space */
#else
	return unpack_set_limit(RLIMIT_AS, AS_LIMIT);
#endif
}

int unpack_load_filter(enum unpack_mode m, char *err, size_t errlen)
{
#ifdef UNPACK_SANITIZED
	(void)m;
	(void)err;
	(void)errlen;
	return 0;
#else
	int r = confine_sigsys_install(on_sigsys, err, errlen);
	if (r < 0)
		return r;
	_cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
	if ((r = build_filter(m, &ctx)) < 0)
		return util_errf(err, errlen, r, "seccomp filter: %s", strerror(-r));
	if ((r = seccomp_load(ctx)) < 0)
		return util_errf(err, errlen, r, "load the seccomp filter: %s", strerror(-r));
	return 0;
#endif
}

/* Everything of root goes, then the filter. Every descriptor it will use is open already. */
static void confine(uint32_t uid)
{
	char err[256] = "";
	int r;
	enum uidalloc_kind kind;
	uint32_t first;
	/* Only a uid of its own: never root, never a sandbox's range or another tool's uid. */
	if (!uidalloc_slot_of(uid, &kind, &first) || kind != UIDALLOC_SINGLE || first != uid)
		die("--uid must be a single uid slot (src/util/uidalloc.h)");
	/* OpenSSL loads its provider and configuration on first use: here, not under the filter. */
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen;
	if (EVP_Digest("", 0, md, &mdlen, EVP_sha256(), NULL) != 1)
		die("sha256 is not available");
	initialize_ext2_error_table();
	if (syscall(SYS_close_range, (unsigned)(UNPACK_FIRST_FD + n_sources), ~0u, 0) < 0)
		die("close_range: %s", strerror(errno));
	signal(SIGXFSZ, SIG_IGN); /* past RLIMIT_FSIZE: EFBIG, reported, rather than a kill */
	if ((r = unpack_set_limit(RLIMIT_CORE, 0)) < 0 || (r = unpack_set_limit(RLIMIT_NPROC, 0)) < 0 ||
	    (r = unpack_limit_memory()) < 0)
		die("setrlimit: %s", strerror(-r));
	if (confine_drop_to_uid(uid, err, sizeof(err)) < 0)
		die("drop privileges: %s", err);
	if (unpack_load_filter(run_mode, err, sizeof(err)) < 0)
		die("%s", err);
	unpack_status("ready");
}

/* ---- apply ---- */

static int parse_layer(const char *arg, struct layer_spec *l)
{
	/* FD,OFFSET,LENGTH,COMP,DIGEST,DIFFID; a digest "-" when none is known */
	char buf[300], *f[6];
	if (strlen(arg) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", arg);
	char *p = buf;
	for (int i = 0; i < 6; i++) {
		f[i] = p;
		p = strchr(p, ',');
		if ((i < 5) != (p != NULL))
			return -EINVAL;
		if (p)
			*p++ = '\0';
	}
	uint64_t fd, off, len;
	static const char *const comps[] = { "auto", "none", "gzip", "zstd", "xz", "bzip2" };
	if (util_parse_uint(f[0], UNPACK_FIRST_FD, UNPACK_FIRST_FD + UNPACK_LAYERS_MAX, &fd) < 0 ||
	    util_parse_uint(f[1], 0, INT64_MAX, &off) < 0 || util_parse_uint(f[2], 0, INT64_MAX - off, &len) < 0)
		return -EINVAL;
	l->comp = (enum unpack_comp)-1;
	for (size_t i = 0; i < ARRAY_SIZE(comps); i++)
		if (!strcmp(f[3], comps[i]))
			l->comp = (enum unpack_comp)i;
	if ((int)l->comp < 0)
		return -EINVAL;
	for (int i = 4; i < 6; i++) {
		char *dst = i == 4 ? l->digest : l->diff_id;
		if (!strcmp(f[i], "-")) {
			dst[0] = '\0';
			continue;
		}
		if (strlen(f[i]) != 71 || strncmp(f[i], "sha256:", 7) || strspn(f[i] + 7, "0123456789abcdef") != 64)
			return -EINVAL;
		snprintf(dst, 72, "%s", f[i]);
	}
	l->fd = (int)fd;
	l->offset = off;
	l->length = len;
	return 0;
}

struct run {
	struct layer_spec layers[UNPACK_LAYERS_MAX];
	unsigned n;
	uint64_t max_bytes;
	uint64_t out_bytes; /* decompressed, this pass */
	const char *user;
	const char *workdir;
	/* add mode */
	const char *into;
	bool chown, plain;
	uint32_t uid, gid;
	/* export mode; check mode: --isdir */
	const char *path, *as, *isdir;
};

static void progress(const char *pass, unsigned i, const struct layer_stream *s, const struct layer_spec *l,
		     uint64_t *last)
{
	uint64_t done = layer_consumed(s);
	if (done - *last < PROGRESS_EVERY && done != l->length)
		return;
	*last = done;
	unpack_status("progress %s %u %llu %llu", pass, i + 1, (unsigned long long)done, (unsigned long long)l->length);
}

/* One pass over every layer: verify and measure (fs NULL), or apply into fs. */
static void pass(struct run *run, ext2_filsys fs, uint64_t *ret_bytes, uint64_t *ret_entries)
{
	char err[600];
	const char *name = fs ? "apply" : "verify";
	_cleanup_(applier_freep) struct applier *a = NULL;
	if (fs && applier_new(fs, &a) < 0)
		die("out of memory");
	if (a && applier_set_options(a, run->into, run->chown, run->uid, run->gid, run->plain) < 0)
		unpack_die_err(EPERM, "--into %s is not a path in the image", run->into);
	uint64_t bytes = 0, entries = 0;
	run->out_bytes = 0;
	for (unsigned i = 0; i < run->n; i++) {
		const struct layer_spec *l = &run->layers[i];
		struct layer_stream *s = NULL;
		int lr = layer_open(l, run->max_bytes, &run->out_bytes, &s, err, sizeof(err));
		if (lr < 0)
			unpack_die_err(lr, "layer %u: %s", i + 1, err);
		struct tar_reader *t;
		if (tar_reader_new(layer_read, NULL, s, &t) < 0)
			die("out of memory");
		if (a)
			applier_begin_layer(a, i);
		uint64_t last = 0;
		/* A rootfs tarball (one layer, no digest) whose top is an image's: the library refuses it. */
		const char *mark = NULL;
		bool has_etc = false, rootfs_mode = run->n == 1 && !l->digest[0];
		unpack_status("progress %s %u 0 %llu", name, i + 1, (unsigned long long)l->length);
		for (;;) {
			const struct tar_entry *e;
			int r = tar_next(t, &e);
			if (r == 0)
				break;
			if (r < 0)
				unpack_die_err(r, "layer %u: %s", i + 1, layer_error(s)[0] ? layer_error(s) : tar_error(t));
			entries++;
			if (a) {
				int ar = applier_entry(a, e, t, err, sizeof(err));
				if (ar < 0)
					unpack_die_err(ar, "layer %u: %s: %s", i + 1, e->path, layer_error(s)[0] ? layer_error(s) : err);
			} else {
				char norm[TAR_PATH_MAX + 1];
				if (tar_path_normalize(e->path, norm, sizeof(norm)) == -EINVAL)
					unpack_die_err(EPERM, "layer %u: '%s' climbs out of the root with '..': refused", i + 1, e->path);
				char target[TAR_PATH_MAX + 1];
				if (e->type == TAR_HARDLINK && tar_path_normalize(e->link, target, sizeof(target)) == -EINVAL)
					unpack_die_err(EPERM, "layer %u: hard link %s to '%s' climbs out of the root with '..': refused", i + 1,
					    e->path, e->link);
				if (rootfs_mode && !strchr(norm, '/')) {
					if (!strcmp(norm, "etc"))
						has_etc = true;
					else if (e->type == TAR_REG && (!strcmp(norm, "oci-layout") ||
									!strcmp(norm, "index.json") ||
									!strcmp(norm, "manifest.json")))
						mark = !strcmp(norm, "oci-layout") ? "oci-layout"
						       : !strcmp(norm, "index.json") ? "index.json"
										     : "manifest.json";
				}
				/* Blocks of data, a symlink's target past the inode, a directory's first block. */
				bytes += (e->size + 4095) & ~4095ull;
				if (e->type == TAR_DIR || (e->type == TAR_SYMLINK && strlen(e->link) >= 60))
					bytes += 4096;
			}
			progress(name, i, s, l, &last);
		}
		int fr = layer_finish(s, err, sizeof(err));
		if (fr < 0)
			unpack_die_err(fr, "layer %u: %s", i + 1, err);
		progress(name, i, s, l, &last);
		if (!a && mark && !has_etc)
			unpack_status("image-like %s", mark);
		tar_reader_free(t);
		layer_close(s);
	}
	/* The image's WorkingDir exists in its sandboxes, as a container runtime makes it at start. */
	if (a && run->workdir && applier_ensure_dir(a, run->workdir, err, sizeof(err)) < 0)
		die("working directory %s: %s", run->workdir, err);
	if (a) {
		const struct apply_counts *c = applier_counts(a);
		if (c->xattrs_skipped)
			unpack_status("warn %llu extended attributes outside user., security. and system.posix_acl_* "
				      "were not kept", (unsigned long long)c->xattrs_skipped);
		unpack_status("counts entries %llu files %llu dirs %llu symlinks %llu hardlinks %llu devices %llu "
			      "whiteouts %llu opaque %llu",
			      (unsigned long long)c->entries, (unsigned long long)c->files, (unsigned long long)c->dirs,
			      (unsigned long long)c->symlinks, (unsigned long long)c->hardlinks,
			      (unsigned long long)c->devices, (unsigned long long)c->whiteouts,
			      (unsigned long long)c->opaque);
	}
	*ret_bytes = bytes;
	*ret_entries = entries;
}

/* "go SIZE" (the image's size in bytes) or "stop" from the library. */
static bool wait_go(uint64_t *ret_size)
{
	char cmd[40];
	size_t n = 0;
	while (n < sizeof(cmd) - 1) {
		ssize_t k = read(UNPACK_CTL_FD, cmd + n, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		if (cmd[n] == '\n')
			break;
		n++;
	}
	cmd[n] = '\0';
	return !strncmp(cmd, "go ", 3) && util_parse_uint(cmd + 3, 1, UINT64_MAX, ret_size) == 0;
}

static ext2_filsys open_image(bool rw)
{
	ext2_filsys fs;
	char name[8];
	snprintf(name, sizeof(name), "%d", UNPACK_IMAGE_FD);
	/* Checksums are written, not verified on reads: the image is this run's own (apply), or read as
	 * hostile whatever its checksums say (check, export). */
	errcode_t e = ext2fs_open2(name, NULL,
				   (rw ? EXT2_FLAG_RW : 0) | EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS, 0, 0,
				   e2fd_io_manager, &fs);
	if (e)
		die("open the image: %s", error_message(e));
	if ((e = ext2fs_read_bitmaps(fs)))
		die("read the image's bitmaps: %s", error_message(e));
	return fs;
}

static int run_apply(struct run *run)
{
	uint64_t bytes, entries;
	pass(run, NULL, &bytes, &entries);
	unpack_status("measure %llu %llu", (unsigned long long)bytes, (unsigned long long)entries);
	uint64_t size;
	if (!wait_go(&size))
		return 0;
	/* The library started us with a soft limit of 0 (nothing could be written before the image was made)
	 * under a hard one of --max-bytes; from here on, nothing past the image's end. */
	struct rlimit fsize = { size, size };
	if (setrlimit(RLIMIT_FSIZE, &fsize) < 0)
		die("setrlimit(RLIMIT_FSIZE): %s", strerror(errno));
	ext2_filsys fs = open_image(true);
	pass(run, fs, &bytes, &entries);
	if (run->user) {
		struct image_user u;
		char err[300];
		if (users_resolve(fs, run->user, &u, err, sizeof(err)) < 0)
			unpack_die_err(ENOENT, "%s", err);
		unpack_status("user %u %u %s", u.uid, u.gid, u.home);
	}
	unpack_status("shell %d", users_has_shell(fs));
	errcode_t e = ext2fs_close2(fs, 0);
	if (e)
		die("write the image: %s", error_message(e));
	unpack_status("done");
	return 0;
}

/* One pass onto an existing image (a build step: COPY, ADD, WORKDIR, USER): no file system made, none
 * measured; the image's own size bounds what the layers may add (ENOSPC). */
static int run_add(struct run *run)
{
	uint64_t bytes, entries;
	ext2_filsys fs = open_image(true);
	if (run->n)
		pass(run, fs, &bytes, &entries);
	else if (run->workdir) {
		struct applier *a;
		char err[600];
		if (applier_new(fs, &a) < 0)
			die("out of memory");
		if (applier_ensure_dir(a, run->workdir, err, sizeof(err)) < 0)
			die("working directory %s: %s", run->workdir, err);
		applier_free(a);
	}
	if (run->user) {
		struct image_user u;
		char err[300];
		if (users_resolve(fs, run->user, &u, err, sizeof(err)) < 0)
			unpack_die_err(ENOENT, "%s", err);
		unpack_status("user %u %u %s", u.uid, u.gid, u.home);
	}
	unpack_status("shell %d", users_has_shell(fs));
	errcode_t e = ext2fs_close2(fs, 0);
	if (e)
		unpack_die_err(e == EXT2_ET_BLOCK_ALLOC_FAIL ? ENOSPC : EIO, "write the image: %s", error_message(e));
	unpack_status("done");
	return 0;
}

static int parse_owner(const char *s, uint32_t *uid, uint32_t *gid)
{
	uint64_t u, g;
	const char *colon = strchr(s, ':');
	char a[16];
	if (!colon || (size_t)(colon - s) >= sizeof(a))
		return -EINVAL;
	snprintf(a, sizeof(a), "%.*s", (int)(colon - s), s);
	if (util_parse_uint(a, 0, UINT32_MAX - 1, &u) < 0 || util_parse_uint(colon + 1, 0, UINT32_MAX - 1, &g) < 0)
		return -EINVAL;
	*uid = (uint32_t)u;
	*gid = (uint32_t)g;
	return 0;
}

static void usage(void)
{
	fputs("usage: space-unpack apply --uid UID --max-bytes N [--user SPEC] [--workdir DIR] --layer FD,OFF,LEN,COMP,DIGEST,DIFFID...\n"
	      "       space-unpack add --uid UID [--layer ...]... [--into DIR] [--chown UID:GID] [--plain] [--workdir DIR]\n"
	      "                        [--user SPEC]\n"
	      "       space-unpack check --uid UID [--user SPEC] [--isdir PATH]\n"
	      "       space-unpack export --uid UID [--path PATH [--as NAME]]\n"
	      "       space-unpack copy --max-bytes N --max-entries N   (fd 3 source dir, fd 5 destination dir)\n"
	      "       space-unpack receive --max-bytes N --max-entries N [--incremental 1]\n"
	      "                        (fd 0 a btrfs send stream, fd 3 the parent's root, fd 5 the destination)\n"
	      "       space-unpack --describe-sandbox\n"
	      "(fd 3 rootfs.ext4, fd 4 control socket, fd 5+ layer sources or the export's output)\n",
	      stderr);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--describe-sandbox"))
		return describe();
	if (argc < 2)
		return usage(), 2;
	if (!strcmp(argv[1], "apply"))
		run_mode = MODE_APPLY;
	else if (!strcmp(argv[1], "check"))
		run_mode = MODE_CHECK;
	else if (!strcmp(argv[1], "export"))
		run_mode = MODE_EXPORT;
	else if (!strcmp(argv[1], "add"))
		run_mode = MODE_ADD;
	else if (!strcmp(argv[1], "copy"))
		run_mode = MODE_COPY;
	else if (!strcmp(argv[1], "receive"))
		run_mode = MODE_RECEIVE;
	else
		return usage(), 2;
	static struct run run;
	uint64_t uid = 0, max_entries = 0;
	bool incremental = false, trees = run_mode == MODE_COPY || run_mode == MODE_RECEIVE;
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 >= argc)
			return usage(), 2;
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--uid") && !trees) {
			if (util_parse_uint(v, 1, UINT32_MAX - 1, &uid) < 0)
				return usage(), 2;
		} else if (!strcmp(k, "--max-bytes") && (run_mode == MODE_APPLY || trees)) {
			if (util_parse_uint(v, 1, UINT64_MAX, &run.max_bytes) < 0)
				return usage(), 2;
		} else if (!strcmp(k, "--incremental") && run_mode == MODE_RECEIVE && !strcmp(v, "1")) {
			incremental = true;
		} else if (!strcmp(k, "--max-entries") && trees) {
			if (util_parse_uint(v, 1, UINT64_MAX, &max_entries) < 0)
				return usage(), 2;
		} else if (!strcmp(k, "--user") && run_mode != MODE_EXPORT && !trees) {
			run.user = v;
		} else if (!strcmp(k, "--workdir") && (run_mode == MODE_APPLY || run_mode == MODE_ADD)) {
			run.workdir = v;
		} else if (!strcmp(k, "--into") && run_mode == MODE_ADD) {
			run.into = v;
		} else if (!strcmp(k, "--chown") && run_mode == MODE_ADD) {
			if (parse_owner(v, &run.uid, &run.gid) < 0)
				return usage(), 2;
			run.chown = true;
		} else if (!strcmp(k, "--plain") && run_mode == MODE_ADD && !strcmp(v, "1")) {
			run.plain = true;
		} else if (!strcmp(k, "--isdir") && run_mode == MODE_CHECK) {
			run.isdir = v;
		} else if (!strcmp(k, "--path") && run_mode == MODE_EXPORT) {
			run.path = v;
		} else if (!strcmp(k, "--as") && run_mode == MODE_EXPORT) {
			run.as = v;
		} else if (!strcmp(k, "--layer") && (run_mode == MODE_APPLY || run_mode == MODE_ADD)) {
			if (run.n == UNPACK_LAYERS_MAX || parse_layer(v, &run.layers[run.n]) < 0)
				return usage(), 2;
			run.n++;
		} else {
			return usage(), 2;
		}
	}
	struct stat st;
	if (fstat(UNPACK_CTL_FD, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 2; /* nobody to report to */
	if (run_mode == MODE_COPY) {
		if (!run.max_bytes || !max_entries)
			die("copy needs --max-bytes and --max-entries");
		copy_main_confine(MODE_COPY);
		copy_main_run(run.max_bytes, max_entries);
		syscall(SYS_exit_group, 0);
	}
	if (run_mode == MODE_RECEIVE) {
		if (!run.max_bytes || !max_entries)
			die("receive needs --max-bytes and --max-entries");
		copy_main_confine(MODE_RECEIVE);
		char err[900];
		int r = bstream_receive(run.max_bytes, max_entries, incremental, err, sizeof(err));
		if (r < 0)
			unpack_die_err(r, "%s", err);
		unpack_status("done");
		syscall(SYS_exit_group, 0);
	}
	if (!uid)
		die("--uid is missing");
	if (fstat(UNPACK_IMAGE_FD, &st) < 0 || !S_ISREG(st.st_mode))
		die("fd 3 is not the image file");
	int acc = fcntl(UNPACK_IMAGE_FD, F_GETFL) & O_ACCMODE;
	bool writes = run_mode == MODE_APPLY || run_mode == MODE_ADD;
	if (writes ? acc != O_RDWR : acc != O_RDONLY)
		die("fd 3 is not opened %s", writes ? "read-write" : "read-only");
	if (run_mode == MODE_ADD)
		run.max_bytes = UINT64_MAX; /* the image's size bounds it (RLIMIT_FSIZE, ENOSPC) */
	if (writes) {
		if ((!run.n && run_mode == MODE_APPLY) || !run.max_bytes)
			die("apply needs --layer and --max-bytes");
		for (unsigned i = 0; i < run.n; i++) {
			const struct layer_spec *l = &run.layers[i];
			if (fstat(l->fd, &st) < 0 || !S_ISREG(st.st_mode) || (fcntl(l->fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
				die("layer %u: fd %d is not a file opened read-only", i + 1, l->fd);
			if (l->offset > (uint64_t)st.st_size || l->length > (uint64_t)st.st_size - l->offset)
				die("layer %u: bytes %llu..%llu are past the end of its file", i + 1,
				    (unsigned long long)l->offset, (unsigned long long)(l->offset + l->length));
			if (l->fd - UNPACK_FIRST_FD + 1 > n_sources)
				n_sources = l->fd - UNPACK_FIRST_FD + 1;
		}
	} else if (run_mode == MODE_EXPORT) {
		if (fstat(UNPACK_FIRST_FD, &st) < 0 || (fcntl(UNPACK_FIRST_FD, F_GETFL) & O_ACCMODE) == O_RDONLY)
			die("fd %d is not the export's output", UNPACK_FIRST_FD);
		n_sources = 1;
	}
	confine((uint32_t)uid);
	if (run_mode == MODE_APPLY)
		run_apply(&run);
	else if (run_mode == MODE_ADD)
		run_add(&run);
	else if (run_mode == MODE_CHECK) {
		ext2_filsys fs = open_image(false);
		if (run.user) {
			struct image_user u;
			char err[300];
			if (users_resolve(fs, run.user, &u, err, sizeof(err)) < 0)
				unpack_die_err(ENOENT, "%s", err);
			unpack_status("user %u %u %s", u.uid, u.gid, u.home);
		}
		if (run.isdir) {
			ext2_ino_t ino;
			struct ext2_inode inode;
			bool dir = image_resolve(fs, run.isdir, true, &ino) == 0 && !ext2fs_read_inode(fs, ino, &inode) &&
				   LINUX_S_ISDIR(inode.i_mode);
			unpack_status("isdir %d", dir);
		}
		unpack_status("shell %d", users_has_shell(fs));
		ext2fs_close2(fs, 0);
		unpack_status("done");
	} else {
		ext2_filsys fs = open_image(false);
		char err[600];
		if (export_tar(fs, UNPACK_FIRST_FD, run.path, run.as, err, sizeof(err)) < 0)
			die("%s", err);
		ext2fs_close2(fs, 0);
		unpack_status("done");
	}
	syscall(SYS_exit_group, 0);
	return 0;
}
