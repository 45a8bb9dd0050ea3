#!/bin/bash
# The store layer as a user sees it, jail mode (store/lock.h, store/sandboxes.h): checkpoint, rollback,
# fork and checkpoint rm wait while another process holds the sandbox's lock, then succeed; the periodic
# snapshot helper takes no snapshot while the lock is held and goes on after; warm-pool membership and the
# snapshot helper's pid are the rows' own columns, never keys of the metadata JSON.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
export SPACE_SNAPD_PATH=${SPACE_SNAPD_PATH:-${SPACE_BUILD_DIR:-}/src/snapd/space-snapd}
need_built "$SPACE_SNAPD_PATH" space-snapd SPACE_SNAPD_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
command -v sqlite3 >/dev/null || skip "no sqlite3 shell to read the store with"
command -v flock >/dev/null || skip "no flock(1) to hold a lock with"
export SPACE_QUIET_JAIL=1

make_state 2G
S=(--state "$STATE")
expect_rc 0 "$SPACE" init --isolation jail "${S[@]}"
# Lock files are made and removed at every create and destroy: they live on the pool, not the host's file system.
[ "$(readlink "$STATE/locks")" = "$STATE/pool/locks" ] && [ -d "$STATE/pool/locks" ] ||
	fail "init: $STATE/locks is not a link to the pool's locks/ ($(ls -ld "$STATE/locks" 2>&1))"
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" "${S[@]}"
on_exit 'for x in $(ls "$STATE/pool/sandboxes" 2>/dev/null); do "$SPACE" rm "$x" --state "$STATE"; done'
ms() { date +%s%3N; }
sql() { sqlite3 "$STATE/space.db" "$1"; }
checks=1
holder=

# hold ID SECONDS: another process holds sandbox ID's lock for SECONDS; returns once it holds it.
hold() {
	rm -f "$WORK/held"
	mkdir -p "$STATE/locks"
	flock -x "$STATE/locks/$1.lock" sh -c "touch '$WORK/held'; sleep $2" &
	holder=$!
	on_exit "kill_ours $holder 2>/dev/null"
	while [ ! -e "$WORK/held" ]; do sleep 0.02; done
}
# waits_for_lock ID CMD...: CMD, run while ID's lock is held for 2 s, succeeds only after (>= 1.5 s).
waits_for_lock() {
	local id=$1 t0 dt
	shift
	hold "$id" 2
	t0=$(ms)
	expect_rc 0 "$@"
	dt=$(($(ms) - t0))
	wait "$holder"
	[ "$dt" -ge 1500 ] || fail "'$*' did not wait for the lock of $id held elsewhere (took $dt ms)"
	checks=$((checks + 1))
}

expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
on_exit "'$SPACE' rm '$id' --state '$STATE'"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo one >/root/f'
waits_for_lock "$id" "$SPACE" checkpoint "$id" --name first "${S[@]}"
cp1=$out
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo two >/root/f'
waits_for_lock "$id" "$SPACE" rollback "$id" "$cp1" "${S[@]}"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- cat /root/f
[ "$out" = one ] || fail "rollback after the lock: /root/f is '$out'"
waits_for_lock "$id" "$SPACE" fork "$cp1" --count 1 "${S[@]}"
fork=$(echo "$out" | grep -o 'sb-[a-z2-7]*' | head -1)
[ -n "$fork" ] || fail "fork printed no id: $out"
on_exit "'$SPACE' rm '$fork' --state '$STATE'"
expect_rc 0 "$SPACE" checkpoint "$id" --name second "${S[@]}"
cp2=$out
waits_for_lock "$id" "$SPACE" checkpoint rm "$cp2" "${S[@]}"
[ "$(sql "SELECT count(*) FROM checkpoints WHERE id = '$cp2'")" = 0 ] || fail "checkpoint rm left its row"
expect_rc 0 "$SPACE" rm "$fork" "${S[@]}"
# A checkpoint outlives its sandbox: removing it takes the destroyed sandbox's lock and leaves no lock file.
expect_rc 0 "$SPACE" checkpoint "$id" --name third "${S[@]}"
cp3=$out
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
expect_rc 0 "$SPACE" checkpoint rm "$cp3" "${S[@]}"
[ ! -e "$STATE/locks/$id.lock" ] || fail "lock file of destroyed $id left by checkpoint rm"
expect_rc 0 "$SPACE" checkpoint rm "$cp1" "${S[@]}"
checks=$((checks + 2))

# Periodic snapshots: the helper in the row's columns, the policy (only) in the JSON.
expect_rc 0 "$SPACE" create --template tiny --isolation jail --snapshot-every 1 --snapshot-keep 50 "${S[@]}"
auto=$out
on_exit "'$SPACE' rm '$auto' --state '$STATE'"
hpid=$(sql "SELECT helper_pid FROM sandboxes WHERE id = '$auto'")
[ "$hpid" -gt 0 ] 2>/dev/null && grep -q space-snapd "/proc/$hpid/cmdline" || fail "helper_pid column: '$hpid'"
on_exit "kill $hpid 2>/dev/null"
[ "$(sql "SELECT helper_pid_start > 0 AND helper_pid_ns > 0 FROM sandboxes WHERE id = '$auto'")" = 1 ] ||
	fail "helper's start time or pid namespace not recorded"
[ "$(sql "SELECT json_type(metadata, '\$.snapshots.pid') IS NULL AND json_type(metadata, '\$.snapshots.pid_start')"\
" IS NULL AND json_extract(metadata, '\$.snapshots.every') = 1 FROM sandboxes WHERE id = '$auto'")" = 1 ] ||
	fail "metadata: $(sql "SELECT metadata FROM sandboxes WHERE id = '$auto'")"
checks=$((checks + 2))
# While its lock is held (4 s) no automatic checkpoint is taken; after, they go on.
for _ in $(seq 50); do
	[ "$(sql "SELECT count(*) FROM checkpoints WHERE sandbox_id = '$auto'")" -gt 0 ] && break
	sleep 0.1
done
hold "$auto" 4
h0=$(ms)
wait "$holder"
h1=$(ms)
n=$(sql "SELECT count(*) FROM checkpoints WHERE sandbox_id = '$auto' AND created_ms > $h0 AND created_ms < $h1")
[ "$n" = 0 ] || fail "$n automatic checkpoint(s) taken while the sandbox's lock was held"
for _ in $(seq 100); do
	[ "$(sql "SELECT count(*) FROM checkpoints WHERE sandbox_id = '$auto' AND created_ms >= $h1")" -gt 0 ] && break
	sleep 0.1
done
[ "$(sql "SELECT count(*) FROM checkpoints WHERE sandbox_id = '$auto' AND created_ms >= $h1")" -gt 0 ] ||
	fail "no automatic checkpoint after the lock was released"
checks=$((checks + 2))
expect_rc 0 "$SPACE" rm "$auto" "${S[@]}"

# The warm pool: membership is the pool column; a hand-out clears it.
expect_rc 0 "$SPACE" template set-pool tiny 1 "${S[@]}"
expect_rc 0 "$SPACE" pool fill "${S[@]}"
pooled=$(sql "SELECT id FROM sandboxes WHERE pool = 'tiny' AND status = 'paused'")
[ -n "$pooled" ] || fail "no row with pool = 'tiny' after a fill: $(sql "SELECT id, status, pool FROM sandboxes")"
[ "$(sql "SELECT count(*) FROM sandboxes WHERE json_type(metadata, '\$.pool') IS NOT NULL")" = 0 ] ||
	fail "a pool key in some row's metadata JSON"
expect_rc 0 "$SPACE" create --template tiny "${S[@]}"
taken=$out
on_exit "'$SPACE' rm '$taken' --state '$STATE'"
[ "$taken" = "$pooled" ] || fail "create did not take the pooled $pooled: $taken"
[ "$(sql "SELECT pool IS NULL AND status = 'running' FROM sandboxes WHERE id = '$taken'")" = 1 ] ||
	fail "handed-out row: $(sql "SELECT status, pool FROM sandboxes WHERE id = '$taken'")"
expect_rc 0 "$SPACE" template set-pool tiny 0 "${S[@]}"
checks=$((checks + 3))
echo "store locks and columns: ok ($checks checks)"
