#!/bin/bash
# Requests/s and latency of HTTP and HTTPS GETs from a jail sandbox through its egress gateway (with
# credential injection: HTTPS is terminated and re-originated), against the same client run directly on
# the host to the same loopback upstreams. Prints the two side by side; never fails on time.
. "$(dirname "$0")/../tests/lib.sh"
. "$(dirname "$0")/../tests/integration/net/egress_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
N=${EGRESS_REQUESTS:-300}
egress_setup
W=$STATE/bench
egress_upstreams "$W" api.test
export BENCH_SECRET=bench-secret
id=$("$SPACE" create --isolation jail --allow api.test --allow plain.test --secret T=env:BENCH_SECRET \
	--inject 'api.test:Authorization=Bearer ${T}' --inject 'plain.test:Authorization=Bearer ${T}' \
	--resolve "api.test=127.0.0.1:$SP" --resolve "plain.test=127.0.0.1:$HP" --ca-file "$W/ca.pem") ||
	fail "create sandbox"
on_exit "'$SPACE' rm $id"
"$SPACE" cp "$here/egress_client.py" "$id:/root/c.py" || fail "copy client"
run_host() { python3 "$here/egress_client.py" "$@"; }
run_sb() { "$SPACE" exec "$id" -- python3 /root/c.py "$@"; }
row() {
	python3 - "$1" "$2" "$3" <<'PY'
import json, sys
d, g = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print("%-34s %9.0f %9.0f %8.2f %8.2f %8.2f %8.2f %+8.2f" % (sys.argv[1], d["rps"], g["rps"], d["p50_ms"], g["p50_ms"],
      d["p99_ms"], g["p99_ms"], g["p50_ms"] - d["p50_ms"]))
PY
}
echo "egress gateway vs direct, $N sequential GETs, one connection each (python urllib; loopback upstreams)"
printf '%-34s %9s %9s %8s %8s %8s %8s %8s\n' "" "direct" "gateway" "p50 dir" "p50 gw" "p99 dir" "p99 gw" "added"
printf '%-34s %9s %9s %8s %8s %8s %8s %8s\n' "" "req/s" "req/s" "ms" "ms" "ms" "ms" "ms"
d=$(run_host "http://127.0.0.1:$HP/" "$N") && g=$(run_sb "http://plain.test/" "$N") || fail "http run"
row "HTTP, header injected" "$d" "$g"
d=$(run_host "https://127.0.0.1:$SP/" "$N" "$W/ca.pem") && g=$(run_sb "https://api.test/" "$N") || fail "https run"
row "HTTPS, terminated + re-originated" "$d" "$g"
