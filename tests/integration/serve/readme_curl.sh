#!/bin/bash
# The native API's curl examples in README.md and docs/api.md work as written (see readme_curl.py). They
# use the stock `base` template (python3), built with mmdebstrap (cached in $SPACE_CACHE), and jail
# isolation as the state directory's default (a weaker boundary than a VM).
. "$(dirname "$0")/serve_lib.sh"
command -v curl >/dev/null || skip "curl missing"
command -v mmdebstrap >/dev/null || skip "mmdebstrap missing (needed for the base template)"
expect_rc 0 "$SPACE" init --isolation jail --state "$STATE"
if ! SPACE="$SPACE" SPACE_STATE_DIR="$STATE" "$SPACE_SOURCE_DIR/scripts/make-templates.sh" base \
	>"$WORK/make-templates.log" 2>&1; then
	if grep -qiE 'could not resolve|failed to fetch|unable to connect|network is unreachable' "$WORK/make-templates.log"; then
		skip "Debian's archive is not reachable to build the base template"
	fi
	fail "building the base template failed: $(tail -5 "$WORK/make-templates.log")"
fi
start_server
mkdir "$WORK/cwd"
(cd "$WORK/cwd" && python3 "$SPACE_SOURCE_DIR/tests/integration/serve/readme_curl.py" \
	"$SPACE_SOURCE_DIR/README.md" "$SPACE_SOURCE_DIR/docs/api.md") || fail "README/api.md curl examples failed"
stop_server
echo "PASS"
