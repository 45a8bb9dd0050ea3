#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Boots a virtio test guest under `space-vmm boot` with a pattern-filled disk and checks the result
# on the host side too.
#   run_guest.sh blk GUEST       read/write/flush; sector 5 must then hold (i ^ 0xa5), the rest intact
#   run_guest.sh blk-ro GUEST    the same disk attached read-only: the file must not change at all
#   run_guest.sh hostile GUEST   malformed chains; the VMM survives and the file does not change
set -eu
mode=$1
guest=$2
vmm=${SPACE_VMM_PATH:?SPACE_VMM_PATH not set}

if [ ! -e /dev/kvm ] || [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "SKIP: /dev/kvm is not available here"
	exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to check the disk"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
disk=$tmp/disk.img
sectors=2048

# sector N holds "SPACE-SECTOR-N" left-justified in 512 bytes (the same disk tests/guests/run-guest.sh makes)
python3 - "$disk" "$sectors" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path, 'wb') as f:
    f.write(b''.join(('SPACE-SECTOR-%-498d\n' % i).encode() for i in range(n)))
PY

case $mode in
	blk) name=blk; attach=$disk; cmdline="blk_read=3 blk_write=5"; written=5 ;;
	blk-ro) name=blk; attach=$disk:ro; cmdline="blk_read=3 blk_write=5 blk_ro=1"; written=-1 ;;
	hostile) name=hostile; attach=$disk; cmdline=""; written=-1 ;;
	*) echo "unknown mode $mode"; exit 2 ;;
esac

rc=0
"$vmm" boot --kernel "$guest" --disk "$attach" --cmdline "$cmdline" --memory 64 --timeout 120 \
	>"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
if [ "$rc" -ne 0 ]; then
	echo "FAIL: space-vmm exited with status $rc"
	exit 1
fi
if ! grep -q "^GUEST-OK $name" "$tmp/out"; then
	echo "FAIL: no GUEST-OK $name on the console"
	exit 1
fi

python3 - "$disk" "$sectors" "$written" <<'PY'
import sys
path, n, written = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, 'rb').read()
if len(data) != n * 512:
    sys.exit(f"FAIL: disk size changed to {len(data)}")
for s in range(n):
    got = data[s * 512:(s + 1) * 512]
    if s == written:
        want = bytes((i ^ 0xa5) & 0xff for i in range(512))
    else:
        want = ('SPACE-SECTOR-%-498d\n' % s).encode()
    if got != want:
        sys.exit(f"FAIL: sector {s} of the disk is not what the guest should have left")
print("disk contents verified on the host")
PY
