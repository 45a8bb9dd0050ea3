#!/bin/bash
# `space serve` routes requests to a port of a sandbox through its agent (issue 18): by E2b-Sandbox-Id and
# E2b-Sandbox-Port headers, and by Host PORT-ID.DOMAIN (--domain). The sandbox's access token is required;
# a port nobody listens on is 502 saying so; an Upgrade's 101 and the bytes after it pass both ways; the
# host's own loopback is never reached; a paused sandbox is 409, a removed one 404.
. "$(dirname "$0")/e2b_lib.sh"
checks=0
ok() { checks=$((checks + 1)); }
start_server --domain sandbox.test

body=$(curl -sS -X POST -H "X-API-Key: $SERVE_KEY" -H 'Content-Type: application/json' \
	-d '{"templateID":"tiny"}' "$SERVE_URL/sandboxes") || fail "create: $(e2b_log)"
ID=$(echo "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $body"
TOKEN=$(echo "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["envdAccessToken"])')
expect_rc 0 "$SPACE" exec "$ID" --state "$STATE" -- sh -c "$PORT_SERVERS"

# req OUT_FILE CURL_ARGS...: prints the status.
req() { local o=$1; shift; curl -sS --max-time 20 -o "$o" -w '%{http_code}' "$@"; }
H=(-H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOKEN")

st=$(req "$WORK/b" "${H[@]}" -H "E2b-Sandbox-Port: 8000" "$SERVE_URL/hello.txt")
[ "$st" = 200 ] && [ "$(cat "$WORK/b")" = "hello from the sandbox" ] || fail "header route: $st $(cat "$WORK/b") $(e2b_log)"; ok
st=$(req "$WORK/b" -H "Host: 8000-$ID.sandbox.test" -H "X-Access-Token: $TOKEN" "$SERVE_URL/hello.txt")
[ "$st" = 200 ] && [ "$(cat "$WORK/b")" = "hello from the sandbox" ] || fail "Host route: $st $(cat "$WORK/b")"; ok
st=$(req "$WORK/b" -H "Host: 8000-$ID.sandbox.test:${SERVE_URL##*:}" -H "X-Access-Token: $TOKEN" "$SERVE_URL/nope")
[ "$st" = 404 ] || fail "the sandbox server's own 404: $st"; ok
# Tokens: none is 401, a wrong one 403; neither reaches the sandbox.
st=$(req "$WORK/b" -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8000" "$SERVE_URL/hello.txt")
[ "$st" = 401 ] || fail "no token: $st"; ok
st=$(req "$WORK/b" -H "Host: 8000-$ID.sandbox.test" -H "X-Access-Token: sbt_0000" "$SERVE_URL/hello.txt")
[ "$st" = 403 ] || fail "wrong token: $st"; ok
# envd's port is the server's own: not proxied.
st=$(req "$WORK/b" "${H[@]}" -H "E2b-Sandbox-Port: 49983" "$SERVE_URL/health")
[ "$st" = 204 ] || fail "envd port: $st $(cat "$WORK/b")"; ok
# Nobody listens: 502 saying so.
st=$(req "$WORK/b" "${H[@]}" -H "E2b-Sandbox-Port: 8001" "$SERVE_URL/")
[ "$st" = 502 ] && grep -q "port 8001 of sandbox $ID is not listening" "$WORK/b" || fail "not listening: $st $(cat "$WORK/b")"; ok

# Upgrade: 101, then bytes both ways on the same connection.
got=$(upgrade_echo "${SERVE_URL#http://}" "9000-$ID.sandbox.test" "$TOKEN") || fail "upgrade: $(e2b_log)"
[ "$got" = "HTTP/1.1 101 Switching Protocols | ping over the upgrade" ] || fail "upgrade: '$got' $(e2b_log)"; ok

# The host's loopback: a listener here is not the sandbox's port, and sees no connection.
host_listener "$WORK"
st=$(req "$WORK/b" "${H[@]}" -H "E2b-Sandbox-Port: $HP" "$SERVE_URL/")
[ "$st" = 502 ] && [ ! -e "$WORK/reached" ] || fail "host loopback port $HP: $st $(cat "$WORK/b")"; ok

# allowPublicTraffic: that sandbox's ports need no token (ours stay private by default).
st=$(req "$WORK/b" -X POST -H "X-API-Key: $SERVE_KEY" -d '{"templateID":"tiny","allowPublicTraffic":"yes"}' "$SERVE_URL/sandboxes")
[ "$st" = 400 ] || fail "allowPublicTraffic not a boolean: $st"; ok
body=$(curl -sS -X POST -H "X-API-Key: $SERVE_KEY" -H 'Content-Type: application/json' \
	-d '{"templateID":"tiny","network":{"allowPublicTraffic":true}}' "$SERVE_URL/sandboxes") || fail "create public"
PUB=$(echo "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create public: $body"
expect_rc 0 "$SPACE" exec "$PUB" --state "$STATE" -- sh -c 'mkdir -p /srv && echo public >/srv/p.txt && httpd -p 127.0.0.1:8000 -h /srv'
st=$(req "$WORK/b" -H "Host: 8000-$PUB.sandbox.test" "$SERVE_URL/p.txt")
[ "$st" = 200 ] && [ "$(cat "$WORK/b")" = public ] || fail "public sandbox without a token: $st $(cat "$WORK/b")"; ok
# ... and the private one's token does not open another private sandbox: ours needs its own.
st=$(req "$WORK/b" -H "Host: 8000-$ID.sandbox.test" -H "X-Access-Token: $(echo "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["envdAccessToken"])')" "$SERVE_URL/hello.txt")
[ "$st" = 403 ] || fail "another sandbox's token: $st"; ok
expect_rc 0 curl -sSf -X DELETE -H "X-API-Key: $SERVE_KEY" "$SERVE_URL/sandboxes/$PUB"

# Paused: 409; removed: 404.
expect_rc 0 curl -sSf -X POST -H "X-API-Key: $SERVE_KEY" "$SERVE_URL/sandboxes/$ID/pause"
st=$(req "$WORK/b" "${H[@]}" -H "E2b-Sandbox-Port: 8000" "$SERVE_URL/hello.txt")
[ "$st" = 409 ] && grep -q paused "$WORK/b" || fail "paused: $st $(cat "$WORK/b")"; ok
expect_rc 0 curl -sSf -X DELETE -H "X-API-Key: $SERVE_KEY" "$SERVE_URL/sandboxes/$ID"
st=$(req "$WORK/b" "${H[@]}" -H "E2b-Sandbox-Port: 8000" "$SERVE_URL/hello.txt")
[ "$st" = 404 ] || fail "removed: $st $(cat "$WORK/b")"; ok
e2b_stop
echo "PASS: serve-ports ($checks checks)"
