#!/bin/bash
# A full pool is said as such (issue 20): a create on a pool with less than 64 MiB free is refused before
# anything is made, with "pool full (N MiB free of M MiB ...)" and what to do, leaves no sandbox row
# behind, and works again once space is freed. (Before: the clone was made and the jail's mount failed
# with "Input/output error", or the sandbox's disk went read-only with no word.)
# A running jail on a pool that fills up: its writes fail with ENOSPC, its root stays writable, it keeps
# running and writes again once space is freed, with no restart (its disk is a directory tree on the pool,
# core/disk_tree.h). Its own disk is capped at its template's disk size: EDQUOT past it.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 1G
checks=0

POOL=$STATE/pool
mountpoint -q "$POOL" || fail "no pool mounted at $POOL"
expect_rc 0 "$SPACE" doctor --json "${S[@]}"
echo "$out" | tr -d '\n\t' | grep -q '"jail-disks",[^}]*"ok",[^}]*directory trees' || fail "doctor does not say jail disks are trees: $out"
checks=$((checks + 1))

# The disk cap: the template's disk size (its image's), counted in what the sandbox writes.
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
on_exit "'$SPACE' rm '$id' ${S[*]} >/dev/null 2>&1"
[ -d "$POOL/sandboxes/$id/disk/tree" ] || fail "sandbox $id has no directory tree disk"
disk=$(stat -c %s "$POOL/templates/tiny/rootfs.ext4")
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- sh -c "dd if=/dev/zero of=/root/big bs=1M count=$(((disk >> 20) + 32)) 2>&1; sync; exit 1"
echo "$out" | grep -q "Disk quota exceeded" || fail "writing past the disk size: no EDQUOT: $out"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'rm /root/big && echo after >/root/small && cat /root/small'
[ "$out" = after ] || fail "writing after the cap was reached and freed: $out"
checks=$((checks + 2))
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
[ "$(echo "$out" | grep -o '"sb-[a-z0-9]*"' | sort -u | grep -vc "\"$id\"")" = 0 ] || fail "a refused create left a sandbox: $out"
checks=$((checks + 1))

# The running jail: ENOSPC inside, and its root stays read-write.
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'dd if=/dev/zero of=/root/fill bs=1M count=64 2>&1; sync; exit 1'
echo "$out" | grep -q "No space left on device" || fail "a write on a full pool: no ENOSPC: $out"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'rm -f /root/fill; grep " / " /proc/mounts'
echo "$out" | grep -q " rw[, ]" || fail "the jail's root is not read-write after a full pool: $out"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q '"running"' || fail "the sandbox is not running after a full pool: $out"
checks=$((checks + 3))

rm -f "$filler".*
sync -f "$POOL"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'dd if=/dev/zero of=/root/again bs=1M count=8 2>&1 && sync && echo wrote'
echo "$out" | grep -q wrote || fail "the same sandbox could not write after space was freed: $out"
checks=$((checks + 1))
expect_rc 0 "$SPACE" run --template tiny --isolation jail "${S[@]}" -- echo ok
[ "$out" = ok ] || fail "after freeing space: $out"
checks=$((checks + 1))
echo "pool-full: $checks checks, 0 failed"
