#!/bin/sh
# nested suite: template snapshots and the warm pool of vm sandboxes, inside ONE nested-kvm VM.
#   space template snapshot tiny --memory 256   boots the template once, checkpoints it, swaps it in
#   space template ls --json                    shows the snapshot (1 vCPU, 256 MiB)
#   2 x space create (5 with --full)            restored, not booted: each answers exec, its hostname is
#                                               its own id, its random bytes differ from its siblings'
#   a second snapshot is refused (drop first); the warm pool hands out a paused VM; --drop, then a cold
#   create boots; template rm; nothing left running
# (The figures: bench/create, `meson test --benchmark create-nested`.)
# usage: nested-create.sh [--full]   (--full: the benchmark mode, nested-create-full)
set -u
creates="1 2"
suffix=
if [ "${1:-}" = --full ]; then
	creates="1 2 3 4 5" suffix=-full
fi
. "$(dirname "$0")/nested-common.sh"
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-create$suffix
space=${SPACE_CLI:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/result.txt

if [ ! -f "$nested_cache/ready" ]; then
	"$nested_tool" -- true >/dev/null 2>&1 || true
fi
kver=$(cat "$nested_cache/ready" 2>/dev/null) || { echo "SKIP: nested-kvm has no kernel cached"; exit 77; }
bz=$nested_cache/root/boot/vmlinuz-$kver
mods=$nested_cache/root/lib/modules/$kver
[ -f "$bz" ] && [ -d "$mods" ] || { echo "SKIP: $bz or $mods missing"; exit 77; }
nested_need_built "$space" "the space CLI"
tree=$work/tree
rm -rf "$tree"
bash "$src/scripts/busybox-tree.sh" "$tree" >/dev/null || { echo "FAIL: busybox tree"; exit 1; }

cat > "$work/inside.sh" <<INSIDE
#!/bin/bash
[ -n "\${BASH_VERSION:-}" ] || exec bash "\$0" "\$@" # nested_run starts it with sh
set -u
$(nested_helper_env)
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}' SPACE_GATEWAY_PATH='${SPACE_GATEWAY_PATH:-}'
export SPACE_VM_BOOT_TIMEOUT=300 SPACE_SOURCE_DIR='$src' SPACE_QUIET_JAIL=1
res=$work/result.txt
checks=0 # every check counts itself; the last line says how many ran (nested-judge.sh)
pass() { checks=\$((checks + 1)); echo "PASS: \$*" >> \$res; }
fail() { checks=\$((checks + 1)); echo "FAIL: \$*" >> \$res; }
S=\$(mktemp -d /tmp/space-nested-create.XXXXXX)
SP() { '$space' --state "\$S" "\$@"; }
cleanup() {
	kill "\$copier" 2>/dev/null
	for x in \$(ls "\$S/pool/sandboxes" 2>/dev/null); do SP rm "\$x" >/dev/null 2>&1; done
	SP pool unmount >/dev/null 2>&1
	umount "\$S/pool" 2>/dev/null
	rm -rf "\$S"
}
trap cleanup EXIT
( while sleep 2; do for f in "\$S"/run/*/sandbox.log; do [ -f "\$f" ] && cp "\$f" "$work/\$(basename "\$(dirname "\$f")").log"; done; done ) &
copier=\$!
modprobe kvm_amd 2>/dev/null; modprobe vhost_vsock 2>/dev/null
[ -c /dev/kvm ] || { fail "no /dev/kvm inside nested-kvm"; exit 1; }
SP init --loop-pool 3G > $work/init.log 2>&1 || { fail "space init: \$(tail -n 3 $work/init.log)"; exit 1; }
SP template import tiny --rootfs '$tree' --kernel '$bz' --modules '$mods' > $work/import.log 2>&1 ||
	{ fail "template import: \$(tail -n 3 $work/import.log)"; exit 1; }
snapinfo() { SP template ls --json | python3 -c 'import json,sys; t=json.load(sys.stdin)[0]; s=t.get("snapshot"); print("%s/%s" % (s["cpus"], s["memory_mib"]) if s else "none", t["pooled"])'; }

# 1. the snapshot
t0=\$(date +%s%N)
if SP template snapshot tiny --memory 256 > $work/snapshot.log 2>&1; then
	pass "template snapshot in \$(( (\$(date +%s%N) - t0) / 1000000 )) ms: \$(cat $work/snapshot.log)"
else
	fail "template snapshot: \$(tail -n 5 $work/snapshot.log)"; exit 1
fi
[ "\$(snapinfo)" = "1/256 0" ] && pass "template ls shows the snapshot (1 vCPU, 256 MiB)" || fail "template ls: \$(snapinfo)"
[ -z "\$(ls \$S/pool/sandboxes)" ] && [ -z "\$(ls \$S/pool/checkpoints)" ] && pass "the snapshot's sandbox and checkpoint are gone" ||
	fail "left by the snapshot: \$(ls \$S/pool/sandboxes \$S/pool/checkpoints)"

# 2. creates from it (two, five with --full)
rands=
for i in $creates; do
	t0=\$(date +%s%N)
	id=\$(SP create --template tiny 2> $work/create\$i.err)
	ms=\$(( (\$(date +%s%N) - t0) / 1000000 ))
	[ -n "\$id" ] || { fail "create \$i: \$(tail -n 5 $work/create\$i.err)"; continue; }
	out=\$(SP exec "\$id" -- sh -c 'hostname; head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"' 2>&1)
	host=\$(echo "\$out" | head -n 1); rnd=\$(echo "\$out" | tail -n 1)
	[ "\$host" = "\$id" ] && pass "create \$i from the snapshot: \$ms ms (CLI wall time), hostname \$host" ||
		fail "create \$i: hostname '\$host', want \$id (\$out)"
	case " \$rands " in *" \$rnd "*) fail "create \$i: random bytes repeat a sibling's" ;; esac
	rands="\$rands \$rnd"
	SP rm "\$id" >/dev/null || fail "rm \$id"
done

# 3. a second snapshot is refused
SP template snapshot tiny > $work/snapshot2.log 2>&1 && fail "a second snapshot was taken" ||
	{ grep -q "already has a snapshot" $work/snapshot2.log && pass "second snapshot refused: \$(cat $work/snapshot2.log)" ||
	fail "second snapshot: \$(cat $work/snapshot2.log)"; }

# 4. the warm pool hands out a paused, restored VM
SP template set-pool tiny 1 && SP pool fill > $work/fill.log 2>&1 && [ "\$(snapinfo)" = "1/256 1" ] &&
	pass "warm pool filled: \$(cat $work/fill.log)" || fail "pool fill: \$(cat $work/fill.log) \$(snapinfo)"
pooled=\$(ls \$S/pool/sandboxes)
t0=\$(date +%s%N)
id=\$(SP create --template tiny 2> $work/create-pool.err)
ms=\$(( (\$(date +%s%N) - t0) / 1000000 ))
out=\$(SP exec "\$id" -- hostname 2>&1)
[ -n "\$id" ] && [ "\$id" = "\$pooled" ] && [ "\$out" = "\$id" ] && pass "create from the warm pool: \$ms ms, hostname \$out" ||
	fail "create from the pool: id '\$id' pooled '\$pooled' hostname '\$out' \$(tail -n 3 $work/create-pool.err)"
SP rm "\$id" >/dev/null
SP template set-pool tiny 0 && [ -z "\$(ls \$S/pool/sandboxes)" ] && pass "set-pool 0 drains the pool" || fail "set-pool 0: \$(ls \$S/pool/sandboxes)"

# 5. drop: the template boots again
SP template snapshot tiny --drop > $work/drop.log 2>&1 && [ "\$(snapinfo)" = "none 0" ] && pass "snapshot dropped" ||
	fail "drop: \$(cat $work/drop.log) \$(snapinfo)"
id=\$(SP create --template tiny --memory 256 2> $work/create-cold.err)
out=\$(SP exec "\$id" -- echo booted 2>&1)
[ "\$out" = booted ] && pass "cold create after the drop boots" || fail "cold create after drop: \$out \$(tail -n 3 $work/create-cold.err)"
SP rm "\$id" >/dev/null
SP template rm tiny || fail "template rm"
[ -z "\$(pgrep -x space-vmm)" ] && pass "no space-vmm left" || fail "space-vmm left: \$(pgrep -ax space-vmm)"
echo "DONE checks=\$checks" >> \$res
INSIDE

# Its usual run is a few minutes: beyond this it is a failure (an emulator hang is nested-kvm's 75).
export NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-600}
nested_run "$work" "$work/inside.sh" --mem 4096 > "$work/nested.log" 2>&1
run_rc=$?
rm -rf "$tree"
nested_report "$work" "$run_rc"
