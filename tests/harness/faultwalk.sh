#!/bin/bash
# The fault walk (faultwalk.c): every step of create, fork, checkpoint, rollback, destroy and template
# import crashed in turn (SPACE_TEST_FAULT, test builds only), each followed by the kill -9 harness's
# invariant checker; then nothing of any sandbox may be left on the host.
# usage: faultwalk.sh FAULTWALK CHECK
. "$(dirname "$0")/../lib.sh"
FW=${1:?faultwalk}; CHECK=${2:?checker}
need_built "$FW" faultwalk; need_built "$CHECK" killpoints_check
jail_test_setup
export SPACE_STATE_DIR=$STATE SPACE_API_TEMPLATE=tiny
"$FW" "$CHECK" "$WORK/journal" "$WORK/tree" >"$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
grep -q "^faultwalk: [0-9]* checks, [0-9]* failed$" "$WORK/out" || fail "faultwalk did not complete (exit $rc)"
[ "$rc" = 0 ] || fail "$(tail -n 1 "$WORK/out")"
ids=$(grep -ho 'sb-[a-z2-7]\{16\}' "$WORK/out" "$WORK/journal" 2>/dev/null | sort -u)
left=$(leaks_of $ids)
[ -z "$left" ] || fail "left on the host: $left"
echo "faultwalk: ok, $(grep -c ' crashed$' "$WORK/out") crashes, nothing left"
