#!/bin/bash
# `space template import --kernel --modules` and `space kernel prepare`: the template keeps its kernel
# and a decompressed copy of just the modules a VM sandbox needs, and the initramfs built for it lists
# them in dependency order. Uses Debian's kernel as nested-kvm caches it (skips without it); never
# fetches anything.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 missing (e2fsprogs)"
command -v cpio >/dev/null || skip "cpio missing"
cache=${NESTED_KVM_CACHE:-/var/cache/nested-kvm}
kver=$(cat "$cache/ready" 2>/dev/null) || skip "nested-kvm has cached no Debian kernel"
bz=$cache/root/boot/vmlinuz-$kver
mods=$cache/root/lib/modules/$kver
[ -f "$bz" ] && [ -f "$mods/modules.dep" ] || skip "$bz or $mods/modules.dep missing"

make_state
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"

# Usage: --modules needs --kernel; a modules dir that is not one.
expect_rc 2 "$SPACE" kernel
expect_rc 2 "$SPACE" kernel frob
expect_rc 1 "$SPACE" template import bad --rootfs "$WORK/tree" --modules "$mods" --state "$STATE"
echo "$err" | grep -q -- "--kernel" || fail "--modules without --kernel: $err"
expect_rc 1 "$SPACE" template import bad --rootfs "$WORK/tree" --kernel "$bz" --modules "$WORK/none" --state "$STATE"
echo "$err" | grep -q "not a directory" || fail "bad --modules: $err"
# A modules tree that lacks a required driver: the import fails naming it, and leaves nothing.
mkdir -p "$WORK/partial" && echo "kernel/virtio_mmio.ko:" > "$WORK/partial/modules.dep"
expect_rc 1 "$SPACE" template import bad --rootfs "$WORK/tree" --kernel "$bz" --modules "$WORK/partial" --state "$STATE"
echo "$err" | grep -q "virtio_blk" || fail "missing driver not named: $err"
expect_rc 0 "$SPACE" template ls --json --state "$STATE"
echo "$out" | grep -q '"bad"' && fail "a failed import left a template"

expect_rc 0 "$SPACE" template import deb --rootfs "$WORK/tree" --kernel "$bz" --modules "$mods" --state "$STATE"
tpl=$("$SPACE" template ls --json --state "$STATE" | python3 -c 'import json,sys; print([t["path"] for t in json.load(sys.stdin) if t["name"]=="deb"][0])')
[ -f "$tpl/kernel" ] || fail "no kernel in the template"
grep -q '"modules":' "$tpl/template.json" || fail "template.json names no modules"
grep -q "\"release\":.*\"$kver\"" "$tpl/template.json" || fail "template.json names no release: $(cat "$tpl/template.json")"
n=$(find "$tpl/modules" -name '*.ko' | wc -l)
[ "$n" -ge 5 ] && [ "$n" -lt 40 ] || fail "template holds $n modules, want the few a sandbox needs"
[ -f "$tpl/modules/modules.dep" ] || fail "no modules.dep in the template's copy"

expect_rc 0 "$SPACE" kernel prepare --template deb --json --state "$STATE"
initrd=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["initrd"])')
echo "$out" | grep -q "\"release\":.*\"$kver\"" || fail "prepare: release: $out"
list=$(cpio -t --quiet < "$initrd") || fail "cpio -t $initrd"
echo "$list" | grep -qx init || fail "no /init in $initrd"
echo "$list" | grep -qx dev/console || fail "no /dev/console in $initrd"
order=$(cd "$WORK" && cpio -i --quiet --to-stdout modules.order < "$initrd")
pos() { echo "$order" | grep -n "/$1.ko\$" | cut -d: -f1; }
for pair in virtio:virtio_mmio virtio:virtio_blk vsock:vmw_vsock_virtio_transport jbd2:ext4 mbcache:ext4 crc32c_generic:ext4; do
	a=$(pos "${pair%%:*}") b=$(pos "${pair##*:}")
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ] || fail "load order: ${pair%%:*} ($a) must precede ${pair##*:} ($b)"
done
# The same inputs reuse the cached image.
expect_rc 0 "$SPACE" kernel prepare --template deb --json --state "$STATE"
echo "$out" | grep -q "$initrd" || fail "initramfs not reused: $out"
expect_rc 0 "$SPACE" kernel ls --json --state "$STATE"
expect_rc 0 "$SPACE" template rm deb --state "$STATE"
echo "PASS: template kernel + modules, initramfs in dependency order"
