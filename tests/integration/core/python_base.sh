#!/bin/bash
# The main job on the stock base template: space run -- python3 -c 'print(6*7)' prints 42.
# Builds the base template with mmdebstrap (cached in $SPACE_CACHE, default /var/cache/space).
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
command -v mmdebstrap >/dev/null || skip "mmdebstrap missing"
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
make_state 4G
export SPACE_STATE_DIR=$STATE
if ! SPACE="$SPACE" "$SPACE_SOURCE_DIR/scripts/make-templates.sh" base >"$STATE/make-templates.log" 2>&1; then
	if grep -qiE 'could not resolve|failed to fetch|unable to connect|network is unreachable' "$STATE/make-templates.log"; then
		skip "Debian's archive is not reachable to build the base template"
	fi
	cat "$STATE/make-templates.log" >&2
	fail "building the base template failed"
fi
expect_rc 0 "$SPACE" run --isolation jail -- python3 -c 'print(6*7)'
[ "$out" = 42 ] || fail "python3 printed '$out'"
expect_rc 3 "$SPACE" run --isolation jail -- python3 -c 'import sys; print("e", file=sys.stderr); sys.exit(3)'
[ "$err" != "${err%e}" ] || fail "stderr: $err"
expect_rc 0 "$SPACE" run --isolation jail -- sh -c 'cat /etc/os-release | head -1; id -u'
echo "$out" | grep -q Debian || fail "not the Debian template: $out"
echo "python on base: ok"
