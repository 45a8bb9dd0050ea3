#!/bin/sh
# space-vmm's user-facing errors: a non-Linux file, a truncated bzImage, a missing file and a 32-bit
# ELF each give "space-vmm: <reason>" and exit 1, on any host (the image is checked before KVM); `boot`
# and `run` share one parser, so every malformed value gets the same reason and status 2 from both.
set -u
vmm=${SPACE_VMM_PATH:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/space-vmm-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() { # expect STATUS PATTERN -- args...
	want=$1 pat=$2
	shift 3
	"$vmm" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne "$want" ] || ! grep -q "^space-vmm: .*$pat" "$tmp/err"; then
		echo "FAIL: space-vmm $* -> exit $rc, stderr: $(cat "$tmp/err")"
		fails=$((fails + 1))
	fi
}
echo "just some text, not a kernel" > "$tmp/text"
expect 1 "not a Linux kernel" -- boot --kernel "$tmp/text"
expect 1 "cannot read kernel" -- boot --kernel "$tmp/missing"
# A bzImage cut short: boot sector with a valid setup header, payload missing.
{ head -c 497 /dev/zero; printf '\004'; head -c 12 /dev/zero; printf '\125\252'; printf '\353\146HdrS\017\002';
  head -c 1000 /dev/zero; } > "$tmp/short"
expect 1 "truncated" -- boot --kernel "$tmp/short"
cp /bin/true "$tmp/elf64-dyn"
expect 1 "not an x86_64 executable" -- boot --kernel "$tmp/elf64-dyn"
expect 2 "cpus" -- boot --kernel "$tmp/text" --cpus 0
"$vmm" --version | grep -q '^space-vmm [0-9]' || { echo "FAIL: --version"; fails=$((fails + 1)); }
"$vmm" acpi-dump "$tmp/acpi" --cpus 2 --disks 1 && [ -s "$tmp/acpi/dsdt.dat" ] ||
	{ echo "FAIL: acpi-dump"; fails=$((fails + 1)); }
# Without KVM a valid image gets a clear setup error rather than a crash or a hang.
guest=${SPACE_BUILD_DIR:-}/tests/guests/guest-hello
if [ ! -e /dev/kvm ] && [ -f "$guest" ]; then
	expect 1 "/dev/kvm" -- boot --kernel "$guest" --timeout 5
fi
# The same errors through the CLI's `space vm-boot`, which execs space-vmm.
if [ -n "${SPACE_CLI:-}" ] && [ -x "$SPACE_CLI" ]; then
	"$SPACE_CLI" vm-boot --kernel "$tmp/text" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 1 ] || ! grep -q "^space-vmm: .*not a Linux kernel" "$tmp/err"; then
		echo "FAIL: space vm-boot on a text file -> exit $rc, stderr: $(cat "$tmp/err")"
		fails=$((fails + 1))
	fi
fi
"$vmm" --help | grep -q "Exit status" || { echo "FAIL: --help"; fails=$((fails + 1)); }
# The console log's cap is always there: a cap below 8 KiB or above 1 TiB is a usage error, not "no cap".
for bad in 100 4K 2T 0 x; do
	"$vmm" run --kernel "$tmp/text" --control "$tmp/c.sock" --log "$tmp/l" --log-max "$bad" >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || { echo "FAIL: space-vmm run --log-max $bad -> exit $rc, wanted 2"; fails=$((fails + 1)); }
done
[ -e "$tmp/l" ] && { echo "FAIL: a refused --log-max still opened the log"; fails=$((fails + 1)); }
# boot is run in the foreground: one parser, so each malformed value gets the same "space-vmm: <reason>"
# and exit 2 from both verbs (run: with its required --control and --log), before anything is opened.
both() { # both PATTERN -- args...
	pat=$1
	shift 2
	expect 2 "$pat" -- boot --kernel "$tmp/text" "$@"
	expect 2 "$pat" -- run --kernel "$tmp/text" --control "$tmp/c.sock" --log "$tmp/l" "$@"
}
both "--cpus wants" -- --cpus 0
both "--memory wants" -- --memory 8
both "--timeout wants" -- --timeout x
both "--vsock wants CID:PATH" -- --vsock 3
both "--vsock CID must be" -- --vsock 2:"$tmp/v.sock"
both "--mac wants a unicast" -- --mac 01:00:00:00:00:01
both "--net fd:N wants" -- --net fd:x
both "at most 8 disks" -- --disk a --disk b --disk c --disk d --disk e --disk f --disk g --disk h --disk i
both "--jail-uid/--jail-gid want" -- --jail-root "$tmp/j" --jail-uid 0 --jail-gid 5
both "go together" -- --jail-root "$tmp/j" --jail-uid 5
both "go together" -- --netns
both "--log-max wants" -- --log-max 100
both "--gate needs --ready-fd" -- --gate
expect 2 "run needs --control" -- run --kernel "$tmp/text" --log "$tmp/l"
expect 2 "both name the console" -- boot --kernel "$tmp/text" --log "$tmp/l" --console-log "$tmp/cl"
[ -e "$tmp/l" ] && { echo "FAIL: a refused command line opened the log"; fails=$((fails + 1)); }
# An fd:N that is not a TAP is a setup error (1) for both.
expect 1 "is not a TAP" -- boot --kernel "$tmp/text" --net fd:0 </dev/null
expect 1 "is not a TAP" -- run --kernel "$tmp/text" --control "$tmp/c.sock" --log "$tmp/l" --net fd:0 </dev/null
# Both check the image before KVM; run reports the reason in its status file and on its ready fd too.
expect 1 "not a Linux kernel" -- boot --kernel "$tmp/text" --log "$tmp/l2" --control "$tmp/c2.sock"
expect 1 "not a Linux kernel" -- run --kernel "$tmp/text" --control "$tmp/c.sock" --log "$tmp/l" \
	--status "$tmp/st" --ready-fd 3 --foreground 3>"$tmp/ready"
grep -q "not a Linux kernel" "$tmp/st" 2>/dev/null || { echo "FAIL: run's status file: $(cat "$tmp/st")"; fails=$((fails + 1)); }
grep -q "^error .*not a Linux kernel" "$tmp/ready" ||
	{ echo "FAIL: run's ready fd: $(cat "$tmp/ready")"; fails=$((fails + 1)); }
# --help from either verb: the usage with the exit statuses, on stdout, status 0.
for verb in boot run; do
	"$vmm" $verb --help | grep -q "Exit status of $verb" || { echo "FAIL: $verb --help"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] && echo "ok"
exit $((fails > 0))
