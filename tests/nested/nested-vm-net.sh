#!/bin/sh
# nested suite: VM sandboxes behind the egress gateway, inside ONE nested-kvm VM. Upstreams (HTTP and
# HTTPS with a test CA) run on the nested VM's loopback; then
#   a VM with --allow/--secret/--inject: python urllib in the guest gets 200 over HTTPS and HTTP, the
#     upstream logs the injected Authorization header; guest-side latency through the gateway
#   a denied name fails fast (DNS) with a clear error and `space events` records it
#   the secret is absent from the guest's environment, processes, files and disk, and from the logs
#   the guest changes eth0's address, then its MAC: it cannot get out (the wire in the VMM's namespace
#     drops the frames: its drop counter moves); put back, it works again
#   a VM without policy: TCP, UDP, DNS and ICMP all fail; the attempts are recorded
#   space rm: the gateway is gone with the sandbox
# Needs the base template (the base tree cached by scripts/make-templates.sh, for python3 and iproute2).
set -u
. "$(dirname "$0")/nested-common.sh"
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-vm-net
space=${SPACE_CLI:?}
gateway=${SPACE_GATEWAY_PATH:-$SPACE_BUILD_DIR/src/net/space-gateway}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/result.txt
nested_kernel
nested_need_built "$space" "the space CLI"
nested_need_built "$gateway" space-gateway
base_tar=$(nested_base_tree) || base_tar=/var/cache/space/base-2-bookworm
[ -e "$base_tar" ] || { echo "SKIP: no $base_tar (the test needs python3 in the guest)"; exit 77; }
command -v openssl >/dev/null || { echo "SKIP: openssl missing"; exit 77; }
if [ -d "$base_tar" ]; then
	src_tree=$base_tar
else
	src_tree=$work/base-tree
	rm -rf "$src_tree" && mkdir -p "$src_tree" && tar -xf "$base_tar" -C "$src_tree" || { echo "FAIL: unpack"; exit 1; }
fi
rm -f "$work/base.ext4"
mkfs.ext4 -q -F -L rootfs -i 8192 -d "$src_tree" "$work/base.ext4" 640M || { echo "FAIL: mkfs.ext4"; exit 1; }
[ "$src_tree" = "$work/base-tree" ] && rm -rf "$src_tree"

cat > "$work/inside.sh" <<INSIDE
#!/bin/bash
# Runs inside nested-kvm. Every check prints one PASS/FAIL line to result.txt.
[ -n "\${BASH_VERSION:-}" ] || exec bash "\$0" "\$@"
set -u
$(nested_helper_env)
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}' SPACE_GATEWAY_PATH='$gateway'
export SPACE_VM_BOOT_TIMEOUT=300
W=$work
res=\$W/result.txt
checks=0 # every check counts itself; the last line says how many ran (nested-judge.sh)
pass() { checks=\$((checks + 1)); echo "PASS: \$*" >> \$res; }
fail() { checks=\$((checks + 1)); echo "FAIL: \$*" >> \$res; }
S=\$(mktemp -d /tmp/space-nested-vmnet.XXXXXX)
SP() { '$space' --state "\$S" "\$@"; }
ids=
cleanup() {
	kill "\$up" 2>/dev/null
	for i in \$ids; do SP rm "\$i" >/dev/null 2>&1; done
	SP pool unmount >/dev/null 2>&1
	umount "\$S/pool" 2>/dev/null
	rm -rf "\$S"
}
trap cleanup EXIT
modprobe kvm_amd 2>/dev/null; modprobe vhost_vsock 2>/dev/null
[ -c /dev/kvm ] || { fail "no /dev/kvm inside nested-kvm"; exit 1; }
SP init --loop-pool 3G > \$W/init.log 2>&1 || { fail "space init: \$(tail -n 3 \$W/init.log)"; exit 1; }
SP template import base --rootfs \$W/base.ext4 --kernel '$bz' --modules '$mods' > \$W/import.log 2>&1 ||
	{ fail "template import: \$(tail -n 3 \$W/import.log)"; exit 1; }

# Upstreams on loopback (nested-kvm leaves lo down), with a test CA the gateway trusts (--ca-file).
ip link set lo up
cd \$W
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=vmnet-test-ca \
	-keyout ca.key -out ca.pem 2>/dev/null &&
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=api.test -keyout srv.key -out srv.csr 2>/dev/null &&
printf 'subjectAltName=DNS:api.test\n' > ext &&
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ext -out srv.pem 2>/dev/null ||
	{ fail "test certificates"; exit 1; }
: > requests.log
python3 '$src/tests/integration/net/upstream.py' requests.log srv.pem srv.key > /tmp/vmnet-up.txt &
up=\$!
for i in \$(seq 100); do [ -s /tmp/vmnet-up.txt ] && break; sleep 0.1; done
read -r HP TP < /tmp/vmnet-up.txt || { fail "upstreams did not start"; exit 1; }

# space create, retried when the KVM probe misjudged a host under load as emulating ring 0.
create() {
	local t
	for t in 1 2 3; do
		SP create "\$@" 2> create.err && return 0
		grep -q 'emulates guest kernel code' create.err || return 1
		echo "create attempt \$t: \$(cat create.err)" >> timing.log
		sleep 10
	done
	return 1
}
SECRET=sk-vmnet-\$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
export VMNET_SECRET=\$SECRET
t0=\$(date +%s%N)
A=\$(create --isolation vm --template base --memory 384 --allow api.test --allow plain.test \
	--secret TOKEN=env:VMNET_SECRET --inject 'api.test:Authorization=Bearer \${TOKEN}' \
	--inject 'plain.test:Authorization=Bearer \${TOKEN}' --resolve "api.test=127.0.0.1:\$TP" \
	--resolve "plain.test=127.0.0.1:\$HP" --ca-file ca.pem)
[ -n "\$A" ] && ids="\$ids \$A" && pass "space create --isolation vm with a policy (\$(( (\$(date +%s%N) - t0) / 1000000 )) ms)" ||
	{ fail "create with a policy: \$(tail -n 5 create.err)"; exit 1; }
unset VMNET_SECRET
SP cp '$src/tests/integration/net/guest.py' "\$A:/root/guest.py" || fail "cp guest.py"
g() { SP exec "\$1" -- python3 /root/guest.py "\${@:2}" 2>&1; }
events() { SP events "\$1" 2>&1; }
out=\$(SP exec "\$A" -- sh -c 'ip -4 addr show eth0; ip route; cat /sys/class/net/eth0/address /etc/resolv.conf' 2>&1)
echo "\$out" > guest-net.txt
echo "\$out" | grep -q 'inet 10.201.0.2/30' && echo "\$out" | grep -q 'default via 10.201.0.1' &&
	pass "guest eth0 10.201.0.2/30 via 10.201.0.1 (space.net)" || fail "guest network: \$out"

# Allowed, with injection: HTTPS (terminated, re-originated) and plain HTTP.
out=\$(g "\$A" get https://api.test/tls)
echo "\$out" | grep -q '^OK: 200' && grep '"/tls"' requests.log | grep -qF "\"Bearer \$SECRET\"" &&
	pass "HTTPS from the guest: \$out; upstream got the injected header" ||
	fail "HTTPS: \$out; upstream log: \$(cat requests.log); events: \$(events "\$A" | tail -n 3)"
out=\$(g "\$A" get http://plain.test/plain)
echo "\$out" | grep -q '^OK: 200' && grep '"/plain"' requests.log | grep -qF "\"Bearer \$SECRET\"" &&
	pass "HTTP from the guest: \$out; upstream got the injected header" || fail "HTTP: \$out"
lat=
for i in 1 2 3; do lat="\$lat \$(g "\$A" get http://plain.test/lat | sed -n 's/^OK: .*(\([0-9]*\) ms)\$/\1/p')"; done
echo "guest HTTP GET through the gateway (ms):\$lat" >> timing.log
pass "guest HTTP GET latency through the gateway:\$lat ms"

# Denied: fails at DNS with a clear error, recorded (well under a connect timeout, even under nested load).
out=\$(g "\$A" get https://evil.test/)
ms=\$(echo "\$out" | sed -n 's/.*(\([0-9]*\) ms)\$/\1/p')
echo "\$out" | grep -q 'Name or service not known' && [ -n "\$ms" ] && [ "\$ms" -lt 10000 ] &&
	pass "denied host fails fast: \$out" || fail "denied host: \$out"
events "\$A" | grep -qF "dns evil.test: not in the allowlist" && pass "space events records the denied name" ||
	fail "no event for evil.test: \$(events "\$A")"

# The secret is nowhere in the guest, its disk, the logs or the store.
SP exec "\$A" -- sh -c 'env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; true' > proc.dump 2>&1
SP exec "\$A" -- tar -cf - -C / etc root tmp var run 2>/dev/null > files.tar
SP exec "\$A" -- sync
path=\$(SP ls --json | python3 -c "import json,sys; print([s['path'] for s in json.load(sys.stdin) if s['id']=='\$A'][0])")
leak=
[ -s proc.dump ] && [ -s files.tar ] || leak="(could not read the guest)"
grep -qaF "\$SECRET" proc.dump && leak="\$leak processes"
grep -qaF "\$SECRET" files.tar && leak="\$leak files"
grep -qaF "\$SECRET" "\$path/rootfs.ext4" && leak="\$leak disk"
grep -qaF "\$SECRET" "\$S/run/\$A/gateway.log" "\$S/run/\$A/sandbox.log" "\$S"/space.db* && leak="\$leak logs/store"
[ -z "\$leak" ] && pass "the secret is absent from the guest's processes, files, disk, logs and store" ||
	fail "the secret leaked:\$leak"
rm -f proc.dump files.tar

# Spoofing: a guest with another address, then another MAC, gets nothing out; the wire drops it.
vmm=\$(SP ls --json | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='\$A'][0])")
drops() { nsenter --net=/proc/\$vmm/ns/net tc -s qdisc show dev tap0 ingress 2>/dev/null |
	sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | head -n 1; }
d0=\$(drops)
SP exec "\$A" -- sh -c 'ip addr flush dev eth0 && ip addr add 10.201.0.9/24 dev eth0 &&
	ip route add default via 10.201.0.1 dev eth0 onlink' > spoof.log 2>&1
out=\$(g "\$A" get http://plain.test/spoofed-ip)
d1=\$(drops)
if echo "\$out" | grep -q '^REFUSED' && ! grep -q spoofed-ip requests.log && [ "\${d1:-0}" -gt "\${d0:-0}" ]; then
	pass "guest with address 10.201.0.9 cannot get out (\$out; wire drops \$d0 -> \$d1)"
else
	fail "spoofed address: \$out; drops \$d0 -> \$d1; \$(cat spoof.log)"
fi
SP exec "\$A" -- sh -c 'ip addr flush dev eth0 && ip addr add 10.201.0.2/30 dev eth0 &&
	ip route add default via 10.201.0.1 && ip link set eth0 address 02:00:00:00:00:99' > spoof.log 2>&1
out=\$(g "\$A" get http://plain.test/spoofed-mac)
d2=\$(drops)
if echo "\$out" | grep -q '^REFUSED' && ! grep -q spoofed-mac requests.log && [ "\${d2:-0}" -gt "\${d1:-0}" ]; then
	pass "guest with MAC 02:00:00:00:00:99 cannot get out (\$out; wire drops \$d1 -> \$d2)"
else
	fail "spoofed MAC: \$out; drops \$d1 -> \$d2; \$(cat spoof.log)"
fi
SP exec "\$A" -- sh -c 'ip link set eth0 address 02:00:0a:c9:00:02 && ip neigh flush dev eth0' > spoof.log 2>&1
out=\$(g "\$A" get http://plain.test/restored)
echo "\$out" | grep -q '^OK: 200' && pass "own address and MAC back: works again" || fail "after restoring: \$out \$(cat spoof.log)"

cp "\$S/run/\$A/gateway.log" gateway-A.log 2>/dev/null
gw=\$(cat "\$S/run/\$A/gateway.pid" 2>/dev/null | cut -d' ' -f1)
SP rm "\$A" || fail "space rm \$A"
ids=
sleep 1
[ -n "\$gw" ] && ! kill -0 "\$gw" 2>/dev/null && pass "space rm: the gateway (pid \$gw) is gone" ||
	fail "gateway '\$gw' still running after rm"

# An empty policy: TCP, UDP, DNS and ICMP all fail, and its gateway records the attempts.
echo '{}' > empty-policy.json
B=\$(create --isolation vm --template base --memory 384 --policy empty-policy.json)
[ -n "\$B" ] && ids="\$B" || { fail "create with an empty policy: \$(tail -n 5 create.err)"; exit 1; }
SP cp '$src/tests/integration/net/guest.py' "\$B:/root/guest.py" || fail "cp guest.py"
all=ok
for a in "dns api.test" "tcp 203.0.113.5 80" "tcp 203.0.113.5 22" "udp 203.0.113.5 9999" "icmp 203.0.113.5" \
	"tcp 10.201.0.1 22" "get http://plain.test/"; do
	out=\$(g "\$B" \$a)
	echo "\$out" | grep -q '^REFUSED' || { all=bad; fail "empty policy, \$a: \$out"; }
done
[ "\$all" = ok ] && pass "empty policy: DNS, TCP, UDP, ICMP all refused"
ev=\$(events "\$B")
miss=
for e in "dns api.test" "tcp 203.0.113.5:80" "tcp 203.0.113.5:22" "udp 203.0.113.5:9999" "icmp 203.0.113.5"; do
	echo "\$ev" | grep -qF "\$e" || miss="\$miss [\$e]"
done
[ -z "\$miss" ] && pass "empty policy: every attempt is in space events" || fail "events missing:\$miss: \$ev"
SP rm "\$B" || fail "space rm \$B"
ids=
left=\$(pgrep -f "space-gateway.*(\$A|\$B)")
[ -z "\$left" ] && pass "no gateway left" || fail "gateways left: \$left"
echo "DONE checks=\$checks" >> \$res
INSIDE

t0=$(date +%s)
# Its usual run is several minutes: beyond this it is a failure (an emulator hang is nested-kvm's 75).
export NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-700}
nested_run "$work" "$work/inside.sh" --mem 4096 > "$work/nested.log" 2>&1
run_rc=$?
rm -f "$work/base.ext4"
echo "nested-vm-net: $(($(date +%s) - t0)) s inside nested-kvm"
cat "$work/timing.log" 2>/dev/null
nested_report "$work" "$run_rc"
