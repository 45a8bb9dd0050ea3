#!/bin/bash
# docs/openapi.json matches the server: every documented operation answers its documented success
# status when called with the document's examples, and every route of the server is documented.
. "$(dirname "$0")/serve_lib.sh"
start_server
python3 "$(dirname "$0")/serve_openapi.py" "$SPACE_SOURCE_DIR/docs/openapi.json" "$SPACE_SOURCE_DIR/cli/serve_v1.c" ||
	fail "OpenAPI walk failed"
stop_server
echo "PASS"
