#!/bin/bash
# Orphans (issue 20). A `space run` sandbox dies with its CLI however the CLI dies (kill -9 too), and the
# next `space ls` shows nothing left, also when the sandbox was paused (its agent could not act: the row's
# tether record makes the reap destroy it). Forks take what is left of their parent's lifetime (or
# --timeout). `space rm --all`, `--older-than DURATION`, `-f`. Jail only (VM sandboxes need /dev/kvm).
. "$(dirname "$0")/../../lib.sh"
command -v python3 >/dev/null || skip "python3 missing"
jail_test_setup
J=(--template tiny --isolation jail "${S[@]}")
checks=0
ok() { checks=$((checks + 1)); }
live_ids() { "$SPACE" ls --json "${S[@]}" | grep -o '"id":[[:space:]]*"sb-[a-z0-9]*"' | cut -d'"' -f4; }
# field ID NAME: a number of `space ls --json`'s entry for ID (empty when none).
field() {
	"$SPACE" ls --json "${S[@]}" | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["id"] == sys.argv[1]:
        print(int(s.get(sys.argv[2], 0)))' "$1" "$2"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# wait_for CMD...: up to 10 s for CMD to succeed.
wait_for() { local i; for i in $(seq 100); do "$@" && return 0; sleep 0.1; done; return 1; }
running() { pgrep -f "^sleep $1\$" >/dev/null; }
gone() { ! pgrep -f "^sleep $1\$" >/dev/null; }

# ---- 1. kill -9 of `space run`: its sandbox's processes are gone within seconds, and so is its row ----
n1=$((200000 + RANDOM))
"$SPACE" run "${J[@]}" -- sleep "$n1" >/dev/null 2>&1 &
run1=$!
on_exit "kill_ours -9 $run1"
wait_for running "$n1" || fail "space run never started 'sleep $n1'"
id1=$(live_ids)
[ "$(echo "$id1" | wc -w)" = 1 ] || fail "wanted one sandbox, got: $id1"
agent1=$(field "$id1" pid)
[ -n "$agent1" ] && [ "$agent1" -gt 1 ] || fail "no pid for $id1"
kill -9 "$run1"
wait "$run1" 2>/dev/null
t0=$(now_ms)
wait_for gone "$n1" || fail "'sleep $n1' still runs 10 s after its space run was killed"
ok
waited=$(($(now_ms) - t0))
[ "$waited" -le 5000 ] || fail "the sandbox took $waited ms to end"
wait_for eval "! kill -0 $agent1 2>/dev/null" || fail "the sandbox's PID 1 ($agent1) still runs"
ok
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q '"id"' && fail "space ls after the kill still lists: $out"
ok
left=$(leaks_of "$id1")
[ -z "$left" ] || fail "the killed run left things behind: $left"
ok

# ---- 2. the same with the sandbox paused: its agent cannot act, the reap ends it (its holder is gone) ----
n2=$((200000 + RANDOM))
"$SPACE" run "${J[@]}" -- sleep "$n2" >/dev/null 2>&1 &
run2=$!
on_exit "kill_ours -9 $run2"
wait_for running "$n2" || fail "space run never started 'sleep $n2'"
id2=$(live_ids)
expect_rc 0 "$SPACE" pause "$id2" "${S[@]}"
kill -9 "$run2"
wait "$run2" 2>/dev/null
sleep 0.5
running "$n2" || fail "a paused sandbox ended before any reap (the test assumes a frozen agent)"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q '"id"' && fail "space ls still lists the paused orphan: $out"
wait_for gone "$n2" || fail "'sleep $n2' still runs after the reap"
left=$(leaks_of "$id2")
[ -z "$left" ] || fail "the paused orphan left things behind: $left"
ok

# ---- 3. space rm --older-than, --all, -f ----
expect_rc 0 "$SPACE" create "${J[@]}"
a=$out
sleep 3
expect_rc 0 "$SPACE" create "${J[@]}"
b=$out
expect_rc 2 "$SPACE" rm --older-than 5x "${S[@]}"
echo "$err" | grep -q -- "--older-than" || fail "a bad duration is not named: $err"
expect_rc 2 "$SPACE" rm --all "$a" "${S[@]}"
[ "$(live_ids | sort | tr '\n' ' ')" = "$(printf '%s\n' "$a" "$b" | sort | tr '\n' ' ')" ] ||
	fail "a refused rm removed something: $(live_ids)"
ok
expect_rc 0 "$SPACE" rm --older-than 2s "${S[@]}"
[ "$(live_ids)" = "$b" ] || fail "rm --older-than 2s left '$(live_ids)', wanted only $b"
ok
expect_rc 0 "$SPACE" rm --all --json "${S[@]}"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["removed"] == [sys.argv[1]], d' "$b" ||
	fail "rm --all --json: $out"
[ -z "$(live_ids)" ] || fail "rm --all left $(live_ids)"
ok
expect_rc 1 "$SPACE" rm "$a" "${S[@]}"
expect_rc 1 "$SPACE" rm sb-aaaaaaaaaaaaaaaa "${S[@]}"
expect_rc 0 "$SPACE" rm -f "$a" sb-aaaaaaaaaaaaaaaa "${S[@]}"
expect_rc 0 "$SPACE" rm --all "${S[@]}"
echo "$err" | grep -q "no sandbox to remove" || fail "rm --all of nothing: $err"
ok
left=$(leaks_of "$a" "$b")
[ -z "$left" ] || fail "rm left things behind: $left"
ok

# ---- 4. forks take what is left of the parent's lifetime, or --timeout ----
expect_rc 0 "$SPACE" create --timeout 10m "${J[@]}"
p=$out
on_exit "'$SPACE' rm -f '$p' --state '$STATE'"
expect_rc 0 "$SPACE" checkpoint "$p" "${S[@]}"
cp=$out
on_exit "'$SPACE' checkpoint rm '$cp' --state '$STATE'"
expect_rc 0 "$SPACE" fork "$cp" "${S[@]}"
f1=$out
pe=$(field "$p" expires_ms)
fe=$(field "$f1" expires_ms)
[ -n "$fe" ] && [ "$fe" -gt 0 ] || fail "the fork of a sandbox with a lifetime has none"
d=$((fe - pe)); d=${d#-}
[ "$d" -le 3000 ] || fail "the fork ends at $fe, its parent at $pe"
ok
expect_rc 0 "$SPACE" fork --timeout 30s "$cp" "${S[@]}"
f2=$out
want=$(($(now_ms) + 30000))
fe=$(field "$f2" expires_ms)
d=$((fe - want)); d=${d#-}
[ "$d" -le 3000 ] || fail "fork --timeout 30s ends at $fe, wanted about $want"
ok
expect_rc 0 "$SPACE" rm "$f1" "$f2" "${S[@]}"
# Once the parent's lifetime has ended, a fork needs one of its own.
expect_rc 0 "$SPACE" timeout "$p" 1 "${S[@]}"
sleep 2
expect_rc 1 "$SPACE" fork "$cp" "${S[@]}"
echo "$err" | grep -q "has ended" || fail "fork after the parent's lifetime: $err"
expect_rc 0 "$SPACE" fork --timeout 1m "$cp" "${S[@]}"
f3=$out
expect_rc 0 "$SPACE" rm "$f3" "${S[@]}"
ok
expect_rc 0 "$SPACE" checkpoint rm "$cp" "${S[@]}"
expect_rc 0 "$SPACE" rm -f "$p" "${S[@]}"
left=$(leaks_of "$p" "$f1" "$f2" "$f3")
[ -z "$left" ] || fail "the forks left things behind: $left"
ok

[ "$checks" = 14 ] || fail "ran $checks of 14 checks"
echo "orphans: ok ($checks checks)"
