# Shared set-up of the `space serve` tests: a state dir with a loop pool and a busybox template "tiny",
# an API key, and a server on a free loopback port. Everything is removed at exit; only the server this
# script started is killed.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
command -v python3 >/dev/null || skip "python3 missing"
"$SPACE" serve --help >/dev/null 2>&1 || skip "space built without libmicrohttpd"
export SPACE_QUIET_JAIL=1

make_state "${SERVE_POOL_SIZE:-4G}"
WORK=$(mktemp -d /tmp/space-serve-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
# Sandboxes outlive the server: remove whatever is left in this (private) state directory.
on_exit "for id in \$('$SPACE' ls --json --state '$STATE' | python3 -c 'import json,sys; print(\" \".join(s[\"id\"] for s in json.load(sys.stdin)))'); do '$SPACE' rm \$id --state '$STATE'; done"
expect_rc 0 "$SPACE" apikey create --name test --state "$STATE"
export SERVE_KEY=$out
echo "$SERVE_KEY" | grep -Eq '^e2b_[0-9a-f]{64}$' || fail "API key format: $SERVE_KEY"

# start_server [ARGS...]: starts `space serve` on a free port; sets SERVE_PID and SERVE_URL.
start_server() {
	local port i
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$SPACE" serve --listen "127.0.0.1:$port" --state "$STATE" "$@" >"$WORK/access.log" 2>"$WORK/serve.err" &
	SERVE_PID=$!
	on_exit "kill_ours $SERVE_PID; wait $SERVE_PID"
	export SERVE_PID SERVE_URL="http://127.0.0.1:$port" SERVE_STATE="$STATE"
	for i in $(seq 100); do
		curl -sf "$SERVE_URL/v1/health" >/dev/null 2>&1 && return 0
		kill -0 "$SERVE_PID" 2>/dev/null || fail "space serve exited: $(cat "$WORK/serve.err")"
		sleep 0.1
	done
	fail "space serve did not answer on $SERVE_URL"
}

# stop_server: SIGTERM, then the server must exit 0 on its own (a clean shutdown, no leak reports).
stop_server() {
	local rc
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID"; rc=$?
	[ "$rc" = 0 ] || fail "space serve exited $rc after SIGTERM: $(tail -20 "$WORK/serve.err")"
	grep -q "stopping" "$WORK/serve.err" || fail "no shutdown message: $(cat "$WORK/serve.err")"
}
