#!/bin/sh
# util_spawn on a cgroup v2 host: a helper is born in its cgroup (clone3 CLONE_INTO_CGROUP), no migration.
# Where /sys/fs/cgroup is v1 (or hybrid) but the kernel has cgroup2, the test runs in a private mount
# namespace with cgroup2 mounted over /sys/fs/cgroup; where it is v2 already, the plain util_spawn test is
# this test. Checks that the helper is a member of its cgroup before it runs, and that the spawn used
# clone3 with CLONE_INTO_CGROUP (strace), then removes what it made.
set -u
T=$1
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
	echo "SKIP: /sys/fs/cgroup is cgroup v2 already: the util_spawn test covers it"
	exit 77
fi
grep -qw cgroup2 /proc/filesystems || { echo "SKIP: the kernel has no cgroup2"; exit 77; }
command -v strace >/dev/null || { echo "SKIP: strace missing"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare missing"; exit 77; }
# Sanitizer builds spawn by fork and join by a write, by design (a raw clone3 would pass by the sanitizer's
# fork handling), and LeakSanitizer cannot run under ptrace: there the test checks membership only.
sanitized=no
grep -q __asan_init "$T" 2>/dev/null && sanitized=yes
out=$(mktemp)
run="strace -f -qq -e trace=clone3 -o '$out' '$T'"
[ $sanitized = yes ] && run="'$T'"
trap 'rm -f "$out"' EXIT
# Every cgroup2 mount applies its root options to the one cgroup2 hierarchy of the machine: this one takes
# the options the host's cgroup2 mount has (favordynmods, nsdelegate, ...), so the host keeps them.
opts=$(awk '$3 == "cgroup2" { n = split($4, o, ","); s = ""
	for (i = 1; i <= n; i++) if (o[i] != "rw" && o[i] != "ro" && o[i] !~ /time$/ && o[i] !~ /^no(suid|dev|exec)$/ && o[i] !~ /^seclabel$/) s = s "," o[i]
	print substr(s, 2); exit }' /proc/mounts)
# Inside: the shared parent is left in place by design; where the test made it, the test removes it.
unshare -m sh -c "mount -t cgroup2 ${opts:+-o $opts} none /sys/fs/cgroup || exit 90
	had=no; [ -d /sys/fs/cgroup/space-helpers.slice ] && had=yes
	$run; rc=\$?
	[ \$had = no ] && rmdir /sys/fs/cgroup/space-helpers.slice
	exit \$rc"
rc=$?
[ $rc = 90 ] && { echo "SKIP: cgroup2 cannot be mounted here"; exit 77; }
n=$(grep -c 'CLONE_INTO_CGROUP' "$out" 2>/dev/null)
fails=0
[ $rc = 0 ] || { echo "FAIL: util_spawn under cgroup v2 exited $rc"; fails=$((fails + 1)); }
if [ $sanitized = yes ]; then echo "ok: sanitizer build: its spawns join by a write, by design (membership checked above)"
elif [ "${n:-0}" -ge 1 ]; then echo "ok: $n spawn(s) born in their cgroup (clone3 CLONE_INTO_CGROUP)"
else echo "FAIL: no spawn used CLONE_INTO_CGROUP"; fails=$((fails + 1)); fi
echo "spawn_v2: 2 checks, $fails failed"
[ $fails = 0 ]
