#!/bin/sh
# nested suite: virtio-vsock and virtio-rng under Debian's stock kernel. Inside one nested-kvm VM,
# space-vmm boots the kernel with --rng and --vsock 3:SOCK and an initramfs that loads virtio-rng and
# vmw_vsock_virtio_transport, reads /dev/hwrng, and runs vsock_echo (tests/nested/vsock_echo.c,
# built here with gcc -static) on vsock port 1024. A host client connects through SOCK with
# "CONNECT 1024", gets "OK <port>", sends 2 MiB (32 times the device's credit window) and must
# get every byte back in order. Then the guest connects to host port 2000, which the client serves on
# SOCK_2000 (GUEST-HELLO / HOST-ACK), and powers off.
set -u
. "$(dirname "$0")/nested-common.sh"
here=$(cd "$(dirname "$0")" && pwd)
work=${SPACE_BUILD_DIR:?}/nested-vsock
vmm=${SPACE_VMM_PATH:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/*.rc "$work"/result.txt

nested_kernel
bb=$(command -v busybox || echo /bin/busybox)
[ -x "$bb" ] || { echo "SKIP: a static busybox is needed"; exit 77; }
# meson registers this test only when space-vmm has virtio-vsock: a binary without it is a broken build.
"$vmm" --help 2>&1 | grep -q -- '--vsock' || { echo "FAIL: space-vmm ($vmm) has no --vsock"; exit 1; }

gcc -static -O2 -o "$work/vsock_echo" "$here/vsock_echo.c" || { echo "FAIL: cannot build vsock_echo"; exit 1; }

# The initramfs: busybox, the modules, vsock_echo and an init that runs the guest side.
root=$(mktemp -d "${TMPDIR:-/tmp}/space-vsock-initramfs.XXXXXX")
trap 'rm -rf "$root"' EXIT INT TERM
mkdir -p "$root/bin" "$root/mod" "$root/proc" "$root/sys" "$root/dev"
cp "$bb" "$root/bin/busybox"
cp "$work/vsock_echo" "$root/bin/vsock_echo"
modlist="virtio_ring virtio virtio_mmio virtio-rng vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport"
for m in $modlist; do
	f=$(find "$mods" -name "$m.ko" -o -name "$m.ko.xz" | head -n 1)
	[ -n "$f" ] || { echo "SKIP: module $m not in $mods"; exit 77; }
	case "$f" in
	*.xz) xz -dc "$f" > "$root/mod/$m.ko" ;;
	*) cp "$f" "$root/mod/$m.ko" ;;
	esac
done
cat > "$root/init" <<INIT
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec 0</dev/console 1>/dev/console 2>&1
for m in $modlist; do insmod /mod/\$m.ko || echo "insmod \$m failed"; done
i=0
while [ \$i -lt 50 ] && [ ! -c /dev/hwrng ]; do sleep 0.1; i=\$((i + 1)); done
echo "rng: \$(cat /sys/class/misc/hw_random/rng_current 2>/dev/null)"
hex=\$(dd if=/dev/hwrng bs=32 count=1 2>/dev/null | od -An -tx1 | tr -d ' \n')
case "\$hex" in
????????????????????????????????????????????????????????????????) [ "\${hex#*[1-9a-f]}" != "\$hex" ] && echo SPACE-RNG-OK ;;
esac
/bin/vsock_echo 1024 2000
echo "SPACE-VSOCK-ECHO-RC \$?"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null) > "$work/initrd.cpio"

cat > "$work/client.py" <<'PY'
import os, socket, sys, threading, time
path, port = sys.argv[1], int(sys.argv[2])
served = []

def read_line(sock):
    line = b""
    while not line.endswith(b"\n"):
        ch = sock.recv(1)
        if not ch:
            break
        line += ch
    return line

def serve_guest():
    # the guest's connect() to host port 2000 arrives here
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(path + "_2000")
    l.listen(1)
    l.settimeout(240)
    c, _ = l.accept()
    c.settimeout(60)
    if read_line(c) == b"GUEST-HELLO\n":
        c.sendall(b"HOST-ACK\n")
        served.append(True)
    c.close()

guest_side = threading.Thread(target=serve_guest, daemon=True)
guest_side.start()
data = os.urandom(2 * 1024 * 1024)
t0 = time.time()
deadline = time.time() + 200
while True:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b"CONNECT %d\n" % port)
        line = read_line(s)
        if line.startswith(b"OK "):
            break
        s.close()
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("client: the guest never accepted on port %d" % port)
    time.sleep(0.5)
print("client: connected after %.1f s, %s" % (time.time() - t0, line.decode().strip()))
s.settimeout(120)
start = time.time()
threading.Thread(target=s.sendall, args=(data,), daemon=True).start()
got = bytearray()
while len(got) < len(data):
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
s.close()
if bytes(got) != data:
    sys.exit("client: echo mismatch (%d of %d bytes back)" % (len(got), len(data)))
secs = time.time() - start
guest_side.join(120)
if not served:
    sys.exit("client: the guest did not connect to host port 2000")
print("SPACE-VSOCK-CLIENT-OK %d bytes echoed in %.3f s (%.1f MiB/s round trip)" % (len(got), secs, len(got) / secs / 2**20))
PY

cat > "$work/inside.sh" <<INSIDE
sock=/tmp/space-vsock.sock
timeout -s KILL 300 "$vmm" boot --kernel "$bz" --initrd "$work/initrd.cpio" \
	--cmdline "console=ttyS0 panic=-1" --rng --vsock "3:\$sock" --timeout 240 > "$work/vm.log" 2>&1 &
vpid=\$!
i=0
while [ \$i -lt 100 ] && [ ! -S \$sock ]; do sleep 0.1; i=\$((i + 1)); done
python3 "$work/client.py" \$sock 1024 > "$work/client.log" 2>&1
crc=\$?
echo \$crc > "$work/client.rc"
[ \$crc = 0 ] || kill \$vpid
wait \$vpid
echo \$? > "$work/vm.rc"
echo "DONE checks=2" >> "$work/result.txt" # the completion record: client and VM, judged below
INSIDE
nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1
run_rc=$?

fails=0
crc=$(cat "$work/client.rc" 2>/dev/null || echo missing)
vrc=$(cat "$work/vm.rc" 2>/dev/null || echo missing)
cat "$work/client.log" 2>/dev/null
if [ "$crc" = 0 ] && grep -q SPACE-VSOCK-CLIENT-OK "$work/client.log"; then
	echo "PASS: host -> guest vsock echo, guest -> host connect"
else
	echo "FAIL: vsock client status $crc"; fails=$((fails + 1))
fi
if [ "$vrc" = 0 ] && grep -q "SPACE-VSOCK-ECHO-RC 0" "$work/vm.log" && grep -q "VSOCK-ECHOED 2097152" "$work/vm.log" &&
	grep -q "VSOCK-GUEST-CONNECT-OK" "$work/vm.log"; then
	echo "PASS: guest echoed 2097152 bytes and powered off"
else
	echo "FAIL: space-vmm status $vrc"; fails=$((fails + 1))
fi
if grep -q SPACE-RNG-OK "$work/vm.log"; then
	echo "PASS: guest read entropy from virtio-rng ($(grep -o 'rng: .*' "$work/vm.log" | head -n 1))"
else
	echo "FAIL: no entropy from /dev/hwrng"; fails=$((fails + 1))
fi
nested_judge "$work" "$run_rc" 2 || fails=$((fails + 1))
[ $fails = 0 ] || { tail -n 40 "$work/vm.log" 2>/dev/null; tail -n 20 "$work/nested.log"; nested_recap "$work"; }
exit $((fails > 0))
