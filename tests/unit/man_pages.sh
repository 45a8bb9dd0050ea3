#!/bin/bash
# space(1) says what the CLI's help says: every command `space --help` lists has its section in the page, and
# every option `space COMMAND --help` names is in that section (and the global options in OPTIONS). The page
# and libspace(3) render without groff warnings. Usage: man_pages.sh SPACE.1 LIBSPACE.3
. "$(dirname "$0")/../lib.sh"
page=${1:?space.1} lib3=${2:?libspace.3}
[ -s "$page" ] || fail "space.1 not built ($page)"
checks=0
check() { checks=$((checks + 1)); }

# Rendering: groff's own warnings (-ww) about either page fail; man -l renders it when man is there.
for p in "$page" "$lib3"; do
	check
	w=$(groff -man -ww -z "$p" 2>&1) || fail "groff failed on $p: $w"
	[ -z "$w" ] || fail "groff warns about $p: $w"
done
if command -v man >/dev/null; then
	check
	MANWIDTH=100 man -l "$page" 2>/dev/null | grep -q '^COMMANDS' || fail "man -l $page does not render COMMANDS"
fi

# The page's text with roff's escapes undone: \- is -, \e is \, \& is nothing.
text=$(sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\&//g' "$page")
for s in NAME SYNOPSIS DESCRIPTION OPTIONS COMMANDS 'THE SERVER' 'JSON OUTPUT' 'EXIT STATUS' ENVIRONMENT FILES \
	EXAMPLES 'SEE ALSO'; do
	check
	grep -qx "\.SH $s" <<<"$text" || fail "space.1 has no $s section"
done
grep -q '@GENERATED@\|@VERSION@' <<<"$text" && fail "space.1 still holds a placeholder"

# The options a help text names: --long and -x words (not a lone "-", nor words inside other words).
options_of() { grep -oE '(^|[][ (|,`])--?[a-zA-Z][a-zA-Z0-9-]*' | sed -E 's/^[][ (|,`]//' | sort -u; }

# Global options: in OPTIONS, as `space --help` lists them.
opts_section=$(sed -n '/^\.SH OPTIONS$/,/^\.SH /p' <<<"$text")
gl=$("$SPACE" --help | sed -n '/^global options/,/^$/p' | options_of)
[ -n "$gl" ] || fail "no global options in space --help"
for o in $gl; do
	check
	grep -qe "$o" <<<"$opts_section" || fail "global option $o is missing from space.1's OPTIONS"
done

cmds=$("$SPACE" --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 { print $1 }')
[ "$(wc -w <<<"$cmds")" -ge 20 ] || fail "space --help lists too few commands: $cmds"
for c in $cmds; do
	check
	grep -qx "\.SS space $c" <<<"$text" || fail "command $c is missing from space.1"
	# Its section: from its .SS to the next .SS or .SH.
	section=$(awk -v h=".SS space $c" '$0 == h { on = 1; next } on && /^\.S[SH] / { exit } on' <<<"$text")
	help=$("$SPACE" "$c" --help) || fail "space $c --help failed"
	check
	grep -qF "$(head -1 <<<"$help" | sed 's/^usage: //')" <<<"$section" || fail "space.1's $c section lacks its usage line"
	for o in $(options_of <<<"$help"); do
		check
		grep -qe "$o" <<<"$section" || fail "option $o of space $c --help is missing from space.1's $c section"
	done
	# And every line of the help (usage, summary, text) is in the page, word for word.
	while IFS= read -r line; do
		line=$(sed -E 's/^usage: //; s/^ +//; s/ +$//; s/\.$//' <<<"$line")
		[ -n "$line" ] || continue
		check
		grep -qF -- "$line" <<<"$section" || fail "space $c --help line not in space.1: $line"
	done <<<"$help"
done
echo "man-pages: $checks checks, 0 failed"
