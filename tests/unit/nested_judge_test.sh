#!/bin/bash
# The nested suite's judge and retry policy (tests/nested/nested-judge.sh), without nested-kvm: a stub in
# its place ($NESTED_KVM) plays, run by run, what the real one can do (run the command and return its
# status, exit 75 for an emulator hang, 125 for a VM without a result, before or after the script
# started, hang while booting), and fake inside scripts leave complete, partial and failing results.
# Checks the decisions: a result without its completion record, with a count that does not match or with a
# FAIL line fails; only 75 and a 125 before the start are run once more, saying why; a failed check, the
# script's own status, 124 and a 125 after the start are not.
set -u
here=$(cd "$(dirname "$0")" && pwd)
judge=$here/../nested/nested-judge.sh
tmp=$(mktemp -d /tmp/space-nested-judge.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0 checks=0
check() { # check DESCRIPTION CONDITION-STATUS
	checks=$((checks + 1))
	if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}

# The stub: one line of $tmp/plan per invocation, in order; every invocation's arguments go to $tmp/calls.
#   run        run the command, exit with its status       run:N    run the command, then exit N
#   start:N    only the wrapper's start marker, exit N      none:N   run nothing, exit N
#   hang       a VM that never starts the command: waits on a child until it is killed, then exits 125
#   freeze     a VM that starts the command and freezes at once (no heartbeat): the same wait, then 125
cat > "$tmp/stub" <<'STUB'
#!/bin/sh
# Builtins only where it can: the machine may be loaded, and this runs some twenty times.
n=0
[ -f "$STUB_DIR/count" ] && read -r n < "$STUB_DIR/count"
n=$((n + 1))
echo "$n" > "$STUB_DIR/count"
echo "$*" >> "$STUB_DIR/calls"
i=0 action=
while read -r line; do
	i=$((i + 1))
	[ "$i" = "$n" ] && { action=$line; break; }
done < "$STUB_DIR/plan"
rw=
while [ $# -gt 0 ]; do
	case $1 in
	--rw) rw=$2; shift 2 ;;
	--timeout | --mem | --cpus) shift 2 ;;
	--) shift; break ;;
	*) shift ;;
	esac
done
case $action in
run) "$@"; exit $? ;;
run:*) "$@"; exit "${action#run:}" ;;
start:*) : > "$rw/.nested-started"; exit "${action#start:}" ;;
none:*) exit "${action#none:}" ;;
hang) sleep 60 & wait $!; exit 125 ;;
freeze) : > "$rw/.nested-started"; "$STUB_DIR/qemu-system-x86_64" 60 & wait $!; exit 125 ;;
*) echo "stub: no plan for call $n" >&2; exit 99 ;;
esac
STUB
chmod +x "$tmp/stub"
# The frozen VM's emulator: a sleep by that name, for the probe said at a freeze.
cp "$(command -v sleep)" "$tmp/qemu-system-x86_64"
export NESTED_KVM=$tmp/stub STUB_DIR=$tmp
# shellcheck source=../nested/nested-judge.sh
. "$judge"

# An inside script: SCRIPT-NAME in $tmp/w, writing LINES to result.txt then exiting STATUS.
inside() { # inside NAME STATUS LINE...
	local name=$1 st=$2
	shift 2
	{
		for l in "$@"; do printf 'echo %q >> %q\n' "$l" "$tmp/w/result.txt"; done
		echo "exit $st"
	} > "$tmp/w/$name.sh"
}
# run_with PLAN... : a fresh work dir and plan; nested_run of $script there; sets rc, calls, notes.
run_with() {
	rm -rf "$tmp/w" "$tmp/count" "$tmp/calls"
	mkdir -p "$tmp/w"
	printf '%s\n' "$@" > "$tmp/plan"
	make_script
	nested_run "$tmp/w" "$tmp/w/inside.sh" --mem 64 2> "$tmp/stderr"
	rc=$?
	calls=$(wc -l < "$tmp/calls")
	notes=$(cat "$tmp/w/nested-run.txt" 2>/dev/null)
}
judged() { nested_judge "$tmp/w" "$@" > "$tmp/verdict"; }
has() { grep -qF -- "$1" <<< "$2"; }
good() { inside inside 0 "PASS: one" "PASS: two" "DONE checks=2"; }

# ---- the judge alone ----
mkdir -p "$tmp/w"
result() { printf '%s\n' "$@" > "$tmp/w/result.txt"; rm -f "$tmp/w/nested-run.txt"; }
result "PASS: one" "PASS: two" "DONE checks=2"
judged 0; check "complete result passes" $?
result "PASS: one" "PASS: two"
judged 0; r=$?
check "missing record fails" $((r == 0)) && has "no completion record" "$(cat "$tmp/verdict")"
check "missing record: the reason is printed" $?
result "PASS: one" "DONE checks=2"
judged 0; check "count mismatch (2 checks, 1 PASS) fails" $(($? == 0))
result "PASS: one" "FAIL: two" "DONE checks=2"
judged 0; check "a FAIL line fails" $(($? == 0))
result "PASS: one" "PASS: two" "DONE checks=2"
judged 0 3; check "expected count 3, record says 2: fails" $(($? == 0))
judged 1; check "a complete result with a non-zero run status fails" $(($? == 0))
result "PASS: one" "DONE checks=1" "PASS: two"
judged 0; check "a check after the record fails" $(($? == 0))
result "PASS: one" "DONE checks=1" "DONE checks=1"
judged 0; check "two records fail" $(($? == 0))
result "DONE checks=0"
judged 0; check "a record of no checks fails" $(($? == 0))
result "DONE checks=3"
judged 0 3; check "host-judged runs: record 3, expected 3 passes" $?
judged 0; check "host-judged runs: record 3 with no PASS line and no expected count fails" $(($? == 0))
result "PASS: a" "blocked: x" "DONE checks=1 attacks=1"
judged 0; check "extra words after the count are allowed" $?
rm -f "$tmp/w/result.txt"
judged 0; check "no result.txt fails" $(($? == 0))
result "PASS: one" "DONE checks=1"
(nested_report "$tmp/w" 0 > /dev/null); check "nested_report exits 0 on a complete result" $?
result "PASS: one"
(nested_report "$tmp/w" 0 > /dev/null); check "nested_report exits 1 without a record" $(($? == 0))
(nested_report "$tmp/w" > /dev/null 2>&1); check "nested_report without the run's status is refused" $(($? == 0))

# ---- retries ----
make_script() { good; }
run_with none:75 run
check "75 (emulator hang) is run once more and then passes: rc $rc, $calls calls" $((rc != 0 || calls != 2))
has "nested-kvm exited 75 (emulator hang): running once more" "$notes"; check "the retry says why (75)" $?
has "nested-kvm exited 75 (emulator hang): running once more" "$(cat "$tmp/stderr")"; check "...on stderr too" $?
judged "$rc"; check "the retried run is judged on its own complete result" $?
has "running once more" "$(cat "$tmp/verdict")"; check "the judge prints the retry note" $?
has "--timeout 1200 --cpus 1 --mem 64 --rw $tmp/w -- sh" "$(head -n 1 "$tmp/calls")"; check "nested-kvm gets --timeout, one CPU, the options, --rw" $?

run_with none:125 run
check "125 before the script started is run once more: rc $rc, $calls calls" $((rc != 0 || calls != 2))
has "exited 125 before the script started" "$notes"; check "the retry says why (125)" $?

run_with start:75 run
check "75 while the script ran is run once more: rc $rc, $calls calls" $((rc != 0 || calls != 2))

run_with start:125 run
check "125 after the script started is not run again: rc $rc, $calls calls" $((rc != 125 || calls != 1))
has "after the script started" "$notes"; check "...and says so" $?
judged "$rc"; check "...and fails" $(($? == 0))

run_with run:124 run
check "124 (timeout) is not run again: rc $rc, $calls calls" $((rc != 124 || calls != 1))

run_with none:75 none:75 none:75
check "75 every time: two runs at most by default, status 75: rc $rc, $calls calls" $((rc != 75 || calls != 2))
has "giving up" "$notes"; check "...and says it gave up" $?
NESTED_RETRIES=2 run_with none:75 none:75 run
check "NESTED_RETRIES=2: a third run: rc $rc, $calls calls" $((rc != 0 || calls != 3))
NESTED_RETRIES=0 run_with none:75 run
check "NESTED_RETRIES=0: no retry: rc $rc, $calls calls" $((rc != 75 || calls != 1))

make_script() { inside inside 1 "PASS: one"; }
run_with run run
check "the script's own failure (status 1) is not run again: rc $rc, $calls calls" $((rc != 1 || calls != 1))
has "running once more" "$notes"; check "...no retry note" $(($? == 0))
judged "$rc"; check "...and a script that died after one check fails" $(($? == 0))

make_script() { inside inside 0 "PASS: one" "FAIL: two" "DONE checks=2"; }
run_with run run
check "a failed check is not run again: rc $rc, $calls calls" $((rc != 0 || calls != 1))
judged "$rc"; check "...and fails" $(($? == 0))

make_script() { inside inside 75 "PASS: one" "DONE checks=1"; }
run_with run run
check "the script's own status 75 is not an emulator hang: rc $rc, $calls calls" $((rc != 75 || calls != 1))

make_script() { good; }
run_with run:75 run
check "75 after the script ended: judged on its result, not run again: rc $rc, $calls calls" $((rc != 0 || calls != 1))
has "after the script had ended with status 0" "$notes"; check "...and says so" $?

make_script() { inside inside 1 "PASS: one"; }
run_with run:75 run
check "75 after a script that exited 1 (recorded by the wrapper): status 1, not run again: rc $rc, $calls calls" $((rc != 1 || calls != 1))

# A hang while the script ran: its partial result is kept aside, never judged with the next run's.
make_script() {
	cat > "$tmp/w/inside.sh" <<EOF
if [ "\$(cat "$tmp/count")" = 1 ]; then
	echo "PASS: one" >> "$tmp/w/result.txt"
	kill -KILL \$PPID # the wrapper: as if the VM stopped here
	exit 0
fi
printf 'PASS: one\nPASS: two\nDONE checks=2\n' >> "$tmp/w/result.txt"
EOF
}
run_with run:75 run
check "75 with the script cut short is run once more: rc $rc, $calls calls" $((rc != 0 || calls != 2))
[ "$(cat "$tmp/w/result.attempt1.txt" 2>/dev/null)" = "PASS: one" ]
check "the first run's partial result is kept in result.attempt1.txt" $?
judged "$rc"; check "the second run is judged alone (2 checks)" $?
has "result.attempt1.txt" "$notes"; check "...and the note names the kept result" $?

NESTED_BOOT_TIMEOUT=1 run_with hang run
check "a VM that does not start the script in time is stopped and run once more: rc $rc, $calls calls" $((rc != 0 || calls != 2))
has "did not start the script within 1 s" "$notes"; check "...saying why" $?
has "exited 125 before the script started" "$notes"; check "...as a 125 before the start" $?

# The test itself killed (meson's timeout): the VM is stopped through nested-kvm, nothing is left.
rm -rf "$tmp/w" "$tmp/count" "$tmp/calls"; mkdir -p "$tmp/w"; echo hang > "$tmp/plan"; good
(NESTED_BOOT_TIMEOUT=1379 nested_run "$tmp/w" "$tmp/w/inside.sh" 2> /dev/null) &
runner=$!
for _ in $(seq 50); do [ -s "$tmp/calls" ] && break; sleep 0.1; done
sleep 0.5
# Every process below the runner (the stub, its sleep, the watchdog and its sleep), by pid.
below() { local k kids=; read -r kids < "/proc/$1/task/$1/children" 2>/dev/null; for k in $kids; do echo "$k"; below "$k"; done; }
procs=$(below "$runner")
kill -TERM "$runner"
wait "$runner"
rc=$?
check "nested_run killed by TERM exits 143: rc $rc" $((rc != 143))
check "...it had started the stub and the watchdog: $(echo $procs)" $(($(echo "$procs" | grep -c .) < 2))
# Gone within 5 s (a loaded machine delivers the signals late).
for _ in $(seq 50); do
	gone=
	for p in $procs; do [ -d "/proc/$p" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] && gone="$gone $p"; done
	[ -z "$gone" ] && break
	sleep 0.1
done
check "...and every one of them is gone: '$gone'" $([ -z "$gone" ]; echo $?)

# ---- a VM that freezes while the script runs: no heartbeat, stopped long before the run's timeout,
# said, not run again; a slow script whose VM is alive (the wrapper's heartbeat) is not stopped ----
make_script() { good; }
t0=$SECONDS
NESTED_FREEZE_TIMEOUT=3 run_with freeze run
check "a frozen VM (no heartbeat for 3 s) is stopped and not run again: rc $rc, $calls calls, $((SECONDS - t0)) s" \
	$((rc == 0 || calls != 1 || SECONDS - t0 > 30))
has "the emulated VM froze: no heartbeat from inside for 3 s" "$notes"; check "...saying so" $?
has "after the VM froze while the script ran: not run again" "$notes"; check "...and that it is not run again" $?
echo "$notes" | grep -Eq "at the freeze: emulator pid [0-9]+ used [0-9] % of a CPU over 3 s; its threads: [a-z_0-9]+ x[0-9]"
check "...and what the emulator was doing (a blocked one: near 0 % of a CPU): $(echo "$notes" | grep 'at the freeze')" $?
judged "$rc"; check "...and the run fails" $(($? == 0))
# The heartbeat comes every 2 s of the VM's time: a bound of 5 s leaves room for a loaded machine.
make_script() { { echo 'sleep 9'; echo "printf 'PASS: slow\nDONE checks=1\n' >> '$tmp/w/result.txt'"; } > "$tmp/w/inside.sh"; }
NESTED_FREEZE_TIMEOUT=5 run_with run
check "a script slower than the freeze bound in a live VM is not stopped: rc $rc" $rc
has "froze" "$notes"; check "...and no freeze is said" $(($? == 0))
# The timeline: when each result line appeared, and the slowest steps from it.
make_script() {
	{
		echo "echo 'PASS: quick' >> '$tmp/w/result.txt'"
		echo 'sleep 8'
		echo "printf 'PASS: slow one\nDONE checks=2\n' >> '$tmp/w/result.txt'"
	} > "$tmp/w/inside.sh"
}
run_with run
slow=$(nested_slowest "$tmp/w")
first=$(echo "$slow" | sed -n 2p)
# The watchdog looks every 2 s: the quick line is seen at 0 or 2 s, the slow one at 8-10 s.
check "nested_slowest puts the 8 s step first: '$first' (timeline: $(tr '\n' ';' < "$tmp/w/timeline.txt"))" \
	$(echo "$first" | grep -Eq '^ +([5-9]|10) s  PASS: slow one$'; echo $?)
has "the script ran" "$slow"; check "...and says the script's whole time" $?

# ---- the in-VM watchdog: a script still running 60 s before the run's timeout leaves what the VM was
# doing, which the judge prints; a script that ends in time leaves nothing, and no watchdog behind ----
# NESTED_RUN_TIMEOUT=64: the watchdog reports 4 s after the start.
make_script() { { echo 'sleep 7'; echo "echo 'PASS: slow' >> '$tmp/w/result.txt'"; echo "echo 'DONE checks=1' >> '$tmp/w/result.txt'"; } > "$tmp/w/inside.sh"; }
NESTED_RUN_TIMEOUT=64 run_with run
judged 0
check "a run near its timeout leaves the watchdog's report, and the judge prints it" \
	$(grep -q '^=== nested watchdog' "$tmp/w/nested-watchdog.txt" 2>/dev/null && grep -q 'what the VM was doing' "$tmp/verdict"; echo $?)
make_script() { good; }
NESTED_RUN_TIMEOUT=64 run_with run
sleep 5
check "a run that ends in time leaves no watchdog report" $([ ! -e "$tmp/w/nested-watchdog.txt" ]; echo $?)
dogs=$(pgrep -f "$tmp/w/.nested-diagnose.sh" || true)
check "...and no watchdog process: '$dogs'" $([ -z "$dogs" ]; echo $?)

left=$(ls -A "$tmp/w" | grep '^\.nested' || true)
check "no marker or wrapper left in the work dir: '$left'" $([ -z "$left" ]; echo $?)

echo "nested judge: $checks checks, $fails failed"
echo "DONE checks=$checks"
[ "$fails" = 0 ] && [ "$checks" -gt 0 ]
