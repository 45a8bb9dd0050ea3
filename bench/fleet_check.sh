#!/bin/bash
# CI check of bench/fleet in short mode (suite `bench`): the run ends with 0 errors and nothing left behind
# (the bench's own leak scan: processes, mounts, loop devices, cgroups, netns, subvolumes of every sandbox it
# made), and prints its final line, well-formed. No timing is asserted: figures are benchmark output.
# usage: fleet_check.sh FLEET_BINARY
set -u
fleet=${1:?usage: fleet_check.sh FLEET_BINARY}
[ -x "$fleet" ] || { echo "FAIL: $fleet not built" >&2; exit 1; }
log=$(mktemp /tmp/space-fleet-check.XXXXXX)
trap 'rm -f "$log"' EXIT
"$fleet" --short >"$log" 2>&1
rc=$?
cat "$log"
if [ "$rc" = 77 ]; then
	echo "SKIP: $(grep -m1 'skipped' "$log")"
	exit 77
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
checks=0
[ "$rc" = 0 ] || fail "fleet --short exited $rc (1: an error or a leak; see above)"
checks=$((checks + 1))
grep -qx '  errors: 0' "$log" || fail "errors reported: $(grep -m1 '^  errors:' "$log")"
checks=$((checks + 1))
grep -Eq '^  left behind \([0-9]+ sandboxes made\): 0$' "$log" || fail "leaks: $(grep -m1 'left behind' "$log")"
checks=$((checks + 1))
num='([0-9]+\.[0-9]+|na)'
re="^fleet:"
for k in tti_p50_ms tti_p99_ms tti_pool_p50_ms exec_p50_ms destroy_p50_ms burst100_p99_ms sustained_per_s \
	idle_mib_per_sandbox tti_at_1000_p50_ms peer_p50_ms tti_vs_peer; do
	re="$re $k=-?$num"
done
last=$(tail -n 1 "$log")
[[ $last =~ $re$ ]] || fail "the last line is not the fleet: line of issue 16: $last"
checks=$((checks + 1))
# In short mode everything is measured on a host that runs jails: only a missing peer may leave an `na`.
for k in tti_p50_ms tti_pool_p50_ms exec_p50_ms destroy_p50_ms burst100_p99_ms sustained_per_s tti_at_1000_p50_ms; do
	[[ $last =~ (^| )$k=[0-9] ]] || fail "$k not measured: $last"
done
checks=$((checks + 1))
echo "ok: fleet --short: $checks checks"
