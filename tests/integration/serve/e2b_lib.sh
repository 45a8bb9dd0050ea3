# Shared set-up of the E2B plane tests, on top of serve_lib.sh: the state directory's default isolation
# becomes jail and its busybox tree is also imported as "base" (the E2B SDK's default template).
. "$(dirname "$0")/serve_lib.sh"
command -v curl >/dev/null || skip "curl missing"
expect_rc 0 "$SPACE" init --isolation jail --state "$STATE"
expect_rc 0 "$SPACE" template import base --rootfs "$WORK/tree" --state "$STATE"

# e2b_log: the server's last words, for failure messages.
e2b_log() { echo "server log: $(tail -5 "$WORK/serve.err"); access log: $(tail -3 "$WORK/access.log")"; }

# e2b_stop: the server stops cleanly (exit 0: no leak reports in sanitizer builds) and logged no
# sanitizer report while it ran.
e2b_stop() {
	stop_server
	if grep -E "AddressSanitizer|LeakSanitizer|runtime error" "$WORK/serve.err"; then
		fail "sanitizer report in the server log"
	fi
}

# run_sdk NAME [TIMEOUT_S]: runs NAME.mjs (beside this script, else the shipped examples/NAME.mjs) next to
# $SDK's node_modules against the server; its output goes to $WORK/NAME.out and is shown, and the test
# fails with its last lines when it fails.
run_sdk() {
	local name=$1 script="$SDK/space-$1-$$.mjs" src="$(dirname "$0")/$1.mjs"
	[ -f "$src" ] || src="${SPACE_SOURCE_DIR:?}/examples/$name.mjs"
	cp "$src" "$script"
	on_exit "rm -f '$script'"
	E2B_API_KEY=$SERVE_KEY E2B_API_URL=$SERVE_URL E2B_SANDBOX_URL=$SERVE_URL timeout "${2:-300}" node "$script" \
		>"$WORK/$name.out" 2>&1 || fail "the E2B SDK scenario $name failed: $(tail -30 "$WORK/$name.out") ($(e2b_log))"
	cat "$WORK/$name.out"
}
