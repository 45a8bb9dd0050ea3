#!/bin/bash
# `space serve`, E2B plane, driven by the real E2B JS SDK (npm package `e2b` 2.x) pointed at the server
# with E2B_API_URL / E2B_SANDBOX_URL: create, commands, files, process control, info/list/connect, kill
# (e2b_sdk.mjs); setTimeout both ways, pause, resume through connect (e2b_sdk_lifecycle.mjs); files.watchDir
# and getMetrics (e2b_sdk_watch.mjs); the shipped example examples/e2b_quickstart.mjs; background
# commands, commands.connect, pty.resize, the `user` option and the cap on processes per sandbox
# (e2b_sdk_calls.mjs). The scripts with counted checks print how many passed.
# Jail isolation (a weaker boundary than a VM). The SDK is installed once into /var/cache/space/npm.
. "$(dirname "$0")/e2b_lib.sh"
need_sdk 'e2b@2'
echo "e2b SDK $(cd "$SDK" && node -p 'require("e2b/package.json").version')"
start_server
# Also examples/e2b_quickstart.mjs, the example of moving E2B code over, exactly as shipped.
# e2b_sdk_calls last: it leaves a background process running, which the server's stop must end.
for name in e2b_sdk e2b_sdk_lifecycle e2b_sdk_watch e2b_quickstart e2b_sdk_calls; do
	run_sdk "$name"
done
# The watch scenario counts its checks: all of them ran.
grep -Eq '^e2b_sdk_watch: [0-9]+ checks passed$' "$WORK/e2b_sdk_watch.out" ||
	fail "e2b_sdk_watch did not report its checks"
# Every check of e2b_sdk_calls ran (a script that stopped early would not print the count).
grep -qx "e2b_sdk_calls: 10 checks passed" "$WORK/e2b_sdk_calls.out" || fail "e2b_sdk_calls did not pass all 10 checks"
# The server stops promptly although a process still runs (its runner ends with the server).
start_s=$(date +%s)
e2b_stop
[ $(($(date +%s) - start_s)) -lt 30 ] || fail "the server took more than 30 s to stop"
echo "PASS"
