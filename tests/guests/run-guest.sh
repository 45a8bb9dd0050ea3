#!/bin/sh
# usage: run-guest.sh NAME[:STATUS] GUEST.elf [space-vmm boot args...]
# Boots a test guest with `space vm-boot` (or space-vmm boot directly when the CLI is not built) and passes when it prints "GUEST-OK NAME" and the VMM exits 0.
# GUEST-OK is the guest's completion record: printed once, after its last check (tests/guests/rt), as the
# last GUEST- line; a GUEST-FAIL anywhere fails.
# With NAME:STATUS it passes when space-vmm exits STATUS and (for a non-zero one) says why on stderr.
# A --timeout among the arguments overrides the default of 60 s.
# "@DISK@" in the arguments becomes a fresh 1 MiB disk image holding a known pattern (removed after).
# Exit 77 (skip) without a usable /dev/kvm.
set -u
name=${1%%:*} elf=$2
want_status=
case $1 in *:*) want_status=${1##*:} ;; esac
shift 2
vmm=${SPACE_VMM_PATH:?SPACE_VMM_PATH not set}
# Through the user's entry point, `space vm-boot` (which execs space-vmm boot), when the CLI is built.
boot="$vmm boot"
if [ -n "${SPACE_CLI:-}" ] && [ -x "$SPACE_CLI" ]; then
	boot="$SPACE_CLI vm-boot"
fi
if [ ! -c /dev/kvm ] || [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "SKIP: no /dev/kvm"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/space-guest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
args=""
disk="$tmp/disk.img"
for a in "$@"; do
	if [ "$a" = "@DISK@" ]; then
		# sector N holds "SPACE-SECTOR-N" (the blk guest and the nested suite read it back)
		i=0
		while [ $i -lt 2048 ]; do printf 'SPACE-SECTOR-%-498d\n' $i; i=$((i + 1)); done > "$disk"
		a=$disk
	fi
	args="$args $(printf '%s' "$a" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
done
eval "set -- $args"
$boot --kernel "$elf" --timeout 60 --console-log "$tmp/console" "$@" 2>"$tmp/stderr"
rc=$?
cat "$tmp/stderr" >&2
if [ -n "$want_status" ]; then
	if [ "$rc" -ne "$want_status" ]; then
		echo "FAIL: space-vmm exited $rc, want $want_status"
		exit 1
	fi
	if [ "$rc" -ne 0 ] && ! grep -q '^space-vmm: ' "$tmp/stderr"; then
		echo "FAIL: no 'space-vmm: <reason>' line on stderr"
		exit 1
	fi
	echo "PASS: $name ended with status $rc"
	exit 0
fi
if [ $rc -ne 0 ]; then
	echo "FAIL: space-vmm exited $rc"
	exit 1
fi
if ! grep -q "^GUEST-OK $name\$" "$tmp/console"; then
	echo "FAIL: no 'GUEST-OK $name' on the console"
	exit 1
fi
verdicts=$(grep -a '^GUEST-' "$tmp/console")
if [ "$verdicts" != "GUEST-OK $name" ]; then
	echo "FAIL: the console's verdicts are not one 'GUEST-OK $name': $(echo "$verdicts" | head -n 5 | tr '\n' ' ')"
	exit 1
fi
echo "PASS: $name"
