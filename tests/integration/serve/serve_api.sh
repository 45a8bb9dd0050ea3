#!/bin/bash
# `space serve`, native API, through HTTP as a client sees it: lifecycle, exec (buffered and streamed),
# files, auth, malformed and oversized requests, slow clients, concurrency, and sandboxes that outlive
# the server. Jail isolation (a weaker boundary than a VM), so it runs without KVM.
. "$(dirname "$0")/serve_lib.sh"
# What a leak would change: mounts and loop devices of this state directory (other tests on the machine
# may mount things meanwhile, so only ours are counted).
ours() { grep -c "$STATE" /proc/mounts; losetup -a | grep -c "$STATE"; }
before=$(ours)
start_server --max-upload 8M --connection-timeout 2
python3 "$(dirname "$0")/serve_api.py" || fail "HTTP checks failed (server log: $(tail -5 "$WORK/serve.err"))"
# No leaks: once the sandboxes are gone, the host has the mounts and loop devices it had.
for id in $("$SPACE" ls --json --state "$STATE" | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'); do
	"$SPACE" rm "$id" --state "$STATE" >/dev/null 2>&1 || fail "rm $id"
done
after=$(ours)
[ "$before" = "$after" ] || fail "mounts/loop devices leaked: before $before, after $after"
# The access log has one JSON line per request.
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$WORK/access.log" || fail "access log is not JSON lines"
echo "PASS"
