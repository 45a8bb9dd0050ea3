#!/bin/bash
# `space serve`, E2B plane, on the wire (no SDK needed): see e2b_protocol.py. The server must then stop
# cleanly (exit 0: no leak reports in sanitizer builds).
. "$(dirname "$0")/e2b_lib.sh"
start_server
python3 "$(dirname "$0")/e2b_protocol.py" || fail "E2B protocol checks failed ($(e2b_log))"
e2b_stop
echo "PASS"
