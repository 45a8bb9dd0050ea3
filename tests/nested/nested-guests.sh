#!/bin/sh
# nested suite: every test guest of the guests suite, booted by space-vmm inside ONE nested-kvm VM.
# Arguments: one per guest run, "NAME|GUEST.elf|ARG|ARG..." (the space-vmm boot arguments).
set -u
. "$(dirname "$0")/nested-common.sh"
work=${SPACE_BUILD_DIR:?}/nested-guests
rm -rf "$work"
mkdir -p "$work"
runner=${SPACE_SOURCE_DIR:?}/tests/guests/run-guest.sh
run_bound=${NESTED_GUEST_BOUND:-150}
{
	echo "export SPACE_VMM_PATH='${SPACE_VMM_PATH:?}' TMPDIR='$work'"
	echo "checks=0"
	i=0
	for spec in "$@"; do
		name=${spec%%|*}
		line="sh '$runner'"
		old_ifs=$IFS
		IFS='|'
		for part in $spec; do line="$line '$part'"; done
		IFS=$old_ifs
		# A progress line on the VM's console (nested.log) before each run, and a bound per run: a
		# space-vmm that stops answering is that run's failure (status 124), and the runs after it
		# still run. Each run's own --timeout is 60 s; the bound leaves room for the emulator's pace.
		echo "echo \"nested-guests: run $i ($name) started at \$(date +%s)\""
		echo "timeout -k 10 $run_bound $line > '$work/run$i.log' 2>&1; echo \$? > '$work/run$i.rc'; checks=\$((checks + 1))"
		i=$((i + 1))
	done
	# The completion record: every run got its status file (judged below).
	echo "echo \"nested-guests: all runs ended at \$(date +%s)\""
	echo "echo \"DONE checks=\$checks\" >> '$work/result.txt'"
} > "$work/inside.sh"
# Every guest together takes about a minute: a run far beyond that is a failure, not run again.
NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-480} nested_run "$work" "$work/inside.sh" > "$work/nested.log" 2>&1
run_rc=$?
fails=0
i=0
for spec in "$@"; do
	name=${spec%%|*}
	rc=$(cat "$work/run$i.rc" 2>/dev/null || echo missing)
	if [ "$rc" = 0 ]; then
		echo "PASS: $name (run $i)"
	else
		echo "FAIL: $name (run $i): status $rc"
		cat "$work/run$i.log" 2>/dev/null | tail -n 20
		fails=$((fails + 1))
	fi
	i=$((i + 1))
done
[ $i -gt 0 ] || { echo "FAIL: no guest runs given"; exit 1; }
nested_judge "$work" "$run_rc" "$i" || fails=$((fails + 1))
# Where the VM was: the progress lines, then the console's end.
[ $fails -eq 0 ] || { grep '^nested-guests: ' "$work/nested.log"; tail -n 20 "$work/nested.log"; nested_recap "$work"; }
exit $((fails > 0))
