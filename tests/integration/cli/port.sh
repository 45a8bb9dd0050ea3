#!/bin/bash
# `space port` (issue 18): a server inside a jail reached from the host through the sandbox's agent: a
# busybox httpd, an Upgrade exchange whose 101 and later bytes pass both ways, a port nobody listens on
# named in the error, and a listener on the host's own loopback that the forward cannot reach.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup
command -v curl >/dev/null || skip "curl missing"
checks=0
ok() { checks=$((checks + 1)); }

expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
ID=$out
on_exit "'$SPACE' rm $ID ${S[*]}"
# A file server, and an "upgrade" server: answers 101 to the request head, then echoes every line.
expect_rc 0 "$SPACE" exec "$ID" "${S[@]}" -- sh -c "$PORT_SERVERS"

# start_port PORT: `space port ID PORT` on an ephemeral local port; sets FWD (host:port) and FWD_PID.
start_port() {
	"$SPACE" port "$ID" "$1" --listen 127.0.0.1:0 --json "${S[@]}" >"$WORK/port.out" 2>"$WORK/port.err" &
	FWD_PID=$!
	on_exit "kill_ours $FWD_PID"
	local i
	for i in $(seq 50); do
		FWD=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["listen"])' <"$WORK/port.out" 2>/dev/null) && return 0
		kill -0 "$FWD_PID" 2>/dev/null || fail "space port exited: $(cat "$WORK/port.err")"
		sleep 0.1
	done
	fail "space port printed no address: $(cat "$WORK/port.out" "$WORK/port.err")"
}

start_port 8000
grep -q '"port": 8000' "$WORK/port.out" || fail "--json: $(cat "$WORK/port.out")"; ok
got=$(curl -sS --max-time 10 "http://$FWD/hello.txt") || fail "curl through space port: $(cat "$WORK/port.err")"
[ "$got" = "hello from the sandbox" ] || fail "through space port: '$got'"; ok
# Several connections, each its own through the agent.
for i in 1 2 3; do
	[ "$(curl -sS --max-time 10 "http://$FWD/hello.txt")" = "hello from the sandbox" ] || fail "connection $i"
done; ok
kill "$FWD_PID"; wait "$FWD_PID" 2>/dev/null

# Upgrade: the 101 comes back, then bytes go both ways on the same connection.
start_port 9000
got=$(upgrade_echo "$FWD") || fail "upgrade exchange: $(cat "$WORK/port.err")"
[ "$got" = "HTTP/1.1 101 Switching Protocols | ping over the upgrade" ] || fail "upgrade: '$got'"; ok
kill "$FWD_PID"; wait "$FWD_PID" 2>/dev/null

# Nothing listens: the client's connection is closed, the reason is on stderr.
start_port 8001
curl -sS --max-time 10 "http://$FWD/" >/dev/null 2>&1 && fail "a port nobody listens on answered"
sleep 0.2
grep -q "port 8001 is not listening" "$WORK/port.err" || fail "no reason given: $(cat "$WORK/port.err")"; ok
kill "$FWD_PID"; wait "$FWD_PID" 2>/dev/null

# The host's loopback is not the sandbox's: a host listener stays out of reach, and sees no connection.
host_listener "$WORK"
start_port "$HP"
curl -sS --max-time 10 "http://$FWD/" >/dev/null 2>&1 && fail "the host's loopback port $HP answered through the sandbox"
sleep 0.3
[ ! -e "$WORK/reached" ] || fail "the forward reached the host's 127.0.0.1:$HP"
grep -q "port $HP is not listening" "$WORK/port.err" || fail "host port: $(cat "$WORK/port.err")"; ok
kill "$FWD_PID"; wait "$FWD_PID" 2>/dev/null

# Usage errors.
expect_rc 2 "$SPACE" port "$ID" 0 "${S[@]}"; ok
expect_rc 2 "$SPACE" port "$ID" 80 --listen nonsense "${S[@]}"; ok
expect_rc 1 "$SPACE" port sb-doesnotexist 80 "${S[@]}"; ok
echo "PASS: port-forward ($checks checks)"
