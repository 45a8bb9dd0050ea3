#!/bin/bash
# Checkpoint housekeeping through the CLI (issue 20): `space rm` says which checkpoints it kept and
# --with-checkpoints removes them; a template kept by checkpoints says which; the "before-step" checkpoint of
# --checkpoint-first goes when the step succeeds and stays (said) when it fails; rollback and fork take a
# checkpoint's name as well as its id.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup
ids=()
checks=0
ok() { checks=$((checks + 1)); }
ncp() { "$SPACE" checkpoints "$1" --json "${S[@]}" | grep -c '"id"'; }

expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
ids+=("$id")
on_exit "'$SPACE' rm '$id' --state '$STATE'"

# --checkpoint-first: a step that succeeds leaves no checkpoint behind; one that fails keeps it and says so.
for i in 1 2 3; do
	expect_rc 0 "$SPACE" exec --checkpoint-first "$id" "${S[@]}" -- sh -c "echo $i >>/root/steps"
done
[ "$(ncp "$id")" = 0 ] || fail "succeeding steps left checkpoints: $("$SPACE" checkpoints "$id" "${S[@]}")"
ok
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- cat /root/steps
[ "$out" = "1
2
3" ] || fail "the steps' writes: $out"
ok
expect_rc 4 "$SPACE" exec --checkpoint-first "$id" "${S[@]}" -- sh -c 'echo bad >/root/bad; exit 4'
step_cp=$(echo "$err" | sed -n 's/.*rolled back to checkpoint \(cp-[a-z0-9]*\).*/\1/p')
[ -n "$step_cp" ] || fail "the failed step did not say its rollback: $err"
echo "$err" | grep -q "checkpoint $step_cp (before-step) is kept" || fail "the kept step checkpoint is not said: $err"
[ "$(ncp "$id")" = 1 ] || fail "the failed step's checkpoint is not kept"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- test -e /root/bad
ok

# Names: rollback and fork take a name (unique in the sandbox), ambiguous and unknown names are refused.
expect_rc 0 "$SPACE" checkpoint "$id" --name good "${S[@]}"
cp_good=$out
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo later >/root/later'
expect_rc 0 "$SPACE" rollback "$id" good "${S[@]}"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- test -e /root/later
ok
expect_rc 1 "$SPACE" rollback "$id" nosuchname "${S[@]}"
echo "$err" | grep -q "no checkpoint with the id or name 'nosuchname' in $id" || fail "unknown name: $err"
ok
expect_rc 0 "$SPACE" checkpoint "$id" --name twice "${S[@]}"
t1=$out
expect_rc 0 "$SPACE" checkpoint "$id" --name twice "${S[@]}"
t2=$out
expect_rc 1 "$SPACE" rollback "$id" twice "${S[@]}"
echo "$err" | grep -q "2 checkpoints of $id are named 'twice'" && echo "$err" | grep -q "$t1" &&
	echo "$err" | grep -q "$t2" || fail "ambiguous name: $err"
ok
expect_rc 0 "$SPACE" rollback "$id" "$t2" "${S[@]}" # the id still works
expect_rc 0 "$SPACE" fork good "${S[@]}"
f1=$out
ids+=("$f1")
on_exit "'$SPACE' rm '$f1' --state '$STATE'"
echo "$f1" | grep -Eq '^sb-[a-z2-7]{16}$' || fail "fork by name: $out"
expect_rc 0 "$SPACE" exec "$f1" "${S[@]}" -- cat /root/steps
ok
# The fork has a checkpoint named "good" too: the bare name is now ambiguous, the sandbox settles it.
expect_rc 0 "$SPACE" checkpoint "$f1" --name good "${S[@]}"
expect_rc 1 "$SPACE" fork good "${S[@]}"
echo "$err" | grep -q "are named 'good'" || fail "ambiguous fork name: $err"
expect_rc 0 "$SPACE" fork "$id" good "${S[@]}"
f2=$out
ids+=("$f2")
on_exit "'$SPACE' rm '$f2' --state '$STATE'"
expect_rc 1 "$SPACE" fork "$f2" "$cp_good" "${S[@]}"
echo "$err" | grep -q "is of sandbox $id, not $f2" || fail "fork SANDBOX CP of another sandbox: $err"
expect_rc 1 "$SPACE" fork nosuchname "${S[@]}"
echo "$err" | grep -q "no checkpoint with the id or name 'nosuchname' in any sandbox" || fail "fork unknown: $err"
ok

# A template kept by checkpoints says which, and how to remove them.
expect_rc 0 "$SPACE" rm "$f2" "${S[@]}"
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
# `space rm` says what it kept.
echo "$err" | grep -q "$id: kept 4 checkpoints: before-step ($step_cp), good ($cp_good), twice ($t1), twice ($t2) (.*space rm --with-checkpoints" ||
	fail "rm did not say what it kept: $err"
ok
expect_rc 1 "$SPACE" template rm tiny "${S[@]}"
echo "$err" | grep -q "$step_cp before-step" && echo "$err" | grep -q "$cp_good good" &&
	echo "$err" | grep -q "checkpoint rm" || fail "template rm does not say which checkpoints: $err"
ok
# --with-checkpoints on a sandbox already removed finishes the job; on a live one it takes them along.
expect_rc 0 "$SPACE" rm --with-checkpoints "$id" "${S[@]}"
[ "$(ncp "$id")" = 0 ] || fail "rm --with-checkpoints of a removed sandbox kept its checkpoints"
echo "$err" | grep -q kept && fail "rm --with-checkpoints still says kept: $err"
expect_rc 0 "$SPACE" rm --with-checkpoints "$f1" "${S[@]}"
[ "$(ncp "$f1")" = 0 ] || fail "rm --with-checkpoints kept checkpoints of $f1"
expect_rc 1 "$SPACE" rm --with-checkpoints "$f1" "${S[@]}" # nothing left of it: gone is gone
ok
expect_rc 0 "$SPACE" checkpoints --json "${S[@]}"
[ "$out" = "[]" ] || fail "checkpoints left: $out"
expect_rc 0 "$SPACE" template rm tiny "${S[@]}"
ok

left=$(leaks_of "${ids[@]}")
[ -z "$left" ] || fail "sandboxes left things behind: $left"
[ -z "$(ls -A "$STATE/pool/checkpoints")" ] || fail "checkpoint subvolumes left: $(ls "$STATE/pool/checkpoints")"
ok
[ "$checks" = 13 ] || fail "ran $checks of 13 checks"
echo "checkpoint housekeeping: ok ($checks checks)"
