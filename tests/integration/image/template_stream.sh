#!/bin/bash
# space template send / receive between two hosts (two state directories, each its own loop pool): a
# template sent whole and received gives the same tree, image defaults and set-id bits; a template built
# from it, sent against it, is a fraction of the whole and gives the same tree too; a stream against a
# parent the receiver lacks, a taken name, a header whose digest is not the tree's, and hostile btrfs
# streams (names leaving the tree, writes through symlinks, device nodes, sockets, foreign clones, owners
# out of range, too much data, bad checksums, cut or padded streams) are refused with their reason, and
# leave no template, no quarantine subvolume and nothing outside.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 3G
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v python3 >/dev/null || skip "python3 missing"
A=$STATE
make_state 2G
B=$STATE
SA=(--state "$A") SB=(--state "$B")
checks=0
ok() { checks=$((checks + 1)); }
MK=(python3 "$(dirname "$0")/mkimage.py")
STREAM=(python3 "$(dirname "$0")/mkstream.py")
# What a sandbox of template $2 on state $1 sees of its disk, one line per entry.
tree_of() {
	"$SPACE" run --state "$1" --isolation jail --template "$2" --user 0 -- sh -c '
		cd / && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp -o -path ./run \
			-o -path ./lost+found \) -prune -o -print | sort | while read -r f; do
			l=$(stat -c "%n %F %a %u %g %h" "$f")
			if [ -L "$f" ]; then l="$l -> $(readlink "$f")"
			elif [ -f "$f" ]; then l="$l $(stat -c %s "$f") $(md5sum < "$f" | cut -c1-32)"; fi
			echo "$l"
		done'
}
json_field() { python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print("null" if v is None else v)' "$1"; }
nothing_left() { # nothing_left WHAT: no quarantine under B's pool, no template evil-*
	local q
	q=$(ls -A "$B/pool/.tmp" 2>/dev/null)
	[ -z "$q" ] || fail "$1: left in $B/pool/.tmp: $q"
	"$SPACE" template ls "${SB[@]}" | grep -q '^evil' && fail "$1: a template was made"
	return 0
}

# ---- whole ----
"${MK[@]}" three-layer "$WORK/oci" >/dev/null
expect_rc 0 "$SPACE" template import orig --image "$WORK/oci" "${SA[@]}"
expect_rc 0 "$SPACE" template send orig -o "$WORK/orig.s" --json "${SA[@]}"
[ "$(json_field parent <<<"$out")" = null ] || fail "a whole send names a parent: $out"; ok
head -c 24 "$WORK/orig.s" | grep -q '^space-template-stream 1 ' || fail "the stream's header: $(head -c 40 "$WORK/orig.s" | od -c | head -2)"; ok
expect_rc 0 "$SPACE" template receive -i "$WORK/orig.s" --json "${SB[@]}"
[ "$(json_field name <<<"$out")" = orig ] && [ "$(json_field parent <<<"$out")" = null ] ||
	fail "receive: $out"; ok
tree_of "$A" orig >"$WORK/a.tree" && tree_of "$B" orig >"$WORK/b.tree" || fail "trees of orig"
[ "$(wc -l <"$WORK/a.tree")" -gt 100 ] || fail "tree of orig is too short"
diff "$WORK/a.tree" "$WORK/b.tree" >"$WORK/diff" || fail "orig received differs: $(head -20 "$WORK/diff")"; ok
grep -q '^./usr/bin/su-like regular file 4755 0 0 1 ' "$WORK/b.tree" || fail "set-uid file: $(grep su-like "$WORK/b.tree")"; ok
out=$("$SPACE" run "${SB[@]}" --isolation jail --template orig -- sh -c 'id -u; pwd; echo $GREETING') ||
	fail "orig on B: $out"
[ "$out" = "$(printf '1000\n/work\nhello from env')" ] || fail "the image defaults did not travel: $out"; ok

# ---- against a parent ----
mkdir -p "$WORK/ctx"
printf 'FROM orig\nUSER 0\nRUN echo child > /etc/child-note && head -c 300000 /dev/urandom > /big\n' >"$WORK/ctx/Dockerfile"
expect_rc 0 "$SPACE" template build child "$WORK/ctx" --isolation jail "${SA[@]}"
expect_rc 0 "$SPACE" template send child -o "$WORK/child-whole.s" "${SA[@]}"
expect_rc 0 "$SPACE" template send child --parent orig -o "$WORK/child.s" --json "${SA[@]}"
[ "$(json_field parent <<<"$out")" = orig ] || fail "send --parent: $out"; ok
whole=$(stat -c %s "$WORK/child-whole.s") inc=$(stat -c %s "$WORK/child.s")
[ "$inc" -lt $((whole / 3)) ] || fail "the incremental stream is $inc bytes, the whole one $whole"; ok
echo "child: whole $whole bytes, against orig $inc bytes"
expect_rc 0 "$SPACE" template receive -i "$WORK/child.s" --json "${SB[@]}"
[ "$(json_field parent <<<"$out")" = orig ] || fail "receive against orig: $out"; ok
tree_of "$A" child >"$WORK/ca.tree" && tree_of "$B" child >"$WORK/cb.tree" || fail "trees of child"
diff "$WORK/ca.tree" "$WORK/cb.tree" >"$WORK/diff" || fail "child received differs: $(head -20 "$WORK/diff")"; ok
grep -q '^./big regular file 644 0 0 1 300000 ' "$WORK/cb.tree" || fail "child's /big: $(grep big "$WORK/cb.tree")"; ok
# The received template keeps its id: B can send child on against orig, and A (which has both) takes it.
expect_rc 0 "$SPACE" template send child --parent orig -o "$WORK/child-back.s" "${SB[@]}"
expect_rc 0 "$SPACE" template receive child-back -i "$WORK/child-back.s" --json "${SA[@]}"
[ "$(json_field parent <<<"$out")" = orig ] || fail "A receiving B's child: $out"; ok
expect_rc 0 "$SPACE" template rm child-back "${SA[@]}"

# ---- refused ----
expect_rc 1 "$SPACE" template receive -i "$WORK/orig.s" "${SB[@]}"
grep -q "already exists" <<<"$err" || fail "a taken name: $err"; ok
expect_rc 0 "$SPACE" template rm child "${SB[@]}"
expect_rc 0 "$SPACE" template rm orig "${SB[@]}"
expect_rc 1 "$SPACE" template receive -i "$WORK/child.s" "${SB[@]}"
grep -q "which this host does not have: send child whole" <<<"$err" || fail "no parent here: $err"; ok
nothing_left "no parent"
expect_rc 1 "$SPACE" template send nosuch -o "$WORK/nosuch.s" "${SA[@]}"
[ ! -e "$WORK/nosuch.s" ] && [ ! -e "$WORK/nosuch.s.partial" ] || fail "a failed send left a file"; ok
expect_rc 1 "$SPACE" template send child --parent child -o "$WORK/self.s" "${SA[@]}"; ok
expect_rc 1 "$SPACE" template receive -i /dev/null "${SB[@]}"
grep -q "the stream is empty" <<<"$err" || fail "an empty stream: $err"; ok
echo precious >"$WORK/victim"
: >"$WORK/evil.s"
before=$(ls -A "$WORK" | sort)
refused() { # refused KIND WHAT-THE-ERROR-SAYS
	"${STREAM[@]}" "$1" "$WORK/evil.s" "$WORK/victim" || fail "mkstream $1"
	expect_rc 1 "$SPACE" template receive -i "$WORK/evil.s" --max-bytes 1M "${SB[@]}"
	grep -qF -- "$2" <<<"$err" || fail "hostile stream $1: wanted '$2', got: $err"
	nothing_left "hostile stream $1"
	ok
}
refused dotdot "the name '../escape' leaves the tree"
refused abs "the name '/etc/escape' leaves the tree"
refused symlink "open l to write: Too many levels of symbolic links"
refused symdir "create d/planted: No such file or directory"
refused device "a device node in the stream"
refused socket "a socket in the stream"
refused clone "from a subvolume that is neither this one nor its parent"
refused owner "templates hold ids 0-65535 only"
refused big "more than 1048576 bytes of data"
refused badcrc "checksum"
refused cut "the stream ends without its end command"
refused trailing "bytes after the stream's end command"
refused twosubvol "a second subvol command"
refused header "the stream's header is not a JSON object"
refused digest "the template received differs from the one sent"
refused incremental "an incremental stream where a full one was announced"
[ "$(cat "$WORK/victim")" = precious ] || fail "the victim file changed"; ok
[ "$(ls -A "$WORK" | sort)" = "$before" ] || fail "something appeared beside the victim: $(ls -A "$WORK")"; ok
[ ! -e "$B/escape" ] && [ ! -e "$B/pool/escape" ] && [ ! -e /etc/escape ] || fail "a name left the tree"; ok

expect_rc 0 "$SPACE" ls --json "${SA[@]}"
[ "$out" = "[]" ] || fail "sandboxes left on A: $out"
echo "template send and receive: $checks checks, 0 failed"
