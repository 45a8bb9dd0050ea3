#!/bin/bash
# The CLI and `space serve` are clients of include/space.h like any other program (issue 15): the `space`
# binary links libspace.so (not the static archive), and every symbol it imports that libspace.so
# defines is a space_* one (its helpers from src/util are its own copy, linked statically). Checked with
# nm on the built binaries, and on the sources: cli/ includes no private header of the library (only
# util/, and the build's config.h).
# Usage: cli_imports.sh LIBSPACE_SO   (the `space` binary from $SPACE_CLI)
. "$(dirname "$0")/../lib.sh"
lib=${1:?usage: cli_imports.sh LIBSPACE_SO}
need_built "$lib" "libspace.so"
for t in nm readelf; do command -v $t >/dev/null || skip "$t missing (binutils)"; done
checks=0
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ -n "$soname" ] || fail "$lib has no SONAME"
readelf -d "$SPACE" | grep -q "Shared library: \[$soname\]" ||
	fail "space does not link $soname (NEEDED: $(readelf -d "$SPACE" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' '))"
ok "space links $soname"

tmp=$(mktemp -d /tmp/space-cli-imports.XXXXXX)
on_exit "rm -rf '$tmp'"
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/lib"
nm -D --undefined-only "$SPACE" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/imports"
comm -12 "$tmp/lib" "$tmp/imports" >"$tmp/from-lib"
[ -s "$tmp/from-lib" ] || fail "space imports nothing from $soname"
bad=$(grep -v '^space_' "$tmp/from-lib" | tr '\n' ' ')
[ -z "$bad" ] || fail "space imports non-public symbols from $soname: $bad"
ok "space imports $(wc -l <"$tmp/from-lib") symbols from $soname, all space_*"

# Not also linked in statically: no symbol libspace.so exports is defined in the binary itself.
nm --defined-only "$SPACE" 2>/dev/null | awk '{print $NF}' | sort -u >"$tmp/defined"
both=$(comm -12 "$tmp/lib" "$tmp/defined" | tr '\n' ' ')
[ -z "$both" ] || fail "space carries its own copy of library symbols: $both"
ok "space defines none of libspace's symbols"

src=${SPACE_SOURCE_DIR:?}/cli
private=$(grep -HnE '^#include "(core|store|net|jail|proto|vmm|devices|agent|snapd|logcap)/' "$src"/*.c "$src"/*.h || true)
[ -z "$private" ] || fail "cli/ includes private headers of the library: $private"
ok "cli/ includes no private header of the library"
echo "done: $checks checks"
[ "$checks" = 4 ] || fail "expected 4 checks, ran $checks"
