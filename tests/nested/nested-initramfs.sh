#!/bin/sh
# nested suite: a VM sandbox's real boot path. `space kernel prepare` builds the initramfs (our cpio
# writer, space-agent as /init, Debian's modules in dependency order) for a template directory naming
# the kernel nested-kvm caches; inside nested-kvm, space-vmm boots it with a busybox ext4 rootfs on
# virtio-blk, virtio-rng and virtio-vsock. The agent must load the modules, switch to /dev/vda and
# answer on vsock port 1024: agent_probe (src/proto's client, "vsock-uds:SOCK:1024") gets HELLO with
# the hostname from space.hostname, runs `uname -r` (must print the guest kernel's release) and asks
# for SHUTDOWN, after which the VM must power off. A second boot without a disk must print the reason
# on the console and power off.
# usage: nested-initramfs.sh AGENT_PROBE
set -u
. "$(dirname "$0")/nested-common.sh"
probe=${1:?usage: nested-initramfs.sh AGENT_PROBE}
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-initramfs
vmm=${SPACE_VMM_PATH:?}
cli=${SPACE_CLI:?}
rm -rf "$work"
mkdir -p "$work"

nested_kernel
[ -d "$mods" ] || { echo "SKIP: $mods missing"; exit 77; }
command -v busybox >/dev/null || { echo "SKIP: a static busybox is needed"; exit 77; }
# meson registers this test only when space-vmm has virtio-vsock: a binary without it is a broken build.
"$vmm" --help 2>&1 | grep -q -- '--vsock' || { echo "FAIL: space-vmm ($vmm) has no --vsock"; exit 1; }
nested_need_built "$cli" "the space CLI"
nested_need_built "$probe" agent_probe

# The template directory: its kernel and modules, as `space template import --kernel --modules` lays out.
mkdir -p "$work/tpl"
ln -s "$bz" "$work/tpl/kernel"
ln -s "$mods" "$work/tpl/modules"
t0=$(date +%s.%N)
"$cli" --state "$work/state" --json kernel prepare --template "$work/tpl" > "$work/assets.json" ||
	{ echo "FAIL: space kernel prepare"; exit 1; }
t1=$(date +%s.%N)
initrd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["initrd"])' "$work/assets.json")
cmdline=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cmdline"])' "$work/assets.json")
echo "initramfs: $initrd ($(stat -c %s "$initrd") bytes, built in $(echo "$t1 - $t0" | bc) s)"
cpio -t --quiet < "$initrd" | grep -q '^init$' || { echo "FAIL: no /init in the initramfs"; exit 1; }
echo "modules: $(cd "$work" && cpio -i --quiet --to-stdout modules.order < "$initrd" | sed 's|.*/||; s|\.ko$||' | tr '\n' ' ')"

bash "$src/scripts/busybox-tree.sh" "$work/tree" || exit 1
mkfs.ext4 -q -F -L rootfs -d "$work/tree" "$work/rootfs.ext4" 64M || { echo "FAIL: mkfs.ext4"; exit 1; }
rm -rf "$work/tree"
cmdline="$cmdline space.hostname=nested-agent space.lifetime=600"

cat > "$work/inside.sh" <<INSIDE
sock=/tmp/space-initramfs.sock
timeout -s KILL 400 "$vmm" boot --kernel "$bz" --initrd "$initrd" --disk "$work/rootfs.ext4" --rng \
	--vsock "3:\$sock" --cmdline "$cmdline" --timeout 300 > "$work/vm.log" 2>&1 &
vpid=\$!
i=0
while [ \$i -lt 100 ] && [ ! -S \$sock ]; do sleep 0.1; i=\$((i + 1)); done
"$probe" "vsock-uds:\$sock:1024" 240000 > "$work/probe.log" 2>&1
prc=\$?
echo \$prc > "$work/probe.rc"
[ \$prc = 0 ] || kill \$vpid
wait \$vpid
echo \$? > "$work/vm.rc"
# No disk: the agent must say so on the console and power off, not hang.
timeout -s KILL 300 "$vmm" boot --kernel "$bz" --initrd "$initrd" --cmdline "$cmdline space.rootwait=2" \
	--timeout 240 > "$work/nodisk.log" 2>&1
echo \$? > "$work/nodisk.rc"
echo "DONE checks=3" >> "$work/result.txt" # the completion record: probe, VM and no-disk boot, judged below
INSIDE
nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1
run_rc=$?

fails=0
prc=$(cat "$work/probe.rc" 2>/dev/null || echo missing)
vrc=$(cat "$work/vm.rc" 2>/dev/null || echo missing)
cat "$work/probe.log" 2>/dev/null
grep -E 'space-agent: (loaded|root)' "$work/vm.log" 2>/dev/null
if [ "$prc" = 0 ] && grep -q "^AGENT-HELLO .*hostname=nested-agent" "$work/probe.log"; then
	echo "PASS: the agent answered HELLO over vsock with the hostname from space.hostname"
else
	echo "FAIL: agent_probe status $prc"; fails=$((fails + 1))
fi
if grep -q "^AGENT-UNAME $kver " "$work/probe.log"; then
	echo "PASS: exec of uname -r in the guest printed $kver"
else
	echo "FAIL: uname -r did not print $kver"; fails=$((fails + 1))
fi
if grep -q "^AGENT-DETACH-OK pid=" "$work/probe.log"; then
	echo "PASS: a detached process ran on after its connection closed"
else
	echo "FAIL: no detached process"; fails=$((fails + 1))
fi
if [ "$vrc" = 0 ] && grep -q AGENT-SHUTDOWN-OK "$work/probe.log"; then
	echo "PASS: the VM powered off after SHUTDOWN"
else
	echo "FAIL: space-vmm status $vrc after SHUTDOWN"; fails=$((fails + 1))
fi
nrc=$(cat "$work/nodisk.rc" 2>/dev/null || echo missing)
if [ "$nrc" = 0 ] && grep -q "space-agent: FATAL: the root disk /dev/vda did not appear within 2 s" "$work/nodisk.log" &&
	grep -q "reboot: Power down" "$work/nodisk.log"; then
	echo "PASS: without a disk the agent printed why on the console and powered off"
else
	echo "FAIL: no-disk boot: space-vmm status $nrc"; tail -n 20 "$work/nodisk.log" 2>/dev/null; fails=$((fails + 1))
fi
nested_judge "$work" "$run_rc" 3 || fails=$((fails + 1))
[ $fails = 0 ] || { tail -n 60 "$work/vm.log" 2>/dev/null; tail -n 20 "$work/nested.log"; nested_recap "$work"; }
exit $((fails > 0))
