#!/bin/bash
# Host uids of jail sandboxes (issue 14, item 9): every jail's range is unique on the machine, across state
# directories; a range already taken is never reused (also not by a restart); ranges go back when the
# sandbox is destroyed; stale slots are reclaimed by `space init`. And the identity uid map: refused where
# idmapped mounts fail, unless the operator allowed it, which is then said at every create, by `space ls`,
# `space pool` and `space doctor`.
# Ends with "uids: N checks" (the completion record).
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
[ -x "${SPACE_AGENT_PATH:-}" ] || fail "space-agent not built (SPACE_AGENT_PATH=${SPACE_AGENT_PATH:-})"
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
SLOTS=/run/space-uids
checks=0
ok() { checks=$((checks + 1)); }

WORK=$(mktemp -d /tmp/space-uids-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
make_state 2G
A=$STATE
make_state 2G
B=$STATE
for s in "$A" "$B"; do
	expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$s"
done
# Test builds have switches (meson -Dtest_switches=true); `space doctor` says so. Release builds must
# ignore them: checked below either way.
test_build=0
"$SPACE" doctor --json --state "$A" 2>/dev/null | grep -q '"test-build"' && test_build=1

# The range of a sandbox: the second field of its PID 1's uid_map ("0 <first host uid> 65536").
pid_of() { "$SPACE" ls --json --state "$2" | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='$1'][0])"; }
range_of() { awk '{print $2 "/" $3}' "/proc/$(pid_of "$1" "$2")/uid_map"; }
slot_owner() { cat "$SLOTS/r${1%/*}" 2>/dev/null; }
# Slot files this test writes itself: made only where none is (noclobber), removed only while still ours.
put_slot() { (set -C; echo "$2" >"$SLOTS/$1") 2>/dev/null; }
rm_if_ours() { [ "$(cat "$SLOTS/$1" 2>/dev/null)" = "$2" ] && rm -f "$SLOTS/$1"; }
free_slot() { # r|u: a free slot name, from the top of the area down
	local i n
	for i in $(seq 0 100); do
		if [ "$1" = r ]; then n=r$((0x40000000 + (16383 - i) * 65536)); else n=u$((0x9fffffff - i)); fi
		[ -e "$SLOTS/$n" ] || { echo "$n"; return; }
	done
}

# 20 jails in two state directories: 20 different ranges, each the slot its sandbox holds.
declare -A state_of
ids=()
for i in $(seq 1 20); do
	s=$A; [ $((i % 2)) = 0 ] && s=$B
	expect_rc 0 "$SPACE" create --template tiny --isolation jail --state "$s"
	ids+=("$out"); state_of[$out]=$s
	on_exit "'$SPACE' rm '$out' --state '$s'"
done
declare -A seen
for id in "${ids[@]}"; do
	r=$(range_of "$id" "${state_of[$id]}")
	[ "${r#*/}" = 65536 ] || fail "$id: uid_map '$r' is not a 65536-uid range"
	[ "${r%/*}" -ge $((0x40000000)) ] || fail "$id: range $r below the private area (identity map?)"
	[ -z "${seen[$r]:-}" ] || fail "$id and ${seen[$r]} share the host uid range $r"
	seen[$r]=$id
	[ "$(slot_owner "$r")" = "${state_of[$id]} $id jail" ] || fail "slot of $r: '$(slot_owner "$r")', wanted '${state_of[$id]} $id jail'"
	ok
done
echo "20 jails in 2 state directories: 20 distinct host uid ranges, each held in $SLOTS"

# A restart keeps its range...
id=${ids[0]}; s=${state_of[$id]}
r0=$(range_of "$id" "$s")
expect_rc 0 "$SPACE" checkpoint "$id" --state "$s"
cp=$out
expect_rc 0 "$SPACE" rollback "$id" "$cp" --state "$s"
[ "$(range_of "$id" "$s")" = "$r0" ] || fail "rollback changed the range of $id: $r0 -> $(range_of "$id" "$s")"
ok
# ...unless another owner has taken it meanwhile (as after a reboot emptied /run): then it gets another one
# and the other owner keeps its slot. The other owner is this script (alive: no reaper frees its slot).
other="pid $$ $(awk '{print $22}' /proc/$$/stat) uids-test"
rm -f "$SLOTS/r${r0%/*}"
put_slot "r${r0%/*}" "$other" || fail "could not take r${r0%/*}"
on_exit "rm_if_ours 'r${r0%/*}' '$other'"
expect_rc 0 "$SPACE" rollback "$id" "$cp" --state "$s"
r1=$(range_of "$id" "$s")
[ "$r1" != "$r0" ] || fail "rollback reused range $r0, which another owner holds"
[ "$(slot_owner "$r0")" = "$other" ] || fail "the other owner lost its slot: '$(slot_owner "$r0")'"
[ "$(slot_owner "$r1")" = "$s $id jail" ] || fail "new slot $r1 not recorded: '$(slot_owner "$r1")'"
ok

# Stale slots: `space init` frees those whose sandbox is gone (its state directory removed, its row
# missing) or whose process ended; it keeps the live ones (this script's too). Another test's `space init`
# running meanwhile may free them first: gone is gone.
texts=("/nonexistent-state-dir-$$ sb-forgedforgedforge jail" "$A sb-norowwiththisid0 jail" "pid 4194303 1 jail")
stale=()
for i in 0 1 2; do
	f=$(free_slot "$([ $i = 2 ] && echo u || echo r)")
	put_slot "$f" "${texts[$i]}" || fail "could not make stale slot $f"
	on_exit "rm_if_ours '$f' '${texts[$i]}'"
	stale+=("$f")
done
expect_rc 0 "$SPACE" init --state "$A"
[ "$(slot_owner "$r0")" = "$other" ] || fail "space init freed the slot of a live process"
for i in 0 1 2; do
	[ "$(cat "$SLOTS/${stale[$i]}" 2>/dev/null)" != "${texts[$i]}" ] || fail "stale slot ${stale[$i]} (${texts[$i]}) survived space init"
	ok
done
for id in "${ids[@]}"; do
	grep -qx "${state_of[$id]} $id jail" "$SLOTS"/r* || fail "space init freed the live slot of $id"
done
ok

# Destroyed sandboxes give their ranges back.
for id in "${ids[@]}"; do
	expect_rc 0 "$SPACE" rm "$id" --state "${state_of[$id]}"
done
left=$(cat "$SLOTS"/* 2>/dev/null | grep -e "^$A " -e "^$B " || true)
[ -z "$left" ] || fail "slots left after rm: $left"
ok
[ -z "$(leaks_of "${ids[@]}")" ] || fail "leaks: $(leaks_of "${ids[@]}")"
ok

# ---- the identity uid map ----
R=(run --template tiny --isolation jail --state "$A")
if [ $test_build = 1 ]; then
	# Where idmapped mounts fail (simulated), the jail is refused, with the reason and the way out, and
	# nothing of it is left.
	expect_rc 1 env SPACE_TEST_JAIL_NO_IDMAP=1 "$SPACE" "${R[@]}" -- true
	echo "$err" | grep -q "refusing the identity uid map" || fail "refusal without its reason: $err"
	echo "$err" | grep -q "space init --allow-identity-map" || fail "refusal without the way out: $err"
	[ -z "$(cat "$SLOTS"/* 2>/dev/null | grep "^$A " || true)" ] || fail "a refused jail left its uid slot"
	ok
	# The operator allows it: every create says so, and `space ls`, `space pool`, `space doctor` too.
	expect_rc 0 "$SPACE" init --allow-identity-map --state "$A"
	echo "$err" | grep -q "allows the identity uid map" || fail "init --allow-identity-map said nothing: $err"
	expect_rc 0 env SPACE_TEST_JAIL_NO_IDMAP=1 "$SPACE" "${R[@]}" -- cat /proc/self/uid_map
	[ "$(echo $out)" = "0 0 65536" ] || fail "fallback jail uid_map: '$out'"
	echo "$err" | grep -q "warning: .*uses it: idmapped mounts failed, root inside is host uid 0" ||
		fail "no warning at a create on the identity map: $err"
	ok
	expect_rc 0 "$SPACE" "${R[@]}" -- cat /proc/self/uid_map
	set -- $out
	[ "$2" -ge $((0x40000000)) ] || fail "idmapped jail uid_map: '$out'"
	echo "$err" | grep -q "warning: .*allows the identity uid map" || fail "no warning at a create: $err"
	ok
	expect_rc 0 "$SPACE" ls --state "$A"
	echo "$err" | grep -q "warning: this state directory allows the identity uid map" || fail "space ls: $err"
	expect_rc 0 "$SPACE" pool --state "$A"
	echo "$out" | grep -q "identity map ALLOWED" || fail "space pool: $out"
	expect_rc 0 "$SPACE" doctor --json --state "$A"
	echo "$out" | python3 -c 'import json,sys; c=[c for c in json.load(sys.stdin)["checks"] if c["name"]=="uid-map"]; sys.exit(0 if c and c[0]["status"]=="warn" else 1)' ||
		fail "space doctor: no uid-map warning: $out"
	ok
	expect_rc 0 "$SPACE" init --refuse-identity-map --state "$A"
	expect_rc 1 env SPACE_TEST_JAIL_NO_IDMAP=1 "$SPACE" "${R[@]}" -- true
	echo "$err" | grep -q "refusing the identity uid map" || fail "refused again: $err"
	expect_rc 0 "$SPACE" doctor --json --state "$A"
	echo "$out" | python3 -c 'import json,sys; c=[c for c in json.load(sys.stdin)["checks"] if c["name"]=="uid-map"]; sys.exit(0 if c and c[0]["status"]=="ok" else 1)' ||
		fail "space doctor after --refuse-identity-map: $out"
	ok
else
	# A release build has no such switch: the jail is idmapped as usual.
	expect_rc 0 env SPACE_TEST_JAIL_NO_IDMAP=1 "$SPACE" "${R[@]}" -- cat /proc/self/uid_map
	set -- $out
	[ "$2" -ge $((0x40000000)) ] || fail "SPACE_TEST_JAIL_NO_IDMAP changed a release build: '$out'"
	ok
fi
echo "uids: $checks checks"
