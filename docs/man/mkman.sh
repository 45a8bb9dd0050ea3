#!/bin/sh
# mkman.sh SPACE IN OUT: space(1) from its prose (IN, docs/man/space.1.in) and the command table of the built
# CLI (`SPACE help --man`), which fills the line @GENERATED@; @VERSION@ becomes the CLI's version.
set -eu
space=$1 in=$2 out=$3
"$space" help --man >"$out.gen"
version=$("$space" version | sed -n 's/^space //p')
[ -n "$version" ] || { echo "mkman.sh: no version from $space" >&2; exit 1; }
grep -qx '@GENERATED@' "$in" || { echo "mkman.sh: no @GENERATED@ line in $in" >&2; exit 1; }
sed -e "s/@VERSION@/$version/" -e "/^@GENERATED@\$/{r $out.gen" -e 'd' -e '}' "$in" >"$out.tmp"
rm -f "$out.gen"
mv "$out.tmp" "$out"
