#!/bin/bash
# space doctor: the report names what works and what does not, and `--isolation vm` fails fast with the
# same cause where this host cannot run Linux guests.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop

# Before init: the pool check fails and says to run space init; everything else is still checked.
EMPTY=$(mktemp -d /tmp/space-test-XXXXXX)
on_exit "rm -rf '$EMPTY'"
# Nothing is usable yet, so the exit status is 1.
expect_rc 1 "$SPACE" doctor --json --state "$EMPTY/none"
echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
names = [c["name"] for c in d["checks"]]
for n in ("kvm", "ring0", "space-vmm", "space-agent", "guest-kernel", "loop", "namespaces", "seccomp",
          "landlock", "tap", "cgroups", "pool"):
    assert n in names, "missing check " + n
for c in d["checks"]:
    assert c["status"] in ("ok", "warn", "fail"), c
    assert c["detail"], c
    if c["status"] == "fail":
        assert c.get("fix"), "a failed check without a fix: %r" % c
pool = [c for c in d["checks"] if c["name"] == "pool"][0]
assert pool["status"] == "fail" and "space init" in pool["detail"], pool
assert d["jail"]["usable"] is False
' || fail "doctor --json before init: $out"
expect_rc 2 "$SPACE" doctor --bogus

make_state
make_busybox_tree "$EMPTY/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$EMPTY/tree" --state "$STATE"
expect_rc 0 "$SPACE" doctor --state "$STATE"
echo "$out" | grep -q '^jail isolation: usable' || fail "jail not usable after init: $out"
echo "$out" | grep -q '^ok    namespaces' || fail "namespaces check: $out"
echo "$out" | grep -q 'helper-' && fail "helper confinement shown without --verbose: $out"
expect_rc 0 "$SPACE" doctor --verbose --state "$STATE"
# Each helper with its uid, capabilities and seccomp filter size (as the installed binary describes it).
echo "$out" | grep -Eq '^ok    helper-vmm .*uid of its own.*capabilities none.*vCPU [0-9]+.*control [0-9]+' ||
	fail "doctor --verbose: space-vmm's confinement: $out"
echo "$out" | grep -Eq '^ok    helper-gateway .*uid of its own.*capabilities none, no_new_privs, seccomp rules: process [0-9]+' ||
	fail "doctor --verbose: space-gateway's confinement: $out"
echo "$out" | grep -Eq '^(ok|warn) +helper-snapd .*uid [0-9a-z]' || fail "doctor --verbose: space-snapd not listed: $out"
echo "$out" | grep -Eq '^(ok|warn) +helper-logcap ' || fail "doctor --verbose: space-logcap not listed: $out"
expect_rc 0 "$SPACE" doctor --json --state "$STATE"
vm_usable=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["vm"]["usable"])')

if [ "$vm_usable" = False ]; then
	# The cause doctor names is the one `space run --isolation vm` gives, within 2 seconds.
	kvm_detail=$(echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
bad = [c for c in d["checks"] if c["name"] in ("kvm", "ring0") and c["status"] == "fail"]
print(bad[0]["detail"] if bad else "")')
	[ -n "$kvm_detail" ] || fail "vm unusable but neither kvm nor ring0 failed: $out"
	t0=$(date +%s%N)
	expect_rc 1 "$SPACE" run --isolation vm --template tiny --state "$STATE" -- true
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ "$ms" -lt 2000 ] || fail "space run --isolation vm took ${ms} ms to refuse"
	echo "$err" | grep -q "space doctor" || fail "refusal does not point to space doctor: $err"
	echo "$err" | grep -q -- "--isolation jail" || fail "refusal does not offer jail: $err"
	if [ -e /dev/kvm ]; then
		echo "$err" | grep -qi "emulat" || fail "refusal does not name emulation: $err"
	else
		echo "$err" | grep -q "/dev/kvm" || fail "refusal does not name /dev/kvm: $err"
	fi
	echo "vm refused in ${ms} ms: $err"
else
	echo "$out" | grep -q '"name":"ring0","status":"\(ok\|warn\)"' || fail "vm usable without a ring0 measurement: $out"
fi
echo "PASS"
