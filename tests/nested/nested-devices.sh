#!/bin/sh
# nested suite: the virtio-net and virtio-vsock test guests with their host peers
# (tests/guests/virtio/{net,vsock}_peer.py), all inside ONE nested-kvm VM, where /dev/kvm works:
# net with a TAP opened by name, handed over as an fd, and created by a jailed space-vmm in its own
# network namespace (the peer also checks that jail from /proc); vsock echoing 1 MiB both ways plus a
# guest-initiated connection; and Debian's kernel with its virtio_net driver pinging the host over a
# TAP (net-linux, when nested-kvm has the kernel cached). Arguments: one per run,
# "NAME|PEER.py|GUEST.elf|ARG..." (no spaces).
set -u
. "$(dirname "$0")/nested-common.sh"
work=${SPACE_BUILD_DIR:?}/nested-devices
vmm=${SPACE_VMM_PATH:?}
rm -rf "$work"
mkdir -p "$work"
# Debian's kernel with its own virtio_net driver over the same device, when nested-kvm has it cached.
if [ ! -f "$nested_cache/ready" ]; then
	"$nested_tool" -- true >/dev/null 2>&1 || true
fi
kver=$(cat "$nested_cache/ready" 2>/dev/null || true)
bz=$nested_cache/root/boot/vmlinuz-$kver
if [ -n "$kver" ] && [ -f "$bz" ]; then
	set -- "$@" "net-linux|${SPACE_SOURCE_DIR:?}/tests/guests/virtio/net_peer.py|$bz|linux|$nested_cache/root/lib/modules/$kver"
else
	echo "note: no Debian kernel cached by nested-kvm: net-linux not run"
fi
names=
{
	echo "export TMPDIR='$work'"
	echo "checks=0"
	i=0
	for spec in "$@"; do
		name=${spec%%|*}
		names="$names $name"
		cmd=$(printf '%s' "${spec#*|}" | tr '|' ' ')
		echo "python3 $(echo "$cmd" | sed "s| | '$vmm' |") > '$work/run$i.log' 2>&1; echo \$? > '$work/run$i.rc'; checks=\$((checks + 1))"
		i=$((i + 1))
	done
	# The completion record: every run got its status file (judged below).
	echo "echo \"DONE checks=\$checks\" >> '$work/result.txt'"
} > "$work/inside.sh"
[ $i -gt 0 ] || { echo "FAIL: no runs given"; exit 1; }
nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1
run_rc=$?
fails=0
i=0
for name in $names; do
	rc=$(cat "$work/run$i.rc" 2>/dev/null || echo missing)
	if [ "$rc" = 0 ]; then
		echo "PASS: $name"
		grep -E '^(GUEST-OK|peer:|PASS:|net:|vsock:)' "$work/run$i.log"
	else
		echo "FAIL: $name: status $rc"
		tail -n 30 "$work/run$i.log" 2>/dev/null
		fails=$((fails + 1))
	fi
	i=$((i + 1))
done
nested_judge "$work" "$run_rc" "$i" || fails=$((fails + 1))
[ $fails -eq 0 ] || { tail -n 20 "$work/nested.log"; nested_recap "$work"; }
exit $((fails > 0))
