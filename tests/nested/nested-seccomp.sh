#!/bin/sh
# nested suite: space-vmm's seccomp filters with a real guest inside nested-kvm.
#  1. SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 makes the vCPU thread call execve() once its filter is in
#     place: space-vmm must die by SIGSYS (status 159) and name the call on stderr.
#  2. SPACE_VMM_TEST_FORBIDDEN_SYSCALL=device: the same for the virtio-vsock host side's event thread
#     (DEVICE role), woken by connections to its unix socket: "... in a device thread", status 159.
#  3. The same boot without the hook, with 2 vCPUs, a disk and virtio-rng, under the filters: Debian's
#     kernel reaches the initramfs's "SPACE-LINUX-OK" and powers off (the filters allow the real work).
set -u
. "$(dirname "$0")/nested-common.sh"
here=$(cd "$(dirname "$0")" && pwd)
work=${SPACE_BUILD_DIR:?}/nested-seccomp
vmm=${SPACE_VMM_PATH:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/*.rc "$work"/result.txt
nested_kernel
sh "$here/mkinitramfs.sh" "$mods" "$work/initrd.cpio" || exit 1
i=0
while [ $i -lt 2048 ]; do printf 'SPACE-SECTOR-%-498d\n' $i; i=$((i + 1)); done > "$work/disk.img"

cat > "$work/inside.sh" <<INSIDE
SPACE_VMM_TEST_FORBIDDEN_SYSCALL=1 timeout -s KILL 120 "$vmm" boot --kernel "$bz" --initrd "$work/initrd.cpio" \
	--cmdline "console=ttyS0 panic=-1" --timeout 60 > "$work/forbidden.log" 2>&1
echo \$? > "$work/forbidden.rc"
vs=\$(mktemp -u /tmp/space-seccomp-vsock.XXXXXX) # not in $work: 9p cannot hold a unix socket
SPACE_VMM_TEST_FORBIDDEN_SYSCALL=device timeout -s KILL 200 "$vmm" boot --kernel "$bz" --initrd "$work/initrd.cpio" \
	--cmdline "console=ttyS0 panic=-1" --timeout 150 --vsock "3:\$vs" > "$work/device.log" 2>&1 &
vmm_pid=\$!
# Wakes the event thread until space-vmm is gone: each connection is one wake-up.
python3 - "\$vs" \$vmm_pid <<'PY'
import os, socket, sys, time
path, pid = sys.argv[1], int(sys.argv[2])
for _ in range(600):
    try:
        os.kill(pid, 0)
    except OSError:
        break
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(1); s.connect(path); s.sendall(b"CONNECT 1234\\n"); s.close()
    except OSError:
        pass
    time.sleep(0.3)
PY
wait \$vmm_pid
echo \$? > "$work/device.rc"
rm -f "\$vs"
timeout -s KILL 300 "$vmm" boot --kernel "$bz" --initrd "$work/initrd.cpio" --cmdline "console=ttyS0 panic=-1" \
	--timeout 240 --cpus 2 --rng --disk "$work/disk.img:ro" > "$work/allowed.log" 2>&1
echo \$? > "$work/allowed.rc"
echo "DONE checks=3" >> "$work/result.txt" # the completion record: the three runs are judged below
INSIDE
nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1
run_rc=$?

fails=0
# expect_sigsys NAME ROLE: the run NAME (NAME.rc, NAME.log) died by SIGSYS, reporting execve in a ROLE thread.
expect_sigsys() {
	rc=$(cat "$work/$1.rc" 2>/dev/null || echo missing)
	if [ "$rc" = 159 ] && grep -q "seccomp violation: execve (59) in a $2 thread" "$work/$1.log"; then
		echo "PASS: forbidden syscall on a $2 thread: killed by SIGSYS, reported: $(grep -m1 'seccomp violation' "$work/$1.log")"
	else
		echo "FAIL: forbidden syscall on a $2 thread: status $rc (want 159 = SIGSYS)"; tail -n 20 "$work/$1.log"
		fails=$((fails + 1))
	fi
}
expect_sigsys forbidden vCPU
expect_sigsys device device
rc=$(cat "$work/allowed.rc" 2>/dev/null || echo missing)
if [ "$rc" = 0 ] && grep -q 'SPACE-LINUX-OK cpus=2 disk=ok' "$work/allowed.log"; then
	echo "PASS: Linux (2 vCPUs, virtio-blk, virtio-rng) runs to poweroff under the filters"
else
	echo "FAIL: Linux under the filters: status $rc"; grep -a 'seccomp\|SPACE-' "$work/allowed.log" | tail -n 5
	tail -n 20 "$work/allowed.log"
	fails=$((fails + 1))
fi
nested_judge "$work" "$run_rc" 3 || fails=$((fails + 1))
[ $fails -eq 0 ] || { tail -n 20 "$work/nested.log"; nested_recap "$work"; }
exit $((fails > 0))
