#!/bin/bash
# A release build has no test switches (issue 14, item 10). Configures BUILD_DIR the way scripts/setup.sh
# does (release, default options: no -Dtest_switches), installs it into a scratch root (meson install
# --destdir) and checks what would ship:
#   - config.h says HAVE_TEST_SWITCHES 0; the installed libspace's soname is libspace.so.1;
#   - no installed binary or library contains the name of a test switch (they read the environment by
#     name, so a binary without the name cannot be switched);
#   - the installed `space` and libspace ignore them at run time: `space doctor` reports no test build,
#     and (as root with btrfs, loop and namespaces) a jail created with SPACE_TEST_JAIL_NO_IDMAP=1 and
#     SPACE_QUIET_JAIL=1 is still idmapped and still says it is a weaker boundary.
# With TEST_BUILD_DIR (a -Dtest_switches=true build), also checks that the same search finds the switches
# there, so the search itself is known to work.
# usage: tests/release/check.sh BUILD_DIR [TEST_BUILD_DIR]
# Last line: "release check: N checks, M failed".
set -u
cd "$(dirname "$0")/../.."
src=$PWD
build=${1:?usage: check.sh BUILD_DIR [TEST_BUILD_DIR]}
testbuild=${2:-}
switches=(SPACE_VM_JAIL SPACE_VMM_TEST_FORBIDDEN_SYSCALL SPACE_TEST_JAIL_NO_IDMAP SPACE_QUIET_JAIL SPACE_TEST_CLUSTER_LIST_NO_IDS)
checks=0 failed=0
ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); failed=$((failed + 1)); echo "FAIL: $*" >&2; }
finish() { echo "release check: $checks checks, $failed failed"; [ "$failed" = 0 ]; exit $?; }

if [ ! -d "$build/meson-private" ]; then
	meson setup "$build" --buildtype=release -Dtests=false -Dexamples=false >/dev/null || { bad "meson setup"; finish; }
fi
# An existing directory must not have been switched on by hand.
meson configure "$build" -Dtest_switches=false -Dtests=false -Dexamples=false >/dev/null || { bad "meson configure"; finish; }
dest=$(mktemp -d /tmp/space-release-XXXXXX)
state="" prefix=""
cleanup() {
	[ -n "$state" ] && { "$dest$prefix/bin/space" pool unmount --state "$state" >/dev/null 2>&1; umount "$state/pool" 2>/dev/null; }
	rm -rf "$dest" ${state:+"$state"}
}
trap cleanup EXIT
meson install -C "$build" --destdir "$dest" --quiet >/dev/null || { bad "meson install"; finish; }
prefix=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')

grep -qx '#define HAVE_TEST_SWITCHES 0' "$build/config.h" && ok || bad "$build/config.h: HAVE_TEST_SWITCHES is not 0"

# Every installed ELF file.
mapfile -t bins < <(find "$dest" -type f -exec sh -c 'head -c 4 "$1" | grep -q "ELF" && echo "$1"' _ {} \;)
[ "${#bins[@]}" -ge 6 ] && ok || bad "only ${#bins[@]} binaries installed: ${bins[*]}"
for f in "${bins[@]}"; do
	for s in "${switches[@]}"; do
		if grep -qa "$s" "$f"; then bad "${f#"$dest"} names the test switch $s"; else ok; fi
	done
done
# The search finds them where they are (a test build's space-vmm and libspace).
if [ -n "$testbuild" ]; then
	grep -qa SPACE_VMM_TEST_FORBIDDEN_SYSCALL "$testbuild/src/vmm/space-vmm" && ok ||
		bad "the search does not find SPACE_VMM_TEST_FORBIDDEN_SYSCALL in the test build's space-vmm"
	grep -qa SPACE_VM_JAIL "$testbuild"/libspace.so.* && ok ||
		bad "the search does not find SPACE_VM_JAIL in the test build's libspace"
fi

# Run time, the installed programs.
lib=$(dirname "$(find "$dest" -name 'libspace.so.*' -type f | head -1)")
# ABI 1 since the one deliberate break (meson.build): the library's soname, and its link.
readelf -d "$lib"/libspace.so.*.*.* 2>/dev/null | grep -q 'SONAME.*\[libspace\.so\.1\]' && ok ||
	bad "the installed libspace's soname is not libspace.so.1"
[ -e "$lib/libspace.so.1" ] && ok || bad "no libspace.so.1 link installed"
export LD_LIBRARY_PATH=$lib SPACE_LIBEXEC_DIR="$dest$prefix/libexec/libspace"
# The installed helpers, not a test build's that the caller's environment may name.
for v in $(compgen -e | grep -E '^SPACE_[A-Z_]+_PATH$'); do unset "$v"; done
space="$dest$prefix/bin/space"
"$dest$prefix/libexec/libspace/space-vmm" --version | grep -q '^space-vmm ' && ok || bad "space-vmm --version"
state=$(mktemp -d /tmp/space-release-state-XXXXXX)
out=$(SPACE_VM_JAIL=0 SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 SPACE_TEST_JAIL_NO_IDMAP=1 "$space" doctor --json --state "$state" 2>/dev/null)
echo "$out" | grep -q '"checks"' && ok || bad "space doctor --json: $out"
echo "$out" | grep -q '"test-build"' && bad "the release build's doctor reports a test build" || ok

if [ "$(id -u)" = 0 ] && command -v mkfs.btrfs >/dev/null && [ -e /dev/loop-control ] && command -v busybox >/dev/null &&
	unshare --user --pid --mount --net --fork true 2>/dev/null; then
	"$space" init --loop-pool 1G --state "$state" >/dev/null 2>&1 && ok || bad "space init"
	"$src/scripts/busybox-tree.sh" "$state/tree" >/dev/null 2>&1 &&
		"$space" template import tiny --rootfs "$state/tree" --state "$state" >/dev/null 2>&1 && ok || bad "template import"
	err=$(mktemp)
	out=$(SPACE_QUIET_JAIL=1 SPACE_TEST_JAIL_NO_IDMAP=1 "$space" run --template tiny --isolation jail --state "$state" \
		-- cat /proc/self/uid_map 2>"$err")
	set -- $out
	[ "${2:-0}" -ge $((0x40000000)) ] && ok || bad "SPACE_TEST_JAIL_NO_IDMAP=1 changed the uid map of a release build: '$out' ($(cat "$err"))"
	grep -q "weaker boundary" "$err" && ok || bad "SPACE_QUIET_JAIL=1 silenced the jail note of a release build: $(cat "$err")"
	rm -f "$err"
else
	echo "release check: no root/btrfs/loop/busybox/namespaces here: the jail run is left out"
fi
finish
