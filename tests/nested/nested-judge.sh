# How a nested run is retried and how its result is judged (POSIX sh, sourced). nested-common.sh sources
# it after its host checks; tests/unit/nested_judge_test.sh sources it alone, with a stub nested-kvm in
# $NESTED_KVM, to check every decision below.
#
# The completion record. The script run inside nested-kvm writes one line per check to WORKDIR/result.txt,
# "PASS: ..." or "FAIL: ...", and after its last check the line
#     DONE checks=N        (N: the checks it ran; other words may follow, e.g. "attacks=M")
# Without it a run that died half way looks like one with nothing to report. A run passes only when
# nested-kvm exited 0, the record is the last line and there is one, N > 0, N is the number of PASS lines
# (and the number the caller expects, when it knows it), and no line is FAIL. Scripts whose checks are
# judged on the host (from files the runs left) count their runs in N and give the expected count.
#
# Retries. A run is run once more only when nothing of ours can have failed:
#   75   nested-kvm saw the emulated VM's own kernel lock up while our script had not finished;
#   125  the VM gave no result, and our script had not started (no WORKDIR/.nested-started: the
#        wrapper below writes it before anything else).
# At most NESTED_RETRIES more runs (default 1, at most 2), each saying why. Anything else is the result:
# the script's own status, a check that failed, a timeout (124, or 125 after the script started).
# Every note (retries, why a status fails) goes to stderr and to WORKDIR/nested-run.txt, which
# nested_judge prints.

: "${nested_tool:=${NESTED_KVM:?nested-judge.sh: set nested_tool or NESTED_KVM}}"

# nested_kill_below PID SIGNAL: sends SIGNAL to every process below PID (deepest first), not to PID.
nested_kill_below() {
	# The kernel's list of children (read without a process); ps where it is missing.
	_nk_kids=
	if [ -r "/proc/$1/task/$1/children" ]; then
		read -r _nk_kids < "/proc/$1/task/$1/children" || true
	else
		_nk_kids=$(ps -o pid= --ppid "$1" 2>/dev/null)
	fi
	for _nk_c in $_nk_kids; do
		nested_kill_below "$_nk_c" "$2"
		kill "-$2" "$_nk_c" 2>/dev/null || true
	done
}

# kill_tree PID: SIGKILL to PID and every process below it (processes this test started).
kill_tree() {
	nested_kill_below "$1" KILL
	kill -KILL "$1" 2>/dev/null || true
}

# nested_emulator_probe PID: one line on the emulators (qemu-system-*) below PID: the CPU each used over 3 s
# and where its threads wait. Said when a VM froze, to tell an emulator spinning on a stuck guest (a whole
# CPU or more) from one blocked in the host (near 0 %, and the kernel function it sleeps in).
nested_emulator_probe() {
	_ep_all= _ep_q=
	_ep_walk() {
		_ep_k=
		[ -r "/proc/$1/task/$1/children" ] && read -r _ep_k < "/proc/$1/task/$1/children"
		for _ep_c in $_ep_k; do _ep_all="$_ep_all $_ep_c"; _ep_walk "$_ep_c"; done
	}
	_ep_walk "$1"
	for _ep_p in $_ep_all; do
		case $(cat "/proc/$_ep_p/comm" 2>/dev/null) in qemu-system-*) _ep_q="$_ep_q $_ep_p" ;; esac
	done
	[ -n "$_ep_q" ] || { echo "no emulator process found below $1"; return 0; }
	_ep_ticks() { awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' "/proc/$1/stat" 2>/dev/null; }
	for _ep_p in $_ep_q; do
		_ep_a=$(_ep_ticks "$_ep_p")
		sleep 3
		_ep_b=$(_ep_ticks "$_ep_p")
		_ep_w=$(for _ep_t in /proc/"$_ep_p"/task/*; do cat "$_ep_t/wchan" 2>/dev/null; echo; done | sort | uniq -c | sort -rn | head -n 4 | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), (($2 == "" || $2 == "0") ? "running" : $2), $1 }')
		echo "emulator pid $_ep_p used $(( (${_ep_b:-0} - ${_ep_a:-0}) * 100 / $(getconf CLK_TCK) / 3 )) % of a CPU over 3 s; its threads: $_ep_w"
	done
}

# nested_note WORKDIR TEXT...: one line for the test's output (see nested_judge) and for stderr.
nested_note() {
	_nn_dir=$1
	shift
	echo "nested-kvm: $*" >> "$_nn_dir/nested-run.txt"
	echo "nested-kvm: $*" >&2
}

# nested_retry_reason WORKDIR STATUS: prints why a run that ended with STATUS is run once more, or nothing
# when STATUS is the run's result.
nested_retry_reason() {
	case $2 in
	75) [ -e "$1/.nested-rc" ] || echo "nested-kvm exited 75 (emulator hang)" ;;
	125) [ -e "$1/.nested-started" ] || echo "nested-kvm exited 125 before the script started (the VM gave no result)" ;;
	esac
}

# nested_run_stop: what nested_run's TERM/INT trap does: the run's VM (through nested-kvm) and its boot
# watchdog, whichever of them has started.
nested_run_stop() {
	if [ -n "${_nr_pid:-}" ]; then
		nested_kill_below "$_nr_pid" TERM
		wait "$_nr_pid"
	fi
	[ -n "${_nr_dog:-}" ] && kill_tree "$_nr_dog"
	rm -f "$_nr_dir/.nested-wrapper.sh" "$_nr_dir/.nested-diagnose.sh"
}

# nested_diagnose_script: a script that prints what the nested VM is doing, for a run about to time out:
# its processes (state, wait channel, CPU time), memory, the kernel's last messages and the end of every
# sandbox's log in the state directories the scripts make under /tmp.
nested_diagnose_script() {
	cat <<'DIAG'
echo "=== nested watchdog at $(date -u +%T), uptime $(cut -d' ' -f1 /proc/uptime) s"
ps -eo pid,ppid,stat,etime,time,wchan:22,args 2>/dev/null | grep -v ' \[.*\]$' | cut -c1-200
echo "=== memory"; free -m 2>/dev/null
echo "=== kernel"; dmesg 2>/dev/null | tail -n 25
for f in /tmp/*/run/*/sandbox.log; do
	[ -f "$f" ] || continue
	echo "=== $f"
	tail -n 15 "$f" | cut -c1-200
done
DIAG
}

# nested_run WORKDIR SCRIPT [nested-kvm options...]: runs `sh SCRIPT` inside nested-kvm with WORKDIR written
# through, retried as said above; returns the run's status (0 only when the script ran and exited 0).
# The run is bounded by --timeout $NESTED_RUN_TIMEOUT (default 1200 s, under the suite's 1500); a VM that
# has not started SCRIPT within $NESTED_BOOT_TIMEOUT s (default 300) is stopped, which nested-kvm reports
# as 125 before the start.
nested_run() {
	_nr_dir=$1 _nr_script=$2
	shift 2
	_nr_retries=${NESTED_RETRIES:-1}
	case $_nr_retries in 0 | 1 | 2) ;; *) _nr_retries=2 ;; esac
	_nr_attempt=1
	rm -f "$_nr_dir/nested-run.txt" "$_nr_dir"/result.attempt*.txt
	while :; do
		rm -f "$_nr_dir/.nested-started" "$_nr_dir/.nested-rc" "$_nr_dir/result.txt"
		# The wrapper marks the start, then records the script's own status, so that nested-kvm's 75
		# and 125 can be told apart from the script's.
		# Its watchdog, every 2 s of the VM's time: writes a heartbeat (WORKDIR/.nested-alive, the VM's
		# uptime), which the host watches to tell a frozen VM from a slow one (below); appends to
		# WORKDIR/timeline.txt "SECONDS LINES" when result.txt has grown (nested_slowest reads it); and 60 s
		# before the run's timeout writes what the VM was doing (nested_diagnose_script), so that a run that
		# hangs says where. The deadline is the host's clock (the VM's starts from it); in the VM the time is
		# counted on its uptime, read without a process (under emulation each sleep and fork takes far longer
		# than it says); the watchdog ends within 2 s of the wrapper. The script gets its pid in
		# NESTED_WATCHDOG (nested-escape leaves it and its sleeps out of the host's process list).
		rm -f "$_nr_dir/nested-watchdog.txt" "$_nr_dir/timeline.txt" "$_nr_dir/.nested-alive" "$_nr_dir/.nested-frozen"
		nested_diagnose_script > "$_nr_dir/.nested-diagnose.sh"
		{
			printf 'dir="%s" script="%s" d=%s\n' "$_nr_dir" "$_nr_script" \
				"$(($(date +%s) + ${NESTED_RUN_TIMEOUT:-1200} - 60))"
			cat <<'WRAPPER'
touch "$dir/.nested-started"
read t0 _ < /proc/uptime
t0=${t0%%.*}
( w=$$ now=$(date +%s) t=$t0 n=0
  while [ $((now + t - t0)) -lt $d ]; do
    echo "$t" > "$dir/.nested-alive"
    if [ -f "$dir/result.txt" ]; then
      m=$(wc -l < "$dir/result.txt")
      [ "$m" != "$n" ] && echo "$((t - t0)) $m" >> "$dir/timeline.txt" && n=$m
    fi
    sleep 2; kill -0 $w || exit 0; read t _ < /proc/uptime; t=${t%%.*}
  done
  sh "$dir/.nested-diagnose.sh" > "$dir/nested-watchdog.txt" 2>&1 ) < /dev/null > /dev/null 2>&1 &
dog=$!
NESTED_WATCHDOG=$dog sh "$script"
rc=$?
kill $(cat /proc/$dog/task/$dog/children 2>/dev/null) $dog 2>/dev/null
read t _ < /proc/uptime
[ -f "$dir/result.txt" ] && echo "$((${t%%.*} - t0)) $(wc -l < "$dir/result.txt")" >> "$dir/timeline.txt"
echo "$rc" > "$dir/.nested-rc"
exit "$rc"
WRAPPER
		} > "$_nr_dir/.nested-wrapper.sh"
		# This test killed (meson's timeout, ^C): the VM goes too, through nested-kvm, which cleans up. Set
		# before anything starts, so a signal at any moment finds it; it stays after the run (harmless
		# then; its exit still runs the caller's EXIT trap).
		_nr_pid= _nr_dog=
		trap 'nested_run_stop; exit 143' TERM INT
		# One emulated CPU (NESTED_CPUS, default 1) unless the caller asks for more. Most of the emulator's
		# faults seen in this suite came with two emulated CPUs (the emulated host frozen with both CPUs
		# spinning, its kernel's GS base wrong after a VM exit, guests' triple faults and a hung boot); one
		# CPU gives the emulator's SVM no cross-CPU interrupt, TLB shootdown or vCPU migration to race on.
		# It does not end them all: a run on one CPU has also frozen idle (the emulator at 0 % of a CPU).
		"$nested_tool" --timeout "${NESTED_RUN_TIMEOUT:-1200}" --cpus "${NESTED_CPUS:-1}" "$@" --rw "$_nr_dir" \
			-- sh "$_nr_dir/.nested-wrapper.sh" &
		_nr_pid=$!
		# Boot and freeze watchdog: stops the VM (qemu, below nested-kvm), so that nested-kvm ends with 125.
		# A VM that has not started the script within $NESTED_BOOT_TIMEOUT s (default 300); a VM whose
		# heartbeat has not changed for $NESTED_FREEZE_TIMEOUT s (default 180) while the script ran: the
		# whole emulated machine froze (no console line, so nested-kvm cannot see it), which is reported
		# as such within minutes instead of at the run's timeout. A frozen run is not run again.
		(
			_nw_i=0
			while [ ! -e "$_nr_dir/.nested-started" ] && [ "$_nw_i" -lt "${NESTED_BOOT_TIMEOUT:-300}" ]; do
				sleep 1
				_nw_i=$((_nw_i + 1))
			done </dev/null >/dev/null 2>&1
			if [ ! -e "$_nr_dir/.nested-started" ]; then
				nested_note "$_nr_dir" "the VM did not start the script within ${NESTED_BOOT_TIMEOUT:-300} s (attempt $_nr_attempt): stopping it"
				nested_kill_below "$_nr_pid" TERM
				exit 0
			fi
			_nw_last= _nw_stale=0
			while [ ! -e "$_nr_dir/.nested-rc" ]; do
				sleep 1 </dev/null >/dev/null 2>&1
				_nw_beat=
				[ -f "$_nr_dir/.nested-alive" ] && read -r _nw_beat < "$_nr_dir/.nested-alive" 2>/dev/null
				if [ "$_nw_beat" != "$_nw_last" ]; then
					_nw_last=$_nw_beat _nw_stale=0
				else
					_nw_stale=$((_nw_stale + 1))
				fi
				if [ "$_nw_stale" -ge "${NESTED_FREEZE_TIMEOUT:-180}" ] && [ ! -e "$_nr_dir/.nested-rc" ]; then
					: > "$_nr_dir/.nested-frozen"
					nested_note "$_nr_dir" "the emulated VM froze: no heartbeat from inside for ${NESTED_FREEZE_TIMEOUT:-180} s while the script ran (attempt $_nr_attempt; last step: $(tail -n 1 "$_nr_dir/result.txt" 2>/dev/null | cut -c1-120)): stopping it"
					nested_note "$_nr_dir" "at the freeze: $(nested_emulator_probe "$_nr_pid")"
					nested_kill_below "$_nr_pid" TERM
					exit 0
				fi
			done
		) &
		_nr_dog=$!
		wait "$_nr_pid"
		_nr_rc=$?
		nested_kill_below "$_nr_dog" KILL
		kill -KILL "$_nr_dog" 2>/dev/null
		wait "$_nr_dog" 2>/dev/null
		rm -f "$_nr_dir/.nested-wrapper.sh" "$_nr_dir/.nested-diagnose.sh"
		_nr_why=$(nested_retry_reason "$_nr_dir" "$_nr_rc")
		if [ -n "$_nr_why" ] && [ "$_nr_attempt" -le "$_nr_retries" ]; then
			if [ -e "$_nr_dir/result.txt" ]; then
				mv "$_nr_dir/result.txt" "$_nr_dir/result.attempt$_nr_attempt.txt"
				nested_note "$_nr_dir" "$_nr_why: running once more (attempt $_nr_attempt's partial result: result.attempt$_nr_attempt.txt)"
			else
				nested_note "$_nr_dir" "$_nr_why: running once more"
			fi
			_nr_attempt=$((_nr_attempt + 1))
			continue
		fi
		if [ -n "$_nr_why" ]; then
			nested_note "$_nr_dir" "$_nr_why, in all $_nr_attempt attempts: giving up"
		elif [ "$_nr_rc" = 75 ] && [ "$(cat "$_nr_dir/.nested-rc" 2>/dev/null)" != 75 ]; then
			# The lockup came after the script had ended: its result is complete; its own status counts.
			_nr_rc=$(cat "$_nr_dir/.nested-rc")
			case $_nr_rc in '' | *[!0-9]*) _nr_rc=1 ;; esac
			nested_note "$_nr_dir" "nested-kvm exited 75 (emulator hang) after the script had ended with status $_nr_rc: judged on its result"
		elif [ -e "$_nr_dir/.nested-frozen" ]; then
			nested_note "$_nr_dir" "nested-kvm exited $_nr_rc after the VM froze while the script ran: not run again"
		elif [ "$_nr_rc" = 125 ]; then
			nested_note "$_nr_dir" "nested-kvm exited 125 after the script started (the VM ended without a result: a crash or the ${NESTED_RUN_TIMEOUT:-1200} s timeout): not run again"
		elif [ "$_nr_rc" = 124 ]; then
			nested_note "$_nr_dir" "nested-kvm exited 124 (timeout after ${NESTED_RUN_TIMEOUT:-1200} s): not run again"
		elif [ "$_nr_rc" != 0 ]; then
			nested_note "$_nr_dir" "the run ended with status $_nr_rc: not run again"
		fi
		rm -f "$_nr_dir/.nested-started" "$_nr_dir/.nested-rc" "$_nr_dir/.nested-alive" "$_nr_dir/.nested-frozen"
		return "$_nr_rc"
	done
}

# nested_judge WORKDIR STATUS [EXPECTED]: judges WORKDIR/result.txt by its completion record (see the top),
# STATUS being nested_run's. Prints the run's slowest steps (nested_slowest) and notes, then a FAIL line
# for each thing wrong, or one PASS line.
# Returns 0 when the run passed, 1 otherwise.
nested_judge() {
	_nj_res=$1/result.txt _nj_ok=0
	nested_slowest "$1"
	[ -s "$1/nested-run.txt" ] && cat "$1/nested-run.txt"
	if [ -s "$1/nested-watchdog.txt" ]; then
		echo "nested-kvm: the run neared its timeout; what the VM was doing 60 s before it:"
		head -n 120 "$1/nested-watchdog.txt"
	fi
	if [ "$2" != 0 ]; then
		echo "FAIL: the nested run ended with status $2"
		_nj_ok=1
	fi
	if [ ! -f "$_nj_res" ]; then
		echo "FAIL: no result.txt from inside nested-kvm"
		return 1
	fi
	_nj_pass=$(grep -c '^PASS' "$_nj_res")
	_nj_fail=$(grep -c '^FAIL' "$_nj_res")
	_nj_records=$(grep -c '^DONE' "$_nj_res")
	_nj_n=$(tail -n 1 "$_nj_res" | sed -n 's/^DONE checks=\([0-9][0-9]*\)\( .*\)\{0,1\}$/\1/p')
	_nj_want=${3:-$_nj_pass}
	if [ -z "$_nj_n" ] || [ "$_nj_records" != 1 ]; then
		echo "FAIL: no completion record (a last line 'DONE checks=N'; $_nj_records DONE lines): the script did not finish"
		return 1
	fi
	if [ "$_nj_n" -eq 0 ]; then
		echo "FAIL: the completion record says no check ran"
		_nj_ok=1
	fi
	if [ "$_nj_n" != "$_nj_want" ]; then
		echo "FAIL: the script ran $_nj_n checks, $_nj_want expected"
		_nj_ok=1
	fi
	if [ "$_nj_pass" -gt 0 ] && [ "$_nj_n" != "$_nj_pass" ]; then
		echo "FAIL: the script ran $_nj_n checks but $_nj_pass passed and $_nj_fail failed"
		_nj_ok=1
	fi
	if [ "$_nj_fail" -gt 0 ]; then
		echo "FAIL: $_nj_fail of $_nj_n checks failed"
		_nj_ok=1
	fi
	[ "$_nj_ok" = 0 ] && echo "PASS: the run completed its $_nj_n checks"
	return "$_nj_ok"
}

# nested_steps WORKDIR: the run's steps from WORKDIR/timeline.txt (the watchdog's "SECONDS LINES"
# entries), one "SECONDS LINE" each, in order: the seconds of the VM's time from the previous entry until
# the next result line appeared (2 s resolution; the first counts from the script's start, so it holds its
# set-up). Nothing without a timeline.
nested_steps() {
	[ -s "$1/timeline.txt" ] && [ -f "$1/result.txt" ] || return 0
	awk 'NR == FNR { t[NR] = $1; n[NR] = $2; k = NR; next } { line[FNR] = $0 }
	END {
		p = 0; pl = 0
		for (i = 1; i <= k; i++) {
			if (n[i] > pl && (pl + 1) in line) printf "%d %s\n", t[i] - p, line[pl + 1]
			p = t[i]; pl = n[i]
		}
	}' "$1/timeline.txt" "$1/result.txt"
}

# nested_ran WORKDIR: the seconds the script ran inside nested-kvm (the timeline's last entry).
nested_ran() {
	tail -n 1 "$1/timeline.txt" 2>/dev/null | cut -d' ' -f1
}

# nested_slowest WORKDIR [N]: the N (default 5) slowest steps of the run (nested_steps), then the script's
# whole time. Where a nested test spends its minutes, for the suite's time budget.
nested_slowest() {
	[ -s "$1/timeline.txt" ] && [ -f "$1/result.txt" ] || return 0
	echo "the slowest steps inside nested-kvm (seconds until the line appeared):"
	nested_steps "$1" | sort -rn | head -n "${2:-5}" | while read -r _ns_s _ns_line; do
		printf '%6d s  %s\n' "$_ns_s" "$(printf '%s' "$_ns_line" | cut -c1-110)"
	done
	echo "  the script ran $(nested_ran "$1") s inside nested-kvm"
}

# nested_report WORKDIR STATUS [EXPECTED]: prints WORKDIR/result.txt and judges it (nested_judge); exits 0
# when the run passed, else 1 (then with the end of WORKDIR/nested.log).
nested_report() {
	[ -f "$1/result.txt" ] && cat "$1/result.txt"
	if nested_judge "$1" "${2:?nested_report WORKDIR STATUS: give the status nested_run returned}" ${3:+"$3"}; then
		exit 0
	fi
	tail -n 40 "$1/nested.log" 2>/dev/null
	nested_recap "$1"
	exit 1
}

# nested_recap WORKDIR: the failed checks of WORKDIR/result.txt once more, last, after the console's end, so
# that a report that keeps only the end of a long output still says what failed.
nested_recap() {
	echo "what failed inside (again, after the console):"
	grep -e '^FAIL' -e '^ESCAPED' "$1/result.txt" 2>/dev/null | head -n 20
	[ -s "$1/result.txt" ] || echo "  (no result.txt)"
	tail -n 1 "$1/result.txt" 2>/dev/null | grep -q '^DONE' || echo "  (the script did not finish: no completion record)"
}
