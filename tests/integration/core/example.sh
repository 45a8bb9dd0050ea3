#!/bin/bash
# examples/embed (public API only) runs against a real jail sandbox.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
EMBED=${1:?path of the embed example}
make_state 2G
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
SPACE_STATE_DIR=$STATE expect_rc 0 "$EMBED" tiny jail
echo "$out" | grep -q "exit code 5, stdout: hello from the sandbox" || fail "embed output: $out"
echo "$out" | grep -q "file round trip ok" || fail "embed file: $out"
echo "$err" | grep -q "\[stderr\] to-stderr" || fail "embed stderr: $err"
expect_rc 0 "$SPACE" ls --json --state "$STATE"
[ "$out" = "[]" ] || fail "embed left a sandbox: $out"
echo "example: ok"
