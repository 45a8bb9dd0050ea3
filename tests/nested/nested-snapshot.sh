#!/bin/sh
# VM snapshot and restore with the snapshot and fork test guests (tests/guests/{snapshot,fork}.c).
#
#   nested-snapshot.sh SNAPSHOT.elf [FORK.elf]            runs everything below inside ONE nested-kvm VM
#   nested-snapshot.sh --inside SNAPSHOT.elf [FORK.elf]   runs it here (skips 77 without /dev/kvm)
#
# snapshot: `space-vmm run` boots the guest; once it counts, the test pauses it, notes the last count,
#   asks for `snapshot FILE` on the control socket and stops it; `space-vmm boot --restore FILE` in a
#   new process must go on counting from there (not from 1) and end with the guest's pattern check and
#   GUEST-OK. The file must be sparse. Then a corrupted copy (one byte flipped), a copy with another
#   format version and a truncated copy must each be refused with exit status 1 and a clear reason.
# fork: the guest is snapshotted while it polls its disk; two restores run at the same time, each with
#   its own disk copy saying FORK-A / FORK-B: both pass, each read back only its own value, and each
#   disk copy got its own FORKED-<c> sector.
set -u
if [ "${1:-}" != "--inside" ]; then
	. "$(dirname "$0")/nested-common.sh"
	work=${SPACE_BUILD_DIR:?}/nested-snapshot
	rm -rf "$work"
	mkdir -p "$work"
	{
		echo "export SPACE_VMM_PATH='${SPACE_VMM_PATH:?}' SPACE_BUILD_DIR='$work' TMPDIR='$work'"
		printf "sh '%s' --inside" "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
		for a in "$@"; do printf " '%s'" "$a"; done
		echo " > '$work/inside.log' 2>&1; echo \$? > '$work/inside.rc'"
		# The completion record: the one run below got its status file (judged here).
		echo "echo 'DONE checks=1' >> '$work/result.txt'"
	} > "$work/run.sh"
	nested_run "$work" "$work/run.sh" > "$work/nested.log" 2>&1
	run_rc=$?
	cat "$work/inside.log" 2>/dev/null
	rc=$(cat "$work/inside.rc" 2>/dev/null || echo missing)
	fails=0
	if [ "$rc" != 0 ]; then
		echo "FAIL: inside nested-kvm: status $rc"
		fails=1
	elif ! grep -q '^PASS: snapshot' "$work/inside.log"; then
		echo "FAIL: inside nested-kvm: status 0 without its final PASS line"
		fails=1
	fi
	nested_judge "$work" "$run_rc" 1 || fails=1
	[ $fails = 0 ] || { tail -n 20 "$work/nested.log"; nested_recap "$work"; }
	exit $fails
fi
shift
snap_elf=$1
fork_elf=${2:-}
vmm=${SPACE_VMM_PATH:?SPACE_VMM_PATH not set}
if [ ! -c /dev/kvm ] || [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "SKIP: no /dev/kvm"
	exit 77
fi
if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 (the control socket client) not found"
	exit 77
fi
# The guest counts in ring 0. Where `space doctor` finds ring 0 emulated (nested PVM: about 1 us per
# instruction), its usual 30M-iteration pause between counts would take minutes: each count is made to
# take about half a second there, from doctor's own figure (and the fork guest's waits in proportion).
delay=30000000
ns=$([ -n "${SPACE_CLI:-}" ] && "$SPACE_CLI" doctor --json 2>/dev/null | python3 -c 'import json, re, sys
for c in json.load(sys.stdin).get("checks", []):
    m = re.search(r"emulated: ([0-9]+) ns per instruction", c.get("detail", ""))
    if c.get("name") == "ring0" and c.get("status") != "ok" and m:
        print(m.group(1))' 2>/dev/null)
if [ -n "$ns" ] && [ "$ns" -gt 0 ]; then
	delay=$((100000000 / ns))
	echo "space doctor: guest kernel code is emulated here ($ns ns per instruction): snapshot.delay=$delay"
fi
# /tmp, not TMPDIR: inside nested-kvm the written-through directory takes no unix sockets.
w=$(mktemp -d /tmp/space-snap.XXXXXX)
daemon_pid=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ctl SOCK REQUEST: one request on the daemon's control socket; prints the reply line.
ctl() {
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
print(s.recv(512).decode().strip())' "$1" "$2"
}

# wait_daemon NAME PATTERN: waits (up to 120 s) for PATTERN in the console of the daemon NAME;
# gives up the whole test if it does not come or the daemon ended.
wait_daemon() {
	i=0
	while [ $i -lt 600 ]; do
		grep -q "$2" "$w/$1.orig" 2>/dev/null && return 0
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.2
		i=$((i + 1))
	done
	fail "$1: no '$2' on the console"
	cat "$w/$1.orig"
	exit 1
}

# start_daemon NAME ELF [boot args]: `space-vmm run` in the foreground (in the background of this shell).
start_daemon() {
	name=$1 elf=$2
	shift 2
	"$vmm" run --kernel "$elf" --control "$w/$name.ctl" --log "$w/$name.orig" --foreground --no-seccomp "$@" &
	daemon_pid=$!
}

# snapshot_daemon NAME: pause, note the console, save to $w/NAME.snap, stop.
snapshot_daemon() {
	r=$(ctl "$w/$1.ctl" pause)
	[ "$r" = "ok paused" ] || fail "$1: pause answered '$r'"
	cp "$w/$1.orig" "$w/$1.at-pause"
	t0=$(date +%s%N)
	r=$(ctl "$w/$1.ctl" "snapshot $w/$1.snap")
	t1=$(date +%s%N)
	[ "$r" = "ok snapshot $w/$1.snap" ] || fail "$1: snapshot answered '$r'"
	echo "$1: snapshot request answered in $(((t1 - t0) / 1000000)) ms (client start included)"
	r=$(ctl "$w/$1.ctl" stop)
	[ "$r" = "ok stopping" ] || fail "$1: stop answered '$r'"
	wait "$daemon_pid"
	daemon_pid=
	grep -a '^space-vmm: snapshot .* saved in' "$w/$1.orig"
}

# ---- snapshot: the count goes on in a new process ----
start_daemon count "$snap_elf" --memory 256 --cmdline "console=ttyS0 snapshot.delay=$delay snapshot.target=40"
wait_daemon count '^count 2$'
snapshot_daemon count
last=$(grep -a '^count [0-9]*$' "$w/count.at-pause" | tail -n 1 | cut -d' ' -f2)
apparent=$(stat -c %s "$w/count.snap")
used=$(($(stat -c %b "$w/count.snap") * $(stat -c %B "$w/count.snap")))
echo "count: paused after count $last; snapshot file $((apparent >> 20)) MiB apparent, $((used >> 10)) KiB on disk"
[ "$used" -lt $((32 << 20)) ] || fail "snapshot of a guest that touched ~2 MiB uses $used bytes on disk"
"$vmm" boot --restore "$w/count.snap" --timeout 120 --quiet --console-log "$w/count.restored" 2>"$w/count.err"
rc=$?
first=$(grep -a '^count [0-9]*$' "$w/count.restored" | head -n 1 | cut -d' ' -f2)
echo "count: restored, first full count line $first; $(grep -a '^GUEST-OK' "$w/count.restored")"
[ $rc -eq 0 ] || fail "restore exited $rc: $(cat "$w/count.err")"
grep -q '^GUEST-OK snapshot$' "$w/count.restored" || fail "no GUEST-OK snapshot after restore"
grep -q '^snapshot: pattern written$' "$w/count.restored" && fail "the restored guest started over"
if [ -z "$first" ] || [ -z "$last" ] || [ "$first" -le "$last" ] || [ "$first" -gt $((last + 2)) ]; then
	fail "restored count starts at '${first}', paused after '${last}'"
fi

# ---- refused snapshots: exit 1, a reason, nothing left running ----
# refuse NAME WHY-PATTERN: restores $w/NAME and expects exit 1 with WHY-PATTERN on stderr.
refuse() {
	"$vmm" boot --restore "$w/$1" --timeout 30 --quiet 2>"$w/$1.err"
	rc=$?
	[ $rc -eq 1 ] || fail "$1: restore exited $rc, want 1"
	grep -q "^space-vmm: .*$2" "$w/$1.err" || fail "$1: no clear reason: $(cat "$w/$1.err")"
	pgrep -f "restore $w/$1" >/dev/null && fail "$1: a space-vmm is still running"
	echo "$1: refused: $(cat "$w/$1.err")"
}
cp --sparse=always "$w/count.snap" "$w/corrupt"
printf '\377' | dd of="$w/corrupt" bs=1 seek=300 conv=notrunc 2>/dev/null
refuse corrupt 'checksum mismatch'
cp --sparse=always "$w/count.snap" "$w/version"
printf '\002' | dd of="$w/version" bs=1 seek=8 conv=notrunc 2>/dev/null
refuse version 'format version 2'
cp --sparse=always "$w/count.snap" "$w/truncated"
truncate -s 64M "$w/truncated"
refuse truncated 'truncated'
printf 'not a snapshot at all' > "$w/garbage"
refuse garbage 'truncated\|bad magic'

# ---- fork: two restores of one snapshot, each with its own disk ----
if [ -n "$fork_elf" ]; then
	# sector N of the disk holds "SPACE-SECTOR-N" (as tests/guests/run-guest.sh writes it)
	i=0
	while [ $i -lt 2048 ]; do printf 'SPACE-SECTOR-%-498d\n' $i; i=$((i + 1)); done > "$w/disk0"
	start_daemon fork "$fork_elf" --memory 64 --disk "$w/disk0" \
		--cmdline "console=ttyS0 fork.poll=$((delay / 30)) fork.wait=$((delay * 2 / 3))"
	wait_daemon fork '^fork: ready$'
	snapshot_daemon fork
	for c in A B; do
		cp "$w/disk0" "$w/disk$c"
		printf 'FORK-%s' "$c" | dd of="$w/disk$c" bs=512 seek=1 conv=notrunc 2>/dev/null
	done
	"$vmm" boot --restore "$w/fork.snap" --disk "$w/diskA" --timeout 120 --quiet \
		--console-log "$w/forkA.log" 2>"$w/forkA.err" &
	pa=$!
	"$vmm" boot --restore "$w/fork.snap" --disk "$w/diskB" --timeout 120 --quiet \
		--console-log "$w/forkB.log" 2>"$w/forkB.err" &
	pb=$!
	wait $pa
	ra=$?
	wait $pb
	rb=$?
	for c in A B; do
		eval "rc=\$r$(echo $c | tr AB ab)"
		[ "$rc" -eq 0 ] || fail "fork $c exited $rc: $(cat "$w/fork$c.err")"
		grep -q '^GUEST-OK fork$' "$w/fork$c.log" || fail "fork $c: no GUEST-OK: $(cat "$w/fork$c.log")"
		grep -q "^fork: value $c\$" "$w/fork$c.log" || fail "fork $c did not see its own disk"
		[ "$(dd if="$w/disk$c" bs=512 skip=2 count=1 2>/dev/null | head -c 8)" = "FORKED-$c" ] ||
			fail "fork $c: its disk lacks FORKED-$c"
	done
	echo "fork: A: $(grep -a '^GUEST-OK' "$w/forkA.log"), B: $(grep -a '^GUEST-OK' "$w/forkB.log")"
fi

if [ $fails -ne 0 ]; then
	echo "FAIL: $fails check(s)"
	exit 1
fi
echo "PASS: snapshot${fork_elf:+, fork}"
