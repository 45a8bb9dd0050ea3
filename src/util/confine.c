/* SPDX-License-Identifier: Apache-2.0 */
#include "util/confine.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <seccomp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

#define NAME_SLOTS 512
/* Written once before the reporter is installed, read only by it: one table per process is enough. */
static char syscall_names[NAME_SLOTS][24];
static atomic_bool reporter_ready;

int confine_drop_to_uid(uint32_t uid, char *err, size_t errlen)
{
	if (uid == 0)
		return util_errf(err, errlen, -EINVAL, "refusing to run as uid 0");
	/* No way back to privilege: root gets no capabilities from exec or from uid 0, the uid switch below
	 * clears them, and none of that can be undone. */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
					     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
					     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
		  0, 0, 0) < 0)
		return util_errf(err, errlen, -errno, "securebits: %s", strerror(errno));
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return util_errf(err, errlen, -errno, "clearing ambient capabilities: %s", strerror(errno));
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
		return util_errf(err, errlen, -errno, "switching to uid %u: %s", uid, strerror(errno));
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	if (syscall(SYS_capset, &h, d) < 0 || syscall(SYS_capget, &h, d) < 0)
		return util_errf(err, errlen, -errno, "capabilities: %s", strerror(errno));
	/* Check rather than trust. */
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return util_errf(err, errlen, -EPERM, "capabilities survived the uid switch");
	if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0 || getuid() != uid || geteuid() != uid)
		return util_errf(err, errlen, -EPERM, "privileges survived the uid switch");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return util_errf(err, errlen, -errno, "prctl: %s", strerror(errno));
	return 0;
}

int confine_keep_caps(uint64_t mask, char *err, size_t errlen)
{
	for (int cap = 0; cap < 64; cap++) {
		if ((mask >> cap) & 1)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the kernel's last capability */
			return util_errf(err, errlen, -errno, "drop capability %d from the bounding set: %s", cap,
					 strerror(errno));
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return util_errf(err, errlen, -errno, "clear the ambient capabilities: %s", strerror(errno));
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].effective = d[i].permitted = (uint32_t)(mask >> (32 * i));
	if (syscall(SYS_capset, &h, d) < 0)
		return util_errf(err, errlen, -errno, "capset: %s", strerror(errno));
	/* Check rather than trust. */
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return util_errf(err, errlen, -errno, "capget: %s", strerror(errno));
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (d[i].effective != (uint32_t)(mask >> (32 * i)) || d[i].permitted != d[i].effective ||
		    d[i].inheritable)
			return util_errf(err, errlen, -EPERM, "capabilities are not the ones kept");
	return 0;
}

int confine_sigsys_install(void (*handler)(int, siginfo_t *, void *), char *err, size_t errlen)
{
	if (atomic_load(&reporter_ready))
		return 0;
	for (int nr = 0; nr < NAME_SLOTS; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		if (name)
			snprintf(syscall_names[nr], sizeof(syscall_names[nr]), "%s", name);
		free(name);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return util_errf(err, errlen, -errno, "sigaction(SIGSYS): %s", strerror(errno));
	atomic_store(&reporter_ready, true);
	return 0;
}

const char *confine_syscall_name(unsigned nr)
{
	return nr < NAME_SLOTS && syscall_names[nr][0] ? syscall_names[nr] : "syscall";
}

size_t confine_put(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

size_t confine_put_uint(char *buf, size_t at, size_t cap, unsigned long v)
{
	char tmp[24];
	size_t n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(tmp));
	while (n && at + 1 < cap)
		buf[at++] = tmp[--n];
	return at;
}

_Noreturn void confine_sigsys_die(void)
{
	syscall(SYS_kexec_load, 0, 0, NULL, 0); /* killed here */
	_exit(128 + SIGSYS);                    /* not reached */
}
