#!/bin/bash
# `space serve` downloads out of a sandbox are capped (issue 14, item 3): --max-download on the native
# API and the E2B plane (413 with a JSON error), the default cap, and bounded server memory for a client
# that stops reading. See download_cap.py. The server must stop cleanly each time.
. "$(dirname "$0")/e2b_lib.sh"
start_server --max-download 1M
python3 "$(dirname "$0")/download_cap.py" || fail "download cap checks failed ($(e2b_log))"
e2b_stop
start_server
python3 "$(dirname "$0")/download_cap.py" default || fail "default download cap checks failed ($(e2b_log))"
e2b_stop
echo "PASS"
