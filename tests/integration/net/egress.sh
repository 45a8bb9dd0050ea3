#!/bin/bash
# The egress gateway with real clients in jail sandboxes against loopback upstreams (HTTP and HTTPS with a
# test CA): allow, deny, credential injection, the secret never in the sandbox, no-policy deny, the known
# bypasses (DNS spoofing, raw IPs, SNI/Host mismatch, spoofed sources, UDP, a guest Authorization header),
# a bandwidth limit, and nothing left behind.
. "$(dirname "$0")/../../lib.sh"
. "$(dirname "$0")/egress_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
egress_setup
W=$STATE/egress
egress_upstreams "$W" api.test open.test

SECRET=sk-egress-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
export EGRESS_TEST_SECRET=$SECRET
ids=()
created() { ids+=("$1"); on_exit "'$SPACE' rm '$1'"; }

expect_rc 0 "$SPACE" create --isolation jail --allow api.test --allow plain.test --allow open.test \
	--secret TOKEN=env:EGRESS_TEST_SECRET \
	--inject 'api.test:Authorization=Bearer ${TOKEN}' --inject 'plain.test:Authorization=Bearer ${TOKEN}' \
	--resolve "api.test=127.0.0.1:$SP" --resolve "open.test=127.0.0.1:$SP" --resolve "plain.test=127.0.0.1:$HP" \
	--ca-file "$W/ca.pem"
A=$out
created "$A"
expect_rc 0 "$SPACE" cp "$here/guest.py" "$A:/root/guest.py"
expect_rc 0 "$SPACE" cp "$W/ca.pem" "$A:/root/testca.pem"
g() { "$SPACE" exec "$1" -- python3 /root/guest.py "${@:2}"; }
events() { "$SPACE" events "$1"; }
has_event() { events "$1" | grep -F -- "$2" >/dev/null || fail "no event '$2' for $1: $(events "$1")"; }

# Allowed, with injection: HTTPS (terminated and re-originated) and plain HTTP.
expect_rc 0 g "$A" get https://api.test/tls
expect_rc 0 g "$A" get http://plain.test/plain
grep '"/tls"' "$W/requests.log" | grep -qF "\"Bearer $SECRET\"" || fail "HTTPS upstream did not get the secret: $(cat "$W/requests.log")"
grep '"/plain"' "$W/requests.log" | grep -qF "\"Bearer $SECRET\"" || fail "HTTP upstream did not get the secret"
echo "allowed host with injection: ok"

# A guest-supplied Authorization header is replaced, not passed on.
expect_rc 0 g "$A" get https://api.test/guest-auth "Authorization=Bearer guest-made-up"
line=$(grep '"/guest-auth"' "$W/requests.log")
echo "$line" | grep -qF "[\"Bearer $SECRET\"]" || fail "upstream saw: $line"
has_event "$A" "the sandbox's own Authorization header removed"
echo "guest Authorization stripped: ok"

# TLS passthrough for an allowed host without a credential rule: the guest talks to the upstream itself.
expect_rc 0 g "$A" sni open.test open.test /root/testca.pem
grep '"open.test"' "$W/requests.log" | grep -q '"authorization": \[\]' || fail "passthrough request: $(cat "$W/requests.log")"
echo "TLS passthrough: ok"

# Denied names fail fast, at DNS, with a clear error.
expect_rc 1 g "$A" get https://evil.test/
echo "$out" | grep -q "Name or service not known" || fail "denied host: $out"
ms=$(echo "$out" | sed -n 's/.*(\([0-9]*\) ms)$/\1/p')
[ -n "$ms" ] && [ "$ms" -lt 2000 ] || fail "denied host did not fail fast: $out"
has_event "$A" "dns evil.test: not in the allowlist"
echo "denied host fails fast ($ms ms): ok"

# Bypass: DNS spoofing. Another resolver, a raw IP, and /etc/hosts entries (a foreign address, and the
# synthetic address of an allowed name used under another name).
expect_rc 1 g "$A" udp 8.8.8.8 53
has_event "$A" "udp 8.8.8.8:53"
expect_rc 1 g "$A" tcp 203.0.113.5 443
has_event "$A" "tcp 203.0.113.5:443: not an address the gateway's DNS gave out"
api_ip=$("$SPACE" exec "$A" -- python3 -c 'import socket; print(socket.gethostbyname("api.test"))')
expect_rc 0 "$SPACE" exec "$A" -- sh -c "echo '198.51.100.7 evil1.test' >>/etc/hosts; echo '$api_ip evil2.test' >>/etc/hosts"
expect_rc 1 g "$A" get http://evil1.test/
has_event "$A" "tcp 198.51.100.7:80: not an address the gateway's DNS gave out"
expect_rc 1 g "$A" get https://evil2.test/ 
expect_rc 1 g "$A" get http://evil2.test/
has_event "$A" "http Host 'evil2.test' is not api.test"
echo "DNS spoofing refused: ok"

# Bypass: domain fronting, SNI or Host naming another host than the address stands for.
expect_rc 1 g "$A" sni api.test evil.test /root/testca.pem
has_event "$A" "SNI 'evil.test' is not the name this address stands for"
expect_rc 1 g "$A" sni open.test api.test /root/testca.pem
has_event "$A" "SNI 'api.test' is not the name this address stands for"
expect_rc 1 g "$A" get https://api.test/fronted Host=open.test
echo "$out" | grep -q "403" || fail "Host mismatch: $out"
has_event "$A" "http Host 'open.test' is not api.test"
expect_rc 1 g "$A" get http://plain.test/fronted Host=api.test
has_event "$A" "http Host 'api.test' is not plain.test"
grep -q fronted "$W/requests.log" && fail "a fronted request reached the upstream"
echo "SNI/Host mismatch refused: ok"

# Bypass: a spoofed source address from a raw socket, and UDP tunnelling.
g "$A" spoof 10.9.9.9 10.201.0.1 >/dev/null 2>&1
if events "$A" | grep -q "10.9.9.9 -> 10.201.0.1: spoofed source address"; then
	echo "spoofed source dropped and recorded: ok"
else
	g "$A" spoof 10.9.9.9 10.201.0.1 | grep -q "raw socket" || fail "spoofed packet not recorded: $(events "$A")"
	echo "spoofed source: the sandbox cannot open raw sockets: ok"
fi
expect_rc 1 g "$A" udp 198.51.100.9 443
has_event "$A" "udp 198.51.100.9:443"
echo "UDP tunnelling refused: ok"

# The secret is nowhere in the sandbox: environment, /proc, files, disk image; nor in logs or events.
# (The search runs on the host: a grep inside would carry the secret in its own command line.)
"$SPACE" exec "$A" -- sh -c 'env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; true' >"$W/proc.dump" 2>&1
grep -qaF "$SECRET" "$W/proc.dump" && fail "the secret is visible in the sandbox's processes"
"$SPACE" exec "$A" -- tar -cf - -C / etc root tmp var run 2>/dev/null >"$W/files.tar"
[ -s "$W/files.tar" ] || fail "could not read the sandbox's files"
grep -qaF "$SECRET" "$W/files.tar" && fail "the secret is in a file of the sandbox"
path=$("$SPACE" ls --json | python3 -c "import json,sys; print([s['path'] for s in json.load(sys.stdin) if s['id']=='$A'][0])")
expect_rc 0 "$SPACE" exec "$A" -- sync
grep -qaF "$SECRET" "$path/rootfs.ext4" && fail "the secret is on the sandbox's disk"
grep -qaF "$SECRET" "$STATE/run/$A/gateway.log" "$STATE"/space.db* && fail "the secret is in a log or the store"
echo "secret absent from the sandbox, its disk, logs and events: ok"

# A rollback gives the sandbox a new jail and a new gateway under the same policy; a fork inherits it.
expect_rc 0 "$SPACE" checkpoint "$A"
cpA=$out
on_exit "'$SPACE' checkpoint rm '$cpA'"
expect_rc 0 "$SPACE" rollback "$A" "$cpA"
expect_rc 0 g "$A" get https://api.test/after-rollback
grep '"/after-rollback"' "$W/requests.log" | grep -qF "\"Bearer $SECRET\"" || fail "after a rollback the upstream did not get the secret"
expect_rc 1 g "$A" get https://evil.test/
expect_rc 0 "$SPACE" fork "$cpA"
F=$out
created "$F"
expect_rc 0 g "$F" get https://api.test/fork
grep '"/fork"' "$W/requests.log" | grep -qF "\"Bearer $SECRET\"" || fail "a fork's upstream request did not get the secret"
expect_rc 1 g "$F" get https://evil.test/
has_event "$F" "dns evil.test: not in the allowlist"
echo "rollback and fork keep the egress policy: ok"

# No policy: nothing leaves (TCP, UDP, DNS, ICMP), and each attempt is recorded.
expect_rc 0 "$SPACE" create --isolation jail
B=$out
created "$B"
expect_rc 0 "$SPACE" cp "$here/guest.py" "$B:/root/guest.py"
expect_rc 1 g "$B" dns api.test
expect_rc 1 g "$B" tcp 203.0.113.5 80
expect_rc 1 g "$B" tcp 203.0.113.5 22
expect_rc 1 g "$B" udp 203.0.113.5 9999
expect_rc 1 g "$B" icmp 203.0.113.5
for e in "dns api.test" "tcp 203.0.113.5:80" "tcp 203.0.113.5:22" "udp 203.0.113.5:9999"; do has_event "$B" "$e"; done
g "$B" icmp 203.0.113.5 | grep -q "raw socket" || has_event "$B" "icmp 203.0.113.5"
echo "no policy, no egress, all recorded: ok"

# Bypass: a forged MAC (root in the sandbox may change its link). Nothing is bridged behind gw0, so it
# reaches nothing more than before; it is recorded, and the address checks still hold.
expect_rc 0 "$SPACE" exec "$B" -- sh -c 'ip link set eth0 down && ip link set eth0 address 02:00:00:00:00:99 &&
	ip link set eth0 up && ip route replace default via 10.201.0.1'
expect_rc 1 g "$B" udp 203.0.113.6 9
has_event "$B" "frame from 02:00:00:00:00:99: spoofed source MAC"
expect_rc 1 g "$B" tcp 203.0.113.6 443
echo "forged MAC recorded, still no egress: ok"

# A bandwidth limit (policy file): 1 MiB at 256 KiB/s takes about 4 s.
cat >"$W/slow.json" <<JSON
{"allow": ["plain.test"], "resolve": {"plain.test": "127.0.0.1:$HP"}, "limits": {"bytes_per_second": 262144}}
JSON
expect_rc 0 "$SPACE" create --isolation jail --policy "$W/slow.json"
C=$out
created "$C"
expect_rc 0 "$SPACE" cp "$here/guest.py" "$C:/root/guest.py"
t0=$(date +%s%N)
expect_rc 0 g "$C" get "http://plain.test/big?size=1048576"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -ge 2500 ] || fail "1 MiB at 256 KiB/s took only $ms ms"
echo "bandwidth limit ($ms ms for 1 MiB at 256 KiB/s): ok"

# Nothing left behind: gateways, namespaces, veths.
gw_pids=$(pgrep -f "space-gateway --state $STATE" | tr '\n' ' ')
[ -n "$gw_pids" ] || fail "no gateway processes while sandboxes run"
for id in "${ids[@]}"; do expect_rc 0 "$SPACE" rm "$id"; done
sleep 0.5
left=$(pgrep -f "space-gateway --state $STATE")
[ -z "$left" ] || fail "gateways left: $left"
left=$(leaks_of "${ids[@]}")
[ -z "$left" ] || fail "left behind: $left"
ip link | grep -qE "gw0|@if.*$A" && fail "a veth is left in the host namespace"
echo "teardown: ok"
