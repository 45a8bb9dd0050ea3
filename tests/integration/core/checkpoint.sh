#!/bin/bash
# Pause/resume, checkpoints, rollback and fork of jail sandboxes through the CLI: what a user sees (files
# gone after a rollback, forks that never see each other's writes, a frozen counter) and no leaks.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1

# The host pid of a sandbox's jail (PID 1), from `space ls --json`.
pid_of() {
	"$SPACE" ls --json --state "$STATE" | grep -A8 "\"$1\"" | grep -o '"pid":[[:space:]]*[0-9]*' | grep -o '[0-9]*$'
}
make_state 2G
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
S=(--state "$STATE")
ids=()

expect_rc 0 "$SPACE" create --template tiny --isolation jail --env KEEP=me "${S[@]}"
id=$out
ids+=("$id")
on_exit "'$SPACE' rm '$id' --state '$STATE'"

# Checkpoint, write, roll back: files written after the checkpoint are gone, earlier ones are there.
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo before >/root/before'
expect_rc 0 "$SPACE" checkpoint "$id" --name first "${S[@]}"
cp1=$out
echo "$cp1" | grep -Eq '^cp-[a-z2-7]{16}$' || fail "bad checkpoint id: $cp1"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo after >/root/after; echo changed >/root/before'
expect_rc 0 "$SPACE" checkpoints "$id" --json "${S[@]}"
echo "$out" | grep -q "\"$cp1\"" || fail "checkpoints lacks $cp1: $out"
echo "$out" | grep -q '"first"' || fail "checkpoint name missing: $out"
echo "$out" | grep -q '"disk"' || fail "checkpoint kind missing: $out"
expect_rc 0 "$SPACE" checkpoints "${S[@]}"
echo "$out" | grep -q "$cp1" || fail "checkpoints (all) lacks $cp1: $out"
pid_before=$(pid_of "$id")
expect_rc 0 "$SPACE" rollback "$id" "$cp1" "${S[@]}"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'cat /root/before; test -e /root/after && echo AFTER-SURVIVED; echo $KEEP; hostname'
[ "$out" = "before
me
$id" ] || fail "after rollback: '$out'"
pid_after=$(pid_of "$id")
[ -n "$pid_before" ] && [ "$pid_before" != "$pid_after" ] || fail "rollback did not restart the jail ($pid_before -> $pid_after)"
# A second rollback to the same checkpoint works too (the checkpoint itself is unchanged).
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo again >/root/after'
expect_rc 0 "$SPACE" rollback "$id" "$cp1" "${S[@]}"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- test -e /root/after

# Guarded steps: a failing command returns the sandbox to its newest checkpoint; a succeeding one keeps its
# writes; --checkpoint-first returns to a checkpoint taken just before the command.
expect_rc 3 "$SPACE" exec --rollback-on-failure "$id" "${S[@]}" -- sh -c 'echo bad >/root/bad; exit 3'
echo "$err" | grep -q "rolled back to checkpoint $cp1" || fail "failed step did not report the rollback: $err"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- test -e /root/bad
expect_rc 0 "$SPACE" exec --rollback-on-failure "$id" "${S[@]}" -- sh -c 'echo good >/root/good'
echo "$err" | grep -q "rolled back" && fail "a succeeding step was rolled back: $err"
expect_rc 1 "$SPACE" exec --checkpoint-first "$id" "${S[@]}" -- sh -c 'rm /root/good; exit 1'
step_cp=$(echo "$err" | sed -n 's/.*rolled back to checkpoint \(cp-[a-z0-9]*\).*/\1/p')
[ -n "$step_cp" ] && [ "$step_cp" != "$cp1" ] || fail "--checkpoint-first did not roll back to a new checkpoint: $err"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- cat /root/good
[ "$out" = good ] || fail "--checkpoint-first rolled back to the wrong point: $out"
expect_rc 0 "$SPACE" checkpoint rm "$step_cp" "${S[@]}"
expect_rc 2 "$SPACE" exec --rollback-on-failure -t "$id" "${S[@]}" -- true

# Fork twice: each sees the checkpoint's files; writes in one never show in the other or the original.
expect_rc 0 "$SPACE" fork "$cp1" --count 2 "${S[@]}"
mapfile -t forks <<<"$out"
[ "${#forks[@]}" = 2 ] || fail "fork --count 2 gave: $out"
for f in "${forks[@]}"; do
	ids+=("$f")
	on_exit "'$SPACE' rm '$f' --state '$STATE'"
	echo "$f" | grep -Eq '^sb-[a-z2-7]{16}$' || fail "bad fork id: $f"
	expect_rc 0 "$SPACE" exec "$f" "${S[@]}" -- sh -c 'cat /root/before; echo $KEEP'
	[ "$out" = "before
me" ] || fail "fork $f sees: $out"
done
expect_rc 0 "$SPACE" exec "${forks[0]}" "${S[@]}" -- sh -c 'echo zero >/root/mine; sync'
expect_rc 0 "$SPACE" exec "${forks[1]}" "${S[@]}" -- sh -c 'echo one >/root/mine; sync'
expect_rc 0 "$SPACE" exec "${forks[0]}" "${S[@]}" -- cat /root/mine
[ "$out" = zero ] || fail "fork 0 reads '$out'"
expect_rc 0 "$SPACE" exec "${forks[1]}" "${S[@]}" -- cat /root/mine
[ "$out" = one ] || fail "fork 1 reads '$out'"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- test -e /root/mine

# Rolling a sandbox back to another sandbox's checkpoint is refused (fork it instead); unknown ids fail.
expect_rc 1 "$SPACE" rollback "${forks[0]}" "$cp1" "${S[@]}"
echo "$err" | grep -q "belongs to sandbox $id" || fail "foreign rollback error: $err"
expect_rc 1 "$SPACE" rollback "$id" cp-aaaaaaaaaaaaaaaa "${S[@]}"
echo "$err" | grep -q "no checkpoint" || fail "unknown checkpoint error: $err"
expect_rc 1 "$SPACE" fork cp-aaaaaaaaaaaaaaaa "${S[@]}"
expect_rc 2 "$SPACE" fork "$cp1" --count 0 "${S[@]}"
expect_rc 1 "$SPACE" checkpoint sb-aaaaaaaaaaaaaaaa "${S[@]}"

# Pause: a counter stops advancing and exec fails clearly; resume: it advances again. The counter is
# replaced by rename, so a read never sees a half-written value.
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done >/dev/null 2>&1 </dev/null & echo started'
sleep 0.5
expect_rc 0 "$SPACE" pause "$id" "${S[@]}"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q '"paused"' || fail "not paused in ls: $out"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- true
echo "$err" | grep -q "paused" || fail "exec on a paused sandbox: $err"
jpid=$(pid_of "$id")
c1=$(cat "/proc/$jpid/root/tmp/count")
sleep 0.6
c2=$(cat "/proc/$jpid/root/tmp/count")
[ "$c1" = "$c2" ] || fail "counter advanced while paused: $c1 -> $c2"
# A checkpoint of a paused sandbox leaves it paused.
expect_rc 0 "$SPACE" checkpoint "$id" "${S[@]}"
cp2=$out
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q '"paused"' || fail "checkpoint unpaused the sandbox: $out"
expect_rc 0 "$SPACE" resume "$id" "${S[@]}"
sleep 0.6
c3=$(cat "/proc/$jpid/root/tmp/count")
[ "$c3" -gt "$c2" ] || fail "counter did not advance after resume: $c2 -> $c3"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- true

# Checkpoints outlive their sandbox and go with `checkpoint rm`.
expect_rc 0 "$SPACE" rm "$id" "${forks[@]}" "${S[@]}"
expect_rc 0 "$SPACE" checkpoints --json "${S[@]}"
echo "$out" | grep -q "$cp2" || fail "checkpoint gone with its sandbox: $out"
expect_rc 0 "$SPACE" fork "$cp2" "${S[@]}"
f3=$out
ids+=("$f3")
on_exit "'$SPACE' rm '$f3' --state '$STATE'"
expect_rc 0 "$SPACE" exec "$f3" "${S[@]}" -- cat /root/before
[ "$out" = before ] || fail "fork of a removed sandbox's checkpoint: $out"
expect_rc 0 "$SPACE" rm "$f3" "${S[@]}"
expect_rc 0 "$SPACE" checkpoint rm "$cp1" "$cp2" "${S[@]}"
expect_rc 1 "$SPACE" checkpoint rm "$cp1" "${S[@]}"
expect_rc 0 "$SPACE" checkpoints --json "${S[@]}"
[ "$out" = "[]" ] || fail "checkpoints left: $out"

# No leaks.
left=$(leaks_of "${ids[@]}")
[ -z "$left" ] || fail "sandboxes left things behind: $left"
[ -z "$(ls -A "$STATE/pool/sandboxes")" ] || fail "sandbox subvolumes left: $(ls "$STATE/pool/sandboxes")"
[ -z "$(ls -A "$STATE/pool/checkpoints")" ] || fail "checkpoint subvolumes left: $(ls "$STATE/pool/checkpoints")"
echo "checkpoints: ok"
