#!/bin/bash
# `space serve`, native API, through HTTP as a client sees it: lifecycle, exec (buffered and streamed),
# files, auth, malformed and oversized requests, slow clients, concurrency, and sandboxes that outlive
# the server. Jail isolation (a weaker boundary than a VM), so it runs without KVM.
. "$(dirname "$0")/serve_lib.sh"
# What a leak would change: mounts and loop devices of this state directory (other tests on the machine
# may mount things meanwhile, so only ours are counted).
ours() { grep -c "$STATE" /proc/mounts; losetup -a | grep -c "$STATE"; }
before=$(ours)
start_server --max-upload 8M --connection-timeout 2 --request-timeout 5
python3 "$(dirname "$0")/serve_api.py" || fail "HTTP checks failed (server log: $(tail -5 "$WORK/serve.err"))"
# `space timeout ID SECONDS` from the CLI: extending keeps a sandbox past its old deadline, shortening
# ends it on time.
expect_rc 0 "$SPACE" create --template tiny --isolation jail --timeout 3 --state "$STATE"
id=$out
expect_rc 0 "$SPACE" timeout "$id" 30 --json --state "$STATE"
echo "$out" | grep -q '"expires_ms"' || fail "timeout --json: $out"
sleep 4
expect_rc 0 "$SPACE" exec "$id" --state "$STATE" -- echo alive
[ "$out" = alive ] || fail "extended sandbox: '$out'"
expect_rc 0 "$SPACE" timeout "$id" 1 --state "$STATE"
sleep 2.5
expect_rc 0 "$SPACE" ls --json --state "$STATE"
echo "$out" | grep -q "$id" && fail "shortened sandbox still listed: $out"
expect_rc 2 "$SPACE" timeout "$id" soon --state "$STATE"
expect_rc 1 "$SPACE" timeout sb-aaaaaaaaaaaaaaaa 5 --state "$STATE"
# No leaks: once the sandboxes are gone, the host has the mounts and loop devices it had.
for id in $("$SPACE" ls --json --state "$STATE" | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'); do
	"$SPACE" rm "$id" --state "$STATE" >/dev/null 2>&1 || fail "rm $id"
done
after=$(ours)
[ "$before" = "$after" ] || fail "mounts/loop devices leaked: before $before, after $after"
# The access log has one JSON line per request.
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$WORK/access.log" || fail "access log is not JSON lines"
echo "PASS"
