#!/bin/bash
# The E2B code interpreter against `space serve`: the real `@e2b/code-interpreter` package from npm, its
# default template code-interpreter-v1 (scripts/make-templates.sh: Debian's python3, numpy, pandas and
# matplotlib, and our kernel as the template's start command on port 49999), reached through the
# E2b-Sandbox-Id/E2b-Sandbox-Port routing: code_interpreter_sdk.mjs (state, results, charts, DataFrames,
# errors, contexts, languages, envs, timeouts; then servers started by code inside: a Python http.server
# reached by header routing and by Host routing through getHost, and a WebSocket echo) and the shipped
# examples/code_interpreter.mjs.
# Jail isolation. The Debian tree is cached in $SPACE_CACHE (default /var/cache/space), the SDK in
# /var/cache/space/npm.
SERVE_POOL_SIZE=8G
. "$(dirname "$0")/e2b_lib.sh"
command -v mmdebstrap >/dev/null || skip "mmdebstrap missing"
need_sdk 'e2b@2' '@e2b/code-interpreter@2'
echo "@e2b/code-interpreter $(cd "$SDK" && node -p 'require("@e2b/code-interpreter/package.json").version')"

t0=$(date +%s)
if ! SPACE="$SPACE" SPACE_STATE_DIR="$STATE" SPACE_KERNEL_PY="$SPACE_SOURCE_DIR/share/code-interpreter/space_kernel.py" \
	"$SPACE_SOURCE_DIR/scripts/make-templates.sh" code-interpreter-v1 >"$WORK/make-templates.log" 2>&1; then
	if grep -qiE 'could not resolve|failed to fetch|unable to connect|network is unreachable' "$WORK/make-templates.log"; then
		skip "Debian's archive is not reachable to build code-interpreter-v1"
	fi
	cat "$WORK/make-templates.log" >&2
	fail "building the code-interpreter-v1 template failed"
fi
echo "template code-interpreter-v1 ready in $(( $(date +%s) - t0 )) s"
expect_rc 0 "$SPACE" template ls --json --state "$STATE"
grep -qE '"wait_port":[[:space:]]*49999' <<<"$out" || fail "code-interpreter-v1 has no start command on port 49999: $out"

# --domain: getHost(port) answers PORT-ID.DOMAIN, which the server routes by Host.
export SPACE_TEST_DOMAIN=sandbox.test
start_server --domain "$SPACE_TEST_DOMAIN"
for name in code_interpreter_sdk code_interpreter; do
	run_sdk "$name" 600
done
grep -qE '^code_interpreter_sdk: [0-9]+ checks passed$' "$WORK/code_interpreter_sdk.out" ||
	fail "code_interpreter_sdk.mjs did not finish: $(tail -5 "$WORK/code_interpreter_sdk.out")"
grep -q '^x + 1 = 2$' "$WORK/code_interpreter.out" || fail "the example printed: $(cat "$WORK/code_interpreter.out")"
e2b_stop
echo "PASS: code interpreter"
