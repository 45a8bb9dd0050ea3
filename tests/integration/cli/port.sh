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
expect_rc 0 "$SPACE" exec "$ID" "${S[@]}" -- sh -c '
	mkdir -p /srv && echo "hello from the sandbox" >/srv/hello.txt
	printf "%s\n" "#!/bin/sh" "while read -r l && [ \"\$l\" != \"\$(printf \"\\r\")\" ]; do :; done" \
		"printf \"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n\"" \
		"exec cat" >/up.sh && chmod +x /up.sh
	httpd -p 127.0.0.1:8000 -h /srv
	setsid nc -ll -p 9000 -e /up.sh </dev/null >/dev/null 2>&1 &
	sleep 0.3'

# start_port PORT: `space port ID PORT` on an ephemeral local port; sets FWD (host:port) and FWD_PID.
start_port() {
	"$SPACE" port "$ID" "$1" --listen 127.0.0.1:0 --json "${S[@]}" >"$WORK/port.out" 2>"$WORK/port.err" &
	FWD_PID=$!
	on_exit "kill $FWD_PID"
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
got=$(python3 - "$FWD" <<'PY'
import socket, sys
h, p = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((h, int(p)), timeout=10)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, rest = buf.split(b"\r\n\r\n", 1)
s.sendall(b"ping over the upgrade\n")
while b"\n" not in rest:
    rest += s.recv(4096)
print(head.split(b"\r\n")[0].decode(), "|", rest.decode().strip())
PY
) || fail "upgrade exchange: $(cat "$WORK/port.err")"
[ "$got" = "HTTP/1.1 101 Switching Protocols | ping over the upgrade" ] || fail "upgrade: '$got'"; ok
kill "$FWD_PID"; wait "$FWD_PID" 2>/dev/null

# Nothing listens: the client's connection is closed, the reason is on stderr.
start_port 8001
curl -sS --max-time 10 "http://$FWD/" >/dev/null 2>&1 && fail "a port nobody listens on answered"
sleep 0.2
grep -q "port 8001 is not listening" "$WORK/port.err" || fail "no reason given: $(cat "$WORK/port.err")"; ok
kill "$FWD_PID"; wait "$FWD_PID" 2>/dev/null

# The host's loopback is not the sandbox's: a host listener stays out of reach, and sees no connection.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
open(sys.argv[1], "w").write("reached")' "$WORK/reached" >"$WORK/host.port" &
HOST_PID=$!
on_exit "kill $HOST_PID"
for i in $(seq 50); do [ -s "$WORK/host.port" ] && break; sleep 0.1; done
HP=$(cat "$WORK/host.port")
[ -n "$HP" ] || fail "host listener"
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
