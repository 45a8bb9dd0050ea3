#!/bin/bash
# Runs the Python binding's tests (tests/python, pytest) against a fresh state directory on a loop btrfs
# pool with a busybox template "tiny" (jail isolation), judges pytest's summary line (counts, nothing
# failed or skipped), then checks that nothing of the sandboxes the tests made is left on the host.
# usage: run.sh PYTHON [PYTEST ARGS...]
. "$(dirname "$0")/../lib.sh"
PY=${1:?python}
shift
here=$(cd "$(dirname "$0")" && pwd)
need_built "${SPACE_PY_LAYOUT:-}" "the layout program (tests/python/layout.c)" SPACE_PY_LAYOUT
[ -e "${SPACE_BUILD_DIR:-}/libspace.so.1" ] || fail "libspace.so.1 not built in SPACE_BUILD_DIR=${SPACE_BUILD_DIR:-unset}"
# pytest is a test dependency like any other (scripts/deps.sh installs python3-pytest): not a reason to skip.
"$PY" -c 'import pytest' 2>/dev/null || fail "pytest missing for $PY (apt-get install python3-pytest; scripts/deps.sh does)"
jail_test_setup 2G
# The state directory's default isolation is jail, as conftest.py says: warm pools (which create with the
# default) must not depend on whether this host runs VMs.
expect_rc 0 "$SPACE" init --isolation jail --state "$STATE"
IDS=$WORK/ids
: >"$IDS"
export SPACE_STATE_DIR=$STATE SPACE_PY_TEMPLATE=tiny SPACE_PY_ROOTFS=$WORK/tree SPACE_PY_IDS=$IDS
export SPACE_PY_EXAMPLE=${SPACE_SOURCE_DIR:?}/examples/agent_steps.py
# Never the caller's stdin: a command run without input must see none, whatever this process's fd 0 holds.
cd "$WORK"
"$PY" -m pytest -p no:cacheprovider -q -rfEs "$here" "$@" </dev/null >"$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|deselected|error|errors)(, [0-9]+ [a-z]+)* in [0-9.]+s' "$WORK/out" | tail -n 1)
[ -n "$summary" ] || fail "pytest did not complete (exit $rc): no summary line"
count() { echo "$summary" | grep -oE "[0-9]+ $1" | awk '{print $1}' | head -n 1; }
passed=$(count passed) failed=$(count failed) errors=$(count 'errors?') skipped=$(count skipped)
[ "${passed:-0}" -gt 0 ] || fail "pytest passed no test: $summary"
[ "${failed:-0}" = 0 ] && [ "${errors:-0}" = 0 ] || fail "pytest: $summary"
[ "${skipped:-0}" = 0 ] || fail "pytest skipped tests (this runner already checked what the host has): $summary"
[ "$rc" = 0 ] || fail "pytest exited $rc: $summary"
# What the tests made (conftest.py records every handle's sandbox id), all gone.
sort -u "$IDS" -o "$IDS"
n=$(grep -c '^sb-' "$IDS")
[ "$n" -gt 0 ] || fail "no sandbox ids recorded in $IDS"
expect_rc 0 "$SPACE" ls --json --state "$STATE"
[ "$out" = "[]" ] || fail "sandboxes left: $out"
left=$(ls -A "$STATE/pool/sandboxes" 2>/dev/null)
[ -z "$left" ] || fail "sandbox subvolumes left: $left"
left=$(grep -rlF "$STATE " /run/space-uids 2>/dev/null)
[ -z "$left" ] || fail "uid slots left: $left"
left=$({
	grep -F -f "$IDS" /proc/mounts
	losetup -a | grep -F -f "$IDS"
	find /sys/fs/cgroup -maxdepth 4 -type d -name 'sb-*' 2>/dev/null | grep -F -f "$IDS"
	ip netns list 2>/dev/null | grep -F -f "$IDS"
	pgrep -a -f -- '--hostname sb-' | grep -F -f "$IDS"
} 2>/dev/null)
[ -z "$left" ] || fail "left on the host: $left"
echo "python: $summary; $n sandboxes, nothing left"
