#!/bin/bash
# Periodic file snapshots of jail sandboxes through the CLI: a sandbox created with --snapshot-every 1
# --snapshot-keep 3 keeps its last three automatic checkpoints (named ones are never pruned), can be rolled
# back to one of them (the file holds an older value) and keeps snapshotting afterwards; `space rm` ends the
# helper and leaves no subvolume; a template's default policy applies to sandboxes made from it; bad values
# are refused. Timing has slack for a loaded machine: only "3 listed once keep is reached" and strictly
# increasing times are asserted.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
export SPACE_SNAPD_PATH=${SPACE_SNAPD_PATH:-${SPACE_BUILD_DIR:-}/src/snapd/space-snapd}
need_built "$SPACE_SNAPD_PATH" space-snapd SPACE_SNAPD_PATH
command -v python3 >/dev/null || skip "python3 missing (reads the JSON listings)"
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1

make_state 2G
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
S=(--state "$STATE")
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" "${S[@]}"

# py EXPR: evaluates EXPR with j = the JSON in $out.
py() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print($1)" "$out"; }
# The snapshot policy of sandbox $1 in `space ls --json`: "every keep pid".
policy_of() {
	expect_rc 0 "$SPACE" ls --json "${S[@]}"
	py "' '.join(str(s['snapshots'][k]) if s['snapshots'] else 'none' for s in j if s['id']=='$1' for k in ('every','keep','pid'))"
}
# Automatic checkpoints of sandbox $1, oldest first: "id created_ms" per line.
autos_of() {
	expect_rc 0 "$SPACE" checkpoints "$1" --json "${S[@]}"
	py "'\n'.join(c['id']+' '+str(int(c['created_ms'])) for c in j if c['automatic'])"
}
# True once process $1 has gone (within 5 s; an exited helper is reaped by init, not by us).
gone() {
	local i
	for ((i = 0; i < 50; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}
# Waits (up to $2 s) until sandbox $1 lists exactly 3 automatic checkpoints all taken after ms $3.
wait_three_after() {
	local i list
	for ((i = 0; i < $2 * 5; i++)); do
		list=$(autos_of "$1")
		if [ "$(grep -c . <<<"$list")" = 3 ] && [ "$(head -1 <<<"$list" | cut -d' ' -f2)" -gt "$3" ]; then
			echo "$list"
			return 0
		fi
		sleep 0.2
	done
	fail "sandbox $1: not 3 automatic checkpoints newer than $3 after $2 s: $list"
}

# Bad values are refused, with what is wrong.
expect_rc 2 "$SPACE" create --template tiny --isolation jail --snapshot-every 0 "${S[@]}"
echo "$err" | grep -q -- "--snapshot-every needs a duration from 1s" || fail "every 0: $err"
expect_rc 2 "$SPACE" create --template tiny --isolation jail --snapshot-every 1 --snapshot-keep 101 "${S[@]}"
echo "$err" | grep -q -- "--snapshot-keep needs a number from 1 to 100" || fail "keep 101: $err"
expect_rc 2 "$SPACE" create --template tiny --isolation jail --snapshot-keep 3 "${S[@]}"
echo "$err" | grep -q -- "--snapshot-keep needs --snapshot-every" || fail "keep alone: $err"
expect_rc 2 "$SPACE" create --template tiny --isolation jail --snapshot-every x "${S[@]}"
expect_rc 2 "$SPACE" exec --snapshot-every 1 sb-aaaaaaaaaaaaaaaa "${S[@]}" -- true
expect_rc 2 "$SPACE" template set-snapshots tiny --every 0 "${S[@]}"
expect_rc 2 "$SPACE" template set-snapshots tiny "${S[@]}"
expect_rc 2 "$SPACE" template set-snapshots tiny --every 5 --off "${S[@]}"
expect_rc 1 "$SPACE" template set-snapshots nosuch --every 5 "${S[@]}"
echo "$err" | grep -q "nosuch" || fail "unknown template: $err"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
[ "$out" = "[]" ] || fail "a refused create left a sandbox: $out"

# A sandbox snapshotted every second, the last 3 kept, with a counter written every 0.3 s.
t0=$(date +%s%3N)
expect_rc 0 "$SPACE" create --template tiny --isolation jail --snapshot-every 1 --snapshot-keep 3 "${S[@]}"
id=$out
on_exit "'$SPACE' rm '$id' --state '$STATE'"
read -r every keep hpid <<<"$(policy_of "$id")"
[ "$every $keep" = "1 3" ] || fail "ls --json policy: $every $keep $hpid"
[ "$hpid" -gt 0 ] 2>/dev/null && grep -q space-snapd "/proc/$hpid/cmdline" || fail "no space-snapd pid: $hpid"
on_exit "kill $hpid"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i >/root/count.new; mv /root/count.new /root/count; sleep 0.3; done >/dev/null 2>&1 </dev/null & echo started'
# A named checkpoint is never pruned.
expect_rc 0 "$SPACE" checkpoint "$id" --name mine "${S[@]}"
mine=$out
sleep 5
list=$(wait_three_after "$id" 30 "$t0")
# Times strictly increase, and older ones were pruned (keep reached).
prev=0
while read -r cid ms; do
	[ "$ms" -gt "$prev" ] || fail "automatic checkpoint times not increasing: $list"
	prev=$ms
done <<<"$list"
expect_rc 0 "$SPACE" events "$id" --json "${S[@]}"
py "sum(1 for e in j if e.get('kind')=='checkpoint-removed')" | grep -qv '^0$' || fail "nothing was pruned: $out"
expect_rc 0 "$SPACE" checkpoints "$id" --json "${S[@]}"
echo "$out" | grep -q "\"$mine\"" || fail "the named checkpoint was pruned: $out"
expect_rc 0 "$SPACE" checkpoints "$id" "${S[@]}"
echo "$out" | grep -q "auto-[0-9]" || fail "checkpoints table lacks auto- names: $out"

# space-snapd never talks to the agent itself: with the jail frozen behind its back, the next SYNC waits
# for the agent, and the process waiting (snapd's only child then) runs as a uid of its own, without
# capabilities, with no_new_privs and a seccomp filter. `space doctor --verbose` says the same.
expect_rc 0 "$SPACE" ls --json "${S[@]}"
jpid=$(py "[s['pid'] for s in j if s['id']=='$id'][0]")
# The jail's cgroup (src/util/cgroup.c): space.slice/<id> on the unified hierarchy, space/<id> on v1.
cg=/sys/fs/cgroup/space.slice/$id
if [ -w "$cg/cgroup.freeze" ]; then
	freeze() { echo "$1" >"$cg/cgroup.freeze"; }
	on_exit "echo 0 >'$cg/cgroup.freeze' 2>/dev/null"
else
	cg=/sys/fs/cgroup/freezer/space/$id
	[ -w "$cg/freezer.state" ] || fail "no freezer for the jail at space.slice/$id or freezer/space/$id"
	freeze() { if [ "$1" = 1 ]; then echo FROZEN; else echo THAWED; fi >"$cg/freezer.state"; }
	on_exit "echo THAWED >'$cg/freezer.state' 2>/dev/null"
fi
grep -qx "$jpid" "$cg/cgroup.procs" || fail "jail PID 1 $jpid is not in $cg"
freeze 1
sync_child=
for ((i = 0; i < 50; i++)); do
	read -r sync_child _ <"/proc/$hpid/task/$hpid/children" 2>/dev/null && [ -n "$sync_child" ] && break
	sleep 0.1
done
[ -n "$sync_child" ] || fail "space-snapd $hpid started no sync child while the jail was frozen"
# It confines itself within milliseconds of the fork, before its first byte to the agent.
for ((i = 0; i < 20; i++)); do
	st=$(cat "/proc/$sync_child/status")
	grep -q "^Seccomp:[[:space:]]*2" <<<"$st" && break
	sleep 0.1
done
freeze 0
field() { sed -n "s/^$1:[[:space:]]*//p" <<<"$st"; }
read -r u1 u2 u3 u4 <<<"$(field Uid)"
[ "$u1" != 0 ] && [ "$u1 $u1 $u1 $u1" = "$u1 $u2 $u3 $u4" ] || fail "sync child runs as Uid $(field Uid)"
for c in CapEff CapPrm CapInh CapBnd CapAmb; do
	[ "$(field $c)" = 0000000000000000 ] || fail "sync child $c $(field $c)"
done
[ "$(field NoNewPrivs) $(field Seccomp)" = "1 2" ] || fail "sync child NoNewPrivs $(field NoNewPrivs) Seccomp $(field Seccomp)"
expect_rc 0 "$SPACE" doctor --verbose "${S[@]}"
grep -E "^ok +helper-snapd .*no_new_privs, seccomp rules: sync [0-9]+" <<<"$out" >/dev/null ||
	fail "doctor --verbose on space-snapd: $(grep snapd <<<"$out")"

# Paused, the sandbox is not snapshotted (its disk does not change), so its oldest automatic checkpoint
# stays put. Roll back to it: the counter file holds an older value; snapshots go on with a new helper.
expect_rc 0 "$SPACE" pause "$id" "${S[@]}"
sleep 1.5 # a snapshot already under way finishes
list=$(autos_of "$id")
sleep 2.5
[ "$(autos_of "$id")" = "$list" ] || fail "snapshots taken while paused: $list -> $(autos_of "$id")"
[ "$(grep -c . <<<"$list")" = 3 ] || fail "paused with other than 3 automatic checkpoints: $list"
oldest=$(head -1 <<<"$list" | cut -d' ' -f1)
expect_rc 0 "$SPACE" ls --json "${S[@]}"
jpid=$(py "[s['pid'] for s in j if s['id']=='$id'][0]")
now_count=$(cat "/proc/$jpid/root/root/count")
t1=$(date +%s%3N)
expect_rc 0 "$SPACE" rollback "$id" "$oldest" "${S[@]}"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- cat /root/count
[ "$out" -gt 0 ] && [ "$out" -lt "$now_count" ] || fail "after rollback to $oldest the counter is '$out' (was $now_count)"
read -r every2 keep2 hpid2 <<<"$(policy_of "$id")"
[ "$every2 $keep2" = "1 3" ] || fail "policy lost by the rollback: $every2 $keep2"
[ "$hpid2" -gt 0 ] 2>/dev/null && [ "$hpid2" != "$hpid" ] && grep -q space-snapd "/proc/$hpid2/cmdline" ||
	fail "no new helper after rollback: $hpid -> $hpid2"
on_exit "kill $hpid2"
gone "$hpid" || fail "the helper from before the rollback ($hpid) still runs"
sleep 3
wait_three_after "$id" 30 "$t1" >/dev/null

# space rm ends the helper and leaves no subvolume but the named checkpoint.
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
gone "$hpid2" || fail "space rm left the helper $hpid2 running"
expect_rc 0 "$SPACE" checkpoints --json "${S[@]}"
[ "$(py "[c['id'] for c in j]")" = "['$mine']" ] || fail "checkpoints after rm: $out"
expect_rc 0 "$SPACE" checkpoint rm "$mine" "${S[@]}"

# A template's default policy: shown by template ls, applied to sandboxes created from it, cleared by --off.
expect_rc 0 "$SPACE" template set-snapshots tiny --every 2 "${S[@]}"
expect_rc 0 "$SPACE" template ls --json "${S[@]}"
[ "$(py "[(t['snapshots']['every'], t['snapshots']['keep']) for t in j if t['name']=='tiny']")" = "[(2, 5)]" ] ||
	fail "template ls --json: $out"
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id2=$out
on_exit "'$SPACE' rm '$id2' --state '$STATE'"
read -r every keep hpid3 <<<"$(policy_of "$id2")"
[ "$every $keep" = "2 5" ] && [ "$hpid3" -gt 0 ] 2>/dev/null || fail "template default not applied: $every $keep $hpid3"
expect_rc 0 "$SPACE" template set-snapshots tiny --off "${S[@]}"
expect_rc 0 "$SPACE" template ls --json "${S[@]}"
[ "$(py "[t['snapshots'] for t in j if t['name']=='tiny']")" = "[None]" ] || fail "--off: $out"
expect_rc 0 "$SPACE" rm "$id2" "${S[@]}"
gone "$hpid3" || fail "space rm left the helper $hpid3 running"

# Nothing left behind.
left=$(leaks_of "$id" "$id2")
[ -z "$left" ] || fail "sandboxes left things behind: $left"
[ -z "$(ls -A "$STATE/pool/sandboxes")" ] || fail "sandbox subvolumes left: $(ls "$STATE/pool/sandboxes")"
[ -z "$(ls -A "$STATE/pool/checkpoints" 2>/dev/null)" ] || fail "checkpoint subvolumes left: $(ls "$STATE/pool/checkpoints")"
pgrep -f "space-snapd --state $STATE" && fail "space-snapd processes left"
echo "autosnap: ok"
