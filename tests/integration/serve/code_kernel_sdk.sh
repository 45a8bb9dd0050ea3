#!/bin/bash
# The real @e2b/code-interpreter JS SDK against share/code-interpreter/space_kernel.py on a loopback port (no
# sandbox, no root): runCode with streaming callbacks, errors, envs, display, contexts, an execution timeout
# that interrupts the code, a crash, charts and DataFrames when the Python has matplotlib and pandas; directly
# and through an HTTP/1.0 relay like `space serve`'s (code_kernel_sdk.mjs).
set -u
command -v node >/dev/null || { echo "SKIP: node missing"; exit 77; }
PY=${PYTHON:-$(command -v python3)} || { echo "SKIP: python3 missing"; exit 77; }
SDK=${SPACE_E2B_SDK_DIR:-/var/cache/space/npm/sdk}
if ! (cd "$SDK" 2>/dev/null && node -e 'require("@e2b/code-interpreter")' 2>/dev/null); then
	command -v npm >/dev/null || { echo "SKIP: npm missing"; exit 77; }
	mkdir -p "$SDK" || { echo "SKIP: cannot create $SDK"; exit 77; }
	[ -f "$SDK/package.json" ] || echo '{"name":"space-e2b-sdk-cache","private":true}' >"$SDK/package.json"
	(cd "$SDK" && timeout 300 npm install --no-audit --no-fund --cache /var/cache/space/npm/cache \
		'@e2b/code-interpreter@2') >/dev/null 2>&1 ||
		{ echo "SKIP: cannot install @e2b/code-interpreter with npm (registry unreachable?)"; exit 77; }
fi
here=$(cd "$(dirname "$0")" && pwd)
src=${SPACE_SOURCE_DIR:-$here/../../..}
script="$SDK/space-code-kernel-sdk-$$.mjs"   # next to node_modules, to import the SDK
cp "$here/code_kernel_sdk.mjs" "$script" || exit 1
trap 'rm -f "$script"' EXIT
echo "@e2b/code-interpreter $(cd "$SDK" && node -p 'require("@e2b/code-interpreter/package.json").version'), $PY"
PYTHON=$PY SPACE_KERNEL_SCRIPT="$src/share/code-interpreter/space_kernel.py" timeout 300 node "$script"
