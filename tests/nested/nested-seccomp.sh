#!/bin/sh
# nested suite: space-vmm's seccomp filters with a real guest inside nested-kvm.
#  1. SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 makes the vCPU thread call execve() once its filter is in
#     place: space-vmm must die by SIGSYS (status 159) and name the call on stderr.
#  2. The same boot without the hook, with 2 vCPUs, a disk and virtio-rng, under the filters: Debian's
#     kernel reaches the initramfs's "SPACE-LINUX-OK" and powers off (the filters allow the real work).
set -u
. "$(dirname "$0")/nested-common.sh"
here=$(cd "$(dirname "$0")" && pwd)
work=${SPACE_BUILD_DIR:?}/nested-seccomp
vmm=${SPACE_VMM_PATH:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/*.rc
nested_kernel
sh "$here/mkinitramfs.sh" "$mods" "$work/initrd.cpio" || exit 1
i=0
while [ $i -lt 2048 ]; do printf 'SPACE-SECTOR-%-498d\n' $i; i=$((i + 1)); done > "$work/disk.img"

cat > "$work/inside.sh" <<INSIDE
SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 timeout -s KILL 120 "$vmm" boot --kernel "$bz" --initrd "$work/initrd.cpio" \
	--cmdline "console=ttyS0 panic=-1" --timeout 60 > "$work/forbidden.log" 2>&1
echo \$? > "$work/forbidden.rc"
timeout -s KILL 300 "$vmm" boot --kernel "$bz" --initrd "$work/initrd.cpio" --cmdline "console=ttyS0 panic=-1" \
	--timeout 240 --cpus 2 --rng --disk "$work/disk.img:ro" > "$work/allowed.log" 2>&1
echo \$? > "$work/allowed.rc"
INSIDE
nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1

fails=0
rc=$(cat "$work/forbidden.rc" 2>/dev/null || echo missing)
if [ "$rc" = 159 ] && grep -q 'seccomp violation: execve (59) in a vCPU thread' "$work/forbidden.log"; then
	echo "PASS: forbidden syscall on a vCPU thread: killed by SIGSYS, reported: $(grep -m1 'seccomp violation' "$work/forbidden.log")"
else
	echo "FAIL: forbidden syscall: status $rc (want 159 = SIGSYS)"; tail -n 20 "$work/forbidden.log"
	fails=$((fails + 1))
fi
rc=$(cat "$work/allowed.rc" 2>/dev/null || echo missing)
if [ "$rc" = 0 ] && grep -q 'SPACE-LINUX-OK cpus=2 disk=ok' "$work/allowed.log"; then
	echo "PASS: Linux (2 vCPUs, virtio-blk, virtio-rng) runs to poweroff under the filters"
else
	echo "FAIL: Linux under the filters: status $rc"; grep -a 'seccomp\|SPACE-' "$work/allowed.log" | tail -n 5
	tail -n 20 "$work/allowed.log"
	fails=$((fails + 1))
fi
[ $fails -eq 0 ] || tail -n 20 "$work/nested.log"
exit $((fails > 0))
