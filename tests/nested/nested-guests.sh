#!/bin/sh
# nested suite: every test guest of the guests suite, booted by space-vmm inside ONE nested-kvm VM.
# Arguments: one per guest run, "NAME|GUEST.elf|ARG|ARG..." (the space-vmm boot arguments).
set -u
. "$(dirname "$0")/nested-common.sh"
work=${SPACE_BUILD_DIR:?}/nested-guests
rm -rf "$work"
mkdir -p "$work"
runner=${SPACE_SOURCE_DIR:?}/tests/guests/run-guest.sh
{
	echo "export SPACE_VMM_PATH='${SPACE_VMM_PATH:?}' TMPDIR='$work'"
	echo "checks=0"
	i=0
	for spec in "$@"; do
		line="sh '$runner'"
		old_ifs=$IFS
		IFS='|'
		for part in $spec; do line="$line '$part'"; done
		IFS=$old_ifs
		echo "$line > '$work/run$i.log' 2>&1; echo \$? > '$work/run$i.rc'; checks=\$((checks + 1))"
		i=$((i + 1))
	done
	# The completion record: every run got its status file (judged below).
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
[ $fails -eq 0 ] || tail -n 20 "$work/nested.log"
exit $((fails > 0))
