#!/bin/bash
# A full pool is said as such (issue 20): a create on a pool with less than 64 MiB free is refused before
# anything is made, with "pool full (N MiB free of M MiB ...)" and what to do, leaves no sandbox row
# behind, and works again once space is freed. (Before: the clone was made and the jail's mount failed
# with "Input/output error", or the sandbox's disk went read-only with no word.)
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 1G
checks=0

POOL=$STATE/pool
mountpoint -q "$POOL" || fail "no pool mounted at $POOL"
filler=$POOL/filler
on_exit "rm -f '$filler'"
# Leave about 20 MiB free (btrfs counts lazily: sync, then top up once more).
for _ in 1 2 3; do
	sync -f "$POOL"
	avail=$(($(stat -f -c '%a * %S' "$POOL")))
	[ "$avail" -gt $((40 << 20)) ] || break
	fallocate -l $((avail - (20 << 20))) "$filler.$_" || fail "fallocate in the pool"
	on_exit "rm -f '$filler.$_'"
done
sync -f "$POOL"
echo "pool free: $(($(stat -f -c '%a * %S' "$POOL") >> 20)) MiB"

expect_rc 1 "$SPACE" run --template tiny --isolation jail "${S[@]}" -- true
echo "$err" | grep -q "pool full ([0-9]* MiB free of [0-9]* MiB" || fail "no 'pool full' message: $err"
echo "$err" | grep -q "Input/output error" && fail "reported as an I/O error: $err"
checks=$((checks + 1))
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q '"sb-' && fail "a refused create left a sandbox: $out"
checks=$((checks + 1))

rm -f "$filler".*
sync -f "$POOL"
expect_rc 0 "$SPACE" run --template tiny --isolation jail "${S[@]}" -- echo ok
[ "$out" = ok ] || fail "after freeing space: $out"
checks=$((checks + 1))
echo "pool-full: $checks checks, 0 failed"
