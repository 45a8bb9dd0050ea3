#!/bin/bash
# The VM side of the egress gateway without KVM: space-gateway --tap wires a "VMM" namespace's TAP to its
# veth end (tc ingress hooks, docs/network.md), with tap_relay.py standing in for space-vmm's virtio-net
# and a second namespace for the guest, configured as the agent does from space.net=. Checks: an allowed
# name works through the TAP; a denied name and a port fail and are recorded; a guest with another
# address, then another MAC, gets nothing out and the wire's drop counter moves; put back, it works; when
# the "VMM" ends, the gateway ends and the veth pair is gone.
. "$(dirname "$0")/../../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
need_root
gw=${SPACE_GATEWAY_PATH:-$SPACE_BUILD_DIR/src/net/space-gateway}
need_built "$gw" space-gateway SPACE_GATEWAY_PATH
command -v python3 >/dev/null || skip "python3 missing"
command -v tc >/dev/null || skip "tc (iproute2) missing"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
unshare --net true 2>/dev/null || skip "cannot create network namespaces here"
W=$(mktemp -d /tmp/space-vmwire.XXXXXX)
on_exit "rm -rf '$W'"

unshare --net sleep 600 & V=$!
on_exit "kill_ours $V"
unshare --net sleep 600 & G=$!
on_exit "kill_ours $G"
sleep 0.2
probe=$(nsenter --net=/proc/$V/ns/net sh -c 'ip tuntap add probe0 mode tap && tc qdisc add dev probe0 ingress &&
	tc filter add dev probe0 ingress bpf da bytecode "1,6 0 0 2" && ip link add probe1 type veth peer name probe2 &&
	tc filter add dev probe0 ingress prio 2 bpf bytecode "1,6 0 0 4294967295" action mirred egress redirect dev probe1;
	r=$?; ip link del probe0; ip link del probe1; exit $r' 2>&1) || skip "this kernel lacks tc ingress/cls_bpf/act_mirred: $probe"
python3 "$here/tap_relay.py" /proc/$V/ns/net /proc/$G/ns/net >"$W/relay.out" 2>&1 & R=$!
on_exit "kill_ours $R"
for _ in $(seq 50); do grep -q ready "$W/relay.out" && break; sleep 0.1; done
grep -q ready "$W/relay.out" || fail "tap relay: $(cat "$W/relay.out")"
# What the agent does from space.net=10.201.0.2/30,10.201.0.1,02:00:0a:c9:00:02,1500.
nsenter --net=/proc/$G/ns/net sh -c 'ip link set lo up && ip link set eth0 address 02:00:0a:c9:00:02 &&
	sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1 && ip addr add 10.201.0.2/30 dev eth0 && ip link set eth0 up &&
	ip route add default via 10.201.0.1' || fail "configure the guest side"
echo "nameserver 10.201.0.1" >"$W/resolv.conf"
python3 -m http.server --bind 127.0.0.1 0 --directory "$W" >"$W/http.log" 2>&1 & H=$!
on_exit "kill_ours $H"
for _ in $(seq 50); do port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$W/http.log"); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || fail "http server: $(cat "$W/http.log")"
mkdir -p "$W/state/gateway"
printf '{"allow":[{"host":"plain.test","port":0}],"resolve":{"plain.test":"127.0.0.1:%s"}}' "$port" >"$W/cfg.json"
"$gw" --state "$W/state" --sandbox sb-vmwire --netns-pid "$V" --tap tap0 <"$W/cfg.json" >"$W/gateway.log" 2>&1 & GW=$!
on_exit "kill_ours $GW"
for _ in $(seq 50); do grep -q '^ready' "$W/gateway.log" && break; sleep 0.1; done
grep -q '^ready' "$W/gateway.log" || fail "space-gateway --tap: $(cat "$W/gateway.log")"

guest() { nsenter --net=/proc/$G/ns/net unshare --mount sh -c \
	"mount --bind '$W/resolv.conf' /etc/resolv.conf && exec python3 '$here/guest.py' $*" 2>&1; }
drops() { nsenter --net=/proc/$V/ns/net tc -s qdisc show dev tap0 ingress | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p'; }
echo "through the TAP" >"$W/hello.txt"
out=$(guest get http://plain.test/hello.txt)
case "$out" in "OK: 200 through the TAP"*) ;; *) fail "allowed name through the TAP: $out" ;; esac
echo "allowed name through the TAP: $out"
out=$(guest get http://evil.test/)
echo "$out" | grep -q "Name or service not known" || fail "denied name: $out"
out=$(guest tcp 203.0.113.5 22)
echo "$out" | grep -q REFUSED || fail "port 22: $out"
grep -q "dns evil.test: not in the allowlist" "$W/gateway.log" && grep -q "tcp 203.0.113.5:22: port not allowed" "$W/gateway.log" ||
	fail "attempts not recorded: $(cat "$W/gateway.log")"
echo "denied name and port refused and recorded: ok"

d0=$(drops)
nsenter --net=/proc/$G/ns/net sh -c 'ip addr flush dev eth0 && ip addr add 10.201.0.9/24 dev eth0 &&
	ip route add default via 10.201.0.1 dev eth0 onlink' || fail "readdress the guest"
out=$(guest tcp 203.0.113.5 80)
d1=$(drops)
echo "$out" | grep -q REFUSED && [ "$d1" -gt "$d0" ] || fail "guest with a spoofed address: $out (drops $d0 -> $d1)"
echo "spoofed address dropped on the wire ($d0 -> $d1): ok"
nsenter --net=/proc/$G/ns/net sh -c 'ip addr flush dev eth0 && ip addr add 10.201.0.2/30 dev eth0 &&
	ip route add default via 10.201.0.1 && ip link set eth0 address 02:00:00:00:00:99' || fail "re-MAC the guest"
out=$(guest tcp 203.0.113.5 80)
d2=$(drops)
echo "$out" | grep -q REFUSED && [ "$d2" -gt "$d1" ] || fail "guest with a spoofed MAC: $out (drops $d1 -> $d2)"
echo "spoofed MAC dropped on the wire ($d1 -> $d2): ok"
grep -q "spoofed" "$W/gateway.log" && fail "a spoofed frame reached the gateway: $(grep spoofed "$W/gateway.log")"
nsenter --net=/proc/$G/ns/net sh -c 'ip link set eth0 address 02:00:0a:c9:00:02 && ip neigh flush dev eth0'
out=$(guest get http://plain.test/hello.txt)
case "$out" in "OK: 200"*) ;; *) fail "after restoring the guest: $out" ;; esac
echo "own address and MAC back: works again"

# The "VMM" ends: so does the gateway, and with it the veth pair.
kill "$R" "$V"
for _ in $(seq 50); do kill -0 "$GW" 2>/dev/null || break; sleep 0.1; done
kill -0 "$GW" 2>/dev/null && fail "gateway still running after its sandbox ended"
echo "gateway ends with the VMM: ok"
