#!/bin/bash
# The real @e2b/code-interpreter JS SDK against share/code-interpreter/space_kernel.py on a loopback port (no
# sandbox, no root): runCode with streaming callbacks, errors, envs, display, contexts, an execution timeout
# that interrupts the code, a crash, charts and DataFrames when the Python has matplotlib and pandas; directly
# and through an HTTP/1.0 relay like `space serve`'s (code_kernel_sdk.mjs).
. "$(dirname "$0")/../../lib.sh"
PY=${PYTHON:-$(command -v python3)} || skip "python3 missing"
need_sdk '@e2b/code-interpreter@2'
here=$(cd "$(dirname "$0")" && pwd)
src=${SPACE_SOURCE_DIR:-$here/../../..}
script="$SDK/space-code-kernel-sdk-$$.mjs"   # next to node_modules, to import the SDK
cp "$here/code_kernel_sdk.mjs" "$script" || exit 1
on_exit "rm -f '$script'"
echo "@e2b/code-interpreter $(cd "$SDK" && node -p 'require("@e2b/code-interpreter/package.json").version'), $PY"
PYTHON=$PY SPACE_KERNEL_SCRIPT="$src/share/code-interpreter/space_kernel.py" timeout 300 node "$script"
