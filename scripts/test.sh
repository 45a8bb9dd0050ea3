#!/bin/bash
# Builds libspace with warnings as errors and runs every test suite, then an ASan/UBSan build of the
# library and its parsers (unit and fuzz-smoke suites). Tests that need root, btrfs, namespaces or KVM
# skip themselves (with the reason) where those are missing. Before the summary, each suite's wall time
# ("suite unit: 12 s", from meson's per-test start and duration) and the total; past the budget
# ($SPACE_TEST_BUDGET_S, default 3600 s) the suites that grew beyond their typical time are named. The last
# line is the summary:
#   N passed, N failed, N skipped
# usage: ./scripts/test.sh [meson test args...]    (e.g. --suite unit)
set -u
cd "$(dirname "$0")/.."
src=$PWD
passed=0 failed=0 skipped=0
started=$SECONDS
times=$(mktemp) # "LABEL SECONDS" lines: each suite's wall time, and each meson test run's
since=$(mktemp) # made now, never written again: what a run of this invocation wrote is newer
trap 'rm -f "$times" "$since"' EXIT
# Typical wall seconds per suite on the 2-core development machine (measured 2026-12-03 unless marked
# "estimate"). Only for naming what grew when the total is over the budget; update them as suites change.
typical=(
	"unit 5" "integration 270" "escape 100" "fuzz-smoke 40" "guests 60"
	"python 50"                                         # tests/python: pytest, 200 create/destroy cycles
	"packaging 150"                                     # tests/packaging: build the .debs, mmdebstrap, apt, chroot
	"api 530"                                           # estimate: tests/api, tests/harness (killpoints ~70 s, faultwalk ~25 s,
	                                                    # soak: 3 minutes of load + set-up, ~200 s)
	"bench 140"                                         # fleet-short (bench/fleet --short): 87-136 s
	"nested 1000"                                       # 2026-12-06: 11 tests, 750-900 s without a hang
	"asan:unit 15" "asan:fuzz-smoke 60" "asan:sanitize 200" # estimates
	"builds-and-release 600"                            # estimate: everything outside meson test
)

# suite_times DIR LABEL-PREFIX MESON-TEST-ARGS...: appends each suite's wall time in DIR's last run to
# $times: the union of its tests' [start, start + duration] (tests run in parallel). A test in several
# suites counts for the first one selected with --suite, else its first.
suite_times() {
	local log=$1/meson-logs/test-sh.json prefix=$2 wanted=()
	shift 2
	while [ $# -gt 0 ]; do
		case $1 in
		--suite) [ $# -gt 1 ] && wanted+=("$2"); shift ;;
		--suite=*) wanted+=("${1#--suite=}") ;;
		esac
		shift
	done
	[ -f "$log" ] || { echo "test.sh: no per-test durations in $log" >&2; return 0; }
	python3 - "$log" "$prefix" "${wanted[@]}" >>"$times" <<'EOF'
import json, re, sys
path, prefix, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
spans = {}
for line in open(path):
    t = json.loads(line)
    m = re.match(r'^[^:]*:(\S+) / ', t['name'])
    suites = m.group(1).split('+') if m else ['other']
    picked = [s for s in suites if s in wanted] or suites
    spans.setdefault(picked[0], []).append((t['starttime'], t['starttime'] + t['duration']))
for suite, iv in sorted(spans.items()):
    iv.sort()
    total, start, end = 0.0, None, None
    for a, b in iv:
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    total += end - start
    print("%s%s %d" % (prefix, suite, round(total)))
EOF
}

run_suite() { # build-dir, meson-test-args...
	local dir=$1; shift
	local log t0=$SECONDS prefix=
	[ "$dir" = build-test ] || prefix=${dir#build-}:
	log=$(mktemp)
	rm -f "$dir/meson-logs/test-sh.json"
	meson test -C "$dir" --print-errorlogs --num-processes 2 --logbase test-sh "$@" 2>&1 | tee "$log"
	echo "meson-test:$dir $((SECONDS - t0))" >>"$times"
	suite_times "$dir" "$prefix" "$@"
	local ok fail skip to xf up
	ok=$(sed -n 's/^Ok:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
	fail=$(sed -n 's/^Fail:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
	skip=$(sed -n 's/^Skipped:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
	to=$(sed -n 's/^Timeout:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
	xf=$(sed -n 's/^Expected Fail:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
	up=$(sed -n 's/^Unexpected Pass:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
	if [ -z "$ok" ]; then
		echo "test.sh: meson test in $dir did not report results" >&2
		failed=$((failed + 1))
	fi
	passed=$((passed + ${ok:-0} + ${xf:-0}))
	failed=$((failed + ${fail:-0} + ${to:-0} + ${up:-0}))
	skipped=$((skipped + ${skip:-0}))
	rm -f "$log"
}

# nested_step_lines DIR: one line per nested test run in this invocation: its script's time inside
# nested-kvm and its slowest step, from the timeline each run leaves (tests/nested/nested-judge.sh).
nested_step_lines() (
	nested_tool=none # the judge's functions alone: nothing here runs nested-kvm
	. "$src/tests/nested/nested-judge.sh"
	for d in "$1"/nested-*/; do
		d=${d%/}
		[ -s "$d/timeline.txt" ] && [ -f "$d/result.txt" ] && [ "$d/timeline.txt" -nt "$since" ] || continue
		read -r secs what < <(nested_steps "$d" | sort -rn | head -n 1)
		echo "nested ${d##*/}: $(nested_ran "$d") s inside nested-kvm; slowest step ${secs:-0} s: ${what:0:100}"
	done
)

build() { # dir, meson-setup-args...
	local dir=$1; shift
	if [ ! -d "$dir/meson-private" ]; then
		meson setup "$dir" "$@" >/dev/null || return 1
	else
		meson configure "$dir" "$@" >/dev/null || return 1
	fi
	meson compile -C "$dir" || return 1
}

# Debian's kernel as nested-kvm caches it, fetched before the first suite: vmboot_image and
# kernel-template (unit, integration) boot or package that kernel and skip without it, and on a new machine
# only the nested suite, which runs last, would fetch it. One short VM boot; the nested suite's runs reuse it.
prime_nested_kernel() {
	local tool=${NESTED_KVM:-$src/../shared/tools/nested-kvm}
	[ -x "$tool" ] && [ ! -f "${NESTED_KVM_CACHE:-/var/cache/nested-kvm}/ready" ] || return 0
	"$tool" --timeout 600 -- true >/dev/null 2>&1 ||
		echo "test.sh: nested-kvm could not cache its kernel; the tests that need it skip" >&2
}

# Test builds have the test switches (meson_options.txt: test_switches); release builds never do.
if build build-test -Dwerror=true -Dtest_switches=true; then
	if [ $# -eq 0 ]; then
		prime_nested_kernel
		run_suite build-test --no-suite nested
		# One emulator at a time: each nested-kvm VM is a software-emulated machine that takes a whole
		# core, and two of them side by side (with nothing else left for the host) hit their own timeouts.
		run_suite build-test --suite nested --num-processes 1
		nested_step_lines build-test
	else
		run_suite build-test "$@"
	fi
else
	echo "test.sh: build failed" >&2
	failed=$((failed + 1))
fi

# Sanitizers: the library, the VMM's parsers, the fuzz targets' replay of their corpora, and the CLI's
# lifecycle tests (suite sanitize). The static agent cannot be sanitized; those tests use build-test's.
if [ $# -eq 0 ]; then
	if build build-asan -Dwerror=true -Dtest_switches=true -Db_sanitize=address,undefined -Db_lundef=false -Dagent=false -Dguests=false; then
		SPACE_AGENT_PATH="$src/build-test/src/agent/space-agent" run_suite build-asan --suite unit --suite fuzz-smoke --suite sanitize
	else
		echo "test.sh: sanitizer build failed" >&2
		failed=$((failed + 1))
	fi
	# A release build (setup.sh's options, no test switches), installed into a scratch root: nothing that
	# ships may carry or obey a test switch.
	if tests/release/check.sh build-release build-test; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
fi

# Wall times: each suite, then the total; past the budget, what grew.
total=$((SECONDS - started))
in_meson=0
while read -r label secs; do
	case $label in
	meson-test:*) in_meson=$((in_meson + secs)) ;;
	*) echo "suite $label: $secs s" ;;
	esac
done <"$times"
echo "suite builds-and-release: $((total - in_meson)) s (builds, the release check: outside meson test)"
echo "builds-and-release $((total - in_meson))" >>"$times"
budget=${SPACE_TEST_BUDGET_S:-3600}
echo "total: $total s (budget $budget s)"
if [ "$total" -gt "$budget" ]; then
	grown=
	for entry in "${typical[@]}"; do
		read -r name usual <<<"$entry"
		secs=$(awk -v l="$name" '$1 == l { print $2 }' "$times" | tail -n 1)
		# beyond a quarter more than typical, and by more than 10 s
		[ -n "$secs" ] && [ "$secs" -gt $((usual * 5 / 4)) ] && [ "$secs" -gt $((usual + 10)) ] &&
			grown="$grown $name ($secs s, typical $usual s);"
	done
	echo "test.sh: the run took $total s, over the budget of $budget s (SPACE_TEST_BUDGET_S); grew beyond their typical time:${grown:- none (a slower or busier machine?)}"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
