#!/bin/bash
# Issue 15, step 1: no isolation branching in src/core outside the back-end choice. The lifecycle reaches a
# sandbox's isolation only through its back-end's ops table (src/core/backend.h); only the back-end files
# (backend*.[ch], vm_backend.[ch]) may name an isolation, a back-end kind or a back-end's private calls.
# Comments are stripped first (the compiler's own preprocessor, no macro expansion), so prose may say
# "vm" and "jail"; report keys (doctor's JSON) are not comparisons and do not match.
#   core_no_iso_branching.sh [SRC_CORE_DIR]   (default: src/core next to this test)
# Ends with "no-iso-branching: N files checked".
set -u
dir=${1:-$(cd "$(dirname "$0")/../../src/core" && pwd)}
cc=${CC:-cc}
command -v "$cc" >/dev/null || cc=gcc
[ -d "$dir" ] || { echo "FAIL: no directory $dir" >&2; exit 1; }

# One pattern per kind of branching (extended regexps, matched per statement: lines joined, split at ';').
patterns=(
	'(^|[^A-Za-z0-9_])(row_)?is_(vm|jail)[[:space:]]*\('                  # the old helpers
	'str(n)?(case)?cmp[[:space:]]*\([^()]*"(vm|jail)"'                     # a name compared
	'str(n)?(case)?cmp[[:space:]]*\([^()]*isolation'                       # an isolation field compared
	'isolation(\[[^]]*\])?[[:space:]]*(==|!=)'
	'(==|!=)[[:space:]]*BACKEND_(VM|JAIL)|BACKEND_(VM|JAIL)[[:space:]]*(==|!=)|case[[:space:]]+BACKEND_'
	'->kind[[:space:]]*(==|!=)|\.kind[[:space:]]*(==|!=)'                 # a back-end's kind compared
	'struct[[:space:]]+jail_info|(^|[^A-Za-z0-9_])jail_(start|kill|freeze|alive)[[:space:]]*\(' # jail internals
	'#[[:space:]]*include[[:space:]]*"jail/'
	'vm_backend_(start|kill|pause|refresh_identity|available|agent_addr|snapshot|death_reason)[[:space:]]*\('
)

bad=0 n=0
for f in "$dir"/*.c "$dir"/*.h; do
	[ -e "$f" ] || continue
	case $(basename "$f") in
	backend*.c | backend*.h | vm_backend.c | vm_backend.h) continue ;; # the back-ends themselves
	esac
	n=$((n + 1))
	# -fpreprocessed: comments go, macros and #includes stay as written.
	text=$("$cc" -fpreprocessed -dD -E -P -x c "$f" 2>/dev/null) || { echo "FAIL: cannot strip comments of $f" >&2; exit 1; }
	stmts=$(printf '%s\n' "$text" | tr '\n' ' ' | tr ';' '\n')
	incl=$(printf '%s\n' "$text" | grep -E '^[[:space:]]*#[[:space:]]*include')
	for p in "${patterns[@]}"; do
		hits=$( { printf '%s\n' "$stmts"; printf '%s\n' "$incl"; } | grep -E -- "$p" | sed 's/[[:space:]]\+/ /g' | cut -c1-160)
		if [ -n "$hits" ]; then
			echo "FAIL: isolation branching in $(basename "$f") (pattern $p):" >&2
			printf '    %s\n' "$hits" >&2
			bad=$((bad + 1))
		fi
	done
done
[ "$n" -gt 10 ] || { echo "FAIL: only $n files found in $dir" >&2; exit 1; }
[ "$bad" -eq 0 ] || exit 1
echo "no-iso-branching: $n files checked"
