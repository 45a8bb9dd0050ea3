#!/bin/sh
# nested suite: Debian's stock kernel (linux-image-amd64, as nested-kvm caches it) boots through
# space-vmm inside ONE nested-kvm VM: the bzImage, the vmlinux ELF extracted from it, and the bzImage
# with --cpus 2. A busybox initramfs loads virtio_mmio + virtio_blk, reads a known sector of the
# virtio-blk disk, prints "SPACE-LINUX-OK cpus=N disk=ok" and powers off through ACPI.
# Argument: "disk" when space-vmm has virtio-blk, "nodisk" otherwise.
set -u
. "$(dirname "$0")/nested-common.sh"
want_disk=${1:-disk}
here=$(cd "$(dirname "$0")" && pwd)
work=${SPACE_BUILD_DIR:?}/nested-linux
vmm=${SPACE_VMM_PATH:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/*.rc "$work"/result.txt

nested_kernel

if [ ! -s "$work/vmlinux" ] || [ "$bz" -nt "$work/vmlinux" ]; then
	python3 "$here/extract-vmlinux.py" "$bz" "$work/vmlinux" || exit 1
fi
sh "$here/mkinitramfs.sh" "$mods" "$work/initrd.cpio" || exit 1
i=0
while [ $i -lt 2048 ]; do printf 'SPACE-SECTOR-%-498d\n' $i; i=$((i + 1)); done > "$work/disk.img"
disk_arg=
[ "$want_disk" = disk ] && disk_arg="--disk $work/disk.img:ro"

cat > "$work/inside.sh" <<INSIDE
checks=0
boot() { # boot NAME ARGS...
	n=\$1; shift
	timeout -s KILL 300 "$vmm" boot --initrd "$work/initrd.cpio" --cmdline "console=ttyS0 panic=-1" \
		--timeout 240 $disk_arg "\$@" > "$work/\$n.log" 2>&1
	echo \$? > "$work/\$n.rc"
	checks=\$((checks + 1))
}
boot bzimage --kernel "$bz"
boot vmlinux --kernel "$work/vmlinux"
boot smp2 --kernel "$bz" --cpus 2
echo "DONE checks=\$checks" >> "$work/result.txt" # the completion record: every boot ran
INSIDE
nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1
run_rc=$?

expect_disk=none
[ "$want_disk" = disk ] && expect_disk=ok
fails=0
for run in bzimage:1 vmlinux:1 smp2:2; do
	n=${run%%:*} cpus=${run##*:}
	rc=$(cat "$work/$n.rc" 2>/dev/null || echo missing)
	if [ "$rc" = 0 ] && grep -q "^SPACE-LINUX-OK cpus=$cpus disk=$expect_disk" "$work/$n.log"; then
		echo "PASS: $n ($(grep -o 'SPACE-LINUX-OK.*' "$work/$n.log"))"
	else
		echo "FAIL: $n: space-vmm status $rc, want 'SPACE-LINUX-OK cpus=$cpus disk=$expect_disk'"
		tail -n 25 "$work/$n.log" 2>/dev/null
		fails=$((fails + 1))
	fi
done
# The three boots are judged here from their files; the record says the script got through all three.
nested_judge "$work" "$run_rc" 3 || fails=$((fails + 1))
[ $fails -eq 0 ] || { tail -n 20 "$work/nested.log"; nested_recap "$work"; }
exit $((fails > 0))
