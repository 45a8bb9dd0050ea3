#!/bin/bash
# The egress gateway of a jail sandbox with a policy is confined, and what the sandbox can make it store is
# bounded and escaped (issue 14, items 8, 4 and 5):
#  - its process runs as a machine-wide unique uid of its own (not the jail's range; its slot freed with
#    the sandbox), with no capabilities in any set, NoNewPrivs 1, seccomp (mode 2), not dumpable, file
#    sizes capped by RLIMIT_FSIZE, and no descriptor on space.db (nor any state file but its own three);
#    `space doctor --verbose` says so, for the installed binary and for the running process;
#  - a DNS name carrying ESC ] 0 ; ... BEL shows escaped in gateway.log and in `space events`;
#  - 200,000 refused DNS queries from inside leave gateway.log(.1) under its cap, the event log small (with
#    a note of what was not recorded), and the gateway answering.
. "$(dirname "$0")/../../lib.sh"
. "$(dirname "$0")/egress_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
egress_setup
checks=0
ok() { checks=$((checks + 1)); echo "$*: ok"; }

expect_rc 0 "$SPACE" create --isolation jail --allow api.test
A=$out
on_exit "'$SPACE' rm '$A'"
expect_rc 0 "$SPACE" cp "$here/dns_flood.py" "$A:/root/dns_flood.py"
run=$(realpath "$STATE/run/$A") # <state>/run links into the pool: the gateway's descriptors name the pool's path
read -r gpid gstart guid <"$run/gateway.pid" || fail "no gateway.pid in $run"
[ -n "${guid:-}" ] || fail "gateway.pid names no uid: $(cat "$run/gateway.pid")"
st=/proc/$gpid/status
[ -r "$st" ] || fail "gateway $gpid is not running"
field() { awk -v k="$1:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$st"; }

# Its own uid and gid (real, effective, saved, fs), from the machine-wide allocation, not the jail's.
read -r u1 u2 u3 u4 <<<"$(field Uid)"
read -r g1 g2 g3 g4 <<<"$(field Gid)"
[ "$u1" != 0 ] && [ "$u1" = "$u2" ] && [ "$u1" = "$u3" ] && [ "$u1" = "$u4" ] && [ "$u1" = "$guid" ] ||
	fail "gateway uids: $(field Uid) (gateway.pid says $guid)"
[ "$g1" != 0 ] && [ "$g1" = "$g2" ] && [ "$g1" = "$g3" ] && [ "$g1" = "$g4" ] || fail "gateway gids: $(field Gid)"
[ -z "$(field Groups)" ] || fail "gateway supplementary groups: $(field Groups)"
slot=$(cat "/run/space-uids/u$guid" 2>/dev/null)
[ "$slot" = "pid $gpid $gstart gateway" ] || fail "uid slot u$guid: '$slot'"
expect_rc 0 "$SPACE" ls --json
jpid=$(echo "$out" | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='$A'][0])")
juid=$(awk '$1 == "Uid:" { print $2 }' "/proc/$jpid/status")
[ "$juid" != 0 ] && { [ "$guid" -lt "$juid" ] || [ "$guid" -ge $((juid + 65536)) ]; } ||
	fail "gateway uid $guid is inside the jail's range from $juid"
ok "gateway runs as its own uid $guid (jail root is $juid)"

# No capabilities, no way to gain any, under seccomp, not dumpable.
for c in CapInh CapPrm CapEff CapBnd CapAmb; do
	[ "$(field $c)" = 0000000000000000 ] || fail "gateway $c: $(field $c)"
done
[ "$(field NoNewPrivs)" = 1 ] || fail "gateway NoNewPrivs: $(field NoNewPrivs)"
[ "$(field Seccomp)" = 2 ] || fail "gateway Seccomp: $(field Seccomp)"
# A process that is not dumpable has its private /proc files owned by root whatever its uid.
[ "$(stat -c %u "/proc/$gpid/environ")" = 0 ] ||
	fail "gateway is dumpable (/proc/$gpid/environ owned by $(stat -c %u "/proc/$gpid/environ"))"
ok "no capabilities, NoNewPrivs, seccomp filter, not dumpable"

fsize=$(awk '/^Max file size/ { print $4 }' "/proc/$gpid/limits")
[ "$fsize" != unlimited ] && [ "$fsize" -le $((4 << 20)) ] || fail "gateway RLIMIT_FSIZE: $fsize"
ok "RLIMIT_FSIZE $fsize bytes"

# The store is not open in it: the only state files it holds are its log, the rotated log and the spool.
fds=$(ls -l "/proc/$gpid/fd" | sed -n 's/.* -> //p')
echo "$fds" | grep -F "space.db" && fail "the gateway holds the store open: $fds"
others=$(echo "$fds" | grep -F "$STATE" | grep -vxF -e "$run/gateway.log" -e "$run/gateway.log.1" -e "$run/events.jsonl")
[ -z "$others" ] || fail "the gateway holds state files open: $others"
ok "no descriptor on space.db"

# `space doctor --verbose` lists the helpers' confinement and checks the gateways that run.
expect_rc 0 "$SPACE" doctor --verbose
echo "$out" | grep -Eq '^ok    helper-gateway .*uid of its own.*capabilities none.*seccomp rules: process [0-9]+' ||
	fail "doctor --verbose on space-gateway: $out"
echo "$out" | grep -Eq '^ok    gateways +1 running, each as its own uid with no capabilities' ||
	fail "doctor --verbose on the running gateway: $out"
ok "space doctor --verbose: $(echo "$out" | grep -E 'helper-gateway|gateways' | tr -s ' ' | tr '\n' ';')"

# A DNS name with a terminal escape: refused, and escaped wherever it is recorded.
expect_rc 0 "$SPACE" exec "$A" -- python3 /root/dns_flood.py esc
[ "$out" = "rcode 3" ] || fail "escape query: $out"
expect_rc 0 "$SPACE" events "$A"
ev=$out
[[ "$ev" == *$'\x1b'* ]] && fail "a raw ESC reached space events"
[[ "$ev" == *$'\x07'* ]] && fail "a raw BEL reached space events"
echo "$ev" | grep -qF 'dns \x1b]0;pwned\x07.evil.test: not in the allowlist' || fail "escaped name not in the events: $ev"
grep -q $'\x1b' "$run/gateway.log" && fail "a raw ESC reached gateway.log"
grep -qF 'dns \x1b]0;pwned\x07.evil.test' "$run/gateway.log" || fail "escaped name not in gateway.log: $(cat "$run/gateway.log")"
ok "ESC ] 0 ; ... BEL in a DNS name shows escaped in space events and gateway.log"

# 200,000 refused queries, each for another name.
sleep 1.1 # a fresh rate window: the flood alone decides what is recorded
t0=$(date +%s%N)
expect_rc 0 "$SPACE" exec "$A" -- python3 /root/dns_flood.py flood 200000
secs=$((($(date +%s%N) - t0) / 1000000000 + 1))
echo "flood: $out"
sleep 1.5 # the note of suppressed events is written within a second
logsize=$(($(stat -c %s "$run/gateway.log") + $(stat -c %s "$run/gateway.log.1")))
[ "$logsize" -le $((4 << 20)) ] || fail "gateway.log grew to $logsize bytes"
expect_rc 0 "$SPACE" events "$A"
nflood=$(echo "$out" | grep -c 'flood\.test')
# At most 20 events a second were let through, plus the notes.
[ "$nflood" -le $((20 * (secs + 3))) ] || fail "$nflood flood events recorded in $secs s"
echo "$out" | grep -q "egress-suppressed .*more events not recorded" || fail "no note of the suppressed events: $out"
total=$(echo "$out" | wc -l)
ok "200,000 refused queries in ${secs}s: gateway.log(.1) $logsize bytes, $nflood of them in the event log ($total events)"

expect_rc 0 "$SPACE" exec "$A" -- python3 /root/dns_flood.py ask api.test
[ "$out" = "rcode 0" ] || fail "after the flood the gateway does not answer an allowed name: $out"
kill -0 "$gpid" 2>/dev/null || fail "the gateway died"
ok "the gateway still answers"

# Its slot goes with the sandbox.
expect_rc 0 "$SPACE" rm "$A"
[ -e "/run/space-uids/u$guid" ] && [ "$(cat "/run/space-uids/u$guid")" = "$slot" ] && fail "uid slot u$guid kept after rm"
# (A zombie has ended: whoever adopted the double-forked gateway reaps it in its own time.)
state=$(awk '$1 == "State:" { print $2 }' "/proc/$gpid/status" 2>/dev/null)
[ -n "$state" ] && [ "$state" != Z ] && fail "the gateway outlived its sandbox (state $state)"
ok "uid slot freed with the sandbox"

[ "$checks" = 9 ] || fail "ran $checks of 9 checks"
echo "gateway confinement: $checks checks passed"
