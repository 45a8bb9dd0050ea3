#!/bin/bash
# A template's start command (`space template set-start`): every sandbox made from the template runs it on
# its own, a create with --wait-port returns only once the port listens inside, the process outlives the
# CLI that created the sandbox, and a start command that ends before listening
# fails the create with the reason and leaves nothing behind.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup
checks=0
ok() { checks=$((checks + 1)); }

# A server that waits a second before it listens: the create must wait for it.
expect_rc 0 "$SPACE" template set-start tiny --wait-port 8000 "${S[@]}" -- sh -c \
	'sleep 1; mkdir -p /srv; echo "started as $(id -u)" >/srv/ok.txt; exec httpd -f -p 127.0.0.1:8000 -h /srv'
grep -q "ready once port 8000 listens" <<<"$out" || fail "set-start said: $out"; ok
expect_rc 0 "$SPACE" template ls --json "${S[@]}"
python3 - "$out" <<'PY' || fail "template ls --json: $out"
import json, sys
t = [t for t in json.loads(sys.argv[1]) if t["name"] == "tiny"][0]
assert t["start"]["wait_port"] == 8000, t
assert t["start"]["argv"][0] == "sh", t
PY
ok

t0=$(date +%s%N)
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
ID=$out
on_exit "'$SPACE' rm -f $ID ${S[*]}"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -ge 900 ] || fail "the create returned after $ms ms, before the start command could listen"; ok
# Listening the moment the create returned (the CLI that made it has exited).
expect_rc 0 "$SPACE" exec "$ID" "${S[@]}" -- wget -qO- http://127.0.0.1:8000/ok.txt
[ "$out" = "started as 0" ] || fail "the start command's server answered '$out'"; ok
sleep 1
expect_rc 0 "$SPACE" exec "$ID" "${S[@]}" -- sh -c 'ps -o pid,args | grep -c "[h]ttpd -f"'
[ "$out" = 1 ] || fail "one httpd expected running, ps counted '$out'"; ok

# Removed: new sandboxes start nothing.
expect_rc 0 "$SPACE" template set-start tiny --none "${S[@]}"
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
ID2=$out
on_exit "'$SPACE' rm -f $ID2 ${S[*]}"
expect_rc 1 "$SPACE" exec "$ID2" "${S[@]}" -- wget -qO- http://127.0.0.1:8000/ok.txt; ok
expect_rc 0 "$SPACE" rm "$ID2" "${S[@]}"

# A start command that ends without listening: the create fails with why, and leaves no sandbox.
expect_rc 0 "$SPACE" template set-start tiny --wait-port 8000 "${S[@]}" -- sh -c 'exit 3'
before=$("$SPACE" ls --json "${S[@]}" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_rc 1 "$SPACE" create --template tiny --isolation jail "${S[@]}"
grep -q "ended before listening on port 8000" <<<"$err" || fail "the failed create said: $err"; ok
after=$("$SPACE" ls --json "${S[@]}" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$before" = "$after" ] || fail "a failed create left a sandbox ($before before, $after after)"; ok
# A program that does not exist: refused at once with its name.
expect_rc 0 "$SPACE" template set-start tiny "${S[@]}" -- /no/such/server
expect_rc 1 "$SPACE" create --template tiny --isolation jail "${S[@]}"
grep -q "/no/such/server" <<<"$err" || fail "a missing program: $err"; ok
expect_rc 0 "$SPACE" template set-start tiny --none "${S[@]}"

# Usage errors.
expect_rc 2 "$SPACE" template set-start tiny "${S[@]}"; ok
expect_rc 2 "$SPACE" template set-start tiny --wait-port 0 "${S[@]}" -- true; ok
expect_rc 2 "$SPACE" template set-start tiny --none --wait-port 80 "${S[@]}"; ok
expect_rc 1 "$SPACE" template set-start no-such-template "${S[@]}" -- true; ok
echo "PASS: start-command ($checks checks)"
[ "$checks" = 13 ] || fail "ran $checks of 13 checks"
