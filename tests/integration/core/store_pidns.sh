#!/bin/bash
# The store's liveness from another pid namespace and the read-only listing (store/sandboxes.h,
# util/procstat.h): a `space ls` run where the sandbox's pid means nothing (a new pid namespace with its
# own /proc) neither shows it failed nor marks it so, even once it has died; from the sandbox's own
# namespace a dead one shows failed. (That listing writes nothing: tests/unit/store, test_core.)
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
command -v sqlite3 >/dev/null || skip "no sqlite3 shell to read the store with"
export SPACE_QUIET_JAIL=1

make_state 2G
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
S=(--state "$STATE")
checks=0
row() { sqlite3 "$STATE/space.db" "SELECT $1 FROM sandboxes WHERE id = '$id'"; }
failed_events() { sqlite3 "$STATE/space.db" "SELECT count(*) FROM events WHERE sandbox_id = '$id' AND kind = 'failed'"; }

expect_rc 0 "$SPACE" create --template tiny --isolation jail --json "${S[@]}"
id=$(echo "$out" | sed -n 's/.*"id":[[:space:]]*"\(sb-[a-z2-7]*\)".*/\1/p')
pid=$(echo "$out" | sed -n 's/.*"pid":[[:space:]]*\([0-9]*\).*/\1/p')
[ -n "$id" ] && [ -n "$pid" ] || fail "create --json: $out"
on_exit "'$SPACE' rm '$id' --state '$STATE' >/dev/null 2>&1"
# The pid was recorded with the namespace it was seen in.
[ "$(row pid_ns)" = "$(stat -L -c %i /proc/self/ns/pid)" ] || fail "pid_ns $(row pid_ns) is not this namespace's"
checks=$((checks + 1))

# From a new pid namespace with its own /proc, the pid does not exist: the listing must not judge it.
upd=$(row updated_ms)
out=$(unshare --pid --fork --mount-proc "$SPACE" ls --json "${S[@]}") || fail "ls from another pid namespace failed"
echo "$out" | grep -A12 "\"$id\"" | grep -q '"running"' || fail "another pid namespace's ls did not show it running: $out"
[ "$(row status)" = running ] && [ "$(row updated_ms)" = "$upd" ] && [ "$(failed_events)" = 0 ] ||
	fail "another pid namespace's ls wrote the row: $(row status) $(row reason)"
checks=$((checks + 1))

# Its PID 1 killed: still not judged from there; our own namespace's listing shows it failed.
kill -9 "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
out=$(unshare --pid --fork --mount-proc "$SPACE" ls --json "${S[@]}")
echo "$out" | grep -A12 "\"$id\"" | grep -q '"running"' || fail "another namespace judged a pid it cannot see: $out"
[ "$(row status)" = running ] && [ "$(failed_events)" = 0 ] || fail "another namespace marked it: $(row status)"
expect_rc 0 "$SPACE" ls "${S[@]}"
echo "$out" | grep "$id" | grep -q failed || fail "dead sandbox not shown failed: $out"
checks=$((checks + 2))
echo "store pid namespaces: ok ($checks checks)"
