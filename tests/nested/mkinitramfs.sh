#!/bin/sh
# usage: mkinitramfs.sh MODULES_DIR OUT.cpio
# A busybox initramfs for the nested Linux boots: loads virtio_mmio and virtio_blk (and their deps)
# from MODULES_DIR (the kernel package's lib/modules/<version>), reads sector 7 of /dev/vda (the test
# disk holds "SPACE-SECTOR-<n>" at the start of each 512-byte sector), counts online CPUs and prints
#   SPACE-LINUX-OK cpus=<n> disk=<ok|none|bad>
# then powers off through ACPI.
set -eu
mods=$1 out=$2
bb=$(command -v busybox || echo /bin/busybox)
[ -x "$bb" ] && "$bb" --list | grep -qx insmod || { echo "mkinitramfs: need a static busybox" >&2; exit 1; }
root=$(mktemp -d "${TMPDIR:-/tmp}/space-initramfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/mod" "$root/proc" "$root/sys" "$root/dev"
cp "$bb" "$root/bin/busybox"
for m in virtio_ring virtio virtio_mmio virtio_blk; do
	f=$(find "$mods" -name "$m.ko" -o -name "$m.ko.xz" | head -n 1)
	[ -n "$f" ] || continue
	case "$f" in
	*.xz) xz -dc "$f" > "$root/mod/$m.ko" ;;
	*) cp "$f" "$root/mod/$m.ko" ;;
	esac
done
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# No /dev/console existed when the kernel started us: attach to it now.
exec 0</dev/console 1>/dev/console 2>&1
for m in virtio_ring virtio virtio_mmio virtio_blk; do
	[ -f /mod/$m.ko ] && insmod /mod/$m.ko
done
disk=none
i=0
while [ $i -lt 50 ] && [ ! -b /dev/vda ]; do sleep 0.1; i=$((i + 1)); done
if [ -b /dev/vda ]; then
	if dd if=/dev/vda bs=512 skip=7 count=1 2>/dev/null | grep -q '^SPACE-SECTOR-7 '; then
		disk=ok
	else
		disk=bad
	fi
fi
cpus=$(grep -c '^processor' /proc/cpuinfo)
echo "SPACE-LINUX-OK cpus=$cpus disk=$disk"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null) > "$out"
