#!/bin/bash
# Runs one public-API test program (tests/api) against a fresh state directory on a loop btrfs pool with a
# busybox template "tiny" (jail isolation), then checks its completion line and that nothing of the
# sandboxes it reports ("sandbox sb-..." lines) is left on the host.
# usage: run.sh PROGRAM NAME [ARGS...]     (NAME: the program's completion line prefix)
. "$(dirname "$0")/../lib.sh"
PROG=${1:?program}
NAME=${2:?name}
shift 2
need_built "$PROG" "$NAME test program"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
make_state 2G
WORK=$(mktemp -d /tmp/space-api-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
# The programs' own checks, then whatever they left: sandboxes, subvolumes, uid slots, host leftovers.
SPACE_STATE_DIR=$STATE SPACE_API_TEMPLATE=tiny SPACE_API_ROOTFS=$WORK/tree "$PROG" "$@" >"$WORK/out" 2>"$WORK/err"
rc=$?
cat "$WORK/out"
cat "$WORK/err" >&2
summary=$(grep -E "^$NAME: [0-9]+ checks, [0-9]+ failed$" "$WORK/out" | tail -n 1)
[ -n "$summary" ] || fail "$NAME did not complete (exit $rc): no completion line"
checks=$(echo "$summary" | awk '{print $2}')
[ "$checks" -gt 0 ] || fail "$NAME ran no checks"
[ "$rc" = 0 ] || fail "$NAME: exit $rc ($summary)"
ids=$(grep -o '^sandbox sb-[a-z0-9]*' "$WORK/out" | cut -d' ' -f2 | sort -u)
expect_rc 0 "$SPACE" ls --json --state "$STATE"
[ "$out" = "[]" ] || fail "sandboxes left: $out"
left=$(ls -A "$STATE/pool/sandboxes" 2>/dev/null)
[ -z "$left" ] || fail "sandbox subvolumes left: $left"
left=$(grep -rlF "$STATE " /run/space-uids 2>/dev/null)
[ -z "$left" ] || fail "uid slots left: $left"
left=$(leaks_of $ids)
[ -z "$left" ] || fail "left on the host: $left"
echo "$NAME: ok ($(echo "$ids" | grep -c sb-) sandboxes, nothing left)"
