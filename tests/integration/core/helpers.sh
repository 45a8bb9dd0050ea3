#!/bin/bash
# A sandbox's helpers live in cgroups that stop with it. A jail sandbox with an egress policy and a snapshot
# policy, made by a `space run` that is then killed (-9): while it runs, each of its helpers (the log writer
# space-logcap, the gateway space-gateway, the snapshot helper space-snapd) is a member of the sandbox's
# cgroup or of its helpers' cgroup (space-helpers/<id>, a sibling the pause does not freeze); after the kill
# and a `space rm`, none of those processes exists and neither cgroup directory is left.
. "$(dirname "$0")/../../lib.sh"
export SPACE_GATEWAY_PATH=${SPACE_GATEWAY_PATH:-$SPACE_BUILD_DIR/src/net/space-gateway}
need_built "$SPACE_GATEWAY_PATH" space-gateway SPACE_GATEWAY_PATH
export SPACE_SNAPD_PATH=${SPACE_SNAPD_PATH:-$SPACE_BUILD_DIR/src/snapd/space-snapd}
need_built "$SPACE_SNAPD_PATH" space-snapd SPACE_SNAPD_PATH
jail_test_setup
checks=0
ok() { checks=$((checks + 1)); echo "$*: ok"; }
# wait_for CMD...: up to 60 s for CMD to succeed (a loaded CI host).
wait_for() { local i; for i in $(seq 600); do "$@" && return 0; sleep 0.1; done; return 1; }
live_ids() { "$SPACE" ls --json "${S[@]}" | grep -o '"id":[[:space:]]*"sb-[a-z0-9]*"' | cut -d'"' -f4; }
# The pids of processes whose command line holds "--sandbox ID" (gateway, snapshot helper), and of those
# holding the sandbox's log open (the log writer): found without asking the library where they are.
helper_pids() {
	local p
	for p in $(pgrep -f -- "--sandbox $1( |\$)"); do echo "$p"; done
	for p in $(ls /proc | grep -E '^[0-9]+$'); do
		ls -l "/proc/$p/fd" 2>/dev/null | grep -q -- "/run/$1/sandbox.log\$" && echo "$p"
	done | sort -u
}
# in_sandbox_cgroups PID ID: a line of /proc/PID/cgroup names space/ID or space-helpers/ID (v1), or
# space.slice/ID or space-helpers.slice/ID (v2).
in_sandbox_cgroups() {
	grep -qE ":/(space|space-helpers|space\.slice|space-helpers\.slice)/$2(/|\$)" "/proc/$1/cgroup" 2>/dev/null
}

n=$((300000 + RANDOM))
"$SPACE" run --template tiny --isolation jail --allow api.test --snapshot-every 1 "${S[@]}" -- sleep "$n" \
	>"$WORK/run.out" 2>&1 &
run=$!
on_exit "kill_ours -9 $run 2>/dev/null"
wait_for pgrep -f "^sleep $n\$" >/dev/null || { cat "$WORK/run.out"; fail "space run never started 'sleep $n'"; }
id=$(live_ids)
[ "$(echo "$id" | wc -w)" = 1 ] || fail "wanted one sandbox, got: $id"
on_exit "'$SPACE' rm -f '$id' ${S[*]} >/dev/null 2>&1"
# The snapshot helper is started last: wait for it.
wait_for eval "pgrep -f -- 'space-snapd.*--sandbox $id' >/dev/null" || fail "no space-snapd for $id"
pids=$(helper_pids "$id")
for name in space-gateway space-snapd space-logcap; do
	found=0
	for p in $pids; do grep -q "$name" "/proc/$p/cmdline" 2>/dev/null && found=1; done
	[ $found = 1 ] || fail "no $name among the helpers of $id: $(for p in $pids; do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done)"
done
ok "gateway, snapshot helper and log writer found ($(echo $pids))"
for p in $pids; do
	in_sandbox_cgroups "$p" "$id" ||
		fail "helper $p ($(tr '\0' ' ' <"/proc/$p/cmdline")) is in no cgroup of $id: $(cat "/proc/$p/cgroup")"
done
ok "every helper is in the sandbox's cgroups"

kill -9 "$run"
wait "$run" 2>/dev/null
"$SPACE" rm "$id" "${S[@]}" >/dev/null 2>&1 # the reap may have destroyed it already
wait_for eval "! $SPACE ls --json ${S[*]} | grep -q $id" || fail "$id is still listed after space rm"
for p in $pids; do
	wait_for eval "! kill -0 $p 2>/dev/null" || fail "helper $p of $id still runs after space rm"
done
ok "no helper outlives space rm"
left=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "$id" 2>/dev/null)
[ -z "$left" ] || fail "cgroup directories of $id left: $left"
left=$(leaks_of "$id")
[ -z "$left" ] || fail "the sandbox left things behind: $left"
ok "no cgroup directory left"
echo "helpers: $checks checks passed"
