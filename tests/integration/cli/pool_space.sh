#!/bin/bash
# How much pool space is promised and used (issue 20): `space pool --json`, `space pool info`, `space ls` and
# `space doctor` show the sum of the sandboxes' disks' apparent sizes beside the pool's used and free bytes,
# the sum grows by a sandbox's disk when it is created, and promising more than is free is a warning.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 1G
checks=0
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }
# field NAME: from `space pool --json`
pool_field() { "$SPACE" pool --json "${S[@]}" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

expect_rc 0 "$SPACE" pool --json "${S[@]}"
echo "$out" | python3 -c '
import json, sys
p = json.load(sys.stdin)
for k in ("used_bytes", "promised_bytes", "sandbox_disks", "overcommitted", "free_bytes", "total_bytes"):
    assert k in p, "missing " + k
assert p["promised_bytes"] == 0 and p["sandbox_disks"] == 0, p
assert 0 < p["used_bytes"] < p["total_bytes"], p
assert p["overcommitted"] is False, p
' || fail "pool --json before any sandbox: $out"
ok "pool --json has used, promised (0 of 0 disks) and free bytes"

expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
on_exit "'$SPACE' rm -f '$id' --state '$STATE'"
disk=$(stat -c %s "$STATE/pool/sandboxes/$id/disk/rootfs.ext4") || fail "no disk for $id"
[ "$disk" -gt 0 ] || fail "disk size $disk"
[ "$(pool_field promised_bytes)" = "$disk" ] || fail "promised $(pool_field promised_bytes), the disk is $disk"
[ "$(pool_field sandbox_disks)" = 1 ] || fail "sandbox_disks $(pool_field sandbox_disks)"
ok "a create adds its disk's apparent size ($disk bytes) to promised_bytes"

expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id2=$out
on_exit "'$SPACE' rm -f '$id2' --state '$STATE'"
[ "$(pool_field promised_bytes)" = $((2 * disk)) ] || fail "two disks: $(pool_field promised_bytes), want $((2 * disk))"
ok "a second create grows it by the same size again"

expect_rc 0 "$SPACE" pool info "${S[@]}"
echo "$out" | grep -Eq '^disks: +.* promised to 2 sandbox disks; .* used, .* free \(statvfs: approximate on btrfs\)$' ||
	fail "pool info: $out"
expect_rc 0 "$SPACE" ls "${S[@]}"
echo "$out" | grep -Eq '^pool: .* promised to 2 sandbox disks; .* used, .* free \(statvfs: approximate on btrfs\)$' ||
	fail "ls: $out"
expect_rc 0 "$SPACE" doctor --json "${S[@]}"
echo "$out" | python3 -c '
import json, sys
c = [c for c in json.load(sys.stdin)["checks"] if c["name"] == "pool-space"]
assert c and c[0]["status"] == "ok" and "promised to 2 sandbox disks" in c[0]["detail"], c
assert "approximate on btrfs" in c[0]["detail"], c
' || fail "doctor pool-space: $out"
ok "pool info, ls and doctor show the promised, used and free figures (saying statvfs approximates btrfs)"

# A disk that could grow past what is free (sparse: nothing written): the pool is overcommitted. (Where a
# sandbox made before the per-sandbox directory has its disk: sandboxes/<id>/rootfs.ext4 counts too.)
mkdir "$STATE/pool/sandboxes/sb-sparse0000000000" && truncate -s 100G "$STATE/pool/sandboxes/sb-sparse0000000000/rootfs.ext4"
on_exit "rm -rf '$STATE/pool/sandboxes/sb-sparse0000000000'"
[ "$(pool_field overcommitted)" = True ] || fail "100G promised on a 1G pool is not overcommitted"
expect_rc 0 "$SPACE" ls "${S[@]}"
echo "$err" | grep -q "warning: the sandboxes' disks are promised .*, more than the .* the pool has free" || fail "ls warning: $err"
expect_rc 0 "$SPACE" pool info "${S[@]}"
echo "$out" | grep -q "^warning: the sandboxes' disks are promised" || fail "pool info warning: $out"
expect_rc 0 "$SPACE" doctor --json "${S[@]}"
echo "$out" | python3 -c '
import json, sys
c = [c for c in json.load(sys.stdin)["checks"] if c["name"] == "pool-space"][0]
assert c["status"] == "warn" and "can fill the pool" in c["detail"] and c.get("fix"), c
' || fail "doctor overcommit: $out"
ok "promised above free is a warning in ls, pool info and doctor"
rm -rf "$STATE/pool/sandboxes/sb-sparse0000000000"

expect_rc 0 "$SPACE" rm "$id" "$id2" "${S[@]}"
[ "$(pool_field promised_bytes)" = 0 ] || fail "after rm: $(pool_field promised_bytes)"
ok "removing the sandboxes gives the promise back"
echo "done: $checks checks"
[ "$checks" = 6 ] || fail "expected 6 checks, ran $checks"
