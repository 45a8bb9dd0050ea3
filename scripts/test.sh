#!/bin/bash
# Builds libspace with warnings as errors and runs every test suite, then an ASan/UBSan build of the
# library and its parsers (unit and fuzz-smoke suites). Tests that need root, btrfs, namespaces or KVM
# skip themselves (with the reason) where those are missing. The last line is the summary:
#   N passed, N failed, N skipped
# usage: ./scripts/test.sh [meson test args...]    (e.g. --suite unit)
set -u
cd "$(dirname "$0")/.."
src=$PWD
passed=0 failed=0 skipped=0

run_suite() { # build-dir, meson-test-args...
	local dir=$1; shift
	local log
	log=$(mktemp)
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" 2>&1 | tee "$log"
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

build() { # dir, meson-setup-args...
	local dir=$1; shift
	if [ ! -d "$dir/meson-private" ]; then
		meson setup "$dir" "$@" >/dev/null || return 1
	fi
	meson compile -C "$dir" || return 1
}

if build build-test -Dwerror=true; then
	run_suite build-test "$@"
else
	echo "test.sh: build failed" >&2
	failed=$((failed + 1))
fi

# Sanitizers: the library, the VMM's parsers, the fuzz targets' replay of their corpora, and the CLI's
# lifecycle tests (suite sanitize). The static agent cannot be sanitized; those tests use build-test's.
if [ $# -eq 0 ]; then
	if build build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dagent=false -Dguests=false; then
		SPACE_AGENT_PATH="$src/build-test/src/agent/space-agent" run_suite build-asan --suite unit --suite fuzz-smoke --suite sanitize
	else
		echo "test.sh: sanitizer build failed" >&2
		failed=$((failed + 1))
	fi
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
